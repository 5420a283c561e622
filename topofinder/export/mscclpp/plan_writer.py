"""MSCCL++ execution plans (JSON) of step schedules: threadblocks, channels and the document.

The lowering (:mod:`.plan_lower`) gives every rank one ordered program. Here it becomes the
executor's document (microsoft/mscclpp ``execution_plan.cc``): per rank ``gpus[r]`` with its
buffer chunk counts, its channels (``connected_to``: one channel per link direction and lane;
port channels, memory channels between ranks of one server when ``gpus_per_node`` G > 1),
the remote buffers its puts write, its device semaphores and its threadblocks.

- Threadblocks: the program is cut into consecutive threadblocks of at most 64 ops
  (MAX_OPERATION); threadblock i + 1 starts with ``sem_acquire`` of a semaphore threadblock
  i releases as its last op (each after a nop), so a rank still runs its ops in program
  order. All of a rank's threadblocks spin at once, so their count must stay within the
  GPU's SMs (``max_threadblocks``, 132 on an H100).
- Channels: the k-th channel r→p pairs with the k-th channel p→r, so both ends list the
  channels of a pair of ranks in one order: by (sender, receiver, lane). Ops name channels
  and remote buffers by their index in the threadblock's own lists (at most 16 of each type).
- ``--channels K``: K instances, instance j moving the j-th K-th of every chunk
  (piece j·P + c of a shard, NCCL's order) on its own lanes, threadblocks and semaphores.
- Memory channels: a put is a copy by all threads that does not signal (``handlePut``
  returns before the signal for memory channels), so such a message is its puts, a nop and a
  ``signal``.
- Every data op carries ``t``, its schedule step (the executor ignores it), so
  :mod:`.plan_read` recovers the sends. 32-bit offsets bound the message: the plan serves
  sizes up to :func:`largest_message` (``max_message_size``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule

from .plan_lower import (BUFS, COPY, NOP, PER_OP, PUT, PWS, PWSF, REDUCE, SIGNAL, WAIT,
                         lower)

#: The executor's compile-time limits (``execution_common.hpp``) and the resident bound.
MAX_OPERATION = 64
MAX_CHANNEL = 16
H100_SMS = 132
U32 = 2 ** 32 - 1
ALIGNMENT = 16
PLAN_FORMAT = "topofinder-mscclpp-plan"
PLAN_VERSION = 1
#: The executor's spelling of each collective.
COLL_NAMES = {Collective.ALLGATHER: "allgather", Collective.REDUCE_SCATTER: "reducescatter",
              Collective.ALLREDUCE: "allreduce"}


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
    return {Collective.ALLGATHER: (kp, n * kp), Collective.REDUCE_SCATTER: (n * kp, kp),
            Collective.ALLREDUCE: (n * kp, n * kp)}[coll]


def check_bounds(schedule: StepSchedule, channels: int = 1, gpus_per_node: int = 1,
                 min_bytes: int = 0, max_bytes: int | None = None,
                 max_threadblocks: int = H100_SMS) -> None:
    """Refuse, before any lowering, what no plan of ``schedule`` can do, from lower bounds:
    the message sizes asked beyond 32-bit offsets (the message buffer alone spans N·K·P
    chunks), more channels on a rank than one threadblock holds (its first threadblock
    handshakes on all of them), and more threadblocks than ``max_threadblocks`` (every
    link message needs one op at the sender, every step with receives one wait and a nop at
    the receiver)."""
    n, k, p = schedule.topology.n, channels, schedule.shard_chunks
    what = f"MSCCL++ plan of {schedule.topology.expr} {schedule.collective}"
    inp, out = _chunks(schedule.collective, n, k * p)
    msg = out if schedule.collective == Collective.ALLGATHER else inp
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
    recv_steps = np.unique(s[:, 0] * n + s[:, 5]) % n
    ops = sends + 2 * np.bincount(recv_steps, minlength=n) + 1
    need = k * -(-ops // MAX_OPERATION)
    if need.max() > max_threadblocks:
        r = int(need.argmax())
        raise TopofinderError(f"{what}: rank {r} needs at least {int(need[r])} threadblocks "
                              f"({int(ops[r])} ops × {k} instance(s), {MAX_OPERATION} ops "
                              f"each), more than the {max_threadblocks} resident at once")


def to_mscclpp_plan(schedule: StepSchedule, channels: int = 1, inplace: bool = False,
                    gpus_per_node: int = 1, min_bytes: int = 0, max_bytes: int | None = None,
                    name: str | None = None, max_threadblocks: int = H100_SMS,
                    shape: dict | None = None) -> str:
    """The MSCCL++ execution plan of ``schedule`` as JSON text (module doc). ``channels``: K
    instances; ``inplace``: NCCL's in-place buffers (one buffer: allgather's output,
    reduce-scatter's and allreduce's input); ``gpus_per_node`` G: ranks r // G alike share a
    server (memory channels between them, ``ranks per node`` of the NCCL shim's match);
    ``min_bytes``/``max_bytes``: the message sizes it serves (allgather: the whole output;
    else the input), default up to the largest whose offsets fit 32 bits. ``shape``: filled
    with :class:`PlanShape`'s fields. Refuses (one line) what does not fit."""
    if channels < 1 or gpus_per_node < 1:
        raise TopofinderError("--channels and --gpus-per-node must be positive")
    if min_bytes < 0 or (max_bytes is not None and max_bytes < min_bytes):
        raise TopofinderError(f"size band [{min_bytes}, {max_bytes}] bytes: need 0 ≤ "
                              "min-bytes ≤ max-bytes")
    coll, n = schedule.collective, schedule.topology.n
    if coll not in COLL_NAMES:
        raise TopofinderError(f"MSCCL++ plans are written for {', '.join(COLL_NAMES)}")
    check_bounds(schedule, channels, gpus_per_node, min_bytes, max_bytes, max_threadblocks)
    low = lower(schedule, inplace, split_shards=channels > 1)
    plan = _Plan(schedule, low, channels, inplace, gpus_per_node)
    gpus = [plan.gpu(r) for r in range(n)]
    tbs = [len(g[1]) for g in gpus]
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
        shape.update(info.__dict__)
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
                           "tau_exact": str(schedule.tau)}}
    text = json.dumps(head)[:-1] + ', "gpus": [\n'
    return text + ",\n".join(g[0] for g in gpus) + "\n]}\n"


