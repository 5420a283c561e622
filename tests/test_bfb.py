"""BFB scorer and generator against paper 001 (App. F, Tables 4, 7, 8) and against each other:
every generated schedule replays valid and its replayed τ equals the scorer's exact τ."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import linprog

from topofinder.scoring.allgather.bfb import bfb_schedule, bfb_score, distances_to
from topofinder.model.operations import line_graph
from topofinder.families import (CATALOG_NAMES, bi_ring, circulant, complete,
                                   complete_bipartite, de_bruijn, directed_circulant,
                                   distance_regular, generalized_kautz, hamming, hypercube,
                                   torus,
                                   uni_ring)
from topofinder.model.schedule import reduce_scatter, validate
from topofinder.model.topology import Topology


def opt(n):
    return Fraction(n - 1, n)


@pytest.mark.parametrize("m", [2, 3, 4, 7, 8, 13])
def test_biring_half_latency_and_bw_optimal(m):            # App. F.1
    s = bfb_score(bi_ring(2, m))
    assert s.T_L == m // 2 and s.tau == opt(m)


@pytest.mark.parametrize("dims", [(3, 5, 7), (4, 6), (3, 4), (5, 5), (8,), (3, 4, 5), (6, 3, 9)])
def test_every_torus_bw_optimal(dims):                       # Thm 13 / §6
    g = torus(*dims)
    s = bfb_score(g)
    n = int(np.prod(dims))
    assert s.T_L == sum(d // 2 for d in dims) and s.tau == opt(n)
    # the same without the vertex-transitive shortcut (all nodes analysed)
    plain = Topology(g.n, g.src, g.dst, expr="plain")
    assert bfb_score(plain).tau == opt(n)


@pytest.mark.parametrize("name", CATALOG_NAMES)
def test_catalog_distance_regular_bw_optimal(name):          # Thm 18 (App. F.3)
    g = distance_regular(name)
    assert bfb_score(g).bw_optimal


@pytest.mark.parametrize("m, a, b", [(13, 1, 5), (20, 3, 4), (31, 2, 7), (16, 3, 4), (25, 1, 7)])
def test_two_generator_circulants_bw_optimal(m, a, b):       # Conjecture of App. F.4, sample
    assert bfb_score(circulant(m, [a, b])).tau == opt(m)


@pytest.mark.parametrize("build, t_l, tau", [
    (lambda: generalized_kautz(4, 64), 3, Fraction(21, 16)),        # 1.3125
    (lambda: generalized_kautz(4, 256), 4, Fraction(85, 64)),       # 1.328125
    (lambda: de_bruijn(4, 4), 4, Fraction(85, 64)),                 # 1.328
    (lambda: line_graph(complete_bipartite(4)), 3, Fraction(1)),    # 1.000
])
def test_table_values_exact(build, t_l, tau):
    s = bfb_score(build())
    assert (s.T_L, s.tau) == (t_l, tau)


def test_table_values_rounded():
    s = bfb_score(generalized_kautz(4, 1024))
    assert s.T_L == 5 and round(float(s.tau), 3) == 1.332
    s = bfb_score(line_graph(circulant(16, [3, 4]), 3))
    assert s.T_L == 6 and round(float(s.tau), 4) == 1.0195
    # Cor 10.1: τ(L^3) = τ + d/(d−1)(1/N − 1/(d^3 N)) with the BW-optimal base C(16,{3,4})
    assert s.tau == opt(16) + Fraction(4, 3) * (Fraction(1, 16) - Fraction(1, 1024))


def test_multi_arcs_add_capacity_and_self_loops_carry_nothing():
    # UniRing(d, m): d parallel links; T_L = m − 1 and τ = (N−1)/N for every d
    for d in (1, 2, 3):
        s = bfb_score(uni_ring(d, 5))
        assert (s.T_L, s.tau) == (4, opt(5))
    # K(3) plus a self-loop on every node: the loop adds a port (d = 3) but no bandwidth
    k3 = complete(3)
    looped = Topology(3, np.r_[k3.src, 0, 1, 2], np.r_[k3.dst, 0, 1, 2], expr="K3+loops")
    assert bfb_score(looped).tau == Fraction(3, 3) * 1       # d/N · U, U = 1 shard per link


def lp_step_loads(g):
    """Independent reference: LP (1) for every (u, t) with scipy's HiGHS (float)."""
    dist = g.distances                                      # dist[v, u]
    lm = g.link_matrix.toarray()
    out = []
    for t in range(1, int(dist.max()) + 1):
        best = 0.0
        for u in range(g.n):
            vs = np.flatnonzero(dist[:, u] == t)
            ws = [w for w in np.flatnonzero(lm[:, u]) if w != u]
            pairs = [(v, w) for v in vs for w in ws if dist[v, w] == t - 1]
            if not pairs:
                continue
            nv = len(pairs)                                  # variables x_(v,w), then U
            c = np.zeros(nv + 1); c[-1] = 1
            a_ub = np.zeros((len(ws), nv + 1)); a_eq = np.zeros((len(vs), nv + 1))
            for i, (v, w) in enumerate(pairs):
                a_ub[ws.index(w), i] = 1.0 / lm[w, u]
                a_eq[list(vs).index(v), i] = 1
            a_ub[:, -1] = -1
            r = linprog(c, A_ub=a_ub, b_ub=np.zeros(len(ws)), A_eq=a_eq, b_eq=np.ones(len(vs)),
                        bounds=[(0, 1)] * nv + [(0, None)], method="highs")
            best = max(best, r.fun)
        out.append(best)
    return out


