"""The dependency-driven price of a search point or baseline (topofinder.scoring.async_time,
docs/model.md "Dependency-driven time") for a workload, next to its lock-step price.

Which schedule is priced, while N²·d ≤ REPLAY_LIMIT (beyond it the fields are null): a
frontier point's orbit form (finder.verify.symmetric_collective, or BFB made equivariant when
BFB beats the construction, as search verifies it; replayed on one source per orbit) when it
has one with the point's verified (T_L, τ), else its full exported schedule. The baselines:
the ring's orbit form (beyond 4096 steps its lock-step time, :func:`ring_prices`), the
torus's equivariant BFB, the two-tree schedule in full; their reduce-scatter is their
allgather reversed on the same (bidirectional) topology (Thm 2), and the allreduce runs it,
then the allgather.
"""

from __future__ import annotations

from fractions import Fraction

from topofinder.compute.cache import cached
from topofinder.compute.parallel import begin, finish
from topofinder.errors import TopofinderError
from topofinder.families.build import parse
from topofinder.finder.baseline_scores import replayed_allgather
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import (
    REPLAY_LIMIT, collective_schedule, orbit_bfb, recipe_group, replayed_orbits,
    symmetric_collective, symmetric_reduce_scatter,
)
from topofinder.model.collectives import Collective
from topofinder.model.schedule import ScheduleError, StepSchedule, send_rows
from topofinder.model.symmetric import OrbitSchedule, rotation
from topofinder.scoring.allgather.ring_and_two_tree import ring_orbit, two_tree_allgather
from topofinder.scoring.async_time import async_time, async_with_reverse, step_order
from topofinder.workload.cost import Workload

#: Rings of more steps take their dependency-driven time from ring_prices (a replay spends
#: about 0.1 ms per step: N = 10^5 rings would take tens of seconds).
RING_REPLAY_STEPS = 4096
#: The frontier is ranked by the lock-step price unless `search --price async` says otherwise.
PRICES = ("lockstep", "async")


def _allreduce(allgather, rs=None):
    """Reduce-scatter then the allgather as one schedule (orbit or step, as ``allgather``).
    ``rs`` default: the allgather's rows reversed (Thm 2 on a bidirectional topology: the
    same topology, group and representatives). None when the chunk counts differ. Rows are
    laid out column by column in step order (each step's rows in their order in the phase),
    as the replay reads them."""
    s, k = allgather.sends, allgather.num_steps
    if rs is None:
        t, v, lo, hi, u, w = s.T
        o = step_order(k + 1 - t)
        first = (k + 1 - t[o], v[o], lo[o], hi[o], w[o], u[o])
        steps = k
    else:
        if rs.shard_chunks != allgather.shard_chunks:
            return None
        o = step_order(rs.sends[:, 0])
        first, steps = tuple(c[o] for c in rs.sends.T), rs.num_steps
    o = step_order(s[:, 0])
    rows = send_rows(first, (s[o, 0] + steps, *(c[o] for c in s[:, 1:].T)))
    if isinstance(allgather, OrbitSchedule):
        return OrbitSchedule(allgather.topology, allgather.shard_chunks, rows,
                             allgather.generators, method=allgather.method,
                             collective=Collective.ALLREDUCE, reduce_steps=steps)
    return StepSchedule(allgather.topology, allgather.shard_chunks, rows,
                        collective=Collective.ALLREDUCE, method=allgather.method,
                        reduce_steps=steps)


def _allgather_of(allreduce):
    """The allgather phase of an allreduce schedule, steps renumbered from 1."""
    s = allreduce.sends[allreduce.sends[:, 0] > allreduce.reduce_steps].copy()
    s[:, 0] -= allreduce.reduce_steps
    if isinstance(allreduce, OrbitSchedule):
        return OrbitSchedule(allreduce.topology, allreduce.shard_chunks, s,
                             allreduce.generators, method=allreduce.method)
    return StepSchedule(allreduce.topology, allreduce.shard_chunks, s,
                        method=allreduce.method)


