"""Step-schedule model: τ / T_L from the sends, replay validation, reverse, allreduce, JSON.

The schedules here are written by hand (not by any generator), so expected values follow from
the α-β model of DESIGN §1 directly.
"""

import json
from fractions import Fraction

import numpy as np
import pytest

from topofinder.families import bi_ring, uni_ring
from topofinder.model.collectives import Collective
from topofinder.model.schedule import (ScheduleError, StepSchedule, allreduce, int_rows_json,
                                       reduce_scatter, refine, reverse, validate)
from topofinder.scoring.allgather.bfb import bfb_schedule


def ring4_allgather():
    """BiRing(2,4): step 1 every node sends its shard both ways; step 2 node u gets the shard
    of u+2 half from each neighbour. P = 2, BW-optimal: τ = (2 + 1)·2/(4·2) = 3/4."""
    rows = []
    for u in range(4):
        for w in ((u + 1) % 4, (u - 1) % 4):
            rows.append((1, u, 0, 2, u, w))
    for u in range(4):
        v = (u + 2) % 4
        rows.append((2, v, 0, 1, (u + 1) % 4, u))
        rows.append((2, v, 1, 2, (u - 1) % 4, u))
    return StepSchedule(bi_ring(2, 4), 2, np.array(rows), method="hand")


def uniring_allgather(m, d=1, backwards=False):
    """UniRing pipeline: at step t node u forwards the shard of u − t + 1 to u + 1 (P = 1)."""
    s = -1 if backwards else 1
    rows = [(t, (u - s * (t - 1)) % m, 0, 1, u, (u + s) % m)
            for t in range(1, m) for u in range(m)]
    topo = uni_ring(d, m)
    return StepSchedule(topo.transpose() if backwards else topo, 1, np.array(rows))


def with_rows(sched, rows):
    return StepSchedule(sched.topology, sched.shard_chunks, np.array(rows),
                        collective=sched.collective, reduce_steps=sched.reduce_steps)


def test_hand_ring_is_valid_and_bw_optimal():
    a = ring4_allgather()
    validate(a)
    assert a.num_steps == 2
    assert a.step_loads == (Fraction(2), Fraction(1))
    assert a.tau == Fraction(3, 4)


def test_multi_arc_has_k_fold_bandwidth():
    single, double = uniring_allgather(3, 1), uniring_allgather(3, 2)
    validate(double)
    assert single.tau == Fraction(2, 3)          # (N−1) steps × 1 shard / N
    # two parallel links: half the time per step, but d = 2 doubles M/B's link share
    assert double.step_loads == (Fraction(1, 2), Fraction(1, 2))
    assert double.tau == Fraction(2, 3)


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.__setitem__(8, (1, 2, 0, 1, 1, 0)), "does not hold"),      # unheld chunk
    (lambda r: r.__setitem__(0, (1, 0, 0, 2, 0, 2)), "no link"),             # 0→2 missing
    (lambda r: r.pop(), "incomplete allgather"),
    (lambda r: r.__setitem__(9, (2, 2, 1, 3, 3, 0)), r"outside \[0, 2\)"),   # chunk 2 of P=2
    (lambda r: r.__setitem__(9, (2, 2, 1, 1, 3, 0)), "empty chunk range"),
    (lambda r: r.__setitem__(0, (0, 0, 0, 2, 0, 1)), "numbered from 1"),
    (lambda r: r.__setitem__(0, (1, 0, 0, 2, 0, 7)), "outside 0..3"),
])
def test_validator_rejects_broken_allgathers(edit, message):
    rows = [tuple(r) for r in ring4_allgather().sends.tolist()]
    edit(rows)
    with pytest.raises(ScheduleError, match=message):
        validate(with_rows(ring4_allgather(), rows))


def test_validator_rejects_forwarding_in_the_same_step():
    """A chunk received at step t may be sent on only from step t+1."""
    a = uniring_allgather(4)
    rows = [tuple(r) for r in a.sends.tolist()]
    rows = [(1, v, lo, hi, u, w) if t == 2 else (t, v, lo, hi, u, w)
            for t, v, lo, hi, u, w in rows]
    with pytest.raises(ScheduleError, match="before step 1"):
        validate(with_rows(a, rows))


