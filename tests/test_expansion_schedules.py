"""Expansion schedules (paper 001 §5, App. A.6, D): every expanded schedule replays valid and
its replayed T_L and τ equal the prediction of DESIGN §5 exactly (Fractions) — equality for
L(G) with a BFB base whose out-neighbourhoods all exceed one node, ≤ otherwise (Thm 7, 10-12,
App. A.6); paper 001 Table 7 expansion points.

Base schedules here are built by hand from the definitions (one-step K(m), the two-step BFB of
K(d,d), ring schedules, the BFB of DC(d+2,{1..d}), the BFB of BiRing(2,m)), independently of
topofinder.scoring.allgather.bfb; BFB-generated bases are added where
topofinder.scoring.allgather.bfb is available.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from topofinder.expansions import predict
from topofinder.model import operations
from topofinder.expansions import schedules as es
from topofinder.scoring.allgather.bfb import product_schedule
from topofinder.errors import TopofinderError
from topofinder.families import (bi_ring, complete, complete_bipartite, directed_circulant,
                                   generalized_kautz, uni_ring)
from topofinder.model.schedule import StepSchedule, reduce_scatter, validate


# ---- hand-made base schedules ------------------------------------------------------------------
def complete_one_step(m: int) -> StepSchedule:
    """K(m): every node sends its shard to every other node in one step; τ = (m−1)/m."""
    g = complete(m)
    one = np.ones(g.num_arcs, np.int64)
    return StepSchedule(g, 1, np.stack([one, g.src, 0 * one, one, g.src, g.dst], 1), method="bfb")


def bipartite_bfb(d: int) -> StepSchedule:
    """K(d,d) BFB: step 1 own shard to the d neighbours; step 2 each of u's d in-neighbours
    sends 1/d of every same-side shard. τ = (d + (d−1))·d/(2d·d) = (2d−1)/(2d)."""
    g = complete_bipartite(d)
    rows = [(1, u, 0, d, u, w) for u, w in zip(g.src.tolist(), g.dst.tolist())]
    for u in range(2 * d):
        side = u // d
        ins = [w for w in range(2 * d) if w // d != side]
        for v in range(side * d, side * d + d):
            if v != u:
                rows += [(2, v, a, a + 1, w, u) for a, w in enumerate(ins)]
    return StepSchedule(g, d, np.array(rows), method="bfb")


def ring_schedule(d: int, m: int) -> StepSchedule:
    """UniRing(d,m): at step t node u forwards the shard of u−t+1 to u+1; T_L = m−1."""
    g = uni_ring(d, m)
    rows = [(t, (u - t + 1) % m, 0, 1, u, (u + 1) % m) for t in range(1, m) for u in range(m)]
    return StepSchedule(g, 1, np.array(rows))


def bi_ring_bfb(m: int) -> StepSchedule:
    """BiRing(2,m) BFB (App. F.1): shards travel both ways; for even m the antipode's shard
    arrives half from each side (P = 2). T_L = ⌊m/2⌋, τ = (m−1)/m."""
    g = bi_ring(2, m)
    rows = []
    for t in range(1, m // 2 + 1):
        split = m % 2 == 0 and t == m // 2
        for u in range(m):
            rows.append((t, (u - t + 1) % m, 0, 1 if split else 2, u, (u + 1) % m))
            rows.append((t, (u + t - 1) % m, 1 if split else 0, 2, u, (u - 1) % m))
    return StepSchedule(g, 2, np.array(rows), method="bfb")


def dc_bfb(d: int) -> StepSchedule:
    """DC(d+2,{1..d}) BFB: step 1 own shard to all d out-neighbours; step 2 node u gets the
    shard of u+1 (its only node at distance 2), chunk a−1 from in-neighbour u−a. τ = (d+1)/(d+2)."""
    m = d + 2
    g = directed_circulant(m, range(1, d + 1))
    rows = [(1, u, 0, d, u, w) for u, w in zip(g.src.tolist(), g.dst.tolist())]
    rows += [(2, (u + 1) % m, a - 1, a, (u - a) % m, u) for u in range(m)
             for a in range(1, d + 1)]
    return StepSchedule(g, d, np.array(rows), method="bfb")


HAND_MADE = {
    "K(3)": lambda: complete_one_step(3),
    "K(4)": lambda: complete_one_step(4),
    "K(5)": lambda: complete_one_step(5),
    "K(2,2)": lambda: bipartite_bfb(2),
    "K(3,3)": lambda: bipartite_bfb(3),
    "K(4,4)": lambda: bipartite_bfb(4),
    "UniRing(1,4)": lambda: ring_schedule(1, 4),
    "UniRing(1,5)": lambda: ring_schedule(1, 5),
    "UniRing(2,3)": lambda: ring_schedule(2, 3),
    "UniRing(2,4)": lambda: ring_schedule(2, 4),
    "BiRing(2,5)": lambda: bi_ring_bfb(5),
    "BiRing(2,6)": lambda: bi_ring_bfb(6),
    "DC(4,{1,2})": lambda: dc_bfb(2),
    "DC(5,{1,2,3})": lambda: dc_bfb(3),
}
NAMES = sorted(HAND_MADE)


def base(name: str) -> StepSchedule:
    a = HAND_MADE[name]()
    validate(a)
    return a


def facts(a: StepSchedule):
    g = a.topology
    return g.n, g.degree, a.num_steps, a.tau


def lg_exact(a: StepSchedule) -> bool:
    """Thm 10's condition: a BFB schedule (T_L = diameter, every send along a shortest path)
    and every node with more than one distinct out-neighbour."""
    g = a.topology
    dist = g.distances
    s = a.sends
    bfb = a.num_steps == g.diameter and bool(np.all(dist[s[:, 1], s[:, 5]] == s[:, 0]))
    distinct = np.array([len(set(g.dst[g.src == u].tolist()) - {u}) for u in range(g.n)])
    return bfb and bool(np.all(distinct > 1))


# ---- the hand-made bases are what the papers say they are ---------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_hand_made_bases_are_bw_optimal(name):
    a = base(name)
    n = a.topology.n
    assert a.tau == Fraction(n - 1, n)


def expanded(name: str, schedule, operation, prediction, k: int):
    """Base ``name``, its k-fold expanded schedule (replay-validated, on exactly the arcs of
    ``operation``) and the paper's prediction (N, d, T_L, τ) for it."""
    a = base(name)
    b = schedule(a, k)
    validate(b)
    assert b.topology.same_arcs(operation(a.topology, k))
    return a, b, prediction(*facts(a), k)


