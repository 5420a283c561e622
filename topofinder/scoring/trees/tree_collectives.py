"""Tree schedules for reduce-scatter and allreduce, and the allreduce optimum of LP (5)
(paper 002 §5.6, Appendix G).

Reduce-scatter runs ForestColl's out-trees of the transposed fabric G^T backwards: in-trees
on G, data flowing towards each root, optimal time (B/N)·ratio*(G^T) in M/B. Allreduce as
reduce-scatter followed by allgather takes τ_RS + τ_AG. LP (5) bounds every tree-based
allreduce (variable data per root, each link's bandwidth split between in- and out-trees):

    max X = Σ_v x_v  s.t. for every compute node t:  F(s, t) ≥ X on (G, c^BC, s→v cap x_v)
                                                     F(t, s) ≥ X on (G, c^RE, v→s cap x_v)
                     c^RE_e + c^BC_e ≤ C_e,  all variables ≥ 0,

and the allreduce time is M/X, i.e. τ_AR* = B/X in M/B. Solved with HiGHS (scipy); on
switched fabrics a relaxation (a lower bound), see :func:`allreduce_lp`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from topofinder.model.schedule import SCHEDULE_FORMAT, SCHEDULE_VERSION
from topofinder.model.units import exact
from topofinder.errors import TopofinderError
from topofinder.model.operations import line_graph
from topofinder.families.build import load_topology
from topofinder.scoring.trees.forestcoll import fixed_k_optimum, fixed_k_trees, optimal_trees, \
    throughput_optimum
from topofinder.scoring.links import Links
from topofinder.scoring.trees.line_trees import line_graph_trees
from topofinder.families.syntax import Unary, parse_tree, to_text
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import Tree, TreeSchedule, validate
from topofinder.model.collectives import Collective

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)


def _line_graph_trees(topo: Topology, opt, prefer_low: bool = False) -> TreeSchedule | None:
    """Uniform-entry trees (topofinder.scoring.trees.line_trees) when ``topo`` is the expression
    L^k(G) of a base they exist for and they reach the optimum; else None."""
    try:
        node = parse_tree(topo.expr)
    except TopofinderError:
        return None
    times = 0
    while isinstance(node, Unary) and node.op == "L":        # L^a(L^b(G)) = L^(a+b)(G)
        node, times = node.child, times + node.k
    if times == 0:
        return None
    try:
        base = load_topology(to_text(node))
        if not line_graph(base, times).same_arcs(topo):
            return None
        sched = line_graph_trees(base, times, prefer_low)
    except TopofinderError:
        return None
    sched = TreeSchedule(topo, sched.trees, method=sched.method)
    return sched if sched.tau() == opt.tau else None


def allgather_trees(topo: Topology, *, prefer_low_trees=False, trees_per_root=None):
    """(schedule, its proven optimum τ in M/B): optimal or fixed-k out-trees, validated.
    A line-graph expression gets the uniform-entry trees of topofinder.scoring.trees.line_trees
    when they reach the optimum; otherwise (and with --trees-per-root) ForestColl's trees."""
    if trees_per_root is None:
        opt = throughput_optimum(topo)
        sched, tau = _line_graph_trees(topo, opt, prefer_low_trees), opt.tau
        if sched is None:
            sched = optimal_trees(topo, prefer_low_trees=prefer_low_trees, optimum=opt)
    else:
        if not isinstance(trees_per_root, int) or trees_per_root < 1:
            raise TopofinderError("--trees-per-root must be a positive integer")
        tau = fixed_k_optimum(topo, trees_per_root).tau
        sched = fixed_k_trees(topo, trees_per_root, prefer_low_trees=prefer_low_trees)
    validate(sched, tau)
    return sched, tau


