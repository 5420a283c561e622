"""`topofinder search`: the whole pipeline for one (N, d) — DESIGN §9 steps 1–6.

generate (bases at every reachable size) → expand (predicted, Pareto-pruned per size) →
verify (build, replay, T_B^FC, all-to-all; in parallel) → frontier → rank for a workload.
Scores and verifications are cached on disk (topofinder.cache), so a repeated search is fast.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Callable

from topofinder import finder
from topofinder.bases import base_expressions
from topofinder.cache import cached
from topofinder.finder import Candidate
from topofinder.parallel import run_parallel
from topofinder.recipe import base as base_recipe
from topofinder.verify import score_base, verify_candidate
from topofinder.workload import Workload


@dataclass(frozen=True)
class FrontierPoint:
    """One verified point of the frontier; times in seconds, τ in M/B."""

    expr: str
    T_L: int
    tau: float
    tau_exact: str
    tau_fc: float | None
    tau_fc_exact: str | None
    diameter: int
    schedule: str
    verified: bool
    predicted_T_L: int
    predicted_tau: float
    bidirectional: bool
    bw_optimal: bool
    moore_optimal: bool
    alltoall_f: float | None
    alltoall_upper: float | None
    alltoall_bound: float | None
    alltoall_method: str
    allreduce_time_s: float
    alltoall_time_s: float | None
    objective_s: float


def _candidate_from_score(s: dict) -> Candidate:
    return Candidate(base_recipe(s["expr"], s["source"]), s["N"], s["d"], s["T_L"],
                     Fraction(s["tau"]), exact=True, bidirectional=s["bidirectional"],
                     reverse_symmetric=s["reverse_symmetric"],
                     bfb_bw_optimal=s["bfb_bw_optimal"], lg_exact=s["lg_exact"],
                     loop_free=s["loop_free"])


def predicted_frontier(n: int, d: int, bidirectional: bool = False, jobs: int | None = None,
                       use_cache: bool = True, progress: Callable | None = None
                       ) -> list[Candidate]:
    """Steps 1–4: the predicted Pareto frontier of (n, d) (flags ignored at the end)."""
    states = finder.reachable_states(n, d)
    jobs_list = [(expr, source) for (m, k) in states
                 for expr, source in base_expressions(m, k, at_target=(m, k) == (n, d))]
    scores = run_parallel(cached(score_base, use_cache), jobs_list, jobs=jobs,
                          progress=progress, label="scoring bases")
    by_state: dict[tuple[int, int], list[Candidate]] = {}
    for s in scores:
        if s is not None:
            by_state.setdefault((s["N"], s["d"]), []).append(_candidate_from_score(s))
    frontiers: dict[tuple[int, int], list[Candidate]] = {}
    for state in states:
        frontiers[state] = finder.pareto(by_state.get(state, []) + finder.grow(frontiers, *state))
    final = frontiers[(n, d)]
    if bidirectional:
        final = [c for c in final if c.bidirectional]
    return finder.pareto(final, with_flags=False)


def verified_frontier(n: int, d: int, bidirectional: bool, full_alltoall: bool,
                      jobs: int | None = None, use_cache: bool = True,
                      progress: Callable | None = None) -> list[tuple[Candidate, dict]]:
    """Steps 1–5: the predicted frontier, each point built, replayed and scored."""
    predicted = predicted_frontier(n, d, bidirectional, jobs, use_cache, progress)
    verified = run_parallel(cached(verify_candidate, use_cache),
                            [(c, full_alltoall) for c in predicted], jobs=jobs,
                            progress=progress, label="verifying frontier")
    return list(zip(predicted, verified))


def search(n, d, workload: Workload | None = None, bidirectional: bool = False,
           jobs: int | None = None, use_cache: bool = True,
           progress: Callable | None = None) -> dict:
    """The `search --json` document of DESIGN §12 for target (n, d). The verified frontier does
    not depend on the workload, so it is cached whole: a repeated search only re-ranks."""
    n, d = finder.validate_target(n, d, bidirectional)
    workload = workload or Workload()
    full_alltoall = workload.alltoall_share > 0
    frontier = cached(verified_frontier, use_cache)(n, d, bidirectional, full_alltoall,
                                                    jobs=jobs, use_cache=use_cache,
                                                    progress=progress)
    points = _pareto_points([_point(c, v, workload) for c, v in frontier])
    best = min(range(len(points)), key=lambda i: (points[i].objective_s, points[i].T_L))
    return {"N": n, "d": d, "bidirectional_only": bidirectional,
            "workload": workload.describe(),
            "frontier": [asdict(p) for p in points], "recommended": best}


def _point(c: Candidate, v: dict, workload: Workload) -> FrontierPoint:
    tau = Fraction(v["tau"])
    allreduce = workload.allreduce_time(v["T_L"], float(tau))
    alltoall = workload.alltoall_time(c.n, c.d, v["alltoall_f"])
    return FrontierPoint(
        expr=c.expr, T_L=v["T_L"], tau=float(tau), tau_exact=str(tau),
        tau_fc=v["tau_fc"], tau_fc_exact=v["tau_fc_exact"], diameter=v["diameter"],
        schedule=v["schedule"], verified=True, predicted_T_L=c.t_l, predicted_tau=float(c.tau),
        bidirectional=v["bidirectional"], bw_optimal=tau == Fraction(c.n - 1, c.n),
        moore_optimal=v["T_L"] == v["moore_T_L"], alltoall_f=v["alltoall_f"],
        alltoall_upper=v["alltoall_upper"], alltoall_bound=v["alltoall_bound"],
        alltoall_method=v["alltoall_method"], allreduce_time_s=allreduce,
        alltoall_time_s=alltoall, objective_s=workload.objective(allreduce, alltoall))


def _pareto_points(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """Pareto in verified (T_L, τ); among equal pairs keep the shorter expression."""
    key = {id(p): (p.T_L, Fraction(p.tau_exact), len(p.expr), p.expr) for p in points}
    pool = sorted(points, key=lambda p: key[id(p)])
    keep = []
    for p in pool:
        if not any(q.T_L <= p.T_L and Fraction(q.tau_exact) <= Fraction(p.tau_exact)
                   for q in keep):
            keep.append(p)
    return keep
