"""Schedules: build the one an expression names, read one back, rename it by a diff's
mapping, and write it as JSON, MSCCL XML or npz (docs/formats.md).

>>> s = schedule("C(16,{1,6})", "allreduce")
>>> s.collective, s.num_steps
('allreduce', 6)
"""

from __future__ import annotations

import os


from topofinder.api.topology import Source, emit, load, mapping, recipe
from topofinder.model.inputs import read_input
from topofinder.errors import TopofinderError
from topofinder.export.npz import save_npz
from topofinder.cabling.relabel import (Mapping, document_mapping, relabel_schedule,
                                        relabel_topology)
from topofinder.export.schedule_xml import check_fits, to_msccl_xml, trees_as_steps
from topofinder.families.build import document_topology
from topofinder.finder.verify import allgather_schedule, collective_schedule
from topofinder.model.alltoall_schedule import COLLECTIVE as ALLTOALL, AllToAllSchedule
from topofinder.model.schedule import (COLLECTIVES, StepSchedule, dumps_document, parse_object,
                                       validate)
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.scoring.alltoall.step_schedule import alltoall_schedule
from topofinder.scoring.allgather.bfb import bfb_schedule
from topofinder.scoring.trees.tree_collectives import collective_trees
from topofinder.model.collectives import Collective

Schedule = StepSchedule | TreeSchedule | AllToAllSchedule
#: Schedule file formats: json (schema schedule.schema.json), xml (MSCCL), npz (binary).
SCHEDULE_FORMATS = ("json", "xml", "npz")


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
        if named is None:
            topo = load(source)
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
                    *, physical=None, announce=None, **xml_options) -> str | None:
    """A schedule as text: ``fmt`` json (docs/formats.md, schema ``schedule.schema.json``)
    or xml (MSCCL; ``xml_options`` as :func:`topofinder.export.schedule_xml.to_msccl_xml`,
    refused before anything is written when it does not fit the runtime's limits); also
    written to ``path`` when given ("-": standard output). ``npz`` (step or tree schedules)
    is binary: written to ``path`` (a file, required), returns None. ``physical``: the diff
    mapping φ the schedule was renamed with (:func:`relabel`), recorded so readers rebuild its
    topology (json, xml). ``announce``: called with the text before it is written (the CLI
    states an XML's size)."""
    if fmt not in SCHEDULE_FORMATS:
        raise TopofinderError(f"schedule format {fmt!r}; accepted are "
                              f"{', '.join(SCHEDULE_FORMATS)}")
    if isinstance(sched, AllToAllSchedule) and fmt != "json":
        raise TopofinderError(f"all-to-all schedules are written as json, not {fmt}")
    if fmt == "npz":
        if path is None or os.fspath(path) == "-":
            raise TopofinderError("schedule format npz is binary; give an output file "
                                  "(-o, path=)")
        save_npz(sched, path)
        return None
    if fmt == "json":
        doc = sched.to_dict(_rows=True) if isinstance(sched, StepSchedule) else sched.to_dict()
        if physical is not None:
            doc["physical"] = [int(x) for x in physical]
        return emit(dumps_document(doc, "\n"), path)
    steps = sched if isinstance(sched, StepSchedule) else trees_as_steps(sched)
    if physical is not None:
        xml_options["extra"] = {"physical": " ".join(str(int(x)) for x in physical)}
    text = to_msccl_xml(steps, **xml_options)
    if announce is not None:
        announce(text)
    return emit(text, path)


def export_schedule_of(source: Source, fmt: str = "json", path: str | os.PathLike | None = None,
                       *, collective: str = Collective.ALLGATHER, kind: str = "steps",
                       low_trees: bool = False, trees_per_root: int | None = None,
                       steps: int | None = None, relabel: str | os.PathLike | Mapping | None = None,
                       announce=None, **xml_options) -> tuple[Schedule, str | None]:
    """What `topofinder export SOURCE --what schedule` does: :func:`schedule`, renamed by a
    diff's mapping (``relabel``), written by :func:`export_schedule`. For XML of an
    expression the runtime's limits are checked first on the allgather (cheap, before the
    whole schedule is built); all-to-all schedules, tree schedules other than the allgather
    and those routed through switches are json only. ``announce``: as for
    :func:`export_schedule`. Returns the schedule and the text (None for npz)."""
    if fmt not in SCHEDULE_FORMATS:
        raise TopofinderError(f"schedule format {fmt!r}; accepted are "
                              f"{', '.join(SCHEDULE_FORMATS)}")
    if collective == ALLTOALL and fmt != "json":     # refused before the LP is solved
        raise TopofinderError(f"all-to-all schedules are written as json, not {fmt}")
    named = recipe(source) if fmt == "xml" and kind == "steps" else None
    if named is not None:
        check_fits(allgather_schedule(named), xml_options.get("channels", 1),
                   xml_options.get("runtime", "msccl-executor"), xml_options.get("max_steps"),
                   collective=collective)
    built = schedule(source, collective, kind, low_trees=low_trees,
                     trees_per_root=trees_per_root, steps=steps)
    renaming = None if relabel is None else mapping(relabel)
    if renaming is not None:
        built = relabel_schedule(built, renaming)
    if kind == "trees" and fmt != "json":
        if collective != Collective.ALLGATHER and fmt != "xml":
            raise TopofinderError(f"{collective} tree schedules are written as json or xml")
        if built.topology.has_switches:
            raise TopofinderError("tree schedules with routes through switches are written as "
                                  "json")
    text = export_schedule(built, fmt, path,
                           physical=None if renaming is None else renaming.physical,
                           announce=announce,
                           **(xml_options if fmt == "xml" else {}))
    return built, text
