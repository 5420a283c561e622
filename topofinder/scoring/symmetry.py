"""Exact automorphism groups of topologies, from bliss (through python-igraph).

An automorphism of a topology is a node permutation p with (u, w) an arc of capacity c iff
(p[u], p[w]) is one (self-loops ignored: they carry no all-to-all flow). bliss computes a
generating set of the whole group and its order by individualisation–refinement with
automorphism pruning; capacities are encoded by subdividing every arc whose capacity differs
from the most common one with a vertex coloured by that capacity, so the automorphisms of the
coloured graph restricted to the nodes are exactly the capacity-preserving ones. Every
generator returned is checked against the arc list before it is used.

The group drives the orbit reduction of the all-to-all LP (3) of paper 001 (one source flow
per vertex orbit, one capacity row per arc orbit; see topofinder.scoring.alltoall).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.symmetric import orbits


@dataclass(frozen=True)
class Group:
    """Automorphism group of a digraph: ``generators`` (node permutations, each verified) and
    ``order`` (|Aut|, exact integer from bliss)."""

    n: int
    generators: tuple
    order: int

    def orbits(self) -> np.ndarray:
        """Orbit label of every node."""
        return orbits(self.n, list(self.generators))


def automorphism_group(n: int, tail: np.ndarray, head: np.ndarray,
                       cap: np.ndarray | None = None) -> Group:
    """The full automorphism group of the digraph with arcs (tail[e], head[e]) of capacity
    cap[e] (no parallel arcs: collapse multi-arcs into capacities first; self-loops dropped).
    Needs python-igraph (bliss)."""
    try:
        import igraph
    except ImportError:                                          # pragma: no cover
        raise TopofinderError("exact automorphism groups need python-igraph: "
                              "pip install igraph") from None
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
    g = igraph.Graph(n=len(colours), edges=edges.tolist(), directed=True)
    raw = g.automorphism_group(sh="fl", color=colours)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)                # |Aut(K(2000))| = 2000! has 5736 digits
    try:
        order = int(g.count_automorphisms(sh="fl", color=colours))
    finally:
        sys.set_int_max_str_digits(limit)
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
    return Group(n, gens, order)


def topology_group(topo) -> Group:
    """:func:`automorphism_group` of a :class:`topofinder.model.topology.Topology` (multi-arcs
    collapsed into capacities), computed once per topology object (kept beside its other
    cached facts, since ForestColl and the all-to-all LP both ask)."""
    group = topo.__dict__.get("_automorphism_group")
    if group is None:
        m = topo.link_matrix.tocoo()
        group = automorphism_group(topo.n, m.row, m.col, m.data)
        topo.__dict__["_automorphism_group"] = group
    return group
