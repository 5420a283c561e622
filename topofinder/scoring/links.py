"""The link model every scorer shares: a topology's parallel arcs u→w merged into one link of
summed capacity (units of the link bandwidth b; a k-fold multi-arc is one link of capacity k),
self-loops dropped (they carry no traffic), links numbered in row-major (tail, head) order —
the CSR order of ``Topology.link_matrix``.

Allgather (001 §3.2: loads per unit capacity), ForestColl's cuts (002: C⁺(S) sums link
capacities) and the all-to-all LP (3) (one capacity row per link) all read this model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology


@dataclass(frozen=True, eq=False)
class Links:
    """Merged links of an N-node topology: link e = (tail[e], head[e]) with capacity cap[e]
    (int64, units of b), sorted by (tail, head); ``indptr`` the CSR row pointers (links of
    node u are indptr[u]..indptr[u+1]−1)."""

    n: int
    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray
    indptr: np.ndarray

    @classmethod
    def of(cls, topo: Topology) -> "Links":
        """The merged links of ``topo`` (any connectivity)."""
        m = topo.link_matrix.copy()
        m.sort_indices()
        tail = np.repeat(np.arange(topo.n, dtype=np.int64), np.diff(m.indptr))
        return cls(topo.n, tail, m.indices.astype(np.int64), m.data.astype(np.int64),
                   m.indptr.astype(np.int64))

    @property
    def num(self) -> int:
        """Number of links L."""
        return int(self.tail.size)

    @property
    def keys(self) -> np.ndarray:
        """tail·N + head per link: increasing, so a (u, w) pair is found by binary search."""
        return self.tail * self.n + self.head

    def matrix(self, lengths: np.ndarray) -> sp.csr_matrix:
        """N×N CSR matrix with link e carrying ``lengths[e]`` (> 0), for scipy.csgraph."""
        return sp.csr_matrix((lengths, self.head, self.indptr), shape=(self.n, self.n))

    def index(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Link index of each pair (u[i], w[i]); every pair must be a link."""
        return np.searchsorted(self.keys, np.asarray(u, np.int64) * self.n + w)

    def image(self, perm: np.ndarray) -> np.ndarray:
        """The link permutation a node automorphism ``perm`` induces: e ↦ index of
        (perm[tail[e]], perm[head[e]])."""
        return self.index(perm[self.tail], perm[self.head])

    def preserved_by(self, perm, cap: np.ndarray | None = None) -> bool:
        """Whether the node permutation ``perm`` maps every link onto a link of equal ``cap``
        (default the capacities; a per-link array such as ForestColl's tree slots otherwise):
        an automorphism of the weighted digraph."""
        perm = np.asarray(perm)
        if perm.shape != (self.n,) or not np.array_equal(np.sort(perm), np.arange(self.n)):
            return False
        cap = self.cap if cap is None else np.asarray(cap)
        keys = self.keys
        img = np.asarray(perm[self.tail], np.int64) * self.n + perm[self.head]
        idx = np.minimum(np.searchsorted(keys, img), max(keys.size - 1, 0))
        return bool(np.array_equal(keys[idx], img) and np.array_equal(cap[idx], cap))


def connected_links(topo: Topology, consequence: str) -> Links:
    """:meth:`Links.of` a strongly connected topology; else TopofinderError naming the
    unreachable pairs and ``consequence`` (what cannot be scored without them)."""
    if not topo.strongly_connected:
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): {consequence}")
    return Links.of(topo)
