"""Bandwidth-optimal tree schedules for line-graph expansions L^k(G), without packing.

Uniform entry. On a d-regular digraph H (no self-loops or multi-arcs), let every root y own d
arc-disjoint spanning arborescences, each of weight 1/d, using every in-arc of every other node
exactly once (they exist iff H is d-arc-connected: Edmonds' branching theorem). Each link
(p→q) then carries 1/d of the shard of every root ≠ q: load (N−1)/d, τ = (d/N)·(N−1)/d =
(N−1)/N, the bandwidth optimum — the ForestColl optimum of a d-arc-connected d-regular H
(paper 002 (⋆) with |S| = N−1 at a single node).

Lifting to L(H) (nodes = arcs of H). For the root e = (x→y) take y's arborescences T_1..T_d
of H. In tree i, an arc f = (q→w), q ≠ y, hangs below (π_i(q)→q) (π_i the parent in T_i), and
an arc f = (y→w) below (σ_i(w)→y), where σ is a d×d array of in-neighbours of y with
σ_i(w) = x (the root itself) exactly once per row and per column, every column a permutation
(the d in-arcs of (y→w) are used once each), and each row acyclic: following
w → first hop of T_i towards σ_i(w) must end at the root. The trees of L(H) are again d
arc-disjoint arborescences per root using every in-arc once, so the construction iterates:
L^k(G) needs the packing of G only (k = 3, G = C(16,{3,4}): 16 small packings, then arrays).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.operations import line_graph
from topofinder.scoring.trees.forestcoll import BatchedTreePacker
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import Tree, TreeSchedule


def _arc_index(topo: Topology) -> np.ndarray:
    """N×N table: arc id of u→w (−1 where none); TopofinderError on multi-arcs/self-loops."""
    n = topo.n
    if topo.self_loops or topo.heterogeneous:
        raise TopofinderError(f"{topo.expr}: uniform-entry trees need simple unit-capacity "
                              "arcs without self-loops")
    table = np.full((n, n), -1, np.int64)
    table[topo.src, topo.dst] = np.arange(topo.num_arcs)
    if np.count_nonzero(table >= 0) != topo.num_arcs:
        raise TopofinderError(f"{topo.expr}: uniform-entry trees need no multi-arcs")
    return table


def base_families(topo: Topology, prefer_low: bool = False) -> np.ndarray:
    """parents[y, i, v]: d arc-disjoint spanning arborescences rooted at every y (−1 at y),
    each in-arc of every v ≠ y used by exactly one of them (Bérczi–Frank from one root)."""
    n, d = topo.n, topo.degree
    if not topo.is_regular:
        raise TopofinderError(f"{topo.expr}: uniform-entry trees need a regular digraph")
    _arc_index(topo)
    src, dst = topo.src.astype(np.int32), topo.dst.astype(np.int32)
    fam = np.full((n, d, n), -1, np.int64)
    for y in range(n):
        g = (dst != y).astype(np.int64)
        try:
            batches = BatchedTreePacker(n, src, dst, g, prefer_low).pack([y], d)
        except RuntimeError:
            raise TopofinderError(f"{topo.expr} is not {d}-arc-connected: no {d} disjoint "
                                  "arborescences per root") from None
        i = 0
        for b in batches:
            for _ in range(b.m):
                for u, w in b.edges:
                    fam[y, i, w] = u
                i += 1
    return fam


def _first_hops(fam: np.ndarray) -> np.ndarray:
    """fh[y, i, v]: the child of y on the path y → v in tree i (v itself for children)."""
    n = fam.shape[0]
    roots = np.arange(n)[:, None, None]
    par = fam.copy()
    node = np.broadcast_to(np.arange(n), par.shape).copy()
    # climb until the parent is the root
    fh = node.copy()
    while True:
        p = np.take_along_axis(par, fh, axis=2)
        move = (p >= 0) & (p != roots)
        if not move.any():
            break
        fh = np.where(move, p, fh)
    fh[par < 0] = -1
    return fh


def _rows(fh_local: tuple[tuple[int, ...], ...], xpos: int, d: int):
    """Per tree i: every σ_i (tuple over out-neighbour positions of in-neighbour positions)
    with σ_i(w) = x exactly once and the dependency w → fh_i(σ_i(w)) acyclic."""
    out = []
    for i in range(d):
        cands = []
        for row in itertools.product(range(d), repeat=d):
            if row.count(xpos) != 1:
                continue
            ok = True
            for w in range(d):
                seen, cur = 0, w
                while row[cur] != xpos:
                    cur = fh_local[i][row[cur]]
                    seen += 1
                    if cur < 0 or seen > d:
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                cands.append(row)
        out.append(cands)
    return out


def _latin(rows, d):
    """One candidate per row with every column a permutation (backtracking)."""
    chosen: list[tuple[int, ...]] = []

    def go(i, used):
        if i == d:
            return True
        for row in rows[i]:
            if all(row[w] not in used[w] for w in range(d)):
                chosen.append(row)
                if go(i + 1, [used[w] | {row[w]} for w in range(d)]):
                    return True
                chosen.pop()
        return False

    return chosen if go(0, [set() for _ in range(d)]) else None


def lift(h: Topology, fam: np.ndarray) -> tuple[Topology, np.ndarray]:
    """L(H) and its uniform-entry arborescences from those of H (module docstring)."""
    arc = _arc_index(h)
    lh = line_graph(h)
    n, d, m = h.n, h.degree, h.num_arcs
    src, dst = h.src, h.dst
    fh = _first_hops(fam)
    out_nb = [np.sort(dst[src == y]) for y in range(n)]
    in_nb = [np.sort(src[dst == y]) for y in range(n)]
    new = np.empty((m, d, m), np.int64)
    cache: dict = {}
    f_all = np.arange(m)
    q_all, w_all = src[f_all], dst[f_all]
    for e in range(m):
        x, y = int(src[e]), int(dst[e])
        W, P = out_nb[y], in_nb[y]
        wpos = {int(w): j for j, w in enumerate(W)}
        xpos = int(np.flatnonzero(P == x)[0])
        fh_local = tuple(tuple(-1 if int(p) == x else wpos.get(int(fh[y, i, p]), -1)
                               for p in P) for i in range(d))
        key = (fh_local, xpos)
        if key not in cache:
            cache[key] = _latin(_rows(fh_local, xpos, d), d)
        sigma = cache[key]
        if sigma is None:
            raise TopofinderError(f"{lh.expr}: no uniform-entry lift at root {e}")
        at_y = q_all == y
        for i in range(d):
            parent = arc[fam[y, i, q_all], q_all]          # q ≠ y: (π_i(q) → q)
            sig = np.asarray(sigma[i])
            wj = np.array([wpos.get(int(w), 0) for w in w_all[at_y]])
            parent[at_y] = arc[P[sig[wj]], y]
            parent[e] = -1
            new[e, i] = parent
    return lh, new


def line_graph_trees(base: Topology, times: int, prefer_low: bool = False) -> TreeSchedule:
    """Bandwidth-optimal trees ((N−1)/N) on line_graph(base, times), d per root of weight 1/d
    (``prefer_low``: the base arborescences are grown shallowest-first)."""
    fam = base_families(base, prefer_low)
    g = base
    for _ in range(times):
        g, fam = lift(g, fam)
    d = g.degree
    trees = []
    nodes = np.arange(g.n)
    w = Fraction(1, d)
    for r in range(g.n):
        for i in range(d):
            par = fam[r, i]
            keep = par >= 0
            trees.append(Tree(r, w, np.stack([par[keep], nodes[keep]], axis=1)))
    return TreeSchedule(g, trees, method="line-graph-uniform-entry")
