"""Generator families against theory (paper 001 Table 9, Thm 21, Thm 22; graph theory)."""

from itertools import combinations_with_replacement, product
from math import gcd

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.families.build import parse
from topofinder.families import (
    best_circulant, bi_ring, circulant, complete, complete_bipartite, de_bruijn,
    directed_circulant, generalized_kautz, hamming, hypercube, kautz, optimal_circulant, torus,
    twisted_torus, uni_ring,
)
from topofinder.families.circulant_opt import (
    circulant_distances, circulant_distances_batch, theorem22_step,
)
from topofinder.model.bounds import moore_bound_steps

# (expression, N from the family's definition, degree from the definition)
FAMILY_SIZES = [
    ("K(5)", 5, 4), ("K(2)", 2, 1), ("K(4,4)", 8, 4), ("K(1,1)", 2, 1),
    ("H(2,3)", 3 ** 2, 2 * 2), ("H(3,4)", 4 ** 3, 3 * 3), ("H(1,5)", 5, 4),
    ("Kautz(4,2)", 4 ** 2 * 5, 4), ("Kautz(2,3)", 2 ** 3 * 3, 2), ("Kautz(3,1)", 3 * 4, 3),
    ("Pi(4,1024)", 1024, 4), ("Pi(3,7)", 7, 3), ("Pi(8,2000)", 2000, 8),
    ("C(16,{3,4})", 16, 4), ("C(10,{1,2,5})", 10, 6), ("C(2,{1})", 2, 2),
    ("DC(6,{1,2,3,4})", 6, 4), ("DC(7,{3})", 7, 1),
    ("BiRing(2,8)", 8, 2), ("BiRing(4,5)", 5, 4), ("UniRing(1,4)", 4, 1), ("UniRing(3,6)", 6, 3),
    ("Torus(4,8,8)", 256, 6), ("Torus(2,3)", 6, 4), ("Torus(5)", 5, 2),
    ("TwistedTorus(8,4)", 32, 4), ("TwistedTorus(8,4,4)", 128, 6), ("TwistedTorus(4,2,2,2)", 32, 8),
    ("Hypercube(10)", 1024, 10), ("Hypercube(1)", 2, 1),
    ("DBJ(4,4)", 256, 4), ("DBJ(2,5)", 32, 2),
]


@pytest.mark.parametrize("expr,n,d", FAMILY_SIZES)
def test_family_size_and_degree(expr, n, d):
    g = parse(expr)
    assert (g.n, g.degree) == (n, d)
    assert g.is_regular and g.num_arcs == n * d
    assert str(g) == expr


def test_functions_and_expressions_agree():
    pairs = [(complete(5), "K(5)"), (complete_bipartite(3), "K(3,3)"), (hamming(2, 3), "H(2,3)"),
             (kautz(2, 2), "Kautz(2,2)"), (generalized_kautz(3, 10), "Pi(3,10)"),
             (circulant(9, [1, 2]), "C(9,{1,2})"), (directed_circulant(5, [1, 2]), "DC(5,{1,2})"),
             (bi_ring(2, 5), "BiRing(2,5)"), (uni_ring(2, 3), "UniRing(2,3)"),
             (torus(3, 4), "Torus(3,4)"), (hypercube(3), "Hypercube(3)"),
             (de_bruijn(2, 3), "DBJ(2,3)"), (twisted_torus(6, 3), "TwistedTorus(6,3)")]
    for g, e in pairs:
        assert str(g) == e and parse(e).same_arcs(g)


def test_bidirectional_families_are_bidirectional():
    for e in ["K(5)", "K(3,3)", "H(2,3)", "C(10,{1,2,5})", "BiRing(4,5)", "Torus(2,3)",
              "TwistedTorus(8,4,4)", "Hypercube(4)"]:
        g = parse(e)
        assert g.bidirectional and g.same_arcs(g.transpose())
    for e in ["Pi(4,64)", "DC(6,{1,2})", "UniRing(1,4)", "DBJ(2,3)", "Kautz(2,2)"]:
        assert not parse(e).bidirectional


