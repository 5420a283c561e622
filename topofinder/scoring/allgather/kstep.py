"""Step-budgeted allgather: schedules between BFB and the throughput optimum (issue 18;
docs/algorithms.md "k-step schedules").

Model (paper 001 §3, Appendix B): a schedule of k comm steps costs T_L = k·α and
T_B = τ·M/B with τ = (d/N)·Σ_t max_links load_t/cap (loads in shards). The *time-expanded
graph* has nodes (v, t), t = 0..k, hold arcs (v, t−1)→(v, t) of unbounded capacity and link arcs
(u, t−1)→(w, t), one per link u→w, used at step t.

- :func:`lower_bound`: the least Σ_t y_t over x ≥ 0 with, for every source s, x^s supporting a
  unit flow from (s, 0) to every (v, k) (link use = max over destinations, not the sum: a
  network-coding relaxation, in the spirit of paper 003's steady-state broadcast LP and paper
  002's cut bound) and Σ_s x^s_{t,e} ≤ cap_e·y_t. Every replay-valid k-step schedule (chunks are
  copied, never coded) is feasible, so its τ is ≥ this bound: a proven lower bound, exact up to
  the LP solver's tolerance. Reduced by symmetry: for any group Γ of automorphisms, one source per
  vertex orbit and the load on link e replaced by Σ_r (|V_r|/|O_e|)·Σ_{e'∈O_e} x^r_{e'} (average
  a solution over Γ; convexity) — the same optimum as the unreduced LP.
- :func:`routed_schedule`: a replay-valid schedule. Column generation over *timed spanning
  arborescences* (each chunk of a source's shard follows one; a node receives it once, at an
  arrival step, from an in-neighbour that arrived earlier): the master LP mixes them optimally
  under the same orbit-load constraints; the pricing (cheapest arborescence for the duals) is a
  heuristic (shortest-path trees in the time-expanded graph, then local search over arrival
  steps), so the routed τ is an upper bound, not the optimum. The mix is rounded to integer
  chunks (shard split into P chunks) and copied to every source by the group.

Group: generators of Aut(G) from bliss (topofinder.scoring.symmetry); each verified on the arcs
with their capacities (any verified subset gives an exact reduction; a smaller group only costs time).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

import numpy as np
import scipy.sparse as sp

from topofinder.errors import TopofinderError
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology
from topofinder.scoring.links import connected_links
from topofinder.scoring.symmetry import LinkOrbits, topology_group

#: Largest group enumerated element by element (|Γ|·N integers); beyond it a source's
#: arborescences are copied by one coset representative each (loads then need not be the
#: orbit averages the master LP assumed; the replayed τ is what counts).
MAX_GROUP_CELLS = 20_000_000
#: Chunks per shard at most (the shard is split into P integer chunks).
MAX_CHUNKS = 1024


# ---- symmetry -------------------------------------------------------------------------------
def symmetry(topo: Topology, use_group: bool = True) -> LinkOrbits:
    """The automorphism group's orbits on nodes and links (topofinder.scoring.symmetry), its
    elements listed when at most MAX_GROUP_CELLS/N (``use_group``=False: the trivial group)."""
    links = connected_links(topo, "no allgather exists")
    gens = topology_group(topo).generators if use_group else ()
    return LinkOrbits.of(links, gens, max_elements=max(1, MAX_GROUP_CELLS // topo.n))


def _load_weights(sym: LinkOrbits) -> np.ndarray:
    """(R, link orbits): |V_r| / |O| — the load on a link of orbit O per unit of rep r's use
    summed over O, after averaging over the group."""
    return sym.weight[:, None] / sym.orbit_size[None, :]


# ---- the time-expanded lower bound -------------------------------------------------------------
@dataclass(frozen=True)
class KStepBound:
    """The LP bound: ``tau`` (float, M/B), ``step_loads`` y_t (shards per unit capacity),
    ``tau_fraction`` (the float rationalised, denominators ≤ 10⁴ — a reading aid, not a proof),
    ``sources`` (LP sources after reduction), ``seconds``."""

    k: int
    tau: float
    step_loads: tuple
    sources: int
    variables: int
    seconds: float

    @property
    def tau_fraction(self) -> Fraction:
        return Fraction(self.tau).limit_denominator(10_000)


def _check_k(topo: Topology, k: int) -> None:
    if int(k) != k or k < 1:
        raise TopofinderError(f"step budget k must be a positive integer, got {k!r}")
    if k < topo.diameter:
        raise TopofinderError(f"{topo.expr}: k = {k} is below the diameter {topo.diameter}; "
                              "no k-step allgather exists")


def lower_bound(topo: Topology, k: int, use_group: bool = True,
                sym: LinkOrbits | None = None) -> KStepBound:
    """Least τ over k-step allgather schedules, network-coding relaxation (module doc): a
    lower bound on the replayed τ of every k-step schedule, explicit per-destination flows,
    solved with HiGHS."""
    _check_k(topo, k)
    start = time.perf_counter()
    sym = sym if sym is not None else symmetry(topo, use_group)
    n, L = topo.n, sym.links.num
    lu, lw = sym.links.tail, sym.links.head
    R = sym.reps.size
    n_orb = sym.num_arc_orbits
    weights = _load_weights(sym)                       # (R, orbits)
    cap_orb = sym.orbit_cap
    # variable layout: y (k) | x[r, t, a] (R·k·L) | per (r, v): f[t, a] (k·L), h[t, w] (k·N)
    nx_ = R * k * L
    per = k * L + k * n
    dests = [(ri, int(v)) for ri, r in enumerate(sym.reps) for v in range(n) if v != r]
    nvar = k + nx_ + len(dests) * per
    rows, cols, vals = [], [], []
    # load rows: Σ_r w_{r,O} Σ_{a∈O} x[r,t,a] − cap_O·y_t ≤ 0  (row t·n_orb + O)
    for ri in range(R):
        for t in range(k):
            a = np.arange(L)
            rows.append(t * n_orb + sym.arc_orbit)
            cols.append(k + (ri * k + t) * L + a)
            vals.append(weights[ri, sym.arc_orbit])
    for t in range(k):
        rows.append(t * n_orb + np.arange(n_orb))
        cols.append(np.full(n_orb, t))
        vals.append(-cap_orb)
    n_ub = k * n_orb
    # coupling rows: f[r,v,t,a] − x[r,t,a] ≤ 0
    ta = np.arange(k * L)
    for j, (ri, v) in enumerate(dests):
        base = k + nx_ + j * per
        r0 = n_ub + j * k * L
        rows += [r0 + ta, r0 + ta]
        cols += [base + ta, k + ri * k * L + ta]
        vals += [np.ones(k * L), -np.ones(k * L)]
    n_ub += len(dests) * k * L
    a_ub = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n_ub, nvar))
    # conservation at (w, t), t = 0..k: in − out = −1 at (r,0), +1 at (v,k)
    erows, ecols, evals, b_eq = [], [], [], []
    t_link = np.repeat(np.arange(k), L)                  # step index 0..k−1 of f[t, a]
    a_link = np.tile(np.arange(L), k)
    t_hold = np.repeat(np.arange(k), n)
    w_hold = np.tile(np.arange(n), k)
    nodes = (k + 1) * n
    for j, (ri, v) in enumerate(dests):
        base = k + nx_ + j * per
        r0 = j * nodes
        f_ids = base + np.arange(k * L)
        h_ids = base + k * L + np.arange(k * n)
        # link arc step t (0-based): (lu, t) → (lw, t+1)
        erows += [r0 + (t_link + 1) * n + lw[a_link], r0 + t_link * n + lu[a_link],
                  r0 + (t_hold + 1) * n + w_hold, r0 + t_hold * n + w_hold]
        ecols += [f_ids, f_ids, h_ids, h_ids]
        evals += [np.ones(k * L), -np.ones(k * L), np.ones(k * n), -np.ones(k * n)]
        b = np.zeros(nodes)
        b[int(sym.reps[ri])] = -1.0
        b[k * n + v] = 1.0
        b_eq.append(b)
    a_eq = sp.csr_matrix((np.concatenate(evals), (np.concatenate(erows),
                                                   np.concatenate(ecols))),
                         shape=(len(dests) * nodes, nvar))
    c = np.zeros(nvar)
    c[:k] = 1.0
    from scipy.optimize import linprog      # heavy (0.3 s): loaded on first use
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(n_ub), A_eq=a_eq, b_eq=np.concatenate(b_eq),
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise TopofinderError(f"{topo.expr}: the k-step LP did not solve ({res.message})")
    y = res.x[:k]
    tau = float(y.sum()) * topo.degree / n
    return KStepBound(k, tau, tuple(float(v) for v in y), R, nvar,
                      time.perf_counter() - start)


# ---- routed schedules: column generation over timed arborescences -------------------------------
@dataclass(frozen=True, eq=False)
class KStepRouted:
    """A routed k-step allgather: ``schedule`` (replay it with
    :func:`topofinder.model.schedule.validate`), ``master_tau`` (the master LP's τ over the
    arborescences found, before rounding to chunks), ``columns`` (arborescences generated),
    ``seconds``."""

    schedule: StepSchedule
    master_tau: float
    columns: int
    seconds: float


def _sp_tree(sym: LinkOrbits, r: int, k: int, cost: np.ndarray) -> np.ndarray:
    """Cheapest-path tree from (r, 0) to every (v, k) in the time-expanded graph (hold arcs
    free; ``cost[t, a]`` for link a at step t+1): the union of the back-pointer paths, as
    (step index 0..k−1, link) rows. Nodes may receive twice when their own cheapest paths
    disagree; the union is still a valid broadcast."""
    n, lu, lw = sym.n, sym.links.tail, sym.links.head
    dist = np.full(n, np.inf)
    dist[r] = 0.0
    bps = []
    order_w = np.argsort(lw, kind="stable")
    lw_sorted = lw[order_w]
    starts = np.searchsorted(lw_sorted, np.arange(n))
    has_in = np.diff(np.append(starts, lw.size)) > 0
    for t in range(k):
        cand = dist[lu] + cost[t]
        c_sorted = cand[order_w]
        # per target: the cheapest incoming link
        best = np.full(n, np.inf)
        np.minimum.at(best, lw_sorted, c_sorted)
        is_best = c_sorted == best[lw_sorted]
        first = np.full(n, -1, np.int64)
        idx = np.flatnonzero(is_best)
        # first occurrence per target
        tw = lw_sorted[idx]
        uniq, pos = np.unique(tw, return_index=True)
        first[uniq] = order_w[idx[pos]]
        take = has_in & (best < dist)
        bp = np.where(take, first, -1)
        dist = np.where(take, best, dist)
        bps.append(bp)
    active = np.ones(n, bool)
    active[r] = False
    rows = []
    for t in range(k - 1, -1, -1):
        bp = bps[t]
        via = active & (bp >= 0)
        links = bp[via]
        rows.append(np.stack([np.full(links.size, t), links], axis=1))
        nxt = active & (bp < 0)
        nxt[lu[links]] = True
        active = nxt
        active[r] = False
    if np.any(active):
        raise TopofinderError("internal: a node is unreachable within k steps")
    return np.concatenate(rows) if rows else np.zeros((0, 2), np.int64)


def _tree_terms(sym: LinkOrbits, r: int, cost: np.ndarray, arrive: np.ndarray):
    """For arrival steps ``arrive``: per node the cheapest valid parent link (a(u) < a(v)),
    its cost and the second cheapest cost (inf where none)."""
    n, lu, lw = sym.n, sym.links.tail, sym.links.head
    k = cost.shape[0]
    lc = np.where(arrive[lu] < arrive[lw],
                  cost[np.clip(arrive[lw] - 1, 0, k - 1), np.arange(lu.size)], np.inf)
    order = np.lexsort((lc, lw))
    w_sorted = lw[order]
    first = np.searchsorted(w_sorted, np.arange(n))
    count = np.bincount(lw, minlength=n)
    best_link = np.where(count > 0, order[np.minimum(first, lu.size - 1)], -1)
    best = np.where(count > 0, lc[best_link], np.inf)
    second = np.where(count > 1, lc[order[np.minimum(first + 1, lu.size - 1)]], np.inf)
    best[r], second[r], best_link[r] = 0.0, 0.0, -1
    return lc, best_link, best, second


def _arrival_search(sym: LinkOrbits, r: int, k: int, cost: np.ndarray, arrive: np.ndarray,
                    rounds: int = 40) -> np.ndarray | None:
    """Local search over arrival steps: node v receives once, at step a(v), from its cheapest
    in-neighbour u with a(u) < a(v). Every node's best single move is evaluated at once
    (numpy); the improving moves of a conflict-free set (no two movers adjacent or sharing an
    out-neighbour) are applied; repeated until none improves. Returns the tree as (step index,
    link) rows, None if ``arrive`` is infeasible."""
    n, lu, lw = sym.n, sym.links.tail, sym.links.head
    arrive = arrive.astype(np.int64).copy()
    arrive[r] = 0
    links = np.arange(lu.size)
    outs = [[] for _ in range(n)]
    ins = [[] for _ in range(n)]
    for u, w in zip(lu.tolist(), lw.tolist()):
        outs[u].append(w)
        ins[w].append(u)
    for _ in range(rounds):
        lc, best_link, best, second = _tree_terms(sym, r, cost, arrive)
        if not np.all(np.isfinite(best)):
            return None
        change = np.full((k, n), np.inf)
        for alpha in range(1, k + 1):
            own = np.full(n, np.inf)
            ok = arrive[lu] < alpha
            np.minimum.at(own, lw[ok], cost[alpha - 1, links[ok]])
            # the children's terms when v = lu arrives at alpha
            excl = np.where(best_link[lw] == links, second[lw], best[lw])
            via = np.where(alpha < arrive[lw], cost[np.clip(arrive[lw] - 1, 0, k - 1), links],
                           np.inf)
            new_child = np.minimum(excl, via)
            delta = np.where(lw == r, 0.0, new_child - best[lw])
            tot = np.zeros(n)
            np.add.at(tot, lu, delta)
            change[alpha - 1] = own + tot - best
        change[:, r] = np.inf
        change[arrive[np.arange(n)] - 1, np.arange(n)] = np.inf   # staying is no move
        alpha_best = np.argmin(change, axis=0) + 1
        gain = -change[alpha_best - 1, np.arange(n)]
        movers = np.flatnonzero(gain > 1e-12)
        if movers.size == 0:
            break
        blocked = np.zeros(n, bool)
        for v in movers[np.argsort(-gain[movers], kind="stable")].tolist():
            if blocked[v]:
                continue
            arrive[v] = alpha_best[v]
            blocked[v] = True
            blocked[ins[v]] = True
            for w in outs[v]:
                blocked[w] = True
                blocked[ins[w]] = True
    lc, best_link, best, second = _tree_terms(sym, r, cost, arrive)
    if not np.all(np.isfinite(best)):
        return None
    keep = np.arange(n) != r
    return np.stack([arrive[keep] - 1, best_link[keep]], axis=1)


def _arrivals(sym: LinkOrbits, r: int, tree: np.ndarray) -> np.ndarray | None:
    """Arrival steps of a tree in which every node receives once; None otherwise."""
    arrive = np.full(sym.n, -1, np.int64)
    arrive[r] = 0
    w = sym.links.head[tree[:, 1]]
    if np.unique(w).size != w.size:
        return None
    arrive[w] = tree[:, 0] + 1
    return arrive


def _column(sym: LinkOrbits, tree: np.ndarray, n_orb: int) -> np.ndarray:
    return np.bincount(tree[:, 0] * n_orb + sym.arc_orbit[tree[:, 1]],
                       minlength=0).astype(float)


def _master(cols, owners, R, k, n_orb, weights, cap_orb):
    """min Σ y_t: Σ_T w_{r(T),O}·n_T(t,O)·λ_T ≤ cap_O·y_t, Σ_{T of r} λ_T = 1."""
    m = len(cols)
    rows, cidx, vals = [], [], []
    for j, (col, ri) in enumerate(zip(cols, owners)):
        nz = np.flatnonzero(col)
        rows.append(nz)
        cidx.append(np.full(nz.size, j))
        vals.append(col[nz] * weights[ri, nz % n_orb])
    tt = np.repeat(np.arange(k), n_orb)
    oo = np.tile(np.arange(n_orb), k)
    rows.append(tt * n_orb + oo)
    cidx.append(m + tt)
    vals.append(-cap_orb[oo])
    a_ub = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cidx))),
                         shape=(k * n_orb, m + k))
    a_eq = sp.csr_matrix((np.ones(m), (np.asarray(owners), np.arange(m))), shape=(R, m + k))
    c = np.concatenate([np.zeros(m), np.ones(k)])
    from scipy.optimize import linprog      # heavy (0.3 s): loaded on first use
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(k * n_orb), A_eq=a_eq, b_eq=np.ones(R),
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise TopofinderError(f"internal: the k-step master LP did not solve ({res.message})")
    return res


def _round(lams: np.ndarray, m: int) -> np.ndarray:
    """Integer weights summing to m, largest remainder."""
    raw = lams / lams.sum() * m
    base = np.floor(raw).astype(np.int64)
    rest = m - int(base.sum())
    if rest > 0:
        base[np.argsort(-(raw - base), kind="stable")[:rest]] += 1
    return base


def routed_schedule(topo: Topology, k: int, use_group: bool = True,
                    sym: LinkOrbits | None = None, max_rounds: int = 60,
                    local_search: bool = True,
                    max_chunks: int = MAX_CHUNKS, progress=None) -> KStepRouted:
    """A replay-valid k-step allgather built from timed arborescences (module doc): exact
    master LP over the arborescences found, heuristic pricing, then rounding to chunks."""
    _check_k(topo, k)
    start = time.perf_counter()
    sym = sym if sym is not None else symmetry(topo, use_group)
    n, L = topo.n, sym.links.num
    R, n_orb = sym.reps.size, sym.num_arc_orbits
    weights = _load_weights(sym)
    cap_orb = sym.orbit_cap
    trees, cols, owners = [], [], []
    keys = set()

    def add(ri, tree):
        tree = tree[np.lexsort((tree[:, 1], tree[:, 0]))]
        key = (ri, tree.tobytes())
        if key in keys:
            return False
        keys.add(key)
        trees.append(tree)
        col = np.bincount(tree[:, 0] * n_orb + sym.arc_orbit[tree[:, 1]],
                          minlength=k * n_orb).astype(float)
        cols.append(col)
        owners.append(ri)
        return True

    last = [None] * R          # arrival steps of each rep's latest best column (warm start)
    rng = np.random.default_rng(0)
    for ri, r in enumerate(sym.reps):
        add(ri, _sp_tree(sym, int(r), k, np.ones((k, L))))
        for _ in range(3):
            add(ri, _sp_tree(sym, int(r), k, 1.0 + rng.random((k, L))))
    res = None
    for _ in range(max_rounds):
        res = _master(cols, owners, R, k, n_orb, weights, cap_orb)
        pi = -res.ineqlin.marginals.reshape(k, n_orb)          # ≥ 0
        mu = res.eqlin.marginals
        added = 0
        best_rc = [None] * R
        for ri, r in enumerate(sym.reps):
            cost = pi[:, sym.arc_orbit] * weights[ri, sym.arc_orbit] + 1e-9
            cands = [_sp_tree(sym, int(r), k, cost)]
            if local_search:
                starts = [_arrivals(sym, int(r), cands[0]), topo.distances[int(r)]]
                if last[ri] is not None:
                    starts.append(last[ri])
                for arrive in starts:
                    if arrive is not None:
                        tree = _arrival_search(sym, int(r), k, cost, arrive)
                        if tree is not None:
                            cands.append(tree)
            for tree in cands:
                rc = float(cost[tree[:, 0], tree[:, 1]].sum()) - mu[ri]
                if rc < -1e-9 and add(ri, tree):
                    added += 1
                    if best_rc[ri] is None or rc < best_rc[ri]:
                        best_rc[ri] = rc
                        last[ri] = _arrivals(sym, int(r), tree)
        if progress is not None:
            progress(f"round {_ + 1}: master tau {float(res.x[-k:].sum()) * topo.degree / n:.6f}"
                     f", {len(cols)} columns, +{added}")
        if not added:
            break
    if res.x.size != len(cols) + k:          # the last round added columns: re-solve
        res = _master(cols, owners, R, k, n_orb, weights, cap_orb)
    lam = res.x[:len(cols)]
    exact_lam = _exact_mix(cols, owners, R, k, n_orb, sym, res)
    master_tau = float(res.x[len(cols):].sum()) * topo.degree / n
    schedule = _build(topo, sym, k, trees, owners, lam, max_chunks, exact_lam)
    return KStepRouted(schedule, master_tau, len(cols), time.perf_counter() - start)


def _best_multiplier(sym, k, trees, owners, lam, per_source, mult, max_chunks) -> int:
    """The m ≤ max_chunks/mult whose rounded mix has the least Γ-averaged Σ_t max load
    (exact when Γ is enumerated; the choice only, the replay decides τ)."""
    n_orb = sym.num_arc_orbits
    sizes = sym.orbit_size
    cap_orb = sym.orbit_cap
    counts = np.array([np.bincount(t[:, 0] * n_orb + sym.arc_orbit[t[:, 1]],
                                   minlength=k * n_orb) for t in trees], float)
    best, best_m = np.inf, 1
    mines = [[j for j, o in enumerate(owners) if o == ri and lam[j] > 1e-12]
             for ri in range(sym.reps.size)]
    for m in range(1, max(1, max_chunks // mult) + 1):
        load = np.zeros(k * n_orb)
        for ri, r in enumerate(sym.reps):
            mine = mines[ri]
            w = _round(np.array([lam[j] for j in mine]), m)
            # every chunk of every source: |V_r| sources spread over the orbit's |O| links
            load += (w @ counts[mine]) * sym.vertex_orbit_size(int(r)) / np.tile(sizes, k)
        val = (load.reshape(k, n_orb) / cap_orb).max(axis=1).sum() / m
        if val < best - 1e-12:
            best, best_m = val, m
    return best_m


def _exact_mix(cols, owners, R, k, n_orb, sym, res) -> list[Fraction] | None:
    """The master's optimal vertex in exact rationals: the float solution's support and
    tight rows solved by Fraction elimination and checked exactly (feasible, same value);
    None when that fails (the float mix is rounded instead)."""
    m = len(cols)
    x = res.x
    support = [j for j in range(m) if x[j] > 1e-9]
    sizes = sym.orbit_size
    cap_orb = sym.orbit_cap.astype(np.int64)                  # equal integers per orbit
    wts = [[Fraction(sym.vertex_orbit_size(int(r)), int(sizes[o])) for o in range(n_orb)]
           for r in sym.reps]
    nv = len(support) + k
    if nv > 400:
        return None
    rows = []
    for ri in range(R):
        row = [Fraction(0)] * nv
        for i, j in enumerate(support):
            if owners[j] == ri:
                row[i] = Fraction(1)
        rows.append((row, Fraction(1)))
    for q in range(k * n_orb):
        if abs(res.ineqlin.residual[q]) > 1e-7:
            continue
        t, o = divmod(q, n_orb)
        row = [Fraction(0)] * nv
        for i, j in enumerate(support):
            c = int(cols[j][q])
            if c:
                row[i] = wts[owners[j]][o] * c
        row[len(support) + t] = Fraction(-int(cap_orb[o]))
        rows.append((row, Fraction(0)))
    sol = _solve_exact(rows, nv)
    if sol is None or any(v < 0 for v in sol):
        return None
    lam = [Fraction(0)] * m
    for i, j in enumerate(support):
        lam[j] = sol[i]
    y = sol[len(support):]
    # exact feasibility of every load row
    for q in range(k * n_orb):
        t, o = divmod(q, n_orb)
        load = sum((wts[owners[j]][o] * int(cols[j][q]) * lam[j] for j in support
                    if cols[j][q]), Fraction(0))
        if load > cap_orb[o] * y[t]:
            return None
    if abs(float(sum(y)) - float(res.fun)) > 1e-7:
        return None
    return lam


def _solve_exact(rows, nv) -> list[Fraction] | None:
    """A solution of the rational system (Gauss–Jordan; free unknowns 0), None if none."""
    mat = [r[:] + [b] for r, b in rows]
    piv_cols = []
    rank = 0
    for c in range(nv):
        p = next((i for i in range(rank, len(mat)) if mat[i][c] != 0), None)
        if p is None:
            continue
        mat[rank], mat[p] = mat[p], mat[rank]
        pv = mat[rank][c]
        mat[rank] = [v / pv for v in mat[rank]]
        for i in range(len(mat)):
            if i != rank and mat[i][c] != 0:
                f = mat[i][c]
                mat[i] = [a - f * b for a, b in zip(mat[i], mat[rank])]
        piv_cols.append(c)
        rank += 1
    if any(mat[i][nv] != 0 for i in range(rank, len(mat))):
        return None
    sol = [Fraction(0)] * nv
    for i, c in enumerate(piv_cols):
        sol[c] = mat[i][nv]
    return sol


def _averaged_value(sym, k, counts, owners, w, m) -> float:
    """Σ_t max_O load/cap per chunk-unit of the integer mix w (m units per source),
    averaged over Γ — exact when Γ is enumerated."""
    n_orb = sym.num_arc_orbits
    sizes = np.tile(sym.orbit_size, k)
    cap_orb = sym.orbit_cap
    load = np.zeros(k * n_orb)
    for ri, r in enumerate(sym.reps):
        mine = [j for j, o in enumerate(owners) if o == ri]
        load += (w[mine] @ counts[mine]) * sym.vertex_orbit_size(int(r)) / sizes
    return float((load.reshape(k, n_orb) / cap_orb).max(axis=1).sum()) / m


def _integer_mix(sym, k, trees, owners, m, node_limit=5000):
    """Integer chunk counts (m per source) minimising the Γ-averaged Σ_t max load: a small
    MILP (HiGHS) over the arborescences found, stopped after ``node_limit`` branch-and-bound
    nodes (deterministic, unlike a time limit); None if it finds nothing by then."""
    n_orb = sym.num_arc_orbits
    R = sym.reps.size
    nt = len(trees)
    counts = np.array([np.bincount(t[:, 0] * n_orb + sym.arc_orbit[t[:, 1]],
                                   minlength=k * n_orb) for t in trees], float)
    weights = _load_weights(sym)
    cap_orb = sym.orbit_cap
    own = np.asarray(owners)
    a = np.zeros((k * n_orb + R, nt + k))
    a[:k * n_orb, :nt] = (counts * weights[own][:, np.tile(np.arange(n_orb), k)]).T
    for t in range(k):
        a[t * n_orb:(t + 1) * n_orb, nt + t] = -cap_orb
    a[k * n_orb + own, np.arange(nt)] = 1.0
    lb = np.r_[np.full(k * n_orb, -np.inf), np.full(R, m)]
    ub = np.r_[np.zeros(k * n_orb), np.full(R, m)]
    from scipy.optimize import Bounds, LinearConstraint, milp   # heavy: loaded on first use
    res = milp(np.r_[np.zeros(nt), np.ones(k)], constraints=LinearConstraint(a, lb, ub),
               integrality=np.r_[np.ones(nt), np.zeros(k)], bounds=Bounds(0, np.inf),
               options={"node_limit": node_limit, "time_limit": 60.0, "disp": False})
    if res.x is None:
        return None
    w = np.rint(res.x[:nt]).astype(np.int64)
    return w, _averaged_value(sym, k, counts, owners, w, m)


def _build(topo, sym, k, trees, owners, lam, max_chunks, exact_lam=None) -> StepSchedule:
    """Round the mix to integer chunks and copy every rep's arborescences to its orbit."""
    mapper_sets = [sym.mappers(int(r)) for r in sym.reps]
    per_source = []            # mappers per source vertex of each rep's orbit
    for ri, r in enumerate(sym.reps):
        per_source.append(len(mapper_sets[ri]) // sym.vertex_orbit_size(int(r)))
    mult = lcm(*per_source)
    den = lcm(*[f.denominator for f in exact_lam]) if exact_lam else None
    if den is not None and den * mult <= max_chunks:
        m = den                              # the exact mix, no rounding
        lam = np.array([float(f) for f in exact_lam])
    else:
        m = _best_multiplier(sym, k, trees, owners, lam, per_source, mult, max_chunks)
        counts = np.array([np.bincount(t[:, 0] * sym.num_arc_orbits + sym.arc_orbit[t[:, 1]],
                                       minlength=k * sym.num_arc_orbits) for t in trees], float)
        w_round = np.zeros(len(trees), np.int64)
        for ri in range(sym.reps.size):
            mine = [j for j, o in enumerate(owners) if o == ri]
            w_round[mine] = _round(np.maximum(lam[mine], 0), m)
        best = (_averaged_value(sym, k, counts, owners, w_round, m), m, w_round)
        if len(trees) <= 60:               # a small MILP: worth its few seconds
            for mm in sorted({max_chunks // mult, 64} - {0}):
                if mm * mult > max_chunks:
                    continue
                found = _integer_mix(sym, k, trees, owners, mm)
                if found is not None and found[1] < best[0] - 1e-12:
                    best = (found[1], mm, found[0])
        m = best[1]
        lam = best[2].astype(float) / m        # integer weights: _round returns them as is
    p = m * mult
    blocks = []
    lo_at = {}
    for ri, r in enumerate(sym.reps):
        mine = [j for j, o in enumerate(owners) if o == ri and lam[j] > 1e-12]
        w = _round(np.array([lam[j] for j in mine]), m)
        maps = mapper_sets[ri]
        g_per = per_source[ri]
        unit = mult // g_per                  # chunks per weight unit per mapper
        src_of = np.array([int(g[r]) for g in maps])
        lo_at = {}
        for j, wt in zip(mine, w):
            if wt == 0:
                continue
            tree = trees[j]
            size = int(wt) * unit
            tt = tree[:, 0] + 1
            u, v = sym.links.tail[tree[:, 1]], sym.links.head[tree[:, 1]]
            for g, s in zip(maps, src_of):
                lo = lo_at.get(s, 0)
                lo_at[s] = lo + size
                e = tt.size
                blocks.append(np.stack([tt, np.full(e, s), np.full(e, lo),
                                        np.full(e, lo + size), g[u], g[v]], axis=1))
    sends = np.concatenate(blocks) if blocks else np.zeros((0, 6), np.int64)
    return StepSchedule(topo, p, sends, method="kstep")
