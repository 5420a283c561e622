"""ForestColl: exact T_B^FC against brute force over all cuts, the papers' known values, tree
packing that validates and reaches T_B^FC, fixed-k against brute force and Thm 13."""

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.families.build import parse as parse_expr
from topofinder.model.operations import line_graph
from topofinder.scoring.trees.forestcoll import (
    cyclic_translations, fixed_k_optimum, fixed_k_trees, in_dominating_set, mixed_radix_translations,
    optimal_trees, ratio_by_networkx_bisection, throughput_optimum, tree_parameters,
)
from topofinder.families import (
    circulant, complete, complete_bipartite, de_bruijn, generalized_kautz, hypercube, kautz,
    torus, uni_ring,
)
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import problems


# ---- independent computations ------------------------------------------------------------
def links(topo):
    m = topo.link_matrix.tocoo()
    return m.row, m.col, m.data.astype(np.int64)


def all_cuts(n):
    """Membership matrix of every S with ∅ ≠ S ⊊ V (one row per S)."""
    masks = np.arange(1, 2 ** n - 1)
    return ((masks[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)


def brute_ratio(topo) -> Fraction:
    """max |S| / C⁺(S) over all cuts (optimality (⋆) of 002), by enumeration."""
    src, dst, cap = links(topo)
    cuts = all_cuts(topo.n)
    exiting = (cuts[:, src] & ~cuts[:, dst]) @ cap
    return max(Fraction(int(s), int(c)) for s, c in zip(cuts.sum(1), exiting))


def brute_fixed_k_U(topo, k) -> Fraction:
    """Smallest U with Σ_{e leaving S} ⌊U·C(e)⌋ ≥ k|S| for every cut S (Thm 8 + Thm 11)."""
    src, dst, cap = links(topo)
    n = topo.n
    cuts = all_cuts(n)
    crossing, sizes = cuts[:, src] & ~cuts[:, dst], cuts.sum(1)
    candidates = sorted({Fraction(j, int(c)) for c in set(cap.tolist())
                         for j in range(1, (n - 1) * k * int(c) + 1)})
    for U in candidates:
        floors = (cap * U.numerator) // U.denominator
        if np.all(crossing @ floors >= k * sizes):
            return U
    raise AssertionError("no feasible U")


def random_digraph(rng, heterogeneous: bool, n_max: int = 10) -> Topology:
    """Strongly connected (a Hamiltonian cycle) plus random arcs: multi-arcs, self-loops,
    and, if asked, capacities 1..5."""
    n = int(rng.integers(2, n_max + 1))
    order = rng.permutation(n)
    extra = int(rng.integers(0, 3 * n))
    src = np.concatenate([order, rng.integers(0, n, extra)])
    dst = np.concatenate([np.roll(order, -1), rng.integers(0, n, extra)])
    cap = rng.integers(1, 6, src.size) if heterogeneous else None
    return Topology(n, src, dst, expr="random", capacity=cap)


def two_tier(boxes: int, per_box: int, fast: int = 10) -> Topology:
    """Boxes of ``per_box`` nodes on a bidirectional ring of capacity ``fast``; node j of
    every box on a bidirectional ring of the boxes with capacity 1 (slow scale-out)."""
    pairs = [(b * per_box + j, b * per_box + (j + 1) % per_box, fast)
             for b in range(boxes) for j in range(per_box)]
    pairs += [(b * per_box + j, (b + 1) % boxes * per_box + j, 1)       # 2 boxes: one link
              for b in range(boxes if boxes > 2 else 1) for j in range(per_box)]
    src = [u for u, w, _ in pairs] + [w for u, w, _ in pairs]
    dst = [w for u, w, _ in pairs] + [u for u, w, _ in pairs]
    cap = [c for *_, c in pairs] * 2
    return Topology(boxes * per_box, src, dst, expr=f"TwoTier({boxes},{per_box})", capacity=cap)


RNG_GRAPHS = [random_digraph(np.random.default_rng(seed), heterogeneous=seed % 2 == 1)
              for seed in range(200)]


# ---- the optimum ----------------------------------------------------------------------------
def test_exact_optimum_equals_brute_force_on_200_random_digraphs():
    for topo in RNG_GRAPHS:
        opt = throughput_optimum(topo)
        assert opt.ratio == brute_ratio(topo)
        assert opt.tau == Fraction(topo.node_bandwidth, topo.n) * opt.ratio   # B = Σ capacities
        src, dst, cap = links(topo)
        cut = np.zeros(topo.n, bool)
        cut[list(opt.cut)] = True
        assert 0 < cut.sum() < topo.n
        assert int(cap[cut[src] & ~cut[dst]].sum()) == opt.cut_capacity
        assert Fraction(opt.cut_size, opt.cut_capacity) == opt.ratio


def test_networkx_bisection_baseline_agrees():
    for topo in RNG_GRAPHS[:30]:
        assert ratio_by_networkx_bisection(topo) == throughput_optimum(topo).ratio


@pytest.mark.parametrize("topo", [torus(4, 4), circulant(16, [3, 4]), hypercube(4),
                                  line_graph(complete_bipartite(4)), complete(5), kautz(2, 2),
                                  circulant(13, [1, 5])],
                         ids=lambda t: t.expr)
def test_regular_with_full_edge_connectivity_is_bandwidth_optimal(topo):
    g = nx.DiGraph(zip(topo.src.tolist(), topo.dst.tolist()))
    assert topo.is_regular and nx.edge_connectivity(g) == topo.degree
    assert throughput_optimum(topo).tau == Fraction(topo.n - 1, topo.n)


def test_paper_values():
    assert throughput_optimum(generalized_kautz(4, 64)).tau == Fraction(21, 16)   # 1.3125
    pi = throughput_optimum(generalized_kautz(4, 1000))
    assert pi.tau == Fraction(999, 1000)
    assert throughput_optimum(line_graph(circulant(16, [3, 4]), 2)).tau == Fraction(255, 256)


def test_self_loops_bind_pi_4_64():
    # a node with a self-loop receives on 3 links: S = V − {v} has ratio 63/3 (DESIGN §7)
    topo = generalized_kautz(4, 64)
    opt = throughput_optimum(topo)
    assert opt.cut_size == 63 and opt.cut_capacity == 3
    (v,) = set(range(64)) - set(opt.cut)
    assert np.any((topo.src == v) & (topo.dst == v))


def test_symmetry_shortcut_matches_full_scan():
    for topo in [circulant(16, [3, 4]), torus(3, 5), uni_ring(2, 7)]:
        plain = Topology(topo.n, topo.src, topo.dst, expr="plain")
        a, b = throughput_optimum(topo), throughput_optimum(plain)
        assert a.ratio == b.ratio and a.maxflows == 1 and b.maxflows > 1


def test_heterogeneous_two_tier_bottleneck_is_a_box():
    topo = two_tier(2, 4)
    opt = throughput_optimum(topo)
    assert opt.ratio == brute_ratio(topo) == 1          # 4 nodes over 4 slow links
    assert opt.cut in (tuple(range(4)), tuple(range(4, 8)))


def test_disconnected_topology_is_a_user_error():
    topo = Topology(4, [0, 1, 2, 3], [1, 0, 3, 2], expr="two pairs")
    with pytest.raises(TopofinderError, match="not strongly connected"):
        throughput_optimum(topo)


def test_tree_parameters_smallest_k():
    for topo in RNG_GRAPHS[:60] + [generalized_kautz(4, 64), two_tier(2, 4)]:
        ratio = throughput_optimum(topo).ratio
        p = tree_parameters(topo)
        caps = set(links(topo)[2].tolist())
        assert p.U / p.k == ratio and p.y == 1 / p.U
        assert all((p.U * c).denominator == 1 for c in caps)
        smallest = next(k for k in range(1, 10 ** 6)
                        if all((ratio * k * c).denominator == 1 for c in caps))
        assert p.k == smallest


# ---- tree packing ---------------------------------------------------------------------------
FAMILIES = [generalized_kautz(4, 64), line_graph(circulant(16, [3, 4])), torus(8, 8),
            hypercube(6), kautz(2, 3), de_bruijn(2, 4), complete_bipartite(4),
            generalized_kautz(3, 20), two_tier(2, 8), two_tier(4, 4, fast=3)]


def assert_optimal(schedule, topo):
    tau = throughput_optimum(topo).tau
    assert problems(schedule, tau) == []
    assert schedule.tau() == tau


@pytest.mark.parametrize("topo", FAMILIES, ids=lambda t: t.expr)
def test_packing_reaches_the_optimum(topo):
    assert_optimal(optimal_trees(topo, translations=None), topo)


def test_packing_random_heterogeneous_multigraphs():
    for topo in RNG_GRAPHS[1:80:2]:
        assert_optimal(optimal_trees(topo), topo)


def test_low_tree_mode_valid_and_heights_reported():
    for topo in [generalized_kautz(4, 64), two_tier(4, 4, fast=3)]:
        s = optimal_trees(topo, prefer_low_trees=True, translations=None)
        assert_optimal(s, topo)
        # no spanning out-tree is lower than its root's eccentricity
        ecc = topo.distances.max(axis=1)
        assert all(h >= ecc[t.root] for h, t in zip(s.heights(), s.trees))
    assert max(optimal_trees(generalized_kautz(4, 64), prefer_low_trees=True).heights()) >= 3


@pytest.mark.parametrize("topo, perms", [
    (torus(4, 4, 4), mixed_radix_translations([4, 4, 4])),
    (hypercube(6), mixed_radix_translations([2] * 6)),
    (circulant(64, [3, 8]), cyclic_translations(64)),
    (torus(8, 8), mixed_radix_translations([8, 8])),
], ids=lambda x: getattr(x, "expr", ""))
def test_translated_root_trees_keep_optimality(topo, perms):
    s = optimal_trees(topo, translations=perms)
    assert s.method == "translated"
    assert_optimal(s, topo)
    k = tree_parameters(topo).k
    root0 = [t for t in s.trees if t.root == 0]
    assert len(s.trees) == topo.n * len(root0) and sum(t.weight for t in root0) == 1
    assert all(t.weight.denominator <= k for t in s.trees)


def test_translations_that_are_not_automorphisms_fall_back():
    topo = hypercube(4)                     # i ↦ i + c is not an automorphism of Q_4
    s = optimal_trees(topo, translations=cyclic_translations(16))
    assert s.method == "berczi-frank"
    assert_optimal(s, topo)


# ---- fixed k --------------------------------------------------------------------------------
def test_fixed_k_equals_brute_force_and_thm13_bound():
    for i, topo in enumerate(RNG_GRAPHS[:40]):
        k = 1 + i % 3
        best = fixed_k_optimum(topo, k)
        opt = throughput_optimum(topo)
        assert best.U == brute_fixed_k_U(topo, k)
        assert opt.tau <= best.tau <= best.bound


def test_fixed_k_at_optimal_k_is_the_optimum():
    for topo in [generalized_kautz(4, 20), torus(3, 4), two_tier(2, 4), RNG_GRAPHS[7]]:
        p = tree_parameters(topo)
        assert fixed_k_optimum(topo, p.k).tau == throughput_optimum(topo).tau


@pytest.mark.parametrize("topo, k", [(hypercube(4), 1), (hypercube(4), 2), (torus(3, 4), 1),
                                     (two_tier(2, 4, fast=3), 2), (RNG_GRAPHS[9], 3)],
                         ids=lambda x: getattr(x, "expr", str(x)))
def test_fixed_k_trees_reach_the_fixed_k_time(topo, k):
    best = fixed_k_optimum(topo, k)
    s = fixed_k_trees(topo, k)
    assert problems(s, best.tau) == []
    assert s.tau() == best.tau
    assert all((t.weight * k).denominator == 1 for t in s.trees)


def test_fixed_k_rejects_bad_k():
    with pytest.raises(TopofinderError, match="positive integer"):
        fixed_k_optimum(torus(3, 3), 0)


@pytest.mark.slow
def test_packing_256_nodes_degree_4():
    topo = line_graph(circulant(16, [3, 4]), 2)
    assert_optimal(optimal_trees(topo), topo)


def test_cli_exports_a_valid_optimal_tree_schedule(tmp_path):
    from topofinder.cli.main import main
    from topofinder.families.build import load_topology
    from topofinder.model.tree_schedule import TreeSchedule

    out = tmp_path / "trees.json"
    assert main(["export", "Pi(4,20)", "--what", "schedule", "--kind", "trees",
                 "-o", str(out)]) == 0
    topo = load_topology("Pi(4,20)")
    s = TreeSchedule.from_json(out.read_text(), topo)
    assert problems(s, brute_ratio(topo) * Fraction(4, 20)) == []
    assert s.tau() == brute_ratio(topo) * Fraction(4, 20)
    assert main(["export", "Pi(4,20)", "--what", "schedule", "--kind", "trees",
                 "--trees-per-root", "0"]) == 2


def test_bfb_side_by_side():
    bfb = pytest.importorskip("topofinder.scoring.allgather.bfb")
    topo = line_graph(circulant(16, [3, 4]), 2)
    assert bfb.bfb_tau(topo) == Fraction(65, 64)
    assert throughput_optimum(topo).tau == Fraction(255, 256)
    # (⋆) bounds every schedule, BFB's included
    for topo in FAMILIES[:8]:
        assert bfb.bfb_tau(topo) >= throughput_optimum(topo).tau


def clustered_simple_digraph(rng) -> Topology:
    """Random simple digraphs (unit links, no multi-arcs or loops) made of dense clusters
    joined by a few arcs, so the bottleneck is often a cluster, not a single node."""
    clusters, size = int(rng.integers(2, 5)), int(rng.integers(2, 8))
    arcs = set()
    for c in range(clusters):
        base = c * size
        for i in range(size):
            arcs.add((base + i, base + (i + 1) % size))
        for _ in range(int(rng.integers(0, size * size))):
            u, w = rng.integers(0, size, 2)
            arcs.add((base + int(u), base + int(w)))
        nxt = (c + 1) % clusters * size
        for _ in range(int(rng.integers(1, 3))):
            arcs.add((base + int(rng.integers(size)), nxt + int(rng.integers(size))))
            arcs.add((nxt + int(rng.integers(size)), base + int(rng.integers(size))))
    arcs = sorted((u, w) for u, w in arcs if u != w)
    return Topology(clusters * size, [u for u, _ in arcs], [w for _, w in arcs],
                    expr="clusters")


def test_dominating_sinks_find_every_bottleneck():
    """The in-dominating sink set (unit links) gives the optimum that max-flows to every node
    give (networkx bisection) and, on small graphs, brute force over all cuts."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        topo = clustered_simple_digraph(rng)
        opt = throughput_optimum(topo)
        assert opt.ratio == ratio_by_networkx_bisection(topo)
        if topo.n <= 12:
            assert opt.ratio == brute_ratio(topo)


def test_in_dominating_set_dominates():
    topo = generalized_kautz(4, 300)
    src, dst, _ = links(topo)
    chosen = set(in_dominating_set(topo.n, src, dst))
    for t in range(topo.n):
        assert t in chosen or chosen & set(src[dst == t].tolist())
    assert len(chosen) < topo.n / 3


@pytest.mark.parametrize("m", [3, 4, 5, 9, 10, 13, 64, 100, 255])
def test_two_spanning_trees_settle_the_optimum_without_max_flows(m):
    """DBT(m)'s cuts all carry >= 2 each way (checked over every S at small m), and the
    optimum throughput_optimum states from that (min_cut) is the one its max-flows find."""
    from dataclasses import replace

    topo = parse_expr(f"DBT({m})")
    if m <= 10:
        src, dst, cap = topo.src, topo.dst, topo.arc_capacity
        for bits in range(1, 2 ** m - 1):
            side = (bits >> np.arange(m)) & 1 == 1
            assert int(cap[side[src] & ~side[dst]].sum()) >= 2
    fast = throughput_optimum(topo, min_cut=2)
    full = throughput_optimum(topo)
    assert fast.maxflows == 0 and replace(fast, maxflows=full.maxflows) == full
