"""Fast spanning out-tree packing by breadth-first growth (a heuristic front end to the exact
Bérczi–Frank packing of paper 002 App. E.3).

Given integer tree slots g(e) per link and k trees per root, each root's k trees grow as one
batch, level by level: every node outside the batch that an arc with at least m free slots
reaches from the batch joins it through the arc with the most free slots (shallowest parent
first). A node reachable only through arcs with fewer free slots splits the batch (the copies
that fit take the arc, the rest continue), as Algorithm 4 does with μ. Every tree found uses
only free slots, so a complete packing is optimal by the slot accounting of Theorem 3 (link e
carries at most g(e) = U·C(e) of the k·N trees); when a batch cannot be completed the
packing gives up (None) and the caller runs the exact algorithm. No max-flows: O(levels·E)
array work per batch. It completes where links have slack (e.g. Pi(4,256), a100/mi250 at
scale) and typically gets stuck on fabrics where every node's in-links are fully used by the
optimum (e.g. L^2(C(16,{3,4})) after 251 of 256 roots), which need the exact packing.
"""

from __future__ import annotations

import numpy as np


def greedy_pack(n: int, src: np.ndarray, dst: np.ndarray, g: np.ndarray, k: int,
                roots=None):
    """[(root, m, [(u, w), ...]), ...] with Σ m = k per root, or None when stuck."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    free = np.array(g, np.int64)
    out = []
    roots = range(n) if roots is None else roots
    for r in roots:
        pending = [(np.eye(1, n, int(r), dtype=bool).reshape(-1), [], np.zeros(n, np.int64), k)]
        while pending:
            members, edges, depth, m = pending.pop()
            grown = _grow(n, src, dst, free, members, edges, depth, m, pending)
            if grown is None:
                return None
            out.append((int(r), grown[1], grown[0]))
    return out


def _grow(n, src, dst, free, members, edges, depth, m, pending):
    """Complete one batch of m trees: (edges, copies kept), or None; copies split off join
    ``pending`` with the edges they share."""
    members = members.copy()
    edges = list(edges)
    depth = depth.copy()
    size = int(members.sum())
    while size < n:
        cand = members[src] & ~members[dst] & (free > 0)
        idx = np.flatnonzero(cand)
        if idx.size == 0:
            return None
        full = idx[free[idx] >= m]
        if full.size:
            # per new node: shallowest parent, then most free slots
            order = np.lexsort((-free[full], depth[src[full]], dst[full]))
            chosen = full[order]
            first = np.ones(chosen.size, bool)
            first[1:] = dst[chosen[1:]] != dst[chosen[:-1]]
            chosen = chosen[first]
            best_depth = depth[src[chosen]].min()
            chosen = chosen[depth[src[chosen]] == best_depth]      # one BFS level at a time
            u, w = src[chosen], dst[chosen]
            np.subtract.at(free, chosen, m)
            members[w] = True
            depth[w] = depth[u] + 1
            edges += list(zip(u.tolist(), w.tolist()))
            size += chosen.size
            continue
        # only arcs with fewer than m free slots: split the batch at the fullest one
        e = idx[np.lexsort((depth[src[idx]], -free[idx]))[0]]
        mu = int(free[e])
        pending.append((members.copy(), list(edges), depth.copy(), m - mu))
        m = mu
        u, w = int(src[e]), int(dst[e])
        free[e] -= mu
        members[w] = True
        depth[w] = depth[u] + 1
        edges.append((u, w))
        size += 1
    return edges, m
