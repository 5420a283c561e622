"""The Python API: load a topology, score it, search a frontier, build and export schedules.

Every function takes what the command line takes and returns plain Python data: a
:class:`~topofinder.model.topology.Topology`, a JSON-ready ``dict``, a schedule object, or a
:class:`SearchResult` whose :meth:`~SearchResult.records` feed ``pandas.DataFrame`` directly.
Units follow docs/model.md: T_L in steps of α, τ in M/B (B the node bandwidth), times in
seconds.

>>> import topofinder as tf
>>> g = tf.load("C(16,{1,6})")
>>> g.n, g.degree
(16, 4)
>>> s = tf.score(g)
>>> s["T_L"], s["tau_bfb_exact"], s["bw_optimal"]
(3, '15/16', True)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.export.patch_panel import PatchPlan, plan_patch_panel
from topofinder.export.relabel import Mapping, read_mapping, relabel_schedule, relabel_topology
from topofinder.export.schedule_xml import to_msccl_xml, trees_as_steps
from topofinder.families.build import load_topology
from topofinder.finder.describe import FC_TIME_LIMIT, describe
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule
from topofinder.model.alltoall_schedule import COLLECTIVE as ALLTOALL, AllToAllSchedule
from topofinder.model.files import topology_text
from topofinder.model.schedule import COLLECTIVES, StepSchedule, parse_object, validate
from topofinder.model.topology import Topology
from topofinder.scoring.alltoall.step_schedule import alltoall_schedule
from topofinder.scoring.allgather.bfb import bfb_schedule
from topofinder.scoring.trees.tree_collectives import collective_trees
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.workload.cost import Workload
from topofinder.workload.moe import MoEWorkload, load_moe
from topofinder.workload.rank import SEARCH_FORMAT, SEARCH_VERSION, FrontierPoint
from topofinder.workload.rank import search as _search

Source = str | os.PathLike | Topology | nx.Graph


def load(source: Source, undirected: bool | None = None) -> Topology:
    """A topology from an expression (``"Pi(4,1024)"``), a topology file (edge list,
    node-link JSON, GraphML; ``undirected=True`` reads every edge as one cable, i.e. two
    arcs), a networkx graph (undirected edges become arc pairs; a ``capacity`` edge attribute
    is honoured; node names kept as labels) or a Topology (returned as it is).

    >>> load("Torus(4,4)").n
    16
    >>> import networkx as nx
    >>> load(nx.cycle_graph(5)).degree
    2
    """
    if isinstance(source, Topology):
        return source
    if isinstance(source, nx.Graph):
        if source.number_of_nodes() == 0:
            raise TopofinderError("load: the networkx graph has no nodes")
        return Topology.from_networkx(source)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TopofinderError(f"load: expected an expression, a file path, a networkx graph "
                              f"or a Topology, got {type(source).__name__}")
    return load_topology(source, undirected)


def _recipe(source: Source):
    """The construction an expression names (None for files, graphs and Topology objects)."""
    if isinstance(source, str) and not os.path.isfile(source):
        return from_expression(source)
    return None


def score(source: Source, *, alltoall: str = "bracket", alltoall_gap: float = 0.01,
          progress=None, stages=None, fc_time_limit: float | None = FC_TIME_LIMIT) -> dict:
    """Every score of one topology, as `topofinder score --json` prints it: N, d, diameter,
    BFB T_L and τ (exact as "p/q"), the bandwidth and Moore bounds, ForestColl's τ_fc, the
    all-to-all concurrent flow, and the schedule the expression names when it is not BFB.
    ``fc_time_limit`` (s, None: no limit) bounds ForestColl's max-flows; past it τ_fc is a
    certified bracket (``tau_fc_optimal`` False). ``stages(stage, done, total)`` follows long work.

    >>> score("Diamond")["schedule_tau_exact"]
    '7/8'
    """
    return describe(load(source), _recipe(source), alltoall=alltoall,
                    alltoall_gap=alltoall_gap, progress=progress, stages=stages,
                    fc_time_limit=fc_time_limit)


def schedule(source: Source, collective: str = "allgather", kind: str = "steps", *,
             low_trees: bool = False, trees_per_root: int | None = None,
             steps: int | None = None) -> StepSchedule | TreeSchedule | AllToAllSchedule:
    """The replay-validated schedule `topofinder export --what schedule` writes.

    ``kind="steps"``: the step schedule the expression names (expansions keep their
    constructions; other topologies get the optimal BFB schedule) for ``collective``.
    ``kind="trees"``: ForestColl's throughput-optimal tree schedule (allgather), or the best
    one with exactly ``trees_per_root`` trees per root.

    ``collective="alltoall"`` (steps only): the k-step all-to-all schedule of least bandwidth
    time from the time-expanded LP (k = ``steps``, default the best of diameter ..
    diameter + 2), replayed; its ``bandwidth_time`` (units of (M/N)/b) sits next to
    ``bound`` = 1/f.

    >>> s = schedule("C(16,{1,6})", "allreduce")
    >>> s.collective, s.num_steps
    ('allreduce', 6)
    >>> a = schedule("K(4)", "alltoall")
    >>> a.num_steps, a.bandwidth_time, a.bound
    (1, 1.0, 1.0)
    """
    if collective == ALLTOALL:
        if kind != "steps":
            raise TopofinderError(f"all-to-all schedules are step schedules (kind 'steps'), "
                                  f"not {kind!r}")
        if low_trees or trees_per_root is not None:
            raise TopofinderError("low_trees and trees_per_root apply to tree schedules, not "
                                  "to all-to-all")
        return alltoall_schedule(load(source), steps=steps).schedule
    if steps is not None:
        raise TopofinderError("steps (a step budget) applies to all-to-all schedules only")
    if collective not in COLLECTIVES:
        raise TopofinderError(f"collective {collective!r}; accepted: "
                              f"{', '.join(COLLECTIVES + (ALLTOALL,))}")
    if kind == "steps":
        recipe = _recipe(source)
        if recipe is None:
            topo = load(source)
            if topo.has_switches:
                raise TopofinderError(f"{topo.expr} has switch nodes; step schedules (BFB) are "
                                      f"for direct-connect fabrics, use kind='trees'")
            steps = bfb_schedule(topo, collective=collective)
        else:
            steps = collective_schedule(recipe, collective)
        validate(steps)
        return steps
    if kind != "trees":
        raise TopofinderError(f"schedule kind {kind!r}; accepted: steps, trees")
    if trees_per_root is not None and trees_per_root < 1:
        raise TopofinderError("trees_per_root must be a positive integer")
    return collective_trees(load(source), collective, prefer_low_trees=low_trees,
                            trees_per_root=trees_per_root)


def load_schedule(source: str | os.PathLike | dict, topology: Source | None = None
                  ) -> StepSchedule | TreeSchedule | AllToAllSchedule:
    """A schedule document (a path to schedule JSON, its text, or the parsed dict) on its
    topology: ``topology`` when given, else the one its ``topology`` field names.

    >>> s = schedule("Torus(4,4)")
    >>> load_schedule(s.to_json()).tau == s.tau
    True
    """
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                           and not source.lstrip().startswith("{")):
        path = os.fspath(source)
        try:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise TopofinderError(f"cannot read schedule {path}: {exc}") from None
    source = parse_object(source)
    if topology is None:
        if not isinstance(source.get("topology"), str):
            raise TopofinderError("the schedule names no topology; pass topology=")
        topology = source["topology"]
    topo = load(topology)
    if isinstance(source.get("physical"), list):      # written with export --relabel
        labels = source.get("labels")
        topo = relabel_topology(topo, Mapping(np.asarray(source["physical"], np.int64),
                                              tuple(labels) if labels else None))
    if source.get("kind") == "trees":
        return TreeSchedule.from_dict(source, topo)
    if source.get("collective") == ALLTOALL:
        return AllToAllSchedule.from_json(source, topo)
    return StepSchedule.from_json(source, topo)


def _emit(text: str, path: str | os.PathLike | None) -> str:
    if path is not None:
        write_text(path, text)
    return text


def export_topology(source: Source, fmt: str = "edgelist",
                    path: str | os.PathLike | None = None) -> str:
    """The topology file text (``fmt``: edgelist, json (node-link), graphml); also written to
    ``path`` when given.

    >>> print(export_topology("UniRing(1,3)"))  # doctest: +NORMALIZE_WHITESPACE
    # topofinder topology UniRing(1,3): N = 3, 3 arcs
    # one line per arc: u v
    0 1
    1 2
    2 0
    """
    return _emit(topology_text(load(source), fmt), path)


def relabel(sched: StepSchedule | TreeSchedule | AllToAllSchedule,
            mapping: str | os.PathLike | Mapping) -> StepSchedule | TreeSchedule | AllToAllSchedule:
    """A schedule renamed by a patch-panel diff's mapping (the CSV ``export --what
    patch-panel --diff OLD --mapping MAP.csv`` writes): node x becomes the old plan's node
    φ(x), so its sends ride the fibres as cabled after the diff. Export it with
    ``export_schedule(..., physical=mapping.physical)`` so the file records φ."""
    m = mapping if isinstance(mapping, Mapping) else read_mapping(mapping)
    return relabel_schedule(sched, m)


def export_schedule(sched: StepSchedule | TreeSchedule, fmt: str = "json",
                    path: str | os.PathLike | None = None, *, physical=None,
                    **xml_options) -> str:
    """A schedule as text: ``fmt`` json (docs/formats.md, schema ``schedule.schema.json``)
    or xml (MSCCL; ``xml_options`` as :func:`topofinder.export.schedule_xml.to_msccl_xml`).
    ``physical``: the diff mapping φ the schedule was renamed with (:func:`relabel`),
    recorded so readers rebuild its topology. Also written to ``path`` when given."""
    if isinstance(sched, AllToAllSchedule) and fmt != "json":
        raise TopofinderError(f"all-to-all schedules are exported as json, not {fmt}")
    if fmt == "json":
        doc = sched.to_dict()
        if physical is not None:
            doc["physical"] = [int(x) for x in physical]
        return _emit(json.dumps(doc) + "\n", path)
    if fmt == "xml":
        steps = sched if isinstance(sched, StepSchedule) else trees_as_steps(sched)
        if physical is not None:
            xml_options["extra"] = {"physical": " ".join(str(int(x)) for x in physical)}
        return _emit(to_msccl_xml(steps, **xml_options), path)
    raise TopofinderError(f"schedule format {fmt!r}; accepted: json, xml")


def export_patch_panel(source: Source, cabling: str = "auto", panel_size: int = 1008
                       ) -> PatchPlan:
    """The patch-panel cabling plan of a topology (write it with ``.write_csv(path)``)."""
    return plan_patch_panel(load(source), cabling, panel_size)


@dataclass(frozen=True)
class SearchResult:
    """A verified frontier for (N, d), ranked for a workload. ``frontier[recommended]`` is the
    recommendation; :meth:`to_dict` is the `topofinder search --json` document."""

    n: int
    d: int
    bidirectional_only: bool
    workload: dict
    frontier: tuple[FrontierPoint, ...]
    recommended: int
    baselines: tuple[dict, ...] | None = None
    moe: dict | None = None

    @property
    def best(self) -> FrontierPoint:
        """The recommended frontier point."""
        return self.frontier[self.recommended]

    def records(self) -> list[dict]:
        """One flat dict per frontier point (``pandas.DataFrame(result.records())``), with
        N, d and whether it is the recommendation (a MoE split as ``iteration_*`` columns)."""
        return [{"N": self.n, "d": self.d, **_flat(asdict(p)), "recommended": i == self.recommended}
                for i, p in enumerate(self.frontier)]

    def to_dict(self) -> dict:
        """The `search --json` document (docs/formats.md, schema ``search.schema.json``)."""
        doc = {"format": SEARCH_FORMAT, "version": SEARCH_VERSION,
               "N": self.n, "d": self.d, "bidirectional_only": self.bidirectional_only,
               "workload": self.workload, "frontier": [asdict(p) for p in self.frontier],
               "recommended": self.recommended}
        if self.moe is not None:
            doc["moe"] = self.moe
        if self.baselines is not None:
            doc["baselines"] = list(self.baselines)
        return doc


def search(n: int, d: int, workload: Workload | None = None, *, bidirectional: bool = False,
           jobs: int | None = None, use_cache: bool = True, progress: bool = False,
           kstep: bool = False, baselines: bool = False,
           moe: MoEWorkload | str | os.PathLike | None = None) -> SearchResult:
    """The Pareto frontier of (T_L, τ) for ``n`` nodes of degree ``d``, every point built,
    replayed and scored, ranked by allreduce time for ``workload`` (default: α = 10 µs,
    B = 100 Gbps, M = 1 MB). ``kstep``: also routed k-step schedules (`search --kstep`).
    ``baselines``: also ShiftedRing, DBT and the closest torus with speedups (``.baselines``);
    ``moe``: a MoE workload (file path or MoEWorkload): rank by iteration time.

    >>> r = search(16, 2, jobs=1)
    >>> [(p.expr, p.T_L, p.tau_exact) for p in r.frontier]
    [('L(Aff(8,3,{1,3}))', 4, '15/16')]
    """
    if moe is not None and not isinstance(moe, MoEWorkload):
        moe = load_moe(moe)
    doc = _search(n, d, workload, bidirectional=bidirectional, jobs=jobs,
                  use_cache=use_cache, progress=progress or None, kstep=kstep,
                  baselines=baselines, moe=moe)
    points = tuple(FrontierPoint(**p) for p in doc["frontier"])
    return SearchResult(doc["N"], doc["d"], doc["bidirectional_only"], doc["workload"],
                        points, doc["recommended"],
                        tuple(doc["baselines"]) if "baselines" in doc else None,
                        doc.get("moe"))


def _flat(point: dict) -> dict:
    split = point.get("iteration")
    if isinstance(split, dict):
        point = {k: v for k, v in point.items() if k != "iteration"}
        point.update({f"iteration_{k}": v for k, v in split.items()})
    return point


def records(result: SearchResult | dict) -> list[dict]:
    """Flat records of a search result or a score dict, for ``pandas.DataFrame``."""
    if isinstance(result, SearchResult):
        return result.records()
    if isinstance(result, dict):
        return [dict(result)]
    raise TopofinderError(f"records: expected a SearchResult or a score dict, got "
                          f"{type(result).__name__}")


__all__ = ["Source", "load", "score", "schedule", "load_schedule", "relabel", "search",
           "export_topology",
           "export_schedule", "export_patch_panel", "SearchResult", "records", "Workload",
           "Topology", "StepSchedule", "TreeSchedule", "AllToAllSchedule", "TopofinderError"]
