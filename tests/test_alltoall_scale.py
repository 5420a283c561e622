"""All-to-all bounds without N×N matrices: orbit-weighted and blocked dual bounds against the
dense all-pairs sum, and the hop-count bound from the streamed distance histogram."""

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

import topofinder as tf
from topofinder.scoring.alltoall import concurrent_flow
from topofinder.scoring.links import Links
from topofinder.scoring.symmetry import topology_group


def dense_bound(arcs, lengths):
    return float(arcs.cap @ lengths / dijkstra(arcs.matrix(lengths), directed=True).sum())


@pytest.mark.parametrize("expr", ["Torus(4,6)", "Pi(4,60)", "L(K(4,4))", "C(30,{1,7})"])
def test_dual_bound_by_orbits_and_blocks(expr, monkeypatch):
    topo = tf.load(expr)
    arcs = Links.of(topo)
    red = concurrent_flow.flow_reduction(arcs, topology_group(topo).generators)
    rng = np.random.default_rng(0)
    invariant = rng.uniform(0.5, 2.0, red.orbit_size.size)[red.arc_orbit]
    assert concurrent_flow.is_orbit_invariant(invariant, red)
    assert concurrent_flow.links_dual_bound(arcs, invariant, red) == pytest.approx(
        dense_bound(arcs, invariant), rel=1e-12)
    monkeypatch.setattr(concurrent_flow, "DIST_BLOCK_CELLS", 7 * topo.n)     # several blocks
    free = rng.uniform(0.5, 2.0, arcs.num)
    assert concurrent_flow.links_dual_bound(arcs, free, red) == pytest.approx(dense_bound(arcs, free),
                                                                  rel=1e-12)


def test_hop_count_bound_from_the_histogram():
    topo = tf.load("Pi(4,200)")
    info = concurrent_flow.alltoall_summary(topo, mode="bound")
    assert info["alltoall_f_upper"] == pytest.approx(4 * 200 / topo.distances.sum())


def test_large_orbit_counts_get_the_bound_only(monkeypatch):
    monkeypatch.setattr(concurrent_flow, "BRACKET_MAX_CELLS", 10)
    monkeypatch.setattr(concurrent_flow, "SMALL_LP_VARIABLES", 10)
    info = concurrent_flow.alltoall_summary(tf.load("Pi(4,60)"))
    assert info["alltoall_f"] is None and "no bracket" in info["alltoall_method"]


def test_generator_cap_keeps_the_reduction_exact(monkeypatch):
    """Fewer generators give a subgroup: more orbits, the same optimum."""
    topo = tf.load("Torus(3,4)")
    full = concurrent_flow.concurrent_flow_symmetric(topo)
    monkeypatch.setattr(concurrent_flow, "GENERATOR_CELLS", 1)
    part = concurrent_flow.concurrent_flow_symmetric(topo)
    assert part.sources >= full.sources
    assert part.f == pytest.approx(full.f, rel=1e-6)


@pytest.mark.parametrize("expr", ["Hypercube(4)", "Torus(5,5)", "K(3,3)"])
def test_arc_transitive_summary_needs_no_lp(expr):
    """The closed form Σc/Σdist against LP (3) solved without symmetry."""
    topo = tf.load(expr)
    info = concurrent_flow.alltoall_summary(topo)
    assert info["alltoall_method"] == "arc-transitive closed form" and info["alltoall_optimal"]
    assert info["alltoall_f"] == pytest.approx(concurrent_flow.concurrent_flow_exact(topo).f,
                                               rel=1e-7)


