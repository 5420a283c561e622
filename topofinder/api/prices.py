"""Both prices of a schedule (docs/model.md): lock-step ``time_s`` = T_L·α + τ·M/B and
dependency-driven ``async_s`` (topofinder.scoring.async_time), for `score` and `export`; the
Chakra / ASTRA-sim export (topofinder.export.chakra).

>>> p = schedule_price(schedule("C(16,{1,6})"), Workload.from_strings("1us", "100Gbps", "1MB"))
>>> round(p["time_s"] * 1e6, 2), p["async_s"] == p["time_s"]
(81.64, True)
"""

from __future__ import annotations

import os
from dataclasses import replace

from topofinder.api.schedules import Schedule, schedule
from topofinder.api.topology import Source, load
from topofinder.errors import TopofinderError
from topofinder.export.chakra import COMM_TYPE, write_chakra
from topofinder.export.ir.steps import trees_as_steps
from topofinder.finder.verify import REPLAY_LIMIT
from topofinder.model.alltoall_schedule import AllToAllSchedule
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.model.symmetric import OrbitSchedule
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.scoring.async_time import async_profile
from topofinder.workload.cost import Workload

#: The collectives `score` prices (fields named with "-" as "_").
PRICED = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)


def schedule_price(sched: Schedule, workload: Workload | None = None) -> dict:
    """{expr, collective, T_L, time_s, async_s} of a step, orbit, tree (its step form, as MSCCL runs it) or
    all-to-all schedule for ``workload`` (default 10us, 100Gbps, 1MB): the lock-step price
    (all-to-all: k·α + Σ_t max load·(M/N)/b) and the dependency-driven time, both the
    expectation over the size profile; ``async_s`` None beyond the replay limit
    (:func:`within_replay`) or past 2^62 ticks."""
    workload = workload or Workload()
    steps = trees_as_steps(sched) if isinstance(sched, TreeSchedule) or hasattr(
        sched, "reduce_scatter") else sched
    if isinstance(steps, AllToAllSchedule):
        n, d = steps.topology.n, steps.topology.node_bandwidth
        lock = sum(w * (steps.num_steps * workload.alpha_s + steps.bandwidth_time * (m / n)
                        / (workload.bandwidth_Bps / d)) for m, w in workload.sizes)
    else:
        lock = workload.collective_time(steps.num_steps, float(steps.tau))
    timed = None
    if within_replay(steps.topology):
        try:
            timed = async_profile(steps, workload)
        except TopofinderError:                  # beyond 2^62 ticks (~4600 s): not timed
            timed = None
    return {"expr": steps.topology.expr, "collective": steps.collective,
            "T_L": steps.num_steps, "time_s": lock, "async_s": timed}


def broadcast_price(steps: StepSchedule, workload: Workload | None = None) -> dict:
    """{expr, collective, T_L, tau, time_s, async_s} of the step program a one-root broadcast
    runs (`export --collective broadcast`; topofinder.export.ir.steps.broadcast_steps): an
    allgather of the root's shard only, and that shard is the whole message M. So τ in M/B is
    N × the program's allgather τ (each piece M/(B·W) bytes), and the dependency-driven time
    replays the program as an allgather of N·M; both the expectation over the size profile,
    ``async_s`` None past 2^62 ticks or 10^8 piece states."""
    workload = workload or Workload()
    n = steps.topology.n
    tau = steps.tau * n
    whole = replace(workload, sizes=tuple((m * n, w) for m, w in workload.sizes))
    try:
        timed = async_profile(steps, whole)
    except TopofinderError:
        timed = None
    return {"expr": steps.topology.expr, "collective": Collective.BROADCAST,
            "T_L": steps.num_steps, "tau": tau,
            "time_s": workload.collective_time(steps.num_steps, float(tau)), "async_s": timed}


def within_replay(topo) -> bool:
    """Whether dependency-driven times are computed: N²·d ≤ REPLAY_LIMIT (beyond it the orbit
    forms of all three collectives take minutes and gigabytes to build and replay —
    Torus(316,316) over 600 s and 6 GB — so the fields are null there)."""
    return topo.n * topo.n * topo.degree <= REPLAY_LIMIT


def collective_prices(source: Source, workload: Workload | None = None) -> dict:
    """``<collective>_time_s`` and ``<collective>_async_s`` of the allgather, reduce-scatter
    and allreduce step schedules `export --what schedule` writes for ``source``; null where
    no schedule is built, and for topologies beyond the replay limit (:func:`within_replay`)."""
    out = {}
    if not within_replay(load(source)):
        return {f"{c.replace('-', '_')}_{k}": None for c in PRICED for k in ("time_s", "async_s")}
    for collective in PRICED:
        name = collective.replace("-", "_")
        try:
            price = schedule_price(schedule(source, collective), workload)
        except TopofinderError:
            price = {"time_s": None, "async_s": None}
        out[f"{name}_time_s"] = price["time_s"]
        out[f"{name}_async_s"] = price["async_s"]
    return out


def export_chakra(source: Source, directory: str | os.PathLike,
                  collective: str = Collective.ALLGATHER, workload: Workload | None = None, *,
                  kind: str = "steps", low_trees: bool = False,
                  trees_per_root: int | None = None, prefix: str | None = None) -> dict:
    """What `topofinder export SOURCE --what schedule --format chakra -o DIR` does: the step
    schedule :func:`schedule` builds (a tree schedule as its step form) written as ASTRA-sim's
    custom collective — one Chakra ET per rank, the workload ET, system, network and memory
    configuration (topofinder.export.chakra; docs/formats.md) for ``workload``'s α, B and
    its one size M. Returns what was written and both prices of the schedule."""
    workload = workload or Workload()
    if len(workload.sizes) != 1:
        raise TopofinderError("the Chakra export takes one size (--size), not a weighted list")
    if collective not in COMM_TYPE:
        raise TopofinderError(f"the Chakra export writes {', '.join(COMM_TYPE)}, not "
                              f"{collective}")
    sched = schedule(source, collective, kind, low_trees=low_trees,
                     trees_per_root=trees_per_root)
    if isinstance(sched, OrbitSchedule):
        raise TopofinderError(f"{sched.topology.expr}: N²·d beyond the replay limit; a Chakra "
                              f"trace holds every send of every rank, write --format npz")
    steps = sched if isinstance(sched, StepSchedule) else trees_as_steps(sched)
    if steps.topology.has_switches:
        raise TopofinderError("the Chakra export is for direct-connect fabrics (no switches)")
    info = write_chakra(steps, directory, size=workload.sizes[0][0], alpha_s=workload.alpha_s,
                        bandwidth_Bps=workload.bandwidth_Bps, prefix=prefix)
    info.update(schedule_price(steps, workload))
    return info
