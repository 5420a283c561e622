"""MSCCL++ execution plans (JSON) of step schedules: threadblocks, channels and the document.

The rank-program IR (:mod:`topofinder.export.ir`), made one ordered program per rank by
:mod:`.plan_program`, gives every rank its ops. Here it becomes the
executor's document (microsoft/mscclpp ``execution_plan.cc``): per rank ``gpus[r]`` with its
buffer chunk counts, its channels (``connected_to``: one channel per link direction and lane;
port channels, memory channels between ranks of one server when ``gpus_per_node`` G > 1),
the remote buffers its puts write, its device semaphores and its threadblocks.

- Threadblocks: the program is cut into consecutive threadblocks of at most 64 ops
  (MAX_OPERATION); threadblock i + 1 starts with ``sem_acquire`` of a semaphore threadblock
  i releases as its last op (each after a nop), so a rank still runs its ops in program
  order. Every link has a threadblock of its own at each end whose thread 0 alone signals
  (sender) or waits on (receiver) the link's channel, handing over to the program by device
  semaphores with one releasing and one acquiring thread each (a send point releases, a
  receive point acquires, those of all the rank's links at fixed positions); the sender's
  ends with a ``flush`` so the proxy has read every source before the kernel ends. All of a
  rank's threadblocks spin at once, so their count must stay within the GPU's SMs
  (``max_threadblocks``, 132 on an H100).
- Channels: the k-th channel r→p pairs with the k-th channel p→r, so both ends list the
  channels of a pair of ranks in one order: by (sender, receiver, lane). Ops name channels
  and remote buffers by their index in the threadblock's own lists (at most 16 of each type).
- ``--channels K``: K instances, instance j moving the j-th K-th of every chunk on its own
  lanes, threadblocks and semaphores, its pieces where the IR puts them
  (:func:`~topofinder.export.ir.layout.channel_shift`: piece j·P + c of a shard in NCCL's
  order; allreduce, whose element order is free, instance j's block of N·P in the IR's
  piece layout, recorded in the ``topofinder`` block for :mod:`.plan_read`), scratch j·S.
- Memory channels: a put is a copy by all threads that does not signal (``handlePut``
  returns before the signal for memory channels, even for ``pws``), so such a message is
  one put per run, then the send point.
- Every data op carries ``t``, its schedule step (the executor ignores it), so
  :mod:`.plan_read` recovers the sends. 32-bit offsets bound the message: the plan serves
  sizes up to :func:`largest_message` (``max_message_size``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.layout import channel_shift
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule

from .plan_limits import H100_SMS, MAX_CHANNEL, MAX_OPERATION, U32
from .plan_program import (BUFS, COPY, MPUT, NOP, PUT, SIGNAL, WAIT, group_index, lower,
                           memory_link)

#: Chunk alignment the plans declare (``buffer_alignment``; chunk sizes are multiples of it).
ALIGNMENT = 16
PLAN_FORMAT = "topofinder-mscclpp-plan"
PLAN_VERSION = 1
#: The executor's spelling of each collective.
COLL_NAMES = {Collective.ALLGATHER: str(Collective.ALLGATHER),
              Collective.REDUCE_SCATTER: "reducescatter",
              Collective.ALLREDUCE: str(Collective.ALLREDUCE),
              Collective.BROADCAST: str(Collective.BROADCAST)}


@dataclass(frozen=True)
class PlanShape:
    """A plan's figures: ops in the fullest threadblock, threadblocks on the fullest rank and
    in all, chunks its offsets reach (``span``), the largest message (bytes) whose offsets fit
    32 bits and the message buffer's chunks (``message_chunks``: sizes are multiples of 16 ×
    this)."""

    max_ops_per_threadblock: int
    max_threadblocks_per_rank: int
    threadblocks: int
    span: int
    max_message_bytes: int
    message_chunks: int


def largest_message(span: int, message_chunks: int) -> int:
    """Bytes of the largest message whose every offset (index·chunk, chunk a multiple of 16
    bytes) stays within 32 bits when the plan's references reach ``span`` chunks."""
    return U32 // span // ALIGNMENT * ALIGNMENT * message_chunks


