"""Schedules: build the one an expression names, read one back, rename it by a diff's
mapping, and write it as JSON, MSCCL XML, npz or an MSCCL++ plan (docs/formats.md).

>>> s = schedule("C(16,{1,6})", "allreduce")
>>> s.collective, s.num_steps
('allreduce', 6)
"""

from __future__ import annotations

import os

from topofinder.api.plans import export_broadcast_plan, export_plan
from topofinder.api.topology import Source, emit, load, mapping, recipe
from topofinder.compute.output import write_blocks
from topofinder.model.documents import check_schedule_document
from topofinder.model.inputs import read_input
from topofinder.errors import TopofinderError
from topofinder.export.npz import save_npz
from topofinder.cabling.relabel import (Mapping, document_mapping, relabel_schedule,
                                        relabel_topology)
from topofinder.export.ir.steps import trees_as_steps
from topofinder.export.msccl.fit import check_fits
from topofinder.export.msccl.rules import shape as xml_shape
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.families.build import document_topology
from topofinder.finder.verify import (REPLAY_LIMIT, allgather_schedule, collective_schedule,
                                      symmetric_collective)
from topofinder.model.alltoall_schedule import COLLECTIVE as ALLTOALL, AllToAllSchedule
from topofinder.model.schedule import (COLLECTIVES, SEND_COLUMNS, StepSchedule, document_blocks,
                                       dumps_document, parse_object, validate)
from topofinder.model.symmetric import OrbitSchedule, replay_by_symmetry
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.scoring.alltoall.step_schedule import alltoall_schedule
from topofinder.scoring.allgather.bfb import bfb_schedule
from topofinder.scoring.trees.tree_collectives import collective_trees
from topofinder.model.collectives import Collective
from topofinder.workload.cost import Workload, parse_time

Schedule = StepSchedule | TreeSchedule | AllToAllSchedule | OrbitSchedule
#: Schedule file formats: json (schema schedule.schema.json), xml (MSCCL), npz (binary).
SCHEDULE_FORMATS = ("json", "xml", "npz", "mscclpp")
#: A step schedule of at least this many send rows (~30 MB of JSON) has its size stated
#: before it is written as json or npz (MSCCL XML and orbit schedules always have).
ANNOUNCE_ROWS = 1_000_000


def schedule(source: Source, collective: str = Collective.ALLGATHER, kind: str = "steps", *,
             low_trees: bool = False, trees_per_root: int | None = None,
             steps: int | None = None) -> Schedule:
    """The replay-validated schedule `topofinder export --what schedule` writes.

    ``kind="steps"``: the step schedule the expression names (expansions keep their
    constructions; other topologies get the optimal BFB schedule) for ``collective``.
    ``kind="trees"``: ForestColl's throughput-optimal tree schedule (allgather), or the best
    one with exactly ``trees_per_root`` trees per root.

    ``collective="alltoall"`` (steps only): the k-step all-to-all schedule of least bandwidth
    time from the time-expanded LP (k = ``steps``, default the best of diameter ..
    diameter + 2), replayed; its ``bandwidth_time`` (units of (M/N)/b) sits next to
    ``bound`` = 1/f.

    >>> a = schedule("K(4)", "alltoall")
    >>> a.num_steps, a.bandwidth_time, a.bound
    (1, 1.0, 1.0)
    """
    if collective == ALLTOALL:
        if kind != "steps":
            raise TopofinderError(f"all-to-all schedules are step schedules, not {kind!r}: "
                                  f"--kind trees applies to allgather, reduce-scatter and "
                                  f"allreduce")
        if low_trees or trees_per_root is not None:
            raise TopofinderError("--low-trees and --trees-per-root apply to tree schedules, "
                                  "not to all-to-all")
        return alltoall_schedule(load(source), steps=steps).schedule
    if steps is not None:
        raise TopofinderError("--steps applies to --collective alltoall (a step budget of the "
                              "all-to-all schedule)")
    if collective not in COLLECTIVES:
        raise TopofinderError(f"collective {collective!r}; accepted: "
                              f"{', '.join(COLLECTIVES + (ALLTOALL,))}")
    if kind == "steps":
        named = recipe(source)
        topo = load(source)
        if topo.n * topo.n * topo.degree > REPLAY_LIMIT:
            return _orbit_form(named, topo, collective)
        if named is None:
            if topo.has_switches:
                raise TopofinderError(f"{topo.expr} has switch nodes; step schedules (BFB) are "
                                      f"for direct-connect fabrics, use kind='trees'")
            built = bfb_schedule(topo, collective=collective)
        else:
            built = collective_schedule(named, collective)
        validate(built)
        return built
    if kind != "trees":
        raise TopofinderError(f"schedule kind {kind!r}; accepted: steps, trees")
    if trees_per_root is not None and trees_per_root < 1:
        raise TopofinderError("trees_per_root must be a positive integer")
    return collective_trees(load(source), collective, prefer_low_trees=low_trees,
                            trees_per_root=trees_per_root)


