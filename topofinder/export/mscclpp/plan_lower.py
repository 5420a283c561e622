"""MSCCL++ lowering of a step schedule: every rank's program as one ordered table of op rows.

The executor (microsoft/mscclpp ``execution_kernel.hpp``) runs a threadblock's ops in order; a
port channel's ``put`` only pushes a request to the proxy (thread ``tid`` serves entry
``tid``) and a later ``signal`` on the same channel travels behind it, ``wait`` spins in
thread 0 until the peer's signal has arrived, and ``nop`` is ``__syncthreads()``. Each rank's
program (instance 0: chunk pieces ``x = v·P + c``) is, in schedule-step order:

- step 0: the launch handshake: a signal on every in-link's channel, a wait on every
  out-link's channel (the receiver has started this launch, so it is done reading what the
  last launch wrote), a nop; out of place, allgather copies its input into its output shard.
- step t: [a nop if data ops ran since the last one] the sends of step t, per out-link the
  message's runs (pieces contiguous at both ends) as ``put`` entries (up to 8 per op, each on
  its own thread), a nop and the send point (the writer makes it a ``sem_release`` that lets
  the link's own threadblock signal behind the puts); then the receive point (the writer
  makes it waits on per-link threadblocks and one ``sem_acquire``), a nop, and, in a reduce
  phase, the reductions: a received partial lands in fresh scratch and is reduced in place
  with the partial held (``re``), or, the last partial of the rank's own chunk, straight
  into its final place; a piece reduced twice in one step waits for the first with a nop.

By induction on t every op of step t can run once all ranks finished step t − 1 (sends read
only data of earlier steps, waits need only the peers' step-t sends), so the program cannot
deadlock; every place a put writes is fresh or final and written once per launch.

Rows (int64 columns, :data:`COLUMNS`): rank, step t, phase, sub (op order within the phase),
kind (:data:`KINDS`), peer (put: receiver; wait, signal: the link's other end), a, b, c (place
codes 4·index + buffer code, i 0, o 1, s 2; put: a source, c remote destination; reduce: a
received, b held, c destination; copy: a → c), size (chunks). Rows of one op are consecutive
and share (rank, t, phase, sub)."""

from __future__ import annotations

import numpy as np

from topofinder.model.collectives import Collective
from topofinder.model.schedule import ScheduleError, StepSchedule

COLUMNS = ("rank", "t", "phase", "sub", "kind", "peer", "a", "b", "c", "size")
#: Row kinds: a port put entry, a receive point (t > 0) or handshake wait, a send point (t > 0)
#: or handshake signal, nop, copy, reduce, a memory-channel put (one run, all threads).
KINDS = ("put", "wait", "signal", "nop", "copy", "re", "mput")
PUT, WAIT, SIGNAL, NOP, COPY, REDUCE, MPUT = range(len(KINDS))
BUFS = "ios"
PER_OP = 8                       # MAX_CHANNEL_PER_OPERATION: entries of a put, channels of a wait
_NF = len(COLUMNS)
_SUB = 1 << 24                   # sub = link ordinal · _SUB + op ordinal in the link's message


def _rows(m: int, rank, t, phase, sub, kind, peer=-1, a=-1, b=-1, c=-1, size=0) -> np.ndarray:
    cols = [rank, t, phase, sub, kind, peer, a, b, c, size]
    return np.column_stack([np.broadcast_to(np.asarray(x, np.int64), (m,)) for x in cols]
                           ).reshape(m, _NF)


def _within(new: np.ndarray) -> np.ndarray:
    """Per item, its index in its group (a group starts where ``new``)."""
    pos = np.arange(new.size)
    return pos - np.maximum.accumulate(np.where(new, pos, 0)) if new.size else pos


def group_index(keys: list) -> np.ndarray:
    """Per item (sorted by ``keys``), its index among the items with equal keys."""
    return _within(_starts(keys))


def _starts(keys: list) -> np.ndarray:
    """Where any of the equally long arrays ``keys`` changes (the first item included)."""
    m = keys[0].size
    new = np.zeros(m, bool)
    if m:
        new[0] = True
        for x in keys:
            new[1:] |= x[1:] != x[:-1]
    return new


