"""ForestColl (paper 002 §4–5, Appendix E; DESIGN §7): the exact allgather throughput optimum
of a direct-connect topology, its bottleneck cut, and spanning out-tree schedules reaching it.

Units: link capacities C(u,w) in units of b (multi-arcs summed, self-loops carry nothing);
B = d·b with d = topology.degree. With ratio* = max_{∅≠S⊊V} |S| / C⁺(S) (optimality (⋆)),

    T_B^FC = (M/N)·ratio*/b = (d/N)·ratio*   [M/B].

Every node is a compute node (direct-connect: no switches, so no edge splitting, §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import gcd

import numpy as np
from ortools.graph.python import max_flow
from scipy.sparse.csgraph import connected_components

from topofinder.errors import TopofinderError
from topofinder.topology import Topology
from topofinder.tree_schedule import Tree, TreeSchedule


# ---- links and the max-flow oracle --------------------------------------------------------
def _links(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merged links (src, dst, capacity in b) with self-loops dropped; strongly connected
    or TopofinderError (some cut would have no exiting capacity: allgather impossible)."""
    m = topo.link_matrix
    ncomp, _ = connected_components(m, directed=True, connection="strong")
    if ncomp != 1:
        raise TopofinderError(f"{topo.expr} is not strongly connected: some nodes can never "
                              "receive every shard, so no allgather throughput exists")
    coo = m.tocoo()
    return (coo.row.astype(np.int32), coo.col.astype(np.int32), coo.data.astype(np.int64))


def _cut_capacity(members: np.ndarray, src, dst, cap) -> int:
    """C⁺(S) for a boolean membership vector."""
    return int(cap[members[src] & ~members[dst]].sum())


class _RootedOracle:
    """The auxiliary network G_x of 002 App. E.1: super-source s = N with an arc s→u of
    capacity x to every node. Theorem 1: min_v F(s, v) ≥ N·x iff x·|S| ≤ C⁺(S) for all S.
    Capacities are kept integral by scaling (arcs ``link_scale``·C, source arcs ``x_num``)."""

    def __init__(self, n: int, src, dst, cap):
        self.n, self.cap = n, cap
        self.mf = max_flow.SimpleMaxFlow()
        self.mf.add_arcs_with_capacity(src, dst, cap)
        self.mf.add_arcs_with_capacity(np.full(n, n, np.int32), np.arange(n, dtype=np.int32),
                                       np.zeros(n, np.int64))
        self._link_arcs = np.arange(cap.size, dtype=np.int32)
        self._source_arcs = np.arange(cap.size, cap.size + n, dtype=np.int32)
        self.solves = 0
        self.need = 0

    def set_capacities(self, link_caps: np.ndarray, source_cap: int) -> None:
        self.mf.set_arcs_capacity(self._link_arcs, np.asarray(link_caps, np.int64))
        self.mf.set_arcs_capacity(self._source_arcs, np.full(self.n, source_cap, np.int64))
        self.need = self.n * source_cap

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


def _probe_nodes(topo: Topology) -> range:
    """Sinks whose max-flows decide Theorem 1: one node suffices when every node looks the
    same (for any S, an automorphism moves a node outside S onto node 0)."""
    return range(1) if topo.vertex_transitive else range(topo.n)


# ---- the optimum ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Optimum:
    """``ratio`` = max |S|/C⁺(S) = 1/x* (002 optimality (⋆), capacities in b); ``tau`` =
    T_B^FC in M/B; ``cut`` a bottleneck cut S (sorted nodes) with ``cut_capacity`` = C⁺(S);
    ``maxflows``: max-flow solves used."""

    ratio: Fraction
    tau: Fraction
    cut: tuple[int, ...]
    cut_capacity: int
    maxflows: int

    @property
    def cut_size(self) -> int:
        return len(self.cut)


