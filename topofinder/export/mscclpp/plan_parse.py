"""Parse an MSCCL++ execution plan (JSON) as the executor does, refusing what it cannot run.

What the executor reads, from microsoft/mscclpp (commit 1f5f065d) ``src/core/executor/
execution_plan.cc`` (``Impl::Impl``, ``loadExecutionPlan``, ``parseChannels``,
``parseRemoteBuffer``, ``setupChannels``, ``setupRemoteBuffers``, ``setupSemaphores``,
``setupOperations``/``setupOperation``): top-level ``name``, ``collective``, ``protocol``
(``"LL"`` = packets), ``inplace``, optional ``reuse_resources``, ``use_double_scratch_buffer``,
``buffer_alignment`` (16), ``min_message_size``/``max_message_size``,
``num_threads_per_block`` (1024); per gpu ``id`` (= its position), ``input_chunks``,
``output_chunks``, ``scratch_chunks``, ``channels`` (memory/port: ``connected_to``; switch:
``buffer_type`` and ``rank_groups``), ``remote_buffers`` (``rank``, ``type``,
``access_channel_types``), optional ``semaphores`` (``init_value``) and ``threadblocks``
(``id``, ``channels`` of ``channel_type``/``channel_ids``, optional ``remote_buffer_refs``,
``ops``). Every rank parses every gpu's channels and remote buffers, so all are checked.

Where the C++ would crash or silently misread (a missing key read through ``operator[]``, a
chunk count of 0 dividing, a threadblock id that is not its position, a buffer reference whose
access type the buffer lacks, an index past a fixed array) the plan is refused too: one line
naming the field and rank/threadblock/op. Hostile JSON (wrong types, bools for ints, huge or
negative numbers, deep nesting) is refused the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from topofinder.errors import TopofinderError

#: The op names ``getOpType`` accepts (``glre``, which the Python DSL knows, is not among them).
OP_NAMES = frozenset({
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "flush", "re",
    "res", "rre", "rres", "ppkt", "rppkt", "respkt", "cpkt", "upkt", "repkt", "recpkt",
    "recspkt", "glres", "gstore", "gstorepkt", "rlxsignal", "rlxwait", "pipeline",
    "sem_acquire", "sem_release"})
BUFFER_TYPES = {"i": "i", "o": "o", "s": "s"}
CHANNEL_TYPES = frozenset({"memory", "port", "none", "switch"})
#: Largest integer any field may hold (size_t on the executor's hosts).
_U64 = 2 ** 64 - 1
_MAX_TEXT = 256 * 2 ** 20


@dataclass(frozen=True)
class BufRef:
    """One ``src_buff``/``dst_buff`` entry: a local buffer type, a remote buffer (index into the
    threadblock's refs of the op's channel type) or a switch channel; chunk index and count."""

    index: int
    size: int
    type: str | None = None          # "i", "o", "s" for a local buffer
    buffer_id: int | None = None     # remote buffer: position in the threadblock's ref list
    switch_id: int | None = None     # switch channel: position in the threadblock's list


@dataclass
class Op:
    """One operation as ``setupOperation`` fills it (pipeline bodies kept as ``body``)."""

    name: str
    where: str
    channel_type: str | None = None
    channel_ids: tuple[int, ...] = ()
    src: tuple[BufRef, ...] = ()
    dst: tuple[BufRef, ...] = ()
    tbg: tuple[int, int] = (0, 1)              # (tb_id, tbg_size)
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    semaphore_ids: tuple[int, ...] = ()
    unit_size: int | None = None
    num_chunks: int | None = None
    body: tuple["Op", ...] = ()


@dataclass
class Threadblock:
    """Channels (global per-type indices, in op-index order) and remote buffer refs."""

    id: int
    ops: list[Op]
    channels: dict[str, list[int]] = field(default_factory=dict)
    remote_refs: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Gpu:
    """One rank: chunk counts, channel tables, remote buffers, semaphores, threadblocks."""

    rank: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    channels: dict[str, list[int]]               # "memory"/"port" → peer of each channel
    switch: list[tuple[str, tuple[int, ...]]]    # (buffer type, ranks) of each switch channel
    remote_buffers: list[tuple[int, str, tuple[str, ...]]]   # (owner rank, type, access types)
    semaphores: list[int]
    threadblocks: list[Threadblock]


@dataclass
class Plan:
    """The parsed plan; ``packets`` is ``protocol == "LL"``."""

    name: str
    collective: str
    inplace: bool
    packets: bool
    reuse_resources: bool
    double_scratch: bool
    alignment: int
    min_message: int
    max_message: int
    threads: int
    gpus: list[Gpu]


def _fail(where: str, what: str) -> TopofinderError:
    return TopofinderError(f"MSCCL++ plan: {where}: {what}")


def _get(obj, key: str, where: str, required: bool = True):
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        if required:
            raise _fail(where, f"missing '{key}' (the executor reads it unconditionally)")
        return None
    return obj[key]


def _int(value, where: str, lo: int = 0, hi: int = _U64) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"expected an integer, got {json.dumps(value)[:40]}")
    if not lo <= value <= hi:
        raise _fail(where, f"{value} is outside [{lo}, {hi}]")
    return value


def _str(value, where: str, allowed=None) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a string, got {json.dumps(value)[:40]}")
    if allowed is not None and value not in allowed:
        raise _fail(where, f"'{value[:40]}' is not one of {sorted(allowed)}")
    return value


def _list(value, where: str) -> list:
    if not isinstance(value, list):
        raise _fail(where, f"expected a list, got {type(value).__name__}")
    return value


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"expected true/false, got {json.dumps(value)[:40]}")
    return value


def load_document(doc_or_text) -> dict:
    """A plan as a dict: a dict is taken as is, str/bytes are JSON text (size-capped)."""
    if isinstance(doc_or_text, dict):
        return doc_or_text
    if isinstance(doc_or_text, (bytes, bytearray)):
        doc_or_text = bytes(doc_or_text).decode("utf-8", errors="strict")
    if not isinstance(doc_or_text, str):
        raise TopofinderError("MSCCL++ plan: expected a JSON object, text or bytes")
    if len(doc_or_text) > _MAX_TEXT:
        raise TopofinderError(f"MSCCL++ plan: text of {len(doc_or_text)} characters exceeds "
                              f"{_MAX_TEXT}")
    try:
        doc = json.loads(doc_or_text)
    except (ValueError, RecursionError) as exc:
        raise TopofinderError(f"MSCCL++ plan: not JSON ({str(exc).splitlines()[0][:80]})") \
            from None
    if not isinstance(doc, dict):
        raise TopofinderError("MSCCL++ plan: the document is not a JSON object")
    return doc


def _bufref(raw, where: str, chan_type: str | None, tb: Threadblock) -> BufRef:
    index = _int(_get(raw, "index", where), where + " index", 0, 2 ** 32 - 1)
    size = _int(_get(raw, "size", where), where + " size", 0, 2 ** 32 - 1)
    btype = buffer_id = switch_id = None
    if "type" in raw:
        btype = _str(raw["type"], where + " type", BUFFER_TYPES)
    if "buffer_id" in raw:
        buffer_id = _int(raw["buffer_id"], where + " buffer_id", 0, 255)
        if chan_type not in ("memory", "port"):
            raise _fail(where, f"buffer_id on an op of channel_type {chan_type!r} "
                        "(the executor throws 'Invalid channel type')")
        refs = tb.remote_refs.get(chan_type, [])
        if buffer_id >= len(refs):
            raise _fail(where, f"buffer_id {buffer_id} but the threadblock has {len(refs)} "
                        f"{chan_type} remote buffer refs")
    if "switch_channel_id" in raw:
        switch_id = _int(raw["switch_channel_id"], where + " switch_channel_id", 0, 255)
        if switch_id >= len(tb.channels.get("switch", [])):
            raise _fail(where, f"switch_channel_id {switch_id} but the threadblock has "
                        f"{len(tb.channels.get('switch', []))} switch channels")
    if btype is None and buffer_id is None and switch_id is None:
        raise _fail(where, "neither 'type', 'buffer_id' nor 'switch_channel_id' (the executor "
                    "throws 'Invalid buffer type' for a remote offset of type NONE)")
    return BufRef(index, size, btype, buffer_id, switch_id)


def _op(raw, where: str, tb: Threadblock, in_pipeline: bool) -> Op:
    name = _str(_get(raw, "name", where), where + " name", OP_NAMES)
    where = f"{where} ({name})"
    op = Op(name=name, where=where)
    if "channel_type" in raw:
        op.channel_type = _str(raw["channel_type"], where + " channel_type", CHANNEL_TYPES)
    if "channel_ids" in raw:
        ids = _list(raw["channel_ids"], where + " channel_ids")
        op.channel_ids = tuple(_int(c, where + " channel_ids", 0, 255) for c in ids)
    if "tbg_info" in raw:
        t = raw["tbg_info"]
        size = _int(_get(t, "tbg_size", where + " tbg_info"), where + " tbg_size", 1, 2 ** 32 - 1)
        tid = _int(_get(t, "tb_id", where + " tbg_info"), where + " tb_id", 0, size - 1)
        op.tbg = (tid, size)
    for key in ("src_buff", "dst_buff"):
        if key in raw:
            items = _list(raw[key], f"{where} {key}")
            refs = tuple(_bufref(b, f"{where} {key}[{i}]", op.channel_type, tb)
                         for i, b in enumerate(items[:64]))
            if len(items) > 64:
                raise _fail(where, f"{key} has {len(items)} entries")
            if key == "src_buff":
                op.src = refs
            else:
                op.dst = refs
    if "barrier_id" in raw:
        op.barrier_id = _int(raw["barrier_id"], where + " barrier_id", 0, 2 ** 32 - 1)
    if "num_threadblocks" in raw:
        op.num_threadblocks = _int(raw["num_threadblocks"], where + " num_threadblocks",
                                   0, 2 ** 32 - 1)
    if "semaphore_ids" in raw:
        ids = _list(raw["semaphore_ids"], where + " semaphore_ids")
        op.semaphore_ids = tuple(_int(s, where + " semaphore_ids", 0, 2 ** 32 - 1)
                                 for s in ids[:64])
        if len(ids) > 64:
            raise _fail(where, f"semaphore_ids has {len(ids)} entries")
    if "iter_context" in raw:
        ctx = raw["iter_context"]
        op.unit_size = _int(_get(ctx, "unit_size", where + " iter_context"),
                            where + " unit_size", 1, 2 ** 32 - 1)
        op.num_chunks = _int(_get(ctx, "num_chunks", where + " iter_context"),
                             where + " num_chunks", 0, 2 ** 31 - 1)
        body = _list(_get(raw, "ops", where), where + " ops")
        if in_pipeline:
            raise _fail(where, "a pipeline inside a pipeline")
        op.body = tuple(_op(b, f"{where} body op {i}", tb, True)
                        for i, b in enumerate(body[:256]))
        if len(body) > 256:
            raise _fail(where, f"pipeline body of {len(body)} ops")
    if name == "pipeline" and op.unit_size is None:
        raise _fail(where, "pipeline without iter_context")
    if name == "barrier" and (op.barrier_id is None or op.num_threadblocks is None):
        raise _fail(where, "barrier without barrier_id and num_threadblocks")
    return op


def _channels(gpu_raw, where: str, n: int):
    chans: dict[str, list[int]] = {"memory": [], "port": []}
    switch: list[tuple[str, tuple[int, ...]]] = []
    for k, ch in enumerate(_list(_get(gpu_raw, "channels", where), where + " channels")):
        w = f"{where} channels[{k}]"
        ctype = _str(_get(ch, "channel_type", w), w + " channel_type", CHANNEL_TYPES)
        if ctype == "switch":
            btype = _str(_get(ch, "buffer_type", w), w + " buffer_type", BUFFER_TYPES)
            for g, grp in enumerate(_list(_get(ch, "rank_groups", w), w + " rank_groups")):
                _int(_get(grp, "size", f"{w} rank_groups[{g}]"), f"{w} rank_groups[{g}] size")
                ranks = tuple(_int(r, f"{w} rank_groups[{g}] ranks", 0, n - 1)
                              for r in _list(_get(grp, "ranks", f"{w} rank_groups[{g}]"),
                                             f"{w} rank_groups[{g}] ranks"))
                switch.append((btype, ranks))
            continue
        peers = [_int(p, w + " connected_to", 0, n - 1)
                 for p in _list(_get(ch, "connected_to", w), w + " connected_to")]
        if ctype in chans:
            chans[ctype].extend(peers)
    return chans, switch


def parse_plan(doc_or_text) -> Plan:
    """Parse and validate a plan; raise :class:`TopofinderError` (one line) on what the
    executor would refuse, crash on or misread."""
    doc = load_document(doc_or_text)
    name = _str(_get(doc, "name", "top level"), "name")
    collective = _str(_get(doc, "collective", "top level"), "collective")
    inplace = _bool(_get(doc, "inplace", "top level"), "inplace")
    protocol = _str(_get(doc, "protocol", "top level"), "protocol")
    opt = {k: doc.get(k) for k in ("reuse_resources", "use_double_scratch_buffer")}
    for k, v in opt.items():
        if v is not None:
            _bool(v, k)
    align = _int(doc.get("buffer_alignment", 16), "buffer_alignment", 1, 2 ** 31)
    lo = _int(doc.get("min_message_size", 0), "min_message_size")
    hi = _int(doc.get("max_message_size", _U64), "max_message_size")
    threads = _int(doc.get("num_threads_per_block", 1024), "num_threads_per_block", 1, 1024)
    gpus_raw = _list(_get(doc, "gpus", "top level"), "gpus")
    n = len(gpus_raw)
    if n == 0:
        raise _fail("gpus", "empty")
    gpus = [_gpu(g, r, n) for r, g in enumerate(gpus_raw)]
    return Plan(name=name, collective=collective, inplace=inplace, packets=protocol == "LL",
                reuse_resources=bool(opt["reuse_resources"]),
                double_scratch=bool(opt["use_double_scratch_buffer"]), alignment=align,
                min_message=lo, max_message=hi, threads=threads, gpus=gpus)


def _gpu(g, r: int, n: int) -> Gpu:
    """One ``gpus[r]`` entry."""
    w = f"rank {r}"
    gid = _int(_get(g, "id", w), w + " id")
    if gid != r:
        raise _fail(w, f"id {gid} is not its position {r} (the executor throws "
                    "'GPU rank does not match')")
    chunks = [_int(_get(g, k, w), f"{w} {k}", 0, 2 ** 32 - 1)
              for k in ("input_chunks", "output_chunks", "scratch_chunks")]
    for k, c in zip(("input_chunks", "output_chunks"), chunks):
        if c == 0:
            raise _fail(w, f"{k} is 0 (checkMessageSize divides by it)")
    chans, switch = _channels(g, w, n)
    rbufs = []
    for k, rb in enumerate(_list(_get(g, "remote_buffers", w), w + " remote_buffers")):
        wb = f"{w} remote_buffers[{k}]"
        owner = _int(_get(rb, "rank", wb), wb + " rank", 0, n - 1)
        btype = _str(_get(rb, "type", wb), wb + " type", BUFFER_TYPES)
        acc = tuple(_str(a, wb + " access_channel_types", CHANNEL_TYPES)
                    for a in _list(_get(rb, "access_channel_types", wb),
                                   wb + " access_channel_types"))
        rbufs.append((owner, btype, acc))
    sems = []
    if "semaphores" in g:
        for k, s in enumerate(_list(g["semaphores"], w + " semaphores")):
            sems.append(_int(_get(s, "init_value", f"{w} semaphores[{k}]"),
                             f"{w} semaphores[{k}] init_value", 0, 2 ** 32 - 1))
    tbs = [_threadblock(tbraw, t, r, chans, switch, rbufs)
           for t, tbraw in enumerate(_list(_get(g, "threadblocks", w), w + " threadblocks"))]
    return Gpu(r, chunks[0], chunks[1], chunks[2], chans, switch, rbufs, sems, tbs)


def _threadblock(tbraw, t: int, r: int, chans, switch, rbufs) -> Threadblock:
    """One threadblock: its channel and remote-buffer tables, then its ops."""
    wt = f"rank {r} threadblock {t}"
    tid = _int(_get(tbraw, "id", wt), wt + " id")
    if tid != t:
        raise _fail(wt, f"id {tid} is not its position {t} (the executor indexes "
                    "channels by id but ops by position)")
    tb = Threadblock(id=t, ops=[], channels={"memory": [], "port": [], "switch": []},
                     remote_refs={"memory": [], "port": []})
    for c, ch in enumerate(_list(_get(tbraw, "channels", wt), wt + " channels")):
        wc = f"{wt} channels[{c}]"
        ctype = _str(_get(ch, "channel_type", wc), wc + " channel_type", CHANNEL_TYPES)
        if "buff" in ch:
            _str(ch["buff"], wc + " buff", BUFFER_TYPES)
        for cid in _list(_get(ch, "channel_ids", wc), wc + " channel_ids"):
            cid = _int(cid, wc + " channel_ids")
            table = switch if ctype == "switch" else chans.get(ctype)
            if table is None:
                continue
            if cid >= len(table):
                raise _fail(wc, f"{ctype} channel {cid} but rank {r} declares {len(table)}")
            tb.channels[ctype].append(cid)
    for c, ref in enumerate(_list(tbraw.get("remote_buffer_refs", []),
                                  wt + " remote_buffer_refs")):
        wc = f"{wt} remote_buffer_refs[{c}]"
        ctype = _str(_get(ref, "access_channel_type", wc), wc + " access_channel_type",
                     CHANNEL_TYPES)
        for bid in _list(_get(ref, "remote_buffer_ids", wc), wc + " remote_buffer_ids"):
            bid = _int(bid, wc + " remote_buffer_ids")
            if ctype not in ("memory", "port"):
                continue
            if bid >= len(rbufs):
                raise _fail(wc, f"remote buffer {bid} but rank {r} declares {len(rbufs)}")
            if ctype not in rbufs[bid][2]:
                raise _fail(wc, f"remote buffer {bid} is not accessible over {ctype} "
                            f"(its access_channel_types are {list(rbufs[bid][2])})")
            tb.remote_refs[ctype].append(bid)
    ops_raw = _list(_get(tbraw, "ops", wt), wt + " ops")
    if len(ops_raw) > 4096:
        raise _fail(wt, f"{len(ops_raw)} ops")
    tb.ops = [_op(o, f"{wt} op {i}", tb, False) for i, o in enumerate(ops_raw)]
    return tb
