"""The MSCCL XML execution model: an XML run the way the interpreter runs it.

:func:`execute` runs the XML the way the interpreter does, with every connection — one per
(sending gpu, receiving gpu, channel) — a FIFO holding at most ``capacity`` transmissions of one
piece (``cnt`` = 1; NCCL's Simple protocol buffers two at large sizes). Every threadblock
executes its steps in order; an instruction with ``cnt`` = c moves c pieces one by one, so a
send blocks while the receiver's FIFO is full and a receive while it is empty; ``depid``/``deps``
wait for the flag the depended-on threadblock sets when an instruction with ``hasdep="1"``
completes (as the kernel does: flag = that instruction's step). A receive must take a whole
message of its own ``cnt``.

Each threadblock is a sequential process and each connection has one writer and one reader, so
the run is a Kahn network: what it computes does not depend on the order threadblocks run
in, and bounding the FIFOs can only stop it (deadlock), never change a value. The model uses
that and runs twice, both event-driven (a threadblock runs again only when the FIFO, flag or
space it waits for changes):

- data (:class:`_DataRun`): unbounded FIFOs, one instruction at a time on whole array slices.
  Buffers hold value ids; an input value is (element, its rank), a reduction makes a new id
  with the union of the contributing ranks as a bitset (N bits), so copies, reductions and the
  final result are checked exactly: allgather (every rank holds every rank's input at its
  place), reduce-scatter and allreduce (every element is the reduction of all ranks'
  contributions of that element, each once). In-place runs alias the buffers as NCCL does;
  out-of-place runs fail on any write to the input. Intra-rank data races (two threadblocks
  touching a piece, one writing, with no chain of dependencies between them) are reported too:
  vector clocks over threadblocks, where waiting for ``deps`` orders the waiter only after the
  first flagged step at or after ``deps`` (all the flag guarantees).
- flow (:func:`_flow`): counts only — pieces in each FIFO at ``capacity``, each threadblock's
  instruction and pieces done, the flags — so it finds every deadlock the bounded buffers
  cause at a cost of a few integer operations per transmission.

When no threadblock can progress before all finish, :class:`MscclDeadlock` names the blocked
threadblocks and what each waits for.

The XML is read as a stream (expat, :func:`parse` takes text, bytes, a path or a binary

:func:`check` is the whole independent check: the parser rules of
:mod:`topofinder.export.msccl.rules` plus an execution at every capacity in every mode the
XML declares.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.msccl.limits import INT16_MAX, MscclCheckError, MscclDeadlock
from topofinder.export.msccl.parser import (
    BUFFERS, CNT, DEPID, DEPS, DSTBUF, DSTOFF, HASDEP, NOP, RECVS, SENDS, SRCBUF, SRCOFF, TYPE,
    TYPES, S, T, Algo, Gpu, StepLayout, algo_of, layout_of,
)
from topofinder.export.msccl.rules import check_limits, raise_first, step_rules
from topofinder.model.collectives import Collective

class _Values:
    """Value ids: ``id < n·ic`` is rank id // ic's input chunk id % ic; later ids are
    reductions, each with its element and the bitset (N bits in uint64 words) of the ranks
    it sums."""

    def __init__(self, n: int, ic: int, coll: str):
        self.n, self.ic, self.n0 = n, max(ic, 1), n * ic
        self.words = (n + 63) // 64
        self.allgather = coll == Collective.ALLGATHER
        self.elem = np.zeros(1024, np.int64)
        self.mask = np.zeros((1024, self.words), np.uint64)
        self.count = 0
        self.full = np.zeros(self.words, np.uint64)           # the bitset of all ranks
        self.full.view(np.uint8)[:(n + 7) // 8] = np.packbits(np.ones(n, np.uint8),
                                                              bitorder="little")

    def elems(self, ids: np.ndarray) -> np.ndarray:
        init = ids < self.n0
        out = np.where(init, ids if self.allgather else ids % self.ic, 0)
        out[~init] = self.elem[ids[~init] - self.n0]
        return out

    def masks(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros((len(ids), self.words), np.uint64)
        init = ids < self.n0
        r = ids[init] // self.ic
        out[init, r >> 6] = np.left_shift(np.uint64(1), (r & 63).astype(np.uint64))
        out[~init] = self.mask[ids[~init] - self.n0]
        return out

    def reduce(self, a: np.ndarray, b: np.ndarray, at) -> np.ndarray:
        """Ids of the sums a[k] + b[k]: same element, disjoint ranks (else MscclCheckError)."""
        ea, eb = self.elems(a), self.elems(b)
        if (ea != eb).any():
            k = int(np.argmax(ea != eb))
            raise MscclCheckError(f"{at()}: reduces element {ea[k]} with element {eb[k]}")
        ma, mb = self.masks(a), self.masks(b)
        both = ma & mb
        if both.any():
            k = int(np.argmax(both.any(axis=1)))
            raise MscclCheckError(f"{at()}: counts the contribution of rank(s) "
                                  f"{self.ranks(both[k])} to element {ea[k]} twice")
        k, first = len(a), self.count
        if first + k > len(self.elem):
            grow = max(2 * len(self.elem), first + k)
            self.elem = np.resize(self.elem, grow)
            self.mask = np.resize(self.mask, (grow, self.words))
        self.elem[first:first + k] = ea
        self.mask[first:first + k] = ma | mb
        self.count += k
        return np.arange(self.n0 + first, self.n0 + first + k)

    def is_full(self, ids: np.ndarray) -> np.ndarray:
        return (self.masks(ids) == self.full).all(axis=1)

    def ranks(self, row: np.ndarray) -> str:
        bits = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist()
        return ",".join(map(str, bits[:6])) + ("..." if len(bits) > 6 else "")

    def describe(self, vid: int) -> str:
        if vid < 0:
            return "nothing"
        one = np.array([vid])
        return f"element {self.elems(one)[0]} from rank(s) {self.ranks(self.masks(one)[0])}"


class _Mem:
    """One rank's buffers as one cell array (input, output, scratch; in place, the aliased
    buffer points into the other as NCCL defines), the value id in each cell, its last
    writer and, per threadblock, the epoch it last read the cell since that write."""

    def __init__(self, coll: str, g: Gpu, inplace: bool, ntbs: int, epoch_type):
        ic, oc, sc = g.i_chunks, g.o_chunks, g.s_chunks
        self.inplace, self.base = inplace, [0, ic, ic + oc]
        if inplace and coll == Collective.ALLGATHER:
            self.base[0] = ic + g.id * ic
        elif inplace and coll == Collective.REDUCE_SCATTER:
            self.base[1] = g.id * oc
        elif inplace:
            self.base[1] = 0
        size = ic + oc + sc
        self.val = np.full(size, -1, np.int64)
        self.val[self.base[0]:self.base[0] + ic] = np.arange(g.id * ic, (g.id + 1) * ic)
        self.wtb = np.full(size, -1, np.int64)
        self.wep = np.zeros(size, np.int64)
        self.readers = np.zeros((size, ntbs), epoch_type)

    def _ordered(self, sl: slice, tb: int, vc: np.ndarray, at, what: str, buf: int, off: int):
        """MscclCheckError unless every cell's last write by another tb is ordered before."""
        w = self.wtb[sl]
        bad = (w >= 0) & (w != tb) & (vc[np.maximum(w, 0)] < self.wep[sl])
        if bad.any():
            k = int(np.argmax(bad))
            raise MscclCheckError(f"{at()}: {what} {BUFFERS[buf]}[{off + k}] written by tb "
                                  f"{w[k]} with no dependency ordering the two (data race)")

    def read(self, buf: int, off: int, cnt: int, tb: int, epoch: int, vc, at) -> np.ndarray:
        sl = slice(self.base[buf] + off, self.base[buf] + off + cnt)
        vals = self.val[sl]
        if (vals < 0).any():
            raise MscclCheckError(f"{at()}: reads {BUFFERS[buf]}[{off + int(np.argmax(vals < 0))}]"
                                  ", which holds no data yet")
        self._ordered(sl, tb, vc, at, "reads", buf, off)
        self.readers[sl, tb] = epoch
        return vals.copy()

    def write(self, buf: int, off: int, vals: np.ndarray, tb: int, epoch: int, vc, at) -> None:
        sl = slice(self.base[buf] + off, self.base[buf] + off + len(vals))
        if not self.inplace and buf == 0:
            raise MscclCheckError(f"{at()}: writes the input buffer i[{off}] of an out-of-place "
                                  "run (NCCL's sendbuff is const)")
        self._ordered(sl, tb, vc, at, "overwrites", buf, off)
        late = self.readers[sl] > vc[None, :]
        late[:, tb] = False
        if late.any():
            k, rtb = (int(x) for x in np.argwhere(late)[0])
            raise MscclCheckError(f"{at()}: overwrites {BUFFERS[buf]}[{off + k}] while tb {rtb} "
                                  "may still read it (no dependency orders them: data race)")
        self.readers[sl] = 0
        self.wtb[sl], self.wep[sl], self.val[sl] = tb, epoch, vals