def reduce_scatter_trees(topo: Topology, **kw):
    """In-trees for reduce-scatter: allgather out-trees of G^T reversed (paper 002 §5.6).
    With a reverse isomorphism p of G (identity when bidirectional; paper 001 App. B), the
    out-trees of G itself map onto G^T by p: (a, b) ∈ G ⇔ (p[b], p[a]) ∈ G."""
    p = topo.reverse_isomorphism
    if p is None and topo.bidirectional:
        p = np.arange(topo.n)
    if p is not None:
        ag, tau = allgather_trees(topo, **kw)
        p = np.asarray(p, np.int64)
        mapped = [Tree(int(p[t.root]), t.weight, p[t.edge_array()],
                       [((int(p[u]), int(p[w])), [(tuple(int(p[x]) for x in path), wt)
                                                  for path, wt in paths])
                        for (u, w), paths in t.routes]) for t in ag.trees]
        flipped = TreeSchedule(topo.transpose(), mapped, method=ag.method)
    else:
        flipped, tau = allgather_trees(topo.transpose(), **kw)
    sched = TreeSchedule(topo, [t.reversed() for t in flipped.trees],
                         method=flipped.method, collective=Collective.REDUCE_SCATTER)
    validate(sched, tau)
    return sched, tau


@dataclass(frozen=True)
class AllreduceTrees:
    """Allreduce as reduce-scatter in-trees then allgather out-trees; ``lp`` the LP (5)
    optimum (None where not computed)."""

    reduce_scatter: TreeSchedule
    allgather: TreeSchedule
    lp: "AllreduceLP | None" = None

    @property
    def topology(self) -> Topology:
        return self.allgather.topology

    def tau(self) -> Fraction:
        """τ_RS + τ_AG in M/B (the two phases run one after the other)."""
        return self.reduce_scatter.tau() + self.allgather.tau()

    def to_dict(self, _tuples: bool = False) -> dict:
        tau = self.tau()
        doc = {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION,
               "collective": Collective.ALLREDUCE, "kind": "trees",
               "topology": self.allgather.topology.expr,
               "num_nodes": self.allgather.topology.n, "tau": float(tau),
               "tau_exact": exact(tau)}
        if self.lp is not None:
            doc["lp5_tau"] = self.lp.tau
            doc["lp5_exact"] = self.lp.exact
        doc["reduce_scatter"] = self.reduce_scatter.to_dict(_tuples)
        doc[Collective.ALLGATHER] = self.allgather.to_dict(_tuples)
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(_tuples=True))


def allreduce_trees(topo: Topology, *, with_lp: bool = True, **kw) -> AllreduceTrees:
    rs, _ = reduce_scatter_trees(topo, **kw)
    ag, _ = allgather_trees(topo, **kw)
    lp = allreduce_lp(topo) if with_lp else None
    return AllreduceTrees(rs, ag, lp)


def collective_trees(topo: Topology, collective: str, **kw):
    """The tree schedule of ``collective`` (one of COLLECTIVES)."""
    if collective == Collective.ALLGATHER:
        return allgather_trees(topo, **kw)[0]
    if collective == Collective.REDUCE_SCATTER:
        return reduce_scatter_trees(topo, **kw)[0]
    if collective == Collective.ALLREDUCE:
        return allreduce_trees(topo, **kw)
    raise TopofinderError(f"unknown collective {collective!r}; accepted: "
                          f"{', '.join(COLLECTIVES)}")


# ---- LP (5) ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AllreduceLP:
    """LP (5): X = Σ x_v (capacity units), ``tau`` = B/X in M/B, x per compute node;
    ``exact`` False: a lower bound (switched fabric, see :func:`allreduce_lp`)."""

    X: float
    tau: float
    x: tuple[float, ...]
    exact: bool = True


LP_TOLERANCE = 1e-7          # relative slack accepted when checking a max-flow against X
_FLOW_SCALE = 1 << 24         # float capacities → integers for the max-flow separation
MAX_LP_ROUNDS = 500


