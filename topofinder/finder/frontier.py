"""The verified frontier of one (N, d) (paper 001 §5.4; docs/algorithms.md "The finder").

generate (bases at every reachable size) → expand (predicted, Pareto-pruned per size) →
verify (build, replay, T_B^FC, all-to-all; in parallel). It does not depend on the workload:
:mod:`topofinder.workload.rank` ranks it. Scores and verifications are cached on disk
(:mod:`topofinder.compute.cache`), so a repeated search is fast.
"""

from __future__ import annotations

import os
from fractions import Fraction
from functools import partial
from typing import Callable

from topofinder.finder import growth, priced
from topofinder.finder.bases import base_expressions
from topofinder.compute.cache import cached
from topofinder.finder.growth import Candidate
from topofinder.compute.parallel import RUN, SKIP, WAIT, prestart, run_parallel
from topofinder.finder.recipe import apply, base
from topofinder.families.registry import fingerprint
from topofinder.finder.verify import (SCORE_MAX_N2D, VerifiedPoint, base_topology, check_score,
                                      check_verified, score_base, score_kstep, unscored_reason,
                                      unverifiable_reason, verify_candidate, verify_work)
from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective
from topofinder.model.bounds import check_claim
from topofinder.model.units import exact


def _candidate_from_score(s: dict) -> Candidate:
    return Candidate(base(s["expr"], s["source"]), s["N"], s["d"], s["T_L"],
                     Fraction(s["tau"]), exact=True, bidirectional=s["bidirectional"],
                     reverse_symmetric=s["reverse_symmetric"],
                     bfb_bw_optimal=s["bfb_bw_optimal"], lg_exact=s["lg_exact"],
                     loop_free=s["loop_free"])


#: Sizes up to this many nodes also get routed k-step schedules (k = diameter, diameter + 1;
#: topofinder.scoring.allgather.kstep) of their frontier topologies as candidates; line graphs
#: and the other expansions then carry them to larger sizes.
KSTEP_MAX_NODES = 256


def _kstep_candidates(frontier: list[Candidate], n: int, use_cache: bool,
                      limit: float) -> list[Candidate]:
    """Routed k-step points of the frontier's topologies (not for BW-optimal points, which no
    schedule beats at their T_L, nor for points already built from one)."""
    if n > KSTEP_MAX_NODES:
        return []
    out = []
    for c in frontier:
        if c.tau == Fraction(c.n - 1, c.n) or c.recipe.uses_kstep:
            continue
        for extra in (0, 1):
            s = cached(score_kstep, use_cache, check_score)(c.recipe, extra)
            if s is None or s["T_L"] >= limit:
                continue
            out.append(Candidate(apply("kstep", (c.recipe,), s["T_L"]), s["N"], s["d"], s["T_L"],
                                 Fraction(s["tau"]), exact=True,
                                 bidirectional=s["bidirectional"], loop_free=s["loop_free"]))
    return out


#: Peak bytes of one verification per unit of N²·d: a schedule's sends grow with N² (every node
#: receives every shard) times the pieces shards are split into, and the replay holds several
#: copies. Measured: N = 1796, d = 16 (N²·d = 5.2e7) peaked at 9.9 GB for one worker.
VERIFY_BYTES_PER_N2D = 200


def _available_memory() -> int:
    """Bytes the system can still give (MemAvailable; the physical size where unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def verify_jobs(n: int, d: int, jobs: int | None) -> int:
    """Parallel verifications that fit in memory: as many as asked (default all cores), but
    never more than 80 % of the available memory divided by one verification's estimate."""
    wanted = jobs or os.cpu_count() or 1
    fits = int(0.8 * _available_memory()) // max(1, VERIFY_BYTES_PER_N2D * n * n * d)
    return max(1, min(wanted, fits))

#: Per-process memos. A size's frontier does not depend on the target, and one search — or a
#: worker serving many sweep cells — meets the same sizes and bases again and again.
_SCORES: dict[tuple[str, str], dict | None] = {}
_FRONTIERS: dict[tuple, tuple[float, list[Candidate], list[Candidate]]] = {}
#                                      (state, kstep, families) → (limit, frontier, pool)


def _score_bases(pairs: list[tuple[str, str]], jobs, use_cache: bool, progress) -> None:
    """Score every (expression, source) not scored yet in this process, in parallel."""
    todo = [p for p in dict.fromkeys(pairs) if p not in _SCORES]
    if todo:
        results = run_parallel(cached(score_base, use_cache, check_score), todo, jobs=jobs,
                               progress=progress, label="scoring bases", share=True)
        _SCORES.update(zip(todo, results))


