"""Streamed BFB step loads (topofinder.scoring.allgather.bfb_bits) against the dense-matrix
scorer and against brute force over every in-slot subset; the pipelined load against ForestColl."""

from fractions import Fraction

import numpy as np
import pytest

import topofinder as tf
from topofinder.model.reach import in_slots
from topofinder.model.topology import Topology
from topofinder.scoring.allgather import bfb
from topofinder.scoring.allgather.bfb_bits import step_loads
from topofinder.scoring.trees.forestcoll import throughput_optimum

EXPRS = ["Pi(4,100)", "L(K(3))", "Kautz(2,3)", "Pi(3,20)", "DBJ(2,4)", "L(Pi(3,10))",
         "Pi(2,131)", "DBJMod(2,4)", "L(DBJMod(2,4)*2)", "Pi(4,1000)", "Pi(5,77)",
         "DBJ(3,3)", "L(Pi(2,9))*2"]


def random_topology(rng) -> Topology:
    n = int(rng.integers(3, 40))
    order = rng.permutation(n)
    extra = int(rng.integers(0, 2 * n))
    src = np.concatenate([order, rng.integers(0, n, extra)])
    dst = np.concatenate([np.roll(order, -1), rng.integers(0, n, extra)])
    cap = rng.integers(1, 4, src.size) if rng.random() < 0.5 else None
    return Topology(n, src, dst, expr="random", capacity=cap)


def dense_score(topo, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(bfb.bfb_bits, "MAX_SLOTS", 0)
        return bfb.bfb_score(topo)


@pytest.mark.parametrize("expr", EXPRS)
def test_streamed_equals_dense(expr, monkeypatch):
    topo = tf.load(expr)
    topo = Topology(topo.n, topo.src, topo.dst, expr=expr, capacity=topo.capacity)  # not VT
    streamed = bfb.bfb_score(topo)
    dense = dense_score(topo, monkeypatch)
    assert (streamed.T_L, streamed.step_load) == (dense.T_L, dense.step_load)


def test_random_topologies_with_capacities(monkeypatch):
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(120):
        topo = random_topology(rng)
        slots, caps = in_slots(topo.n, topo.link_matrix)
        if slots.shape[1] > 6:
            continue
        streamed = step_loads(topo.n, slots, caps)
        dense = dense_score(topo, monkeypatch)
        assert streamed[:2] == (dense.T_L, dense.step_load)
        assert streamed[2] == brute_pipelined(topo)
        assert np.array_equal(streamed[3], np.bincount(topo.distances.ravel()))
        checked += 1
    assert checked > 60


def brute_pipelined(topo) -> Fraction:
    """max_u max_W #{v: every shortest-path in-slot of u toward v lies in W} / cap(W), by
    enumerating W (the Hall ratio of all of u's shards at once)."""
    dist = topo.distances                                    # dist[v, u]
    slots, caps = in_slots(topo.n, topo.link_matrix)
    best = Fraction(0)
    for u in range(topo.n):
        real = [j for j in range(slots.shape[1]) if caps[u, j] > 0]
        elig = [{j for j in real if dist[v, slots[u, j]] == dist[v, u] - 1}
                for v in range(topo.n) if v != u]
        for w in range(1, 1 << len(real)):
            chosen = {real[i] for i in range(len(real)) if w >> i & 1}
            count = sum(1 for e in elig if e <= chosen)
            best = max(best, Fraction(count, int(sum(caps[u, j] for j in chosen))))
    return best


@pytest.mark.parametrize("expr", EXPRS[:8] + ["Torus(4,6)", "Hypercube(5)", "L(K(4,4))"])
def test_pipelined_load_bounds_forestcoll(expr):
    """A BFB routing without barriers is a tree-flow schedule: its load is ≥ the optimum."""
    topo = tf.load(expr)
    score = bfb.bfb_score(topo)
    assert score.pipelined_load >= throughput_optimum(topo).ratio
    assert score.pipelined_load <= sum(score.step_load)


def test_disconnected_is_refused():
    from topofinder.errors import TopofinderError
    topo = Topology(4, [0, 1, 2, 3, 2], [1, 0, 3, 2, 2], expr="two pairs")
    slots, caps = in_slots(topo.n, topo.link_matrix)
    with pytest.raises(TopofinderError, match="strongly connected"):
        step_loads(topo.n, slots, caps)


@pytest.mark.parametrize("expr", ["DBJ(2,4)", "L(Pi(3,10))", "Pi(2,131)", "L(K(4,4))",
                                  "Pi(4,100)", "Kautz(2,3)"])
def test_achieved_schedule_settles_forestcoll(expr):
    """With BFB's pipelined load as a known schedule the optimum is unchanged, and no max-flow
    runs when that schedule meets the best single-node cut."""
    topo = tf.load(expr)
    pipelined = bfb.bfb_score(topo).pipelined_load
    plain, shortcut = throughput_optimum(topo), throughput_optimum(topo, pipelined)
    assert (shortcut.ratio, shortcut.cut_capacity) == (plain.ratio, plain.cut_capacity)
    assert (shortcut.maxflows == 0) == (pipelined == plain.ratio)


def test_forestcoll_time_limit_gives_a_certified_bracket():
    """Stopped before any max-flow, τ_fc is the best starting cut (a lower bound) and the
    barrier-free BFB schedule the upper bound; the exact value lies inside."""
    import jsonschema, json
    from importlib.resources import files
    info = tf.score("Pi(4,300)", fc_time_limit=1e-9)
    full = tf.score("Pi(4,300)", fc_time_limit=None)
    assert info["tau_fc_optimal"] is False and full["tau_fc_optimal"] is True
    low, high = Fraction(info["tau_fc_exact"]), Fraction(info["tau_fc_upper_exact"])
    assert low <= Fraction(full["tau_fc_exact"]) <= high
    schema = json.loads(files("topofinder.schemas").joinpath("score.schema.json").read_text())
    jsonschema.validate(info, schema)


def test_work_beyond_the_limit_is_refused_up_front():
    from topofinder.errors import TopofinderError
    from topofinder.finder.describe import bfb_seconds, check_scorable
    big, small = tf.load("Pi(4,3000)"), tf.load("Pi(4,300)")
    assert bfb_seconds(big) > 50 * bfb_seconds(small)          # quadratic in N
    with pytest.raises(TopofinderError, match="would take about"):
        check_scorable(big, limit=bfb_seconds(big) / 2)
    check_scorable(small)
