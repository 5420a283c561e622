"""Broadcast trees and DAGs against the optimum (paper 003 §3–5).

- A single tree T at rate r needs, per node u, r·Σ_{children w} c_{u,w} ≤ 1 under ``one``
  (003 eq. (1)); r ≤ C_e on its links and r·(children of u) ≤ B, r ≤ B under ``node``;
  r ≤ C_e under ``multi``. TP(T) is the largest such r (:func:`tree_throughput`).
- The best tree is NP-hard (003 Thm 1). :func:`best_tree` is a stated heuristic: a Prim-like
  greedy that adds, each time, the arc whose tail keeps the largest rate after taking one more
  child (lazy heap), then re-parents children of the bottleneck node while that lowers it.
  Under ``multi`` the greedy is the widest-arborescence algorithm and is exact.
- A DAG is a subgraph of the arcs that go forward in some vertex order with the root first;
  on it the LP needs only the single-node cuts (SSBPDAG, 003 §4.1). :func:`best_dag` tries
  every order up to :data:`EXHAUSTIVE_DAG_NODES` nodes (exact best DAG), else a few orders
  (a heuristic lower bound).
- :func:`weighted_trees`: optimal rates split into weighted broadcast trees (003 Thm 5,
  weighted Edmonds), by the batched Bérczi–Frank packing of ForestColl.
"""

from __future__ import annotations

import heapq
from fractions import Fraction
from itertools import permutations
from math import lcm

import numpy as np
from scipy.sparse.csgraph import breadth_first_order
import scipy.sparse as sp

from topofinder.scoring.forestcoll import _Packer
from topofinder.scoring.oneroot.exact_lp import solve_exact, solve_float
from topofinder.scoring.oneroot.platform import Platform
from topofinder.scoring.oneroot.steady import cut_lp

#: best_dag tries every vertex order up to this many nodes.
EXHAUSTIVE_DAG_NODES = 7


def _rate_with(pl: Platform, load: Fraction, kids: int, e: int) -> Fraction:
    """The rate node tail(e) allows once it sends over e too (module doc)."""
    if pl.port_model == "one":
        return 1 / (load + pl.cost(e))
    if pl.port_model == "node":
        return min(Fraction(int(pl.cap[e])), pl.bandwidth / (kids + 1), pl.bandwidth)
    return Fraction(int(pl.cap[e]))


def tree_throughput(pl: Platform, parent_link: list[int]) -> Fraction:
    """TP(T) for the tree given by the link into every non-root node (−1 at the root)."""
    load = [Fraction(0)] * pl.n
    kids = [0] * pl.n
    rate = None
    for w, e in enumerate(parent_link):
        if w == pl.root:
            continue
        u = int(pl.src[e])
        r = _rate_with(pl, load[u], kids[u], e)
        load[u] += pl.cost(e)
        kids[u] += 1
        rate = r if rate is None else min(rate, r)
    if pl.port_model == "one":
        rate = 1 / max(load)
    return rate


def _greedy(pl: Platform) -> list[int]:
    out = [[] for _ in range(pl.n)]
    for e in range(pl.m):
        out[int(pl.src[e])].append(e)
    load, kids = [Fraction(0)] * pl.n, [0] * pl.n
    parent = [-1] * pl.n
    inside = np.zeros(pl.n, bool)
    heap: list = []

    def offer(u):
        for e in out[u]:
            if not inside[pl.dst[e]]:
                heapq.heappush(heap, (-_rate_with(pl, load[u], kids[u], e), e))

    inside[pl.root] = True
    offer(pl.root)
    while heap:
        neg, e = heapq.heappop(heap)
        u, w = int(pl.src[e]), int(pl.dst[e])
        if inside[w]:
            continue
        now = _rate_with(pl, load[u], kids[u], e)
        if now != -neg:                       # u took children since: re-queue
            heapq.heappush(heap, (-now, e))
            continue
        parent[w], inside[w] = e, True
        load[u] += pl.cost(e)
        kids[u] += 1
        offer(w)
    return parent


def _descendants(pl: Platform, parent: list[int], y: int) -> set[int]:
    children = [[] for _ in range(pl.n)]
    for w, e in enumerate(parent):
        if e >= 0:
            children[int(pl.src[e])].append(w)
    seen, stack = {y}, [y]
    while stack:
        for c in children[stack.pop()]:
            seen.add(c)
            stack.append(c)
    return seen


def _improve(pl: Platform, parent: list[int], rounds: int) -> list[int]:
    """Re-parent a child of a bottleneck node while the tree's rate strictly rises."""
    into = [[] for _ in range(pl.n)]
    for e in range(pl.m):
        into[int(pl.dst[e])].append(e)
    best = tree_throughput(pl, parent)
    for _ in range(rounds):
        moved = False
        for y in range(pl.n):
            if y == pl.root:
                continue
            below = _descendants(pl, parent, y)
            for e in into[y]:
                if e == parent[y] or int(pl.src[e]) in below:
                    continue
                trial = parent.copy()
                trial[y] = e
                tp = tree_throughput(pl, trial)
                if tp > best:
                    parent, best, moved = trial, tp, True
                    break
        if not moved:
            break
    return parent


def best_tree(pl: Platform, rounds: int = 20) -> tuple[Fraction, list[int]]:
    """(TP(T), parent links) of the heuristic best broadcast tree (module doc)."""
    parent = _greedy(pl)
    if pl.port_model != "multi" and pl.n <= 2000:
        parent = _improve(pl, parent, rounds)
    return tree_throughput(pl, parent), parent


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
    packer = _Packer(pl.n, pl.src.astype(np.int32), pl.dst.astype(np.int32), g, False)
    index = {(int(u), int(w)): e for e, (u, w) in enumerate(zip(pl.src, pl.dst))}
    trees = []
    for b in packer.pack([pl.root], int(tp * den)):
        parent = [-1] * pl.n
        for u, w in b.edges:
            parent[w] = index[(u, w)]
        trees.append((Fraction(b.m, den), parent))
    return trees
