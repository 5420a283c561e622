"""The dependency-driven time (topofinder.scoring.async_time) against an independent
discrete-event simulation, the replay by orbits against the full replay, and its bounds:
diameter·α ≤ async ≤ lock-step (docs/model.md "Dependency-driven time")."""

from __future__ import annotations

import heapq
import json
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest

from topofinder import api
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import symmetric_collective
from topofinder.model.collectives import Collective
from topofinder.model.symmetric import expand
from topofinder.scoring.async_time import TICK, async_time

MB = 2 ** 20
B = 12.5e9                                        # 100 Gbps in bytes/s


def simulate(sched, alpha_ticks: int, size: float, bandwidth: float) -> int:
    """Completion time in ticks by discrete events: arrivals make sends ready; a free link
    takes, from its lowest unfinished step, the ready send of least (ready, lo, v); a send
    holds its link for its bytes / (capacity·b) (each chunk's time
    rounded to a tick) and arrives α later. Written from the model's
    statement only (per-chunk bookkeeping, a heap of events, no numpy)."""
    topo = sched.topology
    n, p = topo.n, sched.shard_chunks
    cap = defaultdict(int)
    for u, w, c in zip(topo.src.tolist(), topo.dst.tolist(), topo.arc_capacity.tolist()):
        if u != w:
            cap[u, w] += c
    b = bandwidth / topo.node_bandwidth
    tick_per_chunk = size / (n * p) / b / TICK
    rows = [tuple(r) for r in sched.sends.tolist()]
    split = sched.reduce_steps if sched.collective == Collective.ALLREDUCE else (
        max(r[0] for r in rows) if sched.collective == Collective.REDUCE_SCATTER else 0)
    reducing = [r[0] <= split for r in rows]
    receivers = defaultdict(list)                     # (phase, node, shard, chunk) -> sends
    for i, (t, v, lo, hi, u, w) in enumerate(rows):
        for c in range(lo, hi):
            receivers[reducing[i], w, v, c].append(i)
    deps = []                                         # per send: list of (chunk, [senders])
    for i, (t, v, lo, hi, u, w) in enumerate(rows):
        need = []
        for c in range(lo, hi):
            if reducing[i]:                           # every partial received before t
                need.append(("all", [j for j in receivers[True, u, v, c] if rows[j][0] < t]))
            elif u == v:                              # the owner: its reduction complete
                need.append(("all", receivers[True, u, v, c]))
            else:                                     # the first copy received before t
                need.append(("any", [j for j in receivers[False, u, v, c] if rows[j][0] < t]))
        deps.append(need)
    waiting = defaultdict(list)                       # sender send j -> (send i, chunk index)
    left, ready = [], [None] * len(rows)
    for i, need in enumerate(deps):
        count = 0
        for k, (mode, js) in enumerate(need):
            if js:
                count += 1
                for j in js:
                    waiting[j].append((i, k))
        left.append(count)
    chunk_done = [dict() for _ in rows]
    by_link = defaultdict(lambda: defaultdict(list))
    for i, (t, v, lo, hi, u, w) in enumerate(rows):
        by_link[u, w][t].append(i)
    steps = {e: sorted(d) for e, d in by_link.items()}
    todo = {e: {t: len(by_link[e][t]) for t in d} for e, d in steps.items()}
    pool = {e: defaultdict(list) for e in steps}     # ready sends per link and step
    free = {e: 0 for e in steps}
    events, seq, last = [], 0, 0
    for i in range(len(rows)):
        if left[i] == 0:
            ready[i] = 0
            r = rows[i]
            heapq.heappush(pool[r[4], r[5]][r[0]], (0, r[2], r[1], i))
    now = 0
    while True:
        for e in steps:                               # start what can start now
            while steps[e] and free[e] <= now:
                t = steps[e][0]
                if todo[e][t] == 0:
                    steps[e].pop(0)
                    continue
                if not pool[e][t]:
                    break
                _, _, _, i = heapq.heappop(pool[e][t])
                todo[e][t] -= 1
                start = max(now, free[e])
                dur = (rows[i][3] - rows[i][2]) * round(tick_per_chunk / cap[e])
                free[e] = start + dur
                heapq.heappush(events, (start + dur, 0, seq, None))     # link wake-up
                heapq.heappush(events, (start + dur + alpha_ticks, 1, seq, i))
                seq += 1
        if not events:
            break
        now, _, _, j = heapq.heappop(events)
        batch = [j]
        while events and events[0][0] == now:
            batch.append(heapq.heappop(events)[3])
        for j in batch:
            if j is None:
                continue
            last = max(last, now)
            for i, k in waiting[j]:
                mode, js = deps[i][k]
                seen = chunk_done[i].setdefault(k, 0) + 1
                chunk_done[i][k] = seen
                if (mode == "any" and seen == 1) or (mode == "all" and seen == len(js)):
                    left[i] -= 1
                    if left[i] == 0:
                        ready[i] = now
                        r = rows[i]
                        heapq.heappush(pool[r[4], r[5]][r[0]], (now, r[2], r[1], i))
    assert all(x is not None for x in ready), "a send never became ready"
    return last


