"""All-to-all step schedules from a time-expanded flow LP (docs/algorithms.md).

For a step budget k, the time-expanded graph has layers 0..k of the N nodes; a step-t arc
(u, t−1) → (w, t) for every link u→w and a holdover arc (v, t−1) → (v, t) (data waiting at v).
Commodities are aggregated by source: x[s, t, a] is the amount of s's data on arc a at step t.

    minimise Σ_t z_t  subject to
      out of (v, 0) = N − 1 if v = s else 0                    (s holds its N − 1 pieces)
      in (v, t) = out (v, t)             for 0 < t < k          (conservation)
      in (v, k) = 1 if v ≠ s else 0                              (every d gets its piece)
      Σ_s x[s, t, e] ≤ cap_e · z_t       for every link e, step t
      x ≥ 0

Flow leaving (v, t−1) is what v held after step t−1, so the model is store-and-forward. Its
optimum is the least bandwidth time Σ_t max_e load_t(e)/cap_e (units of (M/N)/b) of any k-step
schedule with fractional pieces: a schedule gives a feasible x (sum its sends per source) and
every feasible x gives a schedule of that cost by path decomposition (below). Summing the steps
gives a static concurrent flow of value 1/Σ_t z_t, so the optimum is ≥ 1/f (f of LP (3)).

Decomposition: each source's flow is a flow in a DAG from (s, 0) to the nodes (d, k); peeling
off source-to-sink paths (each time along the largest remaining arc, by the bottleneck)
splits it into paths ending at each d with total 1 (up to the solver's tolerance; each
destination's paths are rescaled to exactly 1). A path's link arcs are its sends.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topofinder.errors import TopofinderError
from topofinder.model.alltoall_schedule import AllToAllSchedule
from topofinder.model.topology import Topology
from topofinder.scoring.alltoall import _Arcs, _check, concurrent_flow_symmetric

#: Extra step budgets tried beyond the diameter by default.
EXTRA_STEPS = 2
#: Largest time-expanded LP (flow variables) solved.
MAX_LP_VARIABLES = 1_000_000
#: Flows below this (pieces) are solver noise and dropped before the decomposition.
FLOW_EPS = 1e-9
#: A destination's decomposed paths must sum to 1 within this before rescaling.
DECOMPOSITION_RTOL = 1e-5
#: An LP objective within this relative distance of the bound 1/f stops the search over k.
OPTIMAL_RTOL = 1e-6


@dataclass(frozen=True)
class _TimeExpanded:
    """The LP over step budget ``k``: variable j is x[src[j], step[j], arc[j]] (arcs 0..m−1
    are links, m..m+N−1 holdovers), followed by z_1..z_k."""

    k: int
    tail: np.ndarray
    head: np.ndarray
    m: int
    src: np.ndarray
    step: np.ndarray
    arc: np.ndarray


def _build(arcs: _Arcs, dist: np.ndarray, k: int):
    """(model, c, A_ub, b_ub, A_eq, b_eq) of the time-expanded LP for k steps. Only arcs whose
    tail s can reach by step t−1 (dist(s, tail) ≤ t − 1) get variables; the others carry no
    flow in any solution."""
    n, m = arcs.n, arcs.num
    tail = np.concatenate([arcs.tail, np.arange(n)])
    head = np.concatenate([arcs.head, np.arange(n)])
    steps = np.arange(1, k + 1)
    s, ti, a = np.nonzero(dist[:, None, tail] <= (steps[None, :, None] - 1))
    t = ti + 1
    nx = s.size
    if nx > MAX_LP_VARIABLES:
        raise TopofinderError(f"the {k}-step all-to-all LP has {nx} flow variables, more than "
                              f"{MAX_LP_VARIABLES}; all-to-all schedules are built for small "
                              f"topologies (N·k·(links + N) cells)")
    col = np.arange(nx)
    # conservation row of (s, layer j, node v): out of (v, j) at step j+1 minus in at step j
    nrow = n * (k + 1) * n
    a_eq = sp.csr_matrix((np.concatenate([np.ones(nx), -np.ones(nx)]),
                          (np.concatenate([(s * (k + 1) + t - 1) * n + tail[a],
                                           (s * (k + 1) + t) * n + head[a]]),
                           np.concatenate([col, col]))), shape=(nrow, nx + k))
    b_eq = np.zeros(nrow)
    v = np.arange(n)
    b_eq[(v * (k + 1)) * n + v] = n - 1
    b_eq[((v[:, None] * (k + 1) + k) * n + v[None, :]).ravel()] = -1.0
    b_eq[(v * (k + 1) + k) * n + v] = 0.0
    used = a_eq.getnnz(axis=1) > 0
    if np.any(~used & (b_eq != 0)):
        raise TopofinderError(f"{k} steps cannot deliver every piece (fewer than the diameter)")
    link = np.flatnonzero(a < m)
    a_ub = sp.csr_matrix((np.concatenate([np.ones(link.size), -np.tile(arcs.cap, k)]),
                          (np.concatenate([(t[link] - 1) * m + a[link], np.arange(k * m)]),
                           np.concatenate([link, nx + np.repeat(np.arange(k), m)]))),
                         shape=(k * m, nx + k))
    c = np.concatenate([np.zeros(nx), np.ones(k)])
    model = _TimeExpanded(k, tail, head, m, s, t, a)
    return model, c, a_ub, np.zeros(k * m), a_eq[used], b_eq[used]


def _solve(arcs: _Arcs, dist: np.ndarray, k: int, expr: str):
    """(model, flows x, objective Σ z_t) of the k-step LP, by HiGHS's interior point with
    crossover (a vertex: fewer non-zero flows, so fewer sends)."""
    from scipy.optimize import OptimizeWarning, linprog   # heavy; only this path needs it

    model, c, a_ub, b_ub, a_eq, b_eq = _build(arcs, dist, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0, None),
                      method="highs-ipm")
    if res.x is None:
        raise TopofinderError(f"{expr}: the {k}-step all-to-all LP failed ({res.message})")
    return model, res.x[:model.src.size], float(res.fun)


def _decompose(model: _TimeExpanded, x: np.ndarray, n: int):
    """Per-source path decomposition of the time-expanded flow: rows (t, u, w, src, dst) and
    amounts of the sends, each destination's paths summing to exactly 1."""
    k, m = model.k, model.m
    narcs = model.tail.size
    out_arcs = [np.flatnonzero(model.tail == v) for v in range(n)]
    rows, amounts = [], []
    for s in range(n):
        sel = (model.src == s) & (x > FLOW_EPS)
        rem = np.zeros((k, narcs))
        rem[model.step[sel] - 1, model.arc[sel]] = x[sel]
        paths, total = [], np.zeros(n)
        while rem[0, out_arcs[s]].max() > FLOW_EPS:
            v, route = s, []
            for t in range(k):
                cand = out_arcs[v]
                a = int(cand[np.argmax(rem[t, cand])])
                if rem[t, a] <= FLOW_EPS:
                    break                        # noise ran dry: drop the arc that led here
                route.append(a)
                v = int(model.head[a])
            if len(route) < k:
                rem[len(route) - 1, route[-1]] = 0.0
                continue
            amount = min(rem[t, a] for t, a in enumerate(route))
            for t, a in enumerate(route):
                rem[t, a] -= amount
            if v != s:
                paths.append((v, amount, route))
                total[v] += amount
        dests = np.delete(np.arange(n), s)
        worst = float(np.abs(total[dests] - 1.0).max())
        if worst > DECOMPOSITION_RTOL:
            raise TopofinderError(f"all-to-all decomposition: source {s}'s paths deliver "
                                  f"{worst:.2e} off 1 to some node (LP solution not precise "
                                  f"enough)")
        for d, amount, route in paths:
            for t, a in enumerate(route):
                if a < m:
                    rows.append((t + 1, int(model.tail[a]), int(model.head[a]), s, d))
                    amounts.append(amount / total[d])
    if not rows:
        return np.zeros((0, 5), np.int64), np.zeros(0)
    keys, inv = np.unique(np.array(rows, np.int64), axis=0, return_inverse=True)
    return keys, np.bincount(inv.reshape(-1), weights=np.array(amounts))


