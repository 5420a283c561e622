"""The schedules the rank-program IR is lowered from: a tree-flow schedule as the step
schedule a runtime executes (:func:`trees_as_steps`), an allreduce's two phases as schedules
of their own (:func:`allreduce_phases`), a periodic one-root broadcast as steps
(:func:`broadcast_steps`)."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.model.collectives import Collective
from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology


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


def broadcast_steps(periodic: PeriodicSchedule, topology: Topology,
                    batches: int | None = None) -> StepSchedule:
    """A periodic one-root broadcast (paper 003 §5.3–5.4) as the step schedule a runtime
    executes: ``batches`` batches (default L + 1, L the largest lag: the pipeline runs full
    for at least one period) on ``topology``. Each period the root injects a batch of W =
    Σ_l weight_l messages (tree l carries weight_l of them); piece b·W + off_l + i is message
    i of tree l of batch b (off_l: the earlier trees' weights). Period r, slot k is step
    r·S + k + 1 (S slots per period), for r = 0 .. B − 1 + L, and a send row [u, w, l, lo, hi,
    lag] of slot k moves pieces b·W + off_l + [lo, hi) of batch b = r − lag when 0 ≤ b < B.
    Every piece travels along its tree, so the steps are an allgather of the root's shard
    only (shard_chunks B·W), lowered with ``root``
    (:func:`~topofinder.export.ir.lowering.lower`)."""
    lags = [row[5] for _, sends in periodic.slots for row in sends]
    deepest = max(lags, default=0)
    b_count = deepest + 1 if batches is None else int(batches)
    if b_count < 1:
        raise ValueError("batches must be positive")
    weights = [w for w, _ in periodic.trees]
    off = np.cumsum([0] + weights)
    total = int(off[-1])
    slots = len(periodic.slots)
    rows = []
    for r in range(b_count + deepest):
        for k, (_, sends) in enumerate(periodic.slots):
            for u, w, tree, lo, hi, lag in sends:
                b = r - lag
                if 0 <= b < b_count:
                    base = b * total + int(off[tree])
                    rows.append((r * slots + k + 1, periodic.root, base + lo, base + hi, u, w))
    sends = np.array(rows, np.int64).reshape(-1, 6)
    return StepSchedule(topology, b_count * total, sends, collective=Collective.ALLGATHER,
                        method=f"one-root periodic broadcast, {b_count} batches")
