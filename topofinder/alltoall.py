"""All-to-all throughput: the maximum concurrent flow LP (3) of paper 001 (App. A.5; DESIGN §8).

Uniform all-to-all on a topology G with link capacities c_e (units of the link bandwidth b; a
k-fold multi-arc is one arc of capacity k; self-loops carry nothing): route f units from every s
to every t ≠ s at once and maximise f. With link bandwidth b every node then sends to every other
node at rate f·b, so a per-node volume M (M/N to each peer) takes (M/N)/(f·b).

Methods
- :func:`concurrent_flow_exact`: LP (3) with commodities aggregated by source (one flow per
  source s with demand f at every other node; |V|·|E| variables), solved by HiGHS.
- :func:`concurrent_flow_symmetric`: for vertex-transitive G, one source's flow under orbit
  capacity constraints (exact; proof in its docstring).
- :func:`concurrent_flow_colgen`: column generation for any G; returns a primal feasible f and a
  certified upper bound from the dual (weak duality, :func:`dual_bound`).
- :func:`concurrent_flow`: picks one of the above.

Every method reports ``upper_bound`` computed by :func:`dual_bound` from its own dual lengths, so
the gap ``upper_bound − f`` is proved, not estimated.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.optimize import OptimizeWarning, linprog
from scipy.sparse.csgraph import dijkstra

from topofinder.errors import TopofinderError
from topofinder.topology import Topology

#: Below this many LP (3) variables (N·|E|) :func:`concurrent_flow` solves the exact LP.
EXACT_MAX_VARIABLES = 400_000
#: Relative gap below which a solver's answer counts as the LP optimum.
EXACT_RTOL = 1e-6


@dataclass(frozen=True)
class AllToAllResult:
    """Concurrent all-to-all flow f per (s, t) pair, link capacity 1 (units of b).

    ``f``: a flow value achieved by a feasible routing (a lower bound on the optimum f*).
    ``upper_bound``: a proved upper bound on f* (weak LP duality). ``exact``: the method solves
    LP (3) to optimality (``f`` equals f* up to solver tolerance). ``method``: which method.
    ``exact_value``: f* as a rational number when a closed form is known (arc-transitive
    topologies). ``gap``: (upper_bound − f)/upper_bound.
    """

    f: float
    upper_bound: float
    exact: bool
    method: str
    exact_value: Fraction | None = None

    @property
    def gap(self) -> float:
        return max(0.0, (self.upper_bound - self.f) / self.upper_bound)


# ---- arcs and the dual bound -------------------------------------------------------------

@dataclass(frozen=True)
class _Arcs:
    """Collapsed arcs of a topology: arc e = (tail[e], head[e]) with capacity cap[e] (multi-arcs
    summed, self-loops dropped), in CSR order of ``topo.link_matrix``."""

    n: int
    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray
    indptr: np.ndarray

    @classmethod
    def of(cls, topo: Topology) -> "_Arcs":
        m = topo.link_matrix.copy()
        m.sort_indices()
        tail = np.repeat(np.arange(topo.n), np.diff(m.indptr))
        return cls(topo.n, tail, m.indices.astype(np.int64), m.data.astype(np.float64),
                   m.indptr.astype(np.int64))

    @property
    def num(self) -> int:
        return int(self.tail.size)

    def matrix(self, lengths: np.ndarray) -> sp.csr_matrix:
        """N×N CSR matrix with arc e carrying ``lengths[e]`` (> 0) for csgraph."""
        return sp.csr_matrix((lengths, self.head, self.indptr), shape=(self.n, self.n))

    def index(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Arc index of each (u, v) pair (all must be arcs)."""
        keys = self.tail * self.n + self.head          # sorted: CSR with sorted indices
        return np.searchsorted(keys, u.astype(np.int64) * self.n + v)


def _check(topo: Topology) -> _Arcs:
    arcs = _Arcs.of(topo)
    if not topo.strongly_connected:
        raise TopofinderError(f"{topo.expr} is not strongly connected: some node pair has no "
                              "path, so the all-to-all throughput is 0; give a strongly "
                              "connected topology")
    return arcs


