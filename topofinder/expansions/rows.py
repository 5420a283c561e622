"""The expansions' allgather schedules receiver by receiver (paper 001 Def 1, 2, 14, App. A.6).

:mod:`topofinder.expansions.schedules` builds an expanded schedule whole (its ~N²·d rows);
here the same rules generate only the rows *into* chosen receivers — ``rows_into(R)`` —
from the base's rows into a few base nodes, in O(|R|·N·d) time and memory, so one rank's
part of an N = 10^5 schedule, or a sampled replay of it (topofinder.finder.certify), needs
no full schedule. ``rows_from(S)`` (a rank's sends) are the rows into S's out-neighbours sent
by S. The node numbering, chunk ranges and steps are those of ``schedules``'s constructions,
row for row (tests compare both at N ≤ 4096).

``fault``: a test hook — the name of one planted construction fault (FAULTS) the rule
applies to the rows it generates, so the sampled verification can be shown to catch it.
"""

from __future__ import annotations

from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.expansions.schedules import group_indices, group_members
from topofinder.model import operations
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology

#: planted construction faults a rule accepts as ``fault`` (tests only): name → what it does
FAULTS = {
    "line-relabel": "line graph: owner arc index off by one (a → a+1)",
    "line-step": "line graph: base step t shifted to t+2 instead of t+1",
    "line-drop-arc": "line graph: the first in-arc of each owner's head is dropped",
    "line-port": "line graph: a send leaves by the next in-arc of w, not the base arc's",
    "line-self": "line graph: a node is also sent its own shard (owner = receiver kept)",
    "line-chunk": "line graph: chunk ids shifted by one from step 2 on",
    "line-twice": "line graph: every step-2 send is made twice",
    "line-missing-step": "line graph: step 2 is left out",
    "line-swap": "line graph: step 1 sends with sender and receiver swapped",
    "degree-copy": "degree expansion: a body send leaves from copy j+1 of its sender",
    "degree-alpha": "degree expansion: last step's chunk index α one too high",
    "degree-step": "degree expansion: the last step placed at T+2",
    "power-coordinate": "Cartesian power: the owner's next coordinate taken off by one",
    "power-shift": "Cartesian power: phase j shifted by j·T + 1 steps",
}


def _stack(*cols) -> np.ndarray:
    cols = np.broadcast_arrays(*[np.asarray(c, np.int64) for c in cols])
    return np.stack(cols, axis=-1).reshape(-1, 6) if cols[0].size else np.zeros((0, 6), np.int64)


class Rule:
    """An allgather given by rows into receivers: ``topology``, ``shard_chunks`` (P),
    ``num_steps`` (T_L), ``method``; ``rows_into(R)`` the (t, v, lo, hi, u, w) rows with w ∈ R."""

    topology: Topology
    shard_chunks: int
    num_steps: int
    method: str
    fault: str | None = None

    def rows_into(self, receivers) -> np.ndarray:
        raise NotImplementedError

    def rows_from(self, senders) -> np.ndarray:
        """The rows sent by ``senders``: those into their out-neighbours whose u is one."""
        senders = np.unique(np.asarray(senders, np.int64))
        g = self.topology
        heads = np.unique(g.dst[np.isin(g.src, senders)])
        rows = self.rows_into(heads)
        return rows[np.isin(rows[:, 4], senders)]

    def materialise(self) -> StepSchedule:
        """The whole schedule (all receivers): for tests and small N only."""
        return StepSchedule(self.topology, self.shard_chunks,
                            self.rows_into(np.arange(self.topology.n)), method=self.method)


class Materialised(Rule):
    """A built schedule (a base, or any subtree within the replay limit), indexed by receiver."""

    def __init__(self, schedule: StepSchedule):
        if schedule.collective != Collective.ALLGATHER:
            raise TopofinderError(f"expansion rules take allgather schedules, got "
                                  f"{schedule.collective}")
        self.schedule = schedule
        self.topology, self.shard_chunks = schedule.topology, schedule.shard_chunks
        self.num_steps, self.method = schedule.num_steps, schedule.method
        self._groups = group_indices(schedule.sends[:, 5], schedule.topology.n)

    def rows_into(self, receivers) -> np.ndarray:
        r = np.asarray(receivers, np.int64)
        _, idx, _ = group_members(r, self._groups)
        return self.schedule.sends[idx]


