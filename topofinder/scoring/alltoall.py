"""All-to-all throughput: the maximum concurrent flow LP (3) of paper 001 (App. A.5;
docs/algorithms.md).

Uniform all-to-all on a topology G with link capacities c_e (units of the link bandwidth b; a
k-fold multi-arc is one arc of capacity k; self-loops carry nothing): route f units from every s
to every t ≠ s at once and maximise f. With link bandwidth b every node then sends to every other
node at rate f·b, so a per-node volume M (M/N to each peer) takes (M/N)/(f·b).

Methods
- :func:`concurrent_flow_exact`: LP (3) with commodities aggregated by source (one flow per
  source s with demand f at every other node; |V|·|E| variables), solved by HiGHS.
- :func:`concurrent_flow_symmetric`: LP (3) reduced by a group of automorphisms found by
  individualisation–refinement (exact; proof in its docstring). Vertex-transitive G: one
  source's flow.
- :func:`concurrent_flow_pdlp`: first-order LP solver (PDLP) for LPs too large for HiGHS;
  a primal f and a certified upper bound from its duals.
- :func:`concurrent_flow`: picks one of the above.
- :func:`moore_bound`: f ≤ N·d / Σ_{s≠t} dist_Moore(s, t); :func:`alltoall_time`.

Every method reports ``upper_bound`` computed by :func:`dual_bound` from its own dual lengths, so
the gap ``upper_bound − f`` is proved, not estimated.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from topofinder.errors import TopofinderError
from topofinder.scoring.flowbracket import concurrent_flow_bracket as _bracket
from topofinder.scoring.symmetry import automorphism_group, orbits
from topofinder.model.topology import Topology

#: Below this many LP (3) variables (N·|E|) :func:`concurrent_flow` solves the exact LP.
EXACT_MAX_VARIABLES = 400_000
#: Largest LP (variables) whose interior-point solution is crossed over to a vertex.
CROSSOVER_MAX = 20_000
#: Relative gap below which a solver's answer counts as the LP optimum.
EXACT_RTOL = 1e-6


@dataclass(frozen=True)
class AllToAllResult:
    """Concurrent all-to-all flow f per (s, t) pair, link capacity 1 (units of b).

    ``f``: a flow value achieved by a feasible routing (a lower bound on the optimum f*).
    ``upper_bound``: a proved upper bound on f* (weak LP duality). ``exact``: the method solves
    LP (3) to optimality (``f`` equals f* up to solver tolerance). ``method``: which method.
    ``exact_value``: f* as a rational number when a closed form is known (arc-transitive
    topologies). ``sources``: source flows in the LP solved (N unless a symmetry reduction
    applied). ``gap``: (upper_bound − f)/upper_bound.
    """

    f: float
    upper_bound: float
    exact: bool
    method: str
    exact_value: Fraction | None = None
    sources: int = 0

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
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): some node pair has no path, "
                              "so the all-to-all throughput is 0; give a strongly connected "
                              "topology")
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


# ---- automorphisms (symmetry reduction) --------------------------------------------------


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
        ca = np.bincount(a, minlength=colour.max() + 1)
        cb = np.bincount(b, minlength=colour.max() + 1)
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


def find_automorphisms(topo: Topology, budget: int | None = None) -> list[np.ndarray]:
    """Generators of the automorphism group of ``topo`` (node permutations p with (u, w) an
    arc of capacity c iff (p[u], p[w]) is), exact from bliss (topofinder.scoring.symmetry). With a
    ``budget`` instead: the package's own individualisation–refinement search limited to that
    many search nodes (a subgroup; every generator verified)."""
    return _find_automorphisms(_Arcs.of(topo), budget)


def _find_automorphisms(arcs: _Arcs, budget: int | None = None) -> list[np.ndarray]:
    if budget is None:
        return list(automorphism_group(arcs.n, arcs.tail, arcs.head, arcs.cap).generators)
    return _budgeted_automorphisms(arcs, budget)


def _budgeted_automorphisms(arcs: _Arcs, budget: int) -> list[np.ndarray]:
    n = arcs.n
    rng = np.random.default_rng(12345)
    table = rng.integers(1, 2**63, size=(2, 2 * n + 2), dtype=np.uint64) | np.uint64(1)
    cls = _refine(np.zeros(n, np.int64), arcs.tail, arcs.head, arcs.cap.astype(np.int64),
                  table)
    gens: list[np.ndarray] = []
    orbit = np.arange(n)
    left = [budget]
    for c in np.unique(cls):
        members = np.flatnonzero(cls == c)
        refused: set[tuple[int, int]] = set()
        while left[0] > 0:
            labels = np.unique(orbit[members])
            if labels.size == 1:
                break
            rep = members[orbit[members] == labels[0]][0]
            pending = [v for v in members if orbit[v] != orbit[rep]
                       and (int(orbit[rep]), int(orbit[v])) not in refused]
            if not pending:
                break
            v = pending[0]
            g = _automorphism(arcs, int(rep), int(v), table, left)
            if g is None:
                refused.add((int(orbit[rep]), int(orbit[v])))
                continue
            gens.append(g)
            orbit = orbits(n, gens)
    return gens


# ---- LP (3), optionally reduced by a group of automorphisms -------------------------------

@dataclass(frozen=True)
class _Reduction:
    """LP (3) restricted to H-invariant flows for a group H of automorphisms: one flow per
    vertex-orbit representative ``reps[i]`` (orbit size ``weight[i]``) and one capacity row per
    arc orbit (label ``arc_orbit[e]``, size ``orbit_size``). H trivial gives LP (3) itself."""

    reps: np.ndarray
    weight: np.ndarray
    arc_orbit: np.ndarray
    orbit_size: np.ndarray
    orbit_cap: np.ndarray

    @classmethod
    def of(cls, arcs: _Arcs, gens: list[np.ndarray]) -> "_Reduction":
        n, m = arcs.n, arcs.num
        vorb = orbits(n, gens)
        _, reps, weight = np.unique(vorb, return_index=True, return_counts=True)
        arc_gens = [arcs.index(g[arcs.tail], g[arcs.head]) for g in gens]
        aorb = orbits(m, arc_gens)
        size = np.bincount(aorb)
        return cls(reps, weight, aorb, size, np.bincount(aorb, weights=arcs.cap) / size)

    @property
    def num_variables(self) -> int:
        return int(self.reps.size * self.arc_orbit.size)


def _lp(arcs: _Arcs, red: _Reduction, mask: np.ndarray | None = None):
    """LP (3) in ≤/= form over y[i, e] (only where ``mask``, default everywhere) and
    per-representative copies f_i of f tied by f_i = f_{i+1} (a single f column would make the
    interior-point normal equations dense). Rows: f_i + out_i(u) − in_i(u) ≤ 0 for u ≠ reps[i];
    for each arc orbit O, Σ_i weight_i/|O| · Σ_{e∈O} y[i, e] ≤ c_O (the load of every arc of O
    under H-averaging). Returns (c, A_ub, b_ub, A_eq, conservation row count, scatter) where
    ``scatter(x)`` gives the R×|E| flow matrix of a solution x."""
    n, m, r = arcs.n, arcs.num, red.reps.size
    if mask is None:
        mask = np.ones((r, m), bool)
    i, e = np.nonzero(mask)
    ny = i.size
    nv = ny + r
    var = np.arange(ny)
    own = red.reps[i]
    rows, cols, vals = [], [], []
    ncons = r * (n - 1)
    for u, sign in ((arcs.tail[e], 1.0), (arcs.head[e], -1.0)):
        ok = u != own                   # row of (i, u), u ≠ reps[i], the source skipped
        rows.append((i * (n - 1) + u - (u > own))[ok]); cols.append(var[ok])
        vals.append(np.full(ok.sum(), sign))
    rows.append(np.arange(ncons)); cols.append(ny + np.repeat(np.arange(r), n - 1))
    vals.append(np.ones(ncons))
    k = red.orbit_size.size
    rows.append(ncons + red.arc_orbit[e]); cols.append(var)
    vals.append(red.weight[i] / red.orbit_size[red.arc_orbit[e]])
    a_ub = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(ncons + k, nv))
    b_ub = np.concatenate([np.zeros(ncons), red.orbit_cap])
    chain = np.arange(r - 1)
    a_eq = sp.csr_matrix((np.concatenate([np.ones(r - 1), -np.ones(r - 1)]),
                          (np.concatenate([chain, chain]),
                           ny + np.concatenate([chain, chain + 1]))), shape=(r - 1, nv))
    c = np.zeros(nv)
    c[ny:] = -1.0 / r

    def scatter(x):
        y = np.zeros((r, m))
        y[i, e] = np.maximum(x[:ny], 0.0)
        return y

    return c, a_ub, b_ub, a_eq, ncons, scatter


def _certify(arcs: _Arcs, red: _Reduction, y: np.ndarray, cap_duals: np.ndarray):
    """(f, upper bound) from any solver output: f is what the flows y (R×|E|, ≥ 0) deliver
    (least net inflow at a non-source node, scaled down by the worst arc-orbit utilisation);
    the bound is :func:`dual_bound` at arc lengths λ_O/|O| from the orbit capacity duals."""
    n, r = arcs.n, red.reps.size
    net = np.zeros((r, n))
    np.add.at(net.T, arcs.head, y.T)
    np.subtract.at(net.T, arcs.tail, y.T)
    net[np.arange(r), red.reps] = np.inf
    per_orbit = np.zeros((r, red.orbit_size.size))
    np.add.at(per_orbit.T, red.arc_orbit, y.T)
    load = (red.weight @ per_orbit) / red.orbit_size
    util = float((load / red.orbit_cap).max())
    f = float(net.min()) / max(util, 1.0)
    lengths = _positive(np.maximum(cap_duals, 0.0)[red.arc_orbit] / red.orbit_size[red.arc_orbit])
    return f, max(_dual_bound(arcs, lengths), f)


def _solve_highs(arcs: _Arcs, red: _Reduction, expr: str, mask: np.ndarray | None = None):
    """Interior point (HiGHS). Crossover to a vertex (exact duals) only up to CROSSOVER_MAX
    variables: beyond, it dominates the run time and is not needed since f is re-verified and
    bounded by :func:`_certify` (gaps ~1e-7 instead of ~1e-12). With ``mask`` the LP is
    restricted to those flow variables (a lower bound; the dual bound stays valid)."""
    from scipy.optimize import OptimizeWarning, linprog   # heavy; only the LP path needs it

    c, a_ub, b_ub, a_eq, ncons, scatter = _lp(arcs, red, mask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.zeros(a_eq.shape[0]),
                      bounds=(0, None), method="highs-ipm",
                      options={"run_crossover": "on" if c.size <= CROSSOVER_MAX else "off"})
    if res.x is None:
        raise TopofinderError(f"{expr}: the all-to-all LP failed ({res.message})")
    return _certify(arcs, red, scatter(res.x), -res.ineqlin.marginals[ncons:])


def _solve_pdlp(arcs: _Arcs, red: _Reduction, tol: float, time_limit: float, expr: str,
                slack: float = 0.3):
    """First-order primal-dual LP solver (OR-Tools PDLP) to relative tolerance ``tol`` or
    ``time_limit`` seconds. Its duals give the upper bound; its primal only approximately
    conserves flow, so the lower bound comes from LP (3) restricted to the arcs PDLP uses and
    the arcs of reduced cost ≤ ``slack``·(median length) under its dual lengths, which contain
    every shortest-path tree (complementary slackness: an optimal flow uses only arcs of zero
    reduced cost); that LP is small and solved by HiGHS.
    """
    from ortools.pdlp import solvers_pb2
    from ortools.pdlp.python import pdlp

    c, a_ub, b_ub, a_eq, ncons, scatter = _lp(arcs, red)
    a = sp.vstack([a_ub, a_eq]).tocsc()
    qp = pdlp.QuadraticProgram()
    qp.resize_and_initialize(a.shape[1], a.shape[0])
    qp.objective_vector = c
    qp.constraint_matrix = a
    qp.constraint_lower_bounds = np.concatenate([np.full(a_ub.shape[0], -np.inf),
                                                 np.zeros(a_eq.shape[0])])
    qp.constraint_upper_bounds = np.concatenate([b_ub, np.zeros(a_eq.shape[0])])
    qp.variable_lower_bounds = np.zeros(a.shape[1])
    qp.variable_upper_bounds = np.full(a.shape[1], np.inf)
    params = solvers_pb2.PrimalDualHybridGradientParams()
    crit = params.termination_criteria
    crit.simple_optimality_criteria.eps_optimal_relative = tol / 4
    crit.simple_optimality_criteria.eps_optimal_absolute = 0.0
    crit.time_sec_limit = time_limit
    params.num_threads = 2
    res = pdlp.primal_dual_hybrid_gradient(qp, params)
    duals = -np.asarray(res.dual_solution)[ncons:ncons + red.orbit_size.size]
    y = scatter(np.asarray(res.primal_solution))
    f0, ub = _certify(arcs, red, y, duals)
    lengths = _positive(np.maximum(duals, 0.0)[red.arc_orbit])
    dist = dijkstra(arcs.matrix(lengths), indices=red.reps)
    reduced = lengths + dist[:, arcs.tail] - dist[:, arcs.head]   # ≥ 0; 0 on tight arcs
    mask = (y > 1e-4 * y.max(axis=1, keepdims=True)) | (reduced <= slack * np.median(lengths))
    f, _ = _solve_highs(arcs, red, expr, mask)
    return max(f, f0), ub


# ---- public entry points -------------------------------------------------------------------

def concurrent_flow_exact(topo: Topology) -> AllToAllResult:
    """LP (3) of paper 001 with commodities aggregated by source, solved by HiGHS.

    Variables y[s, e] ≥ 0 (flow of source s on arc e) and f; Σ_s y[s, e] ≤ c_e for every arc and
    f + out_s(u) ≤ in_s(u) for every s ≠ u: N·|E| variables, practical to N ≈ 128 at d = 4.
    ``f`` is re-verified from the solver's flows and ``upper_bound`` is :func:`dual_bound` at
    the capacity duals; ``exact`` when they agree to EXACT_RTOL.
    """
    arcs = _check(topo)
    f, ub = _solve_highs(arcs, _Reduction.of(arcs, []), topo.expr)
    return AllToAllResult(f, ub, (ub - f) <= EXACT_RTOL * ub, "exact-lp", sources=arcs.n)


def concurrent_flow_symmetric(topo: Topology, generators=None,
                              budget: int | None = None) -> AllToAllResult:
    """LP (3) reduced by a group H of automorphisms (exact for any H ≤ Aut(G)).

    Theorem: f* equals the optimum of LP (3) restricted to H-invariant flows, and such flows are
    determined by one flow y_r per vertex orbit (representative r, orbit size w_r) with one
    capacity row per arc orbit O:  Σ_r (w_r/|O|) Σ_{e∈O} y_{r,e} ≤ c_O.
    Proof. (≤) Averaging an optimal y over H, ȳ_{s,e} = (1/|H|) Σ_h y_{h s, h e}, keeps
    feasibility (each h preserves arcs, capacities and conservation) and f, and makes y
    invariant. For invariant ȳ the load of arc e from the sources in r's orbit is
    Σ_{s∈Hr} ȳ_{s,e} = (1/|H_r|) Σ_{h∈H} ȳ_{r, h⁻¹e} = (w_r/|O_e|) Σ_{e'∈O_e} ȳ_{r,e'}
    (orbit–stabiliser: |H| = w_r·|H_r|, and h⁻¹e runs over O_e, each |H|/|O_e| times).
    (≥) Given y_r, set y_{s,e} = (1/|H_r|) Σ_{h: h r = s} y_{r, h⁻¹e}: a flow from s delivering f
    to every other node, with the same arc loads. □
    For vertex-transitive G with H transitive this is one source's flow: |E| variables.
    ``generators``: automorphisms generating H (default: the whole group,
    :func:`find_automorphisms`).
    """
    arcs = _check(topo)
    gens = _find_automorphisms(arcs, budget) if generators is None else list(generators)
    red = _Reduction.of(arcs, gens)
    f, ub = _solve_highs(arcs, red, topo.expr)
    exact_value = None
    if red.orbit_size.size == 1 and red.reps.size == 1:
        # arc-transitive: the one orbit row is Σ_e y_e ≤ Σc/N and a shortest-path tree is
        # optimal, so f* = Σ_e c_e / (N · Σ_t dist(r, t)) exactly
        exact_value = Fraction(int(round(arcs.cap.sum())), arcs.n * int(topo.distances[0].sum()))
        f = ub = float(exact_value)
    return AllToAllResult(f, ub, (ub - f) <= EXACT_RTOL * ub, "symmetric-lp",
                          exact_value=exact_value, sources=int(red.reps.size))


def concurrent_flow_pdlp(topo: Topology, tol: float = 1e-3, time_limit: float = 600.0,
                         generators=None) -> AllToAllResult:
    """(1 − tol)-approximate LP (3) (optionally H-reduced) by the first-order PDLP solver, with a
    certified gap: ``f`` is delivered by the returned flows and ``upper_bound`` is
    :func:`dual_bound` at the solver's dual lengths, whatever the solver's own status."""
    arcs = _check(topo)
    red = _Reduction.of(arcs, list(generators or []))
    f, ub = _solve_pdlp(arcs, red, tol, time_limit, topo.expr)
    return AllToAllResult(f, ub, (ub - f) <= EXACT_RTOL * ub, "pdlp",
                          sources=int(red.reps.size))


def concurrent_flow(topo: Topology, tol: float = 1e-3, time_limit: float = 600.0,
                    budget: int | None = None) -> AllToAllResult:
    """Concurrent all-to-all flow by the cheapest method that meets ``tol``.

    Finds the automorphism group (bliss, milliseconds at N = 1024; a larger group means a
    smaller LP: L^3(K(4,4)) needs 4 sources instead of 1024); if the reduced LP has at most
    EXACT_MAX_VARIABLES variables it is solved exactly (HiGHS), else approximately by PDLP
    (relative tolerance ``tol``, at most ``time_limit`` s) with a certified upper bound.
    """
    arcs = _check(topo)
    gens = _find_automorphisms(arcs, budget)
    red = _Reduction.of(arcs, gens)
    if red.num_variables <= EXACT_MAX_VARIABLES:
        return concurrent_flow_symmetric(topo, generators=gens)
    return concurrent_flow_pdlp(topo, tol, time_limit, generators=gens)


def concurrent_flow_bracket(topo: Topology, gap: float = 0.01, time_limit: float = 600.0,
                            generators=None, progress=None) -> AllToAllResult:
    """Certified bracket f ≤ f* ≤ upper_bound with relative gap ≤ ``gap`` (or the best within
    ``time_limit`` s) by column generation on the orbit-reduced LP (3): shortest-path pricing
    per orbit representative, a small master LP, and the dual bound of :func:`dual_bound` at
    every iterate (topofinder.scoring.flowbracket). ``f`` is re-verified from the returned flows."""
    arcs = _check(topo)
    gens = _find_automorphisms(arcs) if generators is None else list(generators)
    red = _Reduction.of(arcs, gens)
    b = _bracket(arcs, red, gap=gap, time_limit=time_limit, progress=progress)
    f, _ = _certify(arcs, red, b.flows, np.ones(red.orbit_size.size))
    ub = _dual_bound(arcs, b.lengths)      # re-proved from all N sources, not the orbit sum
    return AllToAllResult(min(f, ub), ub, (ub - f) <= EXACT_RTOL * ub, "column-generation",
                          sources=int(red.reps.size))


#: ``alltoall_summary`` modes: a certified bracket of relative gap ≤ ALLTOALL_GAP (default),
#: LP (3) solved to optimality, or only the hop-count and Moore bounds.
ALLTOALL_MODES = ("bracket", "exact", "bound")
ALLTOALL_GAP = 0.01
#: A symmetry-reduced LP at most this large is solved exactly even in bracket mode (faster
#: than iterating).
SMALL_LP_VARIABLES = 20_000
#: Seconds after which the bracket is reported as reached (its gap may then exceed the target).
BRACKET_TIME_LIMIT = 300.0


def alltoall_summary(topo: Topology, max_variables: int | None = None, mode: str = "bracket",
                     gap: float = ALLTOALL_GAP, progress=None,
                     time_limit: float = BRACKET_TIME_LIMIT) -> dict:
    """The all-to-all fields of ``topofinder score`` (paper 001 LP (3), Table 7).

    ``alltoall_f``: a certified lower bound on f* (the value a feasible routing achieves; f*
    itself when ``alltoall_optimal``); ``alltoall_f_upper``: a certified upper bound (the LP dual
    or the hop-count bound Σc / Σ_{s≠t} dist(s, t)); ``alltoall_gap`` = (upper − f)/upper.
    ``mode``: "bracket" (gap ≤ ``gap``: the exact orbit-reduced LP when it has at most
    SMALL_LP_VARIABLES variables, else column generation), "exact" (LP (3) to optimality),
    "bound" (no flow; f None); a bracket stops after ``time_limit`` s with the gap it reached.
    ``max_variables`` (legacy): with it, only an orbit-reduced LP of
    at most that size is solved and larger ones get the bounds only. ``alltoall_bound``:
    :func:`moore_bound` (None for heterogeneous links). ``alltoall_tau``: all-to-all time of a
    per-node volume M in units of M/B (B = d·b) at the certified f: d/(N·f).
    """
    if mode not in ALLTOALL_MODES:
        raise TopofinderError(f"all-to-all mode {mode!r}: use one of {', '.join(ALLTOALL_MODES)}")
    if not 0 < gap < 1:
        raise TopofinderError(f"all-to-all gap must lie in (0, 1), got {gap}")
    arcs = _check(topo)
    n, d = topo.n, topo.degree
    gens = _find_automorphisms(arcs)
    red = _Reduction.of(arcs, gens)
    f = None
    upper = float(arcs.cap.sum()) / float(topo.distances.sum())
    method = "hop-count bound"
    exact = False
    small = red.num_variables <= (SMALL_LP_VARIABLES if max_variables is None else max_variables)
    if mode == "exact" or (mode == "bracket" and small):
        res = concurrent_flow_symmetric(topo, generators=gens)
        f, upper, method, exact = res.f, min(upper, res.upper_bound), res.method, res.exact
    elif mode == "bracket" and max_variables is None:
        res = concurrent_flow_bracket(topo, gap=gap, time_limit=time_limit, generators=gens,
                                      progress=progress)
        f, upper, method = res.f, min(upper, res.upper_bound), res.method
    return {
        "alltoall_f": f,
        "alltoall_f_upper": upper,
        "alltoall_gap": None if f is None else max(0.0, (upper - f) / upper),
        "alltoall_optimal": exact,
        "alltoall_bound": None if topo.heterogeneous else moore_bound(n, d),
        "alltoall_tau": None if f is None else d / (n * f),
        "alltoall_method": method,
        "alltoall_orbits": int(red.reps.size),
    }


# ---- Moore bound and time ------------------------------------------------------------------

def moore_distance_sum(n: int, d: int) -> int:
    """Least Σ_{t≠s} dist(s, t) from one node of any N-node digraph of out-degree d: at most
    d^i nodes lie at distance i, so count d^i nodes at distance i = 1, 2, … until N − 1 are
    covered (paper 001 Table 7, "Theoretical Bound")."""
    if n < 2 or d < 1:
        raise TopofinderError(f"the Moore distance sum needs N >= 2 and d >= 1, got N={n}, d={d}")
    total, left, i, layer = 0, n - 1, 0, 1
    while left > 0:
        i += 1
        layer *= d
        take = min(layer, left)
        total += i * take
        left -= take
    return total


def moore_bound(n: int, d: int) -> float:
    """All-to-all upper bound f ≤ N·d / Σ_{s≠t} dist_Moore(s, t) = d / moore_distance_sum(N, d)
    for any N-node topology with d unit-capacity links per node (total capacity N·d, each pair
    needs ≥ its Moore distance in link-hops); e.g. N=1024, d=4: 4/4667 = 8.57e−4."""
    return d / moore_distance_sum(n, d)


def alltoall_time(f: float, n: int, volume: float, link_bandwidth: float) -> float:
    """Time (s) of a uniform all-to-all where each node sends ``volume`` bits in total (M/N to
    each peer) over links of ``link_bandwidth`` bit/s at concurrent flow f (docs/algorithms.md):
    (M/N)/(f·b). E.g. M = 1 MB = 8·2^20 bit, b = 25 Gbit/s, N = 1024, f = 8.12e−4 → 403.5 µs."""
    if f <= 0:
        raise TopofinderError("all-to-all time needs a positive concurrent flow f")
    return volume / n / (f * link_bandwidth)