# ---- line graph --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("times", [1, 2])
def test_line_graph_schedule_matches_prediction(name, times):
    a, b, (n, d, t_l, tau) = expanded(name, es.line_graph_schedule, operations.line_graph,
                                      predict.predict_line_graph, times)
    assert (b.topology.n, b.topology.degree) == (n, d)
    if lg_exact(a):
        assert (b.num_steps, b.tau) == (t_l, tau)
    else:
        assert b.num_steps <= t_l and b.tau <= tau


def test_line_graph_equality_cases_are_the_bfb_ones():
    exact = {name for name in NAMES if lg_exact(base(name))}
    assert exact == {"K(3)", "K(4)", "K(5)", "K(2,2)", "K(3,3)", "K(4,4)", "BiRing(2,5)",
                     "BiRing(2,6)", "DC(4,{1,2})", "DC(5,{1,2,3})"}


def test_line_graph_of_a_single_ring_is_strictly_below_the_bound():
    # UniRing(1,m): L(G) is the ring again and Def 1 only re-sends what the ring schedule did
    a = base("UniRing(1,5)")
    b = es.line_graph_schedule(a)
    assert b.tau == a.tau < predict.predict_line_graph(*facts(a))[3]


def test_line_graph_splits_multi_arc_sends_evenly():
    # UniRing(2,4): each ring send over the double arc becomes two half-sends
    a = base("UniRing(2,4)")
    b = es.line_graph_schedule(a)
    assert b.shard_chunks == 2
    later = b.sends[b.sends[:, 0] > 1]
    assert np.all(later[:, 3] - later[:, 2] == 1)


def test_line_graph_reduce_scatter_by_reverse_symmetry():
    # L(G) keeps a reverse isomorphism (Appendix B, Thm 2): the reduce-scatter replays too
    b = es.line_graph_schedule(base("DC(4,{1,2})"), 2)
    rs = reduce_scatter(b)
    validate(rs)
    assert (rs.num_steps, rs.tau) == (b.num_steps, b.tau)


