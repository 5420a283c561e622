"""The symmetry core every scorer shares: exact automorphism groups of topologies from bliss
(through python-igraph), their orbits on nodes and links, and group enumeration.

An automorphism of a topology is a node permutation p with (u, w) an arc of capacity c iff
(p[u], p[w]) is one (self-loops ignored: they carry no all-to-all flow). bliss computes a
generating set of the whole group and its order by individualisation–refinement with
automorphism pruning; capacities are encoded by subdividing every arc whose capacity differs
from the most common one with a vertex coloured by that capacity, so the automorphisms of the
coloured graph restricted to the nodes are exactly the capacity-preserving ones. Every
generator returned is checked against the arc list before it is used.

The group drives the orbit reduction of the all-to-all LP (3) of paper 001 (one source flow
per vertex orbit, one capacity row per arc orbit; see topofinder.scoring.alltoall.concurrent_flow).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.isomorphism import igraph_module
from topofinder.model.symmetric import orbits
from topofinder.scoring.links import Links


@dataclass(frozen=True)
class Group:
    """Automorphism group of a digraph: ``generators`` (node permutations, each verified) and
    ``order`` (|Aut|, exact integer from bliss, counted on first use: a second search as
    long as the first — 5 s at N = 10^5 — that only the failure survey reads)."""

    n: int
    generators: tuple
    count: Callable[[], int] = field(repr=False, compare=False)

    @cached_property
    def order(self) -> int:
        return self.count()

    def orbits(self) -> np.ndarray:
        """Orbit label of every node."""
        return orbits(self.n, list(self.generators))


def automorphism_group(n: int, tail: np.ndarray, head: np.ndarray,
                       cap: np.ndarray | None = None, fixed: int | None = None) -> Group:
    """The full automorphism group of the digraph with arcs (tail[e], head[e]) of capacity
    cap[e] (no parallel arcs: collapse multi-arcs into capacities first; self-loops dropped);
    with ``fixed`` a node, its stabiliser (the automorphisms mapping it to itself: the node
    gets a colour of its own). Needs python-igraph (bliss)."""
    igraph = igraph_module()
    tail = np.asarray(tail, np.int64)
    head = np.asarray(head, np.int64)
    cap = np.ones(tail.size) if cap is None else np.asarray(cap, np.float64)
    keep = tail != head
    tail, head, cap = tail[keep], head[keep], cap[keep]
    values, cls = np.unique(cap, return_inverse=True)
    colours = [0] * n
    if values.size > 1:
        common = int(np.bincount(cls).argmax())
        odd = np.flatnonzero(cls != common)
        mid = n + np.arange(odd.size)
        edges = np.concatenate([
            np.stack([tail[cls == common], head[cls == common]], 1),
            np.stack([tail[odd], mid], 1), np.stack([mid, head[odd]], 1)])
        colours += (1 + cls[odd] - (cls[odd] > common)).tolist()
    elif tail.size > n * (n - 1) // 2:
        # denser than half the complete digraph: the complement has the same automorphisms
        # and fewer arcs (bliss's search on K(n) itself refines n² arcs at every level)
        present = np.zeros((n, n), bool)
        present[tail, head] = True
        np.fill_diagonal(present, True)
        edges = np.argwhere(~present)
    else:
        edges = np.stack([tail, head], 1)
    if fixed is not None:
        colours[fixed] = max(colours) + 1
    g = igraph.Graph(n=len(colours), edges=edges.tolist(), directed=True)
    raw = g.automorphism_group(sh="fl", color=colours)
    total = len(colours)
    edges = edges.astype(np.int64).reshape(-1, 2)
    keys = np.sort(edges[:, 0] * total + edges[:, 1])
    colour = np.asarray(colours)
    for raw_p in raw:   # each must map the graph bliss saw onto itself, colours kept: then its
        p = np.asarray(raw_p, np.int64)            # node part maps arcs to arcs of equal cap
        if not (np.array_equal(np.sort(p[edges[:, 0]] * total + p[edges[:, 1]]), keys)
                and np.array_equal(colour[p], colour)):
            raise TopofinderError("bliss returned a permutation that is not an automorphism")
    gens = tuple(np.asarray(p[:n], np.int64) for p in raw)
    return Group(n, gens, partial(_count, g, colours))


def _count(graph, colours: list) -> int:
    """|Aut| of the coloured igraph ``graph`` (bliss)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)                # |Aut(K(2000))| = 2000! has 5736 digits
    try:
        return int(graph.count_automorphisms(sh="fl", color=colours))
    finally:
        sys.set_int_max_str_digits(limit)