def dual_bound(topo: Topology, lengths) -> float:
    """Weak-duality bound f* ≤ Σ_e c_e·l_e / Σ_{s≠t} dist_l(s, t) for positive arc lengths l.

    ``lengths``: one positive number per collapsed arc (CSR order of ``topo.link_matrix``).
    Proof: a feasible routing sends f along paths from s to t of l-length ≥ dist_l(s, t), so
    f·Σ dist_l ≤ Σ_e l_e·load_e ≤ Σ_e l_e·c_e (the dual of LP (3)).
    """
    return _dual_bound(_check(topo), np.asarray(lengths, dtype=np.float64))


def _dual_bound(arcs: _Arcs, lengths: np.ndarray) -> float:
    if lengths.shape != (arcs.num,) or not np.all(lengths > 0):
        raise TopofinderError("dual lengths must be positive, one per arc")
    dist = dijkstra(arcs.matrix(lengths), directed=True)
    return float(arcs.cap @ lengths / dist.sum())


def _positive(lengths: np.ndarray) -> np.ndarray:
    """Dual lengths from a solver, made strictly positive (any positive l gives a valid bound)."""
    lengths = np.maximum(np.asarray(lengths, dtype=np.float64), 0.0)
    floor = 1e-9 * max(float(lengths.max()), 1e-300)
    return np.maximum(lengths, floor)


# ---- the exact LP (3) --------------------------------------------------------------------

def concurrent_flow_exact(topo: Topology) -> AllToAllResult:
    """LP (3) of paper 001, commodities aggregated by source, solved by HiGHS.

    Variables y[s, e] ≥ 0 (flow of source s on arc e) and f. Constraints: Σ_s y[s, e] ≤ c_e for
    every arc; f + out_s(u) ≤ in_s(u) for every s ≠ u. f is carried as one copy f_s per source
    tied by f_s = f_{s+1} (a single f column would make the interior-point normal equations
    dense). ``f`` is re-verified from the solver's y (demand met / worst arc utilisation) and
    the upper bound is :func:`dual_bound` at the capacity duals; ``exact`` when they agree to
    EXACT_RTOL. About N·|E| variables: practical to N ≈ 128 at d = 4.
    """
    arcs = _check(topo)
    n, m = arcs.n, arcs.num
    nv = n * m + n                     # y[s, e] at s·m + e, then f_s at n·m + s (all equal f)
    s = np.repeat(np.arange(n), m)
    e = np.tile(np.arange(m), n)
    var = s * m + e
    # conservation rows (s, u), u ≠ s, numbered s·N + u then compressed
    keep_rows = np.ones(n * n, bool)
    keep_rows[np.arange(n) * (n + 1)] = False
    row_id = np.cumsum(keep_rows) - 1
    nrc = n * (n - 1)
    rows, cols, vals = [], [], []
    for r, sign in ((s * n + arcs.tail[e], 1.0), (s * n + arcs.head[e], -1.0)):
        ok = keep_rows[r]
        rows.append(row_id[r[ok]]); cols.append(var[ok]); vals.append(np.full(ok.sum(), sign))
    src = np.repeat(np.arange(n), n - 1)   # one f_s per source keeps the constraint matrix
    rows.append(np.arange(nrc)); cols.append(n * m + src); vals.append(np.ones(nrc))  # sparse
    rows.append(nrc + e); cols.append(var); vals.append(np.ones(n * m))   # capacity rows
    a_ub = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(nrc + m, nv))
    b_ub = np.concatenate([np.zeros(nrc), arcs.cap])
    chain = np.arange(n - 1)
    a_eq = sp.csr_matrix((np.concatenate([np.ones(n - 1), -np.ones(n - 1)]),
                          (np.concatenate([chain, chain]), n * m + np.concatenate([chain, chain + 1]))),
                         shape=(n - 1, nv))
    c = np.zeros(nv)
    c[n * m:] = -1.0 / n
    res = _highs_ipm(c, a_ub, b_ub, a_eq)
    if res.x is None:
        raise TopofinderError(f"{topo.expr}: the all-to-all LP failed ({res.message})")
    y = res.x[:n * m].reshape(n, m)
    f = _verified_f(arcs, y)
    ub = _dual_bound(arcs, _positive(-res.ineqlin.marginals[nrc:]))
    return AllToAllResult(f, max(ub, f), (ub - f) <= EXACT_RTOL * ub, "exact-lp")