CASES = [("C(16,{1,6})", Collective.ALLGATHER), ("Torus(4,4)", Collective.ALLREDUCE),
         ("Torus(3,5)", Collective.REDUCE_SCATTER), ("L(K(4,4))", Collective.ALLGATHER),
         ("Pi(3,12)", Collective.ALLREDUCE), ("Hypercube(4)", Collective.REDUCE_SCATTER),
         ("Torus(4,6)", Collective.ALLGATHER), ("L(C(8,{1,3}))", Collective.ALLREDUCE),
         ("DBT(13)", Collective.ALLGATHER)]


@pytest.mark.parametrize("expr,collective", CASES)
@pytest.mark.parametrize("alpha_us,size", [(10, MB), (1, MB), (0.5, 64 * MB)])
def test_replay_equals_event_simulation(expr, collective, alpha_us, size):
    sched = api.schedule(expr, collective)
    alpha = alpha_us * 1e-6
    got = async_time(sched, alpha, B, size)
    want = simulate(sched, round(alpha / TICK), size, B) * TICK
    assert got == pytest.approx(want, rel=0, abs=1e-15)
    lock = (sched.num_steps * alpha + float(sched.tau) * size / B)
    assert sched.topology.diameter * alpha <= got + 1e-12
    assert got <= lock + 1e-12


@pytest.mark.parametrize("m", [10, 13])
def test_two_tree_allreduce_by_simulation(m):
    """The baseline's allreduce as search prices it (its allgather's rows read reversed, then
    forward: async_with_reverse) against the event simulation of the laid-out allreduce."""
    from topofinder.scoring.async_time import async_with_reverse
    from topofinder.workload.async_price import _allreduce

    ag = api.schedule(f"DBT({m})")
    ar = _allreduce(ag)
    for alpha_us, size in ((2, MB), (0.5, 64 * MB)):
        alpha = alpha_us * 1e-6
        got = async_with_reverse(ag, alpha, B, size)
        want = tuple(simulate(s, round(alpha / TICK), size, B) * TICK for s in (ag, ar))
        assert got == pytest.approx(want, rel=0, abs=1e-15)


def test_two_tree_and_alltoall_by_simulation():
    dbt = api.schedule("DBT(10)")                  # not vertex-transitive: different ties
    assert async_time(dbt, 2e-6, B, MB) == pytest.approx(
        simulate(dbt, round(2e-6 / TICK), MB, B) * TICK, abs=1e-15)
    a2a = api.schedule("Torus(3,3)", Collective.ALLTOALL)
    t = async_time(a2a, 1e-6, B, MB)
    lock = a2a.num_steps * 1e-6 + a2a.bandwidth_time * (MB / 9) / (B / 4)
    assert a2a.topology.diameter * 1e-6 <= t <= lock + 1e-12


@pytest.mark.parametrize("expr", ["Torus(16,16)", "L(C(16,{1,6}))", "C(64,{1,6,20})",
                                  "L(Aff(16,7,{5,11}))"])