class LineRule(Rule):
    """Def 1 (Thm 7, 10): node f = w→w' of L(G) receives every in-arc e = u→w's whole shard at
    step 1, and at step t+1, for each base row (v's chunks [lo, hi), u→w, t), those chunks of
    every in-arc a ≠ f of v, from the parallel arc of u→w whose slot cuts them (a k-fold
    multi-arc splits a send evenly; chunks refined by the lcm of the multiplicities)."""

    def __init__(self, child: Rule, fault: str | None = None):
        g = child.topology
        self.child, self.g, self.fault = child, g, fault
        self.topology = operations.line_graph(g)
        n = g.n
        pair = g.src * n + g.dst
        self._pairs, pair_id, self._mult = np.unique(pair, return_inverse=True,
                                                     return_counts=True)
        self._by_pair = group_indices(pair_id.reshape(-1), self._pairs.size)
        self.refine = lcm(*np.unique(self._mult).tolist())
        self._in = group_indices(g.dst, n)               # arcs into each node, by arc index
        self.shard_chunks = child.shard_chunks * self.refine
        self.num_steps = child.num_steps + 1 + (1 if fault == "line-step" else 0)
        self.method = "line-graph"

    def rows_into(self, receivers) -> np.ndarray:
        f_all = np.asarray(receivers, np.int64)
        g, p = self.g, self.shard_chunks
        # step 1: every in-arc e of f's tail sends its whole shard (lg arcs e → f, e ≠ f)
        if self.fault == "line-swap":           # f receives its own shard from its successors
            succ = group_indices(g.src, g.n)
            i, e, _ = group_members(g.dst[f_all], succ)
            f, e = f_all[i], e
            keep = e != f
            first = _stack(1, f[keep], 0, p, e[keep], f[keep])
        else:
            i, e, _ = group_members(g.src[f_all], self._in)
            keep = e != f_all[i]
            first = _stack(1, e[keep], 0, p, e[keep], f_all[i][keep])
        tails = np.unique(g.src[f_all])
        base = self.child.rows_into(tails)
        if base.size == 0:
            return first
        # pair each receiver f with the base rows into its tail w
        pos = np.searchsorted(tails, base[:, 5])
        i, r, _ = group_members(np.searchsorted(tails, g.src[f_all]), group_indices(pos, tails.size))
        f, b = f_all[i], base[r]
        # the parallel arcs of pair u→w, slot s of k
        pid = np.searchsorted(self._pairs, b[:, 4] * g.n + b[:, 5])
        j, sender, slot = group_members(pid, self._by_pair)
        f, b, k = f[j], b[j], self._mult[pid[j]]
        if self.fault == "line-port":           # the next in-arc of w instead of u→w
            order, start, count = self._in
            w = b[:, 5]
            sender = order[start[w] + (_rank_in(sender, self._in) + 1) % count[w]]
        piece = (b[:, 3] - b[:, 2]) * self.refine // k
        lo = b[:, 2] * self.refine + slot * piece
        # every in-arc a of the owner v, except f itself
        m, owner, orank = group_members(b[:, 1], self._in)
        f, lo, piece, sender, t = f[m], lo[m], piece[m], sender[m], b[m, 0]
        keep = np.ones(owner.size, bool) if self.fault == "line-self" else owner != f
        if self.fault == "line-drop-arc":
            keep &= orank != 0
        owner, f, lo, piece, sender, t = (x[keep] for x in (owner, f, lo, piece, sender, t))
        if self.fault == "line-relabel":
            owner = (owner + 1) % g.num_arcs
        t = t + (2 if self.fault == "line-step" else 1)
        if self.fault == "line-chunk":
            lo = lo + 1
        later = _stack(t, owner, lo, lo + piece, sender, f)
        if self.fault == "line-twice":
            later = np.concatenate([later, later[later[:, 0] == 2]])
        if self.fault == "line-missing-step":
            later = later[later[:, 0] != 2]
        return np.concatenate([first, later])


