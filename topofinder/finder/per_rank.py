"""One rank's part of the schedule `export` writes, at any N (docs/formats.md, "Per-rank
schedule"): the rows (t, v, lo, hi, u, w) a block of ranks sends (u in the block) and
receives (w in the block), for the allgather, reduce-scatter or allreduce of a recipe.

Within the replay limit the whole schedule is built (verify.collective_schedule) and cut.
Beyond it, a point with an orbit form (verified by symmetry: circulants, tori, Cayley graphs
of Z_m, their line graphs, powers and products; verify.symmetric_collective, the schedule
`export` writes there) is carried from its representatives' rows by the group (001 Def 7:
the rows of source γ(r) are γ applied to r's; `_by_symmetry`). A point verified by
construction is generated receiver by receiver from the expansion rules
(topofinder.expansions.rows): the allgather's rows into and out of the block; the
reduce-scatter the allgather reversed and relabelled by the reverse isomorphism p (Thm 2:
row (T+1−t, p(v), lo, hi, p(w), p(u)) of allgather row (t, v, lo, hi, u, w)), or, when G is
not reverse-symmetric, the same construction on the operands' transposes, relabelled onto
G^T (`transposed_map`) and reversed (Thm 1); the allreduce the reduce-scatter then the
allgather, both cut into P = lcm chunks, the allgather's steps after the reduce-scatter's
(Appendix B). A BFB base is not built whole either: its rows into the few base nodes the
block needs come from their own LPs at the base's step loads (BFBRows). Time and memory
O(|block|·N·d) plus the base's score.""" 

from __future__ import annotations

from functools import lru_cache
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.expansions import rows as rules
from topofinder.finder import certify
from topofinder.finder.verify import (
    REPLAY_LIMIT, _back, _reversible, build_schedule, build_topology, by_construction,
    collective_schedule, symmetric_collective, transposed_schedule,
)
from topofinder.model import operations
from topofinder.model.symmetric import OrbitSchedule, carried, replay_by_symmetry
from topofinder.model.collectives import Collective
from topofinder.scoring.allgather import bfb

#: the per-rank document's identity (schema ``rank_schedule.schema.json``)
RANK_FORMAT = "topofinder-rank-schedule"
RANK_VERSION = 1
#: steps collectives a per-rank export writes
RANK_COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)


#: why the other collectives `export` writes have no per-rank document (one line each)
_NOT_PER_RANK = {
    Collective.ALLTOALL: "its schedule moves fractions of the N(N−1) (source, destination) "
                         "pieces, found by one LP over the whole topology; export it whole",
    Collective.BROADCAST: "its periodic one-root schedule is written whole, as an MSCCL++ "
                          "plan (--format mscclpp)",
}


def check_collective(collective: str) -> None:
    """TopofinderError, one line saying why, unless ``collective`` has a per-rank document."""
    if collective not in RANK_COLLECTIVES:
        why = _NOT_PER_RANK.get(collective, f"per-rank documents hold "
                                            f"{', '.join(RANK_COLLECTIVES)}")
        raise TopofinderError(f"export --rank: no per-rank {collective} schedule: {why}")


