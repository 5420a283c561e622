"""The dependency-driven replay's fast paths against plain forms of the same model
(docs/performance.md "Dependency-driven prices"): a step's link queues by the running
maximum against a send-by-send queue, the allreduce laid out in step order against the
rows in their former order, and the schedules verification leaves behind against fresh ones."""

from __future__ import annotations

import numpy as np
import pytest

from topofinder import api
from topofinder.errors import TopofinderError
from topofinder.finder import verify
from topofinder.finder.growth import Candidate
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import symmetric_allgather
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.model.symmetric import OrbitSchedule
from topofinder.scoring.async_time import async_time, async_with_reverse, serve
from topofinder.workload import async_price

MB = 2 ** 20
B = 12.5e9


def queue_by_queue(free, link, ready, key, dur):
    """Finish times send by send: each link takes its sends by (ready, key, position), each
    starting when it is ready and the link is free (plain Python integers)."""
    free = [int(x) for x in free]
    fin = [0] * len(link)
    for i in sorted(range(len(link)), key=lambda i: (link[i], ready[i], key[i], i)):
        free[link[i]] = max(int(ready[i]), free[link[i]]) + int(dur[i])
        fin[i] = free[link[i]]
    return fin, free


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ready_max,key_max", [(50, 4),          # ties on (link, ready, key)
                                               (2 ** 40, 2 ** 12),  # one packed sort key
                                               (2 ** 50, 2 ** 11),  # (ready, key) packed
                                               (2 ** 60, 2 ** 6)])  # no packing; doubling
def test_serve_equals_the_queue_send_by_send(seed, ready_max, key_max):
    rng = np.random.default_rng(seed)
    links, n = int(rng.integers(1, 9)), int(rng.integers(1, 400))
    if seed % 3 == 0:                              # one send on every link: no queue
        n = links
    link = rng.integers(0, links, n) if seed % 3 else rng.permutation(links)
    ready = rng.integers(0, ready_max, n)
    key = rng.integers(0, key_max, n)
    dur = rng.integers(0, 1000, n)
    free = rng.integers(0, ready_max, links)
    want_fin, want_free = queue_by_queue(free, link, ready, key, dur)
    got_free = free.copy()
    assert serve(got_free, link, ready, key, dur).tolist() == want_fin
    assert got_free.tolist() == want_free
    relabel = rng.permutation(links)                # queues sorted by other link labels
    got_free = free.copy()
    assert serve(got_free, link, ready, key, dur, relabel[link]).tolist() == want_fin
    assert got_free.tolist() == want_free


def _former_allreduce(ag):
    """The allreduce as async_price built it before it laid rows out in step order: the
    allgather's rows reversed (Thm 2), then the allgather's, stacked row by row."""
    s, k = ag.sends, ag.num_steps
    first = np.column_stack((k + 1 - s[:, 0], s[:, 1], s[:, 2], s[:, 3], s[:, 5], s[:, 4]))
    later = s.copy()
    later[:, 0] += k
    rows = np.vstack((first, later))
    if isinstance(ag, OrbitSchedule):
        return OrbitSchedule(ag.topology, ag.shard_chunks, rows, ag.generators,
                             collective=Collective.ALLREDUCE, reduce_steps=k)
    return StepSchedule(ag.topology, ag.shard_chunks, rows, collective=Collective.ALLREDUCE,
                        reduce_steps=k)


@pytest.mark.parametrize("ag", [lambda: api.schedule("Torus(4,6)"),
                                lambda: api.schedule("DBT(37)"),
                                lambda: symmetric_allgather(from_expression("L(C(16,{1,6}))"))])
def test_allreduce_in_step_order_times_alike(ag):
    ag = ag()
    ar = async_price._allreduce(ag)
    assert np.all(np.diff(ar.sends[:, 0]) >= 0)
    former = _former_allreduce(ag)
    assert sorted(map(tuple, ar.sends.tolist())) == sorted(map(tuple, former.sends.tolist()))
    for alpha, size in ((1e-5, MB), (5e-7, 64 * MB)):
        assert async_time(ar, alpha, B, size) == async_time(former, alpha, B, size)


