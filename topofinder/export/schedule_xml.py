"""MSCCL XML for step schedules (paper 001 §7, paper 002 §6.1): writer, limits and re-import.

The compilers of both papers lower a mathematical schedule to per-GPU *threadblocks*, each an
ordered list of send / receive / reduce / copy instructions, in the XML the MSCCL interpreter
runs. :func:`to_msccl_xml` does this for a :class:`~topofinder.model.schedule.StepSchedule`:

The lowering runs as named passes, each a function: layout (:func:`layout_for`, module
:mod:`topofinder.export.xml_layout`, and :func:`_step_messages` ordering a step's pieces by
where they sit), threadblock/channel
placement (:func:`place_threadblocks`; channels are instances written by :func:`_emit`),
receive places (:func:`_receive_places`), consolidation (:func:`_consolidate_sends`,
:func:`_emit_receives`) and staging (:func:`_stage_parts`). These record
each rank's instructions once, on threadblock selectors; :func:`_resolve` then places
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
  (:meth:`_Prog._candidates`); a clock does not depend on which candidates are chosen, so
  only the clocks of waited threadblocks are computed (:func:`_waited_clocks`) and the
  choice is a prefix maximum per threadblock (:func:`_choose_deps`).
- Cost: the lowering passes take a whole schedule step at a time as arrays of place codes
  (4·offset + buffer code; ``loc``: where each rank holds each piece), never a piece at a
  time in Python; threadblock placement, the dependency candidates (their placement-free
  part once per lowering, shared by the one-lane and laned resolves), lane cuts and the
  parser's count and offset ranges (:func:`_check_ranges`) are array operations; the
  vector-clock rule loops (on packed integers, 64 ranks at a time) only over the
  instructions of waited threadblocks that have candidates, the rest is arrays; the
  allgather phase's instruction bounds are memoised per layout, so the API's early check
  and :func:`check_fits` share them, and an allreduce's layout pass per schedule, so
  instances and the interleaved instance share it; the XML is written as lines rank by
  rank from arrays, never as an element tree, and not parsed again (its shape comes from
  the same arrays, ``shape``; ``msccl_check`` is the independent check, used by the
  tests).
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

import hashlib
import weakref
from bisect import bisect_right
from collections import defaultdict
from fractions import Fraction
from itertools import chain
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
_KINDS = ("s", "r", "rrc", "cpy")
_KIND_CODE = {kind: i for i, kind in enumerate(_KINDS)}
_BUFS = "ios"
_SLOT = 1 << 20                 # a slot (step t, run r) as the integer t·_SLOT + r
_NF = 13                        # recorded fields per instruction (:meth:`_Prog.add`)


class _Prog:
    """One rank's channel-0 program. The lowering records its instructions in order
    (:meth:`add`), each on a threadblock *selector*: a connection (send to / receive from a
    peer) with the instruction's slot, the local threadblock, or step t's staging one.
    :func:`_resolve` then places them on threadblocks for given lanes and computes their
    dependencies, so one lowering serves the one-lane and the laned programs."""

    def __init__(self, u: int, out_peers, in_peers, inplace: bool, coll: str, piece_count: int):
        self.u = u
        self.out_peers, self.in_peers = list(out_peers), list(in_peers)
        self.arr, self.scratch, self.conflicts = np.zeros((0, _NF), np.int32), 0, None
        self.inplace, self.coll, self.kp = inplace, coll, piece_count

    def load(self, rows: np.ndarray, scratch: int) -> None:
        """Take the recorded instructions, in order: per row the selector (send to peer w:
        2w, receive from peer x: 2x + 1, the local threadblock: −1, step t's staging one:
        −2 − t), type code, source (buffer code, offset), destination, count, step t, run
        r of the step's message (slot (t, r)), the place read and the place written
        (buffer code −1: none); and the scratch pieces in use."""
        self.arr, self.scratch, self.conflicts = rows, scratch, None

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
        idx[order] = _in_runs(counts)
        self.order, self.tb_len, self.tb_start = order, counts, np.cumsum(counts) - counts
        return tb, idx

    def _events(self, rows: np.ndarray, buf: np.ndarray, off: np.ndarray, cnt: np.ndarray):
        """(instruction, piece index k, cell) of the ``cnt`` pieces each row touches."""
        rep = cnt[rows]
        j = np.repeat(rows, rep)
        k = _in_runs(rep)
        return j, k, np.repeat(self._cells(buf[rows], off[rows]), rep) + 3 * k

    def _conflicts(self):
        """What each instruction must follow, whatever the placement: (instruction,
        instruction it follows, order key) arrays — the last writer of each piece read; in
        place also of each piece written the last writer and the readers since. Out of place
        every write goes to a place nothing touched before (the input is never written,
        scratch is fresh, an output place is written at its piece's first arrival), so
        readers are tracked in place only, and a write elsewhere is refused. Computed once
        per lowering (one-lane and laned resolves share it)."""
        if self.conflicts is not None:
            return self.conflicts
        rec = self.arr.astype(np.int64)
        cnt = rec[:, 6]
        rj, rk, rc = self._events(np.flatnonzero(rec[:, 9] >= 0), rec[:, 9], rec[:, 10], cnt)
        wj, wk, wc = self._events(np.flatnonzero(rec[:, 11] >= 0), rec[:, 11], rec[:, 12], cnt)
        isw = np.r_[np.zeros(rj.size, bool), np.ones(wj.size, bool)]
        j, k, cell = np.r_[rj, wj], np.r_[rk, wk], np.r_[rc, wc]
        ev = np.argsort((cell * (len(rec) + 1) + j) * 2 + isw)      # (cell, j, isw): unique
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
        self.conflicts = cj, cw, ck
        return self.conflicts

    def _candidates(self, tb: np.ndarray, idx: np.ndarray):
        """Per instruction, the (threadblock, index) it must wait for, as arrays sorted by
        instruction then by the order :func:`_resolve` tries them: of what it must follow
        (:meth:`_conflicts`), on other threadblocks, the last instruction per threadblock."""
        cj, cw, ck = self._conflicts()
        cb, ci = tb[cw], idx[cw]
        keep = cb != tb[cj]
        cj, cb, ci, ck = cj[keep], cb[keep], ci[keep], ck[keep]
        g = np.argsort(cj * (len(self.tb_peer) + 1) + cb, kind="stable")
        cj, cb, ci, ck = cj[g], cb[g], ci[g], ck[g]
        if not cj.size:
            return cj, cb, ci
        head = np.flatnonzero(np.r_[True, (cj[1:] != cj[:-1]) | (cb[1:] != cb[:-1])])
        cj, cb = cj[head], cb[head]
        ci, ck = np.maximum.reduceat(ci, head), np.minimum.reduceat(ck, head)
        g = np.argsort((cj << 42) | ck, kind="stable")
        return cj[g], cb[g], ci[g]

    def take(self, tb: np.ndarray, deps) -> None:
        """Set the resolution (:func:`_resolve`): ``tb_of`` (each instruction's threadblock),
        ``deps`` (instruction, threadblock, index) arrays, by instruction then in the order
        written, ``marked`` (per instruction: some instruction depends on it, hasdep) and
        ``steps`` (per instruction: XML steps, nops included)."""
        self.tb_of, self.deps = tb, deps
        dj, db, di = deps
        self.marked = np.zeros(len(tb), bool)
        self.marked[self.order[self.tb_start[db] + di]] = True
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


def _resolve(progs: list, lanes: dict | None = None, batch: int = 64,
             check=None) -> str | None:
    """Place each program's recorded instructions on threadblocks for ``lanes``
    (:meth:`_Prog._place`) and compute their dependencies: an instruction waits for the
    candidates (:meth:`_Prog._candidates`) its vector clock does not already imply, tried
    by decreasing clock sum (:func:`_choose_deps`, on ``batch`` ranks side by side, their
    instructions and threadblocks numbered on across ranks); :meth:`_Prog.take` keeps it.
    ``check``: called on each resolved batch; its first answer other than None stops the
    resolve (the later ranks keep their previous resolution) and is returned."""
    for lo in range(0, len(progs), batch):
        part, placed = progs[lo:lo + batch], []
        for prog in part:
            tb, idx = prog._place(lanes or {})
            placed.append((tb, idx, *prog._candidates(tb, idx)))
        sizes = np.array([p[0].size for p in placed])
        ntbs = np.array([len(prog.tb_peer) for prog in part])
        j0, b0 = np.cumsum(sizes) - sizes, np.cumsum(ntbs) - ntbs
        dj, db, di = _choose_deps(np.concatenate([p[0] + b for p, b in zip(placed, b0)]),
                                  np.concatenate([p[1] for p in placed]),
                                  np.concatenate([p[2] + j for p, j in zip(placed, j0)]),
                                  np.concatenate([p[3] + b for p, b in zip(placed, b0)]),
                                  np.concatenate([p[4] for p in placed]), np.repeat(b0, ntbs))
        cut = np.searchsorted(dj, np.r_[j0, sizes.sum()])
        for prog, p, j, b, a, e in zip(part, placed, j0, b0, cut[:-1], cut[1:]):
            prog.take(p[0], (dj[a:e] - j, db[a:e] - b, di[a:e]))
        problem = None if check is None else check(part)
        if problem is not None:
            return problem
    return None


def _choose_deps(tb: np.ndarray, idx: np.ndarray, cj: np.ndarray, cb: np.ndarray,
                 ci: np.ndarray, first: np.ndarray):
    """The dependencies the vector-clock rule chooses from the candidates ``cj``, ``cb``,
    ``ci`` (:meth:`_Prog._candidates`; ``tb``, ``idx``: each instruction's threadblock and
    index; ``first``: per threadblock, the first of its rank's). An instruction's clock (per
    threadblock, how many of its instructions are known done) is the entry-wise maximum of
    its threadblock's previous clock and its candidates' clocks, whichever are chosen (a
    skipped one is implied), and only threadblocks some candidate lies on carry entries
    (:func:`_waited_clocks`). So candidate (b, i) of an instruction on threadblock a is
    chosen iff i is at least entry b of every clock a joined before it — its earlier
    instructions' candidates and its own tried earlier, by decreasing clock sum, stably: a
    prefix maximum per threadblock. Returns (instruction, threadblock, index) arrays, by
    instruction then in the order tried."""
    if not cj.size:
        return cj, cb, ci
    ta = tb[cj]
    waited = np.zeros(first.size, np.int64)
    waited[cb] = 1
    seen = np.cumsum(waited)
    col = seen - 1 - (seen - waited)[first]         # a waited threadblock's clock column
    nw, wb, inner = int(col[cb].max()) + 1, col[cb], waited[ta] > 0
    keys, rows = _waited_clocks(nw, cj[inner], ta[inner], idx[cj[inner]], cb[inner],
                                ci[inner], col)
    at = _last_at(keys, cb, ci)
    clock = np.zeros((cj.size, nw), np.int64)
    clock[at >= 0] = rows[at[at >= 0]]
    clock[np.arange(cj.size), wb] = ci + 1
    o = np.lexsort((-clock.sum(1), cj, ta))
    new = np.r_[True, ta[o][1:] != ta[o][:-1]]
    lift = np.cumsum(new) * (int(clock.max()) + 1)
    seen = clock[o]
    seen += lift[:, None]
    np.maximum.accumulate(seen, axis=0, out=seen)   # per threadblock a, the clocks so far
    e = np.arange(o.size)
    before = seen[e - 1, wb[o]] - lift[e - 1]
    before[new] = 0
    pick = o[ci[o] >= before]
    pick = pick[np.argsort(cj[pick], kind="stable")]
    return cj[pick], cb[pick], ci[pick]


def _waited_clocks(nw: int, cj, ta, x, cb, ci, col):
    """The clocks of the instructions on waited threadblocks that have candidates (per
    candidate in record order: instruction ``cj`` at index ``x`` on threadblock ``ta``, its
    candidate (``cb``, ``ci``); ``col``: per threadblock, its entry among its rank's ``nw``).
    Each candidate is one node of a chain per threadblock: its clock is the entry-wise
    maximum of the previous node's (own entry raised to x + 1) and the candidate's (the last
    instruction's clock on ``cb`` at index ≤ ``ci``, entry cb raised to ci + 1); a clock is
    packed in one integer, a field of ``width`` bits with a guard bit per entry (maximum by
    guard-bit subtraction). Returns keys threadblock·2^32 + index (ascending) and the
    instructions' clocks (rows of ``nw`` entries)."""
    g = cj.size
    if not g:
        return cj, np.zeros((0, nw), np.int64)
    width = 16 << int(max(int(x.max(initial=0)), int(ci.max(initial=0))) + 2 >= 1 << 15)
    last = np.r_[cj[1:] != cj[:-1], True]           # an instruction's last node: its clock
    o = np.lexsort((np.arange(g), ta))              # nodes per threadblock, in order
    first = np.r_[True, ta[o][1:] != ta[o][:-1]]
    prev = np.r_[g, o[:-1]]
    prev[first] = g                                 # node g: the empty clock
    prev = prev[np.argsort(o)]
    step = np.where(prev == g, x + 1, x - x[np.minimum(prev, g - 1)])
    step[~np.r_[True, cj[1:] != cj[:-1]]] = 0       # a further candidate of one instruction
    fin = np.flatnonzero(last)
    fin = fin[np.lexsort((x[fin], ta[fin]))]
    keys = ta[fin] * (1 << 32) + x[fin]
    at = _last_at(keys, cb, ci)
    hit = at >= 0
    look = np.where(hit, fin[at], g)
    lift = np.where(hit, ci - x[look % g], ci + 1)
    shift = (width * col[ta]).tolist(), (width * col[cb]).tolist()
    own = [s << w for s, w in zip(step.tolist(), shift[0])]
    rise = [s << w for s, w in zip(lift.tolist(), shift[1])]
    guard = sum(1 << (width * b + width - 1) for b in range(nw))
    top = width - 1
    clocks = [0] * (g + 1)
    for n, (p, dp, q, dq) in enumerate(zip(prev.tolist(), own, look.tolist(), rise)):
        u, v = clocks[p] + dp, clocks[q] + dq
        m = ((u | guard) - v) & guard
        clocks[n] = v ^ ((u ^ v) & (m - (m >> top)))
    nbytes = width // 8 * nw
    packed = b"".join(clocks[n].to_bytes(nbytes, "little") for n in fin.tolist())
    return keys, np.frombuffer(packed, f"<u{width // 8}").reshape(-1, nw).astype(np.int64)


def _last_at(keys: np.ndarray, b: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Per (b, i), the position in ``keys`` (threadblock·2^32 + index, ascending) of the
    last key on threadblock b at index ≤ i, −1 if none."""
    at = np.searchsorted(keys, b * (1 << 32) + i, side="right") - 1
    hit = at >= 0
    hit[hit] = keys[at[hit]] >> 32 == b[hit]
    return np.where(hit, at, -1)


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
               stage: bool | None = None, interleave: bool | None = False,
               advise: bool = True) -> PieceLayout:
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
    (None: the instances' refusal if neither passes). ``advise``: name the allreduce's
    two-program split in an elements refusal when it applies (checking both phases: left
    out where the refusal only chooses the channel mode)."""
    if interleave is None and channels > 1:
        try:
            return check_fits(schedule, channels, runtime, max_steps, collective, stage, False,
                              advise=False)
        except TopofinderError:
            try:
                return check_fits(schedule, channels, runtime, max_steps, collective, stage,
                                  True)
            except TopofinderError:
                return check_fits(schedule, channels, runtime, max_steps, collective, stage,
                                  False, advise)
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
        direct, staged = _instruction_bounds(schedule, layout.table(), stage)
        per_rank = _rank_need(direct, staged, n, stage)
    else:
        layout, direct, staged, per_rank = _least_layout(schedule, stage)
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
            if advise and coll == Collective.ALLREDUCE and not collective else ""
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
    return _least_layout(schedule, stage)[0]


_LEAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # schedule → {stage: best}


def _least_layout(schedule: StepSchedule, stage):
    """Layout pass of an allreduce: of the candidate layouts, the one whose fullest rank
    needs the fewest instructions by :func:`_instruction_bounds` (the first on ties); returns
    it with its bounds (direct, staged) and per-rank need. Memoised per schedule and
    ``stage``: the bounds do not depend on the channels, so instances and the interleaved
    instance (:func:`check_fits`, :func:`to_msccl_xml`) share them."""
    memo = _LEAST.setdefault(schedule, {})
    if stage in memo:
        return memo[stage]
    best = None
    prep = _bound_prep(schedule)
    for layout in allreduce_layouts(schedule.topology, schedule.shard_chunks):
        direct, staged = _instruction_bounds(schedule, layout.table(), stage, prep)
        per_rank = _rank_need(direct, staged, schedule.topology.n, stage)
        if best is None or per_rank.max() < best[3].max():
            best = (layout, direct, staged, per_rank)
    memo[stage] = best
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


def _instruction_bounds(schedule: StepSchedule, table: np.ndarray, stage: bool | None,
                        prep=None):
    """Lower bounds on instructions per threadblock, from the send rows: (direct, staged),
    pieces at ``table[v, c]`` (the layout's channel-0 offsets).
    ``direct[u·N + w]``: the send threadblock u→w without staging — one instruction per
    (link, step) and 71 pieces in a reduce phase (:func:`_reduce_bound`), per contiguous
    piece range and 71 pieces in the allgather phase (cnt < MSCCL_MAX_COUNT = 72).
    ``staged`` (None when nothing is staged or ``stage`` is False): the same with staged
    allgather messages (one send per block of 71 pieces), followed by the N·(steps+1) counts of
    each (rank, step)'s local threadblock, which copies every range of a multi-range message
    on both ends (paper 001 §7). ``prep``: :func:`_bound_prep` of the schedule, if known."""
    n, span = schedule.topology.n, schedule.num_steps + 1
    reduce_prep, phase = prep or _bound_prep(schedule)
    bound = _reduce_bound(reduce_prep, table, n)
    if phase is None:
        return bound, None
    direct, blocks, copies = _allgather_bounds(*phase, n, table, stage)
    if blocks is None:
        return bound + direct, None
    stage_tb = np.zeros((n, span), np.int64)
    first = _reduce_until(schedule)
    stage_tb[:, first:first + copies.shape[1]] = copies
    return bound + direct, np.concatenate([bound + blocks, stage_tb.ravel()])


def _bound_prep(schedule: StepSchedule):
    """What :func:`_instruction_bounds` needs that no layout changes: :func:`_reduce_prep`
    and the allgather phase's rows (steps counted from 1) with their digest, or None when
    that phase is empty."""
    until = _reduce_until(schedule)
    rows = schedule.sends[schedule.sends[:, 0] > until]
    phase = None
    if rows.shape[0]:
        rows = rows - np.array([until, 0, 0, 0, 0, 0], rows.dtype)
        phase = (rows, hashlib.sha1(np.ascontiguousarray(rows)).digest())
    return _reduce_prep(schedule, until), phase


_PHASE_MEMO: dict = {}      # the last few layouts' allgather-phase bounds (_allgather_bounds)


def _allgather_bounds(rows: np.ndarray, digest: bytes, n: int, table: np.ndarray, stage):
    """The allgather phase's part of :func:`_instruction_bounds` (``rows``: its sends, steps
    counted from 1; ``digest``: theirs): per link u·N + w the direct send instructions and,
    unless ``stage`` is False, the staged sends, and per (rank, phase step) the staging
    copies (else None, None). Memoised on rows and layout (four entries, one per candidate
    layout): the API's early check of an allgather and the writer's check of the
    collective share the work."""
    memo = (digest, n, table.tobytes(), stage is False)
    if memo in _PHASE_MEMO:
        return _PHASE_MEMO[memo]
    t, v, lo, hi, u, w = (rows[:, i] for i in range(6))
    span = int(t.max()) + 1
    row, start, end = _piece_ranges(v, lo, hi, table)
    key = (u[row] * n + w[row]) * span + t[row]
    order = _stable_order(key * (int(table.max()) + 1) + start)
    key, start, end = key[order], start[order], end[order]
    brk = np.ones(key.size, bool)
    brk[1:] = (key[1:] != key[:-1]) | (start[1:] != end[:-1])
    new = np.r_[True, key[1:] != key[:-1]]
    runs_kt, runs = key[new], np.bincount(np.cumsum(new) - 1, weights=brk)
    run_len = np.bincount(np.cumsum(brk) - 1, weights=end - start)
    direct = np.bincount(key[brk] // span, weights=np.ceil(run_len / _MAX_CNT_DEFAULT),
                         minlength=n * n).astype(np.int64)
    out = (direct, None, None)
    if stage is not False:
        pieces = np.bincount(np.cumsum(new) - 1, weights=end - start)
        blocks = np.ceil(pieces / _MAX_CNT_DEFAULT)
        extra = np.maximum(0, runs - blocks)
        lk, st = runs_kt // span, runs_kt % span
        copies = np.bincount(lk // n * span + st, weights=extra, minlength=n * span) + \
            np.bincount(lk % n * span + st, weights=extra, minlength=n * span)
        out = (direct, np.bincount(lk, weights=blocks, minlength=n * n).astype(np.int64),
               copies.astype(np.int64).reshape(n, span))
    if len(_PHASE_MEMO) >= 4:
        del _PHASE_MEMO[next(iter(_PHASE_MEMO))]
    _PHASE_MEMO[memo] = out
    return out


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
    c = lo[row] + _in_runs(rep)
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
    c = s[row, 2] + _in_runs(rep)
    t, v, u, w = s[row, 0], s[row, 1], s[row, 4], s[row, 5]
    piece = v * p + c
    at_w, at_u = w * (n * p) + piece, u * (n * p) + piece
    order = np.argsort((at_w * span + t) * n + u)
    first, last = np.zeros(row.size, bool), np.zeros(row.size, bool)
    new = np.r_[True, at_w[order][1:] != at_w[order][:-1]]
    first[order] = new
    last[order] = np.r_[new[1:], True]
    arrival = np.full(n * n * p, schedule.num_steps + 1, np.int64)
    arrival[at_w[order][new]] = t[order][new]          # (sorted by step within a place)
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
    wide = int(table.max()) + 1
    order = _stable_order((2 * msg + ~from_input) * wide + pos)
    msg, pos, inp = msg[order], pos[order], from_input[order]
    cur, fin = cur_input[order], final[order]
    brk = np.r_[True, (msg[1:] != msg[:-1]) | (inp[1:] != inp[:-1])]
    brk[1:] |= inp[1:] & ((pos[1:] != pos[:-1] + 1) | (cur[1:] != cur[:-1]) |
                          (fin[1:] != fin[:-1]))
    seg = np.cumsum(brk) - 1
    blocks = np.ceil(np.bincount(seg) / _MAX_CNT_DEFAULT)
    return np.bincount(msg[brk] // span, weights=blocks, minlength=n * n).astype(np.int64)


class _Lowering:
    """The state the lowering passes share, as arrays of place codes (4·offset + buffer code:
    i 0, o 1, s 2; −1: none): every rank's program (:class:`_Prog`), where each rank holds
    each piece v·P + c now (``loc``, N × N·P), how many reduce-phase sends of a rank's own
    chunk are still to arrive (``remaining``, N × P), each rank's scratch pieces in use
    (``scratch``) and instructions recorded (``count``, and ``blocks`` of (ranks, fields) in
    record order per rank)."""

    def __init__(self, schedule: StepSchedule, k: int, inplace: bool, max_cnt: int, stage,
                 layout: PieceLayout | None = None):
        self.n, self.p, self.coll = schedule.topology.n, schedule.shard_chunks, schedule.collective
        self.max_cnt, self.stage = max_cnt, stage
        self.table = (layout or layout_for(schedule, k, stage)).table()
        self.progs = place_threadblocks(schedule, inplace, k)
        self.reduce_until = _reduce_until(schedule)
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
        rows = np.concatenate([x for _, x in self.blocks] + [np.zeros((0, _NF), np.int32)])
        rows = rows[_stable_order(ranks)]
        ends = np.cumsum(np.bincount(ranks, minlength=self.n)).tolist()
        for prog, a, b in zip(self.progs, [0] + ends, ends):
            prog.load(rows[a:b], int(self.scratch[prog.u]))
        return self.progs


def _stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative int64 keys small enough to make
    key·size + position unique (an unstable sort of unique keys is faster)."""
    return np.argsort(key * key.size + np.arange(key.size))


def _split(code):
    """Place codes as (buffer code, offset) columns; a code < 0 is no place (−1, 0)."""
    code = np.asarray(code, np.int64)
    has = code >= 0
    return np.where(has, code & 3, -1), np.where(has, code >> 2, 0)


def _fields(m: int, tb, kind, src, dst, cnt, t, r, read, write) -> np.ndarray:
    """The recorded fields (:meth:`_Prog.load`) of m instructions, places as codes;
    scalars broadcast."""
    cols = [tb, kind, *_split(src), *_split(dst), cnt, t, r, *_split(read), *_split(write)]
    return np.column_stack([np.broadcast_to(np.asarray(x, np.int64), (m,)) for x in cols]
                           ).astype(np.int32).reshape(m, _NF)


def _in_runs(lengths: np.ndarray) -> np.ndarray:
    """Per item of consecutive runs of ``lengths`` items, its index in its run."""
    lengths = np.asarray(lengths, np.int64)
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _within(new: np.ndarray) -> np.ndarray:
    """Per item, its index in its group (a group starts where ``new``)."""
    pos = np.arange(new.size)
    return pos - np.maximum.accumulate(np.where(new, pos, 0))


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
    return brk | (_within(brk) % max_cnt == 0)


def place_threadblocks(schedule: StepSchedule, inplace: bool, k: int) -> list:
    """Threadblock placement pass: per rank, one send threadblock per out-neighbour, one
    receive threadblock per in-neighbour and a local one (instance 0; instance j repeats them
    on its own pieces when the XML is written). Lanes (:func:`_resolve` with
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
    """Channel-0 programs of every rank (module doc), recorded for :func:`_resolve`,
    pass by pass: layout and threadblock
    placement (:class:`_Lowering`), the initial data, then per schedule step the messages in
    layout order, their receive places, consolidation into instructions (staged through
    scratch with ``stage``: allgather-phase messages that are not one contiguous range on both
    ends are packed by copies before the send and unpacked after the receive, in a local
    threadblock per step), with the reduce phase's results moved to the output between the
    phases. ``max_steps``: stop (:class:`_TooBig`) once one rank's channel-0 program holds
    more instructions (so more XML steps), checked after every schedule step. ``layout``:
    where pieces sit (default :func:`layout_for`). Each pass works on the whole step's
    pieces as arrays."""
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
        msg = _step_messages(st, s[bounds[j]:bounds[j + 1]], t, reducing)
        _receive_places(st, msg, reducing)
        _consolidate_sends(st, msg, t, reducing)
        _emit_receives(st, msg, t)
        if max_steps is not None and st.count.max() > max_steps:
            raise _TooBig(f"rank {int(st.count.argmax())} would load more than {max_steps} "
                          f"steps by schedule step {t} of {schedule.num_steps}")
    if not started_ag:
        _finish_reduce(st)
    return st.programs()


def _initial_data(st: _Lowering, s: np.ndarray, inplace: bool) -> None:
    """Where every rank's input sits before step 1 (allgather: its shard, copied to the output
    unless in place); for reduce phases, the count of sends of each rank's own chunks."""
    n, p = st.n, st.p
    if st.coll == Collective.ALLGATHER:
        u = np.arange(n)
        own = u[:, None] * p + np.arange(p)[None, :]
        if inplace:
            st.loc[u[:, None], own] = 4 * st.table + 1
            return
        st.loc[u[:, None], own] = 4 * np.arange(p)[None, :]
        out = 4 * st.table[:, 0] + 1
        st.record(u, [u], _fields(n, -1, _KIND_CODE["cpy"], 0, out, p, 0, 0, 0, out))
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
    st.record(uu[head], [head], _fields(head.size, -1, _KIND_CODE["cpy"], a[head], b[head], cnt,
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
    ro = _stable_order(msg["w"] * n + msg["u"])
    w, pc = msg["w"][ro], msg["pc"][ro]
    go = _stable_order(w * (n * p) + pc)                       # by (receiver, piece)
    key = (w * (n * p) + pc)[go]
    first = np.r_[True, key[1:] != key[:-1]][:key.size]
    wg, pg = w[go], pc[go]
    held = st.loc[wg, pg]
    if reducing:
        own = pg // p == wg
        final = own & (st.remaining[wg, pg % p] == _within(first) + 1)
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
    for name, col in (("kind", np.where(cur >= 0, _KIND_CODE["rrc"], _KIND_CODE["r"])),
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
        head = np.where(msg["staged"], _within(lead) % st.max_cnt == 0, head)
    r = np.cumsum(head) - 1
    msg["r"] = r - r[np.maximum.accumulate(np.where(lead, np.arange(m), 0))]
    msg["head"] = head
    hs, ln, blk, q, qb, qat, qln = _stage_parts(st, msg, msg["src"], msg["u"], np.arange(m))
    src = np.where(blk >= 0, 4 * blk + 2, msg["src"][hs])
    one = np.ones(hs.size, np.int64)
    st.record(np.r_[msg["u"][hs], msg["u"][q]],
              [np.r_[hs, hs[qb]], np.r_[one, 0 * q], np.r_[hs, q]],
              np.concatenate([
                  _fields(hs.size, 2 * msg["w"][hs], _KIND_CODE["s"], src, src, ln, t,
                          msg["r"][hs], src, -1),
                  _fields(q.size, -2 - t, _KIND_CODE["cpy"], msg["src"][q],
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
    rrc = msg["kind"][hs] == _KIND_CODE["rrc"]
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
                  _fields(q.size, -2 - t, _KIND_CODE["cpy"], 4 * (blk[qb] + qat) + 2, dst[q],
                          qln, t, 0, 4 * (blk[qb] + qat) + 2, dst[q])]))
    within = _in_runs(qln)
    moved = np.repeat(q, qln) + within
    st.loc[msg["w"][moved], msg["pc"][moved]] = 4 * (np.repeat(blk[qb] + qat, qln) + within) + 2


def to_msccl_xml(schedule: StepSchedule, channels: int = 1, protocol: str = "Simple",
                 name: str | None = None, runtime: str = "msccl-executor",
                 inplace: bool = False, max_steps: int | None = None, min_bytes: int = 0,
                 max_bytes: int | None = None, stage: bool | None = None,
                 extra: dict | None = None, interleave: bool | None = None,
                 note=None, shape: dict | None = None) -> str:
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
    attribute (its host name). ``shape``: a dict the writer fills with the XML's shape as
    :func:`~topofinder.export.msccl_check.shape` counts it, from the arrays the text is
    written from. Refuses (TopofinderError, one line) anything the runtime cannot load."""
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
                                interleave=ways > 1, advise=len(ways_tried) == 1)
            progs = _lower_to_fit(schedule, k, inplace, rt, limit, stage, what, layout, ways,
                                  quick=len(ways_tried) > 1 and ways == 1)
        except TopofinderError as exc:
            refusal = refusal or exc
            continue
        if ways > 1 and interleave is None and note is not None:
            note(f"--channels {channels}: written as one instance whose links deal their "
                 f"messages in turn over {channels} channels, not as {channels} instances "
                 f"({_clause(refusal)}): the same sends, so the same (T_L, τ)")
        if shape is not None:
            shape.update(_shape(progs, k))
        return _emit(schedule, progs, k, protocol, name, rt, inplace, min_bytes, max_bytes,
                     extra, layout)
    if len(ways_tried) > 1:             # the instances' refusal, with its split advice
        check_fits(schedule, channels, runtime, limit, stage=stage)
    raise refusal


def _shape(progs, k: int) -> dict:
    """{"gpus", "threadblocks", "max_tbs_per_gpu", "max_steps_per_tb"} of the XML
    :func:`_emit` writes for ``progs`` (k instances of each rank's emitted threadblocks)."""
    per_tb = [prog.steps_per_tb() for prog in progs]
    return {"gpus": len(progs), "threadblocks": k * sum(map(len, per_tb)),
            "max_tbs_per_gpu": k * max(map(len, per_tb), default=0),
            "max_steps_per_tb": max((max(c, default=0) for c in per_tb), default=0)}


def _clause(refusal: TopofinderError) -> str:
    """The reason of one of this module's refusals ("what: reason; advice"), without the
    schedule it names or its advice."""
    return str(refusal).split(": ", 1)[-1].split("; ", 1)[0]


def _lower_to_fit(schedule: StepSchedule, k: int, inplace: bool, rt, limit: int, stage,
                  what: str, layout: PieceLayout, ways: int = 1, quick: bool = False) -> list:
    """Lower directly, then staged (unless ``stage`` fixes one), each resolved first on one
    lane per link; when a threadblock holds more than ``limit`` steps, or the program is
    interleaved over ``ways`` > 1 channels, resolve the same lowering on the lanes of
    :func:`assign_lanes` (aiming 1/8 below the limit since the new threadblocks'
    dependencies add nops, then 1/4; then 1/8, 1/4, 3/8 and 1/2 below it, each from the
    last laned program's own counts). The first that fits, else TopofinderError with the
    first problem met (on one lane: its step figure is what a larger limit needs).
    ``quick``: give up an attempt whose one-lane program loads more XML elements on some
    rank than the parser holds, as the auto channel mode does before it interleaves (lanes
    add threadblocks but may save nops, so this is a policy, said as such, not a proof that
    no lanes fit)."""
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
        _resolve(progs)
        problem = _fit_problem(progs, n, k, rt, limit)
        if problem is None and ways == 1:
            return progs
        crowded = max(_elements(prog, n, k) for prog in progs) if quick else 0
        if crowded >= rt.max_nodes:
            first = first or (f"on one lane per link a rank loads {crowded} XML elements, "
                              f"more than the {rt.max_nodes - 1} its parser holds (MAX_NODES), "
                              "and --channel-mode instances would try further lanes")
            continue
        first = first or problem
        laned = _fit_on_lanes(progs, n, k, rt, limit, ways)
        if laned is None:
            return progs
        first = first or laned
    raise TopofinderError(f"{what}: {first}")


def _fit_on_lanes(progs: list, n: int, k: int, rt, limit: int, ways: int) -> str | None:
    """Resolve one-lane ``progs`` on the lane plans :func:`_lower_to_fit` names, in turn, until
    one fits (None), else the first problem met (or, when no plan keeps every slot within
    the limit, that a single slot needs more). The second plan is cut from the one-lane
    counts like the first, so when it exists nothing reads the first plan's resolution: that
    one stops at its first failing batch of ranks (after its channel count is checked from
    the plan); every later plan is cut from the one before and is resolved whole."""
    budgets = (limit * 7 // 8, limit * 3 // 4)
    plans = assign_lanes(progs, budgets, ways)
    first = None
    for i, lanes in enumerate(chain(plans, _recut(progs, budgets + (limit * 5 // 8,
                                                                    limit // 2), ways))):
        if lanes is None:
            continue
        if i == 0 and plans[1] is not None:
            span = 1 + max((int(lane.max()) for _, lane in lanes.values()), default=0)
            problem = _lanes_problem(span, k, rt) or _resolve(
                progs, lanes, check=lambda part: _ranks_problem(part, n, k, rt, limit))
        else:
            _resolve(progs, lanes)
            problem = _fit_problem(progs, n, k, rt, limit)
        if problem is None:
            return None
        first = first or problem
    return first or (f"one (step, message run) slot of a link needs more than the {limit} "
                     "instructions a threadblock holds (MSCCL_MAX_NUM_STEPS)")


def _recut(progs: list, budgets, ways: int):
    """Lanes for each of ``budgets`` in turn, from the programs' resolution at the time
    (lazy: the last laned program's nops are a closer estimate of the next one's)."""
    for budget in budgets:
        yield assign_lanes(progs, (budget,), ways)[0]


def _lane_count(progs) -> int:
    """Lanes (channels per instance) the programs use."""
    return 1 + max((max(prog.lane) for prog in progs), default=0)


def _elements(prog: _Prog, n: int, k: int) -> int:
    """XML elements rank ``prog.u`` loads from a resolved program of ``k`` instances: the
    algo, every gpu, its threadblocks and their steps (nops included)."""
    counts = prog.steps_per_tb()
    return 1 + n + k * len(counts) + k * sum(counts)


def _fit_problem(progs, n: int, k: int, rt, limit: int) -> str | None:
    """Why the lowered programs do not fit the runtime (one clause), or None."""
    return _lanes_problem(_lane_count(progs), k, rt) or _ranks_problem(progs, n, k, rt, limit)


def _lanes_problem(lanes: int, k: int, rt) -> str | None:
    """Why ``lanes`` channel lanes of ``k`` instances exceed the runtime's channels, or None."""
    if k * lanes > rt.max_channels:
        return (f"spreading its links over {lanes} channel lanes × {k} instance(s) needs more "
                f"than the runtime's {rt.max_channels} channels; use fewer channels")
    return None


def _ranks_problem(progs, n: int, k: int, rt, limit: int) -> str | None:
    """Why some resolved rank program exceeds the runtime (the first in ``progs``), or
    None."""
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
        nodes = _elements(prog, n, k)
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
        fmts = list(map(_STEP_LINES.__getitem__, line.tolist()))     # a format per line
        for q, targets in nops.items():        # (nop lines, formatted, hold no "%")
            first, t = int(step[q]) - len(targets), int(rows[q, 7])
            fmts[q] = "".join(_NOP % (first + x, j * ntb + tid[b], si, t)
                              for x, (b, si) in enumerate(targets)) + fmts[q]
        vals = cols.ravel().tolist()
        for b in used:
            kind, peer = prog.tb_peer[b]
            yield _open_tag("tb", {"id": j * ntb + tid[b], "send": peer if kind == "send" else -1,
                                   "recv": peer if kind == "recv" else -1,
                                   "chan": j * lanes + prog.lane[b]}, 2,
                            empty=not prog.tb_len[b])
            if prog.tb_len[b]:
                a, e = int(start[b]), int(start[b] + prog.tb_len[b])
                yield "".join(fmts[a:e]) % tuple(vals[8 * a:8 * e])   # a threadblock at once
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
