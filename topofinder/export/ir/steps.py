"""The schedules the rank-program IR is lowered from: a tree-flow schedule as the step
schedule a runtime executes (:func:`trees_as_steps`), an allreduce's two phases as schedules
of their own (:func:`allreduce_phases`)."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule


def allreduce_phases(schedule: StepSchedule) -> tuple[StepSchedule, StepSchedule]:
    """An allreduce's reduce-scatter (steps 1..reduce_steps) and allgather (the rest, from
    step 1) as schedules of their own: run back to back they move the same chunks at the same
    steps, so (T_L, τ) add to the allreduce's (paper 001 §3)."""
    r, rows = schedule.reduce_steps, schedule.sends
    later = rows[rows[:, 0] > r].copy()
    later[:, 0] -= r
    return (StepSchedule(schedule.topology, schedule.shard_chunks, rows[rows[:, 0] <= r],
                         collective=Collective.REDUCE_SCATTER),
            StepSchedule(schedule.topology, schedule.shard_chunks, later,
                         collective=Collective.ALLGATHER))


def trees_as_steps(trees) -> StepSchedule:
    """A tree-flow schedule (paper 002) as the step schedule a runtime executes: P = lcm of the
    weight denominators, tree i of root r carries the next weight·P chunks of r's shard.
    Allgather out-trees send every edge (u, w) at step depth(w); reduce-scatter in-trees send
    u's partial to its parent at step H − depth(u) + 1 (H: the deepest tree), so every node
    has its children's partials first; allreduce (``reduce_scatter`` and ``allgather``
    trees) runs the first then the second, sharing P. (The runtime pipelines these sends;
    the steps only fix the order.)"""
    phases = [trees.reduce_scatter, trees.allgather] if hasattr(trees, Collective.ALLGATHER) \
        else [trees]
    every = [t for ph in phases for t in ph.trees]
    p = lcm(*[Fraction(t.weight).denominator for t in every]) if every else 1
    rows, heights = [], []
    for ph in phases:
        inward = ph.collective == Collective.REDUCE_SCATTER
        part = _tree_rows(ph.trees, p, inward)
        height, offset = max((r[0] for r in part), default=0), sum(heights)
        rows += [((height - r[0] + 1 if inward else r[0]) + offset, *r[1:]) for r in part]
        heights.append(height)
    coll = Collective.ALLREDUCE if len(phases) == 2 else phases[0].collective
    return StepSchedule(phases[0].topology, p, np.array(rows, np.int64).reshape(-1, 6),
                        collective=coll, method=phases[-1].method or "trees",
                        reduce_steps=heights[0] if coll == Collective.ALLREDUCE else 0)


def _tree_rows(trees, p: int, inward: bool) -> list:
    """(depth, root, lo, hi, u, w) per tree edge; depth of the edge's far end from the root
    (out-trees: w; in-trees, edges child → parent: u)."""
    nxt = defaultdict(int)
    rows = []
    for t in trees:
        size = int(Fraction(t.weight) * p)
        lo = nxt[t.root]
        nxt[t.root] += size
        children = defaultdict(list)
        for u, w in t.edges:
            children[w if inward else u].append((u, w))
        frontier, depth = [t.root], 0
        while frontier:
            depth += 1
            new = []
            for x in frontier:
                for u, w in children[x]:
                    rows.append((depth, t.root, lo, lo + size, u, w))
                    new.append(u if inward else w)
            frontier = new
    return rows
