"""Search: the verified Pareto frontier for (N, d), ranked for a workload, as a
:class:`SearchResult` (the `topofinder search --json` document, records for pandas, a plot).

>>> r = search(16, 2, jobs=1)
>>> [(p.expr, p.T_L, p.tau_exact) for p in r.frontier]
[('L(Aff(8,3,{1,3}))', 4, '15/16')]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from decimal import Decimal

from topofinder.errors import TopofinderError
from topofinder.export.plot import plot_frontier
from topofinder.families.build import load_topology
from topofinder.workload.cost import Workload
from topofinder.workload.hierarchy import hierarchical_score, parse_intra
from topofinder.workload.moe import MoEWorkload, load_moe
from topofinder.workload.rank import SEARCH_FORMAT, SEARCH_VERSION, FrontierPoint
from topofinder.workload.rank import search as _search

#: The servers' internal fabric when none is named (``search(gpus_per_node=...)``).
DEFAULT_INTRA = "NVSwitch 300GB/s"


@dataclass(frozen=True)
class Hierarchy:
    """Each frontier topology composed with servers of ``gpus_per_node`` GPUs on the
    ``intra`` fabric and scored by ForestColl's optimum over all GPUs (paper 002 §4):
    ``scores[i]`` holds point i's hier_tau_fc (M/B_GPU), hier_algbw_GBps, gpus,
    gpu_bandwidth, hier_cut_gpus; ``recommended`` the point of highest GPU algbw."""

    gpus_per_node: int
    intra: str
    scores: tuple[dict, ...]
    recommended: int

    def describe(self) -> dict:
        return {"gpus_per_node": self.gpus_per_node, "intra": self.intra,
                "recommended": self.recommended}


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
    hierarchy: Hierarchy | None = None

    @property
    def best(self) -> FrontierPoint:
        """The recommended frontier point."""
        return self.frontier[self.recommended]

    def _points(self) -> list[dict]:
        points = [asdict(p) for p in self.frontier]
        if self.hierarchy is not None:
            for p, extra in zip(points, self.hierarchy.scores):
                p.update(extra)
        return points

    def records(self) -> list[dict]:
        """One flat dict per frontier point (``pandas.DataFrame(result.records())``), with
        N, d and whether it is the recommendation (a MoE split as ``iteration_*`` columns)."""
        return [{"N": self.n, "d": self.d, **_flat(p), "recommended": i == self.recommended}
                for i, p in enumerate(self._points())]

    def to_dict(self) -> dict:
        """The `search --json` document (docs/formats.md, schema ``search.schema.json``)."""
        doc = {"format": SEARCH_FORMAT, "version": SEARCH_VERSION,
               "N": self.n, "d": self.d, "bidirectional_only": self.bidirectional_only,
               "workload": self.workload, "frontier": self._points(),
               "recommended": self.recommended}
        if self.moe is not None:
            doc["moe"] = self.moe
        if self.baselines is not None:
            doc["baselines"] = list(self.baselines)
        if self.hierarchy is not None:
            doc["hierarchy"] = self.hierarchy.describe()
        return doc


def network_workload(workload: Workload | None, moe: MoEWorkload | None) -> Workload:
    """``workload`` (default: the command line's, ``Workload.from_strings()``: α = 10us,
    B = 100Gbps, M = 1MB) with the α and bandwidth of the MoE file's ``[network]`` table when
    it has one (they win over the options)."""
    workload = workload or Workload.from_strings()
    if moe is None or (moe.alpha_s is None and moe.bandwidth_Bps is None):
        return workload
    return replace(workload,
                   alpha_s=workload.alpha_s if moe.alpha_s is None else moe.alpha_s,
                   bandwidth_Bps=(workload.bandwidth_Bps if moe.bandwidth_Bps is None
                                  else moe.bandwidth_Bps),
                   labels={"size": workload.labels.get("size", "")})


def _bandwidth_text(workload: Workload) -> str:
    """The node bandwidth as the hierarchy composer reads it: the label given, else MB/s."""
    label = workload.labels.get("bandwidth")
    return label if label else f"{Decimal(workload.bandwidth_Bps) / Decimal(10 ** 6):f}MB/s"


def hierarchy(frontier: tuple[FrontierPoint, ...], gpus_per_node: int, intra: str,
              workload: Workload) -> Hierarchy:
    """ForestColl on each frontier topology composed with the servers' internal fabric; the
    best point has the highest GPU algbw (ties: the faster allreduce)."""
    parse_intra(intra)
    server_bandwidth = _bandwidth_text(workload)
    scores = tuple(hierarchical_score(load_topology(p.expr), gpus_per_node, intra,
                                      server_bandwidth) for p in frontier)
    best = max(range(len(frontier)), key=lambda i: (scores[i]["hier_algbw_GBps"],
                                                    -frontier[i].allreduce_time_s))
    return Hierarchy(gpus_per_node, intra, scores, best)


def search(n: int, d: int, workload: Workload | None = None, *, bidirectional: bool = False,
           jobs: int | None = None, use_cache: bool = True, progress: bool = False,
           kstep: bool = False, baselines: bool = False,
           moe: MoEWorkload | str | os.PathLike | None = None,
           gpus_per_node: int | None = None, intra: str = DEFAULT_INTRA,
           baseline_progress: Callable[[int, int, list[str]], None] | None = None
           ) -> SearchResult:
    """The Pareto frontier of (T_L, τ) for ``n`` nodes of degree ``d``, every point built,
    replayed and scored, ranked by allreduce time for ``workload`` (default: α = 10 µs,
    B = 100 Gbps, M = 1 MB). ``kstep``: also routed k-step schedules (`search --kstep`).
    ``baselines``: also ShiftedRing, DBT and the closest torus with speedups (``.baselines``;
    ``baseline_progress(done, count, exprs)`` follows them); ``moe``: a MoE workload (file
    path or MoEWorkload): rank by iteration time, with its ``[network]`` α and bandwidth
    (:func:`network_workload`). ``gpus_per_node``: also score every point as a cluster of
    servers with that many GPUs on the ``intra`` fabric (``.hierarchy``)."""
    if jobs is not None and jobs < 1:
        raise TopofinderError(f"search: --jobs must be >= 1, got {jobs}")
    if moe is not None and not isinstance(moe, MoEWorkload):
        moe = load_moe(moe)
    workload = network_workload(workload, moe)
    doc = _search(n, d, workload, bidirectional=bidirectional, jobs=jobs,
                  use_cache=use_cache, progress=progress or None, kstep=kstep,
                  baselines=baselines, moe=moe, baseline_progress=baseline_progress)
    points = tuple(FrontierPoint(**p) for p in doc["frontier"])
    return SearchResult(doc["N"], doc["d"], doc["bidirectional_only"], doc["workload"],
                        points, doc["recommended"],
                        tuple(doc["baselines"]) if "baselines" in doc else None,
                        doc.get("moe"),
                        None if gpus_per_node is None else
                        hierarchy(points, gpus_per_node, intra, workload))


def plot(result: SearchResult, path: str | os.PathLike) -> None:
    """Draw T_L against τ with the bounds, the recommendation and the baselines (.png, .svg)."""
    plot_frontier(result.to_dict(), os.fspath(path))


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
