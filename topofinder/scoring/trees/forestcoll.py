"""ForestColl (paper 002 §4–5, Appendix E; docs/algorithms.md): the exact allgather throughput
optimum of a direct-connect topology, its bottleneck cut, and spanning out-tree schedules reaching
it.

Units: link capacities C(u,w) in capacity units (units of b, or physical units such as GB/s
when the input states them; multi-arcs summed, self-loops carry nothing); B = the node
bandwidth (a compute node's summed link capacity, Topology.node_bandwidth; d·b on a
homogeneous d-regular fabric). N = |V_c| compute nodes; switch nodes V_s relay only. With

    ratio* = max_{S ⊂ V, S ⊉ V_c} |S ∩ V_c| / C⁺(S)      (optimality (⋆), 1/capacity unit)
    T_B^FC = (M/N)·ratio* = (B/N)·ratio*   [M/B].

On a switched fabric the trees are packed on the compute-only graph G* that edge splitting
(topofinder.scoring.trees.switch_split, paper 002 §5.3) leaves, and mapped back to routes
through switches.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from math import gcd

import numpy as np

from topofinder.scoring.allgather.bfb import bfb_schedule, bfb_score
from topofinder.compute.parallel import run_parallel
from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology
from topofinder.scoring.trees.greedy_trees import greedy_pack
from topofinder.scoring.trees.step_trees import trees_from_steps
from topofinder.scoring.trees.switch_split import split_switches
from topofinder.scoring.links import Links, connected_links
from topofinder.scoring.symmetry import topology_group
from topofinder.model.tree_schedule import Tree, TreeSchedule


#: From this many sinks on only one per automorphism orbit is probed (bliss: ~1 s at
#: N = 10^4, ~1.5 ms per max-flow there) ...
SYMMETRY_MIN_SINKS = 1000
#: ... and from this many the sinks are shared among the cores (loky start-up ~1 s).
PARALLEL_MIN_SINKS = 4000


# ---- links and the max-flow oracle --------------------------------------------------------
def _links(topo: Topology) -> Links:
    """The merged links (topofinder.scoring.links) of a strongly connected topology, else
    TopofinderError (some cut would have no exiting capacity)."""
    return connected_links(topo, "some nodes can never receive every shard, so no allgather "
                                 "throughput exists")


def _cut_capacity(members: np.ndarray, src, dst, cap) -> int:
    """C⁺(S) for a boolean membership vector."""
    return int(cap[members[src] & ~members[dst]].sum())


class _RootedOracle:
    """The auxiliary network G_x of 002 App. E.1: super-source s = n with an arc s→c of
    capacity x to every compute node c. Theorem 1: min_{v ∈ V_c} F(s, v) ≥ N·x iff
    x·|S ∩ V_c| ≤ C⁺(S) for all S ⊉ V_c. Capacities are kept integral by scaling (arcs
    ``link_scale``·C, source arcs ``x_num``)."""

    def __init__(self, n: int, src, dst, cap, compute=None):
        from ortools.graph.python import max_flow   # heavy; loaded on the first max-flow

        self.n, self.cap = n, cap
        compute = np.arange(n) if compute is None else np.asarray(compute)
        self.compute = compute.astype(np.int32)
        self.mf = max_flow.SimpleMaxFlow()
        self.mf.add_arcs_with_capacity(src, dst, cap)
        self.mf.add_arcs_with_capacity(np.full(compute.size, n, np.int32), self.compute,
                                       np.zeros(compute.size, np.int64))
        self._link_arcs = np.arange(cap.size, dtype=np.int32)
        self._source_arcs = np.arange(cap.size, cap.size + compute.size, dtype=np.int32)
        self.solves = 0
        self.need = 0

    def set_capacities(self, link_caps: np.ndarray, source_cap: int) -> None:
        self.mf.set_arcs_capacity(self._link_arcs, np.asarray(link_caps, np.int64))
        self.mf.set_arcs_capacity(self._source_arcs,
                                  np.full(self.compute.size, source_cap, np.int64))
        self.need = int(self.compute.size) * source_cap

    def violated_cut(self, v: int) -> np.ndarray | None:
        """None if F(s, v) ≥ N·x, else the source side S ∌ v of a minimum s–v cut (it
        maximises x·|S| − C⁺(S) over S ∌ v), as a boolean membership vector."""
        status = self.mf.solve(self.n, v)
        self.solves += 1
        if status != self.mf.OPTIMAL:
            raise RuntimeError(f"max-flow failed with status {status}")
        if self.mf.optimal_flow() >= self.need:
            return None
        side = np.asarray(self.mf.get_source_side_min_cut(), np.int64)
        members = np.zeros(self.n, bool)
        members[side[side < self.n]] = True
        return members

    def feasible(self, nodes) -> bool:
        return all(self.violated_cut(v) is None for v in nodes)


def _bisect(lo: Fraction, hi: Fraction, feasible, resolution: Fraction):
    """Shrink [lo, hi] (lo infeasible, hi feasible) by halving until it is narrower than
    ``resolution`` (the bisection of paper 002 Algorithms 1 and 5)."""
    while hi - lo >= resolution:
        mid = (lo + hi) / 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def _probe_nodes(topo: Topology, src, dst, cap, dominate: bool = True):
    """Sinks whose max-flows decide Theorem 1 (the in-dominating set when ``dominate``: only
    at x ≤ δ⁻/(N−1), i.e. λ at least the single-node ratio).

    Vertex-transitive without switches: one node (an automorphism moves a node outside any S
    onto it). Unit-capacity links without switches: an in-dominating set D (every node is in D
    or has an in-neighbour in D). Proof: a violated S has C⁻(T) = C⁺(S) < x|S| ≤ x(N−1) ≤ δ⁻
    (min in-capacity) for T = V∖S. Were every t ∈ T fed by some node of S, either |T| ≥ δ⁻
    and C⁻(T) ≥ |T| ≥ δ⁻, or |T| < δ⁻ and C⁻(T) ≥ |T|δ⁻ − |T|(|T|−1) ≥ δ⁻ (at most one arc
    per ordered pair inside T); so some t ∈ T has every in-neighbour in T, D meets t's closed
    in-neighbourhood inside T, and the max-flow to that sink finds S. Otherwise every compute
    node."""
    nodes = topo.compute_nodes
    if topo.has_switches:
        return nodes.tolist()
    if topo.vertex_transitive:
        return nodes[:1].tolist()
    if dominate and np.all(cap == 1):
        return in_dominating_set(topo.n, src, dst)
    return nodes.tolist()


def in_dominating_set(n: int, src, dst) -> list[int]:
    """A greedy in-dominating set: nodes in order; an uncovered node t is covered by whichever
    of t and its in-neighbours covers most uncovered nodes (itself and its out-neighbours)."""
    order = np.argsort(src, kind="stable")
    out_ptr = np.searchsorted(src[order], np.arange(n + 1))
    out = dst[order].tolist()
    in_order = np.argsort(dst, kind="stable")
    in_ptr = np.searchsorted(dst[in_order], np.arange(n + 1))
    inn = src[in_order].tolist()
    out_ptr, in_ptr = out_ptr.tolist(), in_ptr.tolist()
    covered = [False] * n
    chosen = []
    for t in range(n):
        if covered[t]:
            continue
        best, gain = t, -1
        for c in [t] + inn[in_ptr[t]:in_ptr[t + 1]]:
            g = (not covered[c]) + sum(not covered[w] for w in out[out_ptr[c]:out_ptr[c + 1]])
            if g > gain:
                best, gain = c, g
        chosen.append(best)
        covered[best] = True
        for w in out[out_ptr[best]:out_ptr[best + 1]]:
            covered[w] = True
    return chosen


def _scale(topo: Topology) -> Fraction:
    """B/N: τ in M/B per unit of ratio (module docstring)."""
    return Fraction(topo.node_bandwidth, topo.num_compute)


# ---- the optimum ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Optimum:
    """``ratio`` = max |S|/C⁺(S) = 1/x* (002 optimality (⋆), capacities in b); ``tau`` =
    T_B^FC in M/B; ``cut`` a bottleneck cut S (sorted nodes) with ``cut_capacity`` = C⁺(S);
    ``maxflows``: max-flow solves used. ``bandwidth`` = B and ``unit`` its capacity unit.
    A cut S may contain switches; ``cut_size`` counts its compute nodes |S ∩ V_c|.
    ``settled`` False: a time limit stopped the max-flows after ``sinks`` = (settled, total);
    ``ratio`` is then only a lower bound (a real cut) and ``upper`` (a known schedule's
    ratio, if any) an upper bound."""

    ratio: Fraction
    tau: Fraction
    cut: tuple[int, ...]
    cut_capacity: int
    maxflows: int
    bandwidth: int = 0
    unit: str | None = None
    cut_compute: int | None = None
    settled: bool = True
    upper: Fraction | None = None
    sinks: tuple[int, int] | None = None

    @property
    def cut_size(self) -> int:
        return len(self.cut) if self.cut_compute is None else self.cut_compute


def throughput_optimum(topo: Topology, achieved: Fraction | None = None, jobs: int | None = None,
                       progress=None, time_limit: float | None = None,
                       min_cut: int | None = None) -> Optimum:
    """Exact T_B^FC and a bottleneck cut by a Dinkelbach (Newton) iteration on Theorem 1.

    ``achieved``: the ratio (max load per unit capacity, in shards) of any tree-flow
    allgather schedule already known, e.g. BFBScore.pipelined_load; it bounds ratio* from
    above, so when it equals the best starting cut no max-flow is needed.

    Start from the best of the cuts V−{v} and {u}. For each sink v: solve F(s, v) at the
    current ratio λ = p/q (x = q/p; arcs scaled by p); a deficit gives the cut S ∌ v that
    maximises x|S| − C⁺(S), whose ratio |S|/C⁺(S) > λ becomes the new λ; repeat at v until
    it passes. A sink that passes at λ passes at every larger λ, so each sink is settled
    once and the final λ is exact. Many sinks (large non-vertex-transitive topologies): one
    per automorphism orbit (F(s, h·v) = F(s, v)), split over ``jobs`` workers that each run
    this iteration on their share; the largest ratio they end at is the optimum, since every
    sink passes there. ``progress(done, total)`` hears how many sinks (or shares) are done.
    ``time_limit`` (s): stop probing then; the result is the best cut found, a lower bound
    (``settled`` False, ``upper`` = ``achieved``), unless every sink was settled in time.

    ``min_cut``: a proven lower bound on C⁺(S) over every ∅ ≠ S ⊊ V of a switchless
    topology (e.g. 2 on DBT(m), two spanning trees: each tree has an edge across any cut, a
    link of capacity 1 per tree holding it, both ways). When it is at least the least
    in-capacity δ⁻ and V − {v} is the best starting cut, that cut is optimal without a
    max-flow: an S with |S|/C⁺(S) > (N−1)/δ⁻ would have C⁺(S) < δ⁻·|S|/(N−1) ≤ δ⁻.
    """
    links = _links(topo)
    src, dst, cap = links.tail, links.head, links.cap
    n, compute = topo.n, topo.compute_nodes
    nc = compute.size
    in_cap = np.bincount(dst, cap, minlength=n).astype(np.int64)
    out_cap = np.bincount(src, cap, minlength=n).astype(np.int64)
    v_in = int(compute[np.argmin(in_cap[compute])])
    u_out = int(compute[np.argmin(out_cap[compute])])
    best = Fraction(nc - 1, int(in_cap[v_in]))
    cut = np.ones(n, bool)
    cut[v_in] = False
    if Fraction(1, int(out_cap[u_out])) > best:
        best = Fraction(1, int(out_cap[u_out]))
        cut = np.zeros(n, bool)
        cut[u_out] = True
    if min_cut is not None and not topo.has_switches and int(cut.sum()) == n - 1 \
            and min_cut >= in_cap[v_in]:
        return _optimum(topo, best, cut, src, dst, cap, 0)
    if achieved is not None and achieved <= best:
        if achieved < best:
            raise RuntimeError("a schedule beats a cut bound: the schedule is invalid")
        return _optimum(topo, best, cut, src, dst, cap, 0)
    sinks = np.asarray(_probe_nodes(topo, src, dst, cap))
    if sinks.size >= SYMMETRY_MIN_SINKS:
        orbit = topology_group(topo).orbits()
        sinks = sinks[np.sort(np.unique(orbit[sinks], return_index=True)[1])]
    sinks = sinks.tolist()
    deadline = None if time_limit is None else time.time() + time_limit
    if len(sinks) < PARALLEL_MIN_SINKS or jobs == 1:
        found = [_dinkelbach(n, src, dst, cap, compute, sinks, best, cut, progress, deadline)]
    else:
        parts = np.array_split(np.asarray(sinks), 8 * (os.cpu_count() or 1))
        found = run_parallel(_dinkelbach, [(n, src, dst, cap, compute, p.tolist(), best, cut,
                                            None, deadline) for p in parts],
                             jobs=jobs, progress=progress, label="ForestColl max-flows")
    best, cut = max(found, key=lambda f: f[0])[:2]
    settled = sum(f[3] for f in found)
    opt = _optimum(topo, best, cut, src, dst, cap, sum(f[2] for f in found))
    if settled < len(sinks):
        opt = replace(opt, settled=False, upper=achieved, sinks=(settled, len(sinks)))
    return opt


def _dinkelbach(n, src, dst, cap, compute, sinks, best: Fraction, cut: np.ndarray,
                progress=None, deadline: float | None = None):
    """Settle ``sinks`` one by one from ratio ``best`` (cut ``cut``) until wall-clock
    ``deadline``: (final ratio, its cut, max-flows, sinks settled). Every settled sink passes
    at the final ratio, and at any larger one."""
    is_comp = np.zeros(n, bool)
    is_comp[compute] = True
    oracle = _RootedOracle(n, src, dst, cap, compute)
    current = None
    settled = 0
    for i, v in enumerate(sinks):
        if deadline is not None and time.time() > deadline:
            break
        while True:
            if current != best:
                oracle.set_capacities(cap * best.numerator, best.denominator)
                current = best
            members = oracle.violated_cut(v)
            if members is None:
                break
            ratio = Fraction(int(members[is_comp].sum()), _cut_capacity(members, src, dst, cap))
            if ratio <= best:
                raise RuntimeError("max-flow deficit without a better cut")
            best, cut = ratio, members
        settled += 1
        if progress is not None and i % 256 == 255:
            progress(i + 1, len(sinks))
    return best, cut, oracle.solves, settled


def _optimum(topo: Topology, ratio: Fraction, cut: np.ndarray, src, dst, cap,
             solves: int) -> Optimum:
    return Optimum(ratio, _scale(topo) * ratio, tuple(np.flatnonzero(cut).tolist()),
                   _cut_capacity(cut, src, dst, cap), solves, topo.node_bandwidth,
                   topo.capacity_unit, int(cut[~topo.is_switch].sum()))


def tau_fc(topo: Topology) -> Fraction:
    """T_B^FC in M/B (exact)."""
    return throughput_optimum(topo).tau


def ratio_by_networkx_bisection(topo: Topology) -> Fraction:
    """Baseline for the bench: Algorithm 1 of 002 as written — bisection on 1/x with one
    networkx max-flow per sink (stopping at the first deficit), then the unique fraction with
    denominator ≤ X = min_v B⁻(v) nearest the midpoint (App. E.1). Returns ratio*."""
    import networkx as nx

    links = _links(topo)
    src, dst, cap = links.tail, links.head, links.cap
    n = topo.n
    x_max = int(np.bincount(dst, cap, minlength=n).min())
    lo, hi = Fraction(n - 1, x_max), Fraction(n - 1)

    def feasible(r: Fraction) -> bool:          # x = 1/r, everything scaled by r.numerator
        g = nx.DiGraph()
        for u, w, c in zip(src.tolist(), dst.tolist(), cap.tolist()):
            g.add_edge(u, w, capacity=c * r.numerator)
        for u in range(n):
            g.add_edge("s", u, capacity=r.denominator)
        return all(nx.maximum_flow_value(g, "s", v) >= n * r.denominator for v in range(n))

    lo, hi = _bisect(lo, hi, feasible, Fraction(1, x_max * x_max))
    return ((lo + hi) / 2).limit_denominator(x_max)


# ---- trees per root and bandwidth per tree (App. E.1) ---------------------------------------
@dataclass(frozen=True)
class TreeParameters:
    """k trees per root, each of bandwidth y (units of b), using U·C(e) trees on link e:
    U/k = ratio*, U = p / gcd(q, {C(e)}) for ratio* = p/q (002 App. E.1)."""

    U: Fraction
    k: int
    y: Fraction


def tree_parameters(topo: Topology, optimum: Optimum | None = None) -> TreeParameters:
    opt = optimum or throughput_optimum(topo)
    cap = _links(topo).cap
    p, q = opt.ratio.numerator, opt.ratio.denominator
    g = gcd(q, *map(int, np.unique(cap)))
    return TreeParameters(Fraction(p, g), q // g, Fraction(g, p))


# ---- fixed k (App. E.4) ---------------------------------------------------------------------
@dataclass(frozen=True)
class FixedK:
    """Best schedule with exactly k trees per root: link e carries ⌊U·C(e)⌋ trees; time
    ``tau`` = (d/N)·U/k M/B; ``bound`` = Thm 13's (d/N)·(ratio* + 1/(k·min C)) ≥ tau."""

    k: int
    U: Fraction
    tau: Fraction
    bound: Fraction


