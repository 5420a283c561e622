"""Robustness on the frontier (`search --robust`): each point's worst single failure.

For every frontier point the single fibre (cable) and node failures are surveyed
(:func:`topofinder.resilience.survey.survey`, exact by orbits) and the worst degraded
allreduce time becomes the point's ``robust`` column; with an all-to-all share the objective
mixes in the worst degraded all-to-all time the same way the intact objective does. Ranking
by it (``rank_by_robust``) recommends the point whose worst failure costs least.
"""

from __future__ import annotations

from dataclasses import replace

from topofinder.families.build import load_topology
from topofinder.resilience.survey import survey
from topofinder.workload.cost import Workload
from topofinder.workload.rank import SearchResult


def worst_failure(expr: str, workload: Workload, cabling: str = "auto") -> dict:
    """The ``robust`` column of one frontier point: the worst single failure's allreduce
    (and, with an all-to-all share, all-to-all) time and objective, and the failure."""
    topo = load_topology(expr)
    share = workload.alltoall_share > 0
    doc = survey(topo, workload, cabling=cabling, alltoall=share)
    unit, worst = max(((doc[k]["unit"], doc[k]["worst"]) for k in ("single_links",
                                                                   "single_nodes")),
                      key=lambda r: r[1].get("allreduce_s", float("inf")))
    allreduce = worst.get("allreduce_s")          # None: a single failure disconnects it
    alltoall = None
    if allreduce is None:
        return {"worst_failure": f"{unit} {worst['failure']}", "disconnects": True}
    if share and worst.get("alltoall_f"):
        alltoall = workload.alltoall_time(worst["N"], topo.degree, worst["alltoall_f"])
    return {"worst_failure": f"{unit} {worst['failure']}", "worst_allreduce_s": allreduce,
            "worst_alltoall_s": alltoall, "worst_objective_s": workload.objective(allreduce,
                                                                                  alltoall),
            "intact_bfb_allreduce_s": doc["intact"]["allreduce_s"],
            "worst_regression": worst["regression"]}


def robust_search(result: SearchResult, workload: Workload, rank: bool = False,
                  cabling: str = "auto", progress=None) -> SearchResult:
    """The search result with a ``robust`` column on every frontier point; ``rank``:
    ``recommended`` becomes the point of least worst-failure objective."""
    points = []
    for i, p in enumerate(result.frontier):
        points.append(replace(p, robust=worst_failure(p.expr, workload, cabling)))
        if progress:
            progress(i + 1, len(result.frontier), p.expr)
    recommended = result.recommended
    if rank:
        recommended = min(range(len(points)), key=lambda i: points[i].robust.get(
            "worst_objective_s", float("inf")))
    return replace(result, frontier=tuple(points), recommended=recommended)
