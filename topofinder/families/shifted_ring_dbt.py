"""The baseline topologies users compare against (paper 001 §8.2, Fig. 7, Table 4).

- ``ShiftedRing(d,m)``: the superposition of d/2 bidirectional Hamiltonian rings i ~ i ± s_j
  (mod m), s_1 = 1 and s_2, s_3, ... the smallest integers > 1 coprime with m (TopoOpt's
  shifted rings, paper 001 ref. [84]); each ring allreduces 2/d of the data with the ring
  algorithm (paper 001 §8.2). At m = 1024, d = 4 this is C(1024,{1,3}), whose all-to-all
  concurrent flow 32/N² gives exactly Table 4's 10738 us.
- ``DBT(m)``: NCCL's double binary tree (paper 001 refs. [38, 71]): tree 0 is NCCL's binary
  tree on ranks 0..m−1 (rank r ≠ 0 hangs below (r xor b) | 2b, b the lowest set bit of r, or
  below r xor b when that is ≥ m); tree 1 is tree 0 mirrored (r ↦ m−1−r) for even m, shifted
  (r ↦ r+1 mod m) for odd m, so every inner node of one tree is a leaf of the other. Both
  trees' edges in both directions; an edge in both trees is a 2-fold link. Degree ≤ 4 (the
  two roots have 2), so it competes at d = 4. Its all-to-all flow is 16/N² at N = 64 and 1024
  (Table 4: 21475 us).
"""

from __future__ import annotations

from math import gcd

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology


def ring_shifts(d: int, m: int) -> tuple[int, ...]:
    """The d/2 ring shifts of ShiftedRing(d,m): 1, then the smallest integers s with
    1 < s < m/2 and gcd(s, m) = 1 (each ring i → i+s is then Hamiltonian)."""
    if d < 2 or d % 2:
        raise TopofinderError(f"ShiftedRing(d,m) needs an even degree d >= 2, got {d}")
    if m < 3:
        raise TopofinderError(f"ShiftedRing(d,m) needs m >= 3 nodes, got {m}")
    shifts = [1]
    s = 2
    while len(shifts) < d // 2 and 2 * s < m:
        if gcd(s, m) == 1:
            shifts.append(s)
        s += 1
    if len(shifts) < d // 2:
        raise TopofinderError(f"ShiftedRing({d},{m}): only {len(shifts)} distinct Hamiltonian "
                              f"ring shifts below m/2 exist for m = {m}; use a smaller d")
    return tuple(shifts)


def shifted_ring(d: int, m: int) -> Topology:
    """ShiftedRing(d,m): d/2 bidirectional rings i ~ i ± s (s in :func:`ring_shifts`); degree
    d. Its ring allgather has T_L = m−1 and τ = (m−1)/m (paper 001 §8.2, Fig. 14)."""
    shifts = ring_shifts(d, m)
    x = np.arange(m)
    src = np.tile(x, d)
    dst = np.concatenate([(x + sign * s) % m for s in shifts for sign in (1, -1)])
    return Topology(m, src, dst, expr=f"ShiftedRing({d},{m})", bidirectional=True,
                    vertex_transitive=True)


def binary_tree_parents(m: int) -> np.ndarray:
    """NCCL's binary tree on ranks 0..m−1 (ncclGetBtree): parent[r], −1 at the root 0."""
    parent = np.full(m, -1, dtype=np.int64)
    for r in range(1, m):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parent[r] = up if up < m else r ^ bit
    return parent


def double_tree_parents(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The two trees of DBT(m) as parent arrays (−1 at each root): NCCL's binary tree and
    its mirror (even m) or shift by one (odd m) (ncclGetDtree)."""
    if m < 2:
        raise TopofinderError(f"DBT(m) needs m >= 2 nodes, got {m}")
    p0 = binary_tree_parents(m)
    r = np.arange(m)
    image = (m - 1 - r) if m % 2 == 0 else (r + 1) % m
    p1 = np.full(m, -1, dtype=np.int64)
    child = r[p0 >= 0]
    p1[image[child]] = image[p0[child]]
    return p0, p1


def double_binary_tree(m: int) -> Topology:
    """DBT(m): the union of the two trees of :func:`double_tree_parents`, every tree edge a
    link in both directions (an edge of both trees: capacity 2); degree ≤ 4."""
    src, dst = [], []
    for parent in double_tree_parents(m):
        child = np.nonzero(parent >= 0)[0]
        src += [child, parent[child]]
        dst += [parent[child], child]
    return Topology(m, np.concatenate(src), np.concatenate(dst), expr=f"DBT({m})",
                    bidirectional=True)