def test_orbit_replay_equals_full(expr):
    """Representatives only vs the equivariant extension replayed whole with the same group
    (its ties broken alike): equal to the tick, every collective."""
    for collective in (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE):
        orbit = symmetric_collective(from_expression(expr), collective)
        assert orbit is not None
        full = expand(orbit)
        a = async_time(orbit, 1e-5, B, MB)
        assert a == async_time(full, 1e-5, B, MB, orbit.generators)
        lock = full.num_steps * 1e-5 + float(full.tau) * MB / B
        assert full.topology.diameter * 1e-5 <= a <= lock + 1e-12


@pytest.mark.parametrize("d,m", [(2, 16), (4, 64), (8, 1000), (4, 4100)])
def test_ring_needs_no_replay(d, m):
    """The ring's chain argument (workload.async_price.ring_prices) against its replay."""
    from topofinder.workload.async_price import baseline_schedules, prices, ring_prices

    sizes = ((float(MB), 0.25), (64.0 * MB, 0.75))
    scheds = baseline_schedules(f"ShiftedRing({d},{m})", "ring")
    replayed = prices(scheds, 3e-6, B, sizes)
    closed = ring_prices(scheds[0], 3e-6, B, sizes)
    for key in replayed:                 # each chunk's time is rounded to a tick in the replay
        assert replayed[key] == pytest.approx(closed[key], rel=0,
                                              abs=scheds[1].num_steps * TICK)


def test_ties_are_exact_under_rounding_of_alpha():
    """α = 10 µs given as 9.999999999999999e-06 s times alike (integer ticks)."""
    s = api.schedule("Torus(8,8)")
    assert async_time(s, 1e-5, B, MB) == async_time(s, 9.999999999999999e-06, B, MB)


def test_acceptance_torus_16_and_circulant():
    """Issue 41's figures: Torus(16,16) at 1 MB, α = 10 µs: lock-step 243.6 µs, async within
    [0.96, 1.00] × 194.5 µs; C(16,{1,6}) at α = 1 µs: async = lock-step = 81.64 µs."""
    w = api.Workload.from_strings("10us", "100Gbps", "1MB")
    p = api.collective_prices("Torus(16,16)", w)
    assert p["allgather_time_s"] * 1e6 == pytest.approx(243.5584)
    assert 0.96 * 194.5 <= p["allgather_async_s"] * 1e6 <= 194.5
    c = api.collective_prices("C(16,{1,6})", api.Workload.from_strings("1us"))
    assert c["allgather_async_s"] == pytest.approx(c["allgather_time_s"], rel=1e-12)
    assert c["allgather_time_s"] * 1e6 == pytest.approx(81.6432)


@pytest.mark.slow
def test_acceptance_torus_32():
    p = api.collective_prices("Torus(32,32)", api.Workload.from_strings("1us"))
    assert 0.96 * 92.9 <= p["allgather_async_s"] * 1e6 <= 92.9


@pytest.mark.slow
def test_search_256_bounds():
    """Every frontier point and baseline of search --n 256 --d 4: diameter·α and the
    ForestColl bound τ_fc·M/B ≤ async ≤ lock-step, allgather and allreduce."""
    w = api.Workload.from_strings()
    r = api.search(256, 4, w, baselines=True, use_cache=False)
    for p in r.to_dict()["frontier"]:
        low = max(p["diameter"] * w.alpha_s, Fraction(p["tau_fc_exact"]) * MB / w.bandwidth_Bps)
        assert low <= p["allgather_async_s"] + 1e-12
        assert p["allgather_async_s"] <= p["allgather_time_s"] + 1e-12
        assert p["allreduce_async_s"] <= p["allreduce_time_s"] + 1e-12
        assert 2 * low <= p["allreduce_async_s"] + 1e-12
    for b in r.to_dict()["baselines"]:
        if b["expr"] is not None:
            assert b["diameter"] * w.alpha_s <= b["allgather_async_s"]
            assert b["allreduce_async_s"] <= b["allreduce_time_s"] + 1e-12
            assert np.isfinite(b["speedup"]["allreduce_async"])


