"""MSCCL++ programs from the rank-program IR: every rank's ops as one ordered table of rows.

The schedule is lowered once, for any runtime, by :func:`topofinder.export.ir.lowering.lower`
(runs without a count limit, no staging); here the IR becomes what the MSCCL++ executor
(microsoft/mscclpp ``execution_kernel.hpp``) runs. A port channel's ``put`` only pushes a
request to the proxy (thread ``tid`` serves entry ``tid``) and a later ``signal`` on the same
channel travels behind it, ``wait`` spins in thread 0 until the peer's signal has arrived,
and ``nop`` is ``__syncthreads()``. Each rank's program is, in schedule-step order:

- step 0: the launch handshake: a signal on every in-link's channel, a wait on every
  out-link's channel (the receiver has started this launch, so it is done reading what the
  last launch wrote), a nop; then the IR's step-0 copy (allgather out of place, a broadcast's
  root: input into output).
- step t: [a nop if local ops ran since the last one] the IR's sends of step t, per out-link
  its runs as ``put`` entries (up to 8 per op, each on its own thread; one run per op on a
  memory channel), each writing where the paired receive
  (:func:`~topofinder.export.ir.pairing.pair_ops`) lands, a nop and the send point (the
  writer makes it a ``sem_release`` that lets the link's own threadblock signal behind the
  puts); then the receive point (the writer makes it waits on per-link threadblocks and one
  ``sem_acquire``), a nop, and the step's local ops by round
  (:func:`~topofinder.export.ir.pairing.local_rounds`), a nop between rounds: a
  ``recv_reduce`` is a ``re`` of the data landed and the partial held into its destination,
  a ``copy`` a copy.
- Landing: a ``recv_reduce`` into fresh scratch lands there and is reduced in place; one
  into its final place (the last partial of the rank's own chunk) lands in scratch of its
  own after the IR's (a put cannot add), so every place a put writes is fresh or final.

By induction on t every op of step t can run once all ranks finished step t − 1 (sends read
only data of earlier steps, waits need only the peers' step-t sends), so the program cannot
deadlock.

Rows (int64 columns, :data:`COLUMNS`): rank, step t, phase, sub (op order within the phase),
kind (:data:`KINDS`), peer (put: receiver; wait, signal: the link's other end), a, b, c (place
codes 4·index + buffer code, i 0, o 1, s 2; put: a source, c remote destination; reduce: a
received, b held, c destination; copy: a → c), size (pieces). Rows of one op are consecutive
and share (rank, t, phase, sub)."""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.arrays import in_runs
from topofinder.export.ir.bounds import layout_for
from topofinder.export.ir.lowering import lower as lower_ir
from topofinder.export.ir.pairing import LOCAL, local_rounds, overwrites_sent, pair_ops
from topofinder.export.ir.program import BUFFERS, KIND_CODE
from topofinder.model.schedule import StepSchedule

COLUMNS = ("rank", "t", "phase", "sub", "kind", "peer", "a", "b", "c", "size")
#: Row kinds: a port put entry, a receive point (t > 0) or handshake wait, a send point (t > 0)
#: or handshake signal, nop, copy, reduce, a memory-channel put (one run, all threads).
KINDS = ("put", "wait", "signal", "nop", "copy", "re", "mput")
PUT, WAIT, SIGNAL, NOP, COPY, REDUCE, MPUT = range(len(KINDS))
BUFS = "ios"
PER_OP = 8                       # MAX_CHANNEL_PER_OPERATION: entries of a put, channels of a wait
#: Pieces per IR op: no count limit (offsets are checked against 32 bits by the writer).
RUN_LIMIT = 1 << 30
_NF = len(COLUMNS)
_SUB = 1 << 24                   # sub = link ordinal · _SUB + op ordinal in the link's message


def _rows(m: int, rank, t, phase, sub, kind, peer=-1, a=-1, b=-1, c=-1, size=0) -> np.ndarray:
    cols = [rank, t, phase, sub, kind, peer, a, b, c, size]
    return np.column_stack([np.broadcast_to(np.asarray(x, np.int64), (m,)) for x in cols]
                           ).reshape(m, _NF)


def group_index(keys: list) -> np.ndarray:
    """Per item (sorted by ``keys``), its index among the items with equal keys."""
    m = keys[0].size
    new = np.zeros(m, bool)
    if m:
        new[0] = True
        for x in keys:
            new[1:] |= x[1:] != x[:-1]
    pos = np.arange(m)
    return pos - np.maximum.accumulate(np.where(new, pos, 0)) if m else pos


