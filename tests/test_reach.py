"""Streaming distances (topofinder.model.reach) against the dense scipy BFS matrix."""

import numpy as np
import pytest

import topofinder as tf
from topofinder.errors import TopofinderError
from topofinder.model.reach import distance_histogram, owner_blocks, popcount_rows
from topofinder.model.topology import Topology

CASES = ["Pi(4,100)", "L(K(3))", "Torus(4,6)", "Kautz(2,3)", "Pi(3,20)", "DBJ(2,4)",
         "C(30,{1,7})", "L(Pi(3,10))", "Hypercube(5)", "Pi(2,131)"]


@pytest.mark.parametrize("expr", CASES)
def test_histogram_matches_dense_bfs(expr):
    topo = tf.load(expr)
    dense = np.bincount(topo.distances.ravel())
    assert np.array_equal(topo.distance_histogram, dense)
    assert topo.diameter == int(topo.distances.max())
    assert topo.distance_sum == int(topo.distances.sum())


@pytest.mark.parametrize("words", [1, 2, 3])
def test_small_blocks_give_the_same_histogram(monkeypatch, words):
    """Owner blocks narrower than N (as at N = 10^5) sum to the same counts."""
    topo = tf.load("Pi(4,300)")
    full = distance_histogram(topo.n, topo.link_matrix)
    import topofinder.model.reach as reach
    monkeypatch.setattr(reach, "block_words", lambda n, budget=0: words)
    assert len(list(reach.owner_blocks(topo.n))) == -(-topo.n // (64 * words))
    assert np.array_equal(reach.distance_histogram(topo.n, topo.link_matrix), full)


def test_vertex_transitive_shortcut_agrees():
    topo = tf.load("Torus(5,7)")
    assert topo.vertex_transitive
    assert np.array_equal(distance_histogram(topo.n, topo.link_matrix, True),
                          distance_histogram(topo.n, topo.link_matrix, False))


def test_popcount_matches_python():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**63, size=(7, 5), dtype=np.uint64)
    expect = [sum(bin(int(x)).count("1") for x in row) for row in bits]
    assert popcount_rows(bits).tolist() == expect


def test_blocks_cover_every_owner_once():
    covered = [v for lo, hi in owner_blocks(1000, 3) for v in range(lo, hi)]
    assert covered == list(range(1000))


def test_disconnected_has_no_diameter():
    topo = Topology(4, np.array([0, 1, 2]), np.array([1, 2, 3]), expr="path")
    with pytest.raises(TopofinderError, match="not strongly connected"):
        topo.diameter


@pytest.mark.parametrize("expr", ["K(70)", "Pi(4,100)", "L(K(3))"])
def test_distances_to_nodes_by_bit_rows(expr):
    from topofinder.model.reach import distances_to, in_slots
    topo = tf.load(expr)
    nodes = np.array([0, 3, 5])
    dense = topo.distances[:, nodes].T                  # dist(v -> node)
    assert np.array_equal(distances_to(in_slots(topo.n, topo.link_matrix)[0], nodes), dense)
