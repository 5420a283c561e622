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
    """One point of the frontier; times in seconds, τ in M/B. ``verified``: T_L and τ come
    from the built and replayed schedule (False only beyond verify.REPLAY_LIMIT)."""

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
    alltoall_gap: float | None = None


def _candidate_from_score(s: dict) -> Candidate:
    return Candidate(base_recipe(s["expr"], s["source"]), s["N"], s["d"], s["T_L"],
                     Fraction(s["tau"]), exact=True, bidirectional=s["bidirectional"],
                     reverse_symmetric=s["reverse_symmetric"],
                     bfb_bw_optimal=s["bfb_bw_optimal"], lg_exact=s["lg_exact"],
                     loop_free=s["loop_free"])


#: Frontier points are verified in parallel while N²·d stays below this. A schedule's memory
#: grows with N² (every node receives every shard) times the pieces shards are split into; two
#: N = 4096, d = 16 verifications at once exceeded 24 GiB, one N = 4096, d = 4 pair used 8 GB.
PARALLEL_VERIFY_LIMIT = 4096 * 4096 * 4

#: Per-process memos. A size's frontier does not depend on the target, and one search — or a
#: worker serving many sweep cells — meets the same sizes and bases again and again.
_SCORES: dict[tuple[str, str], dict | None] = {}
_FRONTIERS: dict[tuple[int, int], tuple[float, list[Candidate]]] = {}


def _score_bases(pairs: list[tuple[str, str]], jobs, use_cache: bool, progress) -> None:
    """Score every (expression, source) not scored yet in this process, in parallel."""
    todo = [p for p in dict.fromkeys(pairs) if p not in _SCORES]
    if todo:
        results = run_parallel(cached(score_base, use_cache), todo, jobs=jobs,
                               progress=progress, label="scoring bases")
        _SCORES.update(zip(todo, results))


def _scored(pairs) -> list[Candidate]:
    return [_candidate_from_score(_SCORES[p]) for p in pairs if _SCORES[p] is not None]


def _state_frontier(state: tuple[int, int], use_cache: bool,
                    limit: float = float("inf")) -> list[Candidate]:
    """The Pareto frontier of one size (n, k), exact for every candidate with T_L < ``limit``
    (only candidates with no more steps can dominate those): its own bases, plus expansions of
    smaller sizes that can beat both the limit and its own BW-optimal point. Memoised with the
    limit it was computed for; a request with a higher limit recomputes."""
    known = _FRONTIERS.get(state)
    if known is not None and known[0] >= limit:
        return known[1]
    pairs = base_expressions(*state)
    _score_bases(pairs, 1, use_cache, None)
    own = _scored(pairs)
    # the size's own BW-optimal point dominates everything with as many steps: a tighter limit
    # for the expansions, and the frontier stays exact below the requested limit
    effective = min(limit, finder.bandwidth_cutoff(own, state[0]))
    ops = finder.useful_ops(*state, effective)
    frontiers = {}
    for op in ops:
        for operand, sub_limit in zip(op[1], finder.operand_limits(op, effective)):
            frontiers[operand] = _state_frontier(operand, use_cache, sub_limit)
    frontier = finder.pareto(own + finder.grow(frontiers, *state, ops=ops))
    _FRONTIERS[state] = (limit, frontier)
    return frontier


def predicted_frontier(n: int, d: int, bidirectional: bool = False, jobs: int | None = None,
                       use_cache: bool = True, progress: Callable | None = None
                       ) -> list[Candidate]:
    """Steps 1–4: the predicted Pareto frontier of (n, d) (flags ignored at the end). With
    more than one job the bases of every reachable size are scored in parallel up front;
    otherwise sizes are visited lazily and only where they can matter."""
    own = base_expressions(n, d)
    extra = [b for b in base_expressions(n, d, at_target=True) if b not in own]
    if jobs != 1:
        states = [s for s in finder.reachable_states(n, d) if s not in _FRONTIERS]
        _score_bases([b for s in states for b in base_expressions(*s)] + extra, jobs,
                     use_cache, progress)
    _score_bases(extra, 1, use_cache, None)
    final = _state_frontier((n, d), use_cache) + _scored(extra)
    if bidirectional:
        final = [c for c in final if c.bidirectional]
    return finder.pareto(final, with_flags=False)


def verified_frontier(n: int, d: int, bidirectional: bool, full_alltoall: bool,
                      jobs: int | None = None, use_cache: bool = True,
                      progress: Callable | None = None) -> list[tuple[Candidate, dict]]:
    """Steps 1–5: the predicted frontier, each point built, replayed and scored."""
    predicted = predicted_frontier(n, d, bidirectional, jobs, use_cache, progress)
    if n * n * d > PARALLEL_VERIFY_LIMIT:
        jobs = 1                          # one multi-gigabyte schedule in memory at a time
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
    points = _pareto_points([_point(c, v, workload) for c, v in frontier],
                            by_alltoall=workload.alltoall_share > 0)
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
        schedule=v["schedule"], verified=v["verified"], predicted_T_L=c.t_l,
        predicted_tau=float(c.tau),
        bidirectional=v["bidirectional"], bw_optimal=tau == Fraction(c.n - 1, c.n),
        moore_optimal=v["T_L"] == v["moore_T_L"], alltoall_f=v["alltoall_f"],
        alltoall_upper=v["alltoall_upper"], alltoall_bound=v["alltoall_bound"],
        alltoall_method=v["alltoall_method"], allreduce_time_s=allreduce,
        alltoall_time_s=alltoall, objective_s=workload.objective(allreduce, alltoall),
        alltoall_gap=v.get("alltoall_gap"))


def _pareto_points(points: list[FrontierPoint], by_alltoall: bool = False
                   ) -> list[FrontierPoint]:
    """Pareto in verified (T_L, τ) — and all-to-all time when ``by_alltoall`` (the workload
    has an all-to-all part), so a topology best for all-to-all (paper 001 §8.3: generalized
    Kautz) is kept even when another matches its (T_L, τ). Among equal points keep the
    shorter expression. The all-to-all time is the certified one (at the bracket's lower f);
    a point without it counts as infinitely slow there."""
    def a2a(p):
        if not by_alltoall:
            return 0.0
        return float("inf") if p.alltoall_time_s is None else p.alltoall_time_s

    key = {id(p): (p.T_L, Fraction(p.tau_exact), a2a(p), len(p.expr), p.expr) for p in points}
    pool = sorted(points, key=lambda p: key[id(p)])
    keep = []
    for p in pool:
        if not any(q.T_L <= p.T_L and Fraction(q.tau_exact) <= Fraction(p.tau_exact)
                   and a2a(q) <= a2a(p) for q in keep):
            keep.append(p)
    return keep