def _chunks(coll: str, n: int, kp: int) -> tuple[int, int]:
    """(input_chunks, output_chunks) of a rank."""
    return {Collective.BROADCAST: (kp, kp), Collective.ALLGATHER: (kp, n * kp),
            Collective.REDUCE_SCATTER: (n * kp, kp), Collective.ALLREDUCE: (n * kp, n * kp)}[coll]


def check_bounds(schedule: StepSchedule, channels: int = 1, gpus_per_node: int = 1,
                 min_bytes: int = 0, max_bytes: int | None = None,
                 max_threadblocks: int = H100_SMS, root: int | None = None) -> None:
    """Refuse, before any lowering, what no plan of ``schedule`` can do, from lower bounds:
    the message sizes asked beyond 32-bit offsets (the message buffer alone spans N·K·P
    chunks), more channels on a rank than one threadblock holds (its first threadblock
    handshakes on all of them), and more threadblocks than ``max_threadblocks`` (per
    instance one per link end, and the program's ops over 64: every link message needs a
    put, every step with sends a nop and a send point, every step with receives a receive
    point and a nop)."""
    n, k, p = schedule.topology.n, channels, schedule.shard_chunks
    coll = schedule.collective if root is None else Collective.BROADCAST
    what = f"MSCCL++ plan of {schedule.topology.expr} {coll}"
    inp, out = _chunks(coll, n, k * p)
    msg = out if coll == Collective.ALLGATHER else inp
    bound = largest_message(max(inp, out), msg)
    if bound == 0:
        raise TopofinderError(f"{what}: its {msg} chunks cannot be 16-byte aligned within "
                              "32-bit offsets")
    for flag, size in (("--max-bytes", max_bytes), ("--min-bytes", min_bytes)):
        if size is not None and size > bound:
            raise TopofinderError(
                f"{what}: {flag} {size} is beyond {bound} bytes, the largest message whose "
                f"offsets fit 32 bits ({max(inp, out)} chunks of at most "
                f"{bound // msg} bytes)")
    s = schedule.sends
    if not s.shape[0]:
        return
    links = np.unique(s[:, 4] * n + s[:, 5])
    lu, lw = links // n, links % n
    local = (lu // gpus_per_node) == (lw // gpus_per_node) if gpus_per_node > 1 else \
        np.zeros(lu.size, bool)
    for kind, sel in (("port", ~local), ("memory", local)):
        per = np.bincount(lu[sel], minlength=n) + np.bincount(lw[sel], minlength=n)
        if per.max(initial=0) > MAX_CHANNEL:
            r = int(per.argmax())
            raise TopofinderError(f"{what}: rank {r} has {int(per[r])} {kind} channels (one "
                                  f"per in- and out-link), more than the {MAX_CHANNEL} one "
                                  "threadblock holds")
    msgs = np.unique(s[:, 0] * (n * n) + s[:, 4] * n + s[:, 5])
    sends = np.bincount((msgs // n) % n, minlength=n)
    send_steps = np.bincount(np.unique(s[:, 0] * n + s[:, 4]) % n, minlength=n)
    recv_steps = np.bincount(np.unique(s[:, 0] * n + s[:, 5]) % n, minlength=n)
    ops = sends + 2 * send_steps + 2 * recv_steps + 1
    links = np.bincount(lu, minlength=n) + np.bincount(lw, minlength=n)
    need = k * (-(-ops // MAX_OPERATION) + links)
    if need.max() > max_threadblocks:
        r = int(need.argmax())
        raise TopofinderError(f"{what}: rank {r} needs at least {int(need[r])} threadblocks "
                              f"(({int(ops[r])} ops in threadblocks of {MAX_OPERATION}, and "
                              f"{int(links[r])} links) × {k} instance(s)), more than the "
                              f"{max_threadblocks} resident at once")


def to_mscclpp_plan(schedule: StepSchedule, channels: int = 1, inplace: bool = False,
                    gpus_per_node: int = 1, min_bytes: int = 0, max_bytes: int | None = None,
                    name: str | None = None, max_threadblocks: int = H100_SMS,
                    shape: dict | None = None, extra: dict | None = None,
                    root: int | None = None) -> str:
    """The MSCCL++ execution plan of ``schedule`` as JSON text (module doc). ``channels``: K
    instances; ``inplace``: NCCL's in-place buffers (one buffer: allgather's output,
    reduce-scatter's and allreduce's input); ``gpus_per_node`` G: ranks r // G alike share a
    server (memory channels between them, ``ranks per node`` of the NCCL shim's match);
    ``min_bytes``/``max_bytes``: the message sizes it serves (allgather: the whole output;
    else the input), default up to the largest whose offsets fit 32 bits. ``shape``: filled
    with :class:`PlanShape`'s fields; ``extra``: more fields of the ``topofinder`` block (a
    diff's ``physical`` mapping); ``root``: ``schedule`` is a broadcast from ``root`` (an
    allgather schedule of its shard only,
    :func:`~topofinder.export.ir.steps.broadcast_steps`). Refuses (one line) what does not
    fit."""
    if channels < 1 or gpus_per_node < 1:
        raise TopofinderError("--channels and --gpus-per-node must be positive")
    if min_bytes < 0 or (max_bytes is not None and max_bytes < min_bytes):
        raise TopofinderError(f"size band [{min_bytes}, {max_bytes}] bytes: need 0 ≤ "
                              "min-bytes ≤ max-bytes")
    coll = schedule.collective if root is None else Collective.BROADCAST
    n = schedule.topology.n
    if coll not in COLL_NAMES:
        raise TopofinderError(f"MSCCL++ plans are written for {', '.join(COLL_NAMES)}")
    check_bounds(schedule, channels, gpus_per_node, min_bytes, max_bytes, max_threadblocks,
                 root)
    low = lower(schedule, channels, inplace, gpus_per_node, root)
    plan = _Plan(schedule, low, channels, gpus_per_node, coll)
    gpus, tbs = plan.render()
    what = f"MSCCL++ plan of {schedule.topology.expr} {coll}"
    if max(tbs) > max_threadblocks:
        r = int(np.argmax(tbs))
        raise TopofinderError(f"{what}: rank {r} has {tbs[r]} threadblocks, more than the "
                              f"{max_threadblocks} resident at once")
    inp, out = _chunks(coll, n, channels * schedule.shard_chunks)
    msg = out if coll == Collective.ALLGATHER else inp
    largest = largest_message(plan.span, msg)
    if max_bytes is not None and max_bytes > largest:
        raise TopofinderError(f"{what}: --max-bytes {max_bytes} is beyond {largest} bytes, "
                              f"the largest message whose offsets fit 32 bits (its ops "
                              f"reach {plan.span} chunks)")
    if min_bytes > largest:
        raise TopofinderError(f"{what}: --min-bytes {min_bytes} is beyond {largest} bytes, "
                              "the largest message whose offsets fit 32 bits")
    info = PlanShape(plan.max_ops, max(tbs), sum(tbs), plan.span, largest, msg)
    if shape is not None:
        shape.update(info.__dict__, root=root)
    head = {"name": name or f"topofinder {schedule.topology.expr} {coll}",
            "collective": COLL_NAMES[coll], "protocol": "Simple", "inplace": bool(inplace),
            "reuse_resources": False, "num_threads_per_block": 1024,
            "use_double_scratch_buffer": False, "buffer_alignment": ALIGNMENT,
            "min_message_size": int(min_bytes),
            "max_message_size": int(largest if max_bytes is None else max_bytes),
            "topofinder": {"format": PLAN_FORMAT, "version": PLAN_VERSION,
                           "topology": schedule.topology.expr, "num_nodes": n,
                           "collective": coll, "shard_chunks": schedule.shard_chunks,
                           "channels": channels, "gpus_per_node": gpus_per_node,
                           "reduce_scatter_steps": plan.low_reduce_steps,
                           "num_steps": schedule.num_steps,
                           "tau_exact": str(schedule.tau), **_layout_field(low["layout"]),
                           **({} if root is None else {"root": root}), **(extra or {})}}
    text = json.dumps(head)[:-1] + ', "gpus": [\n'
    return text + ",\n".join(gpus) + "\n]}\n"


_SRC = '{"type": "%s", "index": %d, "size": %d}'
_DST = '{"buffer_id": %d, "index": %d, "size": %d}'
_NOP = '{"name": "nop"}'
_NAMES = {PUT: "put", WAIT: "wait", SIGNAL: "signal"}


class _Plan:
    """Channels, remote buffers, threadblocks and text of every rank (module doc), computed
    as arrays over the lowering's rows; only the text is written op by op."""

    def __init__(self, schedule: StepSchedule, low: dict, k: int, g: int, coll: str):
        self.n, self.p, self.k, self.g = schedule.topology.n, schedule.shard_chunks, k, g
        self.coll = coll
        self.low_reduce_steps = schedule.reduce_steps \
            if self.coll == Collective.ALLREDUCE else 0
        self.rows, self.scratch, self.links = low["rows"], low["scratch"], low["links"]
        self.span = 0
        self.max_ops = 0

    def memory(self, u, w):
        return memory_link(u, w, self.g)

    def index(self, code: np.ndarray, owner: np.ndarray, j: int) -> np.ndarray:
        """Indices in instance j of places (codes of instance 0's program) at ranks
        ``owner``: scratch j·S + s (S: the rank's scratch of one instance), input and output
        shifted by :func:`~topofinder.export.ir.layout.channel_shift`."""
        buf, idx = code & 3, code >> 2
        if j == 0:
            return idx
        shift = channel_shift(self.coll, self.n, self.p, j)
        return idx + np.where(buf == 2, j * self.scratch[owner], shift)

    def channels(self):
        """Per link end (rank, u, w) sorted, its position q among the rank's channels of
        its type (ids q·K + j, lanes j); per rank and type the peers, ``connected_to``."""
        n = self.n
        lu, lw = self.links // n, self.links % n
        rank = np.r_[lu, lw]
        peer = np.r_[lw, lu]
        u, w = np.r_[lu, lu], np.r_[lw, lw]
        mem = self.memory(u, w).astype(np.int64)
        o = np.lexsort((w, u, peer, mem, rank))
        rank, peer, u, w, mem = rank[o], peer[o], u[o], w[o], mem[o]
        q = group_index([rank, mem])
        key = (rank * n + u) * n + w
        ko = np.argsort(key)
        return key[ko], q[ko], (rank, mem, peer)

    def render(self):
        """Every rank's ``gpus`` text and threadblock count."""
        rows, n, k = self.rows, self.n, self.k
        heads, op_of, seg = self._segments()
        row_q, row_mem, conn = self._row_channels()
        row_rb, remote = self._row_buffers()
        self._points(heads, op_of, seg)
        op_texts = [self._ops(j, heads, op_of, row_q, row_mem, row_rb, seg[op_of])
                    for j in range(k)]
        # every rank's threadblocks: instance j, segment i
        op_rank = rows[heads, 0]
        seg_start = np.searchsorted(op_rank * (1 << 20) + seg,
                                    np.arange(n)[:, None] * (1 << 20) + np.arange(
                                        int(self.nseg.max(initial=1)) + 1)[None, :])
        texts, tbs = [], []
        for r in range(n):
            tb_text = self._threadblocks(r, op_texts, seg_start[r])
            inp, out = _chunks(self.coll, n, k * self.p)
            scratch = k * int(self.scratch[r])
            self.span = max(self.span, inp, out, scratch)
            channels = ", ".join('{"channel_type": "%s", "connected_to": %s}'
                                 % (ct, conn[r][ct]) for ct in ("port", "memory")
                                 if conn[r][ct])
            rb = ", ".join('{"rank": %d, "type": "%s", "access_channel_types": ["%s"]}' % x
                           for x in remote[r])
            sems = ", ".join(['{"init_value": 0}'] * (k * int(self.sem_base[r])))
            texts.append('{"id": %d, "input_chunks": %d, "output_chunks": %d, '
                         '"scratch_chunks": %d, "channels": [%s], "remote_buffers": [%s], '
                         '"semaphores": [%s], "threadblocks": [\n%s]}'
                         % (r, inp, out, scratch, channels, rb, sems, ",\n".join(tb_text)))
            tbs.append(len(tb_text))
        return texts, tbs

    def _segments(self):
        """Ops (``heads``: first row of each, ``op_of``: each row's op) and each op's
        segment: a rank's ops cut into threadblocks of MAX_OPERATION with the handover ops
        (first: 62 ops, middle ones 60, the last up to 62); sets ``nseg`` per rank."""
        rows, n = self.rows, self.n
        m = rows.shape[0]
        new = np.ones(m, bool)
        if m:
            new[1:] = (rows[1:, :4] != rows[:-1, :4]).any(axis=1)
        op_of = np.cumsum(new) - 1
        heads = np.flatnonzero(new)
        op_rank = rows[heads, 0]
        nops = np.bincount(op_rank, minlength=n)
        ordinal = group_index([op_rank])
        total = nops[op_rank]
        nmid = np.maximum(0, -(-(nops - 2 * (MAX_OPERATION - 2)) // (MAX_OPERATION - 4)))
        seg = np.where(total <= MAX_OPERATION, 0, np.where(
            ordinal < MAX_OPERATION - 2, 0,
            np.minimum(1 + (ordinal - (MAX_OPERATION - 2)) // (MAX_OPERATION - 4),
                       1 + nmid[op_rank])))
        self.nseg = np.where(nops <= MAX_OPERATION, 1, 2 + nmid)
        return heads, op_of, seg

    def _row_channels(self):
        """Per row the position q of the channel its op names among its rank's channels of
        that type (−1: none) and whether it is a memory channel; per rank and type the
        ``connected_to`` peers. Puts name rank → peer; the handshake's waits the out-link,
        its signals the in-link."""
        rows, n, k = self.rows, self.n, self.k
        rk, t, kind, peer = rows[:, 0], rows[:, 1], rows[:, 4], rows[:, 5]
        out_side = np.isin(kind, (PUT, MPUT)) | ((kind == WAIT) & (t == 0))
        chan = (kind == PUT) | (np.isin(kind, (WAIT, SIGNAL)) & (t == 0))
        lu, lw = np.where(out_side, rk, peer), np.where(out_side, peer, rk)
        keys, qs, (crank, cmem, cpeer) = self.channels()
        self.keys, self.qs = keys, qs
        ci = np.flatnonzero(chan)
        at = np.searchsorted(keys, (rk[ci] * n + lu[ci]) * n + lw[ci])
        row_q = np.full(rows.shape[0], -1, np.int64)
        row_q[ci] = qs[at]
        conn = [{"port": [], "memory": []} for _ in range(n)]
        for r, mm, pp in zip(crank.tolist(), cmem.tolist(), cpeer.tolist()):
            conn[r]["memory" if mm else "port"].extend([pp] * k)
        return row_q, self.memory(lu, lw).astype(np.int64), conn

    def _row_buffers(self):
        """Per put row the id of the remote buffer it writes (rank, receiver, buffer; ids in
        that order per rank, −1 for other rows) and per rank its ``remote_buffers``."""
        rows, n = self.rows, self.n
        rk, kind, peer = rows[:, 0], rows[:, 4], rows[:, 5]
        pi = np.flatnonzero(np.isin(kind, (PUT, MPUT)))
        rkey = (rk[pi] * n + peer[pi]) * 4 + (rows[pi, 8] & 3)
        runiq, rinv = _unique(rkey)
        rgid = group_index([runiq // (4 * n)])
        row_rb = np.full(rows.shape[0], -1, np.int64)
        row_rb[pi] = rgid[rinv]
        remote = [[] for _ in range(n)]
        for key in runiq.tolist():
            r, rest = divmod(key, 4 * n)
            w, b = divmod(rest, 4)
            remote[r].append((w, BUFS[b], "memory" if self.memory(r, w) else "port"))
        return row_rb, remote

    def _points(self, heads, op_of, seg):
        """Send and receive points: a rank's in-link (out-link) l gets a threadblock of its
        own (:meth:`_helper`) whose thread 0 waits for (signals) each message and releases
        (acquires) semaphore (l, segment) at every receive (send) point of the rank; the
        point acquires (releases) those of all its in-links (out-links) at fixed positions.
        Semaphores per instance: the handovers, then (in-link, segment), (out-link,
        segment)."""
        rows, n, nseg = self.rows, self.n, self.nseg
        rk, t, kind, peer = rows[:, 0], rows[:, 1], rows[:, 4], rows[:, 5]
        self.links_of = {WAIT: [[] for _ in range(n)], SIGNAL: [[] for _ in range(n)]}
        for key in self.links.tolist():
            self.links_of[WAIT][key % n].append(key // n)
            self.links_of[SIGNAL][key // n].append(key % n)
        nin = np.array([len(x) for x in self.links_of[WAIT]], np.int64)
        nout = np.array([len(x) for x in self.links_of[SIGNAL]], np.int64)
        self.sem_first = {WAIT: nseg - 1, SIGNAL: nseg - 1 + nin * nseg}
        self.sem_base = nseg - 1 + (nin + nout) * nseg
        self.points = {WAIT: {}, SIGNAL: {}}               # rank → [(t, segment)]
        self.msgs = {WAIT: {}, SIGNAL: {}}                 # rank → {(t, peer)}
        for kd in (WAIT, SIGNAL):
            pts = heads[(kind[heads] == kd) & (t[heads] > 0)]
            for h, sg in zip(pts.tolist(), seg[op_of[pts]].tolist()):
                self.points[kd].setdefault(int(rk[h]), []).append((int(t[h]), sg))
            for i in np.flatnonzero((kind == kd) & (t > 0)).tolist():
                self.msgs[kd].setdefault(int(rk[i]), set()).add((int(t[i]), int(peer[i])))
        for what, cnt in (("in-links", nin), ("out-links", nout)):
            if (cnt > MAX_CHANNEL).any():
                r = int(cnt.argmax())
                raise TopofinderError(f"MSCCL++ plan: rank {r} has {int(cnt[r])} {what}, more "
                                      f"than the {MAX_CHANNEL} semaphores one op names")

    def _threadblocks(self, r, op_texts, starts) -> list:
        """Rank r's threadblock texts: per instance j its segments (between handover ops)
        then its links' threadblocks."""
        ns, base = int(self.nseg[r]), int(self.sem_base[r])
        tb_text = []
        for j in range(self.k):
            ops = op_texts[j][0]
            for i in range(ns):
                body = ops[int(starts[i]):int(starts[i + 1])]
                if i > 0:
                    body = ['{"name": "sem_acquire", "semaphore_ids": [%d]}'
                            % (j * base + i - 1), _NOP] + body
                if i < ns - 1:
                    body = body + [_NOP, '{"name": "sem_release", "semaphore_ids": [%d]}'
                                   % (j * base + i)]
                self.max_ops = max(self.max_ops, len(body))
                chs, rbs = op_texts[j][1].get((r, i), ("", ""))
                tb_text.append('{"id": %d, "ops": [\n%s], "channels": [%s], '
                               '"remote_buffer_refs": [%s]}'
                               % (len(tb_text), ",\n".join(body), chs, rbs))
            for kd in (WAIT, SIGNAL):
                for l, x in enumerate(self.links_of[kd][r]):
                    sem0 = j * base + int(self.sem_first[kd][r]) + l * ns
                    tb_text.append(self._helper(kd, r, x, j, len(tb_text), sem0))
        return tb_text

    def _helper(self, kd, r, x, j, tb_id, sem0):
        """The threadblock of rank r's link with x (instance j): for an in-link (kd WAIT),
        at every receive point (t, segment) of r a wait on the link's channel if x sent at
        step t, then a release of semaphore sem0 + segment, which that segment acquires; for
        an out-link (kd SIGNAL), at every send point an acquire of the semaphore the segment
        releases after its puts, then a signal if r sent to x at step t."""
        n = self.n
        u, w = (x, r) if kd == WAIT else (r, x)
        q = int(self.qs[np.searchsorted(self.keys, (r * n + u) * n + w)])
        ct = "memory" if self.memory(u, w) else "port"
        msgs = self.msgs[kd].get(r, ())
        ops = []
        for tt, sg in self.points[kd].get(r, []):
            sem = '{"name": "sem_%s", "semaphore_ids": [%d]}' % (
                "release" if kd == WAIT else "acquire", sem0 + sg)
            if kd == SIGNAL:
                ops.append(sem)
            if (tt, x) in msgs:
                ops.append('{"name": "%s", "channel_ids": [0], "channel_type": "%s", '
                           '"t": %d}' % ("wait" if kd == WAIT else "signal", ct, tt))
            if kd == WAIT:
                ops.append(sem)
        if kd == SIGNAL and ct == "port" and ops:
            # the proxy reads a put's source after the kernel may have ended: flush (one
            # thread per dst_buff entry, handleFlush) so the next launch's input is safe
            ops.append('{"name": "flush", "channel_ids": [0], "channel_type": "port", '
                       '"dst_buff": [{"type": "o", "index": 0, "size": 1}]}')
        if len(ops) > MAX_OPERATION:
            raise TopofinderError(f"MSCCL++ plan: rank {r} {'receives' if kd == WAIT else 'sends'}"
                                  f" in {len(self.points[kd][r])} steps; the threadblock of its "
                                  f"link with {x} would hold {len(ops)} ops, more than "
                                  f"MAX_OPERATION = {MAX_OPERATION}")
        self.max_ops = max(self.max_ops, len(ops))
        return ('{"id": %d, "ops": [\n%s], "channels": [{"channel_type": "%s", "channel_ids": '
                '[%d]}], "remote_buffer_refs": []}' % (tb_id, ",\n".join(ops), ct, q * self.k + j))

    def _lists(self, j, row_seg, row_q, row_mem, row_rb):
        """Instance j's local channel and remote-buffer ids per row (position of the global
        id among its threadblock's ids of its type) and per threadblock (rank, segment) the
        text of those lists; refuses a threadblock naming more than 16 of either."""
        rows, k = self.rows, self.k
        gid = np.where(row_q >= 0, row_q * k + j, -1)
        tbkey = rows[:, 0] * (1 << 20) + row_seg
        lists = {}
        local_c = np.full(rows.shape[0], -1, np.int64)
        local_b = np.full(rows.shape[0], -1, np.int64)
        for col, local, what in ((gid, local_c, "c"), (row_rb, local_b, "b")):
            sel = np.flatnonzero(col >= 0)
            key = (tbkey[sel] * 2 + row_mem[sel]) * (1 << 24) + col[sel]
            uniq, inv = _unique(key)
            grp = uniq >> 24
            local[sel] = group_index([grp])[inv]
            for g, ids in _grouped(grp, uniq & ((1 << 24) - 1)):
                tb, mm = divmod(g, 2)
                r, i = divmod(tb, 1 << 20)
                if len(ids) > MAX_CHANNEL:
                    raise TopofinderError(
                        f"MSCCL++ plan: rank {r} threadblock {i} needs {len(ids)} "
                        f"{('port', 'memory')[mm]} "
                        f"{'channels' if what == 'c' else 'remote buffers'}, more than "
                        f"{MAX_CHANNEL}")
                lists.setdefault((r, i), {})[(what, mm)] = ids
        meta = {}
        for key, d in lists.items():
            chs = ", ".join('{"channel_type": "%s", "channel_ids": %s}'
                            % (("port", "memory")[mm], d[("c", mm)])
                            for mm in (0, 1) if ("c", mm) in d)
            rbs = ", ".join('{"access_channel_type": "%s", "remote_buffer_ids": %s}'
                            % (("port", "memory")[mm], d[("b", mm)])
                            for mm in (0, 1) if ("b", mm) in d)
            meta[key] = (chs, rbs)
        return local_c, local_b, meta

    def _ops(self, j, heads, op_of, row_q, row_mem, row_rb, row_opseg):
        """Instance j's op texts (in op order) and per threadblock (rank, segment) the text
        of its channel and remote-buffer lists; ops name both by position in those lists."""
        rows = self.rows
        rk, t, kind, peer = rows[:, 0], rows[:, 1], rows[:, 4], rows[:, 5]
        local_c, local_b, meta = self._lists(j, row_opseg, row_q, row_mem, row_rb)
        a_idx = self.index(np.maximum(rows[:, 6], 0), rk, j)
        b_idx = self.index(np.maximum(rows[:, 7], 0), rk, j)
        owner_c = np.where(np.isin(kind, (PUT, MPUT)), peer, rk)
        c_idx = self.index(np.maximum(rows[:, 8], 0), owner_c, j)
        if rows.shape[0]:
            self.span = max(self.span, int((np.maximum(np.maximum(a_idx, b_idx), c_idx)
                                            + rows[:, 9]).max()))
        bufs = np.array(list(BUFS) + ["-"])          # (code −1: no place)
        la = bufs[rows[:, 6] & 3].tolist()
        lb = bufs[rows[:, 7] & 3].tolist()
        lc = bufs[rows[:, 8] & 3].tolist()
        ai, bi, cix, size = a_idx.tolist(), b_idx.tolist(), c_idx.tolist(), rows[:, 9].tolist()
        lch, lrb, tl, kl = local_c.tolist(), local_b.tolist(), t.tolist(), kind.tolist()
        mem = row_mem.tolist()
        rl, sgl = rk.tolist(), row_opseg.tolist()
        ends = np.r_[heads[1:], rows.shape[0]].tolist()
        texts = []
        for h, e in zip(heads.tolist(), ends):
            kd = kl[h]
            if kd == NOP:
                texts.append(_NOP)
            elif kd == PUT:
                texts.append('{"name": "%s", "src_buff": [%s], "dst_buff": [%s], '
                             '"channel_ids": [%s], "channel_type": "port", "t": %d}' % (
                                 _NAMES[kd],
                                 ", ".join([_SRC % (la[x], ai[x], size[x]) for x in range(h, e)]),
                                 ", ".join([_DST % (lrb[x], cix[x], size[x])
                                            for x in range(h, e)]),
                                 ", ".join([str(lch[x]) for x in range(h, e)]), tl[h]))
            elif kd == MPUT:
                texts.append('{"name": "put", "src_buff": [%s], "dst_buff": [%s], '
                             '"channel_type": "memory", "t": %d}'
                             % (_SRC % (la[h], ai[h], size[h]), _DST % (lrb[h], cix[h], size[h]),
                                tl[h]))
            elif kd in (WAIT, SIGNAL) and tl[h]:     # a receive or send point (_helper)
                r, sg = rl[h], sgl[h]
                ns, base = int(self.nseg[r]), int(self.sem_base[r])
                first = j * base + int(self.sem_first[kd][r]) + sg
                texts.append('{"name": "sem_%s", "semaphore_ids": [%s]}' % (
                    "acquire" if kd == WAIT else "release", ", ".join(
                        [str(first + li * ns) for li in range(len(self.links_of[kd][r]))])))
            elif kd in (WAIT, SIGNAL):
                texts.append('{"name": "%s", "channel_ids": [%s], "channel_type": "%s"%s}' % (
                    _NAMES[kd], ", ".join([str(lch[x]) for x in range(h, e)]),
                    ("port", "memory")[mem[h]], ', "t": %d' % tl[h] if tl[h] else ""))
            elif kd == COPY:
                texts.append('{"name": "copy", "src_buff": [%s], "dst_buff": [%s], "t": %d}'
                             % (_SRC % (la[h], ai[h], size[h]), _SRC % (lc[h], cix[h], size[h]),
                                tl[h]))
            else:
                texts.append('{"name": "re", "src_buff": [%s, %s], "dst_buff": [%s], '
                             '"reduce_op": "sum", "t": %d}'
                             % (_SRC % (la[h], ai[h], size[h]), _SRC % (lb[h], bi[h], size[h]),
                                _SRC % (lc[h], cix[h], size[h]), tl[h]))
        return texts, meta


def _layout_field(layout) -> dict:
    """The ``topofinder`` block's record of an allreduce's piece layout (instance 0: shard
    v's chunk c at base[v] + c·stride[v]; :mod:`.plan_read` maps places back to pieces);
    nothing for NCCL's shard order."""
    if layout is None or layout.name == "shard":
        return {}
    return {"layout": {"name": layout.name, "base": layout.base.tolist(),
                       "stride": layout.stride.tolist()}}


def _grouped(grp: np.ndarray, vals: np.ndarray):
    """(group, list of its values) for sorted ``grp``."""
    if not grp.size:
        return []
    cut = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]]).tolist() + [grp.size]
    g, v = grp.tolist(), vals.tolist()
    return [(g[a], v[a:b]) for a, b in zip(cut[:-1], cut[1:])]


def _unique(key: np.ndarray):
    """``np.unique(key, return_inverse=True)`` by one sort (faster here than numpy's hash)."""
    o = np.argsort(key)
    k = key[o]
    new = np.r_[True, k[1:] != k[:-1]] if k.size else np.zeros(0, bool)
    inv = np.empty(key.size, np.int64)
    inv[o] = np.cumsum(new) - 1
    return k[new], inv
