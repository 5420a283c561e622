"""Distance-regular graphs: paper 001 Table 8, literature intersection arrays (BCN,
distanceregular.org), family formulas, and independent constructions from networkx."""

import json
import re
from fractions import Fraction
from itertools import product
from math import comb

import networkx as nx
import numpy as np
import pytest

from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.errors import TopofinderError
from topofinder.families import (
    circulant, complete, complete_bipartite, de_bruijn, generalized_kautz, hamming, hypercube,
    torus, bi_ring,
)
from topofinder.families.distance_regular import (
    CATALOG_NAMES, CATALOG_PATH, _field, ag2_minus_parallel_class, catalog_entries, catalog_sizes,
    distance_regular, distance_regular_by_size, doubled_odd_graph, gh_incidence, gq_incidence,
    intersection_array, johnson, odd_graph, paley, pg2_incidence, undirected_line_graph,
)
from topofinder.model.topology import Topology

# Paper 001 Table 8: name, N, BFB T_L (= diameter for a distance-regular graph).
TABLE8 = [
    ("Octahedron", 6, 2), ("Paley9", 9, 2), ("K55-I", 10, 3), ("Heawood3", 14, 3),
    ("L-Petersen", 15, 3), ("Q4", 16, 4), ("L-Heawood", 21, 3), ("IncPG2-3", 26, 3),
    ("IncAG2-4-par", 32, 4), ("Odd4", 35, 3), ("L-Tutte8", 45, 4), ("DoubledOdd4", 70, 7),
    ("IncGQ3", 80, 4), ("L-Tutte12", 189, 6), ("IncGH3", 728, 6),
]

# Intersection arrays from the literature (BCN; distanceregular.org), {b_0..; c_1..}.
LITERATURE = {
    "Octahedron": ((4, 1), (1, 4)),
    "Paley9": ((4, 2), (1, 2)),
    "K55-I": ((4, 3, 1), (1, 3, 4)),
    "Heawood3": ((4, 3, 2), (1, 2, 4)),
    "L-Petersen": ((4, 2, 1), (1, 1, 4)),
    "Q4": ((4, 3, 2, 1), (1, 2, 3, 4)),
    "L-Heawood": ((4, 2, 2), (1, 1, 2)),
    "IncPG2-3": ((4, 3, 3), (1, 1, 4)),
    "IncAG2-4-par": ((4, 3, 3, 1), (1, 1, 3, 4)),
    "Odd4": ((4, 3, 3), (1, 1, 2)),
    "L-Tutte8": ((4, 2, 2, 2), (1, 1, 1, 2)),
    "DoubledOdd4": ((4, 3, 3, 2, 2, 1, 1), (1, 1, 2, 2, 3, 3, 4)),
    "IncGQ3": ((4, 3, 3, 3), (1, 1, 1, 4)),
    "L-Tutte12": ((4, 2, 2, 2, 2, 2), (1, 1, 1, 1, 1, 2)),
    "IncGH3": ((4, 3, 3, 3, 3, 3), (1, 1, 1, 1, 1, 4)),
    "Crown4": ((3, 2, 1), (1, 2, 3)),                       # the 3-cube
    "Petersen": ((3, 2), (1, 1)),
    "Heawood": ((3, 2, 2), (1, 1, 3)),
    "Pappus": ((3, 2, 2, 1), (1, 1, 2, 3)),
    "Desargues": ((3, 2, 2, 1, 1), (1, 1, 2, 2, 3)),
    "Tutte8": ((3, 2, 2, 2), (1, 1, 1, 3)),
    "Tutte12": ((3, 2, 2, 2, 2, 2), (1, 1, 1, 1, 1, 3)),
    "Odd5": ((5, 4, 4, 3), (1, 1, 2, 2)),
}