def _scored(pairs) -> list[Candidate]:
    return [_candidate_from_score(_SCORES[p]) for p in pairs if _SCORES[p] is not None]


def _state_frontier(state: tuple[int, int], use_cache: bool,
                    limit: float = float("inf"), kstep: bool = False) -> list[Candidate]:
    """The Pareto frontier of one size (n, k), exact for every candidate with T_L < ``limit``
    (only candidates with no more steps can dominate those): its own bases, plus expansions of
    smaller sizes that can beat both the limit and its own BW-optimal point. Memoised with the
    limit it was computed for; a request with a higher limit recomputes. ``kstep``: also
    routed k-step points at sizes up to KSTEP_MAX_NODES."""
    return _state_pool(state, use_cache, limit, kstep)[1]


def _state_pool(state: tuple[int, int], use_cache: bool, limit: float = float("inf"),
                kstep: bool = False) -> tuple[list[Candidate], list[Candidate]]:
    """(every candidate of the size, its Pareto frontier in the allgather's (T_L, τ) with
    flags) — see `_state_frontier`. Smaller sizes only pass their frontiers on (the expansions'
    theorems predict allgathers); the target size's whole pool goes to `verifiable_frontier`,
    which keeps a frontier per priced collective."""
    key = (state, kstep, fingerprint())
    known = _FRONTIERS.get(key)
    if known is not None and known[0] >= limit:
        return known[2], known[1]
    pairs = base_expressions(*state)
    _score_bases(pairs, 1, use_cache, None)
    own = _scored(pairs)
    # the size's own BW-optimal point dominates everything with as many steps: a tighter limit
    # for the expansions, and the frontier stays exact below the requested limit
    effective = min(limit, growth.bandwidth_cutoff(own, state[0]))
    ops = growth.useful_ops(*state, effective)
    frontiers = {}
    for op in ops:
        for operand, sub_limit in zip(op[1], growth.operand_limits(op, effective)):
            frontiers[operand] = _state_frontier(operand, use_cache, sub_limit, kstep)
    pool = own + growth.grow(frontiers, *state, ops=ops)
    frontier = growth.pareto(pool)
    if kstep:
        routed = _kstep_candidates(frontier, state[0], use_cache, limit)
        pool, frontier = pool + routed, growth.pareto(frontier + routed)
    _FRONTIERS[key] = (limit, frontier, pool)
    return pool, frontier


#: Below this many target nodes the bases are scored lazily in this process even with more
#: than one job: all of N = 1024's take 0.25 s (N = 4096: 0.7 s), less than a worker's start.
PARALLEL_BASES_MIN_NODES = 4096


def predicted_frontier(n: int, d: int, bidirectional: bool = False, jobs: int | None = None,
                       use_cache: bool = True, progress: Callable | None = None,
                       kstep: bool = False) -> list[Candidate]:
    """Steps 1–4: the predicted Pareto frontier of (n, d) (flags ignored at the end)."""
    return growth.pareto(final_candidates(n, d, bidirectional, jobs, use_cache, progress,
                                          kstep), with_flags=False)


def final_candidates(n: int, d: int, bidirectional: bool = False, jobs: int | None = None,
                     use_cache: bool = True, progress: Callable | None = None,
                     kstep: bool = False, whole: bool = False) -> list[Candidate]:
    """The candidates of (n, d) the final Pareto step chooses from: the size's frontier with
    flags (``whole``: every candidate of the size — its bases and the expansions of smaller
    sizes' frontiers — for the frontiers of other collectives), and the large rings kept as
    fall-backs. With more than one job and more than
    PARALLEL_BASES_MIN_NODES nodes, the bases of every
    reachable size are scored in parallel up front; otherwise sizes are visited lazily and
    only where they can matter."""
    own = base_expressions(n, d)
    extra = [b for b in base_expressions(n, d, at_target=True) if b not in own]
    if jobs != 1 and n > PARALLEL_BASES_MIN_NODES:
        states = [s for s in growth.reachable_states(n, d)
                  if (s, kstep, fingerprint()) not in _FRONTIERS]
        _score_bases([b for s in states for b in base_expressions(*s)] + extra, jobs,
                     use_cache, progress)
    _score_bases(extra, 1, use_cache, None)
    final = _state_pool((n, d), use_cache, kstep=kstep)[0 if whole else 1] + _scored(extra)
    if bidirectional:
        final = [c for c in final if c.bidirectional]
    return final