@pytest.mark.parametrize("expr", ["L^2(C(4,{1,2}))", "L(Aff(16,7,{5,11}))"])
def test_prices_from_the_replayed_orbits_equal_fresh_ones(expr, monkeypatch):
    """What verification leaves behind (verify.replayed_orbits) prices a point as the
    schedules point_schedules builds itself."""
    recipe = from_expression(expr)
    ag = symmetric_allgather(recipe)
    c = Candidate(recipe, ag.topology.n, ag.topology.degree, ag.num_steps, ag.tau)
    point = verify.verify_candidate(c)
    taken = []
    monkeypatch.setattr(async_price, "replayed_orbits",
                        lambda r: taken.append(verify.replayed_orbits(r)) or taken[-1])
    w = api.Workload.from_strings()
    reused = async_price.point_schedules(expr, point.T_L, point.tau)
    fresh = async_price.point_schedules(expr, point.T_L, point.tau)
    assert taken[0] is not None and taken[1] is None     # given up once taken
    for a, b in zip(reused, fresh):
        assert np.array_equal(a.sends, b.sends)
    assert async_price.prices(reused, w.alpha_s, w.bandwidth_Bps, w.sizes) == \
        async_price.prices(fresh, w.alpha_s, w.bandwidth_Bps, w.sizes)


def test_search_prices_alike_with_and_without_the_cache(tmp_path, monkeypatch):
    """Cached, each point is priced in the process that verified it and each baseline in the
    task that scored it; without the cache after the frontier is known: the same figures."""
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path))
    w = api.Workload.from_strings()
    cold = api.search(64, 4, w, jobs=1, use_cache=True, baselines=True).to_dict()
    plain = api.search(64, 4, w, jobs=1, use_cache=False, baselines=True).to_dict()
    warm = api.search(64, 4, w, jobs=1, use_cache=True, baselines=True).to_dict()
    assert cold == plain == warm
    assert all(p["allreduce_async_s"] is not None for p in cold["frontier"])


@pytest.mark.parametrize("ag", [lambda: api.schedule("Torus(4,6)"),
                                lambda: api.schedule("DBT(37)"),
                                lambda: api.schedule("DBT(64)"),
                                lambda: symmetric_allgather(from_expression("C(64,{1,6,20})")),
                                lambda: symmetric_allgather(from_expression("Torus(8,8)"))])
def test_allreduce_from_the_allgathers_rows_times_alike(ag):
    """async_with_reverse (the allreduce's phases read off the allgather's rows) against
    async_time of the allgather and of the allreduce laid out row by row, to the tick, on
    bidirectional topologies (where the reversed allgather is a reduce-scatter, Thm 2)."""
    ag = ag()
    assert ag.topology.bidirectional
    for alpha, size in ((1e-5, MB), (5e-7, 64 * MB), (0.0, MB)):
        want = (async_time(ag, alpha, B, size),
                async_time(_former_allreduce(ag), alpha, B, size))
        assert async_with_reverse(ag, alpha, B, size) == want


def test_allreduce_from_the_allgathers_rows_needs_a_bidirectional_topology():
    ag = symmetric_allgather(from_expression("L(C(16,{1,6}))"))
    assert not ag.topology.bidirectional
    with pytest.raises(TopofinderError, match="bidirectional"):
        async_with_reverse(ag, 1e-5, B, MB)


def test_baseline_prices_alike_laid_out_or_not():
    """A baseline's prices (reversed_prices) equal prices() of its laid-out schedules."""
    w = api.Workload.from_strings()
    for expr, schedule in (("DBT(64)", "double-binary-tree"), ("ShiftedRing(4,64)", "ring"),
                           ("Torus(8,8)", "bfb")):
        scheds = async_price.baseline_schedules(expr, schedule)
        want = async_price.prices(scheds, w.alpha_s, w.bandwidth_Bps, w.sizes)
        got = async_price._baseline_prices(expr, schedule, w.alpha_s, w.bandwidth_Bps,
                                           [list(x) for x in w.sizes])
        assert got == want