def _ref(buf: int, idx: int, size: int) -> str:
    return '{"type": "%s", "index": %d, "size": %d}' % (BUFS[buf], idx, size)


class _Plan:
    """Channels, remote buffers, threadblocks and text of every rank (module doc)."""

    def __init__(self, schedule: StepSchedule, low: dict, k: int, inplace: bool, g: int):
        self.n, self.p, self.k, self.g = schedule.topology.n, schedule.shard_chunks, k, g
        self.coll, self.inplace = schedule.collective, inplace
        self.low_reduce_steps = schedule.reduce_steps \
            if self.coll == Collective.ALLREDUCE else 0
        rows = low["rows"]
        self.rows = rows
        self.scratch = low["scratch"]
        ends = np.cumsum(np.bincount(rows[:, 0], minlength=self.n))
        self.bounds = np.r_[0, ends]
        links = low["links"]
        self.peers_of = [[] for _ in range(self.n)]       # (u, w) links at each rank, sorted
        for key in links.tolist():
            u, w = divmod(key, self.n)
            self.peers_of[u].append((u, w))
            self.peers_of[w].append((u, w))
        # buffers whose index is a piece v·P + c (sharded) rather than a chunk c of one shard
        small = {Collective.ALLGATHER: {0}, Collective.REDUCE_SCATTER: {1},
                 Collective.ALLREDUCE: set()}[self.coll]
        self.sharded = [b not in small for b in range(2)]
        self.span = 0
        self.max_ops = 0

    def ctype(self, u: int, w: int) -> str:
        return "memory" if self.g > 1 and u // self.g == w // self.g else "port"

    def index(self, rank: int, buf: int, idx: int, j: int) -> int:
        """Index in instance j of a place of the lowering's one-instance program."""
        if self.k == 1:
            return idx
        if buf == 2:
            return idx + j * int(self.scratch[rank])
        p = self.p
        if self.sharded[buf]:
            v, c = divmod(idx, p)
            return v * self.k * p + j * p + c
        return j * p + idx

    def ops(self, r: int) -> list:
        """Rank r's ops in program order: (kind, t, rows of the op)."""
        a, b = int(self.bounds[r]), int(self.bounds[r + 1])
        rows = self.rows[a:b]
        if not rows.shape[0]:
            return []
        key = rows[:, 1:4]
        new = np.r_[True, (key[1:] != key[:-1]).any(axis=1)]
        heads = np.flatnonzero(new).tolist() + [rows.shape[0]]
        lst = rows.tolist()
        return [lst[x:y] for x, y in zip(heads[:-1], heads[1:])]

    def gpu(self, r: int) -> tuple[str, list]:
        """Rank r's ``gpus`` entry as text and its threadblocks."""
        k = self.k
        chans = {"port": [], "memory": []}
        chan_id = {}
        for (u, w) in sorted(set(self.peers_of[r]), key=lambda lk: (lk[0] + lk[1] - r, lk)):
            for j in range(k):
                t = self.ctype(u, w)
                chan_id[(u, w, j)] = (t, len(chans[t]))
                chans[t].append(w if u == r else u)
        ops = self._split(self._expand(r))
        nseg = len(ops)
        remote, remote_id = [], {}
        tbs = []
        for j in range(k):
            for i, seg in enumerate(ops):
                sem_in = j * (nseg - 1) + i - 1 if i > 0 else None
                sem_out = j * (nseg - 1) + i if i < nseg - 1 else None
                tbs.append(self._threadblock(r, j, len(tbs), seg, sem_in, sem_out, chan_id,
                                             remote, remote_id))
        inp, out = _chunks(self.coll, self.n, k * self.p)
        channels = ", ".join('{"channel_type": "%s", "connected_to": %s}' % (t, chans[t])
                             for t in ("port", "memory") if chans[t])
        rb = ", ".join('{"rank": %d, "type": "%s", "access_channel_types": ["%s"]}' % x
                       for x in remote)
        sems = ", ".join(['{"init_value": 0}'] * (k * (nseg - 1)))
        text = ('{"id": %d, "input_chunks": %d, "output_chunks": %d, "scratch_chunks": %d, '
                '"channels": [%s], "remote_buffers": [%s], "semaphores": [%s], '
                '"threadblocks": [\n%s]}' % (r, inp, out, k * int(self.scratch[r]), channels,
                                              rb, sems, ",\n".join(tbs)))
        self.span = max(self.span, inp, out, k * int(self.scratch[r]))
        return text, tbs

    def _expand(self, r: int) -> list:
        """Rank r's ops as (name, t, rows), memory-channel messages rewritten (module doc)
        and mixed-type waits and signals split by channel type."""
        out = []
        for op in self.ops(r):
            kind, t = op[0][4], op[0][1]
            if kind in (PUT, PWS, PWSF):
                w = op[0][5]
                if self.ctype(r, w) == "memory":
                    out.extend(("mput", t, [row]) for row in op)
                    if kind != PUT:
                        out.append(("nop", t, []))
                        out.append(("msignal", t, [op[0]]))
                    continue
            if kind in (WAIT, SIGNAL):
                for ct in ("port", "memory"):
                    part = [row for row in op if self.ctype(r, row[5]) == ct]
                    if part:
                        out.append((kind, t, part))
                continue
            out.append((kind, t, op))
        return out

    def _split(self, ops: list) -> list:
        """Consecutive segments, each within MAX_OPERATION with its handover ops."""
        m = len(ops)
        if m <= MAX_OPERATION:
            return [ops]
        segs, at = [ops[:MAX_OPERATION - 2]], MAX_OPERATION - 2
        while m - at > MAX_OPERATION - 2:
            segs.append(ops[at:at + MAX_OPERATION - 4])
            at += MAX_OPERATION - 4
        segs.append(ops[at:])
        return segs

    def _threadblock(self, r, j, tb_id, seg, sem_in, sem_out, chan_id, remote, remote_id):
        """One threadblock's text: instance j's copy of ``seg`` between its handover ops."""
        lch = {"port": [], "memory": []}
        lpos = {}
        lrb = {"port": [], "memory": []}
        lrpos = {}

        def chan(u, w):
            t, gid = chan_id[(u, w, j)]
            if (t, gid) not in lpos:
                lpos[(t, gid)] = len(lch[t])
                lch[t].append(gid)
            return t, lpos[(t, gid)]

        def rbuf(w, buf, t):
            key = (w, buf, t)
            if key not in remote_id:
                remote_id[key] = len(remote)
                remote.append((w, BUFS[buf], t))
            gid = remote_id[key]
            if (t, gid) not in lrpos:
                lrpos[(t, gid)] = len(lrb[t])
                lrb[t].append(gid)
            return lrpos[(t, gid)]

        idx = self.index
        texts = []
        if sem_in is not None:
            texts += ['{"name": "sem_acquire", "semaphore_ids": [%d]}' % sem_in,
                      '{"name": "nop"}']
        for kind, t, op in seg:
            if kind in (PUT, PWS, PWSF):
                w = op[0][5]
                ct, c = chan(r, w)
                srcs, dsts = [], []
                for row in op:
                    a, cc, size = row[6], row[8], row[9]
                    srcs.append(_ref(a & 3, idx(r, a & 3, a >> 2, j), size))
                    dsts.append('{"buffer_id": %d, "index": %d, "size": %d}'
                                % (rbuf(w, cc & 3, ct), idx(w, cc & 3, cc >> 2, j), size))
                texts.append('{"name": "%s", "src_buff": [%s], "dst_buff": [%s], '
                             '"channel_ids": [%s], "channel_type": "port", "t": %d}'
                             % (("put", "pws", "pwsf")[kind], ", ".join(srcs),
                                ", ".join(dsts), ", ".join([str(c)] * len(op)), t))
            elif kind == "mput":
                row = op[0]
                w, a, cc, size = row[5], row[6], row[8], row[9]
                texts.append('{"name": "put", "src_buff": [%s], "dst_buff": [{"buffer_id": '
                             '%d, "index": %d, "size": %d}], "channel_type": "memory", '
                             '"t": %d}' % (_ref(a & 3, idx(r, a & 3, a >> 2, j), size),
                                           rbuf(w, cc & 3, "memory"),
                                           idx(w, cc & 3, cc >> 2, j), size, t))
            elif kind == "msignal":
                ct, c = chan(r, op[0][5])
                texts.append('{"name": "signal", "channel_ids": [%d], "channel_type": '
                             '"memory", "t": %d}' % (c, t))
            elif kind in (WAIT, SIGNAL):
                ids = []
                for row in op:
                    link = (row[5], r) if (kind == WAIT) == (t > 0) else (r, row[5])
                    ct, c = chan(*link)
                    ids.append(str(c))
                tail = ', "t": %d' % t if t > 0 else ""
                texts.append('{"name": "%s", "channel_ids": [%s], "channel_type": "%s"%s}'
                             % ("wait" if kind == WAIT else "signal", ", ".join(ids), ct,
                                tail))
            elif kind == NOP or kind == "nop":
                texts.append('{"name": "nop"}')
            elif kind == COPY:
                row = op[0]
                a, cc, size = row[6], row[8], row[9]
                texts.append('{"name": "copy", "src_buff": [%s], "dst_buff": [%s], "t": %d}'
                             % (_ref(a & 3, idx(r, a & 3, a >> 2, j), size),
                                _ref(cc & 3, idx(r, cc & 3, cc >> 2, j), size), t))
            elif kind == REDUCE:
                row = op[0]
                a, b, cc, size = row[6], row[7], row[8], row[9]
                texts.append('{"name": "re", "src_buff": [%s, %s], "dst_buff": [%s], '
                             '"reduce_op": "sum", "t": %d}'
                             % (_ref(a & 3, idx(r, a & 3, a >> 2, j), size),
                                _ref(b & 3, idx(r, b & 3, b >> 2, j), size),
                                _ref(cc & 3, idx(r, cc & 3, cc >> 2, j), size), t))
        if sem_out is not None:
            texts += ['{"name": "nop"}',
                      '{"name": "sem_release", "semaphore_ids": [%d]}' % sem_out]
        self.max_ops = max(self.max_ops, len(texts))
        for t in ("port", "memory"):
            if len(lch[t]) > MAX_CHANNEL or len(lrb[t]) > MAX_CHANNEL:
                raise TopofinderError(f"MSCCL++ plan: rank {r} threadblock {tb_id} needs "
                                      f"{len(lch[t])} {t} channels and {len(lrb[t])} remote "
                                      f"buffers, more than {MAX_CHANNEL}")
        chs = ", ".join('{"channel_type": "%s", "channel_ids": %s}' % (t, lch[t])
                        for t in ("port", "memory") if lch[t])
        rbs = ", ".join('{"access_channel_type": "%s", "remote_buffer_ids": %s}' % (t, lrb[t])
                        for t in ("port", "memory") if lrb[t])
        return ('{"id": %d, "ops": [\n%s], "channels": [%s], "remote_buffer_refs": [%s]}'
                % (tb_id, ",\n".join(texts), chs, rbs))