# ---- degree expansion ------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("factor", [2, 3])
def test_degree_schedule_matches_prediction(name, factor):
    _, b, (n, d, t_l, tau) = expanded(name, es.degree_schedule, operations.degree_expansion,
                                      predict.predict_degree_expansion, factor)
    assert (b.topology.n, b.topology.degree, b.num_steps, b.tau) == (n, d, t_l, tau)
    assert b.tau == Fraction(n - 1, n)           # Cor 11.1: BW optimality is preserved


def test_degree_expansion_needs_a_loop_free_base():
    g = generalized_kautz(2, 5)                  # x → −2x−a has self-loops
    assert g.self_loops
    a = StepSchedule(g, 1, np.zeros((0, 6), np.int64))
    with pytest.raises(TopofinderError, match="self-loops"):
        es.degree_schedule(a, 2)


# ---- Cartesian power ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_power_schedule_matches_prediction(name):
    a = base(name)
    b = es.power_schedule(a, 2)
    validate(b)
    assert b.topology.same_arcs(operations.cartesian_power(a.topology, 2))
    n, d, t_l, tau = predict.predict_cartesian_power(*facts(a), 2)
    assert (b.topology.n, b.topology.degree, b.num_steps, b.tau) == (n, d, t_l, tau)


@pytest.mark.parametrize("name", ["K(3)", "UniRing(1,4)", "UniRing(2,3)", "K(2,2)"])
def test_cube_schedule_matches_prediction(name):
    a = base(name)
    b = es.power_schedule(a, 3)
    validate(b)
    n, d, t_l, tau = predict.predict_cartesian_power(*facts(a), 3)
    assert (b.topology.n, b.topology.degree, b.num_steps, b.tau) == (n, d, t_l, tau)


def test_torus_schedule_is_bw_optimal():
    # §5.3: ℓ-ring^2 with the two dimension orders on two half-shards is BW-optimal, 2·T_L
    b = es.power_schedule(base("UniRing(1,5)"), 2)
    assert (b.num_steps, b.tau) == (8, Fraction(24, 25))


# ---- uni → bidirectional ----------------------------------------------------------------------
def _two_cycles(g) -> bool:
    pairs = set(zip(g.src.tolist(), g.dst.tolist()))
    return any((w, u) in pairs for u, w in pairs if u != w)


@pytest.mark.parametrize("name", NAMES)
def test_bidirectional_schedule_matches_prediction(name):
    a = base(name)
    b = es.bidirectional_schedule(a)
    validate(b)
    assert b.topology.same_arcs(operations.bidirectional(a.topology)) and b.topology.bidirectional
    n, d, t_l, tau = predict.predict_bidirectional(*facts(a))
    assert (b.topology.n, b.topology.degree, b.num_steps) == (n, d, t_l)
    if _two_cycles(a.topology) and not a.topology.bidirectional:
        assert b.tau <= tau
    else:
        assert b.tau == tau


def test_bidirectional_needs_a_reverse_isomorphism():
    g = generalized_kautz(2, 6)
    a = StepSchedule(g, 1, np.zeros((0, 6), np.int64))
    with pytest.raises(TopofinderError, match="reverse isomorphism"):
        es.bidirectional_schedule(a)


def test_expansions_refuse_reduce_scatter_schedules():
    rs = reduce_scatter(base("K(4)"))
    for build in (es.line_graph_schedule, lambda s: es.degree_schedule(s, 2),
                  lambda s: es.power_schedule(s, 2), es.bidirectional_schedule):
        with pytest.raises(TopofinderError, match="allgather"):
            build(rs)


# ---- predictions -------------------------------------------------------------------------------
def test_iterated_line_graph_prediction_is_the_one_step_prediction_iterated():
    # Cor 10.1 is Thm 10 applied n times
    state = (16, 4, 3, Fraction(15, 16))
    for times in range(1, 5):
        state = predict.predict_line_graph(*state)
        assert state == predict.predict_line_graph(16, 4, 3, Fraction(15, 16), times)


def test_product_prediction_thm13():
    assert predict.predict_product([(4, 1, 3), (8, 1, 7)]) == (32, 2, 10, Fraction(31, 32))


# ---- paper 001 Table 7 expansion points --------------------------------------------------------
@pytest.mark.parametrize("times,t_l,tau,paper", [
    (1, 3, Fraction(1), 1.000),
    (2, 4, Fraction(33, 32), 1.03125),
    (3, 5, Fraction(133, 128), 1.0390625),
])
def test_table7_line_graphs_of_k44(times, t_l, tau, paper):
    b = es.line_graph_schedule(base("K(4,4)"), times)
    validate(b)
    assert (b.topology.n, b.topology.degree) == (8 * 4 ** times, 4)
    assert (b.num_steps, b.tau) == (t_l, tau)
    assert float(b.tau) == pytest.approx(paper, abs=5e-4)