def point_schedules(expr: str, t_l: int, tau: Fraction):
    """(allgather, allreduce) schedules priced for a frontier point (module docstring), or
    None when it has neither an orbit form of (t_l, tau) nor fits the full replay."""
    recipe = from_expression(expr)
    topo = parse(expr)
    if topo.n * topo.n * topo.degree > REPLAY_LIMIT:
        return None                       # orbit forms there take minutes (docs/model.md)
    # the orbit schedules verification just replayed in this process, when it did: the
    # ones built below (the allgather of the verified (T_L, τ); BFB on Gᵀ reversed)
    ag, rs = replayed_orbits(recipe) or (symmetric_collective(recipe, Collective.ALLGATHER),
                                         None)
    if ag is not None and not (ag.num_steps == t_l and ag.tau == tau):
        ag, rs = orbit_bfb(topo, recipe_group(recipe)), None  # BFB beat the construction
    if ag is not None and ag.num_steps == t_l and ag.tau == tau:
        if topo.bidirectional:
            return ag, _allreduce(ag)
        if rs is None:
            rs = symmetric_reduce_scatter(ag, recipe)
        ar = None if rs is None else _allreduce(ag, rs)
        if ar is not None:
            return ag, ar
    ar = collective_schedule(recipe, Collective.ALLREDUCE)
    return _allgather_of(ar), ar


def baseline_schedules(expr: str, schedule: str, laid_out: bool = True):
    """(allgather, allreduce) of a baseline as finder.baseline_scores.native_cost replays it
    (the very schedule, when that just ran in this process); None beyond REPLAY_LIMIT except
    for the ring (:func:`ring_prices` needs no replay). The allreduce is the allgather
    reversed, then the allgather (:func:`_allreduce`), except for a torus without an orbit
    form (priced as a frontier point); with ``laid_out`` false that allreduce is given as
    None (:func:`reversed_prices` times it from the allgather's rows)."""
    topo = parse(expr)
    if schedule != "ring" and topo.n * topo.n * topo.degree > REPLAY_LIMIT:
        return None
    ag = replayed_allgather(expr, schedule)
    if ag is None:
        ag = _baseline_allgather(expr, schedule, topo)
    if ag is None:
        return point_schedules(expr, *_bfb(expr))
    return ag, (_allreduce(ag) if laid_out else None)


def _baseline_allgather(expr: str, schedule: str, topo):
    """The ring's orbit, the two-tree schedule, or the torus's equivariant BFB (None when its
    rotations do not give one)."""
    if schedule == "ring":
        return ring_orbit(topo.degree, topo.n)
    if schedule == "double-binary-tree":
        return two_tree_allgather(topo.n)
    dims = [int(m) for m in expr[expr.index("(") + 1:-1].split(",")]
    try:
        return orbit_bfb(topo, [(m, [rotation(m)]) for m in dims])
    except ScheduleError:
        return None


def _bfb(expr: str):
    sched = collective_schedule(from_expression(expr), Collective.ALLGATHER)
    return sched.num_steps, sched.tau


def prices(schedules, alpha_s: float, bandwidth_Bps: float, sizes: tuple) -> dict:
    """{allgather_async_s, allreduce_async_s}: expected dependency-driven seconds over the
    size profile ``sizes`` ((M, weight) pairs); null when ``schedules`` is None."""
    if schedules is None:
        return {"allgather_async_s": None, "allreduce_async_s": None}
    out = {}
    for name, sched in zip(("allgather_async_s", "allreduce_async_s"), schedules):
        out[name] = sum(w * async_time(sched, alpha_s, bandwidth_Bps, m) for m, w in sizes)
    return out


def reversed_prices(allgather, alpha_s: float, bandwidth_Bps: float, sizes: tuple) -> dict:
    """:func:`prices` of (allgather, :func:`_allreduce` of it), the same figures bit for bit
    (scoring.async_time.async_with_reverse), without laying out the allreduce's rows."""
    ag = ar = 0
    for m, w in sizes:
        one, both = async_with_reverse(allgather, alpha_s, bandwidth_Bps, m)
        ag, ar = ag + w * one, ar + w * both
    return {"allgather_async_s": ag, "allreduce_async_s": ar}


def _point_prices(expr: str, t_l: int, tau: str, alpha_s: float, bandwidth_Bps: float,
                  sizes: list) -> dict:
    return prices(point_schedules(expr, t_l, Fraction(tau)), alpha_s, bandwidth_Bps,
                  tuple(map(tuple, sizes)))