def topology_group(topo) -> Group:
    """:func:`automorphism_group` of a :class:`topofinder.model.topology.Topology` (multi-arcs
    collapsed into capacities), computed once per topology object (kept beside its other
    cached facts, since ForestColl and the all-to-all LP both ask)."""
    group = topo.__dict__.get("_automorphism_group")
    if group is None:
        links = Links.of(topo)
        group = automorphism_group(topo.n, links.tail, links.head, links.cap)
        topo.__dict__["_automorphism_group"] = group
    return group


def group_elements(n: int, gens, limit: int) -> np.ndarray | None:
    """Every element of the group generated by the permutations ``gens`` of 0..n−1, as a
    (|H|, n) array with the identity first (breadth-first from it), or None when the group has
    more than ``limit`` elements."""
    identity = np.arange(n, dtype=np.int64)
    seen, out, frontier = {identity.tobytes()}, [identity], [identity]
    while frontier:
        nxt = []
        for h in frontier:
            for g in gens:
                e = np.asarray(g, np.int64)[h]
                key = e.tobytes()
                if key not in seen:
                    if len(out) == limit:
                        return None
                    seen.add(key)
                    out.append(e)
                    nxt.append(e)
        frontier = nxt
    return np.array(out)


def bounded_subgroup(n: int, gens, limit: int) -> list[np.ndarray]:
    """The generators, taken in order, that keep the subgroup they generate at most ``limit``
    elements (none: the trivial group). Any subgroup of Aut(G) reduces a flow LP exactly."""
    chosen: list[np.ndarray] = []
    for gen in gens:
        if group_elements(n, chosen + [np.asarray(gen, np.int64)], limit) is not None:
            chosen.append(np.asarray(gen, np.int64))
    return chosen


@dataclass(frozen=True, eq=False)
class LinkOrbits:
    """A group H of automorphisms of merged links (topofinder.scoring.links) and its orbits.

    ``generators``: node permutations, each verified to map links onto links of equal
    capacity. ``vertex_orbit[v]``: orbit label (numbered by first occurrence, so orbit 0 holds
    node 0); ``reps``: the least node of each orbit, in label order; ``weight``: the orbit
    sizes. ``arc_orbit[e]``: the link's orbit label (first occurrence); ``orbit_size``: link
    orbit sizes; ``orbit_cap``: the common capacity of each link orbit (units of b).
    ``elements``: all of H as a (|H|, N) array, identity first, when enumerated, else None.
    """

    links: Links
    generators: tuple
    vertex_orbit: np.ndarray
    reps: np.ndarray
    weight: np.ndarray
    arc_orbit: np.ndarray
    orbit_size: np.ndarray
    orbit_cap: np.ndarray
    elements: np.ndarray | None = None

    @classmethod
    def of(cls, links: Links, generators, max_elements: int = 0) -> "LinkOrbits":
        """The orbits of the group generated by those ``generators`` that are automorphisms
        of ``links`` (others are dropped: a subgroup still reduces exactly); its elements too
        when there are at most ``max_elements`` of them."""
        gens = tuple(np.asarray(p, np.int64) for p in generators if links.preserved_by(p))
        vertex_orbit = orbits(links.n, list(gens))
        _, reps, weight = np.unique(vertex_orbit, return_index=True, return_counts=True)
        arc_orbit = orbits(links.num, [links.image(p) for p in gens])
        size = np.bincount(arc_orbit)
        elements = group_elements(links.n, gens, max_elements) if max_elements else None
        return cls(links, gens, vertex_orbit, reps, weight, arc_orbit, size,
                   np.bincount(arc_orbit, weights=links.cap) / size, elements)

    @property
    def n(self) -> int:
        """Number of nodes N."""
        return self.links.n

    @property
    def num_arc_orbits(self) -> int:
        return int(self.orbit_size.size)

    @property
    def num_variables(self) -> int:
        """Variables of a flow LP with one flow per representative on every link: R·L."""
        return int(self.reps.size * self.arc_orbit.size)

    def vertex_orbit_size(self, v: int) -> int:
        """Size of the orbit of node ``v``."""
        return int(self.weight[self.vertex_orbit[v]])

    def element_link_images(self) -> np.ndarray:
        """(|H|, L): the link permutation of every element (needs ``elements``)."""
        return np.array([self.links.image(h) for h in self.elements])

    def mappers(self, r: int) -> list[np.ndarray]:
        """Group elements carrying node r to each node of its orbit: with H enumerated, all of
        them (|H_r| per node, so averaging over them is exact); else one per node, from a
        Schreier tree of the generators."""
        if self.elements is not None:
            return list(self.elements)
        reach = {r: np.arange(self.n)}
        frontier = [r]
        while frontier:
            nxt = []
            for v in frontier:
                for g in self.generators:
                    w = int(g[v])
                    if w not in reach:
                        reach[w] = g[reach[v]]
                        nxt.append(w)
            frontier = nxt
        return list(reach.values())