def _touching(rows: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows sent by the ranks, rows received by them)."""
    return rows[np.isin(rows[:, 4], ranks)], rows[np.isin(rows[:, 5], ranks)]


def rank_document(recipe, ranks, collective: str = Collective.ALLGATHER) -> dict:
    """The per-rank document of ``ranks`` (sorted distinct node ids) for the recipe's
    ``collective``: header (topology, num_nodes, shard_chunks, num_steps, method, ranks, how
    it was made) and the ``sends`` and ``receives`` rows (module docstring)."""
    check_collective(collective)
    ranks = np.unique(np.asarray(ranks, np.int64))
    topo = build_topology(recipe)
    if ranks.size == 0 or ranks[0] < 0 or ranks[-1] >= topo.n:
        raise TopofinderError(f"export --rank: ranks must lie in 0..{topo.n - 1}")
    n2d = topo.n * topo.n * topo.degree
    if n2d <= REPLAY_LIMIT:
        s = collective_schedule(recipe, collective)
        sends, receives = _touching(s.sends, ranks)
        head = dict(shard_chunks=s.shard_chunks, num_steps=s.num_steps, method=s.method,
                    reduce_steps=s.reduce_steps, made="whole schedule, cut")
    elif by_construction(recipe):
        head, sends, receives = _constructed(recipe, topo, ranks, collective)
    else:
        orbit = replayed_orbit(recipe, collective)
        if orbit is None:
            raise TopofinderError(f"export --rank: {recipe.expr} has N²·d = {n2d:.2g} > "
                                  f"{REPLAY_LIMIT:.2g} and neither expansion rules nor an "
                                  f"orbit form to generate one rank's rows from")
        head, sends, receives = _by_symmetry(orbit, ranks)
    doc = {"format": RANK_FORMAT, "version": RANK_VERSION, "kind": "rank-steps",
           "collective": collective, "topology": topo.expr, "num_nodes": topo.n,
           "shard_chunks": head["shard_chunks"], "method": head["method"],
           "num_steps": head["num_steps"]}
    if collective == Collective.ALLREDUCE:
        doc["reduce_scatter_steps"] = head["reduce_steps"]
    doc.update({"made": head["made"], "ranks": ranks.tolist(),
                "columns": ["t", "v", "lo", "hi", "u", "w"],
                "sends": _sorted(sends), "receives": _sorted(receives)})
    return doc


@lru_cache(maxsize=2)              # a caller exporting rank after rank builds it once
def replayed_orbit(recipe, collective: str) -> OrbitSchedule | None:
    """The recipe's ``collective`` in orbit form, as `export` writes it beyond the replay
    limit (verify.symmetric_collective), replayed by symmetry; None without one."""
    orbit = symmetric_collective(recipe, collective)
    if orbit is not None:
        replay_by_symmetry(orbit)
    return orbit


def _by_symmetry(orbit: OrbitSchedule, ranks: np.ndarray):
    """(header, sends, receives) of ``ranks`` in the equivariant extension of ``orbit``: every
    row of the whole schedule is γ(ρ) for exactly one representative row ρ and one γ in Γ
    (free action), and γ(ρ) is received by y iff γ takes ρ's receiver w to y — so y's
    receives are, for each representative row whose w lies in y's orbit, that row carried by
    the element taking w to y (symmetric.carried); its sends likewise through the sender u.
    O(|ranks|·N·d) rows, as many as the whole schedule's rows at those ranks."""
    topo, rows = orbit.topology, orbit.sends
    gens = list(orbit.generators)
    sizes, backs = [topo.n], [_back(topo.n, gens)]
    node_orbit = orbit.action.node_orbit
    parts = []
    for col in (4, 5):                                   # sends (by u), receives (by w)
        order = np.argsort(node_orbit[rows[:, col]], kind="stable")
        bounds = np.searchsorted(node_orbit[rows[order, col]],
                                 np.arange(node_orbit.max() + 2))
        out = []
        for y in ranks.tolist():
            o = node_orbit[y]
            mine = rows[order[bounds[o]:bounds[o + 1]]]
            moved = mine.copy()
            for c in (1, 4, 5):
                moved[:, c] = carried(sizes, backs, mine[:, col], y, mine[:, c])
            out.append(moved)
        parts.append(np.concatenate(out) if out else rows[:0])
    made = ("orbit form (one source per orbit of a free automorphism group, replayed by "
            "symmetry), carried to these ranks by the group")
    return (dict(shard_chunks=orbit.shard_chunks, num_steps=orbit.num_steps,
                 method=orbit.method, reduce_steps=orbit.reduce_steps, made=made), *parts)


def _sorted(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])] if rows.size else rows.reshape(0, 6)


class BFBRows(rules.Rule):
    """The BFB allgather of a base (on G, or on G^T when ``transposed``) as rows into chosen
    receivers (bfb.bfb_receiver_rows: the whole schedule's rows, each receiver's LP solved at
    the base's step loads), without building the whole schedule."""

    def __init__(self, topo, transposed: bool = False):
        self.topology = topo.transpose() if transposed else topo
        self.score = bfb.bfb_score(self.topology)
        self.shard_chunks = lcm(*(u.denominator for u in self.score.step_load))
        self.num_steps, self.method = self.score.T_L, "bfb"

    def rows_into(self, receivers) -> np.ndarray:
        r = np.unique(np.asarray(receivers, np.int64))
        p, sends = bfb.bfb_receiver_rows(self.topology, r, self.score.step_load)
        if p != self.shard_chunks:
            raise TopofinderError(f"{self.topology.expr}: BFB rows cut in {p} chunks, not "
                                  f"{self.shard_chunks}")
        return sends


def _leaf(transposed: bool):
    """The per-rank export's stand-in for a BFB base (BFBRows; None: build it whole)."""
    def leaf(recipe):
        if recipe.op != "base" or recipe.source != "bfb":
            return None
        return BFBRows(build_topology(recipe), transposed)
    return leaf


