"""The BFB scorer's fast paths (mask-closure lower bounds, laminar exactness, batched max-flow
certification with Dinkelbach updates, the sparse path, multi-word masks) agree exactly with
independent computations: the full 2^k subset-sum (zeta) transform of the Hall ratio, brute
force over in-link subsets, and LP (1) solved by HiGHS."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import linprog

from topofinder.scoring.allgather import bfb
from topofinder.model.reach import in_slots
from topofinder.model.operations import cartesian_product, line_graph
from topofinder.families import (circulant, de_bruijn, directed_circulant, generalized_kautz,
                                   hamming, kautz, torus)
from topofinder.model.topology import Topology


def zeta_step_loads(g):
    """Reference: U_{u,t} by the subset-sum transform over all 2^k in-link sets, max over u."""
    slots, caps = in_slots(g.n, g.link_matrix)
    k = slots.shape[1]
    assert k <= 16
    dist = bfb.distances_to(g, slots)
    steps = int(dist.max())
    counts = bfb._mask_counts(bfb._masks(dist, dist[slots]), dist, steps, k)
    num, den = bfb._hall_loads(counts, caps, k)
    return bfb._step_max(num, den)


def brute_step_loads(g):
    """Reference: Hall's max over every subset W of u's in-neighbours, in plain Python."""
    dist, lm = g.distances, g.link_matrix.toarray()
    out = []
    for t in range(1, int(dist.max()) + 1):
        best = Fraction(0)
        for u in range(g.n):
            ws = [w for w in range(g.n) if w != u and lm[w, u]]
            vs = [v for v in range(g.n) if dist[v, u] == t]
            for r in range(1, len(ws) + 1):
                for sub in combinations(ws, r):
                    cnt = sum(all(w in sub for w in ws if dist[v, w] == t - 1) for v in vs)
                    best = max(best, Fraction(cnt, int(sum(lm[w, u] for w in sub))))
        out.append(best)
    return out


def lp_step_loads(g):
    """Reference: LP (1)/(14) per (u, t) with HiGHS (floats)."""
    dist, lm = g.distances, g.link_matrix.toarray()
    out = []
    for t in range(1, int(dist.max()) + 1):
        best = 0.0
        for u in range(g.n):
            vs = list(np.flatnonzero(dist[:, u] == t))
            ws = [w for w in np.flatnonzero(lm[:, u]) if w != u]
            pairs = [(v, w) for v in vs for w in ws if dist[v, w] == t - 1]
            if not pairs:
                continue
            c = np.zeros(len(pairs) + 1)
            c[-1] = 1
            a_ub = np.zeros((len(ws), len(pairs) + 1))
            a_eq = np.zeros((len(vs), len(pairs) + 1))
            for i, (v, w) in enumerate(pairs):
                a_ub[ws.index(w), i] = 1.0 / lm[w, u]
                a_eq[vs.index(v), i] = 1
            a_ub[:, -1] = -1
            r = linprog(c, A_ub=a_ub, b_ub=np.zeros(len(ws)), A_eq=a_eq, b_eq=np.ones(len(vs)),
                        bounds=[(0, None)] * (len(pairs) + 1), method="highs")
            best = max(best, r.fun)
        out.append(best)
    return out


def random_multigraph(rng, n, extra, max_cap=1):
    """A strongly connected random multidigraph: a Hamilton cycle plus ``extra`` random arcs
    (self-loops and parallel arcs allowed), capacities in 1..max_cap."""
    perm = rng.permutation(n)
    src = np.r_[perm, rng.integers(0, n, extra)]
    dst = np.r_[np.roll(perm, -1), rng.integers(0, n, extra)]
    return Topology(n, src, dst, expr="rand", capacity=rng.integers(1, max_cap + 1, src.size))


def plain(g):
    """The same arcs without the vertex-transitive hint (every node analysed)."""
    return Topology(g.n, g.src, g.dst, expr="plain", capacity=g.capacity)


@pytest.fixture
def sparse_path(monkeypatch):
    """Force the sparse block path: no closure bounds, every (u, t) with a multi-link mask is
    settled by the max-flow certification alone."""
    monkeypatch.setattr(bfb, "_DENSE_MASKS", 0)


@pytest.fixture
def tiny_blocks(monkeypatch):
    """One receiving node per block: the running maximum is carried across many blocks."""
    monkeypatch.setattr(bfb, "_ROW_CELLS", 1)


FAMILIES = [
    lambda: generalized_kautz(16, 100), lambda: generalized_kautz(8, 500),
    lambda: generalized_kautz(5, 97), lambda: generalized_kautz(3, 50),
    lambda: generalized_kautz(7, 400), lambda: generalized_kautz(12, 150),
    lambda: de_bruijn(3, 4), lambda: kautz(3, 3),
    lambda: line_graph(circulant(16, [3, 4]), 2), lambda: line_graph(generalized_kautz(3, 20)),
    lambda: plain(circulant(40, [3, 7, 11])), lambda: plain(torus(3, 4, 5)),
    lambda: directed_circulant(30, [1, 4, 9]),
    lambda: cartesian_product(generalized_kautz(2, 7), directed_circulant(5, [1, 2])),
]


@pytest.mark.parametrize("build", FAMILIES)
def test_families_match_zeta_transform(build):
    g = build()
    assert list(bfb.bfb_score(g).step_load) == zeta_step_loads(g)


@pytest.mark.parametrize("build", FAMILIES[:6] + FAMILIES[9:])
def test_sparse_path_and_small_blocks_match_zeta_transform(build, sparse_path, tiny_blocks):
    g = build()
    assert list(bfb.bfb_score(g).step_load) == zeta_step_loads(g)


def test_random_multigraphs_match_zeta_transform():
    rng = np.random.default_rng(2024)
    for trial in range(40):
        n = int(rng.integers(6, 60))
        g = random_multigraph(rng, n, int(rng.integers(n, 6 * n)), max_cap=int(rng.integers(1, 5)))
        if in_slots(g.n, g.link_matrix)[0].shape[1] > 12:
            continue
        assert list(bfb.bfb_score(g).step_load) == zeta_step_loads(g), trial


def test_random_multigraphs_sparse_path_match_zeta_transform(sparse_path):
    rng = np.random.default_rng(99)
    for trial in range(25):
        n = int(rng.integers(6, 40))
        g = random_multigraph(rng, n, int(rng.integers(n, 5 * n)), max_cap=3)
        if in_slots(g.n, g.link_matrix)[0].shape[1] > 12:
            continue
        assert list(bfb.bfb_score(g).step_load) == zeta_step_loads(g), trial


def test_random_small_graphs_match_brute_force():
    rng = np.random.default_rng(5)
    for trial in range(12):
        n = int(rng.integers(4, 9))
        g = random_multigraph(rng, n, 2 * n, max_cap=4)
        assert list(bfb.bfb_score(g).step_load) == brute_step_loads(g), trial


def test_flow_certification_raises_a_low_bound(monkeypatch):
    """Pi(16,100) and Pi(4,30): at the last step the best closure bound is below U_t, so a
    min cut must be violated and the Dinkelbach rounds lift U_t to the LP (1) optimum."""
    violated = []
    check = bfb._flow_check

    def recording(*args):
        out = check(*args)
        violated.append(out[0].size)
        return out

    monkeypatch.setattr(bfb, "_flow_check", recording)
    monkeypatch.setattr(bfb.bfb_bits, "MAX_SLOTS", 0)        # the dense path, not streaming
    for g in (generalized_kautz(16, 100), generalized_kautz(4, 30)):
        violated.clear()
        loads = bfb.bfb_score(g).step_load
        assert violated[0] > 0 and violated[-1] == 0
        assert [float(x) for x in loads] == pytest.approx(lp_step_loads(g), abs=1e-9)


def test_more_than_64_in_neighbours_multiword_masks():
    """k = 66 distinct in-neighbours (two 64-bit mask words): H(2,34) is distance-regular, so
    BFB is BW-optimal (Thm 18); also a random dense digraph against LP (1)."""
    h = hamming(2, 34)
    assert bfb.bfb_score(plain(h)).tau == Fraction(h.n - 1, h.n)
    rng = np.random.default_rng(11)
    n = 90
    adj = rng.random((n, n)) < 0.8
    np.fill_diagonal(adj, False)
    src, dst = np.nonzero(adj)
    g = Topology(n, src, dst, expr="dense", capacity=rng.integers(1, 3, src.size))
    assert in_slots(g.n, g.link_matrix)[0].shape[1] > 64
    assert [float(x) for x in bfb.bfb_score(g).step_load] == pytest.approx(lp_step_loads(g),
                                                                             abs=1e-9)


def test_exact_max_by_step_uses_fractions_when_floats_tie():
    # 10^17/(10^17+1) and 1 differ by less than a double's rounding: exactness needs Fractions
    big = 10 ** 17
    num = np.array([big, big + 1, 3, 7], dtype=object).astype(np.int64)
    den = np.array([big + 1, big + 1, 2, 5], dtype=np.int64)
    a, b = bfb._max_by_step(np.array([0, 0, 1, 1]), num, den, 2)
    assert Fraction(int(a[0]), int(b[0])) == 1 and Fraction(int(a[1]), int(b[1])) == Fraction(3, 2)


# ---- best_circulant's search (issue 9): its BFS, its bound and its answers ------------------
from itertools import combinations_with_replacement  # noqa: E402
from math import gcd  # noqa: E402

from topofinder.families import best_circulant  # noqa: E402
from topofinder.families.circulant_opt import (  # noqa: E402
    _diameter_and_total, _lattice_bound, _theorem22_generators, best_generators,
    theorem22_step)


def scipy_score(g):
    """(diameter, total hops from node 0) from scipy's all-pairs shortest paths."""
    row = g.distances[0]
    return int(row.max()), int(row.sum())