@pytest.mark.parametrize("expr", ["Pi(4,60)", "L(Diamond)", "C(40,{1,9})"])
def test_split_flows_deliver_one_unit_along_tight_arcs_split_evenly(expr):
    """The triangular solve against the definition: every non-source node keeps 1 unit, only
    shortest-path arcs carry flow, and a node's tight in-arcs carry equal amounts."""
    from topofinder.scoring.alltoall.flowbracket import split_flows
    topo = tf.load(expr)
    arcs = Links.of(topo)
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 4, arcs.num).astype(float)       # many ties
    reps = np.array([0, topo.n // 2])
    dist, flow = split_flows(arcs, reps, lengths)
    ref = dijkstra(arcs.matrix(lengths), directed=True, indices=reps)
    assert np.allclose(dist, ref)
    for i, r in enumerate(reps):
        net = np.zeros(topo.n)
        np.add.at(net, arcs.head, flow[i])
        np.subtract.at(net, arcs.tail, flow[i])
        expect = np.ones(topo.n)
        expect[r] = -(topo.n - 1)
        assert np.allclose(net, expect)
        tight = np.isclose(ref[i, arcs.tail] + lengths, ref[i, arcs.head]) & (arcs.head != r)
        assert np.all(flow[i][~tight] == 0)
        for v in range(topo.n):
            into = flow[i][tight & (arcs.head == v)]
            assert into.size == 0 or np.allclose(into, into[0])


def test_bracket_at_1e5_nodes_reaches_one_percent():
    """f ≈ 2.5e-7 against loads of 4e6 per column: the master LP must be scaled to see f."""
    topo = tf.load("C(100000,{1,316})")
    info = concurrent_flow.alltoall_summary(topo)
    assert info["alltoall_method"] == "column-generation"
    assert info["alltoall_gap"] <= 0.01
    assert info["alltoall_f_upper"] <= info["alltoall_f"] / (1 - 0.01)
    assert info["alltoall_f_upper"] <= float(np.sum(Links.of(topo).cap)) \
        / topo.distance_sum * (1 + 1e-12)


@pytest.mark.parametrize("expr", ["L(Diamond)", "C(14,{1,5})"])
def test_softmin_flows_are_the_boltzmann_routing_over_each_distance_dag(expr):
    """Both triangular solves against enumerating every path of the distance DAG (arcs whose
    head lies strictly farther from r): soft = −T·log Σ_p exp(−len/T), and each arc carries
    the total probability of the paths through it."""
    from topofinder.scoring.alltoall.flowbracket import softmin_flows
    topo = tf.load(expr)
    arcs = Links.of(topo)
    lengths = np.random.default_rng(2).integers(2, 6, arcs.num).astype(float)
    temperature = 0.8
    reps = np.array([0, topo.n - 1])
    dist, soft, flow = softmin_flows(arcs, reps, lengths, temperature)
    for i, r in enumerate(reps):
        weight = np.zeros(topo.n)
        through = np.zeros((topo.n, arcs.num))          # Σ over paths to t of weight·[e ∈ p]

        def walk(v, length, used):
            weight[v] += np.exp(-length / temperature)
            through[v, used] += np.exp(-length / temperature)
            for e in np.flatnonzero((arcs.tail == v) & (dist[i, arcs.head] > dist[i, v])):
                walk(arcs.head[e], length + lengths[e], used + [e])

        walk(r, 0.0, [])
        assert np.allclose(soft[i], -temperature * np.log(weight), rtol=1e-12, atol=1e-12)
        assert np.all(soft[i] <= dist[i] + 1e-12)
        others = np.arange(topo.n) != r
        assert np.allclose(flow[i], (through[others] / weight[others, None]).sum(axis=0))


def test_softmin_flows_refuse_path_sums_beyond_float64():
    """A chain of 1100 diamonds has 2^1100 shortest paths end to end: the path sum overflows,
    which must surface as FloatingPointError (the smoothed phase then ends) and not as NaN."""
    from topofinder.model.topology import Topology
    from topofinder.scoring.alltoall.flowbracket import softmin_flows
    src, dst = [], []
    for i in range(1100):
        c, a, b, nxt = 3 * i, 3 * i + 1, 3 * i + 2, 3 * i + 3
        for u, v in ((c, a), (c, b), (a, nxt), (b, nxt)):
            src += [u, v]
            dst += [v, u]
    topo = Topology(3 * 1100 + 1, np.array(src), np.array(dst))
    arcs = Links.of(topo)
    with pytest.raises(FloatingPointError, match="overflow"):
        softmin_flows(arcs, np.array([0]), np.ones(arcs.num), 1.0)
