"""Rank a verified frontier for a workload: each point's allreduce and all-to-all times, the
Pareto points, the recommendation — the `topofinder search` document (docs/formats.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from functools import partial
from typing import Callable

from topofinder.compute.cache import cached
from topofinder.finder.frontier import check_frontier, skipped_bases, verified_frontier
from topofinder.finder.growth import Candidate, validate_target
from topofinder.finder.verify import VerifiedPoint
from topofinder.workload.baseline_speedups import (iteration_split, priced_baselines,
                                                   start_baselines)
from topofinder.workload.async_price import check_price, point_asyncs, price_verified
from topofinder.workload.broadcast import broadcast_column, broadcast_tp
from topofinder.workload.cost import Workload
from topofinder.workload.moe import MoEWorkload
from topofinder.model.units import exact
from topofinder.model.collectives import Collective


#: The search document's identity (docs/formats.md, schema ``search.schema.json``).
SEARCH_FORMAT = "topofinder-search"
SEARCH_VERSION = 1


@dataclass(frozen=True)
class FrontierPoint:
    """One point of the frontier; times in seconds, τ in M/B. ``verified``: T_L and τ come
    from the built and replayed schedule (False only beyond verify.REPLAY_LIMIT);
    ``verified_by``: how it was verified ("full", "symmetry", "construction"; None when not);
    ``certificate``: a construction's sample, seed, invariants and detection statement (else
    None).
    ``allreduce_T_L`` / ``allreduce_tau_exact``: of the allreduce `export` writes (its
    reduce-scatter is the allgather reversed, or BFB on G^T when G is not reverse-symmetric);
    ``allreduce_time_s`` prices exactly that schedule in lock-step (T_L·α + τ·M/B),
    ``allgather_time_s`` its allgather; ``*_async_s`` the same schedules dependency-driven
    (topofinder.workload.async_price; None when not replayable). ``robust`` (`search --robust`): the
    worst single failure (topofinder.resilience.robust). ``broadcast`` (a workload with a
    broadcast share): the exact multi-port broadcast TP from root 0 and its time
    (topofinder.workload.broadcast); absent from the document otherwise."""

    expr: str
    T_L: int
    tau: float
    tau_exact: str
    allreduce_T_L: int
    allreduce_tau: float
    allreduce_tau_exact: str
    tau_fc: float | None
    tau_fc_exact: str | None
    diameter: int | None
    schedule: str
    verified: bool
    predicted_T_L: int
    predicted_tau: float
    bidirectional: bool
    bw_optimal: bool
    moore_optimal: bool
    alltoall_f: float | None
    alltoall_f_upper: float | None
    alltoall_bound: float | None
    alltoall_method: str
    allreduce_time_s: float
    alltoall_time_s: float | None
    objective_s: float
    alltoall_gap: float | None = None
    iteration: dict | None = None
    verified_by: str | None = None
    robust: dict | None = None
    broadcast: dict | None = None
    allgather_time_s: float | None = None
    allgather_async_s: float | None = None
    allreduce_async_s: float | None = None
    frontiers: tuple[str, ...] = ()
    moves: int | None = None
    moves_lower_bound: int | None = None
    cabled: bool | None = None
    certificate: dict | None = None


#: Point fields left out of the document when None (present only with the option that sets
#: them: a broadcast share, `search --from`, verification by construction).
OPTIONAL_FIELDS = (Collective.BROADCAST, "moves", "moves_lower_bound", "cabled",
                   "certificate")


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
    recommendation; :meth:`to_dict` is the `topofinder search --json` document, written only
    there (docs/formats.md, schema ``search.schema.json``)."""

    n: int
    d: int
    bidirectional_only: bool
    workload: dict
    frontier: tuple[FrontierPoint, ...]
    recommended: int
    baselines: tuple[dict, ...] | None = None
    moe: dict | None = None
    hierarchy: Hierarchy | None = None
    skipped: tuple[dict, ...] = ()
    unverified: tuple[dict, ...] = ()
    moves: dict | None = None
    phases: dict | None = None

    @property
    def best(self) -> FrontierPoint:
        """The recommended frontier point."""
        return self.frontier[self.recommended]

    def _points(self) -> list[dict]:
        points = [asdict(p) for p in self.frontier]
        for p in points:
            p["frontiers"] = list(p["frontiers"])
            for key in OPTIONAL_FIELDS:
                if p[key] is None:
                    del p[key]
        if self.hierarchy is not None:
            for p, extra in zip(points, self.hierarchy.scores):
                p.update(extra)
        return points

    def records(self) -> list[dict]:
        """One flat dict per frontier point (``pandas.DataFrame(result.records())``), with
        N, d and whether it is the recommendation (a MoE split as ``iteration_*`` columns, the
        worst failure as ``robust_*``, the frontiers joined by "+")."""
        return [{"N": self.n, "d": self.d, **_flat(p), "recommended": i == self.recommended}
                for i, p in enumerate(self._points())]

    def to_dict(self) -> dict:
        """The `search --json` document."""
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
        if self.skipped:
            doc["skipped_bases"] = list(self.skipped)
        if self.unverified:
            doc["skipped_points"] = list(self.unverified)
        if self.moves is not None:
            doc["moves"] = self.moves
        if self.phases is not None:
            doc["phases"] = self.phases
        return doc


