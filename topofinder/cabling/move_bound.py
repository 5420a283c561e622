"""A lower bound on the fibres a patch-panel diff must unplug, under any node relabelling
(docs/algorithms.md "Moves and their lower bound").

A diff from the old plan A to a topology (:func:`topofinder.cabling.patch_panel.diff_plans`)
keeps a multiset K of old rows, matched by (ends, kind) to the rows of the new plan relabelled
by some bijection φ; it unplugs r = |A| − |K| rows. Per row kind k (simplex, duplex,
loopback) let A_k be the old rows and B_k the new ones; then |K_k| ≤ U_k for the bounds U_k
below, each valid for every φ, and r ≥ Σ_k (|A_k| − U_k):

- sizes: U_k ≤ min(|A_k|, |B_k|);
- degrees: every kept row uses one row end at its nodes in both plans, so with the degree
  sequences sorted, 2|K_k| ≤ Σ_i min(a_(i), b_(i)) for cables (undirected), |K_k| ≤ the same
  sum over out-degrees and over in-degrees for fibres (pairing sorted sequences maximises a
  sum of minima);
- short cycles: for a pattern P (triangles of cables; 2- and 3-cycles of fibres) let c(G) be
  the number of copies of P in G (a copy is a set of row instances) and c_G(e) the number
  through one row e. K ⊆ A gives c(A) − c(K) ≤ Σ_{e ∈ A∖K} c_A(e) ≤ the sum S_A(r) of the r
  largest c_A(e); K ⊆ φ⁻¹B gives c(K) ≤ c(B). So S_A(r) ≥ c(A) − c(B) fixes a least r, and
  symmetrically the added rows a = r − |A_k| + |B_k| obey S_B(a) ≥ c(B) − c(A).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topofinder.model.topology import Topology

SIMPLEX, DUPLEX, LOOPBACK = 0, 1, 2     # the row kinds of patch_panel.KINDS


def new_cabling(old_kinds: np.ndarray, topo: Topology, cabling: str = "auto") -> str:
    """The cabling a diff gives ``topo`` (as diff_plans): ``auto`` follows the old plan,
    duplex when it has duplex cables and the topology is bidirectional."""
    if cabling != "auto":
        return cabling
    if old_kinds.size:
        return "duplex" if topo.bidirectional and np.any(old_kinds == DUPLEX) else "simplex"
    return "duplex" if topo.bidirectional else "simplex"


def _rows_of(topo: Topology, cabling: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The (a, b) ends of the new plan's rows per kind (duplex: a < b, one per arc pair)."""
    s, t = topo.src, topo.dst
    loop = s == t
    rows = {LOOPBACK: (s[loop], t[loop])}
    if cabling == "duplex":
        fwd = s < t
        rows[DUPLEX] = (s[fwd], t[fwd])
        rows[SIMPLEX] = (s[:0], t[:0])
    else:
        rows[SIMPLEX] = (s[~loop], t[~loop])
        rows[DUPLEX] = (s[:0], t[:0])
    return rows


def _sorted_min(x: np.ndarray, y: np.ndarray) -> int:
    x, y = np.sort(x)[::-1], np.sort(y)[::-1]
    m = max(x.size, y.size)
    x = np.pad(x, (0, m - x.size))
    y = np.pad(y, (0, m - y.size))
    return int(np.minimum(x, y).sum())


def _degree_cap(n: int, a: tuple, b: tuple, undirected: bool) -> int:
    if undirected:
        da = np.bincount(np.concatenate(a), minlength=n)
        db = np.bincount(np.concatenate(b), minlength=n)
        return _sorted_min(da, db) // 2
    return min(_sorted_min(np.bincount(a[0], minlength=n), np.bincount(b[0], minlength=n)),
               _sorted_min(np.bincount(a[1], minlength=n), np.bincount(b[1], minlength=n)))


def pattern_counts(n: int, ends: tuple, undirected: bool) -> list[tuple[int, np.ndarray]]:
    """(c(G), c_G(e) per row) for the patterns of the module doc: triangles of a loopless
    multigraph of cables; 2-cycles and 3-cycles of a loopless multidigraph of fibres."""
    a, b = ends
    if a.size == 0:
        return []
    m = sp.csr_matrix((np.ones(a.size, np.int64), (a, b)), shape=(n, n))
    if undirected:
        m = m + m.T
        m2 = m @ m
        per = np.asarray(m2[a, b]).ravel()              # triangles through cable {a, b}
        return [(int(per.sum()) // 3, per)]
    m2 = m @ m
    two = np.asarray(m[b, a]).ravel()                   # arcs b→a closing a 2-cycle
    three = np.asarray(m2[b, a]).ravel()                # paths b→·→a closing a 3-cycle
    return [(int(two.sum()) // 2, two), (int(three.sum()) // 3, three)]


def _least(per: np.ndarray, need: int) -> int:
    """The least r with the r largest values of ``per`` summing to ≥ ``need``."""
    if need <= 0:
        return 0
    top = np.cumsum(np.sort(per)[::-1])
    return int(np.searchsorted(top, need)) + 1 if top.size and top[-1] >= need \
        else per.size + 1


def removals_lower_bound(old_n: int, old_rows: np.ndarray, old_kinds: np.ndarray,
                         topo: Topology, cabling: str = "auto") -> int:
    """A lower bound, valid for every node relabelling, on the rows a diff from the plan
    (``old_rows`` columns 2..5 = src_node, src_port, dst_node, dst_port; ``old_kinds``) to
    ``topo`` unplugs (module doc)."""
    n = max(old_n, topo.n)
    new = _rows_of(topo, new_cabling(old_kinds, topo, cabling))
    total = 0
    for kind in (SIMPLEX, DUPLEX, LOOPBACK):
        pick = old_kinds == kind
        a = (old_rows[pick, 2], old_rows[pick, 4])
        if kind == DUPLEX:
            a = (np.minimum(*a), np.maximum(*a))
        b = new[kind]
        size_a, size_b = a[0].size, b[0].size
        if size_a == 0:
            continue
        cap = min(size_a, size_b)
        if kind == LOOPBACK:
            cap = min(cap, _sorted_min(np.bincount(a[0], minlength=n),
                                       np.bincount(b[0], minlength=n)))
        elif size_b:
            undirected = kind == DUPLEX
            cap = min(cap, _degree_cap(n, a, b, undirected))
            for (ca, per_a), (cb, per_b) in zip(pattern_counts(n, a, undirected),
                                                pattern_counts(n, b, undirected)):
                r = max(_least(per_a, ca - cb), _least(per_b, cb - ca) + size_a - size_b)
                cap = min(cap, size_a - r)
        total += size_a - max(cap, 0)
    return total
