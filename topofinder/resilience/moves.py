"""Move-aware search (`search --from PLAN.csv`): every frontier point priced in fibre moves
from the fabric as cabled (docs/algorithms.md "Moves and their lower bound").

``moves`` of a point is the number of rows the patch-panel diff from the cabled plan to it
unplugs — :func:`topofinder.cabling.patch_panel.diff_plans` itself, with the same relabelling
method, so ``export EXPR --what patch-panel --diff PLAN.csv --diff-method METHOD`` writes
exactly that many ``remove`` rows. ``moves_lower_bound`` (topofinder.cabling.move_bound) holds
for every relabelling; when it already equals every old row, the diff is not run (it cannot
unplug more). The cabled fabric joins the frontier at 0 moves; a second frontier keeps the
points Pareto-efficient in (objective, moves), and ``max_moves`` keeps only points within it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from fractions import Fraction

from topofinder.cabling.move_bound import removals_lower_bound
from topofinder.cabling.ocs import padded, parse_ocs
from topofinder.cabling.patch_panel import PatchPlan, diff_plans, parse_plan, plan_patch_panel
from topofinder.compute.parallel import run_parallel
from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.inputs import read_input
from topofinder.model.topology import Topology
from topofinder.model.units import exact
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.scoring.alltoall.concurrent_flow import alltoall_summary
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.workload.cost import Workload
from topofinder.workload.rank import FrontierPoint, SearchResult

#: Largest N whose moves use the exact diff method by default (isomorphism test, then QAP
#: search; minutes per pair beyond a few hundred nodes); above it, iterated assignment.
EXACT_LIMIT = 256
PLAN_PREFIX = "panel,panel_port,"
#: Above this N heuristic moves are counted on parallel workers (below, starting them costs
#: more than the diffs: about 0.3 s per point at N = 1024).
PARALLEL_FROM = 4096


def is_plan(source: str) -> bool:
    """Whether ``source`` is a file whose first line is a patch-panel plan header."""
    if not os.path.isfile(source):
        return False
    try:
        with open(source, encoding="utf-8", errors="replace") as fh:
            return fh.readline(64).lstrip("\ufeff").startswith(PLAN_PREFIX)
    except OSError:
        return False


def cabled(source: str, n: int | None = None) -> tuple[PatchPlan, Topology]:
    """The plan as cabled and its topology: a patch-panel plan CSV, or a topology (file or
    expression) cabled by a fresh plan (``export --what patch-panel``)."""
    if os.path.isfile(source) and not is_plan(source):
        text = read_input(source, "cabling")
        ocs = parse_ocs(text, source)
        if ocs is not None:
            plan = padded(ocs, n)
            return plan, plan.to_topology(os.path.basename(source))
    if is_plan(source):
        plan = parse_plan(read_input(source, "patch-panel plan"), n)
        return plan, plan.to_topology(os.path.basename(source))
    topo = load_topology(source)
    return plan_patch_panel(topo), topo


def default_method(n: int) -> str:
    return "exact" if n <= EXACT_LIMIT else "heuristic"


def point_moves(plan: PatchPlan, expr: str, method: str) -> tuple[int, int]:
    """(moves, moves_lower_bound) of the topology ``expr`` from ``plan``."""
    topo = load_topology(expr)
    bound = removals_lower_bound(plan.n, plan.rows, plan.kinds, topo)
    if bound >= plan.num_rows:
        return plan.num_rows, bound
    diff = diff_plans(plan, topo, "auto", plan.panel_size, method=method)
    return int(diff.removed.shape[0]), bound


def cabled_point(source: str, topo: Topology, workload: Workload) -> FrontierPoint:
    """The fabric as cabled, scored as `fail` scores any fabric: the optimal BFB allgather
    on G, its reduce-scatter on Gᵀ (paper 001 §3, App. B), ForestColl's τ_fc, and with an
    all-to-all share the concurrent-flow bracket."""
    if workload.broadcast_share:
        raise TopofinderError("search --from: the cabled fabric is priced by allreduce and "
                              "all-to-all; drop --broadcast-share")
    if not topo.strongly_connected:
        raise TopofinderError(f"search --from {source}: the cabled fabric is not strongly "
                              "connected")
    ag, rs = bfb_score(topo), bfb_score(topo.transpose())
    fc = throughput_optimum(topo, ag.pipelined_load).tau
    f = alltoall_summary(topo) if workload.alltoall_share > 0 else {}
    ar_tau = ag.tau + rs.tau
    allreduce = workload.collective_time(ag.T_L + rs.T_L, float(ar_tau))
    alltoall = workload.alltoall_time(topo.n, topo.degree, f.get("alltoall_f"))
    return FrontierPoint(
        expr=source, T_L=ag.T_L, tau=float(ag.tau), tau_exact=exact(ag.tau),
        allreduce_T_L=ag.T_L + rs.T_L, allreduce_tau=float(ar_tau),
        allreduce_tau_exact=exact(ar_tau), tau_fc=float(fc), tau_fc_exact=exact(fc),
        diameter=topo.diameter, schedule="bfb", verified=False, predicted_T_L=ag.T_L,
        predicted_tau=float(ag.tau), bidirectional=bool(topo.bidirectional),
        bw_optimal=ag.tau == Fraction(topo.n - 1, topo.n), moore_optimal=False,
        alltoall_f=f.get("alltoall_f"), alltoall_f_upper=f.get("alltoall_f_upper"),
        alltoall_bound=None, alltoall_method=f.get("alltoall_method", "none"),
        allreduce_time_s=allreduce, alltoall_time_s=alltoall,
        objective_s=workload.objective(allreduce, alltoall), moves=0, moves_lower_bound=0,
        cabled=True)


def move_frontier(points) -> list[int]:
    """Indices Pareto-efficient in (objective, moves), by moves then objective."""
    order = sorted(range(len(points)), key=lambda i: (points[i].moves, points[i].objective_s,
                                                      not points[i].cabled))
    keep, best = [], float("inf")
    for i in order:
        if points[i].objective_s < best:
            keep.append(i)
            best = points[i].objective_s
    return keep


def move_aware(result: SearchResult, source: str, workload: Workload,
               max_moves: int | None = None, method: str | None = None,
               jobs: int | None = None) -> SearchResult:
    """``result`` with every point's moves from the cabling ``source`` (plan CSV, OCS table or
    topology), the cabled fabric added at 0 moves (not when the search has more nodes than
    are cabled: growth, the new nodes without fibres), the (objective, moves) frontier, and with
    ``max_moves`` only the points within it (the recommendation the best of those)."""
    if max_moves is not None and max_moves < 0:
        raise TopofinderError("search: --max-moves must be >= 0")
    plan, topo = cabled(source, result.n)
    used = int(plan.rows[:, [2, 4]].max()) + 1 if plan.num_rows else 0
    if topo.n != result.n or used > result.n:
        raise TopofinderError(f"search --from {source}: the cabling has {max(topo.n, used)} "
                              f"nodes, the search {result.n}")
    grown = used < result.n          # growth: nodes without fibres yet, no cabled candidate
    method = method or default_method(result.n)
    if method not in ("exact", "heuristic"):
        raise TopofinderError(f"search: --moves-method {method!r}: accepted are exact, "
                              "heuristic")
    exprs = [p.expr for p in result.frontier]
    # heuristic diffs take about a second at N = 1024: workers pay off only for more work
    if method == "heuristic" and result.n <= PARALLEL_FROM:
        jobs = 1
    counted = run_parallel(point_moves, [(plan, e, method) for e in exprs], jobs, share=True)
    points = [replace(p, moves=m, moves_lower_bound=b, cabled=False)
              for p, (m, b) in zip(result.frontier, counted)]
    if not grown:
        points.append(cabled_point(source, topo, workload))
    if max_moves is not None:
        points = [p for p in points if p.moves <= max_moves]
    best = min(range(len(points)), key=lambda i: (points[i].objective_s, points[i].moves,
                                                  not points[i].cabled))
    if not points:
        raise TopofinderError(f"search: no point within --max-moves {max_moves}")
    doc = {"from": source, "method": method, "rows": plan.num_rows, "grown": grown,
           "frontier": move_frontier(points), "max_moves": max_moves}
    return replace(result, frontier=tuple(points), recommended=best, moves=doc)
