"""MSCCL XML for step schedules (paper 001 §7, paper 002 §6.1): writer, limits and re-import.

The compilers of both papers lower a mathematical schedule to per-GPU *threadblocks*, each an
ordered list of send / receive / reduce / copy instructions, in the XML the MSCCL interpreter
runs. :func:`to_msccl_xml` does this for a :class:`~topofinder.model.schedule.StepSchedule`:

The lowering runs as named passes, each a function: layout (:func:`layout_for`, module
:mod:`topofinder.export.xml_layout`, and :func:`_step_messages` ordering a step's pieces by
where they sit), threadblock/channel
placement (:func:`place_threadblocks`; channels are instances written by :func:`_emit`),
receive places (:func:`_receive_places`), consolidation (:func:`_consolidate_sends`,
:func:`_emit_receives`) and staging (:func:`_stage_pack`, :func:`_stage_unpack`). These record
each rank's instructions once, on threadblock selectors; :meth:`_Prog.resolve` then places
them on threadblocks for a lane plan and computes their dependencies, so a schedule that needs
lanes is lowered once and resolved twice (one lane, then laned).

- Pieces. With P chunks per shard and k channels every shard is cut into k·P pieces; channel j
  runs the whole schedule on its own pieces (MSCCL "instances"). allgather and reduce-scatter
  keep shard v's pieces at [v·k·P, (v+1)·k·P) as NCCL requires (piece j·P + c = chunk c of
  channel j); allreduce, whose element order is free, stores channel j's pieces of all shards
  together (j·N·P + base(v) + c·stride(v)), in the candidate order whose instruction bound is
  least (:func:`~topofinder.export.xml_layout.allreduce_layouts`: on line graphs, classes of
  walks that end alike and start alike, then the chunk), so pieces sent together in either
  phase are mostly one instruction.
- Threadblocks: per channel, one threadblock per out-neighbour that only sends, one per
  in-neighbour that only receives, and one local threadblock for copies. Every instruction is
  in schedule-step order. This layout cannot deadlock at any connection buffer size: by
  induction on the step t, a step-t send reads only data received at steps < t (or the input),
  and the receiving threadblock of its connection does nothing but receive from it, in the same
  order; receives never wait for sends of later steps. (A threadblock that both receives from x
  and sends to w — what ``rcs``/``rrs``/``rrcs`` need — deadlocks in a ring of such
  threadblocks as soon as one step's message exceeds the buffer, so the writer fuses only the
  receive with the reduction, ``rrc``.)
- Lanes: a link whose threadblock would exceed the runtime's steps per threadblock gets
  further threadblocks for the same peer on further channels, each holding a consecutive
  group of the link's (step, message run) slots (:func:`assign_lanes`); instance j, lane i
  runs on channel j·L + i. Each lane is its own connection whose receiving threadblock only
  receives, in step order, so the argument above holds lane by lane.
- Channels: K channels' worth of parallelism is K instances where they fit the runtime;
  where they do not (every instance repeats a rank's threadblocks and steps), one
  *interleaved* instance: each link deals its slots in turn over K lanes (slot i on lane
  i mod K, then each residue cut as above), so consecutive messages of a link run on K
  connections side by side, with the same instructions and the same sends.
- Consolidation: the pieces a step sends on a link are ordered by where they sit and every
  contiguous range becomes one instruction (``cnt`` > 1, at most 71); received data lands in
  a fresh contiguous scratch range (reduce-scatter partials) or at its final place. When that
  does not fit the runtime, allgather-phase messages made of several ranges are staged through
  scratch as paper 001 §7 describes: a local threadblock of the step packs them with ``cpy``
  into one range that is sent once, the receiver takes it into scratch in one step and the same
  kind of threadblock unpacks it (forwards read the scratch copy, so they wait for no copy).
- Buffers: allgather receives into the output at the final place (a piece received twice goes
  to scratch); reduce-scatter and the reduce phase of allreduce keep partial sums in scratch —
  never in the input, which out-of-place runs must not write — and the last receive of a
  rank's own piece reduces straight into the output. In place (``inplace=True``) the input
  aliases the output as NCCL defines it; every write after a read of the same piece on another
  threadblock carries a dependency.
- Dependencies: an instruction waits for the last instruction of another threadblock that
  wrote what it reads (or read/wrote what it writes), unless an earlier dependency already
  implies it (vector clocks, stored only where dependencies join them); MSCCL allows one
  dependency per instruction, so extra ones become ``nop`` steps before it; ``hasdep`` marks
  depended-on instructions. Out of place every write goes to a place nothing touched before,
  so readers are tracked in place only. Candidates are found with arrays
  (:meth:`_Prog._candidates`); the clock rule runs as a loop (:func:`_join_clocks`), or as
  an array rule where no candidate's threadblock waits itself (:func:`_leaf_deps`).
- Cost: the lowering is per message and per instruction (runs are found with numpy); the
  threadblock placement, dependencies, lane cuts and the parser's count and offset ranges
  (:func:`_check_ranges`) are array operations; the XML is written as lines rank by rank from
  arrays, never as an element tree, and not parsed again (``msccl_check`` is the independent
  check, used by the tests).
- Runtime: ``msccl-executor`` (Azure/msccl-executor-nccl) or ``msccl`` (microsoft/msccl) fixes
  the ``coll`` spelling (``reducescatter`` / ``reduce_scatter``), the ``maxBytes`` meaning
  (executor: 0 = unbounded, inclusive; msccl: size < maxBytes) and the default instruction
  limit per threadblock (64 / 256). A schedule that does not fit the runtime's limits is
  refused before anything is written (:func:`check_fits` runs first on the schedule arrays,
  with lower bounds on both phases' instructions (:func:`_reduce_bound`);
  the lowering stops at the first schedule step after which a rank holds more XML steps than
  its parser loads).

Every step carries ``t``, the schedule step (ignored by runtimes), and the algo element the
schedule's topology, P and piece layout, so :func:`parse_msccl_xml` recovers the sends by
executing the program (module :mod:`topofinder.export.msccl_check`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from itertools import chain
from collections import defaultdict
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.msccl_check import (
    INT8_MAX,
    INT16_MAX,
    RUNTIMES,
    execute,
    get_runtime,
    parse,
)
from topofinder.export.xml_layout import (
    PieceLayout,
    allreduce_layouts,
    channel_shift,
    shard_layout,
)
from topofinder.model.schedule import ScheduleError, StepSchedule
from topofinder.model.topology import Topology
from topofinder.model.collectives import Collective

PROTOCOLS = ("Simple", "LL", "LL128")
RUNTIME_NAMES = ("msccl-executor", "msccl")
_MAX_CNT_DEFAULT = 71
_BUF_CODE = {"i": 0, "o": 1, "s": 2, None: -1}
_NO_PLACE = (None, 0)
_KINDS = ("s", "r", "rrc", "cpy")
_KIND_CODE = {kind: i for i, kind in enumerate(_KINDS)}
_BUFS = "ios"
_SLOT = 1 << 20                 # a slot (step t, run r) as the integer t·_SLOT + r
_NF = 13                        # recorded fields per instruction (:meth:`_Prog.add`)


class _Prog:
    """One rank's channel-0 program. The lowering records its instructions in order
    (:meth:`add`), each on a threadblock *selector*: a connection (send to / receive from a
    peer) with the instruction's slot, the local threadblock, or step t's staging one.
    :meth:`resolve` then places them on threadblocks for given lanes and computes their
    dependencies, so one lowering serves the one-lane and the laned programs."""

    def __init__(self, u: int, out_peers, in_peers, inplace: bool, coll: str, piece_count: int):
        self.u = u
        self.out_peers, self.in_peers = list(out_peers), list(in_peers)
        self.local = -1
        self.rec = array("i")               # _NF ints per instruction, see add
        self.scratch = 0
        self.count = 0                      # instructions recorded (nops not included)
        self.inplace, self.coll, self.kp = inplace, coll, piece_count

    def new_scratch(self, count: int = 1):
        """The first of ``count`` fresh contiguous scratch pieces."""
        self.scratch += count
        return ("s", self.scratch - count)

    def conn_tb(self, kind: str, peer: int, slot: tuple) -> int:
        """The selector of connection ``kind`` (send to / recv from ``peer``); the slot the
        instruction records picks its lane (:meth:`resolve`)."""
        return 2 * peer + (kind == "recv")

    def stage_tb(self, t: int) -> int:
        """The selector of the local threadblock that packs and unpacks step t's staged
        messages."""
        return -2 - t

    def add(self, tb, kind, src, dst, cnt, t, reads, writes, slot=None):
        """Record an instruction on selector ``tb``; ``reads``/``writes``: (buf, off) of its
        first piece (at most one place each); ``slot``: (step, run of the step's message)."""
        if len(reads) > 1 or len(writes) > 1:
            raise TopofinderError("MSCCL lowering: internal error, an instruction with more "
                                  "than one read or write place")
        read, write = reads[0] if reads else _NO_PLACE, writes[0] if writes else _NO_PLACE
        self.rec.extend((tb, _KIND_CODE[kind], _BUF_CODE[src[0]], src[1], _BUF_CODE[dst[0]],
                         dst[1], cnt, t, slot[1] if slot else 0, _BUF_CODE[read[0]], read[1],
                         _BUF_CODE[write[0]], write[1]))
        self.count += 1

    def add_runs(self, tb, kinds, srcs, dsts, cnts, t, reads, writes):
        """:meth:`add` for the runs of one message on selector ``tb``, run r in slot (t, r):
        per run its type, source, destination, count, read place and written place (None:
        none)."""
        kc, bc = _KIND_CODE, _BUF_CODE
        self.rec.extend(chain.from_iterable(
            (tb, kc[kind], bc[src[0]], src[1], bc[dst[0]], dst[1], cnt, t, r,
             bc[read[0]], read[1], bc[write[0]], write[1])
            for r, (kind, src, dst, cnt, read, write) in enumerate(zip(
                kinds, srcs, dsts, cnts, [x or _NO_PLACE for x in reads],
                [x or _NO_PLACE for x in writes]))))
        self.count += len(cnts)

    def _cells(self, buf: np.ndarray, off: np.ndarray) -> np.ndarray:
        """Integer keys 3·offset + buffer code of places (buf, off), aliased as in memory."""
        if self.inplace:
            off = off.copy()
            alias = {Collective.ALLGATHER: (0, 1, self.u * self.kp),
                     Collective.REDUCE_SCATTER: (1, 0, self.u * self.kp),
                     Collective.ALLREDUCE: (1, 0, 0)}[self.coll]
            hit = buf == alias[0]
            off[hit] += alias[2]
            buf = np.where(hit, alias[1], buf)
        return 3 * off + buf

    def _place(self, lanes: dict) -> tuple[np.ndarray, np.ndarray]:
        """Threadblock placement for ``lanes``: each instruction's threadblock and index in
        it; sets ``tb_peer`` and ``lane``: connections' lane-0 threadblocks first (sends,
        receives), the local one, then the others as first used."""
        rec = self.arr
        sel = rec[:, 0].astype(np.int64)
        slot = rec[:, 7].astype(np.int64) * _SLOT + rec[:, 8]
        lane = np.zeros(len(rec), np.int64)
        for code, link in [(2 * w, (self.u, w)) for w in self.out_peers] + \
                [(2 * x + 1, (x, self.u)) for x in self.in_peers]:
            if link in lanes:
                hit = sel == code
                slots, lane_of = lanes[link]
                lane[hit] = lane_of[np.searchsorted(slots, slot[hit])]
        span = int(lane.max(initial=0)) + 1         # a threadblock as selector·span + lane
        key = sel * span + lane
        fixed = [2 * w * span for w in self.out_peers] + \
            [(2 * x + 1) * span for x in self.in_peers] + [-span]
        uniq, first = np.unique(key, return_index=True)
        known = set(fixed)
        keys = np.array(fixed + [k for k in uniq[np.argsort(first)].tolist() if k not in known],
                        np.int64)
        srt = np.argsort(keys)
        tb = srt[np.searchsorted(keys[srt], key)]
        sels, self.lane = (keys // span).tolist(), (keys % span).tolist()
        self.tb_peer = [("local", -1) if s < 0 else ("recv" if s & 1 else "send", s >> 1)
                        for s in sels]
        counts = np.bincount(tb, minlength=len(keys))
        order = np.argsort(tb, kind="stable")
        idx = np.empty(len(rec), np.int64)
        idx[order] = np.arange(len(rec)) - np.repeat(np.cumsum(counts) - counts, counts)
        self.order, self.tb_len, self.tb_start = order, counts, np.cumsum(counts) - counts
        return tb, idx

    def _events(self, rows: np.ndarray, buf: np.ndarray, off: np.ndarray, cnt: np.ndarray):
        """(instruction, piece index k, cell) of the ``cnt`` pieces each row touches."""
        rep = cnt[rows]
        j = np.repeat(rows, rep)
        k = np.arange(j.size) - np.repeat(np.cumsum(rep) - rep, rep)
        return j, k, np.repeat(self._cells(buf[rows], off[rows]), rep) + 3 * k

    def _candidates(self, tb: np.ndarray, idx: np.ndarray):
        """Per instruction, the (threadblock, index) it must wait for, as arrays sorted by
        instruction then by the order :meth:`resolve` tries them: the last writer of each
        piece read; in place also of each piece written the last writer and the readers
        since (on other threadblocks, the last instruction per threadblock). Out of place
        every write goes to a place nothing touched before (the input is never written,
        scratch is fresh, an output place is written at its piece's first arrival), so
        readers are tracked in place only, and a write elsewhere is refused."""
        rec = self.arr.astype(np.int64)
        cnt = rec[:, 6]
        rj, rk, rc = self._events(np.flatnonzero(rec[:, 9] >= 0), rec[:, 9], rec[:, 10], cnt)
        wj, wk, wc = self._events(np.flatnonzero(rec[:, 11] >= 0), rec[:, 11], rec[:, 12], cnt)
        isw = np.r_[np.zeros(rj.size, bool), np.ones(wj.size, bool)]
        j, k, cell = np.r_[rj, wj], np.r_[rk, wk], np.r_[rc, wc]
        ev = np.lexsort((isw, j, cell))
        j, k, cell, isw = j[ev], k[ev], cell[ev], isw[ev]
        pos = np.arange(j.size)
        start = np.maximum.accumulate(np.where(np.r_[True, cell[1:] != cell[:-1]], pos, 0))
        last = np.maximum.accumulate(np.where(isw, pos, -1))
        prev = np.r_[-1, last[:-1]][:j.size]
        prev[prev < start] = -1                 # the last write before each event, same cell
        if not self.inplace and ((isw & (prev >= 0)).any() or (isw & (cell % 3 == 0)).any()):
            raise TopofinderError("MSCCL lowering: internal error, an out-of-place write "
                                  "hits a place in use")
        had = prev >= 0
        cj, cw, ck = j[had], j[prev[had]], (isw[had].astype(np.int64) << 40) | (k[had] << 31)
        if self.inplace:                        # readers since the last write, per write
            nxt = np.minimum.accumulate(np.where(isw, pos, j.size)[::-1])[::-1]
            rd = np.flatnonzero(~isw)
            rd = rd[nxt[rd] < j.size]
            rd = rd[cell[nxt[rd]] == cell[rd]]
            w = nxt[rd]
            cj = np.r_[cj, j[w]]
            cw = np.r_[cw, j[rd]]
            ck = np.r_[ck, (1 << 40) | (k[w] << 31) | (1 + j[rd])]
        cb, ci = tb[cw], idx[cw]
        keep = cb != tb[cj]
        cj, cb, ci, ck = cj[keep], cb[keep], ci[keep], ck[keep]
        g = np.lexsort((cb, cj))
        cj, cb, ci, ck = cj[g], cb[g], ci[g], ck[g]
        if not cj.size:
            return cj, cb, ci
        head = np.flatnonzero(np.r_[True, (cj[1:] != cj[:-1]) | (cb[1:] != cb[:-1])])
        cj, cb = cj[head], cb[head]
        ci, ck = np.maximum.reduceat(ci, head), np.minimum.reduceat(ck, head)
        g = np.lexsort((ck, cj))
        return cj[g], cb[g], ci[g]

    def resolve(self, lanes: dict | None = None) -> None:
        """Place the recorded instructions on threadblocks for ``lanes`` (:meth:`_place`) and
        compute their dependencies: an instruction waits for the candidates
        (:meth:`_candidates`) its vector clock does not already imply, tried by decreasing
        clock sum (vector clocks: per threadblock how many of its instructions are known
        done, stored only where dependencies join them). Sets ``deps`` (instruction,
        threadblock, index) arrays, by instruction then in the order written, ``marked``
        (per instruction: some instruction depends on it, hasdep) and ``steps`` (per
        instruction: XML steps, nops included)."""
        self.arr = np.frombuffer(self.rec, np.int32).reshape(-1, _NF)
        tb, idx = self._place(lanes or {})
        cj, cb, ci = self._candidates(tb, idx)
        if not np.isin(cb, tb[cj]).any():
            self.deps = _leaf_deps(tb[cj], cj, cb, ci)
        else:
            heads = np.flatnonzero(np.r_[True, cj[1:] != cj[:-1]])
            pairs = list(zip(cb.tolist(), ci.tolist()))
            bounds = heads.tolist() + [len(pairs)]
            self.deps = _join_clocks(
                len(self.tb_peer), tb[cj[heads]].tolist(), idx[cj[heads]].tolist(),
                cj[heads].tolist(), [pairs[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
        dj, db, di = self.deps
        self.marked = np.zeros(len(tb), bool)
        self.marked[self.order[self.tb_start[db] + di]] = True
        self.tb_of = tb
        self.steps = np.maximum(1, np.bincount(dj, minlength=len(tb)))

    def instrs(self, b: int) -> list:
        """Threadblock b's instructions in order: (type, (buf, off) source, destination, cnt,
        schedule step, dependencies)."""
        lo = int(self.tb_start[b])
        js = self.order[lo:lo + self.tb_len[b]]
        deps = defaultdict(tuple)
        for j, db, di in zip(*(x.tolist() for x in self.deps)):
            deps[j] += ((db, di),)
        return [(_KINDS[kind], (_BUFS[sb], so), (_BUFS[db], do), cnt, t, deps.get(j, ()))
                for j, (_, kind, sb, so, db, do, cnt, t) in zip(js.tolist(),
                                                               self.arr[js, :8].tolist())]

    def emitted(self) -> list[int]:
        """Threadblocks written to the XML, in id order (empty local ones are left out)."""
        return [b for b, (kind, _) in enumerate(self.tb_peer)
                if kind != "local" or self.tb_len[b]]

    def steps_per_tb(self):
        per = np.bincount(self.tb_of, weights=self.steps,
                          minlength=len(self.tb_peer)).astype(np.int64)
        return per[self.emitted()].tolist()


def _join_clocks(ntb: int, tbs: list, idxs: list, rows: list, cands: list):
    """The dependencies of the instructions that have candidates (in record order: the
    instruction ``rows[g]``, index ``idxs[g]`` on threadblock ``tbs[g]``, its candidate
    (threadblock, index) pairs ``cands[g]``): those its vector clock does not imply yet,
    tried by decreasing clock sum. Vector clocks are sparse {threadblock: instructions known
    done}, stored only where dependencies join them. Returns the chosen (instruction,
    threadblock, index) as three arrays."""
    kpos = [[] for _ in range(ntb)]
    kval = [[] for _ in range(ntb)]
    ksum = [[] for _ in range(ntb)]
    out = []

    def clock_sum(bi):
        q = bisect_right(kpos[bi[0]], bi[1]) - 1
        return -((ksum[bi[0]][q] if q >= 0 else 0) + bi[1] + 1)

    for a, x, j, pairs in zip(tbs, idxs, rows, cands):
        cur = dict(kval[a][-1]) if kval[a] else {}
        cur[a] = x
        if len(pairs) > 1:
            pairs.sort(key=clock_sum)
        chosen = []
        for b, i in pairs:
            if cur.get(b, 0) > i:
                continue
            chosen.append((b, i))
            q = bisect_right(kpos[b], i) - 1
            if q >= 0:
                for c, v in kval[b][q].items():
                    if cur.get(c, 0) < v:
                        cur[c] = v
            if cur.get(b, 0) <= i:
                cur[b] = i + 1
        cur[a] = x + 1
        if chosen:
            kpos[a].append(x)
            kval[a].append(cur)
            ksum[a].append(sum(cur.values()) - x - 1)
            out += [(j, b, i) for b, i in chosen]
    return tuple(np.array(col, np.int64) for col in zip(*out)) if out else \
        tuple(np.zeros(0, np.int64) for _ in range(3))


def _leaf_deps(tbs: np.ndarray, cj: np.ndarray, cb: np.ndarray, ci: np.ndarray):
    """:func:`_join_clocks` when no candidate lies on a threadblock that has candidates
    itself (an out-of-place allgather: sends wait for receives and the input copy, which
    wait for nothing). Then a clock holds only such threadblocks' own counts, so candidate
    (b, i) of an instruction on threadblock a is chosen iff i exceeds every earlier
    candidate index of b on a, and the chosen are tried by decreasing i (clock sum i + 1),
    stably. ``tbs``: the threadblock of each candidate's instruction ``cj``."""
    if not cj.size:
        return cj, cb, ci
    o = np.lexsort((cj, cb, tbs))
    key, v = tbs[o] * (int(cb.max()) + 1) + cb[o], ci[o]
    new = np.r_[True, key[1:] != key[:-1]]
    lift = (np.cumsum(new) - 1) * (int(v.max()) + 2)
    before = np.r_[-1, np.maximum.accumulate(v + lift)[:-1] - lift[1:]]
    before[new] = -1
    chosen = np.zeros(cj.size, bool)
    chosen[o] = v > before
    keep = np.flatnonzero(chosen)
    keep = keep[np.lexsort((-ci[keep], cj[keep]))]
    return cj[keep], cb[keep], ci[keep]


def _peers(schedule: StepSchedule):
    s = schedule.sends
    n = schedule.topology.n
    pairs = np.unique(s[:, 4] * n + s[:, 5]) if s.shape[0] else np.zeros(0, np.int64)
    out_peers, in_peers = [[] for _ in range(n)], [[] for _ in range(n)]
    for key in pairs.tolist():
        u, w = divmod(key, n)
        out_peers[u].append(w)
        in_peers[w].append(u)
    return out_peers, in_peers


def _options(runtime, channels, max_steps):
    if runtime not in RUNTIME_NAMES:
        raise TopofinderError(f"runtime {runtime!r}: accepted are "
                              f"{', '.join(RUNTIME_NAMES)}")
    rt = get_runtime(runtime)
    if not isinstance(channels, int) or not 1 <= channels <= rt.max_channels:
        raise TopofinderError(f"channels = {channels!r}: accepted are integers "
                              f"1..{rt.max_channels}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise TopofinderError(f"max_steps = {max_steps!r}: accepted are positive integers")
    return rt, rt.max_steps if max_steps is None else max_steps


def _step_advice(rt, need: int) -> str:
    other = RUNTIMES["msccl"]
    if rt.name != other.name and need <= other.max_steps:
        return (f"--runtime msccl allows {other.max_steps}, or --max-steps {need} for an "
                f"executor built with MSCCL_MAX_NUM_STEPS ≥ {need}, or export --format json "
                "or npz instead")
    return (f"export --format json or npz instead (or --max-steps {need} for a runtime built "
            "with a larger MSCCL_MAX_NUM_STEPS)")


def check_fits(schedule: StepSchedule, channels: int = 1, runtime: str = "msccl-executor",
               max_steps: int | None = None, collective: str | None = None,
               stage: bool | None = None, interleave: bool | None = False) -> PieceLayout:
    """Refuse, from the schedule arrays alone (no XML built), a schedule whose MSCCL XML cannot
    fit ``runtime``'s parser: ranks, threadblocks, int16 offsets, and lower bounds on the
    instructions per threadblock (allgather-phase sends at their final places cannot merge
    beyond contiguous piece ranges; every other phase needs one instruction per step and link)
    and on the XML elements one rank loads. One-line TopofinderError naming the limit.
    Returns the piece layout the bounds are least for (allreduce: of
    :func:`~topofinder.export.xml_layout.allreduce_layouts`; else NCCL's shard order), which
    the writer then uses. ``collective``: with an allgather ``schedule``, check it as the
    allgather phase of this collective (a cheaper early check before the full schedule is
    built; bounds stay valid, being least over the same layouts). ``stage``: the writer's
    option (None: direct or staged, whichever fits). ``interleave``: the ``channels`` as
    instances (False), as one interleaved instance (True, :func:`to_msccl_xml`), or either
    (None: the instances' refusal if neither passes)."""
    if interleave is None and channels > 1:
        try:
            return check_fits(schedule, channels, runtime, max_steps, collective, stage, False)
        except TopofinderError as refusal:
            try:
                return check_fits(schedule, channels, runtime, max_steps, collective, stage,
                                  True)
            except TopofinderError:
                raise refusal from None
    rt, limit = _options(runtime, channels, max_steps)
    k, ways = (1, channels) if interleave else (channels, 1)
    coll = collective or schedule.collective
    if collective and schedule.collective != Collective.ALLGATHER:
        raise TopofinderError("check_fits(collective=...) takes an allgather schedule")
    what = f"MSCCL XML ({rt.name}) for {schedule.topology.expr} {coll}"
    tbs = _check_shape(schedule, k, rt, what)
    n, p = schedule.topology.n, schedule.shard_chunks
    if coll != Collective.ALLREDUCE:
        layout = shard_layout(n, p, k)
        if not schedule.sends.shape[0] or collective == Collective.REDUCE_SCATTER:
            return layout           # (an allgather checked as reduce-scatter reads scratch)
        direct, staged = _instruction_bounds(schedule, k, layout.table(), stage)
        per_rank = _rank_need(direct, staged, n, stage)
    else:
        layout, direct, staged, per_rank = _least_layout(schedule, k, stage)
    worst = int(direct.argmax())
    need = int(direct[worst]) if staged is None else int(staged.max())
    if stage is None and staged is not None:
        need = min(int(direct[worst]), need)
    lanes = max(-(-need // limit), ways)    # a link's steps spread over lanes of ≤ limit each
    if k * lanes > rt.max_channels:
        a, b = divmod(worst, n)
        where = (f"the link {a}→{b} needs at least {direct[worst]} instructions"
                 if need == direct[worst] else
                 f"a threadblock needs at least {need} instructions even with staged copies")
        raise TopofinderError(f"{what}: {where}, more than {rt.max_channels // k} "
                              f"threadblocks of {limit} (MSCCL_MAX_NUM_STEPS) on "
                              f"{rt.max_channels} channels hold; {_step_advice(rt, need)}")
    nodes = 1 + n + tbs + k * int(per_rank.max())
    if nodes >= rt.max_nodes:
        split = _split_advice(schedule, channels, runtime, max_steps, stage) \
            if coll == Collective.ALLREDUCE and not collective else ""
        raise TopofinderError(f"{what}: a rank would load at least {nodes} XML elements, the "
                              f"parser holds {rt.max_nodes - 1} (MAX_NODES); "
                              f"{_fewer_channels(k)}{split}export --format json or npz "
                              "instead")
    return layout


def _rank_need(direct: np.ndarray, staged, n: int, stage) -> np.ndarray:
    """Per rank: the least instructions its send and receive threadblocks (and, staged, its
    staging copies) need, from :func:`_instruction_bounds`."""
    per_rank = _rank_bound(direct, n)
    if staged is not None:          # staged: its links plus the rank's staging copies
        with_copies = _rank_bound(staged[:n * n], n) + staged[n * n:].reshape(n, -1).sum(axis=1)
        per_rank = with_copies if stage else np.minimum(per_rank, with_copies)
    return per_rank


def layout_for(schedule: StepSchedule, k: int = 1, stage: bool | None = None) -> PieceLayout:
    """Layout pass: NCCL's shard order for allgather and reduce-scatter; for allreduce the
    candidate with the least instruction bound (:func:`_least_layout`), as :func:`check_fits`
    chooses it."""
    if schedule.collective != Collective.ALLREDUCE:
        return shard_layout(schedule.topology.n, schedule.shard_chunks, k)
    return _least_layout(schedule, k, stage)[0]


def _least_layout(schedule: StepSchedule, k: int, stage):
    """Layout pass of an allreduce: of the candidate layouts, the one whose fullest rank
    needs the fewest instructions by :func:`_instruction_bounds` (the first on ties); returns
    it with its bounds (direct, staged) and per-rank need."""
    best = None
    prep = _reduce_prep(schedule, schedule.reduce_steps if schedule.collective ==
                        Collective.ALLREDUCE else 0)
    for layout in allreduce_layouts(schedule.topology, schedule.shard_chunks):
        direct, staged = _instruction_bounds(schedule, k, layout.table(), stage, prep)
        per_rank = _rank_need(direct, staged, schedule.topology.n, stage)
        if best is None or per_rank.max() < best[3].max():
            best = (layout, direct, staged, per_rank)
    return best


def _fewer_channels(channels: int) -> str:
    """Advice for a program too large for one rank's parser: with several instances, each
    rank holds every instance's threadblocks, so fewer channels load fewer elements."""
    return f"use --channels {channels - 1} or fewer, or " if channels > 1 else ""


def allreduce_phases(schedule: StepSchedule) -> tuple[StepSchedule, StepSchedule]:
    """An allreduce's reduce-scatter (steps 1..reduce_steps) and allgather (the rest, from
    step 1) as schedules of their own: run back to back they move the same chunks at the same
    steps, so (T_L, τ) add to the allreduce's (paper 001 §3)."""
    r, rows = schedule.reduce_steps, schedule.sends
    later = rows[rows[:, 0] > r].copy()
    later[:, 0] -= r
    return (StepSchedule(schedule.topology, schedule.shard_chunks, rows[rows[:, 0] <= r],
                         collective=Collective.REDUCE_SCATTER),
            StepSchedule(schedule.topology, schedule.shard_chunks, later,
                         collective=Collective.ALLGATHER))


def _split_advice(schedule: StepSchedule, channels: int, runtime: str, max_steps, stage) -> str:
    """The nearest runnable form of an allreduce that does not fit one program, when its two
    phases each pass :func:`check_fits`: as two programs, at the price of a second launch."""
    try:
        for phase in allreduce_phases(schedule):
            check_fits(phase, channels, runtime, max_steps, stage=stage, interleave=None)
    except TopofinderError:
        return ""
    return ("its reduce-scatter and allgather phases each pass this bound: export them with "
            "--collective reduce-scatter and --collective allgather and run the two programs "
            "back to back (the same (T_L, τ) plus one more kernel launch), or ")


def _rank_bound(link: np.ndarray, n: int) -> np.ndarray:
    """Per rank: the instructions of its send and receive threadblocks, from per-link
    counts (index u·N + w)."""
    bl = link.reshape(n, n)
    return bl.sum(axis=1) + bl.sum(axis=0)


def _check_shape(schedule: StepSchedule, k: int, rt, what: str) -> int:
    """Ranks, pieces per buffer (int16 offsets) and threadblocks (one per peer and direction
    plus a local one, per channel) against the runtime; returns threadblocks per GPU."""
    n, p = schedule.topology.n, schedule.shard_chunks
    instead = "export --format json or npz instead"
    if n > rt.max_subs:
        raise TopofinderError(f"{what}: {n} ranks exceed the XML loader's {rt.max_subs} <gpu> "
                              f"elements (MAX_SUBS); {instead}")
    if 1 + n >= rt.max_nodes:
        raise TopofinderError(f"{what}: {n} ranks exceed the {rt.max_nodes - 1} XML elements "
                              f"a rank loads (MAX_NODES); {instead}")
    if n * k * p > INT16_MAX:
        raise TopofinderError(f"{what}: {n * k * p} pieces per buffer exceed int16 offsets "
                              f"({INT16_MAX}); use fewer channels or {instead}")
    out_peers, in_peers = _peers(schedule)
    dout = max((len(x) for x in out_peers), default=0)
    din = max((len(x) for x in in_peers), default=0)
    if max(dout, din) > rt.max_tbs_per_channel:
        raise TopofinderError(f"{what}: a rank has {max(dout, din)} peers in one direction, the "
                              f"runtime allows {rt.max_tbs_per_channel} send or receive "
                              f"threadblocks per channel; {instead}")
    tbs = k * (dout + din + 1)
    if tbs > rt.max_tbs or tbs - 1 > INT8_MAX:
        raise TopofinderError(f"{what}: {tbs} threadblocks per GPU ({k} channel(s) × "
                              f"{dout + din + 1}) exceed the runtime's {min(rt.max_tbs, 128)}; "
                              f"use fewer channels")
    return tbs


def _instruction_bounds(schedule: StepSchedule, k: int, table: np.ndarray, stage: bool | None,
                        prep=None):
    """Lower bounds on instructions per threadblock, from the send rows: (direct, staged),
    pieces at ``table[v, c]`` (the layout's channel-0 offsets).
    ``direct[u·N + w]``: the send threadblock u→w without staging — one instruction per
    (link, step) and 71 pieces in a reduce phase (:func:`_reduce_bound`), per contiguous
    piece range and 71 pieces in the allgather phase (cnt < MSCCL_MAX_COUNT = 72).
    ``staged`` (None when nothing is staged or ``stage`` is False): the same with staged
    allgather messages (one send per block of 71 pieces), followed by the N·(steps+1) counts of
    each (rank, step)'s local threadblock, which copies every range of a multi-range message
    on both ends (paper 001 §7). ``prep``: :func:`_reduce_prep` of the schedule, if known."""
    n, steps = schedule.topology.n, schedule.num_steps
    reduce_until = _reduce_until(schedule)
    span = steps + 1
    bound = _reduce_bound(prep or _reduce_prep(schedule, reduce_until), table, n)
    rows = schedule.sends[schedule.sends[:, 0] > reduce_until]
    if not rows.shape[0]:
        return bound, None
    t, v, lo, hi, u, w = (rows[:, i] for i in range(6))
    row, start, end = _piece_ranges(v, lo, hi, table)
    key = (u[row] * n + w[row]) * span + t[row]
    order = np.lexsort((start, key))
    key, start, end = key[order], start[order], end[order]
    brk = np.ones(key.size, bool)
    brk[1:] = (key[1:] != key[:-1]) | (start[1:] != end[:-1])
    runs_kt, runs = np.unique(key[brk], return_counts=True)
    run_len = np.bincount(np.cumsum(brk) - 1, weights=end - start)
    per_run = np.ceil(run_len / _MAX_CNT_DEFAULT)
    direct = bound + np.bincount(key[brk] // span, weights=per_run,
                                 minlength=n * n).astype(np.int64)
    if stage is False:
        return direct, None
    pieces = np.bincount(np.searchsorted(runs_kt, key), weights=end - start,
                         minlength=runs_kt.size)
    blocks = np.ceil(pieces / _MAX_CNT_DEFAULT)
    extra = np.maximum(0, runs - blocks)
    lk, st = runs_kt // span, runs_kt % span
    su, sw = lk // n, lk % n
    stage_tb = np.bincount(su * span + st, weights=extra, minlength=n * span) + \
        np.bincount(sw * span + st, weights=extra, minlength=n * span)
    staged_link = bound + np.bincount(lk, weights=blocks, minlength=n * n).astype(np.int64)
    return direct, np.concatenate([staged_link, stage_tb.astype(np.int64)])


def _reduce_until(schedule: StepSchedule) -> int:
    """The last step of the reduce phase (0: none)."""
    return {Collective.ALLGATHER: 0, Collective.REDUCE_SCATTER: schedule.num_steps,
            Collective.ALLREDUCE: schedule.reduce_steps}[schedule.collective]


def _piece_ranges(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, table: np.ndarray):
    """Send rows (shard v, chunks [lo, hi)) as ranges of offsets: (row index, start, end),
    a row whose chunks are not adjacent in ``table`` cut into one range per chunk."""
    m = v.size
    split = (hi - lo > 1) & (table[v, np.minimum(lo + 1, hi - 1)] != table[v, lo] + 1)
    rep = np.where(split, hi - lo, 1)
    row = np.repeat(np.arange(m), rep)
    c = lo[row] + np.arange(row.size) - np.repeat(np.cumsum(rep) - rep, rep)
    start = table[v[row], c]
    return row, start, start + np.where(split[row], 1, hi[row] - lo[row])


def _reduce_prep(schedule: StepSchedule, reduce_until: int):
    """What the reduce phase's bound needs that no layout changes, one entry per piece
    sent in that phase: (v, c, message key (u·N + w)·(steps + 1) + t, sent from the input,
    the receiver's partial in its input, the last partial of the receiver's own chunk);
    None when the phase is empty."""
    n, p, span = schedule.topology.n, schedule.shard_chunks, schedule.num_steps + 1
    s = schedule.sends[schedule.sends[:, 0] <= reduce_until]
    if not s.shape[0]:
        return None
    rep = s[:, 3] - s[:, 2]
    row = np.repeat(np.arange(s.shape[0]), rep)
    c = s[row, 2] + np.arange(row.size) - np.repeat(np.cumsum(rep) - rep, rep)
    t, v, u, w = s[row, 0], s[row, 1], s[row, 4], s[row, 5]
    piece = v * p + c
    at_w, at_u = w * (n * p) + piece, u * (n * p) + piece
    order = np.lexsort((u, t, at_w))
    first, last = np.zeros(row.size, bool), np.zeros(row.size, bool)
    new = np.r_[True, at_w[order][1:] != at_w[order][:-1]]
    first[order] = new
    last[order] = np.r_[new[1:], True]
    arrival = np.full(n * n * p, schedule.num_steps + 1, np.int64)
    np.minimum.at(arrival, at_w, t)
    sent = np.full(n * n * p, schedule.num_steps + 1, np.int64)
    np.minimum.at(sent, at_u, t)
    from_input = arrival[at_u] >= t
    cur_input = first & (sent[at_w] > t)
    final = last & (v == w)
    return v, c, (u * n + w) * span + t, from_input, cur_input, final, span


def _reduce_bound(prep, table: np.ndarray, n: int) -> np.ndarray:
    """Per link (index u·N + w): a lower bound on the reduce phase's send instructions, from
    :func:`_reduce_prep` and the layout's offsets ``table[v, c]``. The lowering orders a
    message by where its pieces sit at the sender; those still in the sender's input come
    first, by offset, and two neighbours among them share a run only if their offsets follow,
    both receivers' partials are in the input (the first arrival there) or both elsewhere,
    and both land in scratch or both in the output (the last partial of the receiver's own
    chunk). Each such segment, and the rest of the message, needs one instruction per
    ``_MAX_CNT_DEFAULT`` pieces. Exact arithmetic on the send rows, one entry per piece."""
    if prep is None:
        return np.zeros(n * n, np.int64)
    v, c, msg, from_input, cur_input, final, span = prep
    pos = table[v, c]
    order = np.lexsort((pos, ~from_input, msg))
    msg, pos, inp = msg[order], pos[order], from_input[order]
    cur, fin = cur_input[order], final[order]
    brk = np.r_[True, (msg[1:] != msg[:-1]) | (inp[1:] != inp[:-1])]
    brk[1:] |= inp[1:] & ((pos[1:] != pos[:-1] + 1) | (cur[1:] != cur[:-1]) |
                          (fin[1:] != fin[:-1]))
    seg = np.cumsum(brk) - 1
    blocks = np.ceil(np.bincount(seg) / _MAX_CNT_DEFAULT)
    return np.bincount(msg[brk] // span, weights=blocks, minlength=n * n).astype(np.int64)


class _Lowering:
    """The state the lowering passes share: every rank's program (:class:`_Prog`), where each
    rank holds each (shard, chunk) now (``loc``), and how many reduce-phase sends of a rank's
    own chunk are still to arrive (``remaining``)."""

    def __init__(self, schedule: StepSchedule, k: int, inplace: bool, max_cnt: int, stage,
                 layout: PieceLayout | None = None):
        self.n, self.p, self.coll = schedule.topology.n, schedule.shard_chunks, schedule.collective
        self.max_cnt, self.stage = max_cnt, stage
        table = (layout or layout_for(schedule, k, stage)).table().tolist()
        self.pos = lambda v, c: table[v][c]
        self.progs = place_threadblocks(schedule, inplace, k)
        self.reduce_until = _reduce_until(schedule)
        self.loc = [{} for _ in range(self.n)]
        self.remaining = defaultdict(int)
        # one shared object per piece and per input/output place (memory: N²·P entries)
        self.piece = [(v, c) for v in range(self.n) for c in range(self.p)]
        self.at = {buf: [(buf, x) for x in range(self.n * k * self.p)] for buf in "io"}

    def own_out(self, w: int, c: int):
        """Where rank w's own reduced chunk c ends: its output."""
        return self.at["o"][c if self.coll == Collective.REDUCE_SCATTER else self.pos(w, c)]


def place_threadblocks(schedule: StepSchedule, inplace: bool, k: int) -> list:
    """Threadblock placement pass: per rank, one send threadblock per out-neighbour, one
    receive threadblock per in-neighbour and a local one (instance 0; instance j repeats them
    on its own pieces when the XML is written). Lanes (:meth:`_Prog.resolve` with
    :func:`assign_lanes`) move a link's later steps to further threadblocks on further
    channels, so no threadblock holds more than the runtime's step limit."""
    out_peers, in_peers = _peers(schedule)
    return [_Prog(u, out_peers[u], in_peers[u], inplace, schedule.collective,
                  k * schedule.shard_chunks) for u in range(schedule.topology.n)]


def assign_lanes(progs: list, budgets, ways: int = 1) -> list:
    """Placement in time: from programs resolved on one lane, deal each link's sequence of
    slots (step, run of the step's message) in turn over ``ways`` channels (slot i to
    residue i mod ways: an *interleaved* program, where consecutive messages of a link run on
    different connections side by side), then cut each residue's slots into consecutive
    groups whose instructions (nops included) on the sending and on the receiving threadblock
    stay within a budget; residue r, group g runs on channel lane r + ways·g. Per budget in
    ``budgets``: {link (u, w): (its slots t·_SLOT + r, sorted; the lane of each)} for the
    links with more than one lane, or None when one slot alone exceeds it."""
    n = len(progs)
    keys, sides, steps = [], [], []
    for prog in progs:
        sel = prog.arr[:, 0].astype(np.int64)
        conn = sel >= 0
        recv = (sel & 1).astype(bool)
        peer = sel >> 1
        link = np.where(recv, peer * n + prog.u, prog.u * n + peer)
        slot = prog.arr[:, 7].astype(np.int64) * _SLOT + prog.arr[:, 8]
        keys.append((link * (1 << 40) + slot)[conn])
        sides.append(recv[conn])
        steps.append(prog.steps[conn])
    key, side, step = np.concatenate(keys), np.concatenate(sides), np.concatenate(steps)
    uniq, inv = np.unique(key, return_inverse=True)
    need = np.stack([np.bincount(inv, weights=step * (side == s), minlength=uniq.size)
                     for s in (False, True)]).astype(np.int64)
    link = uniq >> 40
    heads = np.flatnonzero(np.r_[True, link[1:] != link[:-1]]).tolist() + [uniq.size]
    return [_cut_lanes(uniq, n, heads, need, budget, ways) for budget in budgets]


def _cut_lanes(key: np.ndarray, n: int, heads: list, need: np.ndarray,
               budget: int, ways: int) -> dict | None:
    """:func:`assign_lanes` for one budget: slots sorted by (link, slot) in ``key``, each
    link's slots from ``heads[i]`` on, ``need`` [send, receive] instructions per slot. Each
    residue's lanes take the longest runs of its slots within the budget on both sides (a
    greedy cut)."""
    if need.size and need.max() > budget:
        return None
    lanes = {}
    for a, b in zip(heads[:-1], heads[1:]):
        if ways == 1 and need[0, a:b].sum() <= budget and need[1, a:b].sum() <= budget:
            continue
        lane = np.zeros(b - a, np.int64)
        for r in range(min(ways, b - a)):
            lane[r::ways] = r + ways * _greedy_groups(need[:, a + r:b:ways], budget)
        if lane.any():
            lanes[divmod(int(key[a] >> 40), n)] = (key[a:b] & ((1 << 40) - 1), lane)
    return lanes


def _greedy_groups(need: np.ndarray, budget: int) -> np.ndarray:
    """Per slot (columns of ``need``, [send, receive] instructions), its group when the
    sequence is cut greedily into the longest runs within ``budget`` on both sides."""
    csum = np.concatenate([np.zeros((2, 1), np.int64), np.cumsum(need, axis=1)], axis=1)
    m, group, at, g = need.shape[1], np.zeros(need.shape[1], np.int64), 0, 0
    while at < m:
        end = min(int(np.searchsorted(csum[0], csum[0, at] + budget, side="right")),
                  int(np.searchsorted(csum[1], csum[1, at] + budget, side="right"))) - 1
        group[at:end], at, g = g, end, g + 1
    return group


class _TooBig(Exception):
    """The lowering stopped early: some rank's program already exceeds what its parser
    loads."""


def _lower(schedule: StepSchedule, channels: int, inplace: bool, max_cnt: int,
           stage: bool = False, max_steps: int | None = None,
           layout: PieceLayout | None = None):
    """Channel-0 programs of every rank (module doc), recorded for :meth:`_Prog.resolve`,
    pass by pass: layout and threadblock
    placement (:class:`_Lowering`), the initial data, then per schedule step the messages in
    layout order, their receive places, consolidation into instructions (staged through
    scratch with ``stage``: allgather-phase messages that are not one contiguous range on both
    ends are packed by copies before the send and unpacked after the receive, in a local
    threadblock per step), with the reduce phase's results moved to the output between the
    phases. ``max_steps``: stop (:class:`_TooBig`) once one rank's channel-0 program holds
    more instructions (so more XML steps), checked after every schedule step. ``layout``:
    where pieces sit (default :func:`layout_for`)."""
    st = _Lowering(schedule, channels, inplace, max_cnt, stage, layout)
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
        msgs = _step_messages(st, s[bounds[j]:bounds[j + 1]], t, reducing)
        recvs = _receive_places(st, msgs, reducing)
        runs, staged = {}, set()
        for u, w, pieces, srcs in msgs:
            runs[(u, w)], cut = _consolidate_sends(st, t, u, w, srcs, recvs[(u, w)], reducing)
            if cut:
                staged.add((u, w))
        _emit_receives(st, t, runs, staged, {(m[0], m[1]): m[2] for m in msgs})
        if max_steps is not None:
            big = max(st.progs, key=lambda prog: prog.count)
            if big.count > max_steps:
                raise _TooBig(f"rank {big.u} would load more than {max_steps} steps by "
                              f"schedule step {t} of {schedule.num_steps}")
    if not started_ag:
        _finish_reduce(st)
    return st.progs


def _initial_data(st: _Lowering, s: np.ndarray, inplace: bool) -> None:
    """Where every rank's input sits before step 1 (allgather: its shard, copied to the output
    unless in place); for reduce phases, the count of sends of each rank's own chunks."""
    n, p, pos = st.n, st.p, st.pos
    if st.coll == Collective.ALLGATHER:
        for u in range(n):
            if inplace:
                for c in range(p):
                    st.loc[u][st.piece[u * p + c]] = st.at["o"][pos(u, c)]
            else:
                for c in range(p):
                    st.loc[u][st.piece[u * p + c]] = st.at["i"][c]
                st.progs[u].add(st.progs[u].local, "cpy", ("i", 0), ("o", pos(u, 0)), p, 0,
                                [("i", 0)], [("o", pos(u, 0))])
        return
    held = {st.piece[v * p + c]: st.at["i"][pos(v, c)] for v in range(n) for c in range(p)}
    for u in range(n):
        st.loc[u] = dict(held)
    for t, v, lo, hi, u, w in s.tolist():
        if t <= st.reduce_until and v == w:
            for c in range(lo, hi):
                st.remaining[(w, c)] += 1


def _finish_reduce(st: _Lowering) -> None:
    """End of the reduce phase: every rank copies its reduced chunks that are not yet in
    place to its output (consecutive ones in one copy)."""
    for u in range(st.n):
        prog = st.progs[u]
        pend = []
        for c in range(st.p):
            cur, want = st.loc[u].get((u, c)), st.own_out(u, c)
            if cur is None:
                raise ScheduleError(f"reduce-scatter: node {u} ends without its chunk {c}")
            if cur != want:
                pend.append((cur, want))
        for run in _runs([(a, None, b) for a, b in pend], st.max_cnt, (0, 2)):
            (src, _, dst), cnt = run[0], len(run)
            prog.add(prog.local, "cpy", src, dst, cnt, st.reduce_until, [src], [dst])
        st.loc[u] = {(u, c): st.own_out(u, c) for c in range(st.p)}


def _step_messages(st: _Lowering, rows: np.ndarray, t: int, reducing: bool) -> list:
    """Layout pass of one step: per link (u, w), the (shard, chunk) pieces it carries and
    their places at u, in buffer order; a reduce-phase sender gives its partials up."""
    rep = rows[:, 3] - rows[:, 2]
    at = np.repeat(rows[:, 1] * st.p + rows[:, 2] - np.cumsum(rep) + rep, rep) + \
        np.arange(int(rep.sum()))                    # piece index v·P + c, row by row
    link = np.repeat(rows[:, 4] * st.n + rows[:, 5], rep)
    by_link = np.argsort(link, kind="stable")
    at, link = at[by_link].tolist(), link[by_link]
    heads = np.flatnonzero(np.r_[True, link[1:] != link[:-1]]).tolist() + [len(at)]
    msgs = []
    for a, b in zip(heads[:-1], heads[1:]):
        u, w = divmod(int(link[a]), st.n)
        held = st.loc[u]
        pieces = list(map(st.piece.__getitem__, at[a:b]))
        try:
            srcs = list(map(held.__getitem__, pieces))
        except KeyError:
            raise ScheduleError(f"step {t}: node {u} sends a chunk it does not hold; "
                                "validate the schedule first") from None
        order = sorted(range(len(pieces)), key=srcs.__getitem__)
        pieces = list(map(pieces.__getitem__, order))
        srcs = list(map(srcs.__getitem__, order))
        if reducing:
            for pc in pieces:
                del held[pc]
        msgs.append((u, w, pieces, srcs))
    return msgs


def _receive_places(st: _Lowering, msgs: list, reducing: bool) -> dict:
    """Where each received piece lands, per link: (kind, place it reduces with or None,
    destination). Reduce phase: fresh scratch, or the output for the last partial of the
    receiver's own chunk; allgather phase: the final place (scratch for a duplicate)."""
    recvs, out, pos = {}, st.at["o"], st.pos
    for u, w, pieces, _ in sorted(msgs, key=lambda m: (m[1], m[0])):
        lst, held, prog = [], st.loc[w], st.progs[w]
        for pc in pieces:
            v, c = pc
            if reducing:
                cur = held.get(pc)
                final = False
                if v == w:
                    st.remaining[(w, c)] -= 1
                    final = st.remaining[(w, c)] == 0
                dst = st.own_out(w, c) if final else prog.new_scratch()
                held[pc] = dst
                lst.append(("rrc" if cur is not None else "r", cur, dst))
            else:
                if pc in held:
                    dst = prog.new_scratch()
                else:
                    dst = out[pos(v, c)]
                    held[pc] = dst
                lst.append(("r", None, dst))
        recvs[(u, w)] = lst
    return recvs


def _consolidate_sends(st: _Lowering, t: int, u: int, w: int, srcs: list, recvs: list,
                       reducing: bool) -> list:
    """Consolidation pass for link u→w at step t: runs of pieces contiguous on both ends
    become one send instruction each; staged, the message goes in blocks of ``max_cnt``
    packed into scratch (:func:`_stage_pack`). Returns the runs (the receiver's messages)
    and whether they were cut in blocks (else each is contiguous on both ends)."""
    items = [(src, kind, cur, dst) for src, (kind, cur, dst) in zip(srcs, recvs)]
    runs = _runs(items, st.max_cnt, (0, 1, 2, 3) if reducing else (0, 3))  # (else "r", None)
    staged = st.stage and not reducing and len(runs) > 1
    if staged:
        runs = [items[i:i + st.max_cnt] for i in range(0, len(items), st.max_cnt)]
    prog = st.progs[u]
    if not staged:
        srcs = [run[0][0] for run in runs]
        prog.add_runs(prog.conn_tb("send", w, (t, 0)), ["s"] * len(runs), srcs, srcs,
                      list(map(len, runs)), t, srcs, [None] * len(runs))
        return runs, staged
    for r, run in enumerate(runs):
        src = _stage_pack(prog, t, run, st.max_cnt)
        prog.add(prog.conn_tb("send", w, (t, r)), "s", src, src, len(run), t, [src], [],
                 slot=(t, r))
    return runs, staged


def _stage_pack(prog: _Prog, t: int, run: list, max_cnt: int):
    """Staging pass, sender side: a run whose sources are several ranges is copied into one
    fresh scratch range by step t's local threadblock; returns where the send reads."""
    parts = _runs(run, max_cnt, (0,))
    if len(parts) == 1:
        return run[0][0]
    blk = prog.new_scratch(len(run))
    at = 0
    for part in parts:
        dst = ("s", blk[1] + at)
        prog.add(prog.stage_tb(t), "cpy", part[0][0], dst, len(part), t, [part[0][0]], [dst])
        at += len(part)
    return blk


def _emit_receives(st: _Lowering, t: int, runs: dict, staged: set, msg_pieces: dict) -> None:
    """The receive instructions of step t, receiver by receiver: each message lands in its
    places (``r``, or ``rrc`` reducing with the partial held), or, when those are several
    ranges (only in a link of ``staged``, cut in blocks), in scratch and is unpacked by
    :func:`_stage_unpack`."""
    for (u, w) in sorted(runs, key=lambda x: (x[1], x[0])):
        prog, where = st.progs[w], None
        if (u, w) not in staged:
            heads = [run[0] for run in runs[(u, w)]]
            kinds = [it[1] for it in heads]
            reads = [it[2] if it[1] == "rrc" else None for it in heads]
            dsts = [it[3] for it in heads]
            prog.add_runs(prog.conn_tb("recv", u, (t, 0)), kinds,
                          [rd or dst for rd, dst in zip(reads, dsts)], dsts,
                          list(map(len, runs[(u, w)])), t, reads, dsts)
            continue
        for r, run in enumerate(runs[(u, w)]):
            _, kind, cur, dst = run[0]
            parts = _runs(run, st.max_cnt, (3,)) if (u, w) in staged else (run,)
            if kind == "r" and len(parts) > 1:
                where = where or {id(it): pc for it, pc in zip(
                    (x for run in runs[(u, w)] for x in run), msg_pieces[(u, w)])}
                _stage_unpack(st, prog, (t, r), u, w, run, parts, where)
                continue
            reads = [cur] if kind == "rrc" else []
            prog.add(prog.conn_tb("recv", u, (t, r)), kind, cur if kind == "rrc" else dst, dst,
                     len(run), t, reads, [dst], slot=(t, r))


def _stage_unpack(st: _Lowering, prog: _Prog, slot: tuple, u: int, w: int, run, parts,
                  where) -> None:
    """Staging pass, receiver side: take the message into fresh scratch in one receive, copy
    each range to its place (duplicates stay in scratch); forwards then read the scratch copy,
    so they wait for no copy."""
    blk = prog.new_scratch(len(run))
    t = slot[0]
    prog.add(prog.conn_tb("recv", u, slot), "r", blk, blk, len(run), t, [], [blk], slot=slot)
    at = 0
    for part in parts:
        src = ("s", blk[1] + at)
        if part[0][3][0] != "s":
            prog.add(prog.stage_tb(t), "cpy", src, part[0][3], len(part), t, [src],
                     [part[0][3]])
            for q, it in enumerate(part):
                st.loc[w][where[id(it)]] = ("s", blk[1] + at + q)
        at += len(part)


_OTHER_CODE = {None: -1, "r": -2, "rrc": -3}


def _runs(items, max_cnt, fields):
    """Split ``items`` into maximal runs of at most ``max_cnt`` in which, for each index in
    ``fields``, the item members that are places (buf, off) all advance by one and the other
    members agree (vectorised over the items)."""
    m = len(items)
    if m < 2:
        return [list(items)] if m else []
    ok = np.ones(m - 1, bool)
    for f in fields:                    # a place as 4·off + buffer code ≥ 0, else negative
        code = np.array([x[1] * 4 + _BUF_CODE[x[0]] if x.__class__ is tuple else _OTHER_CODE[x]
                         for x in [it[f] for it in items]], np.int64)
        a, b = code[:-1], code[1:]
        ok &= np.where((a >= 0) & (b >= 0), b - a == 4, b == a)
    start = np.flatnonzero(np.r_[True, ~ok])
    seg = np.cumsum(np.r_[True, ~ok]) - 1
    cut = np.flatnonzero((np.arange(m) - start[seg]) % max_cnt == 0).tolist() + [m]
    return [items[cut[i]:cut[i + 1]] for i in range(len(cut) - 1)]


def to_msccl_xml(schedule: StepSchedule, channels: int = 1, protocol: str = "Simple",
                 name: str | None = None, runtime: str = "msccl-executor",
                 inplace: bool = False, max_steps: int | None = None, min_bytes: int = 0,
                 max_bytes: int | None = None, stage: bool | None = None,
                 extra: dict | None = None, interleave: bool | None = None,
                 note=None) -> str:
    """The MSCCL XML of ``schedule`` (module doc). ``channels``: K channels' worth of
    parallelism per link, as K instances on separate channels, each moving 1/K of every chunk
    (``interleave`` False), or as one instance whose links deal their messages in turn over K
    channels (True: the same instructions, so a rank loads about a K-th of the elements K
    instances need), or instances where they fit the runtime and interleaved otherwise
    (None, the default; ``note`` is called with one line saying so). ``protocol``: Simple,
    LL or LL128; ``runtime``: msccl-executor or msccl; ``inplace``: the in-place variant
    (else out-of-place); ``max_steps``: instructions per threadblock (default: the runtime's
    MSCCL_MAX_NUM_STEPS); ``min_bytes``/``max_bytes``: the message sizes (bytes of the whole
    output for allgather, of the input for reduce-scatter) the runtime may select it for,
    None = unbounded; ``stage``: send allgather-phase messages that are not one contiguous range
    through scratch (True), never (False), or only if the direct program does not fit (None).
    ``extra``: more ``<algo>`` attributes (strings, e.g. the ``physical`` relabelling of
    `export --relabel`). A topology with node labels gives every ``<gpu>`` a ``label``
    attribute (its host name). Refuses (TopofinderError, one line) anything the runtime
    cannot load."""
    if protocol not in PROTOCOLS:
        raise TopofinderError(f"protocol {protocol!r}: accepted are {', '.join(PROTOCOLS)}")
    rt, limit = _options(runtime, channels, max_steps)
    if min_bytes < 0 or (max_bytes is not None and max_bytes <= min_bytes):
        raise TopofinderError(f"size band [{min_bytes}, {max_bytes}] bytes: need 0 ≤ "
                              "min-bytes < max-bytes")
    topo, coll = schedule.topology, schedule.collective
    what = f"MSCCL XML ({rt.name}) for {topo.expr} {coll}"
    ways_tried = [1, channels] if interleave is None and channels > 1 else \
        [channels if interleave else 1]
    refusal = None
    for ways in ways_tried:
        k = channels // ways
        try:
            layout = check_fits(schedule, channels, runtime, limit, stage=stage,
                                interleave=ways > 1)
            progs = _lower_to_fit(schedule, k, inplace, rt, limit, stage, what, layout, ways)
        except TopofinderError as exc:
            refusal = refusal or exc
            continue
        if ways > 1 and interleave is None and note is not None:
            note(f"--channels {channels}: {channels} instances do not fit ({_clause(refusal)}); "
                 f"written as one instance whose links deal their messages in turn over "
                 f"{channels} channels: the same sends, so the same (T_L, τ)")
        return _emit(schedule, progs, k, protocol, name, rt, inplace, min_bytes, max_bytes,
                     extra, layout)
    raise refusal


def _clause(refusal: TopofinderError) -> str:
    """The reason of one of this module's refusals ("what: reason; advice"), without the
    schedule it names or its advice."""
    return str(refusal).split(": ", 1)[-1].split("; ", 1)[0]


def _lower_to_fit(schedule: StepSchedule, k: int, inplace: bool, rt, limit: int, stage,
                  what: str, layout: PieceLayout, ways: int = 1) -> list:
    """Lower directly, then staged (unless ``stage`` fixes one), each resolved first on one
    lane per link; when a threadblock holds more than ``limit`` steps, or the program is
    interleaved over ``ways`` > 1 channels, resolve the same lowering on the lanes of
    :func:`assign_lanes` (aiming 1/8 below the limit since the new threadblocks'
    dependencies add nops, then 1/4; then 1/8, 1/4, 3/8 and 1/2 below it, each from the
    last laned program's own counts). The first that fits, else TopofinderError."""
    tries = [stage] if stage is not None or schedule.collective == Collective.REDUCE_SCATTER \
        else [False, True]
    n, first = schedule.topology.n, None
    room = (rt.max_nodes - 2 - n) // k              # XML steps one rank's parser can hold
    for attempt in tries:
        try:
            progs = _lower(schedule, k, inplace, rt.max_count - 1, stage=attempt,
                           max_steps=room, layout=layout)
        except _TooBig as exc:
            first = first or (f"{exc}, beyond the {rt.max_nodes - 1} XML elements its parser "
                              f"holds (MAX_NODES); {_fewer_channels(k)}export --format json or "
                              "npz instead")
            continue
        for prog in progs:
            prog.resolve()
        problem = _fit_problem(progs, n, k, rt, limit)
        if problem is None and ways == 1:
            return progs
        first = first or problem
        budgets = (limit * 7 // 8, limit * 3 // 4)
        for lanes in chain(assign_lanes(progs, budgets, ways),
                           _recut(progs, budgets + (limit * 5 // 8, limit // 2), ways)):
            if lanes is None:
                continue
            for prog in progs:
                prog.resolve(lanes)
            problem = _fit_problem(progs, n, k, rt, limit)
            if problem is None:
                return progs
            first = first or problem
    raise TopofinderError(f"{what}: {first}")


def _recut(progs: list, budgets, ways: int):
    """Lanes for each of ``budgets`` in turn, from the programs' resolution at the time
    (lazy: the last laned program's nops are a closer estimate of the next one's)."""
    for budget in budgets:
        yield assign_lanes(progs, (budget,), ways)[0]


def _lane_count(progs) -> int:
    """Lanes (channels per instance) the programs use."""
    return 1 + max((max(prog.lane) for prog in progs), default=0)


def _fit_problem(progs, n: int, k: int, rt, limit: int) -> str | None:
    """Why the lowered programs do not fit the runtime (one clause), or None."""
    lanes = _lane_count(progs)
    if k * lanes > rt.max_channels:
        return (f"spreading its links over {lanes} channel lanes × {k} instance(s) needs more "
                f"than the runtime's {rt.max_channels} channels; use fewer channels")
    for prog in progs:
        counts = prog.steps_per_tb()
        ntb = len(counts)
        worst = int(np.argmax(counts))
        if counts[worst] > limit:
            kind, peer = prog.tb_peer[prog.emitted()[worst]]
            role = {"send": f"sending to {peer}", "recv": f"receiving from {peer}",
                    "local": "copying"}[kind]
            return (f"rank {prog.u}'s threadblock {role} has {counts[worst]} instructions, the "
                    f"limit is {limit} (MSCCL_MAX_NUM_STEPS); {_step_advice(rt, counts[worst])}")
        if k * ntb > min(rt.max_tbs, INT8_MAX + 1):
            return (f"rank {prog.u} needs {k * ntb} threadblocks, beyond the runtime's "
                    f"{min(rt.max_tbs, INT8_MAX + 1)} (int8 dependency ids); use fewer channels")
        nodes = 1 + n + k * ntb + k * sum(counts)
        if nodes >= rt.max_nodes:
            return (f"rank {prog.u} would load {nodes} XML elements, the parser holds "
                    f"{rt.max_nodes - 1} (MAX_NODES); use fewer channels or export --format "
                    "json or npz instead")
        if k * max(prog.scratch, 1) > INT16_MAX + 1:
            return (f"rank {prog.u} needs {k * prog.scratch} scratch pieces, beyond int16 "
                    "offsets; use fewer channels")
        _check_ranges(prog, n, k, rt)
    return None


def _check_ranges(prog: _Prog, n: int, k: int, rt) -> None:
    """The parser's count and offset rules on a resolved program's arrays, for the last
    instance (the largest offsets): 0 < cnt < MSCCL_MAX_COUNT, each instruction's source and
    destination pieces inside their buffer, offsets within int16. A failure is a writer
    bug (TopofinderError naming it); msccl_check checks the written XML independently."""
    kp, coll, arr = prog.kp, prog.coll, prog.arr
    if not arr.shape[0]:
        return
    shift = channel_shift(coll, n, kp // k, k - 1)
    size = np.array([kp if coll == Collective.ALLGATHER else n * kp,
                     kp if coll == Collective.REDUCE_SCATTER else n * kp, k * prog.scratch])
    base = np.array([shift, shift, (k - 1) * prog.scratch])
    cnt = arr[:, 6].astype(np.int64)
    bad = (cnt < 1) | (cnt >= rt.max_count)
    for bcol, ocol in ((2, 3), (4, 5)):
        buf = arr[:, bcol]
        off = arr[:, ocol].astype(np.int64) + base[buf]
        bad |= (off < 0) | (off + cnt > size[buf]) | (off > INT16_MAX)
    if bad.any():
        j = int(np.argmax(bad))
        raise TopofinderError(f"MSCCL lowering: internal error, rank {prog.u}'s instruction "
                              f"{arr[j, :8].tolist()} breaks the parser's count or offset "
                              "ranges")


_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                          "\r": "&#13;", "\n": "&#10;", "\t": "&#09;"})


def _open_tag(tag: str, attrs: dict, indent: int, empty: bool = False) -> str:
    """One element's start tag on its own indented line (escaped as ElementTree does)."""
    body = " ".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in attrs.items())
    return f"{' ' * indent}<{tag} {body}{' /' if empty else ''}>\n"


def _emit(schedule, progs, k, protocol, name, rt, inplace, min_bytes, max_bytes,
          extra=None, layout: PieceLayout | None = None) -> str:
    """The XML text, written rank by rank as lines (no element tree is held: memory is one
    rank's lines plus the text). An allreduce's ``layout`` rides on its gpus: ``base`` and
    ``stride`` of each shard (one short attribute each: the parser caps values at 254
    characters)."""
    topo, n, p = schedule.topology, schedule.topology.n, schedule.shard_chunks
    coll = schedule.collective
    kp, lanes = k * p, _lane_count(progs)
    if max_bytes is None:
        max_b = "0" if rt.max_bytes_zero_unbounded else str(1 << 62)
    else:
        max_b = str(max_bytes)
    head = _open_tag("algo", {
        "name": name or f"topofinder_{coll}_{topo.expr}"[:200], "proto": protocol,
        "nchannels": k * lanes, "nchunksperloop": n * kp, "ngpus": n,
        "coll": rt.colls[coll], "inplace": "1" if inplace else "0",
        "outofplace": "0" if inplace else "1", "minBytes": min_bytes, "maxBytes": max_b,
        "topology": topo.expr, "shard_chunks": p, "num_steps": schedule.num_steps,
        "reduce_scatter_steps": schedule.reduce_steps,
        "layout": "channel" if coll == Collective.ALLREDUCE else "shard", **(extra or {})},
        0, empty=not progs)
    sizes = {"i_chunks": kp if coll == Collective.ALLGATHER else n * kp,
             "o_chunks": kp if coll == Collective.REDUCE_SCATTER else n * kp}
    parts = [head]
    for prog in progs:
        gpu = {"id": prog.u, **sizes, "s_chunks": k * prog.scratch}
        if topo.labels is not None:
            gpu["label"] = topo.labels[prog.u]
        if coll == Collective.ALLREDUCE:
            gpu["base"], gpu["stride"] = layout.base[prog.u], layout.stride[prog.u]
        parts.append(_open_tag("gpu", gpu, 1, empty=not prog.emitted()))
        parts.append("".join(_rank_lines(prog, k, lanes,
                                         lambda j: channel_shift(coll, n, p, j))))
        if prog.emitted():
            parts.append(" </gpu>\n")
    if progs:
        parts.append("</algo>\n")
    return "".join(parts)


_STEP = ('   <step s="%d" type="{}" srcbuf="{}" srcoff="%d" dstbuf="{}" dstoff="%d" '
         'cnt="%d" depid="%d" deps="%d" hasdep="%d" t="%d" />\n')
#: one step line per (type, source buffer, destination buffer), indexed (type·3 + src)·3 + dst
_STEP_LINES = [_STEP.format(kind, sb, db) for kind in _KINDS for sb in _BUFS for db in _BUFS]
_NOP = ('   <step s="%d" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" '
        'depid="%d" deps="%d" hasdep="0" t="%d" />\n')


def _step_table(prog: _Prog):
    """A resolved rank's instructions in threadblock order as arrays: (rows of the recorded
    fields, the step number of each, its last dependency as (threadblock, step number) or
    -1, its hasdep flag, the first row of each threadblock, and {row: [(threadblock, step
    number) of the dependencies its nops carry]})."""
    rows = prog.arr[prog.order].astype(np.int64)
    m, counts, start = rows.shape[0], prog.tb_len, prog.tb_start
    nd = prog.steps[prog.order]
    done = np.cumsum(nd)
    step = done - 1 - np.repeat(np.r_[done - nd, 0][start], counts)
    at = np.empty(m, np.int64)
    at[prog.order] = np.arange(m)
    dep_tb, dep_step, nops = np.full(m, -1), np.full(m, -1), {}
    dj, db, di = prog.deps
    target = step[start[db] + di]
    last = np.r_[dj[1:] != dj[:-1], True] if dj.size else np.zeros(0, bool)
    dep_tb[at[dj[last]]], dep_step[at[dj[last]]] = db[last], target[last]
    for e in np.flatnonzero(~last).tolist():
        nops.setdefault(int(at[dj[e]]), []).append((int(db[e]), int(target[e])))
    return rows, step, dep_tb, dep_step, prog.marked[prog.order].astype(np.int64), start, nops


def _rank_lines(prog: _Prog, k: int, lanes: int, shift):
    """The ``<tb>`` and ``<step>`` lines of one rank, instance by instance (extra
    dependencies as ``nop`` steps before their instruction), formatted from arrays."""
    used = prog.emitted()
    ntb = len(used)
    tid = np.zeros(len(prog.tb_peer), np.int64)
    tid[used] = np.arange(ntb)
    rows, step, dep_tb, dep_step, flag, start, nops = _step_table(prog)
    line = (rows[:, 1] * 3 + rows[:, 2]) * 3 + rows[:, 4]
    for j in range(k):
        base = np.array([shift(j), shift(j), j * prog.scratch])
        has = dep_tb >= 0
        cols = np.stack([step, rows[:, 3] + base[rows[:, 2]], rows[:, 5] + base[rows[:, 4]],
                         rows[:, 6], np.where(has, j * ntb + tid[dep_tb], -1),
                         np.where(has, dep_step, -1), flag, rows[:, 7]], axis=1)
        lines = [_STEP_LINES[c] % tuple(r) for c, r in zip(line.tolist(), cols.tolist())]
        for q, targets in nops.items():
            first, t = int(step[q]) - len(targets), int(rows[q, 7])
            lines[q] = "".join(_NOP % (first + x, j * ntb + tid[b], si, t)
                               for x, (b, si) in enumerate(targets)) + lines[q]
        for b in used:
            kind, peer = prog.tb_peer[b]
            yield _open_tag("tb", {"id": j * ntb + tid[b], "send": peer if kind == "send" else -1,
                                   "recv": peer if kind == "recv" else -1,
                                   "chan": j * lanes + prog.lane[b]}, 2,
                            empty=not prog.tb_len[b])
            if prog.tb_len[b]:
                yield "".join(lines[start[b]:start[b] + prog.tb_len[b]])
                yield "  </tb>\n"


def instruction_counts(text: str) -> dict:
    """{"max": most steps (nops included) in one threadblock, "per_gpu": {gpu: [steps per
    tb]}} of an MSCCL XML."""
    algo = parse(text)
    per = {g.id: [len(tb.steps) for tb in sorted(g.tbs, key=lambda x: x.id)] for g in algo.gpus}
    return {"max": max((max(x, default=0) for x in per.values()), default=0), "per_gpu": per}


# ---- re-import ------------------------------------------------------------------------------
def parse_msccl_xml(text: str) -> dict:
    """Recover the step schedule an XML from :func:`to_msccl_xml` carries, by executing it
    (unbounded buffers) and reading which pieces cross which connection at which step ``t``;
    checks that the program computes its collective and that every channel carries the same
    sends. Returns {"collective", "topology", "num_nodes", "shard_chunks", "channels",
    "protocol", "reduce_scatter_steps", "sends": (S, 6) array (t, v, lo, hi, u, w), sorted,
    consecutive chunks of one (t, v, u, w) merged into one row, "labels" (the gpus' ``label``
    attributes or None), "physical" (the ``physical`` attribute of an `export --relabel` file,
    or None)}."""
    algo = parse(text)
    a = algo.attrs
    try:
        n, p = algo.ngpus, int(a["shard_chunks"])
        layout = a.get("layout", "shard")
        k = algo.nchunksperloop // (n * p)          # instances; each on nchannels/k lanes
        lanes = algo.nchannels // k
    except (KeyError, ValueError, ZeroDivisionError):
        raise TopofinderError("MSCCL XML lacks topofinder's shard_chunks attribute") from None
    run = execute(algo, capacity=1 << 40, inplace=algo.inplace and not algo.outofplace,
                  record=True)
    gpus = sorted(algo.gpus, key=lambda g: g.id)        # (attributes kept by the stream parse)
    sends = _sent_rows(run["transfers"], n, p, k, lanes,
                       _piece_at(gpus, n, p) if layout == "channel" else None)
    names = {g.id: g.attrs.get("label") for g in gpus}
    labels = tuple(names.get(i) or str(i) for i in range(n)) if any(names.values()) else None
    try:
        physical = [int(x) for x in a["physical"].split()] if a.get("physical") else None
    except ValueError:
        raise TopofinderError("MSCCL XML: the physical attribute is not a list of node ids") \
            from None
    return {"collective": algo.collective, "topology": a.get("topology"), "num_nodes": n,
            "shard_chunks": p, "channels": k, "protocol": algo.proto,
            "reduce_scatter_steps": int(a.get("reduce_scatter_steps", 0)), "sends": sends,
            "labels": labels, "physical": physical}


def _sent_rows(tr: np.ndarray, n: int, p: int, k: int, lanes: int, piece_at) -> np.ndarray:
    """The send rows (t, v, lo, hi, u, w), sorted, of recorded transfers (rows src, dst,
    chan, t, element; ``piece_at``: the allreduce layout's inverse, None for the shard
    layout), chunks c of one (t, v, u, w) merged where consecutive; TopofinderError unless
    every channel carries its own instance's pieces and all instances the same sends."""
    u, w, chan, t, elem = (tr[:, i] for i in range(5))
    if piece_at is not None:
        j, rest = np.divmod(elem, n * p)
        v, c = np.divmod(piece_at[rest], p)
    else:
        v, rest = np.divmod(elem, k * p)
        j, c = np.divmod(rest, p)
    bad = np.flatnonzero(j != chan // lanes)
    if bad.size:
        raise TopofinderError(f"MSCCL XML: channel {chan[bad[0]]} carries a piece of instance "
                              f"{j[bad[0]]}")
    rows = np.unique(np.column_stack([j, t, v, u, w, c]), axis=0)
    per = [rows[rows[:, 0] == x, 1:] for x in range(k)]
    if any(x.shape != per[0].shape or (x != per[0]).any() for x in per[1:]):
        raise TopofinderError("MSCCL XML: the channels do not carry the same schedule")
    r = per[0]                                  # (t, v, u, w, c), sorted
    if not r.shape[0]:
        return np.zeros((0, 6), np.int64)
    brk = np.r_[True, (r[1:, :4] != r[:-1, :4]).any(axis=1) | (r[1:, 4] != r[:-1, 4] + 1)]
    start = np.flatnonzero(brk)
    end = np.r_[start[1:], r.shape[0]] - 1
    sends = np.column_stack([r[start, 0], r[start, 1], r[start, 4], r[end, 4] + 1,
                             r[start, 2], r[start, 3]]).astype(np.int64)
    return sends[np.lexsort(sends.T[::-1])]


def _piece_at(gpus: list, n: int, p: int) -> np.ndarray:
    """For each offset of an allreduce instance, v·P + c of the piece there, from the gpus'
    (in id order) ``base`` and ``stride`` attributes (identity order when none has them);
    TopofinderError unless they place the N·P pieces on distinct offsets of [0, N·P)."""
    try:
        if all("base" not in g.attrs and "stride" not in g.attrs for g in gpus):
            layout = shard_layout(n, p, 1)
        else:
            layout = PieceLayout(np.array([int(g.attrs["base"]) for g in gpus], np.int64),
                                 np.array([int(g.attrs["stride"]) for g in gpus], np.int64),
                                 p, "xml")
        table = layout.table()
    except (KeyError, ValueError):
        table = None
    if table is None or table.shape[0] != n or table.min(initial=0) < 0 or \
            table.max(initial=0) >= n * p or np.unique(table).size != n * p:
        raise TopofinderError("MSCCL XML: the gpus' base and stride attributes do not place "
                              "every piece once")
    return layout.inverse(n * p)


def schedule_from_xml(text: str, topology: Topology) -> StepSchedule:
    """The step schedule an XML from :func:`to_msccl_xml` encodes, on ``topology``."""
    doc = parse_msccl_xml(text)
    if doc["num_nodes"] != topology.n:
        raise TopofinderError(f"the XML is for {doc['num_nodes']} ranks, {topology.expr} has "
                              f"{topology.n} nodes")
    return StepSchedule(topology, doc["shard_chunks"], doc["sends"],
                        collective=doc["collective"],
                        reduce_steps=doc["reduce_scatter_steps"]
                        if doc["collective"] == Collective.ALLREDUCE else 0)


def trees_as_steps(trees) -> StepSchedule:
    """A tree-flow schedule (paper 002) as the step schedule MSCCL executes: P = lcm of the
    weight denominators, tree i of root r carries the next weight·P chunks of r's shard.
    Allgather out-trees send every edge (u, w) at step depth(w); reduce-scatter in-trees send
    u's partial to its parent at step H − depth(u) + 1 (H: the deepest tree), so every node
    has its children's partials first; allreduce (``reduce_scatter`` and ``allgather``
    trees) runs the first then the second, sharing P. (The runtime pipelines these sends;
    the steps only fix the order.)"""
    phases = [trees.reduce_scatter, trees.allgather] if hasattr(trees, Collective.ALLGATHER) \
        else [trees]
    every = [t for ph in phases for t in ph.trees]
    p = lcm(*[Fraction(t.weight).denominator for t in every]) if every else 1
    rows, heights = [], []
    for ph in phases:
        inward = ph.collective == Collective.REDUCE_SCATTER
        part = _tree_rows(ph.trees, p, inward)
        height, offset = max((r[0] for r in part), default=0), sum(heights)
        rows += [((height - r[0] + 1 if inward else r[0]) + offset, *r[1:]) for r in part]
        heights.append(height)
    coll = Collective.ALLREDUCE if len(phases) == 2 else phases[0].collective
    return StepSchedule(phases[0].topology, p, np.array(rows, np.int64).reshape(-1, 6),
                        collective=coll, method=phases[-1].method or "trees",
                        reduce_steps=heights[0] if coll == Collective.ALLREDUCE else 0)


def _tree_rows(trees, p: int, inward: bool) -> list:
    """(depth, root, lo, hi, u, w) per tree edge; depth of the edge's far end from the root
    (out-trees: w; in-trees, edges child → parent: u)."""
    nxt = defaultdict(int)
    rows = []
    for t in trees:
        size = int(Fraction(t.weight) * p)
        lo = nxt[t.root]
        nxt[t.root] += size
        children = defaultdict(list)
        for u, w in t.edges:
            children[w if inward else u].append((u, w))
        frontier, depth = [t.root], 0
        while frontier:
            depth += 1
            new = []
            for x in frontier:
                for u, w in children[x]:
                    rows.append((depth, t.root, lo, lo + size, u, w))
                    new.append(u if inward else w)
            frontier = new
    return rows
