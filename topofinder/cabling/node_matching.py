"""Which old node plays which new node when a cabling is changed (exact isomorphism, then QAP).

Recabling a fabric from topology A (cabled) to topology B keeps every fibre that B, with its
nodes renamed by a bijection φ (``physical[x]`` = the old node that plays new node x), shares
with A. Maximising the kept fibres Σ_{x,y} min(B[x,y], A[φx,φy]) (A, B arc-count matrices,
self-loops and multi-arcs counted) is a quadratic assignment problem (QAP; NP-hard), so:

1. When A and B have the same node count, test isomorphism exactly: nauty canonical labelling
   (pynauty, the ``cabling`` extra) on the arc graph with self-loop counts as vertex colours and
   every k-fold multi-arc (k ≥ 2) replaced by a gadget vertex of colour k; without pynauty,
   networkx VF2++ on the multidigraphs (graphs up to :data:`VF2_LIMIT` nodes). An isomorphism
   keeps every fibre: 0 moves.
2. Otherwise search: the identity and the caller's seeds (the old heuristic), each improved by
   2-opt local search (pairwise swaps of φ: scipy's full 2-opt on small graphs, then a sparse
   2-opt that only tries swaps that can realise a missing arc, with an exact gain per swap);
   then scipy's Fast Approximate QAP (FAQ; Vogelstein et al. 2015) started from the best of
   these local optima (and, up to N = 512, from the barycentre), again followed by 2-opt.

The result never keeps fewer fibres than any seed it was given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from topofinder.model.topology import Topology

if TYPE_CHECKING:           # networkx (VF2++) loads only when nauty is missing
    import networkx as nx

VF2_LIMIT = 128          # VF2++ can take hours on large vertex-transitive digraphs
FAQ_LIMIT = 2048         # dense N×N FAQ iterations beyond this are too slow
SCIPY_2OPT_LIMIT = 48    # scipy's 2-opt evaluates every swap densely: O(N^4) per pass


@dataclass(frozen=True)
class Relabelling:
    """``physical[x]``: the old node for new node x (a permutation when N's agree).
    ``kept``: arcs (fibres, with multiplicity) shared under it; ``isomorphic``: True when an
    exact isomorphism was found, False when proven non-isomorphic, None when not decided;
    ``method``: which start won (``isomorphism``, ``identity``, ``seed``, ``faq``, ...)."""

    physical: np.ndarray
    kept: int
    isomorphic: bool | None
    method: str


def _counts(n: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    m = sp.csr_matrix((np.ones(src.size, np.int64), (src, dst)), shape=(n, n))
    m.sum_duplicates()
    return m


def kept_arcs(old: sp.csr_matrix, new: sp.csr_matrix, physical: np.ndarray) -> int:
    """Σ_{x,y} min(new[x,y], old[φx,φy]): the arcs, with multiplicity, that stay cabled."""
    coo = new.tocoo()
    have = np.asarray(old[physical[coo.row], physical[coo.col]]).ravel()
    return int(np.minimum(coo.data, have).sum())


# ---- exact isomorphism -------------------------------------------------------------------------
def _nauty_graph(n: int, src: np.ndarray, dst: np.ndarray):
    """pynauty graph: self-loop counts as colours, k-fold multi-arcs (k ≥ 2) as gadget vertices
    u → g → w coloured by k. Returns (graph, colour-class signature)."""
    import pynauty      # optional dependency (the 'cabling' extra)

    loops = np.bincount(src[src == dst], minlength=n)
    keep = src != dst
    pairs, mult = np.unique(np.stack([src[keep], dst[keep]], 1), axis=0, return_counts=True)
    adj: dict[int, list[int]] = {i: [] for i in range(n)}
    gadgets: dict[int, list[int]] = {}
    nxt = n
    for (u, w), k in zip(pairs.tolist(), mult.tolist()):
        if k == 1:
            adj[u].append(w)
        else:
            adj[u].append(nxt)
            adj[nxt] = [w]
            gadgets.setdefault(k, []).append(nxt)
            nxt += 1
    classes = [(("node", int(c)), set(np.flatnonzero(loops == c).tolist()))
               for c in sorted(set(loops.tolist()))]
    classes += [(("arc", k), set(v)) for k, v in sorted(gadgets.items())]
    graph = pynauty.Graph(nxt, directed=True, adjacency_dict=adj,
                          vertex_coloring=[c for _, c in classes])
    return graph, [(key, len(c)) for key, c in classes]


def _nauty_isomorphism(n, a_src, a_dst, b_src, b_dst):
    """φ with B's arcs mapped by φ = A's arcs (physical[x] for new x), or None."""
    import pynauty

    ga, sig_a = _nauty_graph(n, a_src, a_dst)
    gb, sig_b = _nauty_graph(n, b_src, b_dst)
    if sig_a != sig_b or pynauty.certificate(ga) != pynauty.certificate(gb):
        return None
    la, lb = pynauty.canon_label(ga), pynauty.canon_label(gb)
    phys = np.empty(n, np.int64)
    for va, vb in zip(la, lb):
        if vb < n:
            phys[vb] = va
    return phys


def _multidigraph(n, src, dst) -> nx.MultiDiGraph:
    import networkx as nx
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    return g


def find_isomorphism(old: Topology, new: Topology) -> tuple[np.ndarray | None, bool]:
    """(φ, decided): an arc-preserving bijection new → old (capacities ignored: cabling is
    per arc) or None; ``decided`` is False when neither nauty nor VF2++ could be run."""
    if old.n != new.n or old.num_arcs != new.num_arcs:
        return None, True
    if (np.sort(old.out_degrees) != np.sort(new.out_degrees)).any() or \
            (np.sort(old.in_degrees) != np.sort(new.in_degrees)).any():
        return None, True
    try:
        phys = _nauty_isomorphism(old.n, old.src, old.dst, new.src, new.dst)
    except ImportError:
        if old.n > VF2_LIMIT:
            return None, False
        import networkx as nx
        m = nx.vf2pp_isomorphism(_multidigraph(new.n, new.src, new.dst),
                                 _multidigraph(old.n, old.src, old.dst))
        phys = None if m is None else np.array([m[x] for x in range(new.n)], np.int64)
    if phys is not None:       # certify: the mapped arc multiset is the old one
        a = _counts(old.n, old.src, old.dst)
        if kept_arcs(a, _counts(new.n, new.src, new.dst), phys) != new.num_arcs:
            raise AssertionError("isomorphism does not preserve the arcs")
    return phys, True


# ---- QAP search --------------------------------------------------------------------------------
def _faq(a: np.ndarray, b: np.ndarray, start: np.ndarray | None, maxiter: int) -> np.ndarray:
    """scipy FAQ maximising trace(A P B Pᵀ); returns φ (new → old)."""
    from scipy.optimize import quadratic_assignment     # heavy import, diffs only

    n = a.shape[0]
    p0 = "barycenter"
    if start is not None:
        p0 = np.zeros((n, n))
        p0[start, np.arange(n)] = 1.0
    res = quadratic_assignment(a, b, method="faq", options={
        "maximize": True, "P0": p0, "maxiter": maxiter, "tol": 0.01, "shuffle_input": False,
        "rng": np.random.default_rng(0)})
    phys = np.empty(n, np.int64)
    phys[res.col_ind] = np.arange(n)           # old i ↔ new col_ind[i]
    return phys


def _scipy_2opt(a: np.ndarray, b: np.ndarray, start: np.ndarray, seed: int) -> np.ndarray:
    from scipy.optimize import quadratic_assignment

    n = a.shape[0]
    perm = np.empty(n, np.int64)
    perm[start] = np.arange(n)                 # old i ↔ new perm[i]
    res = quadratic_assignment(a, b, method="2opt", options={
        "maximize": True, "partial_guess": np.column_stack([np.arange(n), perm]),
        "rng": np.random.default_rng(seed)})
    phys = np.empty(n, np.int64)
    phys[res.col_ind] = np.arange(n)
    return phys


class _Sparse2Opt:
    """2-opt on φ keeping Σ min(B[x,y], A[φx,φy]); swaps are tried only where they can
    realise a new arc that is missing, and each gain is evaluated exactly on the O(d) arcs at
    the two swapped nodes (cached per node between swaps)."""

    def __init__(self, a: sp.csr_matrix, b: sp.csr_matrix):
        n = self.n = a.shape[0]
        coo = a.tocoo()
        self.a = dict(zip((coo.row.astype(np.int64) * n + coo.col).tolist(), coo.data.tolist()))
        self.a_in = [[] for _ in range(n)]
        self.a_out = [[] for _ in range(n)]
        for u, w in zip(coo.row.tolist(), coo.col.tolist()):
            self.a_out[u].append(w)
            self.a_in[w].append(u)
        bcoo = b.tocoo()
        self.bp = [[] for _ in range(n)]            # (s, t, k): new arcs s→t (k-fold) at x
        for x, y, k in zip(bcoo.row.tolist(), bcoo.col.tolist(), bcoo.data.tolist()):
            self.bp[x].append((x, y, k))
            if y != x:
                self.bp[y].append((x, y, k))
        self.nbrs = [sorted({v for s, t, _ in self.bp[x] for v in (s, t)}) for x in range(n)]

    def _pair_gain(self, phys, x, y) -> tuple[int, int]:
        """(kept on arcs at x or y, kept on arcs between x and y)."""
        a, n = self.a, self.n
        total = shared = 0
        for z in (x, y):
            for s, t, k in self.bp[z]:
                h = a.get(phys[s] * n + phys[t], 0)
                h = k if h >= k else h
                total += h
                if z == x and (s == y or t == y):
                    shared += h
        return total - shared, shared

    def run(self, phys: np.ndarray, max_passes: int = 50) -> np.ndarray:
        phys = phys.tolist()
        inv = [0] * len(phys)
        for x, u in enumerate(phys):
            inv[u] = x
        a, n = self.a, self.n
        for _ in range(max_passes):
            improved = False
            for x in range(n):
                for (s, t, k) in self.bp[x]:
                    if a.get(phys[s] * n + phys[t], 0) >= k or s == t:
                        continue
                    # x should map to an old node adjacent to its partner's image
                    cands = self.a_in[phys[t]] if s == x else self.a_out[phys[s]]
                    for u in cands:
                        y = inv[u]
                        if y == x:
                            continue
                        before, _ = self._pair_gain(phys, x, y)
                        phys[x], phys[y] = phys[y], phys[x]
                        after, _ = self._pair_gain(phys, x, y)
                        if after > before:
                            inv[phys[x]], inv[phys[y]] = x, y
                            improved = True
                            break
                        phys[x], phys[y] = phys[y], phys[x]
            if not improved:
                break
        return np.array(phys, np.int64)


def best_relabelling(old: Topology, new: Topology, seeds: tuple[np.ndarray, ...] = (),
                     exact: bool = True, rng_seed: int = 0) -> Relabelling:
    """The relabelling (module doc): an exact isomorphism when one exists (``exact``), else
    the best QAP local optimum from the identity, ``seeds`` and FAQ starts. ``old.n`` ≥
    ``new.n``; extra old nodes play isolated padding nodes."""
    n = old.n
    isomorphic: bool | None = None
    if exact:
        phys, decided = find_isomorphism(old, new)
        if phys is not None:
            return Relabelling(phys, new.num_arcs, True, "isomorphism")
        isomorphic = False if decided else None
    a = _counts(n, old.src, old.dst)
    b = _counts(n, new.src, new.dst)            # new padded with isolated nodes to old.n
    search = _Sparse2Opt(a, b)
    dense = None

    def descend(start: np.ndarray) -> np.ndarray:
        nonlocal dense
        cand = start
        if n <= SCIPY_2OPT_LIMIT:
            dense = dense or (a.toarray().astype(float), b.toarray().astype(float))
            full = _scipy_2opt(*dense, start, rng_seed)
            if kept_arcs(a, b, full) >= kept_arcs(a, b, start):
                cand = full
        cand = search.run(cand)
        return cand if kept_arcs(a, b, cand) >= kept_arcs(a, b, start) else start

    starts: list[tuple[str, np.ndarray]] = [("identity", np.arange(n))]
    for s in seeds:
        s = np.asarray(s, np.int64)
        rest = np.setdiff1d(np.arange(n), s)    # pad a seed for new.n < old.n
        starts.append(("seed", np.concatenate([s, rest])))
    found = [(name + "+2opt", descend(start)) for name, start in starts]
    if n <= FAQ_LIMIT:                          # FAQ from the best local optimum so far
        ad, bd = a.toarray().astype(float), b.toarray().astype(float)
        best_start = max(found, key=lambda st: kept_arcs(a, b, st[1]))[1]
        iters = 30 if n <= 64 else 10
        found.append(("faq-seeded+2opt", descend(_faq(ad, bd, best_start, iters))))
        if n <= 512:            # from the barycentre: a start independent of the seeds
            found.append(("faq+2opt", descend(_faq(ad, bd, None, iters))))
    best_name, best = max(found, key=lambda st: kept_arcs(a, b, st[1]))
    best_kept = kept_arcs(a, b, best)
    return Relabelling(best[:new.n], best_kept, isomorphic, best_name)