def memory_link(u, w, g: int) -> np.ndarray:
    """Whether link u→w joins ranks of one server (r // ``g`` alike): a memory channel."""
    return (np.asarray(u) // g == np.asarray(w) // g) if g > 1 else np.zeros(np.shape(u), bool)


def lower(schedule: StepSchedule, channels: int = 1, inplace: bool = False,
          gpus_per_node: int = 1, root: int | None = None) -> dict:
    """Rows of every rank's program (module doc), sorted by (rank, t, phase, sub, order), from
    the IR of ``schedule`` (``channels`` K instances' piece layout; ``root``: a broadcast from
    it, :func:`~topofinder.export.ir.steps.broadcast_steps`). Returns the rows, the scratch
    pieces of one instance per rank (IR scratch then landing), the links (u·N + w) and the
    piece layout (None: the root's). Raises ScheduleError on a schedule that does not perform
    its collective (validate it first)."""
    layout = None if root is not None else layout_for(schedule, channels, False)
    progs = lower_ir(schedule, channels, inplace, RUN_LIMIT, stage=False, layout=layout,
                     root=root)
    rows, scratch = program_rows(progs, gpus_per_node)
    s = schedule.sends
    n = schedule.topology.n
    links = np.unique(s[:, 4] * n + s[:, 5]) if s.shape[0] else np.zeros(0, np.int64)
    return {"rows": rows, "scratch": scratch, "links": links, "layout": layout}


def _codes(arr: np.ndarray, col: int) -> np.ndarray:
    """Place codes 4·offset + buffer of the IR's (buffer, offset) columns at ``col``."""
    return np.where(arr[:, col] >= 0, 4 * arr[:, col + 1] + arr[:, col], -1)


def program_rows(progs: list, g: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the IR programs ``progs`` (module doc) with ``g`` GPUs per node, and the
    scratch pieces of one instance per rank."""
    n = len(progs)
    for prog in progs:
        hit = overwrites_sent(prog)
        if hit is not None:
            j, i = hit
            raise TopofinderError(
                f"node {prog.u} overwrites {BUFFERS[int(prog.arr[j, 4])]}"
                f"[{int(prog.arr[j, 5])}] at step {int(prog.arr[j, 7])} after a put read it "
                f"at step {int(prog.arr[i, 7])}: not expressible without a flush")
    rnd = local_rounds(progs)
    partner = pair_ops(progs)
    arr = np.concatenate([p.arr for p in progs]).astype(np.int64)
    sizes = np.array([len(p.arr) for p in progs], np.int64)
    rank = np.repeat(np.arange(n), sizes)
    order = in_runs(sizes)                                  # each op's index in its program
    kind, peer, cnt, t, run = arr[:, 1], arr[:, 0] >> 1, arr[:, 6], arr[:, 7], arr[:, 8]
    src, dst = _codes(arr, 2), _codes(arr, 4)
    scratch = np.array([p.scratch for p in progs], np.int64)
    # landing: a reduction into a place other than fresh scratch lands in scratch of its own
    rrc = kind == KIND_CODE["recv_reduce"]
    away = np.flatnonzero(rrc & ((dst & 3) != 2))
    ex = np.cumsum(cnt[away]) - cnt[away]
    first = np.searchsorted(rank[away], np.arange(n))
    base = np.r_[ex, 0][first]
    land = dst.copy()
    land[away] = 4 * (scratch[rank[away]] + ex - base[rank[away]]) + 2
    scratch += np.bincount(rank[away], weights=cnt[away], minlength=n).astype(np.int64)
    blocks = [_start(progs, g)]
    sends = np.flatnonzero(kind == KIND_CODE["send"])
    u, w, r = rank[sends], peer[sends], run[sends]
    mem = memory_link(u, w, g)
    blocks.append(_rows(sends.size, u, t[sends], 1, w * _SUB + np.where(mem, r, r // PER_OP),
                        np.where(mem, MPUT, PUT), w, a=src[sends], c=land[partner[sends]],
                        size=cnt[sends]))
    local = np.flatnonzero(np.isin(kind, LOCAL))
    red = kind[local] == KIND_CODE["recv_reduce"]
    blocks.append(_local_rows(rank[local], t[local], rnd[local], order[local],
                              np.where(red, REDUCE, COPY), np.where(red, land[local], src[local]),
                              np.where(red, src[local], -1), dst[local], cnt[local]))
    blocks += _points(n, rank[sends], w, t[sends], rank[local], t[local], rnd[local])
    rows = np.concatenate(blocks)
    rows = rows[np.lexsort((np.arange(rows.shape[0]),) + tuple(rows[:, i] for i in (3, 2, 1, 0)))]
    return rows, scratch


def _local_rows(rank, t, rnd, order, kind, a, b, c, size) -> np.ndarray:
    """Rows of the local ops (copies at step 0 after the handshake, else by round after the
    receive point), consecutive ops of one rank, step and round merged where they are alike
    and their places ``a``, ``b``, ``c`` (codes, −1 none) all continue: ops of one round are
    independent, and ``re`` and ``copy`` act element by element, so one op does both."""
    o = np.lexsort((order, rnd, t, rank))
    rank, t, rnd, order, kind, a, b, c, size = (x[o] for x in
                                                 (rank, t, rnd, order, kind, a, b, c, size))
    m = rank.size
    same = (rank[1:] == rank[:-1]) & (t[1:] == t[:-1]) & (rnd[1:] == rnd[:-1]) & \
        (kind[1:] == kind[:-1])
    for x in (a, b, c):
        same &= np.where(x[:-1] >= 0, x[1:] == x[:-1] + 4 * size[:-1], x[1:] < 0)
    hs = np.flatnonzero(np.r_[True, ~same][:m])
    size = np.add.reduceat(size, hs) if m else size
    return _rows(hs.size, rank[hs], t[hs], np.where(t[hs] == 0, 3, 4 + 2 * rnd[hs]),
                 order[hs], kind[hs], a=a[hs], b=b[hs], c=c[hs], size=size)


def _start(progs: list, g: int) -> np.ndarray:
    """Step 0's handshake: a signal on every in-link, a wait on every out-link, a nop."""
    lu = np.array([p.u for p in progs for _ in p.out_peers], np.int64)
    lw = np.array([w for p in progs for w in p.out_peers], np.int64)
    mem = memory_link(lu, lw, g).astype(np.int64)
    o = np.lexsort((lu, mem, lw))
    w, u, m = lw[o], lu[o], mem[o]
    sig = _rows(w.size, w, 0, 0, m * _SUB + group_index([w, m]) // PER_OP, SIGNAL, u)
    o = np.lexsort((lw, mem, lu))
    w, u, m = lw[o], lu[o], mem[o]
    wait = _rows(u.size, u, 0, 1, m * _SUB + group_index([u, m]) // PER_OP, WAIT, w)
    senders = np.unique(lu)
    return np.concatenate([sig, wait, _rows(senders.size, senders, 0, 2, 0, NOP)])


def _points(n: int, su, sw, st, lr, lt, lrnd) -> list:
    """Per step t: the nop before the sends of a rank that ran local ops since its last nop,
    the nop and send point after its puts (rows naming the out-links with a message), the
    receive point (rows naming the in-links with a message) and its nop, the nops between
    rounds of local ops (sends ``su`` → ``sw`` at steps ``st``; local ops at ranks ``lr``,
    steps ``lt``, rounds ``lrnd``)."""
    blocks = []
    msg = np.unique((st * n + su) * n + sw)
    mt, mu, mw = msg // (n * n), msg // n % n, msg % n
    lead = np.r_[True, (mt[1:] != mt[:-1]) | (mu[1:] != mu[:-1])][:msg.size]
    blocks.append(_rows(msg.size, mu, mt, 1, n * _SUB + 1, SIGNAL, mw))
    blocks.append(_rows(int(lead.sum()), mu[lead], mt[lead], 1, n * _SUB, NOP))
    rcv = np.unique((st * n + sw) * n + su)
    rt, rw, ru = rcv // (n * n), rcv // n % n, rcv % n
    blocks.append(_rows(rcv.size, rw, rt, 2, 0, WAIT, ru))
    first = np.r_[True, (rt[1:] != rt[:-1]) | (rw[1:] != rw[:-1])][:rcv.size]
    blocks.append(_rows(int(first.sum()), rw[first], rt[first], 3, 0, NOP))
    # nops between rounds: after every round but a (rank, step)'s last
    top = np.zeros(0, np.int64) if not lr.size else np.unique((lt * n + lr) * 64 + lrnd)
    if (lrnd >= 64).any():
        raise TopofinderError("MSCCL++ plan: local ops of one step chain more than 64 deep")
    tk, tr = top // 64, top % 64
    more = np.r_[tk[1:] == tk[:-1], False][:top.size]
    blocks.append(_rows(int(more.sum()), tk[more] % n, tk[more] // n, 5 + 2 * tr[more], 0, NOP))
    # a nop before a step's sends when local ops (t > 0) ran since the last one: per rank,
    # its steps with sends (kind 0) and with local ops (kind 1, after that step's sends)
    act = np.unique(np.r_[(mt * n + mu) * 2, ((lt * n + lr) * 2 + 1)[lt > 0]])
    ar = act // 2 % n
    ao = np.lexsort((act, ar))
    act, ar = act[ao], ar[ao]
    after_local = np.r_[False, (ar[1:] == ar[:-1]) & (act[:-1] % 2 == 1)][:act.size]
    need = (act % 2 == 0) & after_local
    blocks.append(_rows(int(need.sum()), ar[need], act[need] // 2 // n, 0, 0, NOP))
    return blocks