def _baseline_prices(expr: str, schedule: str, alpha_s: float, bandwidth_Bps: float,
                     sizes: list) -> dict:
    scheds = baseline_schedules(expr, schedule, laid_out=False)
    sizes = tuple(map(tuple, sizes))
    if scheds is None or scheds[1] is not None:
        return prices(scheds, alpha_s, bandwidth_Bps, sizes)
    if schedule == "ring" and scheds[0].num_steps > RING_REPLAY_STEPS:
        return ring_prices(scheds[0], alpha_s, bandwidth_Bps, sizes)
    return reversed_prices(scheds[0], alpha_s, bandwidth_Bps, sizes)


def ring_prices(ring: OrbitSchedule, alpha_s: float, bandwidth_Bps: float, sizes) -> dict:
    """The ring baseline's dependency-driven times without a replay: equal to lock-step.
    Every link of ring k carries one chunk per step, of one size, and the send at step t
    forwards the chunk that arrived over the previous link of its ring at step t − 1; so by
    induction (all links alike under the rotation) every step-t send starts at
    (t − 1)·(α + chunk time), the lock-step start, and the allreduce (the allgather reversed,
    then the allgather) continues the same chain. tests/test_async_time.py checks it against
    the replay."""
    one = sum(w * (ring.num_steps * alpha_s + float(ring.tau) * m / bandwidth_Bps)
              for m, w in sizes)
    return {"allgather_async_s": one, "allreduce_async_s": 2 * one}


def point_asyncs(points, workload: Workload, use_cache: bool = True,
                 jobs: int | None = None) -> list[dict]:
    """Each frontier point's (expr, T_L, τ) dependency-driven allgather and allreduce seconds,
    disk-cached per point and workload: cached ones answered here, the rest on ``jobs``
    workers."""
    calls = [(expr, t_l, f"{Fraction(tau).numerator}/{Fraction(tau).denominator}",
              *_workload_args(workload)) for expr, t_l, tau in points]
    return finish_asyncs(_start(_point_prices, calls, use_cache, jobs))


def price_verified(workload: Workload, candidate, verified) -> None:
    """Price a point dependency-driven for ``workload`` into the disk cache right after its
    verification, in the process that verified it (finder.frontier.verified_frontier's
    ``then``), which reuses the orbit schedules that process just replayed
    (verify.replayed_orbits); :func:`point_asyncs` then reads them from the cache."""
    if candidate.n * candidate.n * candidate.d > REPLAY_LIMIT:
        return                            # null there; point_asyncs says so as before
    tau = Fraction(verified.tau)
    cached(_point_prices)(candidate.expr, verified.T_L, f"{tau.numerator}/{tau.denominator}",
                          *_workload_args(workload))


def baseline_pricer(workload: Workload, use_cache: bool = True):
    """(expr, schedule) ↦ the baseline's dependency-driven allgather and allreduce seconds for
    ``workload``, disk-cached; ``.in_cache(expr, schedule)`` tells whether the cache answers."""
    return _Pricer(cached(_baseline_prices, use_cache), _workload_args(workload), use_cache)


class _Pricer:
    def __init__(self, priced, args: tuple, use_cache: bool):
        self.priced, self.args, self.use_cache = priced, args, use_cache

    def __call__(self, expr: str, schedule: str) -> dict:
        return self.priced(expr, schedule, *self.args)

    def in_cache(self, expr: str, schedule: str) -> bool:
        return self.use_cache and self.priced.in_cache(expr, schedule, *self.args)


def _start(fn, calls: list[tuple], use_cache: bool, jobs: int | None) -> tuple:
    priced = cached(fn, use_cache)
    known = {i: priced(*c) for i, c in enumerate(calls) if use_cache and priced.in_cache(*c)}
    todo = [i for i in range(len(calls)) if i not in known]
    # a warm search starts no worker pool
    batch = begin(priced, [calls[i] for i in todo], jobs=jobs) if todo else None
    return len(calls), known, todo, batch


def finish_asyncs(started: tuple) -> list[dict]:
    """The results of a batch :func:`_start` began, in call order."""
    count, known, todo, batch = started
    if batch is not None:
        known.update(zip(todo, finish(batch, label="dependency-driven prices")))
    return [known[i] for i in range(count)]


def _workload_args(workload: Workload) -> tuple:
    return (float(workload.alpha_s), float(workload.bandwidth_Bps),
            [[float(m), float(w)] for m, w in workload.sizes])


def check_price(price: str) -> str:
    if price not in PRICES:
        raise TopofinderError(f"price {price!r}; accepted: {', '.join(PRICES)}")
    return price