_RECV_CODES = frozenset(TYPES.index(x) for x in RECVS)
_SEND_CODES = frozenset(TYPES.index(x) for x in SENDS)
_LOCAL = (TYPES.index("cpy"), TYPES.index("re"))
_TAKE = (TYPES.index("r"), TYPES.index("rcs"))                    # receive as it comes
_STORE = frozenset(TYPES.index(x) for x in ("r", "rcs", "rrc", "rrcs"))


class _DataRun:
    """The data run of the module doc: unbounded FIFOs, whole instructions on array slices,
    a threadblock resumed only when what it waits for changes."""

    def __init__(self, algo: Algo, inplace: bool, record: bool):
        lay = self.lay = layout_of(algo)
        n = algo.ngpus
        if [g.id for g in lay.gpus] != list(range(n)) or len({g.i_chunks for g in lay.gpus}) > 1:
            raise MscclCheckError(f"cannot execute: gpu ids are not 0..{n - 1} or the gpus "
                                  "declare different input sizes")
        raise_first(algo, step_rules(algo, None))
        self.algo, self.tab = algo, algo.table
        self.values = _Values(n, lay.gpus[0].i_chunks, algo.collective)
        longest = int((lay.end - lay.start).max(initial=0))
        epoch = np.int16 if longest < INT16_MAX else np.int32
        self.mems = [_Mem(algo.collective, g, inplace, len(g.tbs), epoch) for g in lay.gpus]
        tbs = lay.tbs
        self.vc = [np.zeros(lay.ntbs[lay.gpu_of[t]], np.int64) for t in range(len(tbs))]
        self.rconn = [(tb.recv, lay.gpu_of[t], tb.chan) for t, tb in enumerate(tbs)]
        self.sconn = [(lay.gpu_of[t], tb.send, tb.chan) for t, tb in enumerate(tbs)]
        self.flag = [-1] * len(tbs)
        self.snaps = [([], []) for _ in tbs]         # per tb: flagged steps s, their clocks
        self.fwait = [[] for _ in tbs]
        self.rwait, self.fifos = {}, {}
        self.pc = lay.start.tolist()
        self.target = lay.target
        self.transfers = [] if record else None

    def run(self, capacity) -> None:
        """Run every threadblock as far as it goes; MscclDeadlock if some cannot finish,
        MscclCheckError on data left in flight or a wrong instruction."""
        ready = deque(range(len(self.lay.tbs)))
        while ready:
            self.advance(ready.popleft(), ready)
        end = self.lay.end.tolist()
        stuck = [t for t, pc in enumerate(self.pc) if pc < end[t]]
        if stuck:
            raise MscclDeadlock(_deadlock_message(
                self.lay, self.tab, stuck, capacity,
                self.pc.__getitem__, lambda t: 0, self.blocked_on))
        left = [(k, sum(m[1] for m in q)) for k, q in self.fifos.items() if q]
        if left:
            (u, w, c), m = left[0]
            raise MscclCheckError(f"{m} piece(s) sent by gpu {u} to gpu {w} on channel {c} are "
                                  "never received")

    def blocked_on(self, t: int) -> str:
        """flag or data (sends never wait here)."""
        pc = self.pc[t]
        tgt = int(self.target[pc])
        waits = self.tab[pc, DEPID] >= 0 and (tgt < 0 or self.flag[tgt] < self.tab[pc, DEPS])
        return "flag" if waits else "data"

    def advance(self, t: int, ready: deque) -> None:
        """Execute ``t``'s instructions until one waits for a flag or a message."""
        pc, end = self.pc[t], int(self.lay.end[t])
        while pc < end:
            row = self.tab[pc].tolist()
            if row[DEPID] >= 0:
                tgt = int(self.target[pc])
                if tgt < 0 or self.flag[tgt] < row[DEPS]:
                    if tgt >= 0:
                        self.fwait[tgt].append((row[DEPS], t))
                    break
                s_list, clocks = self.snaps[tgt]
                np.maximum(self.vc[t], clocks[bisect_left(s_list, row[DEPS])], out=self.vc[t])
            msg = None
            if row[TYPE] in _RECV_CODES and row[CNT] > 0:
                q = self.fifos.get(self.rconn[t])
                if not q:
                    self.rwait.setdefault(self.rconn[t], []).append(t)
                    break
                msg = q.popleft()
            self.instruction(t, pc, row, msg, ready)
            pc += 1
        self.pc[t] = pc

    def instruction(self, t: int, pc: int, row: list, msg, ready: deque) -> None:
        """One instruction on whole slices; sets its flag and wakes who waits for it."""
        lay, ty, cnt = self.lay, row[TYPE], row[CNT]
        mem, me, vc = self.mems[lay.gpu_of[t]], lay.local[t], self.vc[t]
        epoch = pc - int(lay.start[t]) + 1
        tb = lay.tbs[t]

        def at():
            return f"gpu {lay.gpus[lay.gpu_of[t]].id} tb {tb.id} step {row[S]} ({TYPES[ty]})"
        if ty != NOP and cnt > 0:
            if msg is not None and msg[1] != cnt:
                raise MscclCheckError(f"{at()}: receives {cnt} pieces but the next message from "
                                      f"gpu {tb.recv} on channel {tb.chan} has {msg[1]}")
            if ty in _TAKE:
                val = msg[0]
            else:
                val = mem.read(row[SRCBUF], row[SRCOFF], cnt, me, epoch, vc, at)
                if msg is not None or ty == _LOCAL[1]:
                    other = msg[0] if msg is not None else mem.read(
                        row[DSTBUF], row[DSTOFF], cnt, me, epoch, vc, at)
                    val = self.values.reduce(val, other, at)
            if ty in _STORE or ty in _LOCAL:
                mem.write(row[DSTBUF], row[DSTOFF], val, me, epoch, vc, at)
            if ty in _SEND_CODES:
                self.send(t, val, cnt, row[T], ready)
        vc[me] = epoch
        if row[HASDEP] and ty != NOP:
            self.flag[t] = row[S]
            self.snaps[t][0].append(row[S])
            self.snaps[t][1].append(vc.copy())
            self.fwait[t] = _wake(self.fwait[t], row[S], ready)

    def send(self, t: int, val: np.ndarray, cnt: int, step_t: int, ready: deque) -> None:
        key = self.sconn[t]
        self.fifos.setdefault(key, deque()).append((val, cnt))
        ready.extend(self.rwait.pop(key, ()))
        if self.transfers is not None:
            self.transfers.append((key[0], key[1], key[2], step_t, self.values.elems(val)))

    def check_result(self) -> None:
        """The collective's result in every rank's output (module doc)."""
        algo, values = self.algo, self.values
        for g, mem in zip(self.lay.gpus, self.mems):
            oc = g.o_chunks
            got = mem.val[mem.base[1]:mem.base[1] + oc]
            if algo.collective == Collective.ALLGATHER:
                want = np.arange(oc)
                ok = got == want
                ranks = want // values.ic
            else:
                want = np.arange(oc) + (g.id * oc if algo.collective ==
                                        Collective.REDUCE_SCATTER else 0)
                ok = got >= 0
                ok[ok] = (values.elems(got[ok]) == want[ok]) & values.is_full(got[ok])
                ranks = None
            if not ok.all():
                c = int(np.argmax(~ok))
                who = f"{ranks[c]}" if ranks is not None else values.ranks(values.full)
                raise MscclCheckError(
                    f"wrong {algo.collective} result: gpu {g.id} output piece {c} holds "
                    f"{values.describe(int(got[c]))}, expected element {want[c]} from rank(s) "
                    f"{who}")


