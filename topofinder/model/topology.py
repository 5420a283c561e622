"""The Topology: N nodes 0..N-1 and a multiset of directed arcs (docs/model.md).

A k-fold multi-arc is k entries in ``src``/``dst`` (k links, k·b bandwidth). Self-loops are kept
(generalized Kautz graphs have them) and reported, but they carry no traffic. Heterogeneous links
carry an integer ``capacity`` per arc in units of the base link bandwidth b; ``None`` means 1.
A switched fabric marks its switch nodes (``switches``); the others are compute nodes, and
collectives run between compute nodes only (paper 002 §4: V = V_c ∪ V_s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from topofinder.errors import TopofinderError
from topofinder.model.isomorphism import reverse_isomorphic
from topofinder.model.reach import distance_histogram

if TYPE_CHECKING:           # networkx (0.1 s) loads where a graph is built, not per process
    import networkx as nx

MAX_NODES = 1_000_000


def _readonly(a, dtype=np.int64) -> np.ndarray:
    a = np.array(a, dtype=dtype, copy=True).reshape(-1)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Topology:
    """A direct-connect topology.

    ``n``: number of nodes. ``src``/``dst``: arc endpoints (int64 arrays of equal length).
    ``expr``: the expression that names it (docs/expressions.md). ``capacity``: per-arc integer
    link capacity in units of b, or None for all ones. ``bidirectional``: every arc has a partner
    in the other direction (None: computed). ``vertex_transitive``: a hint set by generators that
    know it (scorers may then analyse one node). ``reverse_isomorphism``: a known permutation p
    with (u, w) an arc iff (p[w], p[u]) an arc, i.e. G^T ≅ G (Appendix B, Thm 2).
    ``switches``: ids of switch nodes (paper 002 V_s; None or empty: every node computes).
    ``capacity_unit``: the physical bandwidth of one capacity unit (e.g. "1 GB/s"), when
    the input stated one; None means capacities are in units of the base link bandwidth b.
    ``labels``: the name of every node (rank) as the input file gave it (host names such as
    ``gpu-00``), a tuple of N distinct strings; None means the names are the ranks 0..N−1.
    ``node_cap``: the per-node send and receive bandwidth cap B (a positive Fraction, in
    capacity units) the input file stated for the ``node`` port model of the one-root
    collectives (docs/algorithms.md); None when it stated none.
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    expr: str = "G"
    capacity: np.ndarray | None = None
    bidirectional: bool | None = None
    vertex_transitive: bool = False
    reverse_isomorphism: np.ndarray | None = field(default=None, repr=False)
    switches: np.ndarray | None = None
    capacity_unit: str | None = None
    labels: tuple[str, ...] | None = field(default=None, repr=False)
    node_cap: Fraction | None = None

    def __post_init__(self):
        n = int(self.n)
        if n < 2:
            raise TopofinderError(f"{self.expr}: N = {n} nodes; a topology needs N >= 2")
        if n > MAX_NODES:
            raise TopofinderError(
                f"{self.expr}: N = {n} nodes; topofinder handles N <= {MAX_NODES}")
        src, dst = _readonly(self.src), _readonly(self.dst)
        if src.shape != dst.shape:
            raise TopofinderError("arc source and destination arrays differ in length")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise TopofinderError(f"{self.expr}: an arc names a node outside 0..{n - 1}")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        if self.capacity is not None:
            cap = _readonly(self.capacity)
            if cap.shape != src.shape or (cap.size and cap.min() < 1):
                raise TopofinderError("link capacities must be positive integers, one per arc")
            object.__setattr__(self, "capacity", None if np.all(cap == 1) else cap)
        if self.reverse_isomorphism is not None:
            object.__setattr__(self, "reverse_isomorphism", _readonly(self.reverse_isomorphism))
        if self.bidirectional is None:
            object.__setattr__(self, "bidirectional", self._arcs_equal_reverse())
        if self.switches is not None:
            sw = np.unique(np.asarray(self.switches, np.int64).reshape(-1))
            if sw.size and (sw[0] < 0 or sw[-1] >= n):
                raise TopofinderError(f"{self.expr}: a switch id lies outside 0..{n - 1}")
            if n - sw.size < 2:
                raise TopofinderError(f"{self.expr}: {n - sw.size} compute node(s); a "
                                      "collective needs at least 2")
            sw.setflags(write=False)
            object.__setattr__(self, "switches", sw if sw.size else None)
        if self.labels is not None:
            labels = tuple(str(x) for x in self.labels)
            if len(labels) != n or len(set(labels)) != n:
                raise TopofinderError(f"{self.expr}: node labels must be {n} distinct names")
            if labels == tuple(str(i) for i in range(n)):
                labels = None
            object.__setattr__(self, "labels", labels)
        if self.node_cap is not None:
            if not isinstance(self.node_cap, (int, Fraction)) or self.node_cap <= 0:
                raise TopofinderError(f"{self.expr}: node bandwidth cap must be a positive "
                                      f"number, got {self.node_cap!r}")
            object.__setattr__(self, "node_cap", Fraction(self.node_cap))

    # ---- basic facts -------------------------------------------------------------------
    def __str__(self) -> str:
        return self.expr

    def __repr__(self) -> str:
        return f"Topology({self.expr!r}, N={self.n}, arcs={self.num_arcs})"

    def label(self, rank: int) -> str:
        """The name of node ``rank`` (its number when the topology carries no labels)."""
        return str(rank) if self.labels is None else self.labels[rank]

    def unreachable(self) -> tuple[int, int] | None:
        """A pair (u, v) such that v cannot be reached from u, or None when the topology is
        strongly connected (the witness a connectivity error names)."""
        if self.strongly_connected:
            return None
        reach = shortest_path(self.link_matrix, method="D", unweighted=True, directed=True,
                              indices=[0])[0]
        missing = np.flatnonzero(~np.isfinite(reach))
        if missing.size:
            return 0, int(missing[0])
        back = shortest_path(self.link_matrix.T.tocsr(), method="D", unweighted=True,
                             directed=True, indices=[0])[0]
        return int(np.flatnonzero(~np.isfinite(back))[0]), 0

    def unreachable_text(self) -> str:
        """'node a cannot reach node b' for :meth:`unreachable` ('' when connected)."""
        pair = self.unreachable()
        if pair is None:
            return ""
        return f"node {self.label(pair[0])} cannot reach node {self.label(pair[1])}"

    @property
    def num_arcs(self) -> int:
        return int(self.src.size)

    @property
    def arc_capacity(self) -> np.ndarray:
        """Per-arc capacity in units of b (ones when homogeneous)."""
        return np.ones(self.num_arcs, np.int64) if self.capacity is None else self.capacity

    @property
    def heterogeneous(self) -> bool:
        return self.capacity is not None

    @property
    def has_switches(self) -> bool:
        return self.switches is not None

    @cached_property
    def is_switch(self) -> np.ndarray:
        """Boolean per node: True for a switch node (paper 002 V_s)."""
        mask = np.zeros(self.n, bool)
        if self.switches is not None:
            mask[self.switches] = True
        mask.setflags(write=False)
        return mask

    @cached_property
    def compute_nodes(self) -> np.ndarray:
        """Ids of the compute nodes V_c (all nodes when there are no switches)."""
        return np.flatnonzero(~self.is_switch)

    @property
    def num_compute(self) -> int:
        """N = |V_c|: the nodes a collective runs between."""
        return int(self.compute_nodes.size)

    @cached_property
    def node_bandwidth(self) -> int:
        """B in capacity units: the largest egress bandwidth Σ C(u, ·) of a compute node (every
        port counted, self-loops too). Equals the degree d of a homogeneous topology."""
        out = np.bincount(self.src, self.arc_capacity, minlength=self.n)
        return int(out[self.compute_nodes].max()) if self.num_arcs else 0

    @cached_property
    def min_ingress(self) -> int:
        """min over compute nodes v of B⁻(v) = Σ C(·, v), every port counted (capacity
        units): a node receives (N−1)/N of M through it, so T ≥ (N−1)/N · M/B⁻(v)."""
        inc = np.bincount(self.dst, self.arc_capacity, minlength=self.n)
        return int(inc[self.compute_nodes].min())

    @cached_property
    def out_degrees(self) -> np.ndarray:
        """Number of outgoing ports (arcs, multi-arcs and self-loops counted) per node."""
        return np.bincount(self.src, minlength=self.n)

    @cached_property
    def in_degrees(self) -> np.ndarray:
        return np.bincount(self.dst, minlength=self.n)

    @property
    def is_regular(self) -> bool:
        """Every node has the same in- and out-degree."""
        d = self.out_degrees[0]
        return bool(np.all(self.out_degrees == d) and np.all(self.in_degrees == d))

    @property
    def degree(self) -> int:
        """d: the out-degree of a regular topology, else the largest out-degree."""
        return int(self.out_degrees.max()) if self.num_arcs else 0

    @property
    def self_loops(self) -> int:
        return int(np.count_nonzero(self.src == self.dst))

    # ---- derived graphs ----------------------------------------------------------------
    @cached_property
    def link_matrix(self) -> sp.csr_matrix:
        """N×N sparse matrix: entry (u, w) = total capacity of arcs u→w; self-loops dropped."""
        keep = self.src != self.dst
        m = sp.coo_matrix((self.arc_capacity[keep], (self.src[keep], self.dst[keep])),
                          shape=(self.n, self.n)).tocsr()
        m.sum_duplicates()
        return m

    def transpose(self) -> "Topology":
        """G^T: every arc reversed (reduce-scatter runs on it, Appendix B)."""
        return Topology(self.n, self.dst, self.src, expr=f"T({self.expr})",
                        capacity=self.capacity, bidirectional=self.bidirectional,
                        vertex_transitive=self.vertex_transitive,
                        reverse_isomorphism=self.reverse_isomorphism,
                        switches=self.switches, capacity_unit=self.capacity_unit,
                        labels=self.labels, node_cap=self.node_cap)

    def renamed(self, expr: str) -> "Topology":
        """The same arcs under another expression."""
        return Topology(self.n, self.src, self.dst, expr=expr, capacity=self.capacity,
                        bidirectional=self.bidirectional,
                        vertex_transitive=self.vertex_transitive,
                        reverse_isomorphism=self.reverse_isomorphism,
                        switches=self.switches, capacity_unit=self.capacity_unit,
                        labels=self.labels, node_cap=self.node_cap)

    # ---- distances -----------------------------------------------------------------------
    @cached_property
    def distances(self) -> np.ndarray:
        """dist[u, v] = hops on a shortest path u→v (int32); -1 where v is unreachable. Dense
        N×N: for small topologies (the histogram and diameter below stream instead)."""
        d = shortest_path(self.link_matrix, method="D", unweighted=True, directed=True)
        out = np.full(d.shape, -1, dtype=np.int32)
        finite = np.isfinite(d)
        out[finite] = d[finite].astype(np.int32)
        return out

    @cached_property
    def strongly_connected(self) -> bool:
        """Every node reaches every other (one strongly connected component; O(N + arcs))."""
        count, _ = connected_components(self.link_matrix, directed=True, connection="strong")
        return count == 1

    @cached_property
    def distance_histogram(self) -> np.ndarray:
        """hist[t] = number of ordered pairs (u, v) at hop distance t (hist[0] = N), by a
        streaming bit-parallel BFS (topofinder.model.reach; O(N·block) memory). TopofinderError
        if not strongly connected."""
        self._require_connected("no finite diameter")
        hist = distance_histogram(self.n, self.link_matrix, bool(self.vertex_transitive))
        hist.setflags(write=False)
        return hist

    @property
    def diameter(self) -> int:
        """Largest shortest-path distance; TopofinderError if not strongly connected."""
        return int(self.distance_histogram.size - 1)

    @property
    def distance_sum(self) -> int:
        """Σ_{u≠v} dist(u, v) in hops (the hop-count all-to-all bound's denominator)."""
        hist = self.distance_histogram
        return int(np.arange(hist.size) @ hist)

    def _require_connected(self, what: str) -> None:
        if not self.strongly_connected:
            raise TopofinderError(f"{self.expr} is not strongly connected "
                                  f"({self.unreachable_text()}): {what}")

    # ---- symmetry ------------------------------------------------------------------------
    def arc_multiset(self) -> np.ndarray:
        """Arcs with capacity as sorted rows (u, w, capacity): a canonical arc listing."""
        rows = np.stack([self.src, self.dst, self.arc_capacity], axis=1)
        return rows[np.lexsort(rows.T[::-1])]

    def same_arcs(self, other: "Topology") -> bool:
        """Identical node count and arc multiset (same labelling)."""
        if other is self:
            return True
        return self.n == other.n and np.array_equal(self.arc_multiset(), other.arc_multiset())

    def _arcs_equal_reverse(self) -> bool:
        rows = np.stack([self.src, self.dst, self.arc_capacity], axis=1)
        rev = np.stack([self.dst, self.src, self.arc_capacity], axis=1)
        return bool(np.array_equal(rows[np.lexsort(rows.T[::-1])], rev[np.lexsort(rev.T[::-1])]))

    def is_reverse_symmetric(self, max_nodes_general: int = 256) -> bool:
        """G^T ≅ G (Appendix B). Uses a known isomorphism when present, a bidirectional
        topology is trivially reverse-symmetric, otherwise a general isomorphism test for
        graphs up to ``max_nodes_general`` nodes (TopofinderError beyond)."""
        if self.bidirectional:
            return True
        if self.reverse_isomorphism is not None:
            p = self.reverse_isomorphism
            mapped = Topology(self.n, p[self.dst], p[self.src], capacity=self.capacity,
                              bidirectional=False)
            return mapped.same_arcs(self)
        if self.n > max_nodes_general:
            raise TopofinderError(
                f"{self.expr}: no known reverse isomorphism and N > {max_nodes_general}")
        if sorted(self.out_degrees) != sorted(self.in_degrees):
            return False
        return reverse_isomorphic(self.n, self.src, self.dst, self.arc_capacity)

    # ---- networkx ------------------------------------------------------------------------
    def to_networkx(self) -> nx.MultiDiGraph:
        """MultiDiGraph with nodes 0..N-1, one edge per arc, attribute ``capacity``; switch
        nodes carry ``switch=True``; a node bandwidth cap is the graph attribute
        ``node_bandwidth`` ("p/q" or "p", capacity units)."""
        import networkx as nx
        g = nx.MultiDiGraph(name=self.expr)
        g.add_nodes_from(range(self.n))
        if self.switches is not None:
            for v in self.switches.tolist():
                g.nodes[v]["switch"] = True
        if self.capacity_unit is not None:
            g.graph["capacity_unit"] = self.capacity_unit
        if self.node_cap is not None:
            g.graph["node_bandwidth"] = str(self.node_cap)
        g.add_edges_from((int(u), int(w), {"capacity": int(c)})
                         for u, w, c in zip(self.src, self.dst, self.arc_capacity))
        return g

    @classmethod
    def from_networkx(cls, g: nx.Graph, expr: str | None = None) -> "Topology":
        """From any networkx graph; undirected edges become arc pairs; nodes are renumbered
        0..N-1 in sorted order (insertion order if unsortable) and keep their names as
        ``labels``; ``capacity`` attribute used when present."""
        nodes = list(g.nodes)
        try:
            nodes = sorted(nodes)
        except TypeError:
            pass
        index = {v: i for i, v in enumerate(nodes)}
        switches = [index[v] for v, data in g.nodes(data=True) if data.get("switch")]
        src, dst, cap = [], [], []
        for u, w, data in g.edges(data=True):
            c = int(data.get("capacity", 1))
            src.append(index[u]); dst.append(index[w]); cap.append(c)
            if not g.is_directed():
                src.append(index[w]); dst.append(index[u]); cap.append(c)
        names = [str(v) for v in nodes]
        return cls(len(nodes), src, dst, expr=expr or g.graph.get("name") or "G", capacity=cap,
                   switches=switches or None, capacity_unit=g.graph.get("capacity_unit"),
                   labels=names if len(set(names)) == len(names) else None)

