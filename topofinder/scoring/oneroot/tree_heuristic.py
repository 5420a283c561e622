"""The best single broadcast tree: a stated heuristic (the problem is NP-complete, 003 Thm 1).

A tree T at rate r needs, per node u, r·Σ_{children w} c_{u,w} ≤ 1 under ``one`` (003
eq. (1); the receive rows hold as soon as the parent's send row does); r ≤ C_e on its links
and r·(children of u) ≤ B, r ≤ B under ``node``; r ≤ C_e under ``multi``. TP(T) is the
largest such r (:func:`tree_throughput`).

:func:`best_tree`: a Prim-like greedy adds, each time, the arc whose tail keeps the largest
rate after taking one more child (lazy heap; ties to the deepest tail, then to the head with
the fewest outside out-neighbours, Warnsdorff's rule, so on uniform links it tries for a
Hamiltonian path, whose rate 1/c is the one-port optimum), then (N ≤ :data:`IMPROVE_NODES`)
re-parents single nodes while the rate strictly rises. It also tries a Hamiltonian path from
the root (:func:`hamiltonian_path`). Under ``multi`` the greedy is the
widest-arborescence algorithm and is exact.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from topofinder.scoring.oneroot.platform import Platform

#: best_tree's re-parenting pass runs up to this many nodes (it costs O(N²·d) per round).
IMPROVE_NODES = 300


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
    into = [[] for _ in range(pl.n)]
    for e in range(pl.m):
        out[int(pl.src[e])].append(e)
        into[int(pl.dst[e])].append(e)
    outside = [len(es) for es in out]          # out-links to nodes not yet in the tree
    load, kids, depth = [Fraction(0)] * pl.n, [0] * pl.n, [0] * pl.n
    parent = [-1] * pl.n
    inside = np.zeros(pl.n, bool)
    heap: list = []

    def key(e):
        u, w = int(pl.src[e]), int(pl.dst[e])
        return (-_rate_with(pl, load[u], kids[u], e), -depth[u], outside[w], e)

    def join(w):
        inside[w] = True
        for e in into[w]:
            outside[int(pl.src[e])] -= 1
        for e in out[w]:
            if not inside[pl.dst[e]]:
                heapq.heappush(heap, key(e))

    join(pl.root)
    while heap:
        item = heapq.heappop(heap)
        e = item[-1]
        u, w = int(pl.src[e]), int(pl.dst[e])
        if inside[w]:
            continue
        now = key(e)
        if now != item:                       # u took children or w lost options: re-queue
            heapq.heappush(heap, now)
            continue
        parent[w], depth[w] = e, depth[u] + 1
        load[u] += pl.cost(e)
        kids[u] += 1
        join(w)
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


def _cycle_cover(pl: Platform) -> np.ndarray | None:
    """succ[u] for a spanning cycle cover (a perfect out→in matching), or None."""
    m = sp.csr_matrix((np.ones(pl.m), (pl.src, pl.dst)), shape=(pl.n, pl.n))
    succ = maximum_bipartite_matching(m, perm_type="column")
    return None if np.any(succ < 0) else succ.astype(np.int64)


def hamiltonian_path(pl: Platform) -> list[int] | None:
    """Parent links of a Hamiltonian path from the root, or None: a cycle cover whose cycles
    are merged by arc swaps (u1→v1 in one cycle, u2→v2 in another, arcs u1→v2 and u2→v1 both
    present: take those instead, one cycle remains), the classical joining of Kautz and
    de Bruijn cycles; the final cycle is opened at the root."""
    succ = _cycle_cover(pl)
    if succ is None:
        return None
    pred = np.empty(pl.n, np.int64)
    pred[succ] = np.arange(pl.n)
    label = np.full(pl.n, -1)
    for v in range(pl.n):
        c = v
        while label[c] < 0:
            label[c] = v
            c = succ[c]
    group = {int(c): int(c) for c in np.unique(label)}

    def find(c):
        while group[c] != c:
            group[c] = group[group[c]]
            c = group[c]
        return c

    arcs = set(zip(pl.src.tolist(), pl.dst.tolist()))
    merged = True
    while merged and len({find(c) for c in group}) > 1:
        merged = False
        for u1, v2 in zip(pl.src.tolist(), pl.dst.tolist()):
            a, b = find(int(label[u1])), find(int(label[v2]))
            u2, v1 = int(pred[v2]), int(succ[u1])
            if a != b and (u2, v1) in arcs:
                succ[u1], succ[u2], pred[v2], pred[v1] = v2, v1, u1, u2
                group[a] = b
                merged = True
    if len({find(c) for c in group}) > 1:
        return None
    index = {a: e for e, a in enumerate(zip(pl.src.tolist(), pl.dst.tolist()))}
    parent, v = [-1] * pl.n, pl.root
    for _ in range(pl.n - 1):
        parent[int(succ[v])] = index[(v, int(succ[v]))]
        v = int(succ[v])
    return parent


def greedy_tree(pl: Platform) -> tuple[Fraction, list[int]]:
    """(TP(T), parent links) of the better of the greedy tree and, if one is found, the
    Hamiltonian path from the root (no re-parenting)."""
    best = _greedy(pl)
    path = hamiltonian_path(pl)
    if path is not None and tree_throughput(pl, path) > tree_throughput(pl, best):
        best = path
    return tree_throughput(pl, best), best


def best_tree(pl: Platform, rounds: int = 20) -> tuple[Fraction, list[int]]:
    """(TP(T), parent links) of the heuristic best broadcast tree (module doc)."""
    _, parent = greedy_tree(pl)
    if pl.port_model != "multi" and pl.n <= IMPROVE_NODES:
        parent = _improve(pl, parent, rounds)
    return tree_throughput(pl, parent), parent