class _Flow:
    """The flow run of the module doc: pieces per FIFO at ``capacity``, each threadblock's
    instruction and pieces done, flags; no data (the data run computes it). A plain send
    and the plain receive at the other end of its connection hand over pieces in one step
    (:meth:`hand_over`) instead of one wake-up per piece."""

    def __init__(self, algo: Algo, capacity: int):
        lay, tab = layout_of(algo), algo.table
        self.lay, self.tab, self.capacity = lay, tab, capacity
        ty, cnt = tab[:, TYPE], tab[:, CNT]
        moves = (ty != NOP) & (cnt > 0)
        kind = (moves & np.isin(ty, list(_RECV_CODES))) + 2 * (moves & np.isin(
            ty, list(_SEND_CODES)))
        flag = np.where((tab[:, HASDEP] != 0) & (ty != NOP), tab[:, S], -1)
        self.cnt, self.kind, self.flagval = cnt.tolist(), kind.tolist(), flag.tolist()
        self.target, self.deps = lay.target.tolist(), tab[:, DEPS].tolist()
        conns = {}
        self.rc = [conns.setdefault((tb.recv, lay.gpu_of[t], tb.chan), len(conns))
                   for t, tb in enumerate(lay.tbs)]
        self.sc = [conns.setdefault((lay.gpu_of[t], tb.send, tb.chan), len(conns))
                   for t, tb in enumerate(lay.tbs)]
        self.ends = [[-1, -1] for _ in conns]        # the one sending / receiving tb, or -2
        for t in range(len(lay.tbs)):
            for side, c in ((0, self.sc[t]), (1, self.rc[t])):
                self.ends[c][side] = t if self.ends[c][side] == -1 else -2
        self.fill = [0] * len(conns)
        self.rwait, self.swait = [[] for _ in conns], [[] for _ in conns]
        self.flag, self.fwait = [-1] * len(lay.tbs), [[] for _ in lay.tbs]
        self.pc, self.end = lay.start.tolist(), lay.end.tolist()
        self.k, self.started = [0] * len(lay.tbs), [False] * len(lay.tbs)

    def run(self) -> None:
        """MscclDeadlock unless every threadblock finishes."""
        ready = deque(range(len(self.pc)))
        while ready:
            self.advance(ready.popleft(), ready)
        stuck = [t for t, pc in enumerate(self.pc) if pc < self.end[t]]
        if stuck:
            raise MscclDeadlock(_deadlock_message(self.lay, self.tab, stuck, self.capacity,
                                                  self.pc.__getitem__, self.k.__getitem__,
                                                  self.blocked_on))

    def blocked_on(self, t: int) -> str:
        """flag, data or space."""
        pc = self.pc[t]
        tgt = self.target[pc]
        if not self.started[t] and tgt != -1 and (tgt < 0 or self.flag[tgt] < self.deps[pc]):
            return "flag"
        return "data" if self.kind[pc] & 1 and not self.fill[self.rc[t]] else "space"

    def advance(self, t: int, ready: deque) -> None:
        """Move ``t``'s pieces until a flag, an empty or a full FIFO stops it."""
        pc, end, fill, cap = self.pc[t], self.end[t], self.fill, self.capacity
        rc, sc = self.rc[t], self.sc[t]
        while pc < end:
            if not self.started[t]:
                tgt = self.target[pc]
                if tgt != -1:
                    if tgt < 0 or self.flag[tgt] < self.deps[pc]:
                        if tgt >= 0:
                            self.fwait[tgt].append((self.deps[pc], t))
                        break
                self.started[t] = True
            c, kind = self.cnt[pc], self.kind[pc]
            if kind:
                self.pc[t] = pc
                if kind != 3:
                    self.hand_over(t, sc if kind == 2 else rc, kind == 2, ready)
                m = c - self.k[t]
                if kind & 1 and fill[rc] < m:
                    m = fill[rc]
                if kind & 2 and cap - fill[sc] < m:
                    m = cap - fill[sc]
                if m <= 0 and self.k[t] < c:
                    (self.rwait[rc] if kind & 1 and not fill[rc] else self.swait[sc]).append(t)
                    break
                if kind & 1:
                    fill[rc] -= m
                    ready.extend(self.swait[rc])
                    self.swait[rc] = []
                if kind & 2:
                    fill[sc] += m
                    ready.extend(self.rwait[sc])
                    self.rwait[sc] = []
                self.k[t] += m
                if self.k[t] < c:
                    continue
            self.complete(t, pc, ready)
            pc += 1
        self.pc[t] = pc

    def complete(self, t: int, pc: int, ready: deque) -> None:
        """Instruction ``pc`` of ``t`` done: its flag, its waiters, the next instruction."""
        if self.flagval[pc] >= 0:
            self.flag[t] = self.flagval[pc]
            self.fwait[t] = _wake(self.fwait[t], self.flagval[pc], ready)
        self.pc[t], self.k[t], self.started[t] = pc + 1, 0, False

    def hand_over(self, t: int, conn: int, sending: bool, ready: deque) -> None:
        """``t``, at a plain send (``sending``) or receive on ``conn``, and the other end
        started at a plain receive / send: move the pieces the two would pass one by one
        until one finishes its instruction or the FIFO stops it (the other's completed
        instruction is finished here, and it is made ready)."""
        o = self.ends[conn][1 if sending else 0]
        if o < 0 or o == t or not self.started[o] or self.pc[o] >= self.end[o] or \
                self.kind[self.pc[o]] != (1 if sending else 2):
            return
        s, r = (t, o) if sending else (o, t)
        a = self.cnt[self.pc[s]] - self.k[s]          # pieces the sender still pushes
        b = self.cnt[self.pc[r]] - self.k[r]          # pieces the receiver still takes
        f = self.fill[conn]
        pushed, popped = (a, min(b, f + a)) if a <= b - f + self.capacity else \
            (b - f + self.capacity, b)
        if pushed <= 0 and popped <= 0:
            return
        self.fill[conn] = f + pushed - popped
        self.k[s] += pushed
        self.k[r] += popped
        if self.k[o] == self.cnt[self.pc[o]]:
            self.complete(o, self.pc[o], ready)
        ready.append(o)