def verifiable_frontier(predicted: list[Candidate], whole: list[Candidate] = (),
                        construction: bool = False, memos: dict | None = None
                        ) -> tuple[list[Candidate], list[dict]]:
    """The frontiers per priced collective of the candidates that can be verified within the
    budget (verify.unverifiable_reason), united and sorted by (T_L, τ): the allgather's in
    predicted (T_L, τ) of ``predicted`` (flags ignored), the others' (topofinder.finder.priced;
    the exported allreduce) of ``whole`` (`final_candidates(whole=True)`) and ``predicted``.
    Also the allgather frontier points left out, with their exact predicted (T_L, τ) and the
    reason ({"expr", "T_L", "tau_exact", "reason"}): when a frontier point is dropped, the
    candidates it alone dominated come back. A candidate is priced only once it passes
    `unverifiable_reason`. ``construction``: points verified by construction count as
    verifiable (topofinder.finder.certify). ``memos``: filled with the prices computed
    (priced.frontiers, by collective name)."""
    pool, skipped, reasons = list(predicted), [], {}

    def reason(c):
        if c.recipe not in reasons:
            reasons[c.recipe] = unverifiable_reason(c, construction)
        return reasons[c.recipe]

    while True:
        front = growth.pareto(pool, with_flags=False)
        bad = [c for c in front if reason(c)]
        if not bad:
            break
        skipped += [{"expr": c.expr, "T_L": c.t_l, "tau_exact": exact(c.tau),
                     "reason": reason(c)} for c in bad]
        pool = [c for c in pool if c not in bad]
    union = {c.recipe: c for c in front}
    others = {name: entry for name, entry in priced.PRICED.items()
              if name != Collective.ALLGATHER}
    for f in priced.frontiers(pool + list(whole), memos, admit=lambda c: not reason(c),
                              collectives=others, favour=frozenset(union)).values():
        union.update((c.recipe, c) for c in f if c.recipe not in union)
    return sorted(union.values(), key=lambda c: (c.t_l, c.tau, len(c.expr), c.expr)), skipped


def skipped_bases(n: int, d: int) -> list[dict]:
    """The bases of every size the search of (n, d) can reach that are left out because their
    exact score costs too much ({"expr", "N", "d", "reason"}; verify.unscored_reason), the
    target size first. Only sizes past the cost limits are built to be checked."""
    states = [(n, d)] + [s for s in growth.reachable_states(n, d) if s != (n, d)]
    pairs = [b for s in states if s[0] * s[0] * s[1] > SCORE_MAX_N2D
             for b in base_expressions(*s, at_target=s == (n, d))]
    out = []
    for expr, source in dict.fromkeys(pairs):
        topo = base_topology(expr, source) if source == "bfb" else None
        reason = topo is not None and unscored_reason(topo)
        if reason:
            out.append({"expr": expr, "N": topo.n, "d": topo.degree, "reason": reason})
    return out


def verified_frontier(n: int, d: int, bidirectional: bool, full_alltoall: bool,
                      kstep: bool = False, construction: tuple[int, int] | None = None,
                      prune: bool = False, jobs: int | None = None, use_cache: bool = True,
                      progress: Callable | None = None, then: Callable | None = None
                      ) -> tuple[list[tuple[Candidate, VerifiedPoint]], list[dict]]:
    """Steps 1–5: the predicted frontier, each point built, replayed and scored; and the
    predicted points left out because they cannot be replayed within the budget
    (`verifiable_frontier`). The workers that help verify start importing first, while this
    process predicts (prestart). ``construction`` = (sample, seed): also verify points by
    construction (topofinder.finder.certify); None: by full replay or symmetry only.
    ``prune``: leave out the points a verified one outdoes on allgather and allreduce
    (`_Outdone`; for a ranking by those two alone: a point they outdo can still lie on an
    all-to-all or broadcast frontier). ``then(candidate, verified point)``: run right after
    each verification, in the process that verified it (to reuse what it built; not part of
    the cached result). Cached by the arguments before ``jobs``."""
    prestart(verify_candidate, verify_jobs(n, d, jobs))
    memos: dict = {}
    predicted, skipped = verifiable_frontier(
        final_candidates(n, d, bidirectional, jobs, use_cache, progress, kstep),
        final_candidates(n, d, bidirectional, jobs, use_cache, progress, kstep, whole=True),
        construction=construction is not None, memos=memos)
    if not predicted:
        raise TopofinderError(f"no frontier point of N = {n}, d = {d} can be verified: "
                              f"{skipped[0]['expr']}: {skipped[0]['reason']}")
    task = cached(verify_candidate, use_cache, check_verified)
    outdone = _Outdone(predicted, memos.get(Collective.ALLREDUCE, {}))
    verified = run_parallel(task if then is None else partial(_verify_then, task, then),
                            [(c, full_alltoall, construction) for c in predicted],
                            jobs=verify_jobs(n, d, jobs), progress=progress,
                            label="verifying frontier", share=True,
                            weights=[verify_work(c, construction) for c in predicted] if progress else None,
                            gate=outdone.gate if prune else None)
    done = [v for v in verified if v is not None]
    return [(c, v) for i, (c, v) in enumerate(zip(predicted, verified))
            if v is not None and not (prune and outdone.beaten(i, done))], skipped