@pytest.mark.parametrize("d,n", [(2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (4, 1), (4, 2), (5, 2)])
def test_kautz_diameter_is_n_plus_1(d, n):
    assert kautz(d, n).diameter == n + 1


@pytest.mark.parametrize("n", range(1, 11))
def test_hypercube_diameter_is_n(n):
    assert hypercube(n).diameter == n


@pytest.mark.parametrize("dims", [(5,), (2, 2), (2, 3), (3, 4), (4, 5, 6), (2, 2, 2), (7, 4),
                                  (5, 8, 3), (2, 9), (6, 6)])
def test_torus_diameter_is_sum_of_half_sizes(dims):
    g = torus(*dims)
    assert g.diameter == sum(m // 2 for m in dims)
    assert g.n == np.prod(dims) and g.degree == 2 * len(dims) and g.is_regular


def test_torus_size_two_dimension_is_a_double_arc():
    g = torus(2, 3)
    pairs, counts = np.unique(np.stack([g.src, g.dst], 1), axis=0, return_counts=True)
    across = (pairs[:, 0] // 3) != (pairs[:, 1] // 3)      # arcs along the size-2 dimension
    assert np.all(counts[across] == 2) and np.all(counts[~across] == 1)


def test_theorem22_circulant_diameter_is_m_for_7_to_500():
    for n in range(7, 501):
        m = theorem22_step(n)
        assert (2 * m + 1) ** 2 >= 2 * n - 1 > (2 * m - 1) ** 2      # m = ⌈(−1+√(2n−1))/2⌉
        assert circulant_distances(n, [m, m + 1]).max() == m, n


def test_theorem22_diameter_is_minimum_over_all_two_generator_circulants():
    # brute force: every C(n,{a1,a2}) with gcd 1, 7 <= n <= 60
    for n in range(7, 61):
        sets = np.array([c for c in combinations_with_replacement(range(1, n // 2 + 1), 2)
                         if gcd(n, *c) == 1])
        best = circulant_distances_batch(n, sets).max(axis=1).min()
        assert best == theorem22_step(n), n


def test_circulant_bfs_matches_all_pairs_shortest_paths():
    for n, gens in [(16, [3, 4]), (9, [1, 2]), (30, [2, 7, 11]), (12, [6, 1]), (7, [2, 3])]:
        assert np.array_equal(circulant_distances(n, gens), circulant(n, gens).distances[0])


@pytest.mark.parametrize("n,d", [(7, 4), (100, 4), (500, 4), (100, 8), (333, 6), (50, 12)])
def test_optimal_circulant_multiarc_versions(n, d):
    g = optimal_circulant(n, d)
    assert g.n == n and g.degree == d and g.is_regular and g.bidirectional
    assert g.diameter == theorem22_step(n)                        # multi-arcs keep diameter m


def test_best_circulant_is_minimum_diameter_by_brute_force():
    # independent check with scipy all-pairs distances over every generator multiset
    for n, d in [(8, 4), (13, 4), (20, 4), (11, 6), (18, 6), (9, 8)]:
        k = d // 2
        diam = min(circulant(n, list(c)).diameter
                   for c in combinations_with_replacement(range(1, n // 2 + 1), k)
                   if gcd(n, *c) == 1)
        g = best_circulant(n, d)
        assert g.degree == d and g.n == n and g.diameter == diam


def test_best_circulant_large_n():
    assert _diameter_by_bitsets(best_circulant(1000, 4)) == theorem22_step(1000)   # Thm 22
    g = best_circulant(1024, 8)                                          # sampled search
    assert g.degree == 8 and _diameter_by_bitsets(g) <= theorem22_step(1024)
    assert best_circulant(1024, 8).same_arcs(g)                          # reproducible


def _moore_sum(d, k):
    return sum(d ** i for i in range(k + 1))


def _diameter_by_bitsets(g):
    """Diameter of a regular digraph by bit-parallel BFS from all nodes at once (an algorithm
    independent of Topology.diameter): reach_{k+1}(u) = reach_k(u) ∪ reach_k(out-neighbours)."""
    n, words = g.n, (g.n + 63) // 64
    bit = np.uint64(1) << (np.arange(n) % 64).astype(np.uint64)
    reach = np.zeros((n, words), np.uint64)
    reach[np.arange(n), np.arange(n) // 64] = bit
    full = np.zeros(words, np.uint64)
    np.bitwise_or.at(full, np.arange(n) // 64, bit)
    nbrs = g.dst[np.argsort(g.src, kind="stable")].reshape(n, g.degree)
    for level in range(n):
        if np.array_equal(reach, np.broadcast_to(full, reach.shape)):
            return level
        reach = reach | np.bitwise_or.reduce(reach[nbrs], axis=1)
    raise AssertionError("not strongly connected")


@pytest.mark.parametrize("d", [2, 3, 4, 8])
def test_generalized_kautz_within_one_of_moore(d):
    rng = np.random.default_rng(d)
    sample = sorted({d + 1, d + 2, 2 * d + 3, 1024, 2000, *rng.integers(d + 1, 2001, 3).tolist()})
    for m in sample:
        k = _diameter_by_bitsets(generalized_kautz(d, m))
        assert m > _moore_sum(d, k - 2)                     # Thm 21 as stated
        assert k <= moore_bound_steps(m, d) + 1             # i.e. T_L <= T_L* + 1


@pytest.mark.parametrize("d,n", [(2, 2), (3, 2), (4, 1), (2, 4)])
def test_generalized_kautz_at_kautz_sizes_is_kautz(d, n):
    # Def 16: Pi(d, d^(n+1) + d^n) = K(d,n); isomorphism invariants: size and diameter
    g = generalized_kautz(d, d ** (n + 1) + d ** n)
    assert g.n == kautz(d, n).n and g.diameter == n + 1 and g.self_loops == 0


def test_bitset_diameter_agrees_with_all_pairs_distances():
    for g in [generalized_kautz(3, 50), kautz(2, 3), de_bruijn(2, 4), circulant(20, [1, 6])]:
        assert _diameter_by_bitsets(g) == g.diameter


def test_generalized_kautz_self_loops():
    # loops: (d+1)x ≡ −a (mod m) has gcd(d+1,m) solutions iff gcd(d+1,m) | a
    for d, m in [(4, 1024), (4, 25), (3, 8), (2, 9), (8, 2000)]:
        g = gcd(d + 1, m)
        expected = sum(g for a in range(1, d + 1) if a % g == 0)
        assert generalized_kautz(d, m).self_loops == expected


def test_twisted_torus_2d_diameter_is_a():
    # Cámara et al. 2010: the 2a x a rectangular twisted torus has diameter a
    for a in range(2, 13):
        g = twisted_torus(2 * a, a)
        assert g.diameter == a and g.n == 2 * a * a and g.degree == 4


def _lattice_distances(dims):
    """Hops from node 0 of TwistedTorus(2a, a, ...) by brute force over Z^k: node of an
    integer vector z, and dist = least |z|_1 mapping to each node (independent of the arcs)."""
    a, k = dims[1], len(dims)
    reach = 2 * a
    best = {}
    for z in product(range(-reach, reach + 1), repeat=k):
        x0 = (z[0] + a * sum(zi // a for zi in z[1:])) % (2 * a)
        node = (x0,) + tuple(zi % a for zi in z[1:])
        best[node] = min(best.get(node, 10 ** 9), sum(map(abs, z)))
    strides = [a ** (k - 1 - i) for i in range(k)]
    out = np.empty(2 * a ** k, dtype=int)
    for node, dist in best.items():
        out[sum(c * s for c, s in zip(node, strides))] = dist
    return out


@pytest.mark.parametrize("dims", [(4, 2), (6, 3), (8, 4), (4, 2, 2), (6, 3, 3), (8, 4, 4)])
def test_twisted_torus_distances_match_lattice(dims):
    g = twisted_torus(*dims)
    assert np.array_equal(g.distances[0], _lattice_distances(dims))
    # vertex-transitive: every node sees the same distance distribution
    assert np.all(np.sort(g.distances, axis=1) == np.sort(g.distances[0]))
    assert g.diameter < torus(*dims).diameter


def test_line_graph_size_degree_diameter():
    for e in ["K(4,4)", "C(16,{3,4})", "TwistedTorus(8,4)", "Pi(3,20)", "DBJ(2,3)", "H(2,3)"]:
        g = parse(e)
        lg = parse(f"L({e})")
        assert lg.n == g.n * g.degree and lg.degree == g.degree and lg.is_regular
        assert lg.diameter == g.diameter + 1


def test_products_sum_diameters_and_degrees():
    for a, b in [("K(4,4)", "C(7,{2,3})"), ("TwistedTorus(6,3)", "K(3)"),
                 ("Pi(2,6)", "UniRing(1,3)"), ("Torus(3,5)", "Hypercube(2)")]:
        ga, gb, p = parse(a), parse(b), parse(f"{a} x {b}")
        assert p.n == ga.n * gb.n and p.degree == ga.degree + gb.degree
        assert p.diameter == ga.diameter + gb.diameter
    g = parse("C(7,{2,3})")
    assert parse("C(7,{2,3})^3").diameter == 3 * g.diameter


BAD_FAMILY_ARGS = [
    (lambda: complete(1), "m >= 2"),
    (lambda: complete_bipartite(0), "d >= 1"),
    (lambda: hamming(0, 3), "n >= 1"),
    (lambda: kautz(0, 2), "d >= 1"),
    (lambda: generalized_kautz(0, 5), "d >= 1"),
    (lambda: generalized_kautz(2, 1), "m >= 2"),
    (lambda: circulant(8, [2, 4]), "gcd"),
    (lambda: circulant(8, [9]), "1..7"),
    (lambda: directed_circulant(9, [3, 6]), "gcd"),
    (lambda: bi_ring(3, 8), "even degree"),
    (lambda: uni_ring(0, 4), "d >= 1"),
    (lambda: torus(1, 4), ">= 2"),
    (lambda: hypercube(0), "n >= 1"),
    (lambda: de_bruijn(1, 3), "d >= 2"),
    (lambda: twisted_torus(8, 3), r"\(2a, a, ..., a\)"),
    (lambda: twisted_torus(4), "at least two"),
    (lambda: optimal_circulant(100, 5), "even degree"),
    (lambda: optimal_circulant(6, 4), "n > 6"),
    (lambda: best_circulant(100, 3), "even degree"),
    (lambda: best_circulant(1, 4), "n >= 2"),
]


@pytest.mark.parametrize("make,accepted", BAD_FAMILY_ARGS)
def test_families_reject_bad_parameters(make, accepted):
    with pytest.raises(TopofinderError, match=accepted):
        make()