#: Most trees per root of a fixed-k schedule (N·k trees are built; capacities ⌊U·C(e)⌋ with
#: U ≤ (N−1)k stay inside int64).
MAX_TREES_PER_ROOT = 4096


def _floor_caps(U: Fraction, cap: np.ndarray) -> np.ndarray:
    """⌊U·C(e)⌋ for every link, exact (in Python integers when C·numerator passes int64)."""
    if U.numerator * int(cap.max(initial=0)) < 2 ** 63:
        return (cap * U.numerator) // U.denominator
    return np.array([(int(c) * U.numerator) // U.denominator for c in cap.tolist()], np.int64)


def fixed_k_optimum(topo: Topology, k: int, optimum: Optimum | None = None) -> FixedK:
    """Algorithm 5 of 002: bisection on U in [(N−1)k / min B⁻, (N−1)k] with the oracle of
    Theorem 3/12 (source arcs k, link e capacity ⌊U·C(e)⌋, need F(s,v) ≥ N·k), until the
    range is below 1/X² (X = max C); then U* is the largest breakpoint j/C(e) ≤ the feasible
    end (distinct breakpoints differ by ≥ 1/X², and feasibility only changes at them)."""
    if not isinstance(k, int) or not 1 <= k <= MAX_TREES_PER_ROOT:
        raise TopofinderError(f"fixed-k needs a positive integer number of trees per root "
                              f"in 1..{MAX_TREES_PER_ROOT}, got {k!r}")
    links = _links(topo)
    src, dst, cap = links.tail, links.head, links.cap
    n, nc = topo.n, topo.num_compute
    opt = optimum or throughput_optimum(topo)
    x_max = int(cap.max())
    oracle = _RootedOracle(n, src, dst, cap, topo.compute_nodes)
    nodes = _probe_nodes(topo, src, dst, cap, dominate=False)

    def feasible(U: Fraction) -> bool:
        oracle.set_capacities(_floor_caps(U, cap), k)
        return oracle.feasible(nodes)

    min_in = int(np.bincount(dst, cap, minlength=n)[topo.compute_nodes].min())
    lo = Fraction((nc - 1) * k, min_in) - Fraction(1, 2 * x_max * x_max)  # below U*: infeasible
    hi = Fraction((nc - 1) * k)                                         # always feasible
    lo, hi = _bisect(lo, hi, feasible, Fraction(1, x_max * x_max))
    U = max(Fraction((hi.numerator * int(c)) // hi.denominator, int(c)) for c in np.unique(cap))
    scale = _scale(topo)
    return FixedK(k, U, scale * U / k, scale * (opt.ratio + Fraction(1, k * int(cap.min()))))


# ---- spanning out-tree packing (App. E.3, Algorithm 4) ----------------------------------------
class TreeBatch:
    """m identical partial out-trees rooted at ``root``: vertex set ``members`` (R_i), tree
    edges, hop depth of each member (−1 outside)."""

    __slots__ = ("root", "m", "members", "size", "edges", "depth")

    def __init__(self, root: int, m: int, n: int):
        self.root, self.m, self.size, self.edges = root, m, 1, []
        self.members = np.zeros(n, bool)
        self.members[root] = True
        self.depth = np.full(n, -1, np.int64)
        self.depth[root] = 0

    def copy(self, m: int) -> "TreeBatch":
        c = TreeBatch.__new__(TreeBatch)
        c.root, c.m, c.size, c.edges = self.root, m, self.size, list(self.edges)
        c.members, c.depth = self.members.copy(), self.depth.copy()
        return c


class BatchedTreePacker:
    """Bérczi–Frank packing with batched trees: grow each batch R_1 by an arc (x, y),
    x ∈ R_1, y ∉ R_1, on μ of its m copies, where (Thm 10 of 002)

        μ = min{ g(x,y), m(R_1), F(x, y; D̄) − Σ_{i≠1} m(R_i) }

    and D̄ is the remaining-capacity graph plus, for every other open batch R_i, a node s_i
    with an arc x→s_i of capacity m(R_i) and arcs s_i→R_i of infinite capacity. Batches that
    contain y (all completed ones among them) add exactly m(R_i) to F and are left out;
    a singleton R_i = {r} needs no s_i (arc x→r). If μ < m the batch splits (μ copies take
    the arc). Optional orbit budgets restrict the arc choice for the symmetric mode.

    ``n`` nodes, links ``src``→``dst`` with ``g`` tree slots each (integers); :meth:`pack`
    returns the completed batches (:class:`TreeBatch`, each spanning every node) or None."""

    def __init__(self, n, src, dst, g, prefer_low: bool, orbit=None, budget=None):
        self.n, self.src, self.dst = n, src, dst
        self.g = np.array(g, np.int64)
        self.prefer_low = prefer_low
        self.orbit, self.budget = orbit, budget
        self.single = np.zeros(n, np.int64)      # Σ m of open singleton batches per root
        self.multi: list[TreeBatch] = []            # open batches with > 1 member
        self.maxflows = 0

    def _open(self, b: TreeBatch) -> None:
        if b.size == 1:
            self.single[b.root] += b.m
        else:
            self.multi.append(b)

    def _close(self, b: TreeBatch) -> None:
        if b.size == 1:
            self.single[b.root] -= b.m
        else:
            self.multi.remove(b)

    def _mu(self, b: TreeBatch, e: int) -> int:
        n, x, y = self.n, int(self.src[e]), int(self.dst[e])
        live = self.g > 0
        tails, heads, caps = [self.src[live]], [self.dst[live]], [self.g[live]]
        single = self.single.copy()
        single[y] = 0
        minus = int(single.sum())
        single[x] = 0
        roots = np.flatnonzero(single).astype(np.int32)
        tails.append(np.full(roots.size, x, np.int32)); heads.append(roots)
        caps.append(single[roots])
        others = [c for c in self.multi if not c.members[y]]
        inf = int(self.g.sum()) + minus + sum(c.m for c in others) + 1
        for i, c in enumerate(others):
            aux = n + i
            minus += c.m
            mem = np.flatnonzero(c.members).astype(np.int32)
            tails += [np.array([x], np.int32), np.full(mem.size, aux, np.int32)]
            heads += [np.array([aux], np.int32), mem]
            caps += [np.array([c.m], np.int64), np.full(mem.size, inf, np.int64)]
        from ortools.graph.python import max_flow

        mf = max_flow.SimpleMaxFlow()
        mf.add_arcs_with_capacity(np.concatenate(tails).astype(np.int32),
                                  np.concatenate(heads).astype(np.int32),
                                  np.concatenate(caps).astype(np.int64))
        if mf.solve(x, y) != mf.OPTIMAL:
            raise RuntimeError("max-flow failed while packing trees")
        self.maxflows += 1
        mu = min(int(self.g[e]), b.m, mf.optimal_flow() - minus)
        if self.budget is not None:
            mu = min(mu, int(self.budget[self.orbit[e]]))
        return max(mu, 0)

    def _choose(self, b: TreeBatch, failed: np.ndarray) -> int:
        src, dst, g = self.src, self.dst, self.g
        cand = b.members[src] & ~b.members[dst] & (g > 0) & ~failed
        if self.budget is not None:
            cand &= self.budget[self.orbit] > 0
        idx = np.flatnonzero(cand)
        if idx.size == 0:
            return -1
        depth, cap = b.depth[src[idx]], g[idx]
        keys = [-cap, depth] if self.prefer_low else [depth, -cap]   # last key is primary
        if self.budget is not None:
            keys.append(-self.budget[self.orbit[idx]])
        return int(idx[np.lexsort(keys)[0]])

    def pack(self, roots, k: int) -> list[TreeBatch] | None:
        """k trees per root (batched); None if the orbit budgets leave no usable arc."""
        stack = [TreeBatch(int(r), k, self.n) for r in reversed(list(roots))]
        for b in stack:
            self._open(b)
        done = []
        while stack:
            b = stack.pop()
            self._close(b)
            failed = np.zeros(self.src.size, bool)
            while b.size < self.n:
                e = self._choose(b, failed)
                if e < 0:
                    if self.budget is not None:
                        return None
                    raise RuntimeError("tree packing found no admissible arc "
                                       "(the capacities do not admit k trees per root)")
                mu = self._mu(b, e)
                if mu == 0:
                    failed[e] = True          # a tight cut stays tight while R_1 grows
                    continue
                if mu < b.m:
                    rest = b.copy(b.m - mu)
                    self._open(rest)
                    stack.append(rest)
                    b.m = mu
                x, y = int(self.src[e]), int(self.dst[e])
                b.edges.append((x, y))
                b.members[y] = True
                b.depth[y] = b.depth[x] + 1
                b.size += 1
                self.g[e] -= mu
                if self.budget is not None:
                    self.budget[self.orbit[e]] -= mu
            done.append(b)
        return done


# From this many (compute) nodes on, the breadth-first packing (greedy_trees) is tried before
# the exact Bérczi–Frank packing; it is exact when it completes and falls back when stuck.
GREEDY_MIN_NODES = 128


# ---- symmetry ------------------------------------------------------------------------------
MAX_AUTO_TRANSLATION_NODES = 4096   # "auto" builds an N×N table of shifts; beyond, skip


def cyclic_translations(n: int) -> np.ndarray:
    """perms[c] = (i ↦ i + c mod n): the translations of a circulant's node numbering."""
    return (np.arange(n)[None, :] + np.arange(n)[:, None]) % n


def mixed_radix_translations(dims) -> np.ndarray:
    """perms[c] = coordinate-wise addition of c's digits (row-major, last digit fastest):
    the translations of Torus(dims...) and of Hypercube(n) (dims all 2)."""
    dims = np.asarray(dims, np.int64)
    n = int(np.prod(dims))
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    summed = (coords[:, None, :] + coords[None, :, :]) % dims
    return np.ravel_multi_index(tuple(summed.reshape(-1, dims.size).T), dims).reshape(n, n)


def _translation_orbits(links: Links, g: np.ndarray, perms) -> np.ndarray | None:
    """If every perms[c] is an automorphism keeping the slots ``g`` with perms[c][0] = c, the
    orbit of each link under the group: the link 0→t that perms[src] maps onto it. Else None."""
    n = links.n
    perms = np.asarray(perms, np.int64)
    if perms.shape != (n, n) or not np.array_equal(perms[:, 0], np.arange(n)):
        return None
    if not all(links.preserved_by(p, g) for p in perms):
        return None
    inverse = np.argsort(perms, axis=1)
    return inverse[links.tail, links.head]


def _symmetric_pack(links: Links, g, k, prefer_low, perms):
    """Root-0 trees whose translates by ``perms`` stay within capacity: every link of an
    orbit then carries what root 0's trees put on the whole orbit, so root 0 packs k trees
    with a budget of g(orbit) per orbit (heuristic: None when the budgets get stuck)."""
    orbit = _translation_orbits(links, g, perms)
    if orbit is None:
        return None
    n, src, dst = links.n, links.tail, links.head
    budget = np.zeros(n, np.int64)
    budget[orbit] = g
    batches = BatchedTreePacker(n, src, dst, g, prefer_low, orbit, budget).pack([0], k)
    if batches is None:
        return None
    perms = np.asarray(perms, np.int64)
    out = []
    for b in batches:
        e = np.asarray(b.edges, np.int64)
        for c in range(n):
            mapped = perms[c][e]
            out.append((c, b.m, list(map(tuple, mapped.tolist()))))
    return out


def _switched_schedule(topo: Topology, src, dst, g: np.ndarray, k: int,
                       prefer_low_trees: bool) -> TreeSchedule:
    """Edge splitting removes the switches from the slot graph G({g}) (Alg. 3), trees are
    packed on the compute-only G* (Alg. 4), and every tree edge takes its slots' physical
    paths from the routing table (App. E.3)."""
    compute = topo.compute_nodes
    links = {(int(u), int(w)): int(c) for u, w, c in zip(src, dst, g) if c > 0}
    logical, _ = split_switches(topo.n, compute, topo.switches, links, k)
    index = {int(c): i for i, c in enumerate(compute.tolist())}
    keys = sorted(logical)
    lsrc = np.array([index[u] for u, _ in keys], np.int32)
    ldst = np.array([index[w] for _, w in keys], np.int32)
    lcap = np.array([sum(c for _, c in logical[e]) for e in keys], np.int64)
    packed = greedy_pack(compute.size, lsrc, ldst, lcap, k) \
        if compute.size >= GREEDY_MIN_NODES else None
    if packed is None:
        batches = BatchedTreePacker(compute.size, lsrc, ldst, lcap, prefer_low_trees).pack(
            range(compute.size), k)
        packed = [(b.root, b.m, b.edges) for b in batches]
    pools = {e: [list(x) for x in logical[e]] for e in keys}
    trees = []
    for root, mult, tree_edges in packed:
        edges, routes = [], {}
        for x, y in tree_edges:
            e = (int(compute[x]), int(compute[y]))
            edges.append(e)
            need, got = mult, []
            while need:
                path, have = pools[e][-1]
                used = min(have, need)
                got.append((path, Fraction(used, k)))
                need -= used
                if used == have:
                    pools[e].pop()
                else:
                    pools[e][-1][1] -= used
            if len(got) > 1 or len(got[0][0]) > 2:
                routes[e] = got
        trees.append(Tree(int(compute[root]), Fraction(mult, k), edges, routes))
    return TreeSchedule(topo, trees, method="edge-splitting+berczi-frank")


def _schedule(topo: Topology, g: np.ndarray, k: int, prefer_low_trees: bool,
              translations) -> TreeSchedule:
    links = _links(topo)
    src, dst, n = links.tail, links.head, topo.n
    if topo.has_switches:
        return _switched_schedule(topo, src, dst, g, k, prefer_low_trees)
    if isinstance(translations, str):
        if translations != "auto":
            raise TopofinderError(f"translations must be 'auto', None or an N×N array, "
                                  f"got {translations!r}")
        auto = topo.vertex_transitive and n <= MAX_AUTO_TRANSLATION_NODES
        translations = cyclic_translations(n) if auto else None
    trees, method = None, "berczi-frank"
    if translations is not None:
        trees = _symmetric_pack(links, g, k, prefer_low_trees, translations)
        method = "translated"
    if trees is None and n >= GREEDY_MIN_NODES:
        trees, method = greedy_pack(n, src, dst, g, k), "greedy-bfs"
    if trees is None:
        batches = BatchedTreePacker(n, src, dst, g, prefer_low_trees).pack(range(n), k)
        trees, method = [(b.root, b.m, b.edges) for b in batches], "berczi-frank"
    return TreeSchedule(topo, [Tree(r, Fraction(m, k), edges) for r, m, edges in trees],
                        method=method)


def optimal_trees(topo: Topology, *, prefer_low_trees: bool = False,
                  translations="auto", optimum: Optimum | None = None) -> TreeSchedule:
    """A tree schedule reaching T_B^FC exactly: k trees per root of weight m/k on the links'
    U·C(e) tree slots (Thm 3 + Bérczi–Frank, 002 App. E.1/E.3).

    With ``translations`` "auto", a topology whose optimal BFB schedule already reaches
    T_B^FC gets that schedule's first-receipt trees (topofinder.scoring.trees.step_trees:
    shortest-path trees, found without packing). ``prefer_low_trees``: grow trees from their shallowest
    members first (a heuristic; the minimum-height packing is NP-hard). ``translations``:
    "auto" (cyclic shifts for
    vertex-transitive topologies), None, or an N×N array of automorphisms with
    perms[c][0] = c; root 0's trees are then translated to every root when orbit budgets
    allow it, otherwise all roots are packed."""
    opt = optimum or throughput_optimum(topo)
    if isinstance(translations, str) and translations == "auto":
        lowest = _bfb_trees(topo, opt)
        if lowest is not None:
            return lowest
    params = tree_parameters(topo, opt)
    cap = _links(topo).cap
    g = cap * params.U.numerator // params.U.denominator
    return _schedule(topo, g, params.k, prefer_low_trees, translations)


def _bfb_trees(topo: Topology, opt: Optimum) -> TreeSchedule | None:
    """The first-receipt trees of the optimal BFB schedule when its τ equals T_B^FC (then
    the trees are optimal and shortest-path trees: the lowest possible); else None."""
    if topo.has_switches:
        return None
    try:
        if bfb_score(topo).tau != opt.tau:
            return None
        return trees_from_steps(bfb_schedule(topo))
    except TopofinderError:                       # BFB does not handle this topology
        return None


def fixed_k_trees(topo: Topology, k: int, *, prefer_low_trees: bool = False,
                  translations="auto") -> TreeSchedule:
    """The best schedule with k trees per root (weights 1/k batched): packing on the link
    capacities ⌊U*·C(e)⌋ of :func:`fixed_k_optimum` (Thm 11–12 of 002)."""
    best = fixed_k_optimum(topo, k)
    cap = _links(topo).cap
    return _schedule(topo, _floor_caps(best.U, cap), k, prefer_low_trees, translations)
