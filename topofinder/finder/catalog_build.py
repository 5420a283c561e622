"""`topofinder catalog build`: exhaustive searches for small base topologies whose best
schedules are not BFB (paper 001 Appendix H, Table 9: Diamond, DBJMod; docs/algorithms.md).

Pipeline: a candidate space of small d-regular digraphs up to isomorphism (all of them for tiny
N, or the rewirings of a de Bruijn graph's self-loops and 2-cycles into one long cycle, as the
paper's Fig. 20 caption describes DBJMod) → keep diameter ≤ T → order by BFB τ → search a
T-step schedule with P chunks per shard by CP-SAT (SCCL-style; :func:`search_schedule`) until
one reaches the BW-optimal τ = (N−1)/N.

Units: τ = T_B in M/B; steps are comm steps (T_L in α).
"""

from __future__ import annotations

import re

import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from topofinder.scoring.allgather.bfb import bfb_tau
from topofinder.errors import TopofinderError
from topofinder.families import de_bruijn
from topofinder.model.topology import Topology
from topofinder.model.schedule import StepSchedule
from topofinder.families.catalog import find_reverse_isomorphism
from topofinder.families.catalog import write_entry
from topofinder.model.units import exact

MAX_CYCLES = 100_000    # DBJ rewirings: enumerate every cycle up to this many


# ---- distances on small graphs, batched -----------------------------------------------------
def _batch_distances(adj: np.ndarray, limit: int) -> np.ndarray:
    """dist[g, u, v] (hops u→v, -1 if > ``limit``) for a stack of boolean adjacency matrices."""
    g, n, _ = adj.shape
    a = adj.astype(np.int32)
    reach = np.broadcast_to(np.eye(n, dtype=bool), (g, n, n)).copy()
    dist = np.where(reach, 0, -1).astype(np.int32)
    for k in range(1, limit + 1):
        new = (np.matmul(reach.astype(np.int32), a) > 0) & ~reach
        if not new.any():
            break
        dist[new] = k
        reach |= new
    return dist


def _adjacency(arc_lists: list[np.ndarray], n: int) -> np.ndarray:
    adj = np.zeros((len(arc_lists), n, n), dtype=bool)
    for i, arcs in enumerate(arc_lists):
        adj[i, arcs[:, 0], arcs[:, 1]] = True
    return adj


# ---- isomorphism classes ---------------------------------------------------------------------
def _unique_up_to_isomorphism(arc_lists: list[np.ndarray], n: int,
                              dist: np.ndarray) -> list[np.ndarray]:
    """One representative per isomorphism class: bucket by a distance-profile invariant
    (per node, the sorted out- and in-distance multisets), then VF2 (networkx) in buckets."""
    import networkx as nx       # loaded when a catalog is built, not with the command line
    buckets: dict[bytes, list[tuple[np.ndarray, nx.DiGraph]]] = {}
    kept = []
    for arcs, dm in zip(arc_lists, dist):
        rows = np.sort(dm, axis=1)
        cols = np.sort(dm, axis=0).T
        sig = np.concatenate([rows, cols], axis=1)
        key = sig[np.lexsort(sig.T[::-1])].tobytes()
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_edges_from(map(tuple, arcs.tolist()))
        reps = buckets.setdefault(key, [])
        if any(nx.is_isomorphic(g, h) for _, h in reps):
            continue
        reps.append((arcs, g))
        kept.append(arcs)
    return kept


