"""Exact steady-state throughput TP of one-root collectives (paper 003 §5) with certificates.

TP counts unit messages delivered to every destination per unit time; a unit message takes
time c_e = 1/C_e on a link of capacity C_e, so with b the bandwidth of a capacity-1 link a
message of H bytes streams at TP·b/H messages per second.

Broadcast. Any steady state puts rates n_e on the links; by Edmonds' branching theorem
(003 Thm 3–5) rates n admit a broadcast at throughput TP iff every root cut S (root ∈ S,
S ≠ V) has n(δ⁺(S)) ≥ TP, i.e. min_v maxflow_n(root, v) ≥ TP. So

    TP = max TP  s.t.  n(δ⁺(S)) ≥ TP for all root cuts S,  port rows on n   (SSB, 003 §5.2)

which has |E| + 1 variables instead of SSB's |V|·|E|: the cut rows are generated lazily by
max-flow (starting from the single-node cuts V∖{v}). Under ``multi`` the rows are only
n_e ≤ C_e, so TP = min_v maxflow_C(root, v), certified by a minimum cut.

Scatter (distinct messages per destination) is a single-source multicommodity flow; paths
from one source can be re-labelled freely among the commodities, so it is the single flow
with demand TP at every other node: |E| + 1 variables, one conservation row per node.

Reduce and gather are broadcast and scatter on G^T (every edge reversed), read backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.scoring.oneroot.exact_lp import (
    DENOMINATORS, LP, round_dual, solve_exact, solve_float,
)
from topofinder.scoring.oneroot.glop_lp import WarmLP
from topofinder.scoring.oneroot.platform import Platform
from topofinder.scoring.oneroot.tree_heuristic import greedy_tree
from topofinder.scoring.symmetry import automorphism_group
from topofinder.model.collectives import Collective

COLLECTIVES = (Collective.BROADCAST, Collective.REDUCE, Collective.SCATTER, Collective.GATHER)
#: Float max-flow scale for the cut separation (capacities n_e·SCALE/max n, rounded down).
_SCALE = 2**40
#: Relative tolerance under which a float cut counts as violated.
_TOL = 1e-9
#: Cut generation also adds the cuts within this relative margin of TP at phase 2's rates
#: (valid cuts all, so the bound is unchanged; random N = 200, 8 arcs a node: 59 rounds
#: and 62 s without, 8 rounds and 5 s at 0.05; 0.15 takes 32 rounds).
NEAR_CUTS = 0.05


@dataclass(frozen=True)
class Throughput:
    """TP (Fraction) of ``collective`` from ``platform.root``; ``rates`` n_e per link of
    ``platform`` (G^T for reduce and gather) in messages per unit time; ``certificate`` says
    why TP is optimal (docs/algorithms.md)."""

    collective: str
    value: Fraction
    rates: tuple
    platform: Platform
    certificate: dict = field(default_factory=dict)


def maxflows(pl: Platform, caps, targets) -> tuple[int, int, np.ndarray]:
    """(min flow, argmin target, source side of its minimum cut as a bool vector) over
    max-flows root → v for v in ``targets`` with integer link capacities ``caps``."""
    from ortools.graph.python import max_flow   # loaded when a max-flow runs, not per command
    mf = max_flow.SimpleMaxFlow()
    mf.add_arcs_with_capacity(pl.src.astype(np.int32), pl.dst.astype(np.int32),
                              np.asarray(caps, np.int64))
    best, arg = None, -1
    for v in targets:
        if mf.solve(pl.root, int(v)) != mf.OPTIMAL:
            raise RuntimeError("max-flow failed")
        f = mf.optimal_flow()
        if best is None or f < best:
            best, arg = f, int(v)
            side = np.zeros(pl.n, bool)
            side[np.asarray(mf.get_source_side_min_cut(), np.int64)] = True
    return best, arg, side


def _destinations(pl: Platform) -> np.ndarray:
    return np.delete(np.arange(pl.n), pl.root)


def stabiliser_representatives(pl: Platform) -> np.ndarray:
    """One destination per orbit of the root's stabiliser in Aut(G) (capacities kept): an
    automorphism fixing the root maps every root→v flow onto a root→p(v) flow of the same
    value, so min_v maxflow(root, v) needs one max-flow per orbit."""
    group = automorphism_group(pl.n, pl.src, pl.dst, pl.cap, fixed=pl.root)
    label = group.orbits()
    first = np.unique(label, return_index=True)[1]
    return np.sort(first[first != pl.root])


def multiport_broadcast(pl: Platform, symmetry: bool = True) -> Throughput:
    """TP = min_v maxflow(root, v) on the capacities (Edmonds' branching theorem), exact; the
    certificate is the minimum root cut (its capacity equals TP). ``symmetry``: one max-flow
    per orbit of the root's stabiliser (:func:`stabiliser_representatives`), else one per
    destination."""
    targets = stabiliser_representatives(pl) if symmetry else _destinations(pl)
    tp, v, side = maxflows(pl, pl.cap, targets)
    crossing = side[pl.src] & ~side[pl.dst]
    assert int(pl.cap[crossing].sum()) == tp
    return Throughput(Collective.BROADCAST, Fraction(tp),
                      tuple(Fraction(int(c)) for c in pl.cap), pl,
                      {"kind": "min-cut", "sink": v,
                       "source_side": np.flatnonzero(side).tolist(),
                       "cut_capacity": tp})


def _port_rows(lp: LP, pl: Platform, col0: int = 0) -> None:
    """The port model's rows on the link-rate columns col0 + e (platform module doc)."""
    coef = pl.port_coefficients()
    if coef is not None:
        bound = pl.port_bound()
        for ends in (pl.src, pl.dst):
            order = np.argsort(ends, kind="stable")
            splits = np.searchsorted(ends[order], np.arange(pl.n + 1))
            for j in range(pl.n):
                es = order[splits[j]:splits[j + 1]].tolist()
                if es:
                    lp.add([col0 + e for e in es], [coef[e] for e in es], "<=", bound)
    if pl.link_bounds():
        for e in range(pl.m):
            lp.add([col0 + e], [1], "<=", int(pl.cap[e]))


def cut_lp(pl: Platform, edges: np.ndarray | None = None) -> LP:
    """The broadcast LP on the links ``edges`` (all by default; columns 0..m−1 are n_e,
    column m is TP) with the single-node cuts V∖{v}: n(δ⁻(v)) ≥ TP. On a DAG these are all
    the rows (SSBPDAG, 003 §4.1)."""
    lp = LP(pl.m + 1, {pl.m: Fraction(1)})
    _port_rows(lp, pl)
    live = np.ones(pl.m, bool) if edges is None else edges
    for e in np.flatnonzero(~live):
        lp.add([int(e)], [1], "<=", 0)
    for v in _destinations(pl):
        ins = np.flatnonzero((pl.dst == v) & live).tolist()
        lp.add(ins + [pl.m], [-1] * len(ins) + [1], "<=", 0)
    return lp


def _add_cut(lp: LP, pl: Platform, side: np.ndarray) -> None:
    out = np.flatnonzero(side[pl.src] & ~side[pl.dst]).tolist()
    lp.add(out + [pl.m], [-1] * len(out) + [1], "<=", 0)


def _violated_cuts(pl: Platform, rates: np.ndarray, tp: float,
                   margin: float = 0.0) -> list[np.ndarray]:
    """Root cuts whose float rate is below TP·(1 + ``margin``): the sink side of each
    max-flow that falls short (the smallest such set around v, so disjoint deficient regions
    each get their own cut), skipping sinks inside the sink side of a cut found violated
    (below TP) in this round; a cut only within the margin hides none."""
    scale = _SCALE / max(float(rates.max()), 1e-300)
    from ortools.graph.python import max_flow   # loaded when a max-flow runs, not per command
    mf = max_flow.SimpleMaxFlow()
    mf.add_arcs_with_capacity(pl.src.astype(np.int32), pl.dst.astype(np.int32),
                              np.floor(np.maximum(rates, 0) * scale).astype(np.int64))
    short = tp * scale * (1 - _TOL)
    need = max(short, tp * scale * (1 + margin))
    covered = np.zeros(pl.n, bool)
    cuts, seen = [], set()
    for v in _destinations(pl):
        if covered[v]:
            continue
        mf.solve(pl.root, int(v))
        flow = mf.optimal_flow()
        if flow < need:
            sink = np.asarray(mf.get_sink_side_min_cut(), np.int64)
            side = np.ones(pl.n, bool)
            side[sink] = False
            key = side.tobytes()
            if key not in seen:
                seen.add(key)
                cuts.append(side)
            if flow < short:
                covered[sink] = True
    return cuts


def _exact_feasible(pl: Platform, rates: list[Fraction], tp: Fraction) -> np.ndarray | None:
    """None if min_v maxflow_rates(root, v) ≥ tp exactly (integer max-flow after scaling by
    the common denominator), else the source side of a violated cut."""
    den = lcm(tp.denominator, *(r.denominator for r in rates))
    caps = [int(r * den) for r in rates]
    if max(caps) * pl.m >= 2**62:
        raise TopofinderError("steady-state rates too fine to verify with 64-bit max-flow")
    flow, _, side = maxflows(pl, caps, _destinations(pl))
    return None if flow >= tp * den else side


def _tree_rates(pl: Platform, parent: list[int], tp: Fraction) -> tuple:
    used = set(parent)
    return tuple(tp if e in used else Fraction(0) for e in range(pl.m))


def port_bound(pl: Platform) -> tuple[Fraction, tuple[int, str]]:
    """The smallest upper bound on broadcast TP from a single port row with the cut around
    that node: the root's send row (TP ≤ n(δ⁺(root))) or a destination's receive row
    (TP ≤ n(δ⁻(v))). Under ``one`` a row Σ n_e/C_e ≤ 1 allows n(δ) ≤ max C_e; under ``node``
    n(δ) ≤ min(B, Σ C_e). Returns (bound, (node, "send" | "receive")); a one-row LP dual."""
    best = None
    for ends, nodes, what in ((pl.src, [pl.root], "send"),
                              (pl.dst, _destinations(pl).tolist(), "receive")):
        caps = [pl.cap[ends == v] for v in nodes] if len(nodes) < 64 else None
        if caps is None:
            order = np.argsort(ends, kind="stable")
            cuts = np.searchsorted(ends[order], np.arange(pl.n + 1))
            caps = [pl.cap[order[cuts[v]:cuts[v + 1]]] for v in nodes]
        for v, c in zip(nodes, caps):
            b = (Fraction(int(c.max())) if pl.port_model == "one"
                 else min(pl.bandwidth, Fraction(int(c.sum()))))
            if best is None or b < best[0]:
                best = (b, (int(v), what))
    return best


def flow_broadcast(pl: Platform) -> Throughput:
    """003 §5.2 SSB as max TP (the tests' second method; :func:`lp_broadcast` is 25–200×
    faster on heterogeneous Pi(4,64) and answers where this one needs (N−1)·|E| columns): per destination i a flow x_i of value TP from the root,
    x_{i,e} ≤ n_e, port rows on n. Columns: n_e (0..m−1), TP (m), then x_{i,e}. Certified
    by its rounded dual (exactly dual feasible: an upper bound b·y) and link rates n from a
    second solve with TP fixed at b·y minimising Σ n_e·c_e (a cleaner vertex), rounded, which
    must satisfy the port rows and min_v maxflow_n(root, v) ≥ b·y exactly (the degenerate
    flows themselves need not round well)."""
    dests = _destinations(pl)
    m = pl.m
    lp = LP(m + 1 + len(dests) * m, {m: Fraction(1)})
    _port_rows(lp, pl)
    ins = [np.flatnonzero(pl.dst == v).tolist() for v in range(pl.n)]
    outs = [np.flatnonzero(pl.src == v).tolist() for v in range(pl.n)]
    for k, i in enumerate(dests):
        base = m + 1 + k * m
        for v in range(pl.n):
            if v == pl.root:
                continue
            cols = [base + e for e in ins[v]] + [base + e for e in outs[v]]
            coefs = [1] * len(ins[v]) + [-1] * len(outs[v])
            if v == i:
                cols, coefs = cols + [m], coefs + [-1]
            lp.add(cols, coefs, "=", 0)
        for e in range(m):
            lp.add([base + e, e], [1, -1], "<=", 0)
    dual = round_dual(lp, solve_float(lp)[1])
    if dual is None:
        raise TopofinderError("could not certify the SSB optimum exactly (dual rounding)")
    # second phase at TP = b·y: least total port time, a cleaner vertex for the rates
    x_f = solve_float(lp, {e: -pl.cost(e) for e in range(m)}, {m: dual[0]})[0]
    for q in DENOMINATORS:
        rates = [Fraction(float(t)).limit_denominator(q) for t in x_f[:m]]
        if _ports_hold(pl, rates) and _exact_feasible(pl, rates, dual[0]) is None:
            return Throughput(Collective.BROADCAST, dual[0], tuple(rates), pl,
                              {"kind": "lp-dual", "primal": "rates", "form": "SSB (003 §5.2)",
                               "rows": len(lp.rows),
                               "nonzero_duals": sum(1 for y in dual[1] if y)})
    raise TopofinderError("could not certify the SSB optimum exactly from HiGHS's solution")


def _ports_hold(pl: Platform, rates: list[Fraction]) -> bool:
    """The port and link rows hold exactly for ``rates``."""
    if any(r < 0 for r in rates):
        return False
    if pl.link_bounds() and any(r > int(c) for r, c in zip(rates, pl.cap)):
        return False
    coef = pl.port_coefficients()
    if coef is None:
        return True
    for ends in (pl.src, pl.dst):
        load = [Fraction(0)] * pl.n
        for e, r in enumerate(rates):
            load[int(ends[e])] += coef[e] * r
        if max(load) > pl.port_bound():
            return False
    return True


def lp_broadcast(pl: Platform, max_rounds: int = 500, progress=None) -> Throughput:
    """Broadcast TP under ``one``/``node`` by cut generation (module doc), exact. The greedy
    tree (tree_heuristic) answers when its rate meets a port-row bound B. Otherwise rounds on
    a warm GLOP LP (glop_lp) at a target U, first U = B: the rates with TP = U that use the ports
    most (max Σ c_e·n_e under ``one``, Σ n_e under ``node``), a point deep in the optimal
    face (the max-TP vertex puts rate on as few links as it can and violates hundreds of cuts
    a round: a heterogeneous N = 512 platform took over 400 s), are separated by max-flows
    (:func:`_violated_cuts`) and the cuts added. If TP = U becomes infeasible, U is the
    relaxation's max TP again. With no cut violated, TP = U exactly: the certificate is the
    port row when U = B, else the relaxation's rounded duals checked dual feasible in
    rationals (bound b·y: port-row and link-row multipliers and cut weights w_S); the rates,
    rounded, meet the port rows and min_v maxflow ≥ TP in integers.
    ``progress(round, U, violated)`` after each round."""
    tree_tp, parent = greedy_tree(pl)
    bound, row = port_bound(pl)
    if tree_tp == bound:                     # one port row already caps TP at the tree's rate
        return Throughput(Collective.BROADCAST, tree_tp,
                          _tree_rates(pl, parent, tree_tp), pl,
                          {"kind": "port-row", "primal": "tree", "node": row[0],
                           "row": row[1], "bound": bound})
    lp = cut_lp(pl)
    cuts = [~(np.arange(pl.n) == v) for v in _destinations(pl)]
    first_cut_row = len(lp.rows) - len(cuts)
    coef = pl.port_coefficients()
    fat = {e: coef[e] for e in range(pl.m)}
    warm = WarmLP(lp)
    target, floats = bound, None             # floats: the last max-TP solve, if any
    for rnd in range(1, max_rounds + 1):
        sol = warm.solve(fat, {pl.m: target})
        if sol is None:                      # TP = target is cut off: max TP again
            floats = warm.solve()
            target = Fraction(floats[2])
            if floats[2] <= float(tree_tp) * (1 + _TOL):
                exact = solve_exact(lp, floats)
                if exact.value == tree_tp:   # the relaxation's bound is met by one tree
                    return Throughput(Collective.BROADCAST, tree_tp,
                                      _tree_rates(pl, parent, tree_tp), pl,
                                      _lp_certificate(lp, exact.y, cuts, first_cut_row,
                                                      "tree"))
            continue
        rates_f, u = sol[0][:pl.m], float(target)
        new = _violated_cuts(pl, rates_f, u, NEAR_CUTS)
        short = sum(rates_f[side[pl.src] & ~side[pl.dst]].sum() < u * (1 - _TOL)
                    for side in new)
        if progress is not None:
            progress(rnd, u, short)
        if not short:
            done = _certify(pl, warm, lp, target, target == bound, fat, rates_f)
            if isinstance(done, tuple):
                tp, rates, y = done
                cert = ({"kind": "port-row", "primal": "rates", "node": row[0],
                         "row": row[1], "bound": bound} if y is None
                        else _lp_certificate(lp, y, cuts, first_cut_row, "rates"))
                return Throughput(Collective.BROADCAST, tp, tuple(rates), pl,
                                  cert | {"rounds": rnd})
            if isinstance(done, Fraction):   # the cuts lowered the bound: aim there
                target = done
                continue
            new = [done]
        for side in new:
            _add_cut(lp, pl, side)
            cuts.append(side)
    raise TopofinderError(f"cut generation did not converge in {max_rounds} rounds")


def _within_ports(pl: Platform, rates: list[Fraction]) -> list[Fraction]:
    """``rates`` with every over-full port row scaled down to its bound (send rows, then
    receive rows; scaling only lowers rates, so rows already met stay met), negatives 0."""
    rates = [max(r, Fraction(0)) for r in rates]
    coef, bound = pl.port_coefficients(), pl.port_bound()
    if coef is None:
        return rates
    for ends in (pl.src, pl.dst):
        load = [Fraction(0)] * pl.n
        for e, r in enumerate(rates):
            load[int(ends[e])] += coef[e] * r
        rates = [r * bound / load[int(ends[e])] if load[int(ends[e])] > bound else r
                 for e, r in enumerate(rates)]
    if pl.link_bounds():
        rates = [min(r, Fraction(int(c))) for r, c in zip(rates, pl.cap)]
    return rates


def _rounded(pl: Platform, x: np.ndarray, tp: Fraction):
    """(rates, None): the first rounding of float rates ``x`` (denominators up to each of
    DENOMINATORS, over-full port rows scaled back to their bound: a rounding 10⁻¹⁵ above a
    tight row) meeting the port rows and min_v maxflow ≥ tp exactly; else (None, a cut the
    last rounding violates exactly, or None)."""
    side = None
    for q in DENOMINATORS:
        rates = [Fraction(float(t)).limit_denominator(q) for t in x]
        if not _ports_hold(pl, rates):
            rates = _within_ports(pl, rates)
        try:
            side = _exact_feasible(pl, rates, tp)
        except TopofinderError:              # denominators beyond 64-bit max-flow
            continue
        if side is None:
            return rates, None
    return None, side


def _certify(pl: Platform, warm: WarmLP, lp: LP, target: Fraction, at_bound: bool,
             fat: dict, x: np.ndarray):
    """After a round with no violated cut at rates ``x`` (TP = ``target``): (TP, rates, y)
    with rates checked exactly and y the exactly checked duals of the relaxation (None when
    ``at_bound``: the port row is the bound); or a lower target (the relaxation's max TP fell
    below it); or the source side of a cut the rounded rates violate exactly."""
    y = None
    if not at_bound:
        floats = warm.solve()
        if floats[2] < float(target) * (1 - _TOL):
            return Fraction(floats[2])
        dual = round_dual(lp, floats[1])
        if dual is None:
            raise TopofinderError("could not certify the broadcast LP's bound exactly (dual "
                                  "rounding)")
        target, y = dual
        sol = warm.solve(fat, {pl.m: target})
        if sol is None:
            raise TopofinderError("could not certify the broadcast LP's bound exactly")
        x = sol[0][:pl.m]
    rates, side = _rounded(pl, x, target)
    if rates is None:                        # the vertex of least port use rounds cleaner
        lean = warm.solve({e: -c for e, c in fat.items()}, {pl.m: target})
        if lean is not None:
            rates, side = _rounded(pl, lean[0][:pl.m], target)
    if rates is not None:
        return target, rates, y
    if side is None:
        raise TopofinderError("could not round the broadcast rates exactly")
    return side


def _lp_certificate(lp: LP, y: list, cuts, first_cut_row: int, primal: str) -> dict:
    """The nonzero dual multipliers ``y``: port/link rows by row index, cuts with their
    sides; ``primal`` says what meets the bound (the LP's own rates, or a single tree)."""
    weights = y[first_cut_row:]
    return {"kind": "lp-dual", "primal": primal,
            "rows": len(lp.rows),
            "row_duals": {i: w for i, w in enumerate(y[:first_cut_row]) if w},
            "cuts": [(w, np.flatnonzero(side).tolist())
                     for w, side in zip(weights, cuts) if w]}


def scatter(pl: Platform) -> Throughput:
    """Scatter TP (module doc): max TP with a flow n delivering TP to every v ≠ root,
    n(δ⁻(v)) − n(δ⁺(v)) = TP, under the port rows; exact with its LP dual."""
    lp = LP(pl.m + 1, {pl.m: Fraction(1)})
    _port_rows(lp, pl)
    first = len(lp.rows)
    for v in _destinations(pl):
        ins = np.flatnonzero(pl.dst == v).tolist()
        outs = np.flatnonzero(pl.src == v).tolist()
        lp.add(ins + outs + [pl.m], [1] * len(ins) + [-1] * len(outs) + [-1], "=", 0)
    sol = solve_exact(lp)
    return Throughput(Collective.SCATTER, sol.value, tuple(sol.x[:pl.m]), pl,
                      {"kind": "lp-dual", "rows": len(lp.rows),
                       "row_duals": {i: y for i, y in enumerate(sol.y[:first]) if y},
                       "node_potentials": {int(v): y for v, y in
                                           zip(_destinations(pl), sol.y[first:]) if y}})


def throughput(pl: Platform, collective: str = Collective.BROADCAST,
               progress=None) -> Throughput:
    """Exact TP of a one-root ``collective`` on ``pl`` (reduce/gather on ``pl.reversed()``);
    ``progress(round, bound, violated cuts)`` follows broadcast/reduce cut generation."""
    if collective not in COLLECTIVES:
        raise TopofinderError(f"collective {collective!r} unknown; use one of "
                              f"{', '.join(COLLECTIVES)}")
    if collective in (Collective.REDUCE, Collective.GATHER):
        pl = pl.reversed()
    if collective in (Collective.BROADCAST, Collective.REDUCE):
        res = (multiport_broadcast(pl) if pl.port_model == "multi"
               else lp_broadcast(pl, progress=progress))
    else:
        res = scatter(pl)
    return Throughput(collective, res.value, res.rates, pl, res.certificate)
