"""The baselines' own allgather schedules (paper 001 §8.2), as step schedules that
:func:`topofinder.model.schedule.validate` replays like every other schedule.

- Ring allgather on ShiftedRing(d,m): every shard is cut into d chunks; chunk k travels the
  k-th directed Hamiltonian ring (shift ±s_j) for m−1 steps. Each arc carries one chunk per
  step, so T_L = m−1 and τ = (m−1)/m (BW-optimal, linear latency; paper 001 §8.2, Fig. 14:
  2(N−1) steps per allreduce).
- Two-tree allgather on DBT(m): every shard is cut into 2 halves; half j of v's shard spreads
  along tree j from v, reaching tree-distance t at step t (the tree paths are the only paths
  of the tree). T_L = the larger tree diameter; τ is replayed (at m = 1024: T_L = 18,
  τ = 3071/512 ≈ 6.0, against a ForestColl optimum ≈ 2 on the same topology: the trees'
  root links are the bottleneck — "poor BW performance", paper 001 §8.3).

Reduce-scatter: both topologies are bidirectional, so the allgather reversed is one with the
same T_L and τ (Thm 2); the allreduce costs twice (paper 001 §3).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.families.shifted_ring_dbt import (
    double_binary_tree, double_tree_parents, ring_shifts, shifted_ring,
)
from topofinder.model.schedule import StepSchedule, link_capacity
from topofinder.model.symmetric import OrbitSchedule
from topofinder.scoring.async_time import step_order


def _ring_rows(d: int, m: int, v: np.ndarray) -> np.ndarray:
    """The ring allgather's sends of the shards ``v``: chunk k of v's shard travels ring k
    (shift δ_k), leaving node v + (t−1)·δ_k at step t = 1..m−1."""
    steps = [sign * s for s in ring_shifts(d, m) for sign in (1, -1)]
    rows = []
    for k, delta in enumerate(steps):
        t = np.repeat(np.arange(1, m), v.size)
        vv = np.tile(v, m - 1)
        u = (vv + (t - 1) * delta) % m
        rows.append(np.stack([t, vv, np.full(t.size, k), np.full(t.size, k + 1), u,
                              (u + delta) % m], axis=1))
    return np.concatenate(rows)


def ring_allgather(d: int, m: int) -> StepSchedule:
    """The ring allgather of ShiftedRing(d,m): d chunks per shard, chunk k on ring k."""
    return StepSchedule(shifted_ring(d, m), d, _ring_rows(d, m, np.arange(m)), method="ring")


def ring_orbit(d: int, m: int) -> OrbitSchedule:
    """The same ring allgather as node 0's sends and the rotation x ↦ x+1 (mod m): the
    rotation maps every ring onto itself and shard v's sends onto shard v+1's, so the
    schedule is their equivariant extension (topofinder.model.symmetric), replayed from one
    source with d·(m−1) rows."""
    rotation = (np.arange(m) + 1) % m
    return OrbitSchedule(shifted_ring(d, m), d, _ring_rows(d, m, np.zeros(1, np.int64)),
                         (rotation,), method="ring")


def _preorder(parent: np.ndarray) -> tuple[list, list, np.ndarray, np.ndarray]:
    """(children lists in id order, the preorder from the root (parent −1), each node's
    preorder position, each node's subtree size) of the tree given by ``parent``: a node's
    subtree is the preorder range [pos, pos + size)."""
    m = parent.size
    children = [[] for _ in range(m)]
    for c in np.flatnonzero(parent >= 0).tolist():
        children[parent[c]].append(c)
    order, stack = [], [int(np.flatnonzero(parent < 0)[0])]
    while stack:                                          # preorder, children in id order
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(children[v]))
    pos = np.empty(m, np.int64)
    pos[order] = np.arange(m)
    size = np.ones(m, np.int64)
    for v in reversed(order[1:]):
        size[parent[v]] += size[v]
    return children, order, pos, size


def tree_distances(parent: np.ndarray, dtype=np.int64) -> np.ndarray:
    """All-pairs hop distances (``dtype``, wide enough for m − 1) in the tree given by
    ``parent`` (−1 at its one root),
    row by row in preorder: a child's row is its parent's, one hop more, except two hops less
    on its own subtree, which is one contiguous range of preorder positions. O(N²) array work
    in N steps (an all-sources BFS, and its float matrix, cost 3–4 times more at N = 1024)."""
    m = parent.size
    _, order, pos, size = _preorder(parent)
    rows = np.empty((m, m), dtype)                        # rows[v, pos[x]] = dist(v, x)
    root = order[0]
    rows[root] = 0
    for v in order[1:]:                                   # depth of x below the root
        rows[root, pos[v]] = rows[root, pos[parent[v]]] + 1
    for v in order[1:]:
        np.add(rows[parent[v]], 1, out=rows[v])
        rows[v, pos[v]:pos[v] + size[v]] -= 2
    return rows[:, pos]


def two_tree_allgather(m: int) -> StepSchedule:
    """The two-tree allgather of DBT(m): half j of every shard spreads along tree j; node w
    receives v's half at step dist_j(v, w) from its neighbour toward v on tree j. Rows in
    step order, and within a step by link (u, w), tree, then v — the order the
    dependency-driven replay queues a link's sends in when their data is ready alike
    (async_time), so its sorts find them nearly in order."""
    topo = double_binary_tree(m)
    parents = double_tree_parents(m)
    small = np.int16 if m < 2 ** 15 else np.int64
    dist = np.stack([tree_distances(p, small) for p in parents])      # [j, w, v] (symmetric)
    hop = np.stack([_next_hops(p).T.astype(small) for p in parents])  # [j, w, v]: w's hop to v
    arcs = [(j, *pair) for j, p in enumerate(parents)
            for c in [np.flatnonzero(p >= 0)] for pair in ((c, p[c]), (p[c], c))]
    tree = np.concatenate([np.full(u.size, j) for j, u, _ in arcs])
    u = np.concatenate([a[1] for a in arcs])
    w = np.concatenate([a[2] for a in arcs])
    by_link = np.lexsort((tree, u * m + w))
    tree, u, w = tree[by_link], u[by_link], w[by_link]
    beyond = np.flatnonzero(hop[tree, w] == u[:, None])    # arc · m + v, v beyond u: arc-major
    del hop
    t = dist[tree, w].reshape(-1)[beyond]                  # dist_j(w, v) = dist_j(v, w)
    order = step_order(t)
    rows = np.empty((order.size, 6), np.int64, order="F")   # send_rows' layout, no copies
    rows[:, 0] = t[order]
    arc = beyond[order]
    np.divmod(arc, m, out=(arc, rows[:, 1]))
    rows[:, 2] = tree[arc]                                  # the tree: chunk [j, j + 1)
    np.add(rows[:, 2], 1, out=rows[:, 3])
    rows[:, 4] = u[arc]
    rows[:, 5] = w[arc]
    return StepSchedule(topo, 2, rows, method="double-binary-tree")


def _next_hops(parent: np.ndarray) -> np.ndarray:
    """hop[v, w]: w's neighbour on the tree path from w to v (w's parent unless v lies in
    w's subtree, then the child of w whose subtree holds v; hop[w, w] = w). Children's
    subtrees are contiguous ranges of preorder positions (children in id order)."""
    m = parent.size
    children, _, pos, size = _preorder(parent)
    pv = pos[:, None]                                   # (v, w): v's preorder position
    below = (pv > pos[None, :]) & (pv < (pos + size)[None, :])
    hop = np.broadcast_to(parent[None, :], (m, m)).copy()
    # the child holding v: the last child whose preorder start is at most v's position
    for k in range(max(map(len, children))):
        kth = np.array([c[k] if len(c) > k else -1 for c in children], np.int64)
        has = kth >= 0
        inside = below & has[None, :] & (pv >= np.where(has, pos[kth], 0)[None, :])
        np.copyto(hop, np.broadcast_to(kth[None, :], (m, m)), where=inside)
    hop[np.arange(m), np.arange(m)] = np.arange(m)
    return hop


def _depths(parent: np.ndarray) -> np.ndarray:
    """Hop depth of every node below its tree's root (parent −1)."""
    depth = np.zeros(parent.size, np.int64)
    up = parent.copy()
    while np.any(up >= 0):
        has = up >= 0
        depth[has] += 1
        up = np.where(has, parent[np.maximum(up, 0)], -1)
    return depth


def _tree_histograms(parent: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """below[x, s]: nodes of x's subtree at distance s from x; every[x, s]: nodes of the whole
    tree at distance s from x (s < width), level by level in O(N·width)."""
    depth = _depths(parent)
    below = np.zeros((parent.size, width), np.int64)
    below[:, 0] = 1
    for level in range(int(depth.max()), 0, -1):
        c = np.flatnonzero(depth == level)
        np.add.at(below, (parent[c][:, None], np.arange(1, width)[None, :]), below[c, :-1])
    every = below.copy()
    for level in range(1, int(depth.max()) + 1):
        c = np.flatnonzero(depth == level)
        outside = every[parent[c], :-1].copy()              # from the parent, one hop more
        outside[:, 1:] -= below[c, :-2]                     # less c's own subtree
        every[c, 1:] += outside
    return below, every


def two_tree_cost(m: int) -> tuple[int, Fraction]:
    """(T_L, τ) of :func:`two_tree_allgather` without building it, exact in O(N·diameter):
    the arc c → parent(c) of tree j carries at step t the halves of the v in c's subtree at
    distance t−1 from c; the arc parent(c) → c those of the v outside it at distance t−1 from
    the parent. Loads of an edge in both trees add on its 2-fold link; τ = (B/(N·2))·Σ_t
    max_link load_t / cap (docs/model.md)."""
    topo = double_binary_tree(m)
    width = 2 * m.bit_length() + 3                       # > twice a binary tree's depth
    keys, loads = [], []
    for parent in double_tree_parents(m):
        below, every = _tree_histograms(parent, width)
        c = np.flatnonzero(parent >= 0)
        p = parent[c]
        up = np.zeros((c.size, width + 1), np.int64)
        up[:, 1:] = below[c]                             # step t: distance t−1 below c
        down = np.zeros((c.size, width + 1), np.int64)
        down[:, 1:] = every[p]
        down[:, 2:] -= below[c, :-1]
        keys += [c * m + p, p * m + c]
        loads += [up, down]
    uniq, inv = np.unique(np.concatenate(keys), return_inverse=True)
    total = np.zeros((uniq.size, width + 1), np.int64)
    np.add.at(total, inv.reshape(-1), np.concatenate(loads))
    cap = link_capacity(topo, uniq // m, uniq % m)
    scaled = (total * (2 // cap)[:, None]).max(axis=0)   # capacities are 1 or 2
    steps = int(np.flatnonzero(scaled)[-1])
    tau = Fraction(int(scaled.sum()), 2) * Fraction(topo.node_bandwidth, m * 2)
    return steps, tau


def double_tree_cut_bound(m: int) -> Fraction:
    """A certified upper bound on the all-to-all concurrent flow f of DBT(m) (link capacity 1):
    the least cap(S → T) / (|S|·|T|) over the 2(m−1) cuts that split one of the trees at an
    edge (S = the subtree below it). Every one of the |S|·|T| commodities from S to T crosses
    the cut, so f·|S|·|T| ≤ cap(S → T) (and likewise T → S). At m = 64 and 1024 it is 16/m²
    up to the cut's exact sizes, the value of paper 001 Table 4 (21475 us)."""
    topo = double_binary_tree(m)
    x, y, cap = topo.src, topo.dst, topo.arc_capacity.astype(np.int64)
    best = None
    for parent in double_tree_parents(m):
        depth = _depths(parent)
        a, b = x.copy(), y.copy()                      # walked up to lca(x, y)
        while np.any(a != b):
            apart, da, db = a != b, depth[a], depth[b]
            a, b = (np.where(apart & (da >= db), parent[a], a),
                    np.where(apart & (db >= da), parent[b], b))
        inside = _subtree_sums(parent, depth, np.bincount(a, cap, m).astype(np.int64))
        out = _subtree_sums(parent, depth, np.bincount(x, cap, m).astype(np.int64)) - inside
        back = _subtree_sums(parent, depth, np.bincount(y, cap, m).astype(np.int64)) - inside
        size = _subtree_sums(parent, depth, np.ones(m, np.int64))
        cut = np.flatnonzero(parent >= 0)
        for c, k in zip(np.minimum(out, back)[cut].tolist(), size[cut].tolist()):
            bound = Fraction(c, k * (m - k))
            if best is None or bound < best:
                best = bound
    return best


def _subtree_sums(parent: np.ndarray, depth: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Σ of ``value`` over each node's subtree (levels from the deepest up)."""
    total = value.copy()
    for level in range(int(depth.max()), 0, -1):
        c = np.flatnonzero(depth == level)
        np.add.at(total, parent[c], total[c])
    return total
