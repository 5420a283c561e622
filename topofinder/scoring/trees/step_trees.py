"""Tree-flow allgather read off a step schedule (paper 002 §4 tree-flow model; paper 001 BFB).

In a valid allgather step schedule every chunk segment of a shard reaches each node for the
first time over exactly one send, so the first receipts of one segment form a spanning
out-tree rooted at the shard's owner (parent u at a strictly earlier step). Taking all
segments' trees (weight = segment length / P, identical trees merged) gives a tree-flow
schedule whose link loads are the schedule's loads summed over steps, hence

    τ_trees = (B/N)·max_link Σ_t load_t / C  ≤  (B/N)·Σ_t max_link load_t / C = τ_steps.

When τ_steps equals the ForestColl optimum (e.g. BFB on a graph where BFB is bandwidth-optimal)
the trees are optimal, found in O(sends), and as low as the schedule has steps (BFB: every
node at its distance from the root — the lowest possible trees).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.schedule import StepSchedule
from topofinder.model.tree_schedule import Tree, TreeSchedule
from topofinder.model.collectives import Collective


def trees_from_steps(schedule: StepSchedule) -> TreeSchedule:
    """The first-receipt trees of every chunk segment of every shard (module docstring)."""
    if schedule.collective != Collective.ALLGATHER:
        raise TopofinderError("trees are read off allgather step schedules only")
    topo, p = schedule.topology, schedule.shard_chunks
    s = np.asarray(schedule.sends, np.int64)
    t, v, lo, hi, u, w = s.T
    n = topo.n
    # elementary segments per shard: breakpoints of all sends of that shard
    key = np.concatenate([v * (p + 1) + lo, v * (p + 1) + hi,
                          np.arange(n) * (p + 1), np.arange(n) * (p + 1) + p])
    bps = np.unique(key)                                   # sorted (shard, breakpoint)
    start = np.searchsorted(bps, v * (p + 1) + lo)
    stop = np.searchsorted(bps, v * (p + 1) + hi)
    count = stop - start
    rep = np.repeat(np.arange(s.shape[0]), count)
    seg = np.repeat(start - np.cumsum(count) + count, count) + np.arange(rep.size)
    # first receipt of each (segment, receiver)
    order = np.lexsort((t[rep], w[rep], seg))
    seg_o, w_o = seg[order], w[rep][order]
    first = np.ones(order.size, bool)
    first[1:] = (seg_o[1:] != seg_o[:-1]) | (w_o[1:] != w_o[:-1])
    rows = order[first]
    seg_r, u_r, w_r = seg[rows], u[rep][rows], w[rep][rows]
    # group edges by segment, then merge identical trees of a shard
    bounds = np.searchsorted(seg_r, np.arange(bps.size + 1))
    shard_of = bps // (p + 1)
    pos_of = bps % (p + 1)
    merged: dict[tuple[int, bytes], list] = {}
    for i in range(bps.size - 1):
        if shard_of[i + 1] != shard_of[i]:
            continue                                        # last breakpoint of a shard
        a, b = bounds[i], bounds[i + 1]
        edges = np.stack([u_r[a:b], w_r[a:b]], axis=1)
        edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
        weight = Fraction(int(pos_of[i + 1] - pos_of[i]), p)
        k = (int(shard_of[i]), edges.tobytes())
        if k in merged:
            merged[k][1] += weight
        else:
            merged[k] = [edges, weight]
    trees = [Tree(root, weight, edges) for (root, _), (edges, weight) in merged.items()]
    return TreeSchedule(topo, trees, method=f"{schedule.method}-first-receipt")