def _wake(waiting: list, flag: int, ready: deque) -> list:
    """Make ready the (deps, tb) waiters whose ``deps`` the new ``flag`` reaches; the rest
    keep waiting."""
    ready.extend(t for deps, t in waiting if deps <= flag)
    return [w for w in waiting if w[0] > flag]


def _deadlock_message(lay: StepLayout, tab: np.ndarray, stuck: list, capacity, pc_of, k_of,
                      blocked_on) -> str:
    """The blocked threadblocks (first four) and what each waits for."""
    parts = []
    for t in stuck[:4]:
        pc, tb = pc_of(t), lay.tbs[t]
        row = tab[pc].tolist()
        what = (f"gpu {lay.gpus[lay.gpu_of[t]].id} tb {tb.id} at step {row[S]} "
                f"({TYPES[row[TYPE]]}, piece {k_of(t)}/{row[CNT]})")
        why = {"flag": f"waits for tb {row[DEPID]} step {row[DEPS]}",
               "data": f"waits for data from gpu {tb.recv}",
               "space": f"waits for space to gpu {tb.send}"}[blocked_on(t)]
        parts.append(f"{what} {why}")
    return (f"deadlock at buffer capacity {capacity}: {len(stuck)} threadblock(s) cannot "
            f"progress; " + "; ".join(parts))


