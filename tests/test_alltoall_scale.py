"""All-to-all bounds without N×N matrices: orbit-weighted and blocked dual bounds against the
dense all-pairs sum, and the hop-count bound from the streamed distance histogram."""

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

import topofinder as tf
from topofinder.scoring import alltoall
from topofinder.scoring.symmetry import topology_group


def dense_bound(arcs, lengths):
    return float(arcs.cap @ lengths / dijkstra(arcs.matrix(lengths), directed=True).sum())


@pytest.mark.parametrize("expr", ["Torus(4,6)", "Pi(4,60)", "L(K(4,4))", "C(30,{1,7})"])
def test_dual_bound_by_orbits_and_blocks(expr, monkeypatch):
    topo = tf.load(expr)
    arcs = alltoall._Arcs.of(topo)
    red = alltoall._Reduction.of(arcs, list(topology_group(topo).generators))
    rng = np.random.default_rng(0)
    invariant = rng.uniform(0.5, 2.0, red.orbit_size.size)[red.arc_orbit]
    assert alltoall._invariant(invariant, red)
    assert alltoall._dual_bound(arcs, invariant, red) == pytest.approx(
        dense_bound(arcs, invariant), rel=1e-12)
    monkeypatch.setattr(alltoall, "DIST_BLOCK_CELLS", 7 * topo.n)     # several blocks
    free = rng.uniform(0.5, 2.0, arcs.num)
    assert alltoall._dual_bound(arcs, free, red) == pytest.approx(dense_bound(arcs, free),
                                                                  rel=1e-12)


def test_hop_count_bound_from_the_histogram():
    topo = tf.load("Pi(4,200)")
    info = alltoall.alltoall_summary(topo, mode="bound")
    assert info["alltoall_f_upper"] == pytest.approx(4 * 200 / topo.distances.sum())


def test_large_orbit_counts_get_the_bound_only(monkeypatch):
    monkeypatch.setattr(alltoall, "BRACKET_MAX_WORK", 10)
    monkeypatch.setattr(alltoall, "SMALL_LP_VARIABLES", 10)
    info = alltoall.alltoall_summary(tf.load("Pi(4,60)"))
    assert info["alltoall_f"] is None and "no bracket" in info["alltoall_method"]


def test_generator_cap_keeps_the_reduction_exact(monkeypatch):
    """Fewer generators give a subgroup: more orbits, the same optimum."""
    topo = tf.load("Torus(3,4)")
    full = alltoall.concurrent_flow_symmetric(topo)
    monkeypatch.setattr(alltoall, "GENERATOR_CELLS", 1)
    part = alltoall.concurrent_flow_symmetric(topo)
    assert part.sources >= full.sources
    assert part.f == pytest.approx(full.f, rel=1e-6)
