"""The MSCCL XML writer: the rank-program IR of a step schedule as the XML the MSCCL
interpreter runs (msccl-executor or microsoft/msccl, :mod:`topofinder.export.msccl.limits`).

:func:`to_msccl_xml` checks the schedule against the runtime (:func:`~.fit.check_fits`),
lowers it to the IR with the runtime's limits (:func:`~.fit.lower_to_fit`, module
:mod:`topofinder.export.ir`) and writes it (:func:`_emit`), rank by rank as lines from
arrays, never as an element tree, and not parsed again (its shape comes from the same
arrays, ``shape``; :mod:`topofinder.export.msccl.execution` is the independent check, used
by the tests).

- Channels: K channels' worth of parallelism is K *instances* where they fit the runtime,
  instance j running every threadblock on its own pieces (offsets shifted by
  :func:`~topofinder.export.ir.layout.channel_shift`, scratch by j·s_chunks); instance j,
  lane i runs on channel j·L + i. Where K instances do not fit (every instance repeats a
  rank's threadblocks and steps), one *interleaved* instance: each link deals its slots in
  turn over K lanes (slot i on lane i mod K, then each residue cut into lanes within the
  step limit), so consecutive messages of a link run on K connections side by side, with the
  same instructions and the same sends.
- Ops as steps: send ``s``, receive ``r``, receive-reduce-copy ``rrc``, copy ``cpy``;
  buffers ``i``/``o``/``s``. MSCCL allows one dependency per step, so an op's further
  dependencies become ``nop`` steps before it; ``hasdep`` marks the steps some step waits
  for.
- Runtime: ``msccl-executor`` or ``msccl`` fixes the ``coll`` spelling (``reducescatter`` /
  ``reduce_scatter``), the ``maxBytes`` meaning (executor: 0 = unbounded, inclusive; msccl:
  size < maxBytes) and the default step limit per threadblock (64 / 256).

Every step carries ``t``, the schedule step (ignored by runtimes), and the algo element the
schedule's topology, P and piece layout, so :func:`~.reimport.parse_msccl_xml` recovers the
sends by executing the program (module :mod:`topofinder.export.msccl.execution`).
"""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.layout import PieceLayout, channel_shift
from topofinder.export.ir.program import RankProgram
from topofinder.export.msccl.fit import (check_fits, lane_count, lower_to_fit, runtime_options,
                                         steps_per_tb, xml_steps)
from topofinder.export.msccl.limits import PROTOCOLS
from topofinder.export.msccl.parser import parse
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule

#: The XML ``type`` of each IR op kind (:data:`~topofinder.export.ir.program.KINDS`) and
#: the XML buffer of each IR buffer.
XML_TYPES = ("s", "r", "rrc", "cpy")
XML_BUFFERS = "ios"


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
    :func:`~topofinder.export.msccl.rules.shape` counts it, from the arrays the text is
    written from. Refuses (TopofinderError, one line) anything the runtime cannot load."""
    if protocol not in PROTOCOLS:
        raise TopofinderError(f"protocol {protocol!r}: accepted are {', '.join(PROTOCOLS)}")
    rt, limit = runtime_options(runtime, channels, max_steps)
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
            progs = lower_to_fit(schedule, k, inplace, rt, limit, stage, what, layout, ways,
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
    per_tb = [steps_per_tb(prog) for prog in progs]
    return {"gpus": len(progs), "threadblocks": k * sum(map(len, per_tb)),
            "max_tbs_per_gpu": k * max(map(len, per_tb), default=0),
            "max_steps_per_tb": max((max(c, default=0) for c in per_tb), default=0)}


def _clause(refusal: TopofinderError) -> str:
    """The reason of one of this module's refusals ("what: reason; advice"), without the
    schedule it names or its advice."""
    return str(refusal).split(": ", 1)[-1].split("; ", 1)[0]


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
    kp, lanes = k * p, lane_count(progs)
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
_STEP_LINES = [_STEP.format(kind, sb, db) for kind in XML_TYPES for sb in XML_BUFFERS
               for db in XML_BUFFERS]
_NOP = ('   <step s="%d" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" '
        'depid="%d" deps="%d" hasdep="0" t="%d" />\n')


def _step_table(prog: RankProgram):
    """A resolved rank's instructions in threadblock order as arrays: (rows of the recorded
    fields, the step number of each, its last dependency as (threadblock, step number) or
    -1, its hasdep flag, the first row of each threadblock, and {row: [(threadblock, step
    number) of the dependencies its nops carry]})."""
    rows = prog.arr[prog.order].astype(np.int64)
    m, counts, start = rows.shape[0], prog.tb_len, prog.tb_start
    nd = xml_steps(prog)[prog.order]
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
    marked = np.zeros(m, np.int64)              # hasdep: some step waits for it
    marked[start[db] + di] = 1
    return rows, step, dep_tb, dep_step, marked, start, nops


def _rank_lines(prog: RankProgram, k: int, lanes: int, shift):
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
