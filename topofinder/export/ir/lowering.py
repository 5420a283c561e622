"""The lowering: a step schedule to every rank's program of the rank-program IR (paper 001
§7, paper 002 §6.1), built once for any runtime (:mod:`topofinder.export.ir.program`).

The compilers of both papers lower a mathematical schedule to per-GPU *threadblocks*, each an
ordered list of send / receive / reduce / copy ops. :func:`lower` does this for a
:class:`~topofinder.model.schedule.StepSchedule` as named passes, each a function: layout
(:func:`~topofinder.export.ir.bounds.layout_for`, module :mod:`topofinder.export.ir.layout`,
and :func:`_step_messages` ordering a step's pieces by where they sit), threadblock
placement (:func:`place_threadblocks`), receive places (:func:`_receive_places`),
consolidation (:func:`_consolidate_sends`, :func:`_emit_receives`) and staging
(:func:`_stage_parts`). These record each rank's ops once, on threadblock selectors;
:func:`~topofinder.export.ir.deps.resolve` then places them on threadblocks for a lane plan
and computes their dependencies, so a schedule that needs lanes is lowered once and resolved
twice (one lane, then laned).

- Pieces. With P chunks per shard and K instances every shard is cut into K·P pieces;
  instance j runs the whole schedule on its own pieces. allgather and reduce-scatter keep
  shard v's pieces at [v·K·P, (v+1)·K·P) as NCCL requires (piece j·P + c = chunk c of
  instance j); allreduce, whose element order is free, stores instance j's pieces of all
  shards together (j·N·P + base(v) + c·stride(v)), in the candidate order whose op bound is
  least (:func:`~topofinder.export.ir.layout.allreduce_layouts`), so pieces sent together in
  either phase are mostly one op.
- Threadblocks: per instance, one threadblock per out-neighbour that only sends, one per
  in-neighbour that only receives, and one local threadblock for copies. Every op is in
  schedule-step order. This layout cannot deadlock at any connection buffer size: by
  induction on the step t, a step-t send reads only data received at steps < t (or the
  input), and the receiving threadblock of its connection does nothing but receive from it,
  in the same order; receives never wait for sends of later steps. (A threadblock that both
  receives from x and sends to w deadlocks in a ring of such threadblocks as soon as one
  step's message exceeds the buffer, so only the receive is fused with the reduction,
  ``recv_reduce``.)
- Consolidation: the pieces a step sends on a link are ordered by where they sit and every
  contiguous range becomes one op (``cnt`` > 1, at most ``max_cnt``); received data lands in
  a fresh contiguous scratch range (reduce-scatter partials) or at its final place. With
  ``stage``, allgather-phase messages made of several ranges are staged through scratch as
  paper 001 §7 describes: a local threadblock of the step packs them with copies into one
  range that is sent once, the receiver takes it into scratch in one step and the same kind
  of threadblock unpacks it (forwards read the scratch copy, so they wait for no copy).
- Buffers: allgather receives into the output at the final place (a piece received twice goes
  to scratch); reduce-scatter and the reduce phase of allreduce keep partial sums in scratch —
  never in the input, which out-of-place runs must not write — and the last receive of a
  rank's own piece reduces straight into the output. In place the input aliases the output
  as NCCL defines it; every write after a read of the same piece on another threadblock
  carries a dependency.
- Cost: the passes take a whole schedule step at a time as arrays of place codes
  (4·offset + buffer code; ``loc``: where each rank holds each piece), never a piece at a
  time in Python.
"""

from __future__ import annotations

import numpy as np

from topofinder.export.ir.arrays import in_runs, stable_order, within
from topofinder.export.ir.bounds import layout_for, reduce_until
from topofinder.export.ir.layout import PieceLayout, root_layout
from topofinder.export.ir.program import FIELDS, KIND_CODE, RankProgram
from topofinder.model.collectives import Collective
from topofinder.model.schedule import ScheduleError, StepSchedule


def peers(schedule: StepSchedule):
    """Per rank, the ranks it sends to and the ranks it receives from (ascending), from the
    schedule's send rows: (out_peers, in_peers)."""
    s = schedule.sends
    n = schedule.topology.n
    pairs = np.unique(s[:, 4] * n + s[:, 5]) if s.shape[0] else np.zeros(0, np.int64)
    out_peers, in_peers = [[] for _ in range(n)], [[] for _ in range(n)]
    for key in pairs.tolist():
        u, w = divmod(key, n)
        out_peers[u].append(w)
        in_peers[w].append(u)
    return out_peers, in_peers