def _flat(point: dict) -> dict:
    point = {**point, "frontiers": "+".join(point["frontiers"])}
    for key in ("iteration", "robust", Collective.BROADCAST):
        split = point.get(key)
        if isinstance(split, dict):
            point = {k: v for k, v in point.items() if k != key}
            point.update({f"{key}_{k}": v for k, v in split.items()})
    return point


def search(n, d, workload: Workload | None = None, bidirectional: bool = False,
           jobs: int | None = None, use_cache: bool = True,
           progress: Callable | None = None, kstep: bool = False, baselines: bool = False,
           moe: MoEWorkload | None = None, baseline_progress: Callable | None = None,
           price: str = "lockstep",
           construction: tuple[int, int] | None = None) -> SearchResult:
    """The ranked verified frontier of target (n, d) (`search`, docs/cli.md). The verified
    frontier does not depend on the workload, so it is cached whole: a repeated search only
    re-ranks.
    ``kstep``: also routed k-step schedules as candidates (topofinder.scoring.allgather.kstep).
    ``moe``: rank by the MoE iteration time of topofinder.workload.moe (paper 001 App. A.4)
    and report each point's split. ``baselines``: also ShiftedRing, DBT and the closest torus
    (topofinder.finder.baseline_scores), priced for the workload, with the recommendation's
    speedup over each (paper 001 Fig. 7). ``price``: "lockstep" (default) ranks by the
    allreduce's T_L·α + τ·M/B, "async" by its dependency-driven time (docs/model.md).
    ``construction`` = (sample, seed): also points verified by construction
    (topofinder.finder.certify); None: full replay or symmetry."""
    check_price(price)
    n, d = validate_target(n, d, bidirectional)
    workload = workload or Workload()
    with_alltoall = workload.alltoall_share > 0 or (moe is not None and moe.alltoall_count > 0)
    full_alltoall = with_alltoall
    # the baselines do not depend on the frontier: a worker starts on them while this
    # process verifies (they are priced below, once the recommendation is known)
    started = start_baselines(n, d, full_alltoall, use_cache, jobs,
                              workload) if baselines else None
    # ranked by allgather and allreduce alone, the points a verified one outdoes on both
    # need no verification
    prune = not with_alltoall and workload.broadcast_share <= 0
    frontier, unverified = cached(verified_frontier, use_cache, check_frontier)(
        n, d, bidirectional, full_alltoall, kstep, construction, prune, jobs=jobs,
        use_cache=use_cache, progress=progress,
        then=partial(price_verified, workload) if use_cache else None)
    points = _pareto_points([_point(c, v, workload, moe) for c, v in frontier],
                            by_alltoall=with_alltoall,
                            by_broadcast=workload.broadcast_share > 0)
    # which points are kept does not depend on the dependency-driven prices (the frontiers
    # are in (T_L, τ) and the other collectives' times): only the kept points are priced
    verified = {c.expr: (c, v) for c, v in frontier}
    asyncs = point_asyncs([(p.expr, p.T_L, Fraction(p.tau_exact)) for p in points], workload,
                          use_cache, jobs)
    points = [replace(_point(*verified[p.expr], workload, moe, a, price), frontiers=p.frontiers)
              for p, a in zip(points, asyncs)]
    best = min(range(len(points)), key=lambda i: (points[i].objective_s, points[i].T_L))
    priced = None
    if baselines:
        priced = tuple(priced_baselines(n, d, workload, asdict(points[best]), full_alltoall,
                                        moe, use_cache=use_cache, progress=baseline_progress,
                                        jobs=jobs, started=started, price=price))
    return SearchResult(n, d, bidirectional, {**workload.describe(), "price": price},
                        tuple(points), best, priced, None if moe is None else moe.describe(),
                        skipped=tuple(skipped_bases(n, d)), unverified=tuple(unverified))