def _constructed(recipe, topo, ranks, collective, limit: int = certify.OPERAND_LIMIT):
    """(header, sends, receives) from the expansion rules above subtrees within ``limit``."""
    ag, _ = certify.construction_rule(recipe, limit, build_schedule, leaf=_leaf(False))
    made = "expansion rules (topofinder.expansions.rows)"
    agp, ag_steps = ag.shard_chunks, ag.num_steps
    if collective == Collective.ALLGATHER:
        return (dict(shard_chunks=agp, num_steps=ag_steps, method=ag.method, reduce_steps=0,
                     made=made), *_touching(_around(ag, ranks), ranks))
    if _reversible(topo):                        # Thm 2: f(A^T), f = reverse isomorphism p
        p = operations.known_reverse_isomorphism(topo)
        q = np.argsort(p)[ranks]
        a = _around(ag, q)
        rs_rows = np.stack([ag_steps + 1 - a[:, 0], p[a[:, 1]], a[:, 2], a[:, 3], p[a[:, 5]],
                            p[a[:, 4]]], 1)
        rsp, rs_steps, rs_method = agp, ag_steps, ag.method
    else:                                        # Thm 1: the construction on G^T, reversed
        tr, _ = certify.construction_rule(recipe, limit, transposed_schedule,
                                          leaf=_leaf(True))
        pi = transposed_map(recipe, tr, limit)   # its nodes → G's
        a = _around(tr, np.argsort(pi)[ranks])
        rs_rows = np.stack([tr.num_steps + 1 - a[:, 0], pi[a[:, 1]], a[:, 2], a[:, 3],
                            pi[a[:, 5]], pi[a[:, 4]]], 1)
        rsp, rs_steps, rs_method = tr.shard_chunks, tr.num_steps, tr.method
    if collective == Collective.REDUCE_SCATTER:
        return (dict(shard_chunks=rsp, num_steps=rs_steps, method=rs_method, reduce_steps=0,
                     made=made), *_touching(rs_rows, ranks))
    p_all = lcm(rsp, agp)
    rs_rows[:, 2:4] *= p_all // rsp
    ag_rows = _around(ag, ranks)
    ag_rows[:, 2:4] *= p_all // agp
    ag_rows[:, 0] += rs_steps
    rows = np.concatenate([rs_rows, ag_rows])
    method = ag.method if rs_method == ag.method else f"{rs_method}+{ag.method}"
    return (dict(shard_chunks=p_all, num_steps=rs_steps + ag_steps, method=method,
                 reduce_steps=rs_steps, made=made), *_touching(rows, ranks))


def transposed_map(recipe, rule, limit: int = certify.OPERAND_LIMIT) -> np.ndarray:
    """π: node x of the construction on the operands' transposes (``rule``'s topology) ↦ the
    node of G = the recipe's topology it is, so that π maps that topology onto G^T. The
    operators commute with transposition up to this relabelling: L(H^T) ≅ L(H)^T by arc a'
    = x'→y' of H^T ↦ the arc π_H(y') → π_H(x') of H (parallel arcs matched in order), G*n
    and G^p coordinate-wise, Bi(G) alike; an operand built whole on its transpose is
    numbered as it is."""
    n, d = certify._size(recipe)
    if recipe.op == "base" or n * n * d <= limit:
        return np.arange(rule.topology.n)
    inner = transposed_map(recipe.children[0], rule.child, limit)
    if recipe.op == "line":
        g, h = build_topology(recipe.children[0]), rule.child.topology
        mine = np.argsort(inner[h.dst] * g.n + inner[h.src], kind="stable")
        theirs = np.argsort(g.src * g.n + g.dst, kind="stable")
        out = np.empty(h.num_arcs, np.int64)
        out[mine] = theirs
        return out
    if recipe.op == "degree":
        m = inner.size
        return (np.arange(recipe.k)[:, None] * m + inner[None, :]).reshape(-1)
    if recipe.op == "power":
        m, x = inner.size, np.arange(rule.topology.n)
        out = np.zeros_like(x)
        for j in range(recipe.k):
            out += inner[(x // m ** j) % m] * m ** j
        return out
    return inner


def _around(rule, block: np.ndarray) -> np.ndarray:
    """The rule's rows into or out of ``block``, each once."""
    out = rule.rows_from(block)
    return np.concatenate([rule.rows_into(block), out[~np.isin(out[:, 5], block)]])