def test_search_price_async_ranks_by_the_dependency_driven_allreduce():
    w = api.Workload.from_strings()
    lock = api.search(16, 4, w, jobs=1, use_cache=False, baselines=True).to_dict()
    fast = api.search(16, 4, w, jobs=1, use_cache=False, baselines=True,
                      price="async").to_dict()
    assert lock["workload"]["price"] == "lockstep" and fast["workload"]["price"] == "async"
    for p, q in zip(lock["frontier"], fast["frontier"]):
        assert p["objective_s"] == p["allreduce_time_s"]
        assert q["objective_s"] == q["allreduce_async_s"] <= q["allreduce_time_s"] + 1e-12
    best = fast["frontier"][fast["recommended"]]
    assert best["allreduce_async_s"] == min(q["allreduce_async_s"] for q in fast["frontier"])
    for b in fast["baselines"]:
        if b["expr"] is not None:
            assert b["speedup"]["allreduce_async"] == pytest.approx(
                b["allreduce_async_s"] / best["allreduce_async_s"])
    with pytest.raises(api.TopofinderError, match="price"):
        api.search(16, 4, w, jobs=1, price="fast")


@pytest.mark.parametrize("expr", ["Torus(4,4)", "C(16,{1,6})", "Pi(3,12)"])
def test_broadcast_program_prices(expr):
    """The step program export writes for a one-root broadcast (an allgather of the root's
    shard, which is the whole message M): its dependency-driven time equals the event
    simulation of an allgather of N·M, and its lock-step price is Σ_t (α + the step's fullest
    link's pieces · M/(pieces·b)), counted here from the rows."""
    from topofinder.api.oneroot import schedule_oneroot
    from topofinder.export.ir.steps import broadcast_steps
    topo = api.load(expr)
    steps = broadcast_steps(schedule_oneroot(topo, Collective.BROADCAST, root=0), topo)
    alpha = 1e-6
    price = api.broadcast_price(steps, api.Workload.from_strings("1us", "100Gbps", "1MB"))
    n, pieces = topo.n, steps.shard_chunks
    assert price["async_s"] == pytest.approx(
        simulate(steps, round(alpha / TICK), n * MB, B) * TICK, rel=0, abs=1e-15)
    cap = defaultdict(int)
    for u, w, c in zip(topo.src.tolist(), topo.dst.tolist(), topo.arc_capacity.tolist()):
        cap[u, w] += c
    load = defaultdict(lambda: defaultdict(int))
    for t, _, lo, hi, u, w in steps.sends.tolist():
        load[t][u, w] += hi - lo
    b = B / topo.node_bandwidth
    lock = sum(alpha + max(Fraction(x, cap[e]) for e, x in links.items()) * MB / pieces / b
               for links in load.values())
    assert price["time_s"] == pytest.approx(float(lock), rel=1e-12)
    assert price["T_L"] == len(load) and price["async_s"] <= price["time_s"] + 1e-12


def test_score_and_export_state_the_broadcast_prices(tmp_path, capsys):
    """score --collective broadcast (one-port) and export --collective broadcast state the
    prices of the same program (api.broadcast_price)."""
    from topofinder.cli.main import main
    _, steps = api.broadcast_program("Torus(4,4)", root=2)
    want = api.broadcast_price(steps, api.Workload.from_strings("1us", "100Gbps", "4MB"))
    assert main(["score", "Torus(4,4)", "--collective", "broadcast", "--root", "2", "--json",
                 "--size", "4MB", "--alpha", "1us"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["broadcast_T_L"], got["broadcast_time_s"], got["broadcast_async_s"]) == (
        want["T_L"], want["time_s"], want["async_s"])
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--collective", "broadcast",
                 "--format", "mscclpp", "--root", "2", "--size", "4MB", "--alpha", "1us",
                 "-o", str(tmp_path / "p.json")]) == 0
    err = capsys.readouterr().err
    assert (f"broadcast for the workload: lock-step {want['time_s'] * 1e6:.6g} us, "
            f"dependency-driven {want['async_s'] * 1e6:.6g} us") in err