# ---- candidate spaces ------------------------------------------------------------------------
def regular_digraphs(n: int, d: int, max_diameter: int | None = None, *,
                     two_cycles: bool = True, deadline: float | None = None) -> list[Topology]:
    """All strongly connected d-regular simple loopless digraphs on n nodes with diameter
    ≤ ``max_diameter``, one per isomorphism class.

    Generated in BFS normal form: node 0 is a root, nodes are processed in label order and each
    chooses k new children (the next k labels, one BFS level deeper) and d−k already-labelled
    targets; every strongly connected labelled graph has such a labelling, so the classes are
    complete. Only labellings whose root has the least node invariant and whose sibling new
    children have non-decreasing invariants are kept (each class still has one), then
    isomorphic duplicates are removed. ``two_cycles=False`` drops graphs with a 2-cycle.
    ``deadline``: a time.perf_counter() value after which TopofinderError is raised. Practical
    sizes on 2 cores: N ≤ 9 at d = 2 (N = 9, diameter ≤ 3: ~35 s), N ≤ 6 at d = 3.
    """
    if d < 1 or n < d + 1:
        raise TopofinderError(f"regular digraphs need 1 <= d <= N-1, got N = {n}, d = {d}")
    depth = n if max_diameter is None else max_diameter
    out = [[] for _ in range(n)]
    indeg = [0] * n
    level = [0] * n
    parent = [-1] * n
    found: list[np.ndarray] = []
    parents: list[list[int]] = []
    calls = [0]

    def rec(u: int, nxt: int) -> None:
        calls[0] += 1
        if deadline is not None and calls[0] % 4096 == 0 and time.perf_counter() > deadline:
            raise TopofinderError(f"enumerating {d}-regular digraphs on {n} nodes exceeded the "
                                  f"time budget; use a smaller N or --space dbj")
        if u == n:
            found.append(np.array([(a, b) for a in range(n) for b in out[a]], np.int64))
            parents.append(parent.copy())
            return
        if u >= nxt:          # u not reachable from node 0
            return
        for k in range(min(d, n - nxt) + 1):
            if k and level[u] + 1 > depth:
                break
            cands = [w for w in range(nxt) if w != u and indeg[w] < d
                     and (two_cycles or u not in out[w])]
            for olds in itertools.combinations(cands, d - k):
                news = list(range(nxt, nxt + k))
                out[u] = list(olds) + news
                for w in olds:
                    indeg[w] += 1
                for w in news:
                    indeg[w], level[w], parent[w] = 1, level[u] + 1, u
                rec(u + 1, nxt + k)
                for w in olds:
                    indeg[w] -= 1
                for w in news:
                    indeg[w] = 0
        out[u] = []

    rec(0, 1)
    if not found:
        return []
    dist = _batch_distances(_adjacency(found, n), depth)
    key = _node_keys(dist)
    par = np.array(parents)
    siblings = par[:, 2:] == par[:, 1:-1]
    ordered = ~np.any(siblings & (key[:, 2:] < key[:, 1:-1]), axis=1)
    rooted = key[:, 0] == key.min(axis=1)
    keep = np.flatnonzero(ordered & rooted)
    return _finish([found[i] for i in keep], n, depth, "G", dist[keep])


def _node_keys(dist: np.ndarray) -> np.ndarray:
    """Per graph and node an isomorphism-invariant integer: its out- and in-distance
    histograms (unreachable counted as its own bin) read as one base-(n+1) number."""
    g, n, _ = dist.shape
    bins = np.arange(-1, n)
    hout = (dist[:, :, :, None] == bins).sum(axis=2)          # (g, n, bins)
    hin = (dist[:, :, :, None] == bins).sum(axis=1)
    used = np.flatnonzero((hout.sum(axis=(0, 1)) + hin.sum(axis=(0, 1))) > 0)
    digits = np.concatenate([hout[:, :, used], hin[:, :, used]], axis=2)
    if digits.shape[2] * math.log2(n + 1) > 62:
        raise TopofinderError(f"node invariant too wide for N = {n}")
    weights = (n + 1) ** np.arange(digits.shape[2] - 1, -1, -1, dtype=np.int64)
    return digits @ weights


def _finish(arc_lists: list[np.ndarray], n: int, max_diameter: int, prefix: str,
            dist: np.ndarray | None = None) -> list[Topology]:
    """Drop graphs with diameter > max_diameter, keep one per isomorphism class."""
    if not arc_lists:
        return []
    if dist is None:
        dist = _batch_distances(_adjacency(arc_lists, n), max_diameter)
    ok = (dist >= 0).reshape(len(arc_lists), -1).all(axis=1)
    arcs = [a for a, keep in zip(arc_lists, ok) if keep]
    reps = _unique_up_to_isomorphism(arcs, n, dist[ok])
    return [Topology(n, a[:, 0], a[:, 1], expr=f"{prefix}#{i}") for i, a in enumerate(reps)]