def test_one_segment_sends_name_the_earliest_unheld_chunk():
    """Every send one chunk segment (the replay's no-expansion path): the message names the
    earliest offending send and the chunk its sender lacks, as the expanded path does."""
    a = uniring_allgather(4)
    rows = [(1, v, lo, hi, u, w) if t == 2 else (t, v, lo, hi, u, w)
            for t, v, lo, hi, u, w in a.sends.tolist()]
    with pytest.raises(ScheduleError) as err:
        validate(with_rows(a, rows))
    assert str(err.value) == ("step 1: node 0 sends chunks [0,1) of node 3's shard to node 1, "
                              "but node 0 does not hold chunk 0 of that shard before step 1")


def test_reverse_of_allgather_is_reduce_scatter_bidirectional():
    a = ring4_allgather()
    rs = reduce_scatter(a)                      # Thm 2 with the identity (bidirectional)
    assert rs.collective == "reduce-scatter"
    validate(rs)
    assert (rs.num_steps, rs.tau) == (a.num_steps, a.tau)


def test_reduce_scatter_on_directed_ring_thm1_and_thm2():
    g = uni_ring(1, 5)
    ag = uniring_allgather(5)
    rs2 = reduce_scatter(ag)                    # Thm 2 through the reverse isomorphism
    assert rs2.topology.same_arcs(g) and rs2.collective == "reduce-scatter"
    validate(rs2)
    rs1 = reduce_scatter(uniring_allgather(5, backwards=True), topology=g)   # Thm 1
    validate(rs1)
    assert rs1.tau == rs2.tau == ag.tau == Fraction(4, 5)
    # the plain reverse lives on G^T, whose arcs differ from G
    with pytest.raises(ScheduleError, match="not the transpose"):
        reverse(ag, g)


def test_reduce_scatter_validator_rejects_double_counting_and_missing_contributions():
    rs = reduce_scatter(ring4_allgather())
    rows = [tuple(r) for r in rs.sends.tolist()]
    # node 1 sends its partial of shard 0, chunk 0 a second time in its step to node 0
    t, v, lo, hi, u, w = next(r for r in rows if r[4] != r[1] and r[5] == r[1])
    twice = rows + [(t, v, lo, hi, u, (u + 1) % 4 if (u + 1) % 4 != w else (u - 1) % 4)]
    with pytest.raises(ScheduleError, match="more than once"):
        validate(with_rows(rs, twice))
    later = rows + [(t + 1, v, lo, hi, u, w)]    # already moved on: nothing left to send
    with pytest.raises(ScheduleError, match="holds no partial"):
        validate(with_rows(rs, later))
    with pytest.raises(ScheduleError, match="incomplete reduce-scatter"):
        validate(with_rows(rs, rows[1:]))


def test_allreduce_concatenates_and_adds_costs():
    ag = ring4_allgather()
    ar = allreduce(reduce_scatter(ag), refine(ag, 3))
    validate(ar)
    assert ar.shard_chunks == 6 and ar.reduce_steps == 2
    assert ar.num_steps == 4 and ar.tau == 2 * ag.tau
    broken = with_rows(ar, [tuple(r) for r in ar.sends.tolist()][:-1])
    with pytest.raises(ScheduleError, match="allgather phase"):
        validate(broken)


def test_json_round_trip():
    ag = ring4_allgather()
    doc = ag.to_dict()
    assert doc["collective"] == "allgather" and doc["num_nodes"] == 4
    assert doc["shard_chunks"] == 2 and doc["tau_exact"] == "3/4"
    back = StepSchedule.from_json(ag.to_json(), topology=ag.topology)
    assert np.array_equal(back.sends, ag.sends) and back.tau == ag.tau
    ar = allreduce(reduce_scatter(ag), ag)
    back = StepSchedule.from_json(ar.to_json(), topology=ag.topology)
    assert back.reduce_steps == 2
    validate(back)


def test_bad_construction_is_a_clear_error():
    with pytest.raises(ScheduleError, match=r"\(S, 6\)"):
        StepSchedule(bi_ring(2, 4), 2, np.zeros((3, 5)))
    with pytest.raises(ScheduleError, match="collective"):
        StepSchedule(bi_ring(2, 4), 2, np.zeros((0, 6)), collective="broadcast")
    with pytest.raises(ScheduleError, match="shard_chunks"):
        StepSchedule(bi_ring(2, 4), 0, np.zeros((0, 6)))