def test_integer_bfs_matches_all_pairs_shortest_paths():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(5, 300))
        gens = sorted(set(rng.integers(1, n // 2 + 1, int(rng.integers(1, 6))).tolist()))
        if gcd(n, *gens) != 1:
            assert _diameter_and_total(n, gens, n) is None           # disconnected
            continue
        expect = scipy_score(circulant(n, gens))
        assert _diameter_and_total(n, gens, n) == expect
        assert _diameter_and_total(n, gens, expect[0] - 1) is None   # beyond the limit


def test_lattice_bound_is_thm22_for_two_generators_and_a_true_lower_bound():
    for n in range(7, 400):
        assert _lattice_bound(n, 2)[0] == theorem22_step(n)          # 2m² + 2m + 1 ≥ n
    for n, k in [(13, 3), (20, 3), (17, 4), (24, 3), (30, 4)]:
        best = min(scipy_score(circulant(n, list(c)))
                   for c in combinations_with_replacement(range(1, n // 2 + 1), k)
                   if gcd(n, *c) == 1)
        assert _lattice_bound(n, k) <= best


@pytest.mark.parametrize("n, d", [(13, 6), (20, 6), (17, 8), (24, 6), (12, 10), (9, 16)])
def test_exhaustive_regime_is_the_brute_force_optimum(n, d):
    k = d // 2
    best = min((scipy_score(circulant(n, list(c))), c)
               for c in combinations_with_replacement(range(1, n // 2 + 1), k)
               if gcd(n, *c) == 1)
    g = best_circulant(n, d)
    assert (scipy_score(g), g.expr) == (best[0], circulant(n, list(best[1])).expr)


@pytest.mark.parametrize("n, d", [(1999, 16), (2000, 8), (640, 12), (97, 14)])
def test_search_regime_is_deterministic_and_within_its_bounds(n, d):
    g = best_circulant(n, d)
    assert g.n == n and g.degree == d and g.is_regular and g.bidirectional
    best_generators.cache_clear()                                   # search again from scratch
    assert best_circulant(n, d).same_arcs(g)
    found = scipy_score(g)
    thm22 = scipy_score(circulant(n, _theorem22_generators(n, d)))   # one of its candidates
    assert _lattice_bound(n, d // 2) <= found <= thm22


def test_degree_two_is_the_cycle():
    for n in (2, 3, 10, 1999):
        g = best_circulant(n, 2)
        assert scipy_score(g) == (n // 2, sum(min(i, n - i) for i in range(n)))
