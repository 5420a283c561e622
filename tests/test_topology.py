"""Topology model and topology-level expansions: facts from graph theory."""

import networkx as nx
import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.model.operations import (
    bidirectional, cartesian_power, cartesian_product, degree_expansion, line_graph,
)
from topofinder.families import (
    circulant, complete, complete_bipartite, de_bruijn, directed_circulant, generalized_kautz,
    hypercube, kautz, torus, uni_ring,
)
from topofinder.model.topology import Topology


def test_arcs_degrees_and_self_loops():
    g = generalized_kautz(2, 5)        # x = −2x−a (mod 5) ⇔ 3x = −a: one loop per a
    assert g.n == 5 and g.num_arcs == 10 and g.is_regular and g.degree == 2
    loops = sum(int(u) == int(w) for u, w in zip(g.src, g.dst))
    assert g.self_loops == loops == 2


def test_distances_match_networkx():
    g = line_graph(circulant(9, [1, 2]), 1)
    ref = dict(nx.all_pairs_shortest_path_length(nx.DiGraph(g.to_networkx())))
    for u in range(g.n):
        for v in range(g.n):
            assert g.distances[u, v] == ref[u][v]


def test_networkx_round_trip_keeps_multiarcs_and_capacity():
    g = Topology(3, [0, 0, 1, 2], [1, 1, 2, 0], capacity=[1, 2, 3, 1])
    h = Topology.from_networkx(g.to_networkx())
    assert h.same_arcs(g) and h.heterogeneous


@pytest.mark.parametrize("make", [lambda: de_bruijn(2, 4), lambda: kautz(3, 2),
                                  lambda: directed_circulant(7, [1, 3]),
                                  lambda: line_graph(uni_ring(2, 5), 2),
                                  lambda: degree_expansion(directed_circulant(5, [1, 2]), 2),
                                  lambda: cartesian_product(uni_ring(1, 3), kautz(2, 1))])
def test_known_reverse_isomorphisms_are_isomorphisms(make):
    g = make()
    assert g.reverse_isomorphism is not None
    assert g.is_reverse_symmetric()
    # the general (VF2) test agrees
    plain = Topology(g.n, g.src, g.dst, bidirectional=False)
    assert plain.is_reverse_symmetric()


def test_not_reverse_symmetric_detected():
    # a node with out-degree 2 but no node with in-degree 2: G^T cannot be isomorphic
    assert not Topology(3, [0, 0], [1, 2]).is_reverse_symmetric()
    # 0↔2 maps this one onto its transpose
    assert Topology(3, [0, 0, 1, 2], [1, 2, 2, 0]).is_reverse_symmetric()


def _reverse_symmetric_by_brute_force(n, src, dst, cap) -> bool:
    """Some permutation p maps G onto G^T: W[u, w] = W[p(w), p(u)] for the summed capacities
    W (self-loops on the diagonal), tried over all n! permutations."""
    import itertools
    w = np.zeros((n, n), np.int64)
    np.add.at(w, (src, dst), cap)
    return any(np.array_equal(w, w[np.ix_(p, p)].T)
               for p in map(list, itertools.permutations(range(n))))


def test_reverse_symmetry_agrees_with_brute_force():
    """The general test (VF2 on capacity-coloured arcs and loop-coloured nodes) against all
    permutations, on random small digraphs with loops: multi-arcs of capacity 1, or single
    arcs of capacity 1 or 2 (where an arc's multiplicity and its summed capacity agree)."""
    rng = np.random.default_rng(41)
    answers = []
    for i in range(300):
        n = int(rng.integers(2, 6))
        arcs = int(rng.integers(1, 2 * n + 1))
        src, dst = rng.integers(0, n, arcs), rng.integers(0, n, arcs)
        if i % 2:
            keep = np.unique(src * n + dst, return_index=True)[1]
            src, dst = src[keep], dst[keep]
            cap = rng.integers(1, 3, src.size)
        else:
            cap = np.ones(arcs, np.int64)
        topo = Topology(n, src, dst, capacity=cap, bidirectional=False)
        expected = _reverse_symmetric_by_brute_force(n, src, dst, cap)
        assert topo.is_reverse_symmetric() == expected, (n, src, dst, cap)
        answers.append(expected)
    assert 30 < sum(answers) < 270           # both answers were exercised


def test_line_graph_size_degree_diameter():
    for base in [complete_bipartite(4), circulant(16, [3, 4]), complete(5)]:
        lg = line_graph(base)
        assert lg.n == base.n * base.degree and lg.degree == base.degree and lg.is_regular
        assert lg.diameter == base.diameter + 1
    assert str(line_graph(circulant(16, [3, 4]), 3)) == "L^3(C(16,{3,4}))"


def test_kautz_is_iterated_line_graph_of_complete():
    assert kautz(4, 2).n == 4 ** 2 * 5 and kautz(4, 2).diameter == 3


def test_products_add_degrees_and_diameters():
    a, b = torus(3, 4), complete_bipartite(3)
    p = cartesian_product(a, b)
    assert p.n == a.n * b.n and p.degree == a.degree + b.degree
    assert p.diameter == a.diameter + b.diameter
    assert cartesian_power(complete(2), 3).diameter == 3 == hypercube(3).diameter


def test_degree_expansion_and_bidirectional():
    g = degree_expansion(uni_ring(1, 4), 2)
    assert g.n == 8 and g.degree == 2 and g.is_regular
    b = bidirectional(de_bruijn(2, 3))
    assert b.bidirectional and b.degree == 4


def test_bad_topologies_raise():
    with pytest.raises(TopofinderError):
        Topology(1, [], [])
    with pytest.raises(TopofinderError):
        Topology(3, [0], [5])
    with pytest.raises(TopofinderError, match="gcd"):
        circulant(8, [2, 4])
    with pytest.raises(TopofinderError, match="not strongly connected"):
        _ = Topology(3, [0, 1], [1, 2]).diameter
    assert np.all(Topology(3, [0, 1], [1, 2]).distances[2, :2] == -1)