# ---- BFB-generated bases (topofinder.scoring.allgather.bfb) ---------------------------------------
BFB_BASES = ["K(4)", "K(3,3)", "H(2,3)", "DC(6,{1,2,3,4})", "BiRing(2,7)", "C(8,{1,2})",
             "Torus(3,3)", "Kautz(2,1)", "Pi(2,7)", "Pi(3,10)", "DistReg(Petersen)", "DBJ(2,3)",
             "Hypercube(3)", "UniRing(2,5)", "BiRing(4,5)"]


def bfb_base(expr: str) -> StepSchedule:
    bfb = pytest.importorskip("topofinder.scoring.allgather.bfb", reason="bfb not available")
    from topofinder.families.build import parse

    a = bfb.bfb_schedule(parse(expr))
    validate(a)
    return a


@pytest.mark.parametrize("expr", BFB_BASES)
def test_line_graph_of_bfb_bases(expr):
    a = bfb_base(expr)
    b = es.line_graph_schedule(a)
    validate(b)
    n, d, t_l, tau = predict.predict_line_graph(*facts(a))
    if lg_exact(a):                               # Thm 10: equality
        assert (b.num_steps, b.tau) == (t_l, tau)
    else:                                         # Thm 7: upper bound
        assert b.num_steps <= t_l and b.tau <= tau


@pytest.mark.parametrize("expr", [e for e in BFB_BASES if not e.startswith(("Pi", "DBJ"))])
def test_degree_and_power_of_bfb_bases(expr):
    a = bfb_base(expr)
    for b, pred in ((es.degree_schedule(a, 2), predict.predict_degree_expansion(*facts(a), 2)),
                    (es.power_schedule(a, 2), predict.predict_cartesian_power(*facts(a), 2))):
        validate(b)
        assert (b.topology.n, b.topology.degree, b.num_steps, b.tau) == pred


@pytest.mark.parametrize("expr", ["UniRing(2,5)", "DBJ(2,3)", "Kautz(2,1)", "BiRing(2,7)",
                                  "DC(6,{1,2,3,4})"])
def test_bidirectional_of_bfb_bases(expr):
    a = bfb_base(expr)
    b = es.bidirectional_schedule(a)
    validate(b)
    pred = predict.predict_bidirectional(*facts(a))
    assert (b.topology.n, b.topology.degree, b.num_steps) == pred[:3]
    assert b.tau == pred[3] if not _two_cycles(a.topology) else b.tau <= pred[3]


# ---- products scheduled by BFB (Thm 13) ------------------------------------------------------
def _factor(expr: str):
    from topofinder.families.build import parse

    return parse(expr)


PRODUCTS = [("UniRing(1,4)", "UniRing(1,8)"), ("UniRing(1,3)", "UniRing(1,5)"),
            ("BiRing(2,5)", "UniRing(1,4)"), ("K(3)", "K(4)"), ("K(3)", "UniRing(1,4)"),
            ("K(2,2)", "K(3)"), ("DC(5,{1,2,3})", "K(3)"), ("BiRing(2,6)", "BiRing(2,4)"),
            ("K(3,3)", "UniRing(1,3)"), ("H(2,3)", "UniRing(1,3)"),
            ("BiRing(2,8)", "UniRing(1,4)", "UniRing(1,4)")]


@pytest.mark.parametrize("factors", PRODUCTS, ids=[" x ".join(p) for p in PRODUCTS])
def test_product_schedule_matches_thm13(factors):
    bfb = pytest.importorskip("topofinder.scoring.allgather.bfb", reason="bfb not available")
    gs = [_factor(e) for e in factors]
    for g in gs:                                  # Thm 13's conditions, checked independently
        assert g.self_loops == 0 and g.link_matrix.max() == 1
        assert bfb.bfb_score(g).bw_optimal
    s = product_schedule(*gs)
    validate(s)
    assert s.topology.same_arcs(operations.cartesian_product(*gs))
    pred = predict.predict_product([(g.n, g.degree, g.diameter) for g in gs])
    assert (s.topology.n, s.topology.degree, s.num_steps, s.tau) == pred