def _beyond_replay(source: Source) -> bool:
    """N²·d of the topology beyond REPLAY_LIMIT: no step schedule is built whole."""
    topo = load(source)
    return topo.n * topo.n * topo.degree > REPLAY_LIMIT


def _orbit_form(named, topo, collective: str) -> OrbitSchedule:
    """The ``collective`` of a topology beyond REPLAY_LIMIT (N²·d send rows do not fit in
    memory) in orbit form (finder.verify.symmetric_collective: the allgather, its
    reduce-scatter, or both as an allreduce), replayed by symmetry
    (topofinder.model.symmetric); TopofinderError naming the size when it has none."""
    size = (f"{topo.expr} has N = {topo.n}, d = {topo.degree}: its step schedule has about "
            f"N²·d = {topo.n * topo.n * topo.degree:.2g} send rows, above the "
            f"{REPLAY_LIMIT:.2g} built in memory")
    orbit = None if named is None else symmetric_collective(named, collective)
    if orbit is None:
        raise TopofinderError(f"{size}, and its {collective} has no orbit form (one source "
                              f"per orbit of a free automorphism group: circulants, their "
                              f"line graphs and powers, products with such factors)")
    replay_by_symmetry(orbit)
    return orbit


def schedule_rows(sched: StepSchedule | OrbitSchedule) -> int:
    """Send rows of the whole step schedule (an orbit schedule's equivariant extension: its
    representatives' rows × |Γ| = N / orbits, as Γ acts freely)."""
    if isinstance(sched, OrbitSchedule):
        return sched.num_sends * (sched.topology.n // sched.action.reps.size)
    return sched.num_sends


def json_bytes(sched: StepSchedule | OrbitSchedule) -> int:
    """About how many bytes the step JSON of ``sched`` takes: its rows × the text of one row
    (brackets, separators and the digits of its largest values)."""
    widths = [len(str(x)) for x in (sched.num_steps, sched.topology.n - 1, sched.shard_chunks)]
    per_row = 2 + 2 * (len(SEND_COLUMNS) - 1) + 2 + widths[0] + 3 * widths[1] + 2 * widths[2]
    return schedule_rows(sched) * per_row


def load_schedule(source: str | os.PathLike | dict, topology: Source | None = None) -> Schedule:
    """A schedule document (a path to schedule JSON, its text, or the parsed dict) on its
    topology: ``topology`` when given, else the one its ``topology`` field names.

    >>> s = schedule("Torus(4,4)")
    >>> load_schedule(s.to_json()).tau == s.tau
    True
    """
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                           and not source.lstrip().startswith("{")):
        source = read_input(source, "schedule")
    source = parse_object(source)
    check_schedule_document(source, "schedule")            # one line per malformation
    if topology is None:
        if not isinstance(source.get("topology"), str):
            raise TopofinderError("the schedule names no topology; pass topology=")
        topo = document_topology(source["topology"], "schedule")
    else:
        topo = load(topology)
    if source.get("physical") is not None:            # written with export --relabel
        topo = relabel_topology(topo, document_mapping(source["physical"],
                                                       source.get("labels"), "schedule"))
    if source.get("kind") == "trees":
        return TreeSchedule.from_dict(source, topo)
    if source.get("collective") == ALLTOALL:
        return AllToAllSchedule.from_json(source, topo)
    return StepSchedule.from_json(source, topo)


def relabel(sched: Schedule, renaming: str | os.PathLike | Mapping) -> Schedule:
    """A schedule renamed by a patch-panel diff's mapping (the CSV ``export --what
    patch-panel --diff OLD --mapping MAP.csv`` writes): node x becomes the old plan's node
    φ(x), so its sends ride the fibres as cabled after the diff. Export it with
    ``export_schedule(..., physical=mapping.physical)`` so the file records φ."""
    return relabel_schedule(sched, mapping(renaming))


