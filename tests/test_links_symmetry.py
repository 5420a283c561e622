"""The shared link model (topofinder.scoring.links) and symmetry core
(topofinder.scoring.symmetry), against definitions computed independently from the arc list."""

from collections import Counter
from math import factorial

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.families import circulant, hypercube, torus
from topofinder.families.build import parse
from topofinder.model.topology import Topology
from topofinder.scoring.links import Links, connected_links
from topofinder.scoring.symmetry import (
    LinkOrbits, bounded_subgroup, group_elements, topology_group,
)


def _merged(topo: Topology) -> Counter:
    """(u, w) → summed capacity over the arcs u→w, self-loops dropped (the definition)."""
    cap = topo.capacity if topo.capacity is not None else np.ones(topo.src.size, np.int64)
    out = Counter()
    for u, w, c in zip(topo.src.tolist(), topo.dst.tolist(), np.asarray(cap).tolist()):
        if u != w:
            out[(u, w)] += int(c)
    return out


@pytest.mark.parametrize("expr", ["C(6,{1,2})", "L(C(4,{1,2}))", "Kautz(2,2)", "C(4,{1,2})",
                                  "Pi(3,10)"])
def test_links_merge_parallel_arcs_and_drop_self_loops(expr):
    topo = parse(expr)
    links = Links.of(topo)
    got = {(int(u), int(w)): int(c) for u, w, c in zip(links.tail, links.head, links.cap)}
    assert got == dict(_merged(topo))
    assert np.all(np.diff(links.keys) > 0)                     # row-major, no repeats
    pairs = list(got)
    u, w = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    assert np.array_equal(links.index(u, w), np.arange(links.num))
    for v in range(topo.n):                                    # CSR rows
        assert set(links.tail[links.indptr[v]:links.indptr[v + 1]].tolist()) <= {v}


def test_the_examples_do_merge_and_drop():
    double = Links.of(parse("C(4,{1,2})"))                     # +2 ≡ −2: a double arc
    assert double.num == 12 and sorted(set(double.cap.tolist())) == [1, 2]
    looped = parse("Pi(3,10)")
    assert looped.self_loops == 2 and Links.of(looped).num == looped.src.size - 2


def test_connected_links_refuse_a_disconnected_topology_in_one_line():
    two_rings = Topology(6, np.array([0, 1, 2, 3, 4, 5]), np.array([1, 2, 0, 4, 5, 3]),
                         expr="two rings")
    with pytest.raises(TopofinderError, match="not strongly connected.*no flow"):
        connected_links(two_rings, "no flow")


def test_preserved_by_is_the_automorphism_test():
    links = Links.of(circulant(8, [1, 3]))
    shift = (np.arange(8) + 1) % 8
    assert links.preserved_by(shift)
    assert links.preserved_by((-np.arange(8)) % 8)              # negation keeps {±1, ±3}
    assert not links.preserved_by((2 * np.arange(8)) % 8)       # not a permutation
    swap = np.arange(8)
    swap[[0, 1]] = [1, 0]
    assert not links.preserved_by(swap)
    # a capacity per link breaks the symmetry when it is not constant on the orbits
    slots = np.where(links.tail == 0, 2, 1)
    assert not links.preserved_by(shift, slots)


@pytest.mark.parametrize("topo,order", [(hypercube(3), 48), (torus(3, 4), 48),
                                        (circulant(7, [1, 2, 3]), factorial(7))])
def test_group_elements_count_the_bliss_order(topo, order):
    group = topology_group(topo)
    assert group.order == order                                # |Aut| of Q3, C3×C4, K7
    elements = group_elements(topo.n, group.generators, order)
    assert len(elements) == order and np.array_equal(elements[0], np.arange(topo.n))
    assert len({e.tobytes() for e in elements}) == order
    links = Links.of(topo)
    assert all(links.preserved_by(e) for e in elements)
    assert group_elements(topo.n, group.generators, order - 1) is None


def test_bounded_subgroup_stays_within_its_limit():
    topo = hypercube(4)                                        # |Aut(Q4)| = 384
    gens = bounded_subgroup(topo.n, topology_group(topo).generators, 50)
    elements = group_elements(topo.n, gens, 50)
    assert elements is not None and len(elements) <= 50
    assert bounded_subgroup(topo.n, topology_group(topo).generators, 1) == []


def test_link_orbits_against_brute_force_images():
    topo = parse("L(C(4,{1,2}))")
    links = Links.of(topo)
    group = topology_group(topo)
    orbits = LinkOrbits.of(links, group.generators, max_elements=10_000)
    elements = orbits.elements
    assert len(elements) == group.order
    # vertex orbits: v ~ h(v); link orbits: e ~ h(e), over every element
    vertex = {frozenset(int(h[v]) for h in elements) for v in range(topo.n)}
    assert {frozenset(np.flatnonzero(orbits.vertex_orbit == o).tolist())
            for o in range(orbits.reps.size)} == vertex
    images = orbits.element_link_images()
    link = {frozenset(images[:, e].tolist()) for e in range(links.num)}
    assert {frozenset(np.flatnonzero(orbits.arc_orbit == o).tolist())
            for o in range(orbits.num_arc_orbits)} == link
    assert orbits.reps.tolist() == sorted(min(s) for s in vertex)
    assert orbits.weight.tolist() == [len(s) for s in sorted(vertex, key=min)]
    for o in range(orbits.num_arc_orbits):                     # one capacity per link orbit
        assert set(links.cap[orbits.arc_orbit == o].tolist()) == {orbits.orbit_cap[o]}
    # Schreier mappers without the enumeration: one element per orbit node, each carrying r
    sparse = LinkOrbits.of(links, group.generators)
    for r in sparse.reps:
        maps = sparse.mappers(int(r))
        assert sorted(int(g[r]) for g in maps) == \
            np.flatnonzero(sparse.vertex_orbit == sparse.vertex_orbit[r]).tolist()


def test_link_orbits_drop_generators_that_are_not_automorphisms():
    links = Links.of(circulant(6, [1]))
    swap = np.arange(6)
    swap[[0, 1]] = [1, 0]
    orbits = LinkOrbits.of(links, [swap])
    assert orbits.generators == () and orbits.reps.size == 6