def _rank_in(arc: np.ndarray, groups) -> np.ndarray:
    """Each arc's rank among the arcs of its group (``groups`` = _csr of the arcs' heads)."""
    order, start, _ = groups
    rank = np.empty(order.size, np.int64)
    heads = np.repeat(np.arange(start.size), groups[2])
    rank[order] = np.arange(order.size) - start[heads]
    return rank[arc]


class DegreeRule(Rule):
    """Def 2 (Thm 11): G*n. Node i·N+w receives, at steps 1..T, every base row (v's C, u→w, t)
    as (v_j's C, u_j → w_i) for all copies j; at step T+1, for each in-arc x→w (rank r among
    w's in-arcs) and copies k, i' ≠ i, chunk α = k·d + r of w_{i'}'s shard (cut in n·d) from
    x_k. Chunks: lcm(P, n·d)."""

    def __init__(self, child: Rule, factor: int, fault: str | None = None):
        g = child.topology
        if factor < 2:
            raise TopofinderError(f"degree expansion factor must be >= 2, got {factor}")
        if g.self_loops or not g.is_regular or g.heterogeneous:
            raise TopofinderError(f"{g.expr}: degree expansion (Thm 11) needs a d-regular "
                                  f"topology without self-loops, with homogeneous links")
        self.child, self.g, self.nf, self.fault = child, g, factor, fault
        self.topology = operations.degree_expansion(g, factor)
        self.shard_chunks = lcm(child.shard_chunks, factor * g.degree)
        self.scale = self.shard_chunks // child.shard_chunks
        self._in = group_indices(g.dst, g.n)
        self.num_steps = child.num_steps + 1 + (1 if fault == "degree-step" else 0)
        self.method = "degree"

    def rows_into(self, receivers) -> np.ndarray:
        y = np.asarray(receivers, np.int64)
        n, nf, d, s = self.g.n, self.nf, self.g.degree, self.scale
        copy, w = y // n, y % n
        tails = np.unique(w)
        base = self.child.rows_into(tails)
        pos = np.searchsorted(tails, base[:, 5])
        i, r, _ = group_members(np.searchsorted(tails, w), group_indices(pos, tails.size))
        b, ci = base[r][:, None, :], copy[i][:, None]
        j = np.arange(nf)[None, :]
        sj = (j + 1) % nf if self.fault == "degree-copy" else j
        body = _stack(b[..., 0], j * n + b[..., 1], b[..., 2] * s, b[..., 3] * s,
                      sj * n + b[..., 4], ci * n + b[..., 5])
        # last step: receiver copy jj of u gets chunk alpha of copy ii's shard from x_k
        m, arc, rank = group_members(w, self._in)
        if self.fault == "degree-alpha":
            rank = rank + 1
        kk, ii = np.meshgrid(np.arange(nf), np.arange(nf), indexing="ij")
        kk, ii = kk.reshape(1, -1), ii.reshape(1, -1)
        jj, u, x, rk = copy[m][:, None], w[m][:, None], self.g.src[arc][:, None], rank[:, None]
        piece = self.shard_chunks // (nf * d)
        alpha = kk * d + rk
        step = self.child.num_steps + (2 if self.fault == "degree-step" else 1)
        last = _stack(step, ii * n + u, alpha * piece, (alpha + 1) * piece, kk * n + x,
                      jj * n + u)
        other = np.broadcast_to(ii != jj, alpha.shape).reshape(-1)
        return np.concatenate([body, last[other]])