def export_schedule(sched: Schedule, fmt: str = "json", path: str | os.PathLike | None = None,
                    *, physical=None, announce=None, priced=None,
                    **xml_options) -> str | None:
    """A schedule as text: ``fmt`` json (docs/formats.md, schema ``schedule.schema.json``)
    or mscclpp (an MSCCL++ execution plan, :func:`topofinder.api.plans.export_plan`, which
    takes ``xml_options`` channels, inplace, gpus_per_node, min_bytes, max_bytes; ``priced``
    gets the schedule and the plan's shape) or xml (MSCCL, the legacy runtime's format;
    ``xml_options`` as :func:`topofinder.export.msccl.writer.to_msccl_xml`,
    refused before anything is written when it does not fit the runtime's limits); returned
    when ``path`` is None, else streamed to ``path`` ("-": standard output; JSON block by
    block, never held whole) and None returned. ``npz`` (step, orbit or tree schedules) is
    binary: written to ``path`` (a file, required). An orbit schedule (N²·d beyond
    REPLAY_LIMIT) is written as npz only; json and xml are refused naming its size.
    ``physical``: the diff mapping φ the schedule was renamed with (:func:`relabel`),
    recorded so readers rebuild its topology (json, xml). ``announce``: called with one line
    stating the size (rows, bytes) before anything is written (the CLI prints it): for XML
    and orbit schedules always, for json and npz from ANNOUNCE_ROWS send rows. ``priced``
    (XML): called with the step schedule, the XML text and its shape (the writer's figures,
    ``shape`` of :func:`msccl_price`) before it is written (the CLI states
    :func:`msccl_price`)."""
    if fmt not in SCHEDULE_FORMATS:
        raise TopofinderError(f"schedule format {fmt!r}; accepted are "
                              f"{', '.join(SCHEDULE_FORMATS)}")
    if isinstance(sched, AllToAllSchedule) and fmt != "json":
        raise TopofinderError(f"all-to-all schedules are written as json, not {fmt}")
    announce = announce or (lambda line: None)
    if isinstance(sched, OrbitSchedule) and fmt != "npz":
        n = sched.topology.n
        raise TopofinderError(
            f"{sched.topology.expr}: its {sched.collective} has {schedule_rows(sched):,} send "
            f"rows (about {_size(json_bytes(sched))} as step JSON); {fmt} is written only "
            f"when N²·d ≤ {REPLAY_LIMIT:.2g} (here {n * n * sched.topology.degree:.2g}); "
            f"write --format npz (orbit form, {sched.num_sends:,} rows)")
    if fmt == "npz":
        if path is None or os.fspath(path) == "-":
            raise TopofinderError("schedule format npz is binary; give an output file "
                                  "(-o, path=)")
        if isinstance(sched, OrbitSchedule) or (isinstance(sched, StepSchedule)
                                                and sched.num_sends >= ANNOUNCE_ROWS):
            announce(_npz_size(sched))
        save_npz(sched, path)
        return None
    if fmt == "json":
        doc = sched.to_dict(_rows=True) if isinstance(sched, StepSchedule) else sched.to_dict()
        if physical is not None:
            doc["physical"] = [int(x) for x in physical]
        if path is None:
            return dumps_document(doc, "\n")
        if isinstance(sched, StepSchedule) and sched.num_sends >= ANNOUNCE_ROWS:
            announce(f"schedule JSON: {sched.num_sends:,} send rows, about "
                     f"{_size(json_bytes(sched))}")
        write_blocks(path, document_blocks(doc, "\n"))
        return None
    steps = sched if isinstance(sched, StepSchedule) else trees_as_steps(sched)
    if fmt == "mscclpp":
        return export_plan(steps, path, physical=physical, announce=announce, priced=priced,
                           **xml_options)
    if physical is not None:
        xml_options["extra"] = {"physical": " ".join(str(int(x)) for x in physical)}
    shape: dict = {}
    text = to_msccl_xml(steps, shape=shape, **xml_options)
    size = len(text) if text.isascii() else len(text.encode())     # (isascii: no scan)
    announce(f"MSCCL XML: {size / 1e6:.1f} MB")
    if priced is not None:
        priced(steps, text, shape)
    if path is None:
        return text
    emit(text, path)
    return None


def _size(num_bytes: int) -> str:
    return f"{num_bytes / 1e9:,.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:,.1f} MB"


def _npz_size(sched) -> str:
    """One line: what a schedule .npz holds, before it is written."""
    if isinstance(sched, OrbitSchedule):
        return (f"schedule npz ({sched.collective}, orbit form): {sched.num_sends:,} send rows of "
                f"{sched.action.reps.size} representative source(s) and "
                f"{len(sched.generators)} generator(s) of N = {sched.topology.n}, standing for "
                f"{schedule_rows(sched):,} rows; about "
                f"{(sched.num_sends * 6 + len(sched.generators) * sched.topology.n) * 4 / 1e6:,.1f}"
                f" MB before compression")
    return (f"schedule npz: {sched.num_sends:,} send rows, at most "
            f"{sched.num_sends * 6 * 8 / 1e6:,.1f} MB before compression")