@pytest.mark.parametrize("build", [
    lambda: generalized_kautz(3, 20), lambda: de_bruijn(2, 3), lambda: generalized_kautz(2, 13),
    lambda: Topology(6, [0, 0, 1, 2, 2, 3, 4, 5, 5, 1], [1, 2, 2, 3, 4, 5, 0, 0, 1, 4],
                     capacity=[1, 2, 1, 3, 1, 1, 2, 1, 1, 2], expr="hetero6"),
])
def test_hall_ratio_equals_lp1(build):
    """The scorer's per-step U equals LP (1)/(14)'s optimum (a second, independent method)."""
    g = build()
    s = bfb_score(g)
    assert [float(x) for x in s.step_load] == pytest.approx(lp_step_loads(g), abs=1e-9)


def test_hall_ratio_brute_force_on_random_digraphs():
    """Subset enumeration in plain Python (no zeta transform) on random multigraphs."""
    rng = np.random.default_rng(7)
    for trial in range(6):
        n = int(rng.integers(5, 9))
        src = np.r_[np.arange(n), rng.integers(0, n, 2 * n)]
        dst = np.r_[(np.arange(n) + 1) % n, rng.integers(0, n, 2 * n)]
        g = Topology(n, src, dst, expr=f"rand{trial}",
                     capacity=rng.integers(1, 4, src.size))
        dist, lm = g.distances, g.link_matrix.toarray()
        expect = []
        for t in range(1, int(dist.max()) + 1):
            best = Fraction(0)
            for u in range(n):
                ws = [w for w in range(n) if w != u and lm[w, u]]
                vs = [v for v in range(n) if dist[v, u] == t]
                for r in range(1, len(ws) + 1):
                    for sub in combinations(ws, r):
                        cnt = sum(all(w in sub for w in ws if dist[v, w] == t - 1) for v in vs)
                        best = max(best, Fraction(cnt, int(sum(lm[w, u] for w in sub))))
            expect.append(best)
        assert list(bfb_score(g).step_load) == expect


def test_bit_parallel_distances_match_scipy():
    g = line_graph(circulant(16, [3, 4]), 2)
    assert np.array_equal(distances_to(g), g.distances.T)
    with pytest.raises(Exception, match="strongly connected"):
        bfb_score(Topology(3, [0, 1], [1, 2], expr="path"))