class PowerRule(Rule):
    """Def 14 (Thm 12): G^p. Block i (sub-shard i) is block 0 with coordinates rotated right
    by i; block 0's phase j runs the base along coordinate j at steps shifted by j·T, for every
    owner prefix (coordinates before j), the receiver's suffix shared by owner and receiver."""

    def __init__(self, child: Rule, power: int, fault: str | None = None):
        if power < 2:
            raise TopofinderError(f"Cartesian power must be >= 2, got {power}")
        self.child, self.p, self.fault = child, power, fault
        self.n = child.topology.n
        self.topology = operations.cartesian_power(child.topology, power)
        self.shard_chunks = power * child.shard_chunks
        self.num_steps = power * child.num_steps + (1 if fault == "power-shift" else 0)
        self.method = "cartesian-power"

    def rows_into(self, receivers) -> np.ndarray:
        y_all = np.asarray(receivers, np.int64)
        n, p, steps, pc = self.n, self.p, self.child.num_steps, self.child.shard_chunks
        out = []
        for i in range(p):
            # block i = rot_i(block 0); rows into y are rot_i of block-0 rows into rot_i⁻¹(y)
            x = (y_all % n ** (p - i)) * n ** i + y_all // n ** (p - i)
            for j in range(p):
                after = n ** (p - j - 1)
                block = n * after
                ys, wb, zs = x // block, (x // after) % n, x % after
                tails = np.unique(wb)
                base = self.child.rows_into(tails)
                pos = np.searchsorted(tails, base[:, 5])
                k, r, _ = group_members(np.searchsorted(tails, wb), group_indices(pos, tails.size))
                b = base[r][:, None, :]
                xs = np.arange(n ** j)[None, :]
                z = zs[k][:, None]
                zo = (z + 1) % after if self.fault == "power-coordinate" else z
                shift = j * steps + (1 if self.fault == "power-shift" and j else 0)
                yb = ys[k][:, None]
                rows = _stack(b[..., 0] + shift, xs * block + b[..., 1] * after + zo,
                              b[..., 2] + i * pc, b[..., 3] + i * pc,
                              yb * block + b[..., 4] * after + z,
                              yb * block + b[..., 5] * after + z)
                for c in (1, 4, 5):
                    rows[:, c] = (rows[:, c] % n ** i) * n ** (p - i) + rows[:, c] // n ** i
                out.append(rows)
        return np.concatenate(out)


class BiRule(Rule):
    """App. A.6: Bi(G) for reverse-symmetric G with reverse isomorphism π: the base rows, and
    each base row mirrored (π(v), chunks + P, π(u) → π(w)) on G^T."""

    def __init__(self, child: Rule, fault: str | None = None):
        g = child.topology
        perm = operations.known_reverse_isomorphism(g)
        if perm is None:
            raise TopofinderError(f"{g.expr}: Bi(G) needs a known reverse isomorphism")
        self.child, self.perm, self.fault = child, perm, fault
        self.inv = np.argsort(perm)
        self.topology = operations.bidirectional(g)
        self.shard_chunks, self.num_steps = 2 * child.shard_chunks, child.num_steps
        self.method = "bidirectional"

    def rows_into(self, receivers) -> np.ndarray:
        y = np.asarray(receivers, np.int64)
        own = self.child.rows_into(y)
        m = self.child.rows_into(self.inv[y])
        h, pm = self.child.shard_chunks, self.perm
        mirrored = _stack(m[:, 0], pm[m[:, 1]], m[:, 2] + h, m[:, 3] + h, pm[m[:, 4]],
                          pm[m[:, 5]])
        return np.concatenate([own, mirrored])


#: recipe operator name → its rule class (the operators whose schedule is a function of the
#: operand's: topofinder.finder.operators)
RULES = {"line": LineRule, "degree": DegreeRule, "power": PowerRule, "bi": BiRule}


def rule(op: str, child: Rule, k: int, fault: str | None = None) -> Rule:
    """The rule of operator ``op`` (RULES) over ``child`` with the operator's k."""
    if op == "line":
        return LineRule(child, fault)
    if op == "bi":
        return BiRule(child, fault)
    return RULES[op](child, k, fault)