def export_schedule_of(source: Source, fmt: str = "json", path: str | os.PathLike | None = None,
                       *, collective: str = Collective.ALLGATHER, kind: str = "steps",
                       low_trees: bool = False, trees_per_root: int | None = None,
                       steps: int | None = None, relabel: str | os.PathLike | Mapping | None = None,
                       announce=None, priced=None,
                       **xml_options) -> tuple[Schedule, str | None]:
    """What `topofinder export SOURCE --what schedule` does: :func:`schedule`, renamed by a
    diff's mapping (``relabel``), written by :func:`export_schedule`. For XML of an
    expression the runtime's limits are checked first on the allgather (cheap, before the
    whole schedule is built); all-to-all schedules, tree schedules other than the allgather
    and those routed through switches are json only. ``announce``, ``priced``: as for
    :func:`export_schedule`. Returns the schedule and the text (None for npz)."""
    if fmt not in SCHEDULE_FORMATS:
        raise TopofinderError(f"schedule format {fmt!r}; accepted are "
                              f"{', '.join(SCHEDULE_FORMATS)}")
    if collective == ALLTOALL and fmt != "json":     # refused before the LP is solved
        raise TopofinderError(f"all-to-all schedules are written as json, not {fmt}")
    if collective == Collective.BROADCAST:
        if fmt != "mscclpp" or kind != "steps" or relabel is not None:
            raise TopofinderError("export writes broadcast as an MSCCL++ plan (--format "
                                  "mscclpp, no --relabel); its periodic schedule: score "
                                  "--collective broadcast --schedule FILE")
        return export_broadcast_plan(source, path, announce=announce, priced=priced,
                                     **xml_options)
    named = recipe(source) if fmt == "xml" and kind == "steps" else None
    if named is not None and not _beyond_replay(source):
        check_fits(allgather_schedule(named), xml_options.get("channels", 1),
                   xml_options.get("runtime", "msccl-executor"), xml_options.get("max_steps"),
                   collective=collective, interleave=xml_options.get("interleave"))
    built = schedule(source, collective, kind, low_trees=low_trees,
                     trees_per_root=trees_per_root, steps=steps)
    renaming = None if relabel is None else mapping(relabel)
    if renaming is not None:
        built = relabel_schedule(built, renaming)
    if kind == "trees" and fmt != "json":
        if collective != Collective.ALLGATHER and fmt not in ("xml", "mscclpp"):
            raise TopofinderError(f"{collective} tree schedules are written as json, xml or "
                                  "mscclpp")
        if built.topology.has_switches:
            raise TopofinderError("tree schedules with routes through switches are written as "
                                  "json")
    text = export_schedule(built, fmt, path,
                           physical=None if renaming is None else renaming.physical,
                           announce=announce, priced=priced,
                           **(xml_options if fmt in ("xml", "mscclpp") else {}))
    return built, text


def msccl_price(sched: Schedule, text: str, workload: Workload | None = None, *,
                step_overhead: str | float = 0.0, tb_overhead: str | float = 0.0,
                shape: dict | None = None) -> dict:
    """An exported MSCCL XML's shape and price, the runtime's overhead stated apart:
    ``time_s`` = T_L·α + τ·M/B of the step schedule the XML replays (paper 001 §3.2; the
    workload's α, B and sizes, default 10us / 100Gbps / 1MB) and ``overhead_s`` =
    step_overhead · (most steps in one threadblock: a threadblock runs its instructions in
    sequence, threadblocks run side by side) + tb_overhead · (most threadblocks on one rank).
    No per-instruction or per-threadblock figure of msccl-executor-nccl is published, so both
    default to 0 (docs/formats.md names NCCL's own per-step latencies as a guide); give them
    as seconds or strings ("2us"). ``shape``: the XML's shape as the writer gave it
    (``to_msccl_xml(shape=...)``), else counted on the text."""
    steps = sched if isinstance(sched, StepSchedule) else trees_as_steps(sched)
    workload = workload or Workload()
    per_step, per_tb = (parse_time(x) if isinstance(x, str) else float(x)
                        for x in (step_overhead, tb_overhead))
    if min(per_step, per_tb) < 0:
        raise TopofinderError("the runtime overheads must not be negative")
    info = shape or xml_shape(text)
    overhead = per_step * info["max_steps_per_tb"] + per_tb * info["max_tbs_per_gpu"]
    return {"max_steps_per_tb": info["max_steps_per_tb"],
            "max_tbs_per_rank": info["max_tbs_per_gpu"], "threadblocks": info["threadblocks"],
            "T_L": steps.num_steps, "tau": str(steps.tau),
            "time_s": workload.collective_time(steps.num_steps, float(steps.tau)),
            "step_overhead_s": per_step, "tb_overhead_s": per_tb, "overhead_s": overhead}
