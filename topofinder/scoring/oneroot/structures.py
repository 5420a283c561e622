"""Broadcast trees and DAGs against the optimum (paper 003 §3–5).

- The best single tree (NP-hard, 003 Thm 1): the heuristic of
  :mod:`topofinder.scoring.oneroot.tree_heuristic`.
- A DAG is a subgraph of the arcs that go forward in some vertex order with the root first;
  on it the LP needs only the single-node cuts (SSBPDAG, 003 §4.1). :func:`best_dag` tries
  every order up to :data:`EXHAUSTIVE_DAG_NODES` nodes (exact best DAG), else a few orders
  (a heuristic lower bound).
- :func:`weighted_trees`: optimal rates split into weighted broadcast trees (003 Thm 5,
  weighted Edmonds), by the batched Bérczi–Frank packing of ForestColl.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import permutations
from math import lcm

import numpy as np
from scipy.sparse.csgraph import breadth_first_order
import scipy.sparse as sp

from topofinder.scoring.trees.forestcoll import BatchedTreePacker
from topofinder.scoring.oneroot.exact_lp import solve_exact, solve_float
from topofinder.scoring.oneroot.platform import Platform
from topofinder.scoring.oneroot.steady import cut_lp
from topofinder.scoring.oneroot.tree_heuristic import best_tree

#: best_dag tries every vertex order up to this many nodes.
EXHAUSTIVE_DAG_NODES = 7


def _order_value(pl: Platform, order) -> float:
    rank = np.empty(pl.n, np.int64)
    rank[list(order)] = np.arange(pl.n)
    live = rank[pl.src] < rank[pl.dst]
    reach = sp.csr_matrix((np.ones(int(live.sum())), (pl.src[live], pl.dst[live])),
                          shape=(pl.n, pl.n))
    if breadth_first_order(reach, pl.root, return_predecessors=False).size < pl.n:
        return 0.0
    return solve_float(cut_lp(pl, live))[2]


def _candidate_orders(pl: Platform, parent: list[int]):
    adj = sp.csr_matrix((np.ones(pl.m), (pl.src, pl.dst)), shape=(pl.n, pl.n))
    yield breadth_first_order(adj, pl.root, return_predecessors=False).tolist()
    tree = sp.csr_matrix((np.ones(pl.n - 1), ([int(pl.src[e]) for e in parent if e >= 0],
                                              [w for w, e in enumerate(parent) if e >= 0])),
                         shape=(pl.n, pl.n))
    yield breadth_first_order(tree, pl.root, return_predecessors=False).tolist()
    yield sp.csgraph.depth_first_order(tree, pl.root, return_predecessors=False).tolist()


def best_dag(pl: Platform, parent: list[int]) -> tuple[Fraction, list[int], bool]:
    """(TP, vertex order, exhaustive?) of the best broadcast DAG found: all orders when
    N ≤ EXHAUSTIVE_DAG_NODES, else BFS orders of G and of the tree ``parent`` and its DFS
    order (a lower bound). The value is exact (solve_exact on the chosen order)."""
    rest = [v for v in range(pl.n) if v != pl.root]
    exhaustive = pl.n <= EXHAUSTIVE_DAG_NODES
    orders = ([[pl.root, *p] for p in permutations(rest)] if exhaustive
              else list(_candidate_orders(pl, parent)))
    best = max(orders, key=lambda o: _order_value(pl, o))
    rank = np.empty(pl.n, np.int64)
    rank[best] = np.arange(pl.n)
    return solve_exact(cut_lp(pl, rank[pl.src] < rank[pl.dst])).value, best, exhaustive


def weighted_trees(pl: Platform, rates, tp: Fraction) -> list[tuple[Fraction, list[int]]]:
    """Broadcast trees with weights λ_l (messages per unit time), Σ λ_l = TP and, on every
    link, Σ_{l ∋ e} λ_l ≤ n_e (003 Thm 5); each tree as its parent-link list."""
    den = lcm(tp.denominator, *(Fraction(r).denominator for r in rates))
    g = np.array([int(Fraction(r) * den) for r in rates], np.int64)
    packer = BatchedTreePacker(pl.n, pl.src.astype(np.int32), pl.dst.astype(np.int32), g, False)
    index = {(int(u), int(w)): e for e, (u, w) in enumerate(zip(pl.src, pl.dst))}
    trees = []
    for b in packer.pack([pl.root], int(tp * den)):
        parent = [-1] * pl.n
        for u, w in b.edges:
            parent[w] = index[(u, w)]
        trees.append((Fraction(b.m, den), parent))
    return trees