def throughput_optimum(topo: Topology) -> Optimum:
    """Exact T_B^FC and a bottleneck cut by a Dinkelbach (Newton) iteration on Theorem 1.

    Start from the best of the cuts V−{v} and {u}. For each sink v: solve F(s, v) at the
    current ratio λ = p/q (x = q/p; arcs scaled by p); a deficit gives the cut S ∌ v that
    maximises x|S| − C⁺(S), whose ratio |S|/C⁺(S) > λ becomes the new λ; repeat at v until
    it passes. A sink that passes at λ passes at every larger λ, so each sink is settled
    once and the final λ is exact.
    """
    src, dst, cap = _links(topo)
    n = topo.n
    in_cap = np.bincount(dst, cap, minlength=n).astype(np.int64)
    out_cap = np.bincount(src, cap, minlength=n).astype(np.int64)
    v_in, u_out = int(np.argmin(in_cap)), int(np.argmin(out_cap))
    best = Fraction(n - 1, int(in_cap[v_in]))
    cut = np.ones(n, bool)
    cut[v_in] = False
    if Fraction(1, int(out_cap[u_out])) > best:
        best = Fraction(1, int(out_cap[u_out]))
        cut = np.zeros(n, bool)
        cut[u_out] = True
    oracle = _RootedOracle(n, src, dst, cap)
    current = None
    for v in _probe_nodes(topo):
        while True:
            if current != best:
                oracle.set_capacities(cap * best.numerator, best.denominator)
                current = best
            members = oracle.violated_cut(v)
            if members is None:
                break
            ratio = Fraction(int(members.sum()), _cut_capacity(members, src, dst, cap))
            if ratio <= best:
                raise RuntimeError("max-flow deficit without a better cut")
            best, cut = ratio, members
    return Optimum(best, Fraction(topo.degree, n) * best, tuple(np.flatnonzero(cut).tolist()),
                   _cut_capacity(cut, src, dst, cap), oracle.solves)


def tau_fc(topo: Topology) -> Fraction:
    """T_B^FC in M/B (exact)."""
    return throughput_optimum(topo).tau


def ratio_by_networkx_bisection(topo: Topology) -> Fraction:
    """Baseline for the bench: Algorithm 1 of 002 as written — bisection on 1/x with one
    networkx max-flow per sink (stopping at the first deficit), then the unique fraction with
    denominator ≤ X = min_v B⁻(v) nearest the midpoint (App. E.1). Returns ratio*."""
    import networkx as nx

    src, dst, cap = _links(topo)
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

    if feasible(lo):
        return lo
    while hi - lo >= Fraction(1, x_max * x_max):
        mid = (lo + hi) / 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
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
    _, _, cap = _links(topo)
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


def _floor_caps(U: Fraction, cap: np.ndarray) -> np.ndarray:
    return (cap * U.numerator) // U.denominator


def fixed_k_optimum(topo: Topology, k: int, optimum: Optimum | None = None) -> FixedK:
    """Algorithm 5 of 002: bisection on U in [(N−1)k / min B⁻, (N−1)k] with the oracle of
    Theorem 3/12 (source arcs k, link e capacity ⌊U·C(e)⌋, need F(s,v) ≥ N·k), until the
    range is below 1/X² (X = max C); then U* is the largest breakpoint j/C(e) ≤ the feasible
    end (distinct breakpoints differ by ≥ 1/X², and feasibility only changes at them)."""
    if not isinstance(k, int) or k < 1:
        raise TopofinderError(f"fixed-k needs a positive integer number of trees per root, "
                              f"got {k!r}")
    src, dst, cap = _links(topo)
    n = topo.n
    opt = optimum or throughput_optimum(topo)
    x_max = int(cap.max())
    oracle = _RootedOracle(n, src, dst, cap)
    nodes = _probe_nodes(topo)

    def feasible(U: Fraction) -> bool:
        oracle.set_capacities(_floor_caps(U, cap), k)
        return oracle.feasible(nodes)

    min_in = int(np.bincount(dst, cap, minlength=n).min())
    lo = Fraction((n - 1) * k, min_in) - Fraction(1, 2 * x_max * x_max)   # below U*: infeasible
    hi = Fraction((n - 1) * k)                                          # always feasible
    while hi - lo >= Fraction(1, x_max * x_max):
        mid = (lo + hi) / 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    U = max(Fraction((hi.numerator * int(c)) // hi.denominator, int(c)) for c in np.unique(cap))
    scale = Fraction(topo.degree, n)
    return FixedK(k, U, scale * U / k, scale * (opt.ratio + Fraction(1, k * int(cap.min()))))
