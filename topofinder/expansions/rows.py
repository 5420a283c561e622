"""The expansions' allgather schedules receiver by receiver (paper 001 Def 1, 2, 14, App. A.6).

:mod:`topofinder.expansions.schedules` builds an expanded schedule whole (its ~N²·d rows);
here the same rules generate only the rows *into* chosen receivers — ``rows_into(R)`` —
from the base's rows into a few base nodes, in O(|R|·N·d) time and memory, so one rank's
part of an N = 10^5 schedule, or a sampled replay of it (topofinder.finder.certify), needs
no full schedule. ``rows_from(S)`` (a rank's sends) are the rows into S's out-neighbours sent
by S. The node numbering, chunk ranges and steps are those of ``schedules``'s constructions,
row for row (tests compare both at N ≤ 4096).

``loads(weight)`` is the same rule in aggregate, for the structural invariants checked on
every node (topofinder.finder.invariants): each (step, sender, receiver) link's chunk count,
each row weighted by ``weight[owner]``, in O(N·d·T) from the operand's loads — the rows of
step 1 (line graph) and of the last step (degree expansion) are generated for every node by
the same code as ``rows_into``, the body from the operand's loads by the theorem's count map.
``rows_owned(R, V)``: the rows into R[i] of V[i]'s shard (the line graph's count map needs
each arc's head's shard as its tail receives it).

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
from topofinder.model.schedule import ScheduleError, StepSchedule
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
    # faults confined to a few nodes (< 1/k of them): the sample misses them, the invariants
    # on every node (topofinder.finder.invariants) catch them
    "line-first-node": "line graph: node 0 is sent its first in-neighbour's shard twice at step 1",
    "line-split-pair": "line graph: sends over the first base arc carry a doubled chunk range",
    "degree-last-node": "degree expansion: the last node misses its first last-step chunk",
    "degree-last-self": "degree expansion: node 0's last-step chunks from its first in-arc "
                        "are sent by node 0 itself",
}

#: the faults of FAULTS that only the invariants on every node catch at the default sample
LOCAL_FAULTS = ("line-first-node", "line-split-pair", "degree-last-node", "degree-last-self")


def _stack(*cols) -> np.ndarray:
    cols = np.broadcast_arrays(*[np.asarray(c, np.int64) for c in cols])
    return np.stack(cols, axis=-1).reshape(-1, 6) if cols[0].size else np.zeros((0, 6), np.int64)


#: largest N² for which `Rule.link_ids` finds links in a dense table (int32: 64 MB)
DENSE_LINKS = 1 << 24
#: most (step, link) bins `Rule.sum_loads` sums into (float64: 1 GB); beyond, by sorting
BINS = 1 << 27


def aggregate(t, u, w, c, n: int) -> np.ndarray:
    """(t, u, w, c) rows summed per (t, u, w) link-step, sorted, zero counts dropped."""
    t, u, w, c = (np.asarray(x, np.int64).reshape(-1) for x in np.broadcast_arrays(t, u, w, c))
    key = (t * n + u) * n + w
    order = np.argsort(key, kind="stable")
    key, c = key[order], c[order]
    if key.size == 0:
        return np.zeros((0, 4), np.int64)
    head = np.ones(key.size, bool)
    head[1:] = key[1:] != key[:-1]
    at = np.flatnonzero(head)
    total = np.add.reduceat(c, at)
    key = key[at]
    out = np.stack([key // (n * n), key // n % n, key % n, total], 1)
    return out[total != 0]


def _row_loads(rows: np.ndarray, weight: np.ndarray) -> tuple:
    """The (t, u, w, c) of explicit rows, each weighted by weight[owner] (a `sum_loads`
    part)."""
    return rows[:, 0], rows[:, 4], rows[:, 5], (rows[:, 3] - rows[:, 2]) * weight[rows[:, 1]]


def _pairs(receivers, owners) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(receivers, np.int64).reshape(-1)
    o = np.asarray(owners, np.int64).reshape(-1)
    return r, o


def _only(rows: np.ndarray, receivers: np.ndarray, owners: np.ndarray, n: int) -> np.ndarray:
    """The rows whose (receiver, owner) is one of the pairs."""
    return rows[np.isin(rows[:, 5] * n + rows[:, 1], receivers * n + owners)]


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

    def rows_owned(self, receivers, owners) -> np.ndarray:
        """The rows into receivers[i] of owners[i]'s shard, for every i."""
        raise NotImplementedError

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """(t, u, w, c, link), sorted by (t, link): c = Σ (hi − lo)·weight[v] over the rows of
        link u→w (CSR index ``link``, `links`) at step t, zero counts left out."""
        raise NotImplementedError

    def links(self):
        """This topology's links as its link matrix's CSR: (indptr, tail of each, head of each)."""
        if "_links" not in self.__dict__:
            m = self.topology.link_matrix
            ptr, col = m.indptr.astype(np.int64), m.indices.astype(np.int64)
            self._links = ptr, np.repeat(np.arange(self.topology.n), np.diff(ptr)), col
        return self._links

    def link_ids(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The CSR index of link u→w for each (u, w); ScheduleError for a pair that is no
        link (a row off the topology: invariant 1 of topofinder.finder.invariants)."""
        ptr, _, col = self.links()
        n = self.topology.n
        link = np.full(u.size, -1, np.int64)
        inside = (np.minimum(u, w) >= 0) & (np.maximum(u, w) < n)
        if n * n <= DENSE_LINKS:
            if "_dense" not in self.__dict__:
                self._dense = np.full(n * n, -1, np.int32)
                self._dense[self.links()[1] * n + col] = np.arange(col.size)
            link[inside] = self._dense[u[inside] * n + w[inside]]
        elif col.size:
            uu = np.where(inside, u, 0)
            first, count = ptr[uu], ptr[uu + 1] - ptr[uu]
            for k in range(int(np.diff(ptr).max())):      # w's place in row u
                hit = inside & (k < count) & (col[np.minimum(first + k, col.size - 1)] == w)
                link[hit] = first[hit] + k
        if (link < 0).any():
            i = int(np.argmax(link < 0))
            raise ScheduleError(f"node {u[i]} sends to node {w[i]}, which is no link of "
                                f"{self.topology.expr}")
        return link

    def sum_loads(self, *parts) -> np.ndarray:
        """The (t, u, w, c, link) loads of the parts summed per link and step, sorted by
        (step, link): each part (t, u, w, c) rows, or (t, link, c) with ``link`` this
        topology's CSR index (`links`). Summed by bins (exact: float64 sums of integers
        below 2^52), or by sorting beyond BINS cells."""
        ts, ls, cs = [], [], []
        for part in parts:
            cols = [np.asarray(x, np.int64).reshape(-1) for x in np.broadcast_arrays(*part)]
            ts.append(cols[0])
            ls.append(cols[1] if len(cols) == 3 else self.link_ids(cols[1], cols[2]))
            cs.append(cols[-1])
        t, link, c = np.concatenate(ts), np.concatenate(ls), np.concatenate(cs)
        _, tail, head = self.links()
        m = max(head.size, 1)
        key = t * m + link
        if key.size and key.max() < BINS and np.abs(c).sum() < 1 << 52:
            tot = np.rint(np.bincount(key, weights=c)).astype(np.int64)
            at = np.flatnonzero(tot)
            tot = tot[at]
        else:
            order = np.argsort(key, kind="stable")
            key, c = key[order], c[order]
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
            at, tot = key[starts], np.add.reduceat(c, starts) if key.size else c
            at, tot = at[tot != 0], tot[tot != 0]
        link = at % m
        return np.stack([at // m, tail[link], head[link], tot, link], 1)

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

    def rows_owned(self, receivers, owners) -> np.ndarray:
        r, o = _pairs(receivers, owners)
        n, sends = self.topology.n, self.schedule.sends
        if "_owned" not in self.__dict__:
            key = sends[:, 5] * n + sends[:, 1]
            order = np.argsort(key, kind="stable")
            self._owned = order, key[order]
        order, key = self._owned
        q = np.unique(r * n + o)
        a, b = np.searchsorted(key, q, "left"), np.searchsorted(key, q, "right")
        lens = b - a
        idx = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens - a, lens)
        return sends[order[idx]]

    def loads(self, weight: np.ndarray) -> np.ndarray:
        return self.sum_loads(_row_loads(self.schedule.sends, weight))


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
        self._out = group_indices(g.src, n)              # arcs out of each node
        self.shard_chunks = child.shard_chunks * self.refine
        self.shift = 2 if fault == "line-step" else 1    # base step t → step t + 1
        self.num_steps = child.num_steps + self.shift
        self.method = "line-graph"

    def rows_into(self, receivers) -> np.ndarray:
        f_all = np.asarray(receivers, np.int64)
        return self._rows(f_all, self.child.rows_into(np.unique(self.g.src[f_all])))

    def rows_owned(self, receivers, owners) -> np.ndarray:
        f, a = _pairs(receivers, owners)
        base = self.child.rows_owned(self.g.src[f], self.g.dst[a])
        return _only(self._rows(np.unique(f), base), f, a, self.topology.n)

    def _first(self, f_all: np.ndarray) -> np.ndarray:
        """Step 1: every in-arc e of f's tail sends its whole shard (lg arcs e → f, e ≠ f)."""
        g, p = self.g, self.shard_chunks
        if self.fault == "line-swap":           # f receives its own shard from its successors
            succ = group_indices(g.src, g.n)
            i, e, _ = group_members(g.dst[f_all], succ)
            f, e = f_all[i], e
            keep = e != f
            return _stack(1, f[keep], 0, p, e[keep], f[keep])
        i, e, _ = group_members(g.src[f_all], self._in)
        keep = e != f_all[i]
        rows = _stack(1, e[keep], 0, p, e[keep], f_all[i][keep])
        if self.fault == "line-first-node":
            rows = np.concatenate([rows, rows[rows[:, 5] == 0][:1]])
        return rows

    def _slots(self, b: np.ndarray):
        """Base rows (t, v, lo, hi, u, w) over pair u→w cut over its k parallel arcs: (the
        base row of each piece, the arc sending it, its first chunk, its length), in the
        refined chunks."""
        g = self.g
        pid = np.searchsorted(self._pairs, b[:, 4] * g.n + b[:, 5])
        j, sender, slot = group_members(pid, self._by_pair)
        piece = (b[j, 3] - b[j, 2]) * self.refine // self._mult[pid[j]]
        if self.fault == "line-split-pair":
            piece = np.where(pid[j] == 0, 2 * piece, piece)
        return j, sender, b[j, 2] * self.refine + slot * piece, piece

    def _rows(self, f_all: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The rows into f_all, given ``base``: the operand's rows into their tails (all of
        them, or those of the owners wanted)."""
        g = self.g
        first = self._first(f_all)
        if base.size == 0:
            return first
        # pair each receiver f with the base rows into its tail w
        tails = np.unique(g.src[f_all])
        pos = np.searchsorted(tails, base[:, 5])
        i, r, _ = group_members(np.searchsorted(tails, g.src[f_all]), group_indices(pos, tails.size))
        f, b = f_all[i], base[r]
        # the parallel arcs of pair u→w, slot s of k
        j, sender, lo, piece = self._slots(b)
        f, b = f[j], b[j]
        if self.fault == "line-port":           # the next in-arc of w instead of u→w
            order, start, count = self._in
            w = b[:, 5]
            sender = order[start[w] + (_rank_in(sender, self._in) + 1) % count[w]]
        # every in-arc a of the owner v, except f itself
        m, owner, orank = group_members(b[:, 1], self._in)
        f, lo, piece, sender, t = f[m], lo[m], piece[m], sender[m], b[m, 0]
        keep = np.ones(owner.size, bool) if self.fault == "line-self" else owner != f
        if self.fault == "line-drop-arc":
            keep &= orank != 0
        owner, f, lo, piece, sender, t = (x[keep] for x in (owner, f, lo, piece, sender, t))
        if self.fault == "line-relabel":
            owner = (owner + 1) % g.num_arcs
        t = t + self.shift
        if self.fault == "line-chunk":
            lo = lo + 1
        later = _stack(t, owner, lo, lo + piece, sender, f)
        if self.fault == "line-twice":
            later = np.concatenate([later, later[later[:, 0] == 2]])
        if self.fault == "line-missing-step":
            later = later[later[:, 0] != 2]
        return np.concatenate([first, later])

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """Step 1's rows for every node (``_first``); at t + 1, each base load of u→w at t
        cut over the parallel arcs (``_slots``) goes to every out-arc f of w, once per in-arc
        a ≠ f of the owner: weighted by Σ_{a → v} weight[a] (the operand's loads under that
        weight), less the rows a = f, i.e. w's rows of f's head's shard (``rows_owned``)."""
        g, nl = self.g, self.topology.n
        into = np.zeros(g.n, np.int64)
        np.add.at(into, g.dst, weight)
        base = self.child.loads(into)
        # each operand link u→w at step t: its slots' arcs s (``_slots``) to every out-arc f
        # of w at t + 1, as (operand link, link s→f, chunks per operand chunk)
        _, tail, head = self.child.links()
        j, sender, _, piece = self._slots(_stack(0, 0, 0, 1, tail, head))
        i, f, _ = group_members(head[j], self._out)
        src, link, factor = j[i], self.link_ids(sender[i], f), piece[i]
        e, member, _ = group_members(base[:, 4], group_indices(src, tail.size))
        # less the rows of owner a = f: w's rows of head(f)'s shard, each sent to f
        own = self.child.rows_owned(g.src, g.dst)
        r, f_own, _ = group_members(np.searchsorted(self._pairs, own[:, 5] * g.n + own[:, 1]),
                                    self._by_pair)
        j_own, s_own, _, p_own = self._slots(own[r])
        f_own = f_own[j_own]
        later = self.sum_loads(_row_loads(self._first(np.arange(nl)), weight),
                               (base[e, 0] + self.shift, link[member],
                                base[e, 3] * factor[member]),
                               (own[r][j_own, 0] + self.shift, s_own, f_own,
                                -p_own * weight[f_own]))
        if later.size and later[:, 3].min() < 0:
            raise TopofinderError(f"{self.topology.expr}: the line-graph count map gives a "
                                  f"negative load")
        return later


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
        w = y % self.g.n
        return np.concatenate([self._body(y, self.child.rows_into(np.unique(w))),
                               self._last(y)])

    def rows_owned(self, receivers, owners) -> np.ndarray:
        y, x = _pairs(receivers, owners)
        n = self.g.n
        y1 = np.unique(y)
        rows = np.concatenate([self._body(y1, self.child.rows_owned(y % n, x % n)),
                               self._last(y1)])
        return _only(rows, y, x, self.topology.n)

    def _body(self, y: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Steps 1..T into y, given ``base``: the operand's rows into their base nodes."""
        n, nf, s = self.g.n, self.nf, self.scale
        copy, w = y // n, y % n
        tails = np.unique(w)
        pos = np.searchsorted(tails, base[:, 5])
        i, r, _ = group_members(np.searchsorted(tails, w), group_indices(pos, tails.size))
        b, ci = base[r][:, None, :], copy[i][:, None]
        j = np.arange(nf)[None, :]
        sj = (j + 1) % nf if self.fault == "degree-copy" else j
        return _stack(b[..., 0], j * n + b[..., 1], b[..., 2] * s, b[..., 3] * s,
                      sj * n + b[..., 4], ci * n + b[..., 5])

    def _last(self, y: np.ndarray) -> np.ndarray:
        """Step T+1 into y: receiver copy jj of u gets chunk α = k·d + r of copy ii's shard
        from copy k of x (x→u u's r-th in-arc), for ii ≠ jj."""
        n, nf, d = self.g.n, self.nf, self.g.degree
        copy, w = y // n, y % n
        m, arc, rank = group_members(w, self._in)
        if self.fault == "degree-alpha":
            rank = rank + 1
        kk, ii = np.meshgrid(np.arange(nf), np.arange(nf), indexing="ij")
        kk, ii = kk.reshape(1, -1), ii.reshape(1, -1)
        jj, u, x, rk = copy[m][:, None], w[m][:, None], self.g.src[arc][:, None], rank[:, None]
        if self.fault == "degree-last-self":
            x = np.where((y[m][:, None] == 0) & (rk == 0), u, x)
        piece = self.shard_chunks // (nf * d)
        alpha = kk * d + rk
        step = self.child.num_steps + (2 if self.fault == "degree-step" else 1)
        last = _stack(step, ii * n + u, alpha * piece, (alpha + 1) * piece, kk * n + x,
                      jj * n + u)
        other = np.broadcast_to(ii != jj, alpha.shape).reshape(-1)
        other = np.array(other)
        hit = other & (last[:, 5] == self.topology.n - 1)
        if self.fault == "degree-last-node" and hit.any():
            other[np.argmax(hit)] = False
        return last[other]

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """The last step's rows for every node (``_last``); each base load of u→w at t,
        under the weight of copy j's owners, on every u_j → w_i, chunks scaled."""
        n, nf, big = self.g.n, self.nf, self.topology.n
        parts = [_row_loads(self._last(np.arange(big)), weight)]
        _, tail, head = self.child.links()
        known = {}                                 # copies of equal weights share one map
        for j in range(nf):
            part = weight[j * n:(j + 1) * n]
            if part.tobytes() not in known:
                known[part.tobytes()] = self.child.loads(part)
            b = known[part.tobytes()]
            for i in range(nf):
                link = self.link_ids(j * n + tail, i * n + head)     # u_j → w_i
                parts.append((b[:, 0], link[b[:, 4]], b[:, 3] * self.scale))
        return self.sum_loads(*parts)


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
        return self._rows(np.asarray(receivers, np.int64), None)

    def rows_owned(self, receivers, owners) -> np.ndarray:
        y, x = _pairs(receivers, owners)
        return _only(self._rows(np.unique(y), (y, x)), y, x, self.topology.n)

    def _shift(self, j: int) -> int:
        """Phase j's steps follow the j phases before it: base step t → t + j·T."""
        return j * self.child.num_steps + (1 if self.fault == "power-shift" and j else 0)

    def _unrotate(self, y: np.ndarray, i: int) -> np.ndarray:
        n, p = self.n, self.p
        return (y % n ** (p - i)) * n ** i + y // n ** (p - i)

    def _rows(self, y_all: np.ndarray, pairs) -> np.ndarray:
        """The rows into y_all (``pairs`` = (receivers, owners): only the operand's rows of
        those owners' coordinates are fetched)."""
        n, p, pc = self.n, self.p, self.child.shard_chunks
        out = []
        for i in range(p):
            # block i = rot_i(block 0); rows into y are rot_i of block-0 rows into rot_i⁻¹(y)
            x = self._unrotate(y_all, i)
            for j in range(p):
                after = n ** (p - j - 1)
                block = n * after
                ys, wb, zs = x // block, (x // after) % n, x % after
                tails = np.unique(wb)
                if pairs is None:
                    base = self.child.rows_into(tails)
                else:
                    yr, xr = (self._unrotate(c, i) // after % n for c in pairs)
                    base = self.child.rows_owned(yr, xr)
                pos = np.searchsorted(tails, base[:, 5])
                k, r, _ = group_members(np.searchsorted(tails, wb), group_indices(pos, tails.size))
                b = base[r][:, None, :]
                xs = np.arange(n ** j)[None, :]
                z = zs[k][:, None]
                zo = (z + 1) % after if self.fault == "power-coordinate" else z
                shift = self._shift(j)
                yb = ys[k][:, None]
                rows = _stack(b[..., 0] + shift, xs * block + b[..., 1] * after + zo,
                              b[..., 2] + i * pc, b[..., 3] + i * pc,
                              yb * block + b[..., 4] * after + z,
                              yb * block + b[..., 5] * after + z)
                for c in (1, 4, 5):
                    rows[:, c] = (rows[:, c] % n ** i) * n ** (p - i) + rows[:, c] // n ** i
                out.append(rows)
        return np.concatenate(out)

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """Block i, phase j: each base load of u→w at t, times the n^j owner prefixes, on
        every y_prefix·u·z → y_prefix·w·z at t + j·T, rotated by i (owners' weight uniform:
        the weights a line graph of a regular G^p passes)."""
        if weight.size and (weight != weight[0]).any():
            raise TopofinderError(f"{self.topology.expr}: the Cartesian power's count map "
                                  f"takes a uniform weight (a regular operand)")
        n, p = self.n, self.p
        b = self.child.loads(np.full(n, weight[0] if weight.size else 1, np.int64))
        parts = []
        for i in range(p):
            for j in range(p):
                after = n ** (p - j - 1)
                pre = np.arange(n ** j)[:, None, None] * (n * after)
                z = np.arange(after)[None, :, None]
                u, w = (pre + b[None, None, :, c] * after + z for c in (1, 2))
                u, w = ((c % n ** i) * n ** (p - i) + c // n ** i for c in (u, w))
                parts.append((b[:, 0] + self._shift(j), u, w, b[:, 3] * n ** j))
        return self.sum_loads(*parts)


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
        return self._mirror(self.child.rows_into(y), self.child.rows_into(self.inv[y]))

    def rows_owned(self, receivers, owners) -> np.ndarray:
        y, x = _pairs(receivers, owners)
        return self._mirror(self.child.rows_owned(y, x),
                            self.child.rows_owned(self.inv[y], self.inv[x]))

    def _mirror(self, own: np.ndarray, m: np.ndarray) -> np.ndarray:
        h, pm = self.child.shard_chunks, self.perm
        mirrored = _stack(m[:, 0], pm[m[:, 1]], m[:, 2] + h, m[:, 3] + h, pm[m[:, 4]],
                          pm[m[:, 5]])
        return np.concatenate([own, mirrored])

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """G's loads, and G's loads under the weight of the mirrored owners on π(u) → π(w)."""
        own, m = self.child.loads(weight), self.child.loads(weight[self.perm])
        pm = self.perm
        return self.sum_loads(own[:, :4].T, (m[:, 0], pm[m[:, 1]], pm[m[:, 2]], m[:, 3]))


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
