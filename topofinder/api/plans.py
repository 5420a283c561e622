"""MSCCL++ execution plans of schedules: write one and state its price (docs/formats.md)."""

from __future__ import annotations

import os

from topofinder.api.oneroot import schedule_oneroot
from topofinder.api.topology import Source, emit, load
from topofinder.export.ir.steps import broadcast_steps
from topofinder.export.mscclpp.plan_writer import to_mscclpp_plan
from topofinder.model.collectives import Collective
from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.model.schedule import StepSchedule
from topofinder.workload.cost import Workload


def export_plan(steps: StepSchedule, path: str | os.PathLike | None = None, *, physical=None,
                announce=None, priced=None, channels: int = 1, inplace: bool = False,
                gpus_per_node: int = 1, min_bytes: int = 0, max_bytes: int | None = None,
                max_threadblocks: int | None = None, root: int | None = None) -> str | None:
    """The MSCCL++ execution plan of a step schedule
    (:func:`~topofinder.export.mscclpp.plan_writer.to_mscclpp_plan`; refused in one line,
    before anything is written, when it does not fit), returned when ``path`` is None, else
    written there. ``announce`` gets one line with its size, ``priced`` the schedule and
    the plan's shape before it is written; ``physical``: a diff's mapping, recorded;
    ``root``: ``steps`` is a broadcast's step program (:func:`export_broadcast_plan`)."""
    shape: dict = {}
    extra = None if physical is None else {"physical": [int(x) for x in physical]}
    options = {} if max_threadblocks is None else {"max_threadblocks": max_threadblocks}
    text = to_mscclpp_plan(steps, channels=channels, inplace=inplace,
                           gpus_per_node=gpus_per_node, min_bytes=min_bytes,
                           max_bytes=max_bytes, shape=shape, extra=extra, root=root,
                           **options)
    if announce is not None:
        announce(f"MSCCL++ plan: {len(text) / 1e6:.1f} MB")
    if priced is not None:
        priced(steps, shape)
    if path is None:
        return text
    emit(text, path)
    return None


def mscclpp_price(steps: StepSchedule, shape: dict, workload: Workload | None = None) -> dict:
    """A plan's price and shape: ``time_s`` = T_L·α + τ·M/B of the step schedule the plan
    replays (paper 001 §3.2; the workload's α, B, M, default 10us / 100Gbps / 1MB), T_L,
    τ (exact), and the plan's ops in the fullest threadblock, threadblocks on the fullest rank
    and the largest message (bytes) whose offsets fit 32 bits; ``root``: a broadcast's root
    (None otherwise; its T_L is the steps of its batches, τ has no meaning there)."""
    workload = workload or Workload()
    return {"root": shape.get("root"), "T_L": steps.num_steps, "tau": str(steps.tau),
            "time_s": workload.collective_time(steps.num_steps, float(steps.tau)),
            "max_ops_per_threadblock": shape["max_ops_per_threadblock"],
            "max_threadblocks_per_rank": shape["max_threadblocks_per_rank"],
            "threadblocks": shape["threadblocks"],
            "max_message_bytes": shape["max_message_bytes"],
            "message_chunks": shape["message_chunks"]}


def export_broadcast_plan(source: Source, path: str | os.PathLike | None = None, *,
                          root: int = 0, batches: int | None = None, **options):
    """The MSCCL++ plan of the periodic one-root broadcast from ``root`` that `score
    --collective broadcast --root R` schedules (one-port model), run for ``batches`` batches
    (default: its largest lag + 1, :func:`~topofinder.export.ir.steps.broadcast_steps`).
    ``options`` as :func:`export_plan`. Returns (the periodic schedule, the text or None)."""
    periodic, steps = broadcast_program(source, root=root, batches=batches)
    return periodic, export_plan(steps, path, root=root, **options)


def broadcast_program(source: Source, *, root: int = 0, batches: int | None = None,
                      periodic: PeriodicSchedule | None = None):
    """(the one-port periodic broadcast from ``root``, its step program run for ``batches``
    batches: :func:`~topofinder.export.ir.steps.broadcast_steps`), the program
    `export --collective broadcast` writes; ``periodic``: that schedule when the caller
    already solved it (not solved again)."""
    topo = load(source)
    schedule = periodic or schedule_oneroot(topo, Collective.BROADCAST, root=root)
    steps = broadcast_steps(schedule, topo, batches)
    return schedule, steps