def _breaks(codes: list, group: np.ndarray) -> np.ndarray:
    """Run starts: the group changes or a place code neither advances by one piece in one
    buffer nor (both none) stays none."""
    new = _starts([group])
    for x in codes:
        a, b = x[:-1], x[1:]
        new[1:] |= ~np.where((a >= 0) & (b >= 0), b - a == 4, (a < 0) & (b < 0))
    return new


class Lowering:
    """The lowering's state: ``loc`` (N × N·P place code of each piece at each rank, −1 none),
    scratch in use per rank, the recorded row blocks and the ranks with data ops since
    their last nop (``dirty``)."""

    def __init__(self, schedule: StepSchedule, inplace: bool, split_shards: bool, g: int,
                 root: int | None = None):
        self.g, self.root = g, root
        self.n, self.p, self.coll = schedule.topology.n, schedule.shard_chunks, schedule.collective
        self.inplace, self.split = inplace, split_shards
        self.reduce_until = {Collective.ALLGATHER: 0,
                             Collective.REDUCE_SCATTER: schedule.num_steps,
                             Collective.ALLREDUCE: schedule.reduce_steps}[self.coll]
        self.loc = np.full((self.n, self.n * self.p), -1, np.int64)
        self.scratch = np.zeros(self.n, np.int64)
        self.blocks: list[np.ndarray] = []
        self.dirty = np.zeros(self.n, bool)
        self.put_src: list[np.ndarray] = []      # (rank, code, t) of every piece a put reads
        self.writes: list[np.ndarray] = []       # (rank, code, t) of every piece ops write locally

    def final(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Code of where rank w's result piece x ends (NCCL's buffers; in place one buffer)."""
        if self.root is not None:                    # broadcast: the root's shard, P chunks
            return 4 * (x - self.root * self.p) + 1
        if self.coll == Collective.REDUCE_SCATTER:
            return 4 * x if self.inplace else 4 * (x - w * self.p) + 1
        if self.coll == Collective.ALLREDUCE and self.inplace:
            return 4 * x
        return 4 * x + 1

    def memory(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Whether link u→w joins ranks of one server (a memory channel)."""
        return (u // self.g == w // self.g) if self.g > 1 else np.zeros(np.shape(u), bool)

    def alloc(self, ranks: np.ndarray) -> np.ndarray:
        """Fresh scratch, one piece per item, consecutive per rank in item order."""
        o = np.argsort(ranks, kind="stable")
        r = ranks[o]
        off = np.empty(ranks.size, np.int64)
        off[o] = self.scratch[r] + group_index([r])
        self.scratch += np.bincount(ranks, minlength=self.n)
        return 4 * off + 2


def lower(schedule: StepSchedule, inplace: bool = False, split_shards: bool = False,
          gpus_per_node: int = 1, root: int | None = None) -> dict:
    """Rows of every rank's program (module doc), sorted by (rank, t, phase, sub, order), and
    the scratch pieces each rank uses. ``split_shards``: no run crosses a shard boundary
    (instances j > 0 place shard v's pieces apart). ``gpus_per_node`` G: links between ranks
r // G alike are memory channels, whose puts do not signal: each run is its own ``put``
(kind mput), then a nop and a ``signal``. ``root``: a broadcast (an allgather schedule of
the root's shard only, :mod:`.plan_broadcast`): the root starts with its P chunks, every
rank's buffers hold P chunks. Raises ScheduleError on a schedule that
    does not perform its collective (validate it first)."""
    st = Lowering(schedule, inplace, split_shards, gpus_per_node, root)
    n, p = st.n, st.p
    s = schedule.sends
    s = s[np.argsort(s[:, 0], kind="stable")]
    links = np.unique(s[:, 4] * n + s[:, 5]) if s.shape[0] else np.zeros(0, np.int64)
    _start(st, links // n, links % n)
    if root is not None:
        c = np.arange(p)
        st.loc[root, root * p + c] = 4 * c + (1 if inplace else 0)
    elif st.coll == Collective.ALLGATHER:
        u = np.arange(n)
        own = u[:, None] * p + np.arange(p)[None, :]
        st.loc[u[:, None], own] = 4 * own + 1 if inplace else 4 * np.arange(p)[None, :]
    else:
        st.loc[:] = 4 * np.arange(n * p)[None, :]
        mine = s[(s[:, 0] <= st.reduce_until) & (s[:, 1] == s[:, 5])]
        st.remaining = np.zeros((n, n * p), np.int64)
        rep = mine[:, 3] - mine[:, 2]
        x = np.repeat(mine[:, 1] * p + mine[:, 2] - np.cumsum(rep) + rep, rep) + \
            np.arange(int(rep.sum()))
        np.add.at(st.remaining, (np.repeat(mine[:, 5], rep), x), 1)
        st.arrived = np.zeros((n, n * p), np.int64)
    steps, first = np.unique(s[:, 0], return_index=True) if s.shape[0] else ([], [])
    bounds = list(first) + [s.shape[0]]
    finished = st.reduce_until == 0
    if not finished and not len(steps):
        _finish_reduce(st, 0)
        finished = True
    for j, t in enumerate(list(steps)):
        t = int(t)
        if not finished and t > st.reduce_until:
            _finish_reduce(st, st.reduce_until)
            finished = True
        _step(st, s[bounds[j]:bounds[j + 1]], t, t <= st.reduce_until)
    if not finished:
        _finish_reduce(st, st.reduce_until)
    rows = np.concatenate(st.blocks + [np.zeros((0, _NF), np.int64)])
    _check_sources(st)
    rows = rows[np.lexsort((np.arange(rows.shape[0]),) + tuple(rows[:, i] for i in (3, 2, 1, 0)))]
    return {"rows": rows, "scratch": st.scratch.copy(), "links": links}


def _start(st: Lowering, lu: np.ndarray, lw: np.ndarray) -> None:
    """Step 0: the handshake (signal every in-link, wait every out-link, nop) and, allgather
    out of place, the copy of the input into the output shard."""
    mem = st.memory(lu, lw).astype(np.int64)
    o = np.lexsort((lu, mem, lw))
    w, u, m = lw[o], lu[o], mem[o]
    st.blocks.append(_rows(w.size, w, 0, 0, m * _SUB + group_index([w, m]) // PER_OP,
                           SIGNAL, u))
    o = np.lexsort((lw, mem, lu))
    w, u, m = lw[o], lu[o], mem[o]
    st.blocks.append(_rows(u.size, u, 0, 1, m * _SUB + group_index([u, m]) // PER_OP,
                           WAIT, w))
    senders = np.unique(lu)
    st.blocks.append(_rows(senders.size, senders, 0, 2, 0, NOP))
    if st.root is not None and not st.inplace:
        r = np.array([st.root])
        st.blocks.append(_rows(1, r, 0, 3, 0, COPY, a=0, c=1, size=st.p))
        st.writes.append(np.column_stack([r, 1 + 0 * r, 0 * r]))
    elif st.coll == Collective.ALLGATHER and not st.inplace:
        r = np.arange(st.n)
        st.blocks.append(_rows(st.n, r, 0, 3, 0, COPY, a=0, c=4 * r * st.p + 1, size=st.p))
        st.writes.append(np.column_stack([r, 4 * r * st.p + 1, 0 * r]))


def _step(st: Lowering, rows: np.ndarray, t: int, reducing: bool) -> None:
    """Step t's sends (per link, runs of pieces contiguous at both ends), waits and, reducing,
    reductions (module doc)."""
    n, p = st.n, st.p
    rep = rows[:, 3] - rows[:, 2]
    x = np.repeat(rows[:, 1] * p + rows[:, 2] - np.cumsum(rep) + rep, rep) + \
        np.arange(int(rep.sum()))
    u, w = np.repeat(rows[:, 4], rep), np.repeat(rows[:, 5], rep)
    src = st.loc[u, x]
    if (src < 0).any():
        i = int(np.argmax(src < 0))
        raise ScheduleError(f"step {t}: node {int(u[i])} sends piece {int(x[i])} it does not "
                            "hold; validate the schedule first")
    if reducing:                 # a partial given up by an earlier row is not held twice
        mark = -2 - np.arange(u.size)
        st.loc[u, x] = mark
        if (st.loc[u, x] != mark).any():
            raise ScheduleError(f"step {t}: a node sends one partial twice")
        st.loc[u, x] = -1
    o = np.lexsort((src, w, u))
    u, w, x, src = u[o], w[o], x[o], src[o]
    io = (src & 3) != 2                          # scratch places are written before they are read
    st.put_src.append(np.column_stack([u[io], src[io], np.full(int(io.sum()), t)]))
    if reducing:
        dst = st.alloc(w)
    else:
        key = w * (n * p) + x
        ko = np.argsort(key, kind="stable")
        again = np.zeros(key.size, bool)
        again[ko[1:]] = key[ko[1:]] == key[ko[:-1]]
        dup = again | (st.loc[w, x] >= 0)
        dst = st.final(w, x)
        if dup.any():
            dst[dup] = st.alloc(w[dup])
        st.loc[w[~dup], x[~dup]] = dst[~dup]
    link = u * n + w
    group = link * (n + 1) + (x // p if st.split else 0)
    head = _breaks([src, dst], group)
    hs = np.flatnonzero(head)
    ln = np.diff(np.r_[hs, u.size])
    _sends(st, t, u[hs], w[hs], src[hs], dst[hs], ln)
    _waits(st, t, link[_starts([link])])
    if reducing:
        _reduce(st, t, u, w, x, dst)


def _sends(st: Lowering, t: int, u, w, src, dst, ln) -> None:
    """Sender ops of step t from its runs (ordered by link): on a port channel up to 8 runs
    per ``put`` (entry i on thread i), on a memory channel one run per ``put`` (a copy by all
    threads); then a nop and the send point, whose rows name the out-links with a message
    (the writer signals them from threadblocks of their own)."""
    lead = _starts([u * st.n + w])
    r = _within(lead)
    mem = st.memory(u, w)
    sub = w * _SUB + np.where(mem, r, r // PER_OP)
    dirty = u[_starts([u]) & st.dirty[u]]
    st.blocks.append(_rows(dirty.size, dirty, t, 0, 0, NOP))
    st.dirty[dirty] = False
    st.blocks.append(_rows(u.size, u, t, 1, sub, np.where(mem, MPUT, PUT), w, a=src, c=dst,
                           size=ln))
    ru = u[_starts([u])]
    st.blocks.append(_rows(ru.size, ru, t, 1, st.n * _SUB, NOP))
    st.blocks.append(_rows(int(lead.sum()), u[lead], t, 1, st.n * _SUB + 1, SIGNAL, w[lead]))


def _waits(st: Lowering, t: int, links: np.ndarray) -> None:
    """The receive point of step t at each receiver: one op whose rows name the in-links
    with a message (the writer waits for them on threadblocks of their own), then a nop."""
    n = st.n
    w, u = links % n, links // n
    o = np.lexsort((u, w))
    w, u = w[o], u[o]
    st.blocks.append(_rows(w.size, w, t, 2, 0, WAIT, u))
    rw = np.unique(w)
    st.blocks.append(_rows(rw.size, rw, t, 3, 0, NOP))


def _reduce(st: Lowering, t: int, u, w, x, got) -> None:
    """Reduce-phase receives of step t: piece by piece in arrival order (by link), the
    partial held is added into the received scratch in place, or, the last partial of the
    receiver's own piece, into its final place; rounds of a piece received twice are
    separated by nops."""
    n, p = st.n, st.p
    key = w * (n * p) + x
    go = np.argsort(key, kind="stable")
    kg = key[go]
    first = _starts([kg])
    rnd = _within(first)
    wg, xg, gg = w[go], x[go], got[go]
    own = xg // p == wg
    count = st.arrived[wg, xg] + rnd + 1
    final = own & (count == st.remaining[wg, xg])
    dst = np.where(final, st.final(wg, xg), gg)
    prev = np.r_[-1, dst[:-1]] if dst.size else dst
    cur = np.where(first, st.loc[wg, xg], prev)
    np.add.at(st.arrived, (wg[own], xg[own]), 1)
    last = np.r_[first[1:], True] if first.size else first
    st.loc[wg[last], xg[last]] = dst[last]
    kind = np.where(cur >= 0, REDUCE, np.where(final, COPY, -1))
    keep = kind >= 0
    wg, rg, kind, gg, cur, dst, xg = (v[keep] for v in (wg, rnd, kind, gg, cur, dst, xg))
    o = np.lexsort((gg, rg, wg))
    wg, rg, kind, gg, cur, dst, xg = (v[o] for v in (wg, rg, kind, gg, cur, dst, xg))
    group = (wg * 64 + rg) * 2 + (kind == REDUCE)
    if st.split:
        group = group * (n + 1) + xg // p
    head = _breaks([gg, cur, dst], group)
    hs = np.flatnonzero(head)
    ln = np.diff(np.r_[hs, wg.size])
    if (rg >= 32).any():
        raise ScheduleError(f"step {t}: a piece reaches one node more than 32 times")
    st.blocks.append(_rows(hs.size, wg[hs], t, 4 + 2 * rg[hs], _within(_starts([wg[hs]])),
                           kind[hs], a=gg[hs], b=np.where(kind[hs] == REDUCE, cur[hs], -1),
                           c=dst[hs], size=ln))
    rounds = np.zeros(n, np.int64)
    np.maximum.at(rounds, wg, rg)
    rw = np.flatnonzero(rounds)
    reps = rounds[rw]
    nop_rank = np.repeat(rw, reps)
    nop_round = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    st.blocks.append(_rows(nop_rank.size, nop_rank, t, 5 + 2 * nop_round, 0, NOP))
    st.dirty[wg] = True
    io = (dst & 3) != 2
    st.writes.append(np.column_stack([wg[io], dst[io], np.full(int(io.sum()), t)]))


def _finish_reduce(st: Lowering, t: int) -> None:
    """End of the reduce phase: own pieces not yet in their final place are copied there
    (contiguous runs in one copy); allreduce then starts its allgather from those places."""
    n, p = st.n, st.p
    u = np.repeat(np.arange(n), p)
    x = u * p + np.tile(np.arange(p), n)
    cur, want = st.loc[u, x], st.final(u, x)
    if (cur < 0).any():
        i = int(np.argmax(cur < 0))
        raise ScheduleError(f"reduce-scatter: node {int(u[i])} ends without its piece "
                            f"{int(x[i])}")
    move = cur != want
    u, cur, want = u[move], cur[move], want[move]
    head = _breaks([cur, want], u)
    hs = np.flatnonzero(head)
    ln = np.diff(np.r_[hs, u.size])
    st.blocks.append(_rows(hs.size, u[hs], t, 1000, _within(_starts([u[hs]])), COPY,
                           a=cur[hs], c=want[hs], size=ln))
    st.dirty[u] = True
    st.writes.append(np.column_stack([u, want, np.full(u.size, t)]))
    if st.coll == Collective.ALLREDUCE:
        st.loc[:] = -1
        r = np.arange(n)[:, None]
        own = r * p + np.arange(p)[None, :]
        st.loc[r, own] = st.final(r, own)


def _check_sources(st: Lowering) -> None:
    """Refuse a program whose local op writes a place a put read at the same or an earlier
    step (the proxy may not have read it yet): never the case for places written once."""
    if not st.put_src or not st.writes:
        return
    reads = np.concatenate(st.put_src)
    writes = np.concatenate(st.writes)
    big = 4 * (max(st.n * st.p, int(st.scratch.max(initial=0))) + 1)
    rk, wk = reads[:, 0] * big + reads[:, 1], writes[:, 0] * big + writes[:, 1]
    o = np.lexsort((reads[:, 2], rk))
    rk, rt = rk[o], reads[o, 2]
    head = np.r_[True, rk[1:] != rk[:-1]]
    keys, first = rk[head], rt[head]                       # each place's first read step
    at = np.minimum(np.searchsorted(keys, wk), max(keys.size - 1, 0))
    bad = (keys.size > 0) & (keys[at] == wk) & (writes[:, 2] >= first[at])
    if bad.any():
        i = int(np.argmax(bad))
        r, code = divmod(int(wk[i]), big)
        raise ScheduleError(f"node {r} overwrites {BUFS[code & 3]}[{code >> 2}] at step "
                            f"{int(writes[i, 2])} after a put read it: not expressible "
                            "without a flush")