def _point(c: Candidate, v: VerifiedPoint, workload: Workload,
           moe: MoEWorkload | None = None, asyncs: dict | None = None,
           price: str = "lockstep") -> FrontierPoint:
    allreduce_tau = float(v.allreduce_tau)
    allreduce = workload.collective_time(v.allreduce_T_L, allreduce_tau)
    asyncs = asyncs or {}
    ranked = allreduce
    if price == "async" and asyncs.get("allreduce_async_s") is not None:
        ranked = asyncs["allreduce_async_s"]
    alltoall = workload.alltoall_time(c.n, c.d, v.alltoall_f)
    broadcast = None
    if workload.broadcast_share > 0:
        tp = broadcast_tp(c.expr)
        broadcast = broadcast_column(tp, workload.broadcast_time(c.d, tp))
    objective = workload.objective(ranked, alltoall, broadcast and broadcast["time_s"])
    iteration = None
    if moe is not None:
        iteration = iteration_split(moe, workload, c.n, c.d, v.allreduce_T_L, allreduce_tau,
                                    v.alltoall_f)
        if iteration["iteration_s"] is not None:
            objective = iteration["iteration_s"]
    return FrontierPoint(
        expr=c.expr, T_L=v.T_L, tau=float(v.tau), tau_exact=exact(v.tau),
        allreduce_T_L=v.allreduce_T_L, allreduce_tau=allreduce_tau,
        allreduce_tau_exact=exact(v.allreduce_tau),
        tau_fc=None if v.tau_fc is None else float(v.tau_fc),
        tau_fc_exact=None if v.tau_fc is None else exact(v.tau_fc), diameter=v.diameter,
        schedule=v.schedule, verified=v.verified, predicted_T_L=c.t_l,
        predicted_tau=float(c.tau),
        bidirectional=v.bidirectional, bw_optimal=v.tau == Fraction(c.n - 1, c.n),
        moore_optimal=v.T_L == v.moore_T_L, alltoall_f=v.alltoall_f,
        alltoall_f_upper=v.alltoall_f_upper, alltoall_bound=v.alltoall_bound,
        alltoall_method=v.alltoall_method, allreduce_time_s=allreduce,
        alltoall_time_s=alltoall, objective_s=objective,
        alltoall_gap=v.alltoall_gap, iteration=iteration, verified_by=v.verified_by,
        broadcast=broadcast, allgather_time_s=workload.collective_time(v.T_L, float(v.tau)),
        allgather_async_s=asyncs.get("allgather_async_s"),
        allreduce_async_s=asyncs.get("allreduce_async_s"), certificate=v.certificate)


#: The frontier of the workload's objective, kept next to the collectives' own (its mix).
OBJECTIVE = "objective"


def _pareto_points(points: list[FrontierPoint], by_alltoall: bool = False,
                   by_broadcast: bool = False) -> list[FrontierPoint]:
    """The union of a frontier per priced collective, each point saying which it is on
    (``frontiers``): allgather in verified (T_L, τ), allreduce in the exported allreduce's
    (T_L, τ), and — when the workload has such a part — all-to-all and broadcast in their
    times; plus the frontier of the objective's own figures (allreduce with those parts), on
    which the recommendation lies (the objective grows with each of them). Among equal
    figures the one better in the objective's figures is kept, then the shorter expression. A point without an all-to-all or broadcast time
    counts as infinitely slow there (the all-to-all time is the certified one, at the
    bracket's lower f)."""
    keys = _collective_keys(by_alltoall, by_broadcast)
    mix = [k for name, k in keys.items() if name != Collective.ALLGATHER]
    keys[OBJECTIVE] = lambda p: tuple(x for k in mix for x in k(p))
    on = {id(p): [] for p in points}
    for name, key in keys.items():
        for p in _pareto(points, key, keys[OBJECTIVE]):
            on[id(p)].append(name)
    kept = [p for p in points if on[id(p)]]
    kept.sort(key=lambda p: (p.T_L, Fraction(p.tau_exact), len(p.expr), p.expr))
    if len(mix) == 1:                      # the objective is the allreduce: one frontier
        on = {i: [n for n in names if n != OBJECTIVE] for i, names in on.items()}
    return [replace(p, frontiers=tuple(on[id(p)])) for p in kept]


def _collective_keys(by_alltoall: bool, by_broadcast: bool) -> dict[str, Callable]:
    """Priced collective → the figures its time grows with (lower is better in each)."""
    def a2a(p):
        return float("inf") if p.alltoall_time_s is None else p.alltoall_time_s

    def bcast(p):
        t = p.broadcast["time_s"]
        return float("inf") if t is None else t

    keys = {Collective.ALLGATHER: lambda p: (p.T_L, Fraction(p.tau_exact)),
            Collective.ALLREDUCE: lambda p: (p.allreduce_T_L, Fraction(p.allreduce_tau_exact))}
    if by_alltoall:
        keys[Collective.ALLTOALL] = lambda p: (a2a(p),)
    if by_broadcast:
        keys[Collective.BROADCAST] = lambda p: (bcast(p),)
    return keys


def _pareto(points: list[FrontierPoint], key: Callable, tie: Callable) -> list[FrontierPoint]:
    """The points no other is no worse than in every figure of ``key`` (equal figures: the
    better by ``tie``, the objective's figures — a point no worse anywhere —, then the shorter
    expression)."""
    pool = sorted(points, key=lambda p: (key(p), tie(p), len(p.expr), p.expr))
    keep: list[tuple] = []
    for p in pool:
        k = key(p)
        if not any(all(a <= b for a, b in zip(q, k)) for q, _ in keep):
            keep.append((k, p))
    return [p for _, p in keep]