def _highs_ipm(c, a_ub, b_ub, a_eq):
    """HiGHS interior point without crossover (crossover dominates the run time on LP (3) and
    is not needed: f is re-verified from the primal and bounded through the dual)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        return linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.zeros(a_eq.shape[0]),
                       bounds=(0, None), method="highs-ipm",
                       options={"run_crossover": "off"})


def _verified_f(arcs: _Arcs, y: np.ndarray) -> float:
    """f achieved by per-source flows y (N×|E|): least net inflow at any s ≠ u, scaled down by
    the worst arc utilisation if it exceeds 1."""
    n = arcs.n
    net = np.zeros((n, n))
    np.add.at(net.T, arcs.head, y.T)
    np.subtract.at(net.T, arcs.tail, y.T)
    np.fill_diagonal(net, np.inf)
    util = float((y.sum(axis=0) / arcs.cap).max())
    return float(net.min()) / max(util, 1.0)


# ---- symmetry reduction (vertex-transitive topologies) -------------------------------------

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _refine(colour: np.ndarray, tail: np.ndarray, head: np.ndarray, cap: np.ndarray,
            rng_table: np.ndarray) -> np.ndarray:
    """Colour refinement (1-WL) on a digraph with arc capacities until stable: a vertex's new
    colour encodes its colour and the multisets of (capacity, colour) over its out- and
    in-arcs (hashed with random 64-bit keys). Automorphisms preserve the final colouring."""
    _, colour = np.unique(colour, return_inverse=True)
    count = colour.max() + 1
    n = colour.size
    with np.errstate(over="ignore"):
        capkey = cap.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
        while True:
            out = np.zeros(n, np.uint64)
            inn = np.zeros(n, np.uint64)
            np.add.at(out, tail, rng_table[0][colour[head]] * capkey)
            np.add.at(inn, head, rng_table[1][colour[tail]] * capkey)
            sig = np.stack([colour.astype(np.uint64), out, inn], axis=1)
            _, new = np.unique(sig, axis=0, return_inverse=True)
            new = new.reshape(-1)
            if new.max() + 1 == count:
                return colour
            colour, count = new, new.max() + 1


def _automorphism(arcs: _Arcs, src: int, dst: int, rng_table, budget: list[int]):
    """An automorphism of the topology mapping ``src`` to ``dst`` (individualisation-refinement
    on two copies of the graph with backtracking), or None if none is found within budget."""
    n = arcs.n
    tail = np.concatenate([arcs.tail, arcs.tail + n])
    head = np.concatenate([arcs.head, arcs.head + n])
    cap = np.concatenate([arcs.cap, arcs.cap]).astype(np.int64)
    keys = np.sort(arcs.tail * n + arcs.head)
    capsorted = arcs.cap[np.argsort(arcs.tail * n + arcs.head)]

    def search(colour):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        colour = _refine(colour, tail, head, cap, rng_table)
        a, b = colour[:n], colour[n:]
        ca, cb = np.bincount(a, minlength=colour.max() + 1), np.bincount(b, minlength=colour.max() + 1)
        if not np.array_equal(ca, cb):
            return None
        if ca.max() == 1:
            perm = np.empty(n, np.int64)
            perm[np.argsort(a)] = np.argsort(b)
            k = perm[arcs.tail] * n + perm[arcs.head]
            order = np.argsort(k)
            ok = np.array_equal(k[order], keys) and np.array_equal(arcs.cap[order], capsorted)
            return perm if ok else None
        cell = int(np.flatnonzero(ca > 1)[np.argmin(ca[ca > 1])])
        v = int(np.flatnonzero(a == cell)[0])
        for w in np.flatnonzero(b == cell):
            c = colour.copy()
            c[v] = c[n + w] = colour.max() + 1
            found = search(c)
            if found is not None:
                return found
        return None

    colour = np.zeros(2 * n, np.int64)
    colour[src] = colour[n + dst] = 1
    return search(colour)


def _transitive_generators(arcs: _Arcs, budget: int = 200):
    """Automorphisms generating a vertex-transitive group, or None if the search gives up."""
    n = arcs.n
    rng = np.random.default_rng(12345)
    table = rng.integers(1, 2**63, size=(2, 2 * n + 2), dtype=np.uint64) | np.uint64(1)
    gens: list[np.ndarray] = []
    orbit = np.zeros(n, bool)
    orbit[0] = True
    left = [budget]
    while not orbit.all():
        g = _automorphism(arcs, 0, int(np.flatnonzero(~orbit)[0]), table, left)
        if g is None:
            return None
        gens.append(g)
        frontier = np.flatnonzero(orbit)
        while frontier.size:                          # orbit of node 0 under <gens>
            new = np.unique(np.concatenate([h[frontier] for h in gens]))
            new = new[~orbit[new]]
            orbit[new] = True
            frontier = new
    return gens


def concurrent_flow_symmetric(topo: Topology, generators=None) -> AllToAllResult:
    """LP (3) for a vertex-transitive topology through one source's flow (exact).

    Let H be a group of automorphisms acting transitively on V (generated by ``generators``, or
    found by individualisation-refinement search). Theorem: f* equals the optimum of
        max f  s.t.  z is a flow from node 0 delivering f to every other node,
                     Σ_{e∈O} z_e ≤ c_O·|O|/N for every H-orbit O of arcs.
    Proof. (≤) Averaging an optimal y of LP (3) over H, ȳ_{s,e} = (1/|H|) Σ_h y_{h s, h e}, keeps
    feasibility (h preserves arcs, capacities and conservation) and f, and makes y invariant.
    Then the load of arc e is Σ_s ȳ_{s,e} = (1/|H_0|) Σ_{h∈H} ȳ_{0, h⁻¹e} = (N/|O_e|) Σ_{e'∈O_e}
    ȳ_{0,e'} (orbit–stabiliser, |H| = N·|H_0|), so z = ȳ_0 meets the orbit constraints.
    (≥) Given z, y_{s,e} = (1/|H_0|) Σ_{h: h0 = s} z_{h⁻¹e} is a flow from each s delivering f to
    every other node with arc loads (N/|O_e|) Σ_{O_e} z ≤ c_e. □
    The dual orbit prices λ_O, spread as arc lengths, are H-invariant and give
    :func:`dual_bound` = f* (LP duality), which is reported as ``upper_bound``.
    Raises TopofinderError if no transitive group is found (the topology is not
    vertex-transitive or the search budget ran out).
    """
    arcs = _check(topo)
    n, m = arcs.n, arcs.num
    gens = generators if generators is not None else _transitive_generators(arcs)
    if gens is None:
        raise TopofinderError(f"{topo.expr}: no transitive automorphism group found; use "
                              "concurrent_flow_exact or concurrent_flow_pdlp")
    # arc orbits: components of the graph joining each arc e to g(e)
    links = [arcs.index(g[arcs.tail], g[arcs.head]) for g in gens]
    joins = sp.coo_matrix((np.ones(m * len(gens)),
                           (np.tile(np.arange(m), len(gens)), np.concatenate(links))),
                          shape=(m, m))
    k, orbit = sp.csgraph.connected_components(joins, directed=True, connection="weak")
    size = np.bincount(orbit, minlength=k)
    cap_o = np.bincount(orbit, weights=arcs.cap, minlength=k) / size    # constant on orbits
    # variables z_e (m) and f; rows: conservation at u ≠ 0, then orbit capacity
    rows = np.concatenate([arcs.tail, arcs.head, np.arange(1, n), n + orbit])
    cols = np.concatenate([np.arange(m), np.arange(m), np.full(n - 1, m), np.arange(m)])
    vals = np.concatenate([np.ones(m), -np.ones(m), np.ones(n - 1), np.ones(m)])
    keep = rows != 0
    a_ub = sp.csr_matrix((vals[keep], (rows[keep] - 1, cols[keep])), shape=(n - 1 + k, m + 1))
    b_ub = np.concatenate([np.zeros(n - 1), cap_o * size / n])
    c = np.zeros(m + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise TopofinderError(f"{topo.expr}: the symmetric all-to-all LP failed ({res.message})")
    lam = -res.ineqlin.marginals[n - 1:]
    ub = _dual_bound(arcs, _positive(lam[orbit]))
    f = float(res.x[-1])
    exact_value = None
    if k == 1:      # arc-transitive: z = f·(shortest-path tree), f* = Σc / (N·Σ_t dist(0, t))
        exact_value = Fraction(int(round(arcs.cap.sum())),
                               n * int(topo.distances[0].sum()))
        f = ub = float(exact_value)
    return AllToAllResult(f, max(ub, f), True, "symmetric-lp", exact_value=exact_value)