def dbj_rewirings(d: int, k: int, max_diameter: int | None = None) -> list[Topology]:
    """Rewirings of DBJ(d,k) (d^k nodes): its self-loops and both arcs of each 2-cycle are
    removed and the freed nodes are joined by one long cycle (paper 001 Fig. 20 caption),
    keeping the graph simple, loopless and free of 2-cycles; one per isomorphism class with
    diameter ≤ ``max_diameter``.

    All (m−1)! cycles through the m freed nodes are tried when that is ≤ 10^5; beyond, only
    the cycles that commute with the digit-shift automorphism x_i → x_i + 1 (mod d) of DBJ
    (those with π^(m/d) a generator of the shift group).
    """
    if d < 2 or k < 2:
        raise TopofinderError(f"DBJ rewiring needs d >= 2 and k >= 2, got DBJ({d},{k})")
    n = d ** k
    arcs, bad = _dbj_arcs(d, k)
    kept = arcs - bad
    freed = dbj_freed_nodes(d, k)
    depth = n if max_diameter is None else max_diameter
    out_arcs = []
    for cycle in _cycles(freed, d, k):
        new = list(zip(cycle, cycle[1:] + cycle[:1]))
        if any((u, w) in kept or (w, u) in kept for u, w in new):
            continue
        if len(freed) == 2:
            continue      # a 2-node cycle is a 2-cycle
        out_arcs.append(np.array(sorted(kept) + new, np.int64))
    return _finish(out_arcs, n, depth, f"DBJrw({d},{k})")


def _dbj_arcs(d: int, k: int) -> tuple[set, set]:
    """DBJ(d,k)'s arcs and the subset to rewire: self-loops and both arcs of 2-cycles."""
    base = de_bruijn(d, k)
    arcs = set(zip(base.src.tolist(), base.dst.tolist()))
    return arcs, {(u, w) for u, w in arcs if u == w or (w, u) in arcs}


def dbj_freed_nodes(d: int, k: int) -> list[int]:
    """Nodes of DBJ(d,k) on a self-loop or a 2-cycle (each loses one out- and one in-arc)."""
    return sorted({u for u, _ in _dbj_arcs(d, k)[1]})