@dataclass(frozen=True)
class AllToAllBuild:
    """A built schedule and how: ``objectives[k]`` is the LP optimum for each step budget
    tried (units of (M/N)/b); ``seconds`` the wall time of the LPs and the decomposition."""

    schedule: AllToAllSchedule
    objectives: dict
    seconds: float


def alltoall_schedule(topo: Topology, steps: int | None = None,
                      extra_steps: int = EXTRA_STEPS) -> AllToAllBuild:
    """The k-step all-to-all schedule of least bandwidth time for k = ``steps``, or the best
    over k = diameter .. diameter + ``extra_steps`` (fewer steps on ties; stops as soon as an
    LP reaches the bound 1/f, which more steps cannot beat). Its ``bound`` is 1/f* with f*
    the certified LP (3) optimum (upper bound of the concurrent flow), so
    bandwidth_time ≥ bound."""
    if topo.has_switches:
        raise TopofinderError(f"{topo.expr} has switch nodes; all-to-all step schedules are "
                              f"for direct-connect fabrics")
    arcs = _check(topo)
    start = time.perf_counter()
    flow = concurrent_flow_symmetric(topo)
    bound = 1.0 / flow.upper_bound
    diameter = topo.diameter
    if steps is not None:
        if steps < diameter:
            raise TopofinderError(f"{steps} steps cannot deliver every piece in {topo.expr}: "
                                  f"its diameter is {diameter}")
        budgets = [steps]
    else:
        if extra_steps < 0:
            raise TopofinderError("extra_steps must be >= 0")
        budgets = list(range(diameter, diameter + extra_steps + 1))
    dist = topo.distances.astype(np.int64)
    best, objectives = None, {}
    for k in budgets:
        model, x, obj = _solve(arcs, dist, k, topo.expr)
        objectives[k] = obj
        if best is None or obj < best[2] * (1 - OPTIMAL_RTOL):
            best = (model, x, obj)
        if obj <= bound * (1 + OPTIMAL_RTOL):
            break
    sends, amounts = _decompose(best[0], best[1], topo.n)
    sched = AllToAllSchedule(topo, sends, amounts, method="time-expanded-lp", bound=bound)
    sched.step_loads                                       # replay before anyone sees it
    return AllToAllBuild(sched, objectives, time.perf_counter() - start)