def test_bulk_json_is_byte_equal_to_json_dumps():
    """int_rows_json (digit table, and the %-format path for wide ranges) and to_json write
    exactly what json.dumps of the tolist() rows writes."""
    ag = ring4_allgather()
    schedules = [ag, allreduce(reduce_scatter(ag), refine(ag, 3)), refine(ag, 10 ** 6),
                 bfb_schedule(bi_ring(2, 16), collective=Collective.ALLREDUCE)]
    for s in schedules:
        assert s.to_json() == json.dumps(s.to_dict())
    rng = np.random.default_rng(7)
    for rows in (np.array([[0, -1, 9, 10, -(2 ** 63), 2 ** 63 - 1]]), np.zeros((0, 6), int),
                 rng.integers(-999, 1000, (300, 6)), rng.integers(0, 10, (5, 1)),
                 rng.integers(10 ** 7, 10 ** 7 + 9, (4, 2)), np.array([[-5]])):
        assert int_rows_json(rows) == json.dumps(rows.tolist())


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.__setitem__(8, (1, 2, 0, 1, 1, 0)), "does not hold"),
    (lambda r: r.pop(), "incomplete allgather"),
])
def test_replay_of_wide_chunk_ranges_sorts_breakpoints(edit, message):
    """P = 2·10^6 leaves the breakpoint bitmap (n·(P+1) codes) for sorted codes: the same
    verdicts, and the failing chunk named at its refined position."""
    ag = refine(ring4_allgather(), 10 ** 6)
    validate(ag)
    validate(reduce_scatter(ag))
    rows = [tuple(r) for r in ring4_allgather().sends.tolist()]
    edit(rows)
    with pytest.raises(ScheduleError, match=message):
        validate(refine(with_rows(ring4_allgather(), rows), 10 ** 6))


def _random_sends(topo, steps: int, rows: int, p: int, rng) -> np.ndarray:
    """Sends over random arcs of ``topo`` (not a collective: for counting only)."""
    arc = rng.integers(0, topo.src.size, rows)
    lo = rng.integers(0, p, rows)
    hi = lo + 1 + rng.integers(0, p - lo)
    return np.stack([rng.integers(1, steps + 1, rows), rng.integers(0, topo.n, rows), lo, hi,
                     topo.src[arc], topo.dst[arc]], 1)


def test_dense_link_tables_agree_with_the_sorted_links(monkeypatch):
    """step_loads and link_capacity through the dense N×N link table equal those through the
    sorted links (DENSE_LINK_NODES = 0) on multigraphs with capacities 1..3, and a send over
    no arc is refused by both; the dense path is taken (its table is kept on the topology)."""
    from topofinder.model import schedule as sched
    from topofinder.model.topology import Topology

    rng = np.random.default_rng(5)
    for n in (5, 12, 40):
        src = rng.integers(0, n, 6 * n)
        dst = (src + 1 + rng.integers(0, n - 1, src.size)) % n
        cap = rng.integers(1, 4, src.size)
        sends = _random_sends(Topology(n, src, dst), 7, 50 * n, 6, rng)
        u, w = rng.integers(0, n, 500), rng.integers(0, n, 500)
        dense_topo = Topology(n, src, dst, capacity=cap)
        dense = StepSchedule(dense_topo, 6, sends).step_loads
        dense_cap = sched.link_capacity(dense_topo, u, w)
        assert "_dense_links" in dense_topo.__dict__
        with monkeypatch.context() as m:
            m.setattr(sched, "DENSE_LINK_NODES", 0)
            sorted_topo = Topology(n, src, dst, capacity=cap)
            assert StepSchedule(sorted_topo, 6, sends).step_loads == dense
            assert np.array_equal(sched.link_capacity(sorted_topo, u, w), dense_cap)
            assert "_dense_links" not in sorted_topo.__dict__
        missing = np.flatnonzero(dense_cap == 0)
        if missing.size:
            bad = sends.copy()
            bad[0, 4], bad[0, 5] = u[missing[0]], w[missing[0]]
            with pytest.raises(ScheduleError, match="missing arc"):
                StepSchedule(Topology(n, src, dst, capacity=cap), 6, bad).step_loads


@pytest.mark.parametrize("scratch", [True, False])
def test_first_repeat_by_scratch_or_sort(scratch):
    """The first position of the smallest repeated value, the same by the scratch array and by
    np.unique, checked against a direct count."""
    from topofinder.model.schedule import _first_repeat

    rng = np.random.default_rng(11)
    for _ in range(200):
        src = rng.integers(0, 30, rng.integers(1, 25))
        counts = np.bincount(src)
        repeated = np.flatnonzero(counts > 1)
        want = None if repeated.size == 0 else int(np.argmax(src == repeated[0]))
        last = np.empty(30, np.int32) if scratch else None
        assert _first_repeat(src, last) == want