def _ceil_half(i):
    return -(-i // 2)


# Family formulas (BCN): name pattern → intersection array.
FAMILY_ARRAYS = [
    (r"Johnson-(\d+)-(\d+)", lambda n, k: (
        tuple((k - i) * (n - k - i) for i in range(min(k, n - k))),
        tuple(i * i for i in range(1, min(k, n - k) + 1)))),
    (r"Paley(\d+)", lambda q: (((q - 1) // 2, (q - 1) // 4), (1, (q - 1) // 4))),
    (r"Crown(\d+)", lambda n: ((n - 1, n - 2, 1), (1, n - 2, n - 1))),
    (r"Odd(\d+)", lambda k: (tuple(k - _ceil_half(i) for i in range(k - 1)),
                             tuple(_ceil_half(i) for i in range(1, k)))),
    (r"DoubledOdd(\d+)", lambda k: (tuple(k - _ceil_half(i) for i in range(2 * k - 1)),
                                    tuple(_ceil_half(i) for i in range(1, 2 * k)))),
    (r"IncPG2-(\d+)", lambda q: ((q + 1, q, q), (1, 1, q + 1))),
    (r"IncAG2-(\d+)-par", lambda q: ((q, q - 1, q - 1, 1), (1, 1, q - 1, q))),
    (r"IncGQ(\d+)", lambda q: ((q + 1, q, q, q), (1, 1, 1, q + 1))),
    (r"IncGH(\d+)", lambda q: ((q + 1,) + (q,) * 5, (1,) * 5 + (q + 1,))),
]


def expected_array(name):
    if name in LITERATURE:
        return LITERATURE[name]
    for pattern, formula in FAMILY_ARRAYS:
        m = re.fullmatch(pattern, name)
        if m:
            return formula(*map(int, m.groups()))
    raise KeyError(name)


def order(array):
    """N forced by an intersection array: k_{i+1} = k_i b_i / c_{i+1}."""
    k, total = 1, 1
    for b, c in zip(*array):
        assert k * b % c == 0
        k = k * b // c
        total += k
    return total


@pytest.fixture(scope="module")
def catalog():
    return {name: distance_regular(name) for name in CATALOG_NAMES}


@pytest.fixture(scope="module")
def entries():
    """The catalog records as write_catalog writes them (arrays computed by the code)."""
    return catalog_entries()


def nx_graph(g: Topology) -> nx.Graph:
    return nx.Graph(list(zip(g.src.tolist(), g.dst.tolist())))


def isomorphic(g: Topology, h: nx.Graph) -> bool:
    return nx.is_isomorphic(nx_graph(g), h)


# ---- Table 8 and literature arrays ------------------------------------------------------------
@pytest.mark.parametrize("name,n,t_l", TABLE8)
def test_table8_sizes_and_diameters(catalog, name, n, t_l):
    g = catalog[name]
    assert g.n == n and g.is_regular and g.degree == 4 and g.bidirectional
    assert g.self_loops == 0 and g.link_matrix.max() == 1
    assert g.diameter == t_l                 # BFB T_L of a distance-regular graph = diameter


def test_bfb_is_bandwidth_optimal_with_t_l_equal_to_the_diameter(catalog):
    """Paper 001 App. F.3: every distance-regular graph has a BW-optimal BFB schedule;
    Table 7 lists DistReg(4,32) at (T_L, τ) = (4, 0.969) = (4, 31/32)."""
    for name, g in catalog.items():
        score = bfb_score(g)
        assert score.T_L == g.diameter and score.tau == Fraction(g.n - 1, g.n), name
    table7 = bfb_score(distance_regular_by_size(4, 32))
    assert (table7.T_L, round(float(table7.tau), 3)) == (4, 0.969)


def test_catalog_starts_with_table8_in_order():
    assert CATALOG_NAMES[:len(TABLE8)] == [name for name, _, _ in TABLE8]


def test_every_catalog_graph_is_distance_regular_with_the_theoretical_array(catalog, entries):
    assert [e["name"] for e in entries] == CATALOG_NAMES
    for e in entries:
        name, g = e["name"], catalog[e["name"]]
        array = tuple(e["intersection_array"]["b"]), tuple(e["intersection_array"]["c"])
        assert array == expected_array(name), name
        assert (g.n, g.degree, g.diameter) == (order(array), array[0][0], len(array[0])), name


def test_catalog_covers_degrees_3_to_16_with_distinct_sizes(catalog):
    sizes = [(g.degree, g.n) for g in catalog.values()]
    assert set(range(3, 17)) <= {d for d, _ in sizes}
    assert len(set(sizes)) == len(sizes)
    assert catalog_sizes() == {(g.degree, g.n): name for name, g in catalog.items()}
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", name) for name in CATALOG_NAMES)


def test_catalog_json_is_generated_and_current(catalog, entries):
    doc = json.loads(CATALOG_PATH.read_text())
    assert [e["name"] for e in doc["graphs"]] == CATALOG_NAMES
    for e in doc["graphs"]:
        g = catalog[e["name"]]
        assert e["expression"] == f"DistReg({e['name']})" == g.expr
        assert (e["N"], e["d"], e["diameter"]) == (g.n, g.degree, g.diameter)
        assert (tuple(e["intersection_array"]["b"]), tuple(e["intersection_array"]["c"])) \
            == expected_array(e["name"])
        assert e["size_expression"] == f"DistReg({g.degree},{g.n})"
    assert doc["graphs"] == entries


# ---- families --------------------------------------------------------------------------------
@pytest.mark.parametrize("n,k", [(4, 2), (5, 2), (6, 3), (7, 3), (8, 3), (9, 4), (7, 1)])
def test_johnson(n, k):
    g = johnson(n, k)
    assert g.n == comb(n, k) and g.degree == k * (n - k) and g.diameter == min(k, n - k)
    assert intersection_array(g) == expected_array(f"Johnson-{n}-{k}")


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_odd_graph(k):
    g = odd_graph(k)
    assert g.n == comb(2 * k - 1, k - 1) and g.degree == k and g.diameter == k - 1
    assert intersection_array(g) == expected_array(f"Odd{k}")


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_doubled_odd_graph(k):
    g = doubled_odd_graph(k)
    assert g.n == 2 * comb(2 * k - 1, k - 1) and g.degree == k and g.diameter == 2 * k - 1
    assert intersection_array(g) == expected_array(f"DoubledOdd{k}")


@pytest.mark.parametrize("q", [2, 3, 4, 5, 7, 8, 9, 16])
def test_projective_plane_incidence(q):
    g = pg2_incidence(q)
    assert g.n == 2 * (q * q + q + 1)
    assert intersection_array(g) == expected_array(f"IncPG2-{q}")


@pytest.mark.parametrize("q", [2, 3, 4, 5, 8, 9])
def test_affine_plane_minus_parallel_class(q):
    g = ag2_minus_parallel_class(q)
    assert g.n == 2 * q * q
    assert intersection_array(g) == expected_array(f"IncAG2-{q}-par")


@pytest.mark.parametrize("q", [2, 3, 4, 5])
def test_generalized_quadrangle_incidence(q):
    g = gq_incidence(q)
    assert g.n == 2 * (q + 1) * (q * q + 1)
    assert intersection_array(g) == expected_array(f"IncGQ{q}")


@pytest.mark.parametrize("q", [5, 9, 13, 17, 25, 29, 37, 41, 49, 81])
def test_paley(q):
    g = paley(q)
    assert g.n == q and g.degree == (q - 1) // 2 and g.diameter == 2
    assert intersection_array(g) == expected_array(f"Paley{q}")


def test_hexagon_of_order_2_is_tutte_12_cage():
    g = gh_incidence(2)
    assert g.n == 126 and intersection_array(g) == expected_array("IncGH2")


@pytest.mark.slow
def test_hexagon_of_order_4():
    g = gh_incidence(4)
    assert g.n == 2 * (4 ** 6 - 1) // 3
    assert intersection_array(g) == expected_array("IncGH4")


@pytest.mark.parametrize("q", [4, 8, 9, 16, 25, 27, 49])
def test_finite_field_axioms(q):
    f, a = _field(q), np.arange(q)
    x, y, z = a[:, None, None], a[None, :, None], a[None, None, :]
    assert np.array_equal(f.add[x, f.add[y, z]], f.add[f.add[x, y], z])
    assert np.array_equal(f.mul[x, f.mul[y, z]], f.mul[f.mul[x, y], z])
    assert np.array_equal(f.mul[x, f.add[y, z]], f.add[f.mul[x, y], f.mul[x, z]])
    assert np.array_equal(f.mul, f.mul.T) and np.array_equal(f.add, f.add.T)
    assert np.all(f.add[a, f.neg] == 0) and np.all(f.mul[a[1:], f.inv[1:]] == 1)
    assert np.all(f.add[0] == a) and np.all(f.mul[1] == a)


# ---- independent constructions ---------------------------------------------------------------
def _tutte8_lcf():
    return nx.LCF_graph(30, [-13, -9, 7, -7, 9, 13], 5)


@pytest.mark.parametrize("name,reference", [
    ("Petersen", nx.petersen_graph), ("Heawood", nx.heawood_graph),
    ("Desargues", nx.desargues_graph), ("Pappus", nx.pappus_graph), ("Tutte8", _tutte8_lcf),
    ("Octahedron", lambda: nx.complete_multipartite_graph(2, 2, 2)),
    ("L-Petersen", lambda: nx.line_graph(nx.petersen_graph())),
    ("L-Heawood", lambda: nx.line_graph(nx.heawood_graph())),
    ("L-Tutte8", lambda: nx.line_graph(_tutte8_lcf())),
    ("Johnson-5-2", lambda: nx.complement(nx.petersen_graph())),
    ("Crown4", lambda: nx_graph(hypercube(3))),
    ("Paley9", lambda: nx_graph(hamming(2, 3))),             # Table 8: P9 ≅ H(2,3)
    ("K55-I", lambda: nx_graph(circulant(10, [1, 3]))),       # 2i ≁ 2i+5 only
    ("Heawood3", lambda: nx.Graph([(u, v) for u, row in
                                   nx.all_pairs_shortest_path_length(nx.heawood_graph())
                                   for v, dist in row.items() if dist == 3])),
])
def test_isomorphic_to_independent_construction(name, reference):
    assert isomorphic(distance_regular(name), reference())


def test_vertex_transitive_flags_hold_on_small_graphs(catalog):
    """Where the flag says vertex-transitive, find an automorphism taking node 0 to each v."""
    for name, g in catalog.items():
        if g.n > 36 or not g.vertex_transitive:
            continue
        h = nx_graph(g)
        nx.set_node_attributes(h, 0, "mark")
        for v in range(1, g.n):
            a, b = h.copy(), h.copy()
            a.nodes[0]["mark"] = b.nodes[v]["mark"] = 1
            assert nx.vf2pp_is_isomorphic(a, b, node_label="mark"), (name, v)


# ---- the intersection-array checker ------------------------------------------------------------
def brute_force_array(g: Topology):
    """Def 17 read literally with networkx BFS: c and b counted pair by pair."""
    h = nx.DiGraph(list(zip(g.src.tolist(), g.dst.tolist())))
    h.add_nodes_from(range(g.n))
    if (not nx.is_strongly_connected(h) or nx.number_of_selfloops(h)
            or len(set(zip(g.src.tolist(), g.dst.tolist()))) != g.num_arcs
            or any(not h.has_edge(w, u) for u, w in h.edges)):
        return None
    dist = dict(nx.all_pairs_shortest_path_length(h))
    seen_b, seen_c = {}, {}
    for u, v in product(range(g.n), repeat=2):
        i = dist[u][v]
        c = sum(dist[u][w] == i - 1 for w in h[v])
        b = sum(dist[u][w] == i + 1 for w in h[v])
        seen_b.setdefault(i, set()).add(b)
        seen_c.setdefault(i, set()).add(c)
    if any(len(s) > 1 for s in list(seen_b.values()) + list(seen_c.values())):
        return None
    diameter = max(seen_b)
    return (tuple(seen_b[i].pop() for i in range(diameter)),
            tuple(seen_c[i].pop() for i in range(1, diameter + 1)))


@pytest.mark.parametrize("make", [
    lambda: complete(6), lambda: complete_bipartite(4), lambda: hypercube(4),
    lambda: hamming(2, 4), lambda: torus(3, 4), lambda: torus(5, 5), lambda: circulant(9, [1, 2]),
    lambda: circulant(10, [1, 3]), lambda: distance_regular("Heawood3"),
    lambda: distance_regular("IncAG2-3-par"), lambda: distance_regular("L-Petersen"),
    lambda: Topology.from_networkx(nx.circular_ladder_graph(6)),        # prism: not DRG
    lambda: Topology.from_networkx(nx.frucht_graph()),                  # cubic, asymmetric
    lambda: Topology.from_networkx(nx.dodecahedral_graph()),
    lambda: Topology.from_networkx(nx.icosahedral_graph()),
    lambda: Topology.from_networkx(nx.random_regular_graph(4, 14, seed=3)),
    lambda: de_bruijn(2, 3), lambda: generalized_kautz(2, 7), lambda: bi_ring(4, 5),
])
def test_intersection_array_matches_brute_force(make):
    g = make()
    assert intersection_array(g) == brute_force_array(g)


def test_platonic_solids_have_their_literature_arrays():
    assert intersection_array(Topology.from_networkx(nx.dodecahedral_graph())) \
        == ((3, 2, 1, 1, 1), (1, 1, 1, 2, 3))
    assert intersection_array(Topology.from_networkx(nx.icosahedral_graph())) \
        == ((5, 2, 1), (1, 2, 5))


def test_intersection_array_rejects_non_drg():
    assert intersection_array(torus(3, 4)) is None                        # vertex-transitive
    assert intersection_array(de_bruijn(2, 3)) is None                   # directed
    assert intersection_array(bi_ring(4, 5)) is None                     # multi-edges
    two_triangles = Topology(6, [0, 1, 2, 1, 2, 0, 3, 4, 5, 4, 5, 3],
                             [1, 2, 0, 0, 1, 2, 4, 5, 3, 3, 4, 5])
    assert intersection_array(two_triangles) is None                     # disconnected


# ---- registry ----------------------------------------------------------------------------------
@pytest.mark.parametrize("alias,canonical", [
    ("Octahedron", "Johnson-4-2"), ("K55-I", "Crown5"), ("Q4", "Hamming-4-2"),
    ("Petersen", "Odd3"), ("Heawood", "IncPG2-2"), ("Tutte8", "IncGQ2"),
    ("Desargues", "DoubledOdd3"), ("Pappus", "IncAG2-3-par"),
])
def test_aliases_name_the_same_graph(alias, canonical):
    a, b = distance_regular(alias), distance_regular(canonical)
    assert a.expr == f"DistReg({alias})" and b.expr == f"DistReg({canonical})"
    assert a.same_arcs(b)


def test_q4_is_the_hypercube():
    assert distance_regular("Q4").same_arcs(hypercube(4))


def test_by_size():
    g = distance_regular_by_size(4, 32)
    assert g.expr == "DistReg(4,32)" and g.same_arcs(distance_regular("IncAG2-4-par"))
    assert distance_regular_by_size(4, 728).same_arcs(distance_regular("IncGH3"))
    with pytest.raises(TopofinderError, match=r"\(4,32\)"):
        distance_regular_by_size(4, 33)


@pytest.mark.parametrize("make", [lambda: bi_ring(4, 5), lambda: de_bruijn(2, 3),
                                  lambda: generalized_kautz(2, 7)])
def test_undirected_line_graph_needs_a_simple_undirected_graph(make):
    with pytest.raises(TopofinderError):
        undirected_line_graph(make(), "X")


def test_undirected_line_graph_matches_networkx():
    g = undirected_line_graph(torus(3, 4), "L-T")          # not edge-transitive: no VT flag
    assert not g.vertex_transitive
    assert isomorphic(g, nx.line_graph(nx_graph(torus(3, 4))))


@pytest.mark.parametrize("name", ["Foo", "Paley7", "Paley15", "IncPG2-6", "Johnson-3-3",
                                  "Odd1", "IncGH5", "Crown2", "Odd40", "IncGQ10"])
def test_bad_names_are_user_errors(name):
    with pytest.raises(TopofinderError):
        distance_regular(name)
