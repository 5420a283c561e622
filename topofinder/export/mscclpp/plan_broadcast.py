"""A periodic one-root broadcast (paper 003 §5.3–5.4) as the step program an MSCCL++ plan runs.

The periodic schedule repeats a period of slots; each period the root injects a batch of W =
Σ_l weight_l messages (tree l carries weight_l of them). A finite message is cut into B
batches of W pieces: piece b·W + off_l + i is message i of tree l of batch b (off_l = Σ of
the earlier trees' weights). Period r, slot k is step r·S + k + 1 (S slots per period), for
r = 0 .. B − 1 + L (L the largest lag), and a send row [u, w, l, lo, hi, lag] of slot k moves
pieces b·W + off_l + [lo, hi) of batch b = r − lag when 0 ≤ b < B. Every piece travels along
its tree, so the steps are an allgather of the root's shard only (shard_chunks B·W), which
the IR lowering runs with ``root`` (:func:`topofinder.export.ir.lowering.lower`)."""

from __future__ import annotations

import numpy as np

from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology
from topofinder.model.collectives import Collective


def broadcast_steps(periodic: PeriodicSchedule, topology: Topology,
                    batches: int | None = None) -> StepSchedule:
    """The step program of ``batches`` batches of ``periodic`` (default L + 1: the pipeline
    runs full for at least one period) on ``topology`` (module doc)."""
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
