"""Verification by construction (docs/algorithms.md, "Verified by construction").

A point built by expansions (line graph, degree expansion, Cartesian power, Bi(G); paper 001
§5, App. A.6, D) has an allgather that is a function of its operand's: the theorems give its
(T_L, τ) from the operand's. Beyond the replay limit it is certified by

1. the largest subtree within the replay limit built and replayed in full (``validate``);
2. each operator's preconditions checked on its operand (``Operator.preconditions``,
   topofinder.finder.operators), and the theorem's prediction recomputed from the replayed
   operand's (T_L, τ) and equal to the candidate's;
3. structural invariants on every node and link, from the rule's count map in O(N·d·T)
   (topofinder.finder.invariants): each link's per-step load on a link, within 1..T_L and
   held by its sender; every node receiving (N − 1)·P chunks; τ recomputed from every link;
4. a uniform random sample of k receivers replayed exactly from the expansion rule
   (topofinder.expansions.rows), without materialising the schedule: receiver w's rows and
   its senders' rows are generated; w must end with every chunk of every other shard exactly
   once, each arrival over an arc of the topology and held by its sender before that step
   (the sender's holdings from its own generated rows), at steps ≤ T_L, and the per-step
   loads of w's and its senders' in-links must fit τ. A receiver passing these checks has all
   it needs and received only what was held, so if every receiver passes, the schedule is a
   valid allgather; a construction fault that makes a fraction p of the receivers fail is
   caught with probability ≥ 1 − (1 − p)^k. Each sampled receiver's rows, counted per step
   and in-link, must equal the count map's (which ties the rows to the map step 3 checks,
   where the sample sees them; the map shares step 1, the last step, the slot split and the
   step shifts with the rows' code — docs/algorithms.md says which faults each step sees).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.expansions import rows as rules
from topofinder.families import catalog
from topofinder.families.build import parse
from topofinder.finder import invariants
from topofinder.finder.operators import operator
from topofinder.model.schedule import ScheduleError, link_capacity, validate

#: receivers replayed exactly by default (search --verify-sample): at N = 10^5, d = 8 each
#: costs ~(d + 1)·N rows; a fault touching 10 % of the receivers is caught with probability
#: ≥ 1 − 0.9^32 = 96.6 %, one touching a quarter with ≥ 99.99 %
DEFAULT_SAMPLE = 32
#: largest N²·d of an operand (other than a base) built whole and replayed in full for a
#: construction, well below the replay limit (4096²·8): L^7(C(4,{1,2})) at N = 65536 builds
#: L^4(C(4,{1,2})) (4.2e6) and generates the three line graphs above it by rule rather than
#: building L^5 (6.7e7 rows, GBs)
OPERAND_LIMIT = 1 << 24
#: the sample's default seed (search --verify-seed): recorded with every certificate
DEFAULT_SEED = 0


def construction_rule(recipe, limit: int, build, fault: str | None = None, leaf=None):
    """(rule, [(subtree, its replayed schedule)]) of a recipe built by the rule operators above
    subtrees within ``limit`` (N²·d) rows, or None when some operator above the limit has no
    rule (e.g. a product scheduled by BFB on the whole topology). ``build(recipe)``: a
    subtree's allgather, built in full (topofinder.finder.verify.build_schedule); each is
    replayed here. ``fault``: a planted fault (rows.FAULTS) given to every rule of its kind.
    ``leaf(subtree)``: a Rule standing for a subtree without building it whole (per-rank
    export: BFB rows receiver by receiver), or None to build and replay it."""
    n, d = _size(recipe)
    if recipe.op == "base" or n * n * d <= limit:
        lazy = leaf(recipe) if leaf is not None else None
        if lazy is not None:
            return lazy, []
        schedule = build(recipe)
        validate(schedule)
        return rules.Materialised(schedule), [(recipe, schedule)]
    if recipe.op not in rules.RULES:
        return None
    inner = construction_rule(recipe.children[0], limit, build, fault, leaf)
    if inner is None:
        return None
    child, bases = inner
    mine = fault if fault and fault.startswith(_FAULT_PREFIX[recipe.op]) else None
    _check_preconditions(recipe, child)
    return rules.rule(recipe.op, child, recipe.k, mine), bases


_FAULT_PREFIX = {"line": "line-", "degree": "degree-", "power": "power-", "bi": "bi-"}


def _size(recipe) -> tuple[int, int]:
    """(N, d) of a recipe's topology from the operators' exact predictions of sizes."""
    if recipe.op == "base":
        t = (catalog.catalog_topology(recipe.base_expr) if recipe.source == "catalog"
             else parse(recipe.base_expr))
        return t.n, t.degree
    kids = [_size(c) for c in recipe.children]
    if recipe.op == "line":
        return kids[0][0] * kids[0][1], kids[0][1]
    if recipe.op == "degree":
        return kids[0][0] * recipe.k, kids[0][1] * recipe.k
    if recipe.op == "power":
        return kids[0][0] ** recipe.k, kids[0][1] * recipe.k
    if recipe.op == "bi":
        return kids[0][0], 2 * kids[0][1]
    if recipe.op == "product":
        return int(np.prod([n for n, _ in kids])), sum(d for _, d in kids)
    return kids[0]


def constructible(recipe, limit: int, base_limit: int) -> bool:
    """Whether ``recipe`` is built by expansion rules (RULES) above subtrees within ``limit``
    (N²·d) or a base within ``base_limit`` (the replay limit): what `certify` verifies."""
    n, d = _size(recipe)
    if n * n * d <= (base_limit if recipe.op == "base" else limit):
        return True
    return recipe.op in rules.RULES and constructible(recipe.children[0], limit, base_limit)


def _check_preconditions(recipe, child) -> None:
    """The operator's theorem's preconditions on its operand (Operator.preconditions)."""
    failed = [name for name, ok in operator(recipe.op).preconditions(child.topology, child)
              if not ok]
    if failed:
        raise TopofinderError(f"{recipe.expr}: {operator(recipe.op).name} precondition fails "
                              f"on {child.topology.expr}: {'; '.join(failed)}")


def predicted_from(recipe, replayed) -> tuple[int, Fraction]:
    """(T_L, τ) the operators' theorems give for ``recipe`` from the replayed (T_L, τ) of its
    materialised subtrees (``replayed``: expr → (N, d, T_L, τ))."""
    if recipe.expr in replayed:
        return replayed[recipe.expr][2:]
    child = recipe.children[0]
    n, d, t_l, tau = (*_size(child), *predicted_from(child, replayed))
    out = operator(recipe.op).predict([_Operand(n, d, t_l, tau)], recipe.k)
    return out[2], Fraction(out[3])


class _Operand:
    def __init__(self, n, d, t_l, tau):
        self.n, self.d, self.t_l, self.tau = n, d, t_l, tau


def detection(k: int) -> str:
    """The detection statement of a k-receiver sample and the invariants on every node."""
    return (f"a construction fault that makes a fraction p of the receivers fail their exact "
            f"replay is caught with probability >= 1 - (1 - p)^{k}; one that changes any "
            f"node's per-step per-link chunk counts, at however few nodes, is caught surely")


def certify(recipe, t_l: int | None, tau: Fraction | None, limit: int, build,
            sample: int = DEFAULT_SAMPLE, seed: int = DEFAULT_SEED,
            fault: str | None = None) -> dict:
    """Verify ``recipe``'s allgather by construction against the claimed (t_l, tau) (None: the
    theorems' values from the replayed operands): the certificate {"T_L", "tau", "sample",
    "seed", "receivers_checked", "rows_checked", "bases", "invariants", "detection"}
    (``invariants``: topofinder.finder.invariants.check's record); ScheduleError or
    TopofinderError naming the first failure. ``limit``: the N²·d within which subtrees are
    replayed in full; ``build(subtree)`` their allgather. ``sample`` = 0: a price only (the
    operands replayed, the theorems' values; no invariants, no receiver, no "invariants")."""
    built = construction_rule(recipe, limit, build, fault)
    if built is None:
        raise TopofinderError(f"{recipe.expr}: not built by expansion rules above the replay "
                              f"limit")
    rule, bases = built
    replayed = {r.expr: (s.topology.n, s.topology.degree, s.num_steps, s.tau)
                for r, s in bases}
    predicted = predicted_from(recipe, replayed)
    if t_l is None:
        t_l, tau = predicted
    if predicted != (t_l, Fraction(tau)):
        raise TopofinderError(f"{recipe.expr}: the theorems give (T_L, tau) = "
                              f"({predicted[0]}, {predicted[1]}) from the replayed operands, "
                              f"not the claimed ({t_l}, {tau})")
    cert = {"T_L": int(t_l), "tau": str(Fraction(tau)), "sample": 0, "seed": int(seed),
            "receivers_checked": 0, "rows_checked": 0, "bases": sorted(replayed),
            "detection": detection(0)}
    if sample == 0:
        return cert
    cert["invariants"], loads = invariants.check(rule, t_l, Fraction(tau))
    receivers = sampled(rule.topology.n, sample, seed)
    loads.keep(receivers)
    rows = sum(check_receiver(rule, int(w), t_l, Fraction(tau), loads) for w in receivers)
    k = int(receivers.size)
    cert.update(sample=k, receivers_checked=k, rows_checked=int(rows), detection=detection(k))
    return cert


def sampled(n: int, sample: int, seed: int) -> np.ndarray:
    """The receivers a certificate of ``sample`` and ``seed`` replays exactly (sorted)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(sample, n), replace=False))


def check_receiver(rule, w: int, t_l: int, tau: Fraction, loads=None) -> int:
    """Replay receiver ``w`` of ``rule``'s allgather exactly (module docstring, step 4)
    and, given the count map ``loads`` (invariants.Loads), match its rows' counts to it;
    the number of rows checked. ScheduleError on the first violation."""
    topo, p, n = rule.topology, rule.shard_chunks, rule.topology.n
    mine = rule.rows_into([w])
    senders = np.unique(mine[:, 4])
    theirs = rule.rows_into(senders)
    both = np.concatenate([mine, theirs])
    cap = _well_formed(both, topo, p, t_l)
    _complete_once(mine, w, n, p)
    _held(mine, theirs, n, p)
    budget = tau * n * p / topo.node_bandwidth        # Σ_t max load/cap, in chunks
    over = _over_budget(both, cap, budget)
    if over is not None:
        raise ScheduleError(f"node {over}'s in-links carry more than tau = {tau} allows")
    if loads is not None:
        invariants.match_sample(loads, mine, w, n)
    return int(both.shape[0])


def _describe(row) -> str:
    t, v, lo, hi, u, w = (int(x) for x in row)
    return f"step {t}: node {u} sends chunks [{lo},{hi}) of node {v}'s shard to node {w}"


def _well_formed(rows: np.ndarray, topo, p: int, t_l: int) -> None:
    if rows.size == 0:
        return
    t, v, lo, hi, u, w = rows.T
    n = topo.n
    for bad, why in (((t < 1) | (t > t_l), f"a step outside 1..{t_l}"),
                     ((lo < 0) | (hi > p) | (lo >= hi), f"a chunk range outside [0, {p})"),
                     ((np.minimum(np.minimum(v, u), w) < 0) |
                      (np.maximum(np.maximum(v, u), w) >= n), "a node outside the topology"),
                     (v == w, "a node is sent its own shard")):
        if bad.any():
            raise ScheduleError(f"{_describe(rows[np.argmax(bad)])}: {why}")
    cap = link_capacity(topo, u, w)
    if (cap == 0).any():
        raise ScheduleError(f"{_describe(rows[np.argmax(cap == 0)])}: no link u->w in "
                            f"{topo.expr}")
    return cap


def _complete_once(rows: np.ndarray, w: int, n: int, p: int) -> None:
    """w receives chunks [0, P) of every other shard, each exactly once."""
    order = np.lexsort((rows[:, 2], rows[:, 1]))
    v, lo, hi = rows[order, 1], rows[order, 2], rows[order, 3]
    first = np.ones(v.size, bool)
    first[1:] = v[1:] != v[:-1]
    last = np.ones(v.size, bool)
    last[:-1] = v[1:] != v[:-1]
    owners = int(first.sum())
    gap = ~first[1:] & (lo[1:] != hi[:-1])
    if owners != n - 1 or (lo[first] != 0).any() or (hi[last] != p).any() or gap.any():
        raise ScheduleError(f"node {w} does not receive every chunk of the {n - 1} other "
                            f"shards exactly once ({owners} shards reach it)")


#: largest (senders × N × P) arrival table `_held` keeps dense (int64: 400 MB); beyond it the
#: chunk ranges are cut at their breakpoints instead
DENSE_HELD_CELLS = 50_000_000


def _held(mine: np.ndarray, theirs: np.ndarray, n: int, p: int) -> None:
    """Each row into w is sent by its owner or by a sender that received those chunks at an
    earlier step (theirs: the senders' own received rows)."""
    relay = mine[mine[:, 4] != mine[:, 1]]
    if relay.size == 0:
        return
    senders = _uniq(relay[:, 4])
    if senders.size * n * p <= DENSE_HELD_CELLS:
        arrival = np.full(senders.size * n * p, np.iinfo(np.int64).max, np.int64)
        mask = np.isin(theirs[:, 5], senders)
        got = theirs[mask]
        base = (np.searchsorted(senders, got[:, 5]) * n + got[:, 1]) * p
        idx, owner = _ranges(base + got[:, 2], base + got[:, 3])
        np.minimum.at(arrival, idx, got[owner, 0])
        base = (np.searchsorted(senders, relay[:, 4]) * n + relay[:, 1]) * p
        a, b = base + relay[:, 2], base + relay[:, 3]
    else:
        span = p + 1
        code = lambda r, c: (r[:, 5] * n + r[:, 1]) * span + r[:, c]          # noqa: E731
        qcode = lambda r, c: (r[:, 4] * n + r[:, 1]) * span + r[:, c]         # noqa: E731
        points = _uniq(np.concatenate([code(theirs, 2), code(theirs, 3),
                                       qcode(relay, 2), qcode(relay, 3)]))
        arrival = np.full(points.size, np.iinfo(np.int64).max, np.int64)
        idx, owner = _ranges(np.searchsorted(points, code(theirs, 2)),
                             np.searchsorted(points, code(theirs, 3)))
        np.minimum.at(arrival, idx, theirs[owner, 0])
        a, b = np.searchsorted(points, qcode(relay, 2)), np.searchsorted(points, qcode(relay, 3))
    idx, owner = _ranges(a, b)
    starts = np.cumsum(b - a) - (b - a)
    latest = np.maximum.reduceat(arrival[idx], starts)
    bad = latest >= relay[:, 0]
    if bad.any():
        row = relay[np.argmax(bad)]
        raise ScheduleError(f"{_describe(row)}, but node {int(row[4])} does not hold those "
                            f"chunks before step {int(row[0])}")


def _uniq(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (by a sort: faster than np.unique's hashing here)."""
    x = np.sort(x)
    keep = np.ones(x.size, bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def _ranges(a: np.ndarray, b: np.ndarray):
    """Concatenated aranges a[i]..b[i]-1 and the row of each element."""
    lens = b - a
    owner = np.repeat(np.arange(a.size), lens)
    idx = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens - a, lens)
    return idx, owner


def _over_budget(rows: np.ndarray, cap: np.ndarray, budget: Fraction) -> int | None:
    """A receiver among ``rows``' whose Σ_t max over its in-links of load_t/cap (chunks)
    exceeds ``budget``, or None. (rows: every row into each receiver they name.)"""
    if rows.size == 0:
        return None
    key = np.stack([rows[:, 5], rows[:, 0], rows[:, 4]])
    order = np.lexsort(key[::-1])
    r, t, u = key[:, order]
    head = np.ones(r.size, bool)
    head[1:] = (r[1:] != r[:-1]) | (t[1:] != t[:-1]) | (u[1:] != u[:-1])
    at = np.flatnonzero(head)
    load = np.add.reduceat(rows[order, 3] - rows[order, 2], at)
    c = cap[order][at]
    common = int(np.lcm.reduce(np.unique(c)))
    scaled = load * (common // c)
    r, t = r[at], t[at]
    step = np.ones(r.size, bool)
    step[1:] = (r[1:] != r[:-1]) | (t[1:] != t[:-1])
    peak = np.maximum.reduceat(scaled, np.flatnonzero(step))
    rr = r[step]
    node = np.ones(rr.size, bool)
    node[1:] = rr[1:] != rr[:-1]
    total = np.add.reduceat(peak, np.flatnonzero(node))
    bad = total > budget * common
    return int(rr[node][np.argmax(bad)]) if bad.any() else None