def test_table7_biring_times_uniring_squared():
    # DESIGN §9 reference row N = 128: BiRing(2,8) x UniRing(1,4)^2 (10, 0.992)
    pytest.importorskip("topofinder.scoring.allgather.bfb", reason="bfb not available")
    s = product_schedule(*[_factor(e) for e in PRODUCTS[-1]])
    assert (s.topology.n, s.num_steps, s.tau) == (128, 10, Fraction(127, 128))
    assert round(float(s.tau), 3) == 0.992


@pytest.mark.slow
def test_table7_uniring_product_squared():
    # (UniRing(1,4) x UniRing(1,8))^2: BFB product (Thm 13) then Cartesian square (Thm 12);
    # N = 1024, 2.3 M sends
    pytest.importorskip("topofinder.scoring.allgather.bfb", reason="bfb not available")
    base = product_schedule(_factor("UniRing(1,4)"), _factor("UniRing(1,8)"))
    s = es.power_schedule(base, 2)
    validate(s)
    assert (s.topology.n, s.topology.degree) == (1024, 4)
    assert (s.num_steps, s.tau) == (20, Fraction(1023, 1024))
    assert round(float(s.tau), 3) == 0.999


def test_table7_line_graph_of_distreg_4_32():
    # L(DistReg(4,32)) (5, 1.000): the d = 4, N = 32 distance-regular graph has a BW-optimal
    # BFB schedule of T_L = diameter = 4 (App. F.3), and Thm 10 adds one step and 1/32
    a = bfb_base("DistReg(4,32)")
    assert (a.num_steps, a.tau) == (4, Fraction(31, 32))
    b = es.line_graph_schedule(a)
    validate(b)
    assert (b.topology.n, b.num_steps, b.tau) == (128, 5, Fraction(1))


# ---- Table 7 points built on the search-found catalog bases ------------------------------------
def catalog_base(expr: str) -> StepSchedule:
    from topofinder.families import catalog

    try:
        entry = catalog.load_entry(expr)
    except TopofinderError:
        pytest.skip(f"catalog entry {expr} not written yet (topofinder catalog build)")
    a = catalog.catalog_schedule(expr)
    validate(a)
    assert (a.num_steps, a.tau) == (entry["T_L"], Fraction(entry["tau"]))
    return a


def _check_point(s: StepSchedule, n: int, t_l: int, tau: Fraction, paper: float):
    validate(s)
    assert (s.topology.n, s.topology.degree) == (n, 4)
    assert s.num_steps == t_l
    assert s.tau <= tau                               # the theorems' value (bound or exact)
    assert round(float(s.tau), 3) == pytest.approx(paper, abs=1e-9)


def test_table7_diamond_square_and_its_line_graph():
    a = catalog_base("Diamond")
    assert (a.topology.n, a.topology.degree, a.num_steps, a.tau) == (8, 2, 3, Fraction(7, 8))
    sq = es.power_schedule(a, 2)
    _check_point(sq, 64, 6, Fraction(63, 64), 0.984)
    assert sq.tau == Fraction(63, 64)                 # Thm 12 is exact
    _check_point(es.line_graph_schedule(sq), 256, 7, Fraction(1), 1.000)


@pytest.mark.slow
def test_table7_line_graph_squared_of_diamond_square():
    sq = es.power_schedule(catalog_base("Diamond"), 2)
    _check_point(es.line_graph_schedule(sq, 2), 1024, 8, Fraction(257, 256), 1.004)


def test_table7_dbjmod24_square():
    a = catalog_base("DBJMod(2,4)")
    assert (a.topology.n, a.topology.degree, a.num_steps, a.tau) == (16, 2, 5, Fraction(15, 16))
    sq = es.power_schedule(a, 2)
    _check_point(sq, 256, 10, Fraction(255, 256), 0.996)
    assert sq.tau == Fraction(255, 256)


@pytest.mark.slow
def test_table7_line_graph_of_dbjmod24_square():
    sq = es.power_schedule(catalog_base("DBJMod(2,4)"), 2)
    _check_point(es.line_graph_schedule(sq), 1024, 11, Fraction(1), 1.000)


def test_table7_line_graphs_of_dbjmod42():
    a = catalog_base("DBJMod(4,2)")
    assert (a.topology.n, a.topology.degree, a.num_steps) == (16, 4, 3)
    _check_point(es.line_graph_schedule(a), 64, 4, Fraction(1), 1.000)
    _check_point(es.line_graph_schedule(a, 2), 256, 5, Fraction(65, 64), 1.016)