def _mode(algo: Algo, inplace: bool | None) -> bool:
    if inplace is None:
        inplace = algo.inplace and not algo.outofplace
    if inplace and not algo.inplace or not inplace and not algo.outofplace:
        raise MscclCheckError(f"the XML declares inplace={int(algo.inplace)}, outofplace="
                              f"{int(algo.outofplace)}: it cannot run "
                              f"{'in place' if inplace else 'out of place'}")
    return inplace


def _bounded(algo: Algo, capacity: int) -> bool:
    """Whether FIFOs of ``capacity`` pieces can ever fill: not when they hold every piece the
    XML sends (then the unbounded data run decides)."""
    tab = algo.table
    sent = tab[np.isin(tab[:, TYPE], list(_SEND_CODES)), CNT].astype(np.int64).sum()
    return capacity < sent


def execute(xml, capacity: int = 1, inplace: bool | None = None, record: bool = False) -> dict:
    """Run the XML on FIFO connections holding ``capacity`` one-piece transmissions and check
    the collective's result (module doc). ``inplace``: run in place (default: in place if the
    XML allows only that). Raises MscclDeadlock or MscclCheckError; returns {"transfers":
    if ``record``, an int64 array of rows (src gpu, dst gpu, chan, t, element), one per piece
    sent, "instructions": total}."""
    algo = algo_of(xml)
    if capacity < 1:
        raise TopofinderError("capacity must be at least 1 transmission")
    data = _DataRun(algo, _mode(algo, inplace), record)
    data.run(capacity)
    data.check_result()
    if _bounded(algo, capacity):
        _Flow(algo, capacity).run()
    return {"transfers": _transfer_rows(data.transfers) if record else None,
            "instructions": len(algo.table)}


def _transfer_rows(sent: list) -> np.ndarray:
    """The recorded sends (src, dst, chan, t, elements) as one row per piece."""
    if not sent:
        return np.zeros((0, 5), np.int64)
    sizes = np.array([x[4].size for x in sent], np.int64)
    head = np.repeat(np.array([x[:4] for x in sent], np.int64), sizes, axis=0)
    return np.column_stack([head, np.concatenate([x[4] for x in sent]).astype(np.int64)])


def check(xml, runtime: str = "msccl-executor", capacities=(1, 2),
          max_steps: int | None = None) -> dict:
    """Limits of ``runtime`` plus an execution at every capacity in every mode the XML
    declares (in place / out of place): the data run once per mode, the flow run once per
    capacity (what it finds does not depend on the mode); returns the limits' statistics."""
    algo = algo_of(xml)
    stats = check_limits(algo, runtime, max_steps)
    for mode in [m for m, ok in ((True, algo.inplace), (False, algo.outofplace)) if ok]:
        data = _DataRun(algo, mode, False)
        data.run(min(capacities, default=1))
        data.check_result()
    for cap in capacities:
        if _bounded(algo, cap):
            _Flow(algo, cap).run()
    return stats