class _Lowering:
    """The state the lowering passes share, as arrays of place codes (4·offset + buffer code:
    i 0, o 1, s 2; −1: none): every rank's program (:class:`RankProgram`), where each rank holds
    each piece v·P + c now (``loc``, N × N·P), how many reduce-phase sends of a rank's own
    chunk are still to arrive (``remaining``, N × P), each rank's scratch pieces in use
    (``scratch``) and instructions recorded (``count``, and ``blocks`` of (ranks, fields) in
    record order per rank)."""

    def __init__(self, schedule: StepSchedule, k: int, inplace: bool, max_cnt: int, stage,
                 layout: PieceLayout | None = None, root: int | None = None):
        self.n, self.p, self.coll = schedule.topology.n, schedule.shard_chunks, schedule.collective
        self.max_cnt, self.stage, self.root = max_cnt, stage, root
        if root is not None:
            layout = root_layout(self.n, self.p)
        self.table = (layout or layout_for(schedule, k, stage)).table()
        self.progs = place_threadblocks(schedule, inplace, k,
                                        None if root is None else Collective.BROADCAST)
        self.reduce_until = reduce_until(schedule)
        self.loc = np.full((self.n, self.n * self.p), -1, np.int64)
        self.remaining = np.zeros((self.n, self.p), np.int64)
        self.scratch = np.zeros(self.n, np.int64)
        self.count = np.zeros(self.n, np.int64)
        self.blocks = []

    def own_out(self, w, c):
        """The code of where rank w's own reduced chunk c ends: its output."""
        return 4 * (c if self.coll == Collective.REDUCE_SCATTER else self.table[w, c]) + 1

    def alloc(self, ranks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Fresh contiguous scratch for items taken in order (``ranks`` grouped): the first
        offset of each."""
        ex = np.cumsum(sizes) - sizes
        new = np.r_[True, ranks[1:] != ranks[:-1]][:ranks.size]
        off = self.scratch[ranks] + ex - np.maximum.accumulate(np.where(new, ex, 0))
        self.scratch += np.bincount(ranks, weights=sizes, minlength=self.n).astype(np.int64)
        return off

    def record(self, ranks: np.ndarray, keys: list, rows: np.ndarray) -> None:
        """Record instructions (``rows`` of :func:`_fields`) on ``ranks``, ordered by ``keys``
        (most significant first; each rank's instructions in that order)."""
        o = np.lexsort(keys[::-1]) if len(keys) > 1 else np.argsort(keys[0])
        self.blocks.append((ranks[o], rows[o]))
        self.count += np.bincount(ranks, minlength=self.n)

    def programs(self) -> list:
        """The programs, each loaded with its recorded instructions in order."""
        ranks = np.concatenate([r for r, _ in self.blocks] + [np.zeros(0, np.int64)])
        rows = np.concatenate([x for _, x in self.blocks] + [np.zeros((0, len(FIELDS)), np.int32)])
        rows = rows[stable_order(ranks)]
        ends = np.cumsum(np.bincount(ranks, minlength=self.n)).tolist()
        for prog, a, b in zip(self.progs, [0] + ends, ends):
            prog.load(rows[a:b], int(self.scratch[prog.u]))
        return self.progs


def _split(code):
    """Place codes as (buffer code, offset) columns; a code < 0 is no place (−1, 0)."""
    code = np.asarray(code, np.int64)
    has = code >= 0
    return np.where(has, code & 3, -1), np.where(has, code >> 2, 0)


def _fields(m: int, tb, kind, src, dst, cnt, t, r, read, write) -> np.ndarray:
    """The recorded fields (:meth:`RankProgram.load`) of m instructions, places as codes;
    scalars broadcast."""
    cols = [tb, kind, *_split(src), *_split(dst), cnt, t, r, *_split(read), *_split(write)]
    return np.column_stack([np.broadcast_to(np.asarray(x, np.int64), (m,)) for x in cols]
                           ).astype(np.int32).reshape(m, len(FIELDS))


def _breaks(codes: list, group: np.ndarray) -> np.ndarray:
    """Per item: whether it starts a new segment, i.e. it is the first, its ``group``
    differs from the item before, or some array of ``codes`` neither has places (≥ 0) that
    advance by one piece in one buffer nor agrees with the item before."""
    ok = group[1:] == group[:-1]
    for x in codes:
        a, b = x[:-1], x[1:]
        ok &= np.where((a >= 0) & (b >= 0), b - a == 4, b == a)
    return np.r_[True, ~ok][:group.size]


def _run_starts(brk: np.ndarray, max_cnt: int) -> np.ndarray:
    """Where runs start: maximal segments (a new one where ``brk``) cut every ``max_cnt``
    items."""
    return brk | (within(brk) % max_cnt == 0)


def place_threadblocks(schedule: StepSchedule, inplace: bool, k: int,
                       coll: str | None = None) -> list:
    """Threadblock placement pass: per rank, one send threadblock per out-neighbour, one
    receive threadblock per in-neighbour and a local one (instance 0; instance j repeats them
    on its own pieces when a runtime's program is written). Lanes
    (:func:`~topofinder.export.ir.deps.resolve` with
    :func:`~topofinder.export.ir.lanes.assign_lanes`) move a link's later steps to further
    threadblocks on further channels, so no threadblock holds more than the runtime's limit.
    ``coll``: the programs' collective when it is not the schedule's (a broadcast)."""
    out_peers, in_peers = peers(schedule)
    return [RankProgram(u, out_peers[u], in_peers[u], inplace, coll or schedule.collective,
                        k * schedule.shard_chunks) for u in range(schedule.topology.n)]


class ProgramTooLarge(Exception):
    """The lowering stopped early (:func:`lower`'s ``max_ops``): rank ``rank`` already holds
    more than ``limit`` ops after schedule step ``step`` of ``num_steps``."""

    def __init__(self, rank: int, limit: int, step: int, num_steps: int):
        super().__init__(rank, limit, step, num_steps)
        self.rank, self.limit, self.step, self.num_steps = rank, limit, step, num_steps


def lower(schedule: StepSchedule, channels: int, inplace: bool, max_cnt: int,
          stage: bool = False, max_ops: int | None = None,
          layout: PieceLayout | None = None, root: int | None = None) -> list[RankProgram]:
    """Instance-0 programs of every rank (module doc), recorded for
    :func:`~topofinder.export.ir.deps.resolve`, pass by pass: layout and threadblock
    placement (:class:`_Lowering`), the initial data, then per schedule step the messages in
    layout order, their receive places, consolidation into instructions (staged through
    scratch with ``stage``: allgather-phase messages that are not one contiguous range on both
    ends are packed by copies before the send and unpacked after the receive, in a local
    threadblock per step), with the reduce phase's results moved to the output between the
    phases. ``channels``: K, the instances the layout leaves room for (pieces are 1/(K·P) of
    a shard); ``max_cnt``: most pieces per op (a runtime's limit); ``max_ops``: stop
    (:class:`ProgramTooLarge`) once one rank's instance-0 program holds more ops, checked
    after every schedule step (a runtime's per-rank limit). ``layout``:
    where pieces sit (default :func:`layout_for`). ``root``: ``schedule`` is a broadcast
    from ``root``, the allgather of its shard only (every rank's buffers hold that shard's
    P chunks, :func:`~topofinder.export.ir.layout.root_layout`; the programs' collective is
    broadcast). Each pass works on the whole step's pieces as arrays."""
    st = _Lowering(schedule, channels, inplace, max_cnt, stage, layout, root)
    s = schedule.sends
    s = s[np.argsort(s[:, 0], kind="stable")]
    _initial_data(st, s, inplace)
    started_ag = st.coll == Collective.ALLGATHER
    steps, first = np.unique(s[:, 0], return_index=True) if s.shape[0] else ([], [])
    bounds = list(first) + [s.shape[0]]
    for j, t in enumerate(list(steps)):
        t = int(t)
        reducing = t <= st.reduce_until
        if not reducing and not started_ag:
            _finish_reduce(st)
            started_ag = True
        msg = _step_messages(st, s[bounds[j]:bounds[j + 1]], t, reducing)
        _receive_places(st, msg, reducing)
        _consolidate_sends(st, msg, t, reducing)
        _emit_receives(st, msg, t)
        if max_ops is not None and st.count.max() > max_ops:
            raise ProgramTooLarge(int(st.count.argmax()), max_ops, t, schedule.num_steps)
    if not started_ag:
        _finish_reduce(st)
    return st.programs()


def _initial_data(st: _Lowering, s: np.ndarray, inplace: bool) -> None:
    """Where every rank's input sits before step 1 (allgather: its shard, copied to the output
    unless in place; a broadcast: the root's); for reduce phases, the count of sends of each
    rank's own chunks."""
    n, p = st.n, st.p
    if st.root is not None:
        c = np.arange(p)
        st.loc[st.root, st.root * p + c] = 4 * c + (1 if inplace else 0)
        if not inplace:
            r = np.array([st.root])
            st.record(r, [r], _fields(1, -1, KIND_CODE["copy"], 0, 1, p, 0, 0, 0, 1))
        return
    if st.coll == Collective.ALLGATHER:
        u = np.arange(n)
        own = u[:, None] * p + np.arange(p)[None, :]
        if inplace:
            st.loc[u[:, None], own] = 4 * st.table + 1
            return
        st.loc[u[:, None], own] = 4 * np.arange(p)[None, :]
        out = 4 * st.table[:, 0] + 1
        st.record(u, [u], _fields(n, -1, KIND_CODE["copy"], 0, out, p, 0, 0, 0, out))
        return
    st.loc[:] = 4 * st.table.ravel()[None, :]
    mine = s[(s[:, 0] <= st.reduce_until) & (s[:, 1] == s[:, 5])]
    rep = mine[:, 3] - mine[:, 2]
    c = np.repeat(mine[:, 2] - np.cumsum(rep) + rep, rep) + np.arange(int(rep.sum()))
    np.add.at(st.remaining, (np.repeat(mine[:, 5], rep), c), 1)


def _finish_reduce(st: _Lowering) -> None:
    """End of the reduce phase: every rank copies its reduced chunks that are not yet in
    place to its output (consecutive ones in one copy)."""
    n, p = st.n, st.p
    u, c = np.arange(n)[:, None], np.arange(p)[None, :]
    cur, want = st.loc[u, u * p + c], st.own_out(u, c) + 0 * u
    if (cur < 0).any():
        x, y = divmod(int(np.argmax((cur < 0).ravel())), p)
        raise ScheduleError(f"reduce-scatter: node {x} ends without its chunk {y}")
    uu, cc = np.nonzero(cur != want)
    a, b = cur[uu, cc], want[uu, cc]
    head = np.flatnonzero(_run_starts(_breaks([a, b], uu), st.max_cnt))
    cnt = np.diff(np.r_[head, uu.size])
    st.record(uu[head], [head], _fields(head.size, -1, KIND_CODE["copy"], a[head], b[head], cnt,
                                        st.reduce_until, 0, a[head], b[head]))
    st.loc[:] = -1
    st.loc[u, u * p + c] = want


def _step_messages(st: _Lowering, rows: np.ndarray, t: int, reducing: bool) -> dict:
    """Layout pass of one step: the pieces it sends as arrays (``u``, ``w``, piece ``pc`` =
    v·P + c, its place code ``src`` at u), by link (u, w) and within a link in buffer order;
    a reduce-phase sender gives its partials up."""
    n, p = st.n, st.p
    rep = rows[:, 3] - rows[:, 2]
    pc = np.repeat(rows[:, 1] * p + rows[:, 2] - np.cumsum(rep) + rep, rep) + \
        np.arange(int(rep.sum()))
    u, w = np.repeat(rows[:, 4], rep), np.repeat(rows[:, 5], rep)
    src = st.loc[u, pc]
    o = np.argsort(((u * n + w) << 42) | np.where(src >= 0, ((src & 3) << 40) | (src >> 2), 0))
    u, w, pc, src = u[o], w[o], pc[o], src[o]           # (ties: the same piece, same link)
    bad = src < 0
    if reducing:                    # a partial given up by an earlier message is not held
        st.loc[u, pc] = np.arange(u.size)
        if (st.loc[u, pc] != np.arange(u.size)).any():
            key = u * (n * p) + pc
            by = np.argsort(key, kind="stable")
            bad[by[1:]] |= key[by[1:]] == key[by[:-1]]
    if bad.any():
        raise ScheduleError(f"step {t}: node {int(u[np.argmax(bad)])} sends a chunk it does "
                            "not hold; validate the schedule first")
    if reducing:
        st.loc[u, pc] = -1
    return {"u": u, "w": w, "pc": pc, "src": src}


def _receive_places(st: _Lowering, msg: dict, reducing: bool) -> None:
    """Where each received piece lands, receiver by receiver (links by (w, u)): sets ``msg``'s
    ``kind`` (r or rrc), ``cur`` (the place it reduces with, −1: none) and ``dst``, and
    ``rpos`` (each piece's position in receiver order). Reduce phase: fresh scratch, or the
    output for the last partial of the receiver's own chunk; allgather phase: the final
    place (scratch for a duplicate)."""
    n, p = st.n, st.p
    ro = stable_order(msg["w"] * n + msg["u"])
    w, pc = msg["w"][ro], msg["pc"][ro]
    go = stable_order(w * (n * p) + pc)                       # by (receiver, piece)
    key = (w * (n * p) + pc)[go]
    first = np.r_[True, key[1:] != key[:-1]][:key.size]
    wg, pg = w[go], pc[go]
    held = st.loc[wg, pg]
    if reducing:
        own = pg // p == wg
        final = own & (st.remaining[wg, pg % p] == within(first) + 1)
        st.remaining -= np.bincount(wg[own] * p + pg[own] % p,
                                    minlength=n * p).reshape(n, p)
        land = st.own_out(wg, pg % p)
    else:
        final = first & (held < 0)
        land = 4 * st.table.ravel()[pg] + 1
    at = np.empty(key.size, np.int64)
    at[go] = np.arange(key.size)                               # receiver order → group order
    fresh = ~final[at]
    dst = np.empty(key.size, np.int64)
    dst[fresh] = 4 * st.alloc(w[fresh], np.ones(int(fresh.sum()), np.int64)) + 2
    dst[~fresh] = land[at[~fresh]]
    dg = dst[go]
    cur = np.where(first, held, np.r_[-1, dg[:-1]][:key.size]) if reducing else \
        np.full(key.size, -1, np.int64)
    sel = np.r_[first[1:], True][:key.size] if reducing else final   # held after the step
    st.loc[wg[sel], pg[sel]] = dg[sel]
    back = ro[go]
    for name, col in (("kind", np.where(cur >= 0, KIND_CODE["recv_reduce"], KIND_CODE["recv"])),
                      ("cur", cur), ("dst", dg)):
        msg[name] = np.empty(key.size, np.int64)
        msg[name][back] = col
    msg["rpos"] = np.empty(key.size, np.int64)
    msg["rpos"][ro] = np.arange(key.size)


def _consolidate_sends(st: _Lowering, msg: dict, t: int, reducing: bool) -> None:
    """Consolidation pass of step t: per link, runs of pieces contiguous on both ends (and,
    reducing, alike in kind and partial) become one send instruction each; staged, a
    message of several runs goes in blocks of ``max_cnt``, those of several source ranges
    packed into scratch (:func:`_stage_parts`). Sets ``msg``'s ``head`` (where each run or
    block starts), ``r`` (its index in the link's message) and ``staged`` (per piece: its
    link is cut in blocks, else each run is contiguous on both ends)."""
    link = msg["u"] * st.n + msg["w"]
    m = link.size
    codes = [msg["src"], msg["dst"]] + ([-1 - msg["kind"], msg["cur"]] if reducing else [])
    lead = np.r_[True, link[1:] != link[:-1]][:m]
    head = _run_starts(_breaks(codes, link), st.max_cnt)
    msg["staged"] = np.zeros(m, bool)
    if st.stage and not reducing:
        lk = np.cumsum(lead) - 1
        msg["staged"] = (np.bincount(lk, weights=head) > 1)[lk]
        head = np.where(msg["staged"], within(lead) % st.max_cnt == 0, head)
    r = np.cumsum(head) - 1
    msg["r"] = r - r[np.maximum.accumulate(np.where(lead, np.arange(m), 0))]
    msg["head"] = head
    hs, ln, blk, q, qb, qat, qln = _stage_parts(st, msg, msg["src"], msg["u"], np.arange(m))
    src = np.where(blk >= 0, 4 * blk + 2, msg["src"][hs])
    one = np.ones(hs.size, np.int64)
    st.record(np.r_[msg["u"][hs], msg["u"][q]],
              [np.r_[hs, hs[qb]], np.r_[one, 0 * q], np.r_[hs, q]],
              np.concatenate([
                  _fields(hs.size, 2 * msg["w"][hs], KIND_CODE["send"], src, src, ln, t,
                          msg["r"][hs], src, -1),
                  _fields(q.size, -2 - t, KIND_CODE["copy"], msg["src"][q],
                          4 * (blk[qb] + qat) + 2, qln, t, 0, msg["src"][q],
                          4 * (blk[qb] + qat) + 2)]))


def _stage_parts(st: _Lowering, msg: dict, code: np.ndarray, ranks: np.ndarray,
                 order: np.ndarray):
    """Staging pass, per run or block of step t's messages (heads ``hs``, lengths ``ln``):
    a staged block whose places ``code`` are several ranges gets a fresh scratch range at
    ``ranks`` (allocated in ``order`` of the heads; ``blk``, −1 for the others), and its
    ranges are copied between it and their places (paper 001 §7) by step t's local
    threadblock: their first pieces ``q``, block (index in ``hs``) ``qb``, offset in it
    ``qat`` and length ``qln``."""
    m, head, staged = code.size, msg["head"], msg["staged"]
    hs = np.flatnonzero(head)
    ln = np.diff(np.r_[hs, m])
    cut = staged & (head | np.r_[True, code[1:] - code[:-1] != 4][:m])
    bid = np.cumsum(head) - 1
    several = (np.bincount(bid[cut], minlength=hs.size) > 1) & staged[hs]
    blk = np.full(hs.size, -1, np.int64)
    mb = np.flatnonzero(several)
    mb = mb[np.argsort(order[hs[mb]], kind="stable")]
    blk[mb] = st.alloc(ranks[hs[mb]], ln[mb])
    q = np.flatnonzero(cut & several[bid])
    qb = bid[q]
    nxt = np.r_[hs[1:], m][qb]
    qln = np.minimum(np.r_[q[1:], m], nxt) - q
    return hs, ln, blk, q, qb, q - hs[qb], qln


def _emit_receives(st: _Lowering, msg: dict, t: int) -> None:
    """The receive instructions of step t, receiver by receiver: each run lands in its
    places (``r``, or ``rrc`` reducing with the partial held), or, a staged block of several
    ranges, in fresh scratch in one receive and is unpacked into its places by step t's
    local threadblock (duplicates stay in scratch; forwards then read the scratch copy, so
    they wait for no copy)."""
    dst, rpos = msg["dst"], msg["rpos"]
    hs, ln, blk, q, qb, qat, qln = _stage_parts(st, msg, dst, msg["w"], rpos)
    rrc = msg["kind"][hs] == KIND_CODE["recv_reduce"]
    land = np.where(blk >= 0, 4 * blk + 2, dst[hs])
    src = np.where(rrc, msg["cur"][hs], land)
    q, qb, qat, qln = (x[(dst[q] & 3) != 2] for x in (q, qb, qat, qln))
    one = np.ones(hs.size, np.int64)
    st.record(np.r_[msg["w"][hs], msg["w"][q]], [np.r_[rpos[hs], rpos[hs[qb]]],
                                                 np.r_[0 * one, np.ones(q.size, np.int64)],
                                                 np.r_[one, rpos[q]]],
              np.concatenate([
                  _fields(hs.size, 2 * msg["u"][hs] + 1, msg["kind"][hs], src, land, ln, t,
                          msg["r"][hs], np.where(rrc, msg["cur"][hs], -1), land),
                  _fields(q.size, -2 - t, KIND_CODE["copy"], 4 * (blk[qb] + qat) + 2, dst[q],
                          qln, t, 0, 4 * (blk[qb] + qat) + 2, dst[q])]))
    at = in_runs(qln)
    moved = np.repeat(q, qln) + at
    st.loc[msg["w"][moved], msg["pc"][moved]] = 4 * (np.repeat(blk[qb] + qat, qln) + at) + 2