GEN_CASES = [
    lambda: bi_ring(2, 9), lambda: bi_ring(4, 6), lambda: torus(3, 5, 7), lambda: torus(4, 6),
    lambda: hypercube(5), lambda: generalized_kautz(4, 64), lambda: generalized_kautz(3, 50),
    lambda: de_bruijn(2, 4), lambda: line_graph(complete_bipartite(4)),
    lambda: line_graph(circulant(16, [3, 4]), 1), lambda: circulant(20, [3, 4]),
    lambda: directed_circulant(11, [1, 3]), lambda: uni_ring(2, 5),
    lambda: distance_regular(CATALOG_NAMES[0]),
    lambda: Topology(6, [0, 0, 1, 2, 2, 3, 4, 5, 5, 1], [1, 2, 2, 3, 4, 5, 0, 0, 1, 4],
                     capacity=[1, 2, 1, 3, 1, 1, 2, 1, 1, 2], expr="hetero6"),
]


@pytest.mark.parametrize("build", GEN_CASES)
def test_generator_replays_valid_with_scorer_tau(build):
    g = build()
    s = bfb_schedule(g)
    validate(s)
    score = bfb_score(g)
    assert s.num_steps == score.T_L == g.diameter
    assert s.tau == score.tau
    assert s.method == "bfb"
    # BFB order (Def 15): every send of v's shard to u at step t comes from dist t−1
    dist = g.distances
    t, v, lo, hi, w, u = s.sends.T
    assert np.all(dist[v, u] == t) and np.all(dist[v, w] == t - 1)


@pytest.mark.parametrize("build", [lambda: generalized_kautz(3, 50), lambda: torus(3, 5),
                                   lambda: directed_circulant(11, [1, 3])])
def test_reduce_scatter_and_allreduce(build):
    g = build()
    ag = bfb_schedule(g)
    rs = bfb_schedule(g, collective="reduce-scatter")        # Thm 1 (Pi) or Thm 2
    validate(rs)
    assert rs.topology.same_arcs(g)
    assert rs.num_steps == bfb_score(g.transpose()).T_L
    assert rs.tau == bfb_score(g.transpose()).tau
    ar = bfb_schedule(g, collective="allreduce")
    validate(ar)
    assert ar.num_steps == rs.num_steps + ag.num_steps and ar.tau == rs.tau + ag.tau


@pytest.mark.parametrize("build, p", [(lambda: torus(3, 5, 7), 2), (lambda: hypercube(5), 7),
                                      (lambda: generalized_kautz(4, 64), 3)])
def test_fixed_chunk_count_within_thm20(build, p):
    g = build()
    s = bfb_schedule(g, shard_chunks=p)
    validate(s)
    assert s.shard_chunks == p
    best = bfb_score(g).tau
    d, n, diam = g.degree, g.n, g.diameter
    assert best <= s.tau <= best + Fraction(d * (d ** diam - 1), (d - 1) * p * n)   # Thm 20


def test_exact_chunking_is_lcm_of_denominators():
    g = torus(3, 5, 7)
    s = bfb_schedule(g)
    lcm_den = np.lcm.reduce([x.denominator for x in bfb_score(g).step_load])
    assert s.shard_chunks == lcm_den
    assert bfb_schedule(g, shard_chunks=2 * lcm_den).tau == s.tau       # a multiple is exact


def test_reduce_scatter_matches_reverse_of_transpose_allgather():
    g = generalized_kautz(3, 20)                              # not reverse-symmetric
    rs = reduce_scatter(bfb_schedule(g.transpose()), topology=g)
    validate(rs)
    assert rs.tau == bfb_score(g.transpose()).tau


def test_high_in_degree_uses_max_flow_fallback():
    """More than MAX_SUBSET_BITS in-neighbours: Dinkelbach on min-cuts; H(2,10) (d = 18) is
    distance-regular, hence BW-optimal (Thm 18), also without the vertex-transitive shortcut."""
    h = hamming(2, 10)
    plain = Topology(h.n, h.src, h.dst, expr="plain")
    assert bfb_score(plain).tau == opt(100) and bfb_score(plain).T_L == 2