class _Outdone:
    """Which predicted points need no verification: a point is left out when a verified point
    is no worse than its lower bounds on both priced collectives (priced.lower_bounds: what
    its own verification could at best find) and better in one, so it could not lie on their
    frontiers (a predicted τ is often above what BFB then finds: `search --n 1024 --d 4`
    predicts L^2(Aff(8,3,{1,3}))^2 at τ 561/512 and verifies it at 1023/1024, which outdoes
    the two points of T_L 11 and 19 predicted beside it). The points left out do not depend
    on which were verified first: if a verified w outdoes v's bounds and v outdid u's, w
    outdoes u's too, so the final filter (`beaten`) gives the same set in any order."""

    def __init__(self, predicted: list[Candidate], allreduce: dict):
        self.predicted, self.allreduce, self.bounds = predicted, allreduce, {}

    def _bounds(self, i: int) -> dict:
        if i not in self.bounds:
            self.bounds[i] = priced.lower_bounds(self.predicted[i])
        return self.bounds[i]

    def beaten(self, i: int, verified) -> bool:
        c = self.predicted[i]
        # cheap first: the bounds are never above c's own predicted (T_L, τ), doubled for
        # the allreduce
        near = [v for v in verified if v.T_L <= c.t_l and v.tau <= c.tau
                and v.allreduce_T_L <= 2 * c.t_l and v.allreduce_tau <= 2 * c.tau]
        if not near:
            return False
        ag, ar = self._bounds(i)[Collective.ALLGATHER], self._bounds(i)[Collective.ALLREDUCE]
        return any(priced.no_worse(got, ag) and priced.no_worse(got_ar, ar)
                   and (got, got_ar) != (ag, ar)
                   for got, got_ar in ((
                       (v.T_L, v.tau), (v.allreduce_T_L, v.allreduce_tau)) for v in near))

    def gate(self, i: int, finished: dict, running) -> str:
        """run_parallel's gate: skip a point the verified ones already outdo; while a point
        of fewer predicted steps is being verified (it may outdo this one), verify it only
        on a worker, which can give it up."""
        verified = [v for v in finished.values() if v is not None]
        if self.beaten(i, verified):
            return SKIP
        return WAIT if any(self._may_outdo(j, i) for j in running) else RUN

    def _may_outdo(self, j: int, i: int) -> bool:
        """Whether point j's verification may outdo point i: fewer predicted steps, and its
        allreduce — exactly known when the allreduce frontier priced it — no worse than i's
        lower bound (an allreduce above 2(N−1)/N in M/B outdoes no point bounded by it)."""
        if self.predicted[j].t_l >= self.predicted[i].t_l:
            return False
        price = self.allreduce.get(self.predicted[j].recipe)
        if price is None:
            return True
        return priced.no_worse(price, self._bounds(i)[Collective.ALLREDUCE])


def _verify_then(verify: Callable, then: Callable, candidate, *args) -> VerifiedPoint:
    """``verify(candidate, *args)``, then ``then(candidate, its result)``, in one process."""
    point = verify(candidate, *args)
    then(candidate, point)
    return point


def check_frontier(args: tuple, frontier: list) -> None:
    """A cached `verified_frontier(n, d, ...)` that can be true: every point has N = n nodes,
    degree d, and predicted and verified numbers within the bounds (ValueError otherwise)."""
    n, d = args[0], args[1]
    points, skipped = frontier
    if not all(isinstance(s, dict) and "reason" in s for s in skipped):
        raise ValueError("a skipped frontier point without its reason")
    for c, v in points:
        if (c.n, c.d) != (n, d):
            raise ValueError(f"point {c.expr} has N = {c.n}, d = {c.d}, not {n}, {d}")
        check_claim(n, d, c.t_l, c.tau, c.expr)
        check_verified((c,), v)