def _cycles(freed: list[int], d: int, k: int):
    """Cyclic orders of ``freed`` (first node fixed); see :func:`dbj_rewirings`."""
    m = len(freed)
    if math.factorial(m - 1) <= MAX_CYCLES:
        for rest in itertools.permutations(freed[1:]):
            yield [freed[0], *rest]
        return
    digits = (np.arange(d ** k)[:, None] // d ** np.arange(k)) % d

    def shift(x: int, s: int) -> int:
        return int((((digits[x] + s) % d) * d ** np.arange(k)).sum())

    fset = set(freed)
    if any(shift(x, 1) not in fset for x in freed) or m % d:
        raise TopofinderError(f"DBJ({d},{k}): {m} freed nodes, too many cycles to enumerate")
    orbits = {min(shift(x, s) for s in range(d)) for x in freed}
    step = m // d
    first = min(orbits)
    others = sorted(orbits - {first})
    for gen in (s for s in range(1, d) if math.gcd(s, d) == 1):
        for order in itertools.permutations(others):
            for offs in itertools.product(range(d), repeat=len(order)):
                head = [first] + [shift(o, s) for o, s in zip(order, offs)]
                cyc = [0] * m
                for j in range(m):
                    cyc[j] = shift(head[j % step], gen * (j // step))
                yield cyc


# ---- schedule search (CP-SAT) ----------------------------------------------------------------
@dataclass(frozen=True)
class ScheduleSearch:
    """Outcome of :func:`search_schedule`. ``status``: "optimal" (τ proven least among
    T-step, P-chunk schedules with integer per-step link bounds), "feasible" (time limit hit
    with a schedule, or the first schedule meeting a target), "infeasible" (proven: no such
    schedule, with τ ≤ target when a target was given), "unknown". ``lower_bound``:
    proven lower bound on τ (M/B) for such schedules, None if nothing was proven."""
    status: str
    schedule: object | None
    lower_bound: Fraction | None
    seconds: float
    steps: int
    chunks: int


def search_schedule(topo: Topology, steps: int, chunks: int, *, time_limit: float = 60.0,
                    target: Fraction | None = None, workers: int = 2,
                    seed: int = 0) -> ScheduleSearch:
    """Search an allgather step schedule on ``topo`` with ``steps`` comm steps and ``chunks``
    chunks per shard that minimises τ (CP-SAT, SCCL-style).

    Variables x[i, a, t]: item i (chunk c of v's shard) first reaches the head w of arc
    a = (u, w) over a at step t (only where dist(v, u) ≤ t−1, w ≠ v). Constraints: every node
    first receives every foreign item exactly once (extra copies never lower a load); u sends
    i at step t only if u = v or u received i at a step < t; per-step link bound
    Σ_i x[i, a, t] ≤ cap(a)·L_t. Objective: minimise Σ_t L_t, so
    τ = Σ_t L_t · d/(N·P) for unit capacities (paper 001 eq. (2) with chunked data, App. E.2).
    Symmetry breaking: the chunks of a shard reach the shard owner's first out-neighbour in
    non-decreasing step order. ``target`` (τ): stop at the first schedule with τ ≤ target.
    """
    from ortools.sat.python import cp_model


    if steps < 1 or chunks < 1:
        raise TopofinderError(f"schedule search needs steps >= 1 and chunks >= 1, got "
                              f"steps = {steps}, chunks = {chunks}")
    start = time.perf_counter()
    n, d, p = topo.n, topo.degree, chunks
    links = topo.link_matrix.tocoo()
    arc_u, arc_w, cap = links.row.astype(int), links.col.astype(int), links.data.astype(int)
    dist = topo.distances
    scale = Fraction(d, n * p)
    if np.any(dist < 0) or dist.max() > steps:
        return ScheduleSearch("infeasible", None, None, time.perf_counter() - start, steps, p)

    model = cp_model.CpModel()
    bound = [model.NewIntVar(0, p * n, f"L{t}") for t in range(1, steps + 1)]
    into: dict[tuple[int, int], list] = {}          # (item, node) -> [(t, var)]
    load: dict[tuple[int, int], list] = {}          # (arc, t) -> [var]
    sends = []                                      # (var, t, v, c, u, w)
    for v in range(n):
        for c in range(p):
            item = v * p + c
            for a, (u, w) in enumerate(zip(arc_u, arc_w)):
                if w == v:
                    continue
                for t in range(max(1, int(dist[v, u]) + 1), steps + 1):
                    x = model.NewBoolVar(f"x{item}_{a}_{t}")
                    into.setdefault((item, w), []).append((t, x))
                    load.setdefault((a, t), []).append(x)
                    sends.append((x, t, v, c, u, w))
    for (item, w), arrivals in into.items():
        model.AddExactlyOne(x for _, x in arrivals)
    for x, t, v, c, u, w in sends:
        if u != v:
            model.Add(x <= sum(y for s, y in into[(v * p + c, u)] if s < t))
    for (a, t), xs in load.items():
        model.Add(sum(xs) <= int(cap[a]) * bound[t - 1])
    for v in range(n):
        w0 = int(arc_w[np.flatnonzero(arc_u == v)[0]])
        arrive = [sum(t * x for t, x in into[(v * p + c, w0)]) for c in range(p)]
        for c in range(p - 1):
            model.Add(arrive[c] <= arrive[c + 1])
    total = sum(bound)
    floor = -(-n * (n - 1) * p // int(cap.sum()))   # every step moves ≤ L_t·Σcap items
    model.Add(total >= floor)
    if target is not None:
        model.Add(total <= math.floor(Fraction(target) / scale))
    model.Minimize(total)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    if target is not None:
        solver.parameters.stop_after_first_solution = True
    code = solver.Solve(model)
    seconds = time.perf_counter() - start
    if code == cp_model.INFEASIBLE:
        return ScheduleSearch("infeasible", None, None, seconds, steps, p)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ScheduleSearch("unknown", None, None, seconds, steps, p)
    rows = [(t, v, c, c + 1, u, w) for x, t, v, c, u, w in sends if solver.BooleanValue(x)]
    schedule = StepSchedule(topo, p, _merge_chunks(rows), method="catalog-search")
    proven = max(floor, math.ceil(solver.BestObjectiveBound() - 1e-9))
    status = "optimal" if code == cp_model.OPTIMAL and target is None else "feasible"
    return ScheduleSearch(status, schedule, proven * scale, seconds, steps, p)


def _merge_chunks(rows: list[tuple]) -> np.ndarray:
    """(t, v, c, c+1, u, w) rows with consecutive chunks on the same (t, v, u, w) merged."""
    rows = sorted(rows, key=lambda r: (r[0], r[1], r[4], r[5], r[2]))
    out: list[list[int]] = []
    for t, v, lo, hi, u, w in rows:
        last = out[-1] if out else None
        if last and (last[0], last[1], last[4], last[5]) == (t, v, u, w) and last[3] == lo:
            last[3] = hi
        else:
            out.append([t, v, lo, hi, u, w])
    return np.array(out, dtype=np.int64).reshape(-1, 6)


# ---- the build -------------------------------------------------------------------------------
SOURCE_NOTE = ("search-found equivalent of the paper's figure (same N, d, T_L, tau), "
               "not a copy of it")

PRESETS: dict[str, dict] = {
    "Diamond": dict(space="all", n=8, d=2, steps=3, chunks=2, reverse_symmetric=True,
                    source="paper 001 Fig. 19, Table 9 (Diamond, N=8, d=2)"),
    "DBJMod(2,3)": dict(space="dbj", n=8, d=2, steps=4, chunks=2,
                        source="paper 001 Fig. 20, Table 9 (DBJMod(2,3), T_L=4)"),
    "DBJMod(2,4)": dict(space="dbj", n=16, d=2, steps=5, chunks=2,
                        source="paper 001 Table 9 (DBJMod(2,4), T_L=5, BW-optimal)"),
    "DBJMod(3,2)": dict(space="dbj", n=9, d=3, steps=3, chunks=3,
                        source="paper 001 Table 9 (DBJMod(3,2), T_L=3)"),
    "DBJMod(4,2)": dict(space="dbj", n=16, d=4, steps=3, chunks=4,
                        source="paper 001 Table 9 (DBJMod(4,2), T_L=3)"),
}
SPACES = ("all", "dbj")
MAX_ALL_NODES = 10


@dataclass
class BuildResult:
    """What :func:`build` found: the chosen base (renamed ``name``) with its schedule, the
    candidate counts, one row per schedule search, and the wall time in seconds."""
    name: str | None
    topology: Topology | None
    schedule: object | None
    candidates: int
    skipped_bfb_optimal: int
    searches: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    path: str | None = None
    reverse_symmetric_only: bool = False

    def summary(self) -> dict:
        s = self.schedule
        return {"name": self.name, "found": s is not None,
                "N": None if s is None else self.topology.n,
                "d": None if s is None else self.topology.degree,
                "T_L": None if s is None else s.num_steps,
                "tau": None if s is None else exact(s.tau),
                "bw_optimal": None if s is None else s.tau == Fraction(self.topology.n - 1,
                                                                       self.topology.n),
                "arcs": None if s is None else np.stack(
                    [self.topology.src, self.topology.dst], 1).tolist(),
                "candidates": self.candidates,
                "skipped_bfb_optimal": self.skipped_bfb_optimal,
                "searches": self.searches, "seconds": round(self.seconds, 3),
                "path": self.path}


def candidate_space(space: str, n: int, d: int, steps: int,
                    deadline: float | None = None) -> list[Topology]:
    """The candidates of ``space`` with diameter ≤ ``steps``: "all" = every d-regular simple
    loopless digraph on n nodes (N ≤ 10); "dbj" = the rewirings of DBJ(d, k), d^k = n."""
    if space == "all":
        if n > MAX_ALL_NODES:
            raise TopofinderError(f"catalog build: --space all enumerates every {d}-regular "
                                  f"digraph and is limited to N <= {MAX_ALL_NODES} (got "
                                  f"N = {n}); use --space dbj for larger N")
        return regular_digraphs(n, d, steps, deadline=deadline)
    if space == "dbj":
        k = round(math.log(n, d)) if d >= 2 else 0
        if d < 2 or d ** k != n or k < 2:
            raise TopofinderError(f"catalog build: --space dbj needs N = d^k with d >= 2 and "
                                  f"k >= 2 (got N = {n}, d = {d})")
        return dbj_rewirings(d, k, steps)
    raise TopofinderError(f"catalog build: unknown space {space!r}; accepted: "
                          f"{', '.join(SPACES)}")


def build(*, space: str, n: int, d: int, steps: int, chunks: int, name: str | None = None,
          reverse_symmetric: bool = False, target: Fraction | None = None,
          time_limit: float = 60.0, budget: float = 600.0, workers: int = 2,
          search_all: bool = False, progress=None) -> BuildResult:
    """Find a base of N = ``n`` nodes and degree ``d`` with a ``steps``-step schedule of
    τ ≤ ``target`` (default BW-optimal (N−1)/N) that BFB does not reach.

    Candidates (``space``; only reverse-symmetric ones if asked) with diameter ≤ steps whose
    BFB τ already meets the target are skipped as BFB bases; the rest are tried in order
    (reverse-symmetric first, then by BFB τ) with :func:`search_schedule` (``time_limit`` s
    each, ``budget`` s in all), stopping at the first that meets the target unless
    ``search_all``. The best schedule found is returned with its topology renamed ``name``.
    """

    if n < 2 or d < 1 or steps < 1 or chunks < 1:
        raise TopofinderError(f"catalog build needs N >= 2, d >= 1, steps >= 1, chunks >= 1; "
                              f"got N = {n}, d = {d}, steps = {steps}, chunks = {chunks}")
    start = time.perf_counter()
    goal = Fraction(n - 1, n) if target is None else Fraction(target)
    pool = []
    for cand in candidate_space(space, n, d, steps, deadline=start + budget):
        rev = find_reverse_isomorphism(cand) is not None
        if reverse_symmetric and not rev:
            continue
        pool.append((not rev, bfb_tau(cand), len(pool), cand))
    pool.sort(key=lambda row: row[:3])
    tried = [row for row in pool if row[1] > goal]
    result = BuildResult(name, None, None, len(pool), len(pool) - len(tried),
                         reverse_symmetric_only=reverse_symmetric)
    best = None
    for _, tau_bfb, _, cand in tried:
        left = budget - (time.perf_counter() - start)
        if left <= 0:
            break
        found = search_schedule(cand, steps, chunks, time_limit=min(time_limit, left),
                                target=goal, workers=workers)
        row = {"candidate": cand.expr, "diameter": cand.diameter, "tau_bfb": exact(tau_bfb),
               "status": found.status, "seconds": round(found.seconds, 3),
               "tau": None if found.schedule is None else exact(found.schedule.tau)}
        result.searches.append(row)
        if progress:
            progress(row)
        if found.schedule is not None and (best is None or found.schedule.tau < best[1].tau):
            best = (cand, found.schedule)
        if best is not None and best[1].tau <= goal and not search_all:
            break
    if best is not None:
        cand, sched = best
        topo = cand.renamed(name) if name else cand
        result.topology = topo
        result.schedule = StepSchedule(topo, sched.shard_chunks, sched.sends,
                                       method="catalog-search")
    result.seconds = time.perf_counter() - start
    return result


def write_result(result: BuildResult, command: str, source: str, space: str,
                 directory=None) -> str:
    """Write the found base as catalog entry ``result.name`` via
    :func:`topofinder.families.catalog.write_entry` (which validates the schedule); returns the
    path."""

    if result.schedule is None or not result.name:
        raise TopofinderError("catalog build: nothing to write (no schedule found or no name)")
    sched = result.schedule
    n, d, steps = sched.topology.n, sched.topology.degree, sched.num_steps
    if space == "all":
        method = f"exhaustive enumeration of all {d}-regular simple loopless digraphs on {n} nodes"
    else:
        k = round(math.log(n, d))
        method = (f"rewirings of DBJ({d},{k}): self-loops and 2-cycles removed, the freed "
                  f"nodes joined by one long cycle (Fig. 20 caption)")
        if math.factorial(len(dbj_freed_nodes(d, k)) - 1) > MAX_CYCLES:
            method += ", only cycles commuting with the digit-shift automorphism"
    kind = "reverse-symmetric candidates" if result.reverse_symmetric_only else "candidates"
    method += (f"; {result.candidates} {kind} up to isomorphism with diameter <= {steps}, "
               f"ordered by BFB tau, BFB-optimal ones skipped; schedule by CP-SAT with {steps} "
               f"steps and {sched.shard_chunks} chunks per shard (first-arrival model, "
               f"integer per-step link bounds)")
    provenance = {"command": command, "method": method,
                  "source": f"{source}; {SOURCE_NOTE}",
                  "seconds": round(result.seconds, 3),
                  "candidates": result.candidates,
                  "skipped_bfb_optimal": result.skipped_bfb_optimal,
                  "schedule_searches": len(result.searches)}
    path = write_entry(sched.topology, sched, provenance, directory)
    result.path = str(path)
    return result.path


def resolve(name: str | None, **overrides) -> dict:
    """Build parameters: the preset ``name`` (a key of :data:`PRESETS`) with ``overrides``
    (None values ignored); without a preset, n, d, steps and chunks must be given."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if name in PRESETS:
        params = {**PRESETS[name], "name": name, **given}
    else:
        params = {"space": "all", "source": "topofinder catalog build", "name": name, **given}
        missing = [k for k in ("n", "d", "steps", "chunks") if k not in params]
        if missing:
            raise TopofinderError(
                f"catalog build: {name!r} is not a preset ({', '.join(PRESETS)}); a custom "
                f"search needs --{' --'.join(missing)}" if name else
                f"catalog build: give a preset ({', '.join(PRESETS)}) or --n, --d, --steps "
                f"and --chunks")
    _check(params)
    return params


#: Limits of one build: the CP-SAT model has ~N²·d·steps·chunks variables, and the
#: enumeration of regular digraphs is exhaustive only for small N.
MAX_BUILD = {"n": 64, "d": 16, "steps": 16, "chunks": 64}


def _check(params: dict) -> None:
    """Refuse parameters that cannot give an answer before any work starts."""
    for key, top in MAX_BUILD.items():
        value = params.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise TopofinderError(f"catalog build: --{key} must be an integer in 1..{top}, "
                                  f"got {value!r}")
    n = params["n"]
    if n < 2 or params["d"] >= n:
        raise TopofinderError(f"catalog build: needs N >= 2 and d < N, got N = {n}, "
                              f"d = {params['d']}")
    for key in ("time_limit", "budget"):
        value = params.get(key)
        if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1e7):
            raise TopofinderError(f"catalog build: --{key.replace('_', '-')} must be a "
                                  f"positive number of seconds, got {value!r}")
    target = params.get("target")
    if target is not None:
        try:
            tau = Fraction(target)
        except (TypeError, ValueError, ZeroDivisionError):
            raise TopofinderError(f"catalog build: --target {target!r} is not a number such "
                                  f"as 7/8") from None
        if tau < Fraction(n - 1, n):
            raise TopofinderError(f"catalog build: --target {target} is below the bandwidth "
                                  f"optimum (N-1)/N = {n - 1}/{n}, which no allgather beats")
    name = params.get("name")
    if name is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9(),{} ]{0,63}", str(name)):
        raise TopofinderError(f"catalog build: --name {name!r} must be an expression-like "
                              f"name such as 'DBJMod(2,4)' (letters, digits, (),{{}})")


def command_line(params: dict) -> str:
    """The explicit `topofinder catalog build` command that repeats a build."""
    parts = ["topofinder catalog build", f"--space {params['space']}", f"--n {params['n']}",
             f"--d {params['d']}", f"--steps {params['steps']}", f"--chunks {params['chunks']}"]
    if params.get("reverse_symmetric"):
        parts.append("--reverse-symmetric")
    if params.get("target") is not None:
        parts.append(f"--target {params['target']}")
    for key in ("time_limit", "budget"):
        if params.get(key) is not None:
            parts.append(f"--{key.replace('_', '-')} {params[key]:g}")
    if params.get("search_all"):
        parts.append("--all")
    if params.get("name"):
        parts.append(f"--name '{params['name']}'")
    return " ".join(parts)


def run(name: str | None, *, write: bool = True, directory=None, progress=None,
        **overrides) -> dict:
    """Resolve, build and (with a name, if a schedule was found and ``write``) write one
    catalog entry; returns the build summary with the command that reproduces it."""
    params = resolve(name, **overrides)
    command = command_line(params)
    source = params.pop("source")
    if params.get("target") is not None:
        params["target"] = Fraction(params["target"])
    result = build(progress=progress, **params)
    if write and result.schedule is not None and result.name:
        write_result(result, command, source, params["space"], directory)
    return {"command": command, **result.summary()}