def allreduce_lp(topo: Topology) -> AllreduceLP:
    """Solve LP (5) of paper 002 App. G by cut generation.

    By max-flow/min-cut, F(s, t) ≥ X for every t (broadcast, capacities c^BC) holds iff
    Σ_{v∈S} x_v ≤ c^BC(δ⁺S) for every S ∌ t, and F(t, s) ≥ X (reduce, c^RE) iff
    Σ_{v∈S} x_v ≤ c^RE(δ⁻S). So LP (5) is the LP over (x, c^BC, c^RE) with these cut rows;
    starting from the single-node cuts, each round solves the LP (HiGHS) and adds the cuts
    that the 2·N max-flows of Theorem 1 find violated, until none is (same optimum as the
    flow formulation of (5), which has 2·N·(|E| + N) flow variables).

    On a switched fabric the same LP is taken on G itself (x_v = 0 at switches, sinks at
    compute nodes): its flows may merge and fork at switches, i.e. switches that multicast and
    aggregate in-network (paper 002 §5.6). That relaxes the paper's exact variant (compute-pair
    capacities routed by multi-commodity flows), so ``tau`` is then a lower bound — the
    allreduce optimum with in-network aggregation — (``exact`` False)."""
    links = Links.of(topo)
    tail, head, cap = links.tail, links.head, links.cap.astype(float)
    n, ne = topo.n, tail.size
    nvar = n + 2 * ne                         # x | c^BC | c^RE
    compute = topo.compute_nodes
    cuts: list[tuple[int, np.ndarray]] = []   # (0: out-cut on c^BC, 1: in-cut on c^RE), S
    for v in compute.tolist():
        for d in (0, 1):
            one = np.zeros(n, bool)
            one[v] = True
            cuts += [(d, one), (d, ~one)]
    seen = {(d, S.tobytes()) for d, S in cuts}
    c = np.zeros(nvar)
    c[:n] = -1.0
    share = sp.hstack([sp.csr_matrix((ne, n)), sp.identity(ne), sp.identity(ne)])
    for _ in range(MAX_LP_ROUNDS):
        rows = []
        for d, S in cuts:
            row = np.zeros(nvar)
            row[:n] = S
            crossing = (S[tail] & ~S[head]) if d == 0 else (~S[tail] & S[head])
            row[n + d * ne + np.flatnonzero(crossing)] = -1.0
            rows.append(row)
        a_ub = sp.vstack([sp.csr_matrix(np.array(rows)), share]).tocsr()
        b_ub = np.concatenate([np.zeros(len(rows)), cap])
        bounds = [(0, 0) if sw else (0, None) for sw in topo.is_switch] + [(0, None)] * (2 * ne)
        from scipy.optimize import linprog        # heavy; only LP (5) needs it
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status != 0:
            raise RuntimeError(f"LP (5) solver failed: {res.message}")
        x, bc, re = res.x[:n], res.x[n:n + ne], res.x[n + ne:]
        new = []
        for d, arcs in ((0, bc), (1, re)):
            a, b = (tail, head) if d == 0 else (head, tail)
            for S in _violated_cuts(n, a, b, arcs, x, compute):
                key = (d, S.tobytes())
                if key not in seen:
                    seen.add(key)
                    new.append((d, S))
        if not new:
            total = float(x.sum())
            return AllreduceLP(total, topo.node_bandwidth / total,
                               tuple(float(v) for v in x[compute]), not topo.has_switches)
        cuts += new
    raise RuntimeError(f"LP (5): no convergence in {MAX_LP_ROUNDS} rounds")


def _violated_cuts(n, a, b, caps, x, sinks) -> list[np.ndarray]:
    """Sets S ∌ t with Σ_{v∈S} x_v > c(δ⁺S) on arcs a→b (source arcs s→v of capacity x_v),
    one per sink t whose max-flow falls short of X = Σ x (within LP_TOLERANCE)."""
    caps, x = np.maximum(caps, 0.0), np.maximum(x, 0.0)       # solver noise below zero
    scale = _FLOW_SCALE / max(float(x.max()), float(caps.max()), 1e-12)
    from ortools.graph.python import max_flow   # heavy; loaded on first use
    mf = max_flow.SimpleMaxFlow()
    mf.add_arcs_with_capacity(a.astype(np.int32), b.astype(np.int32),
                              np.floor(caps * scale).astype(np.int64))
    mf.add_arcs_with_capacity(np.full(n, n, np.int32), np.arange(n, dtype=np.int32),
                              np.floor(x * scale).astype(np.int64))
    need = float(x.sum()) * scale * (1 - LP_TOLERANCE) - (a.size + n)   # floor() losses
    out = []
    for t in sinks.tolist():
        if mf.solve(n, t) != mf.OPTIMAL:
            raise RuntimeError("max-flow failed in LP (5) separation")
        if mf.optimal_flow() < need:
            side = np.asarray(mf.get_source_side_min_cut(), np.int64)
            S = np.zeros(n, bool)
            S[side[side < n]] = True
            if S.any() and not S[t]:
                out.append(S)
    return out
