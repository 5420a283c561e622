"""Baselines priced for a search's workload and the recommendation's speedup over each
(paper 001 Fig. 7, Table 4, Fig. 9): times in seconds, speedup = baseline time /
recommended time (> 1: the recommendation is faster)."""

from __future__ import annotations

from fractions import Fraction
from functools import partial

from topofinder.compute.cache import cached
from topofinder.compute.parallel import begin, finish
from topofinder.finder.baseline_scores import baseline_specs, check_baseline, score_baseline
from topofinder.workload.async_price import baseline_pricer
from topofinder.workload.broadcast import broadcast_column, broadcast_tp
from topofinder.workload.cost import Workload
from topofinder.workload.moe import MoEWorkload
from topofinder.model.collectives import Collective


def _ratio(base, best):
    if base is None or best is None or best <= 0:
        return None
    return base / best


def iteration_split(moe: MoEWorkload, workload: Workload, n: int, d: int, allreduce_t_l: int,
                    allreduce_tau: float, alltoall_f: float | None) -> dict:
    """The MoE iteration split of one topology from its allreduce (T_L, τ) and flow f."""
    def allreduce_s(m):
        return allreduce_t_l * workload.alpha_s + allreduce_tau * m / workload.bandwidth_Bps

    def alltoall_s(m):
        if alltoall_f is None or alltoall_f <= 0:
            return None
        return (m / n) / (alltoall_f * workload.bandwidth_Bps / d)

    return moe.iteration(allreduce_s, alltoall_s)


def start_baselines(n: int, d: int, full_alltoall: bool, use_cache: bool = True,
                    jobs: int | None = None, workload: Workload | None = None) -> tuple:
    """Start scoring the baselines of (N, d) that the cache does not answer, each with its
    dependency-driven prices for ``workload`` right after in the same task (which reuses the
    allgather the scoring replayed: baseline_scores.replayed_allgather), on a worker in the
    background (topofinder.compute.parallel.begin: a worker that has finished importing takes
    them while this process verifies the frontier; `priced_baselines` takes the rest).
    Returns ({expression: (score, prices)} answered by the cache, the expressions being
    scored, their batch)."""
    score = cached(score_baseline, use_cache, check_baseline)
    price = baseline_pricer(workload or Workload(), use_cache)
    calls = [(s.expr, s.schedule) for s in baseline_specs(n, d) if s.expr is not None]
    # answered from the cache in this process (a worker pool costs more than a warm search)
    known = {e: (score(e, s, full_alltoall), price(e, s)) for e, s in calls
             if use_cache and score.in_cache(e, s, full_alltoall) and price.in_cache(e, s)}
    todo = [c for c in calls if c[0] not in known]
    return known, [c[0] for c in todo], begin(partial(_score_and_price, score, price,
                                                      full_alltoall), todo, jobs=jobs)


def _score_and_price(score, price, full_alltoall: bool, expr: str, schedule: str) -> tuple:
    return score(expr, schedule, full_alltoall), price(expr, schedule)


def priced_baselines(n: int, d: int, workload: Workload, best: dict, full_alltoall: bool,
                     moe: MoEWorkload | None = None, use_cache: bool = True,
                     progress=None, jobs: int | None = None,
                     started: tuple | None = None,
                     price: str = "lockstep") -> list[dict]:
    """One entry per baseline of finder.baseline_scores.baseline_specs: its verified scores, its
    times for ``workload`` (and MoE iteration split), and the speedups of ``best`` (the
    recommended frontier point's dict) over it. A baseline that does not exist at (N, d) is
    listed with ``expr`` None and the reason in ``note``. The baselines are scored on
    ``jobs`` workers (None: all cores), from ``started`` (start_baselines) when given;
    ``progress(done, count, exprs)`` is told before the first and as each one ends.
    Every baseline carries its lock-step and dependency-driven allgather and allreduce times
    (``*_time_s``, ``*_async_s``); ``price`` "async" ranks and compares by the latter."""
    specs = baseline_specs(n, d)
    known, exprs, batch = started or start_baselines(n, d, full_alltoall, use_cache, jobs,
                                                     workload)
    known = dict(known)
    if progress and exprs:
        progress(0, len(exprs), exprs)
    known.update(zip(exprs, finish(batch, progress=(lambda k, count: progress(k, count, exprs))
                                   if progress else None, label="scoring baselines")))
    out = []
    for spec in specs:
        entry = {"name": spec.name, "expr": spec.expr, "note": spec.note}
        if spec.expr is None:
            out.append(entry)
            continue
        v, prices = known[spec.expr]
        entry.update(v)
        ar_tau = float(Fraction(v["allreduce_tau"]))
        entry["allreduce_time_s"] = workload.collective_time(v["allreduce_T_L"], ar_tau)
        entry["allgather_time_s"] = workload.collective_time(v["T_L"], float(Fraction(v["tau"])))
        entry.update(prices)
        ranked = entry["allreduce_time_s"]
        if price == "async" and entry["allreduce_async_s"] is not None:
            ranked = entry["allreduce_async_s"]
        # at the bracket's upper f: the fastest the baseline can be (speedups are lower bounds)
        f_fast = v["alltoall_f_upper"]
        entry["alltoall_time_s"] = workload.alltoall_time(n, d, f_fast)
        bcast_s = None
        if workload.broadcast_share > 0:
            tp = broadcast_tp(spec.expr)
            bcast_s = workload.broadcast_time(d, tp)
            entry[Collective.BROADCAST] = broadcast_column(tp, bcast_s)
        entry["objective_s"] = workload.objective(ranked, entry["alltoall_time_s"], bcast_s)
        if moe is not None:
            entry["iteration"] = iteration_split(moe, workload, n, d, v["allreduce_T_L"],
                                                 ar_tau, f_fast)
            if entry["iteration"]["iteration_s"] is not None:
                entry["objective_s"] = entry["iteration"]["iteration_s"]
        speed = {Collective.ALLREDUCE: _ratio(entry["allreduce_time_s"], best["allreduce_time_s"]),
                 "allreduce_async": _ratio(entry["allreduce_async_s"], best["allreduce_async_s"]),
                 Collective.ALLTOALL: _ratio(entry["alltoall_time_s"], best["alltoall_time_s"]),
                 "objective": _ratio(entry["objective_s"], best["objective_s"])}
        entry["speedup"] = speed
        out.append(entry)
    return out
