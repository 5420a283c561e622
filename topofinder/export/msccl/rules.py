"""The MSCCL runtimes' parser rules on an XML, every rank (module
:mod:`topofinder.export.msccl.limits` names the sources).

:func:`check_limits` emulates what the msccl-executor-nccl parser and the older
microsoft/msccl parser accept on every rank: XML elements per rank (the loader keeps the
``algo``, every ``gpu`` and the rank's own ``tb`` and ``step`` elements, 4096 in all),
sub-elements per element (1024), attributes per element (16) and value length (255), step
index ``s`` < MSCCL_MAX_NUM_STEPS (64 in the executor's default build, 256 in
microsoft/msccl), threadblocks (executor 32 per channel × 32 channels, msccl 216), send/recv
threadblocks per channel (32), ``cnt`` < 72, offsets in the buffer and in int16, ``depid``
in int8, the spelling of ``coll`` (executor ``reducescatter``, msccl ``reduce_scatter``) and
the ``maxBytes`` rule (executor: 0 = no limit, bounds inclusive; msccl: selected only when
minBytes ≤ size < maxBytes). The step rules run as array operations over one table of all
steps. :func:`shape` counts a written XML's threadblocks and steps without parsing it."""

from __future__ import annotations

import numpy as np

from topofinder.export.msccl.limits import (INT8_MAX, INT16_MAX, MscclCheckError, Runtime,
                                            get_runtime)
from topofinder.export.msccl.parser import (
    CNT, DEPID, DEPS, DSTBUF, DSTOFF, HASDEP, INT32, NATTRS, NOP, READS, RECVS, SENDS, SRCBUF,
    SRCOFF, TYPE, TYPES, WRITES, S, Algo, Gpu, StepLayout, Tb, algo_of, layout_of, type_codes,
)
from topofinder.model.collectives import Collective

def check_limits(xml, runtime: str = "msccl-executor", max_steps: int | None = None) -> dict:
    """Raise MscclCheckError naming the first thing ``runtime``'s parser refuses on some
    rank (module doc); return {"max_steps_per_tb", "max_tbs_per_gpu", "max_nodes_per_rank",
    "steps_per_tb": {gpu: [len per tb]}}."""
    rt = get_runtime(runtime)
    limit = rt.max_steps if max_steps is None else int(max_steps)
    algo = algo_of(xml)
    _check_algo(algo, rt)
    stats = {"max_steps_per_tb": 0, "max_tbs_per_gpu": 0, "max_nodes_per_rank": 0,
             "steps_per_tb": {}}
    for g in algo.gpus:
        lengths, nodes = _check_gpu(algo, g, rt, limit)
        stats["steps_per_tb"][g.id] = lengths
        stats["max_steps_per_tb"] = max(stats["max_steps_per_tb"], max(lengths, default=0))
        stats["max_tbs_per_gpu"] = max(stats["max_tbs_per_gpu"], len(g.tbs))
        stats["max_nodes_per_rank"] = max(stats["max_nodes_per_rank"], nodes)
    raise_first(algo, step_rules(algo, rt))
    return stats


def _check_algo(algo: Algo, rt: Runtime) -> None:
    """The ``<algo>`` element: coll spelling, protocol, attributes, size band, gpus, channels
    and the buffer sizes the collective implies."""
    a, where = algo.attrs, rt.name
    if algo.coll != rt.colls[algo.collective]:
        raise MscclCheckError(f"{where}: coll={algo.coll!r} is not accepted, it spells "
                              f"{algo.collective} as {rt.colls[algo.collective]!r}")
    if algo.proto not in ("Simple", "LL", "LL128"):
        raise MscclCheckError(f"{where}: protocol {algo.proto!r} is not Simple, LL or LL128")
    if len(a) > rt.max_attrs:
        raise MscclCheckError(f"{where}: <algo> has {len(a)} attributes, the parser keeps "
                              f"{rt.max_attrs}")
    for k, v in a.items():
        if len(v) >= rt.max_str or len(k) >= rt.max_str:
            raise MscclCheckError(f"{where}: attribute {k} is longer than {rt.max_str - 1}")
    _check_size_band(a, rt)
    n = algo.ngpus
    if n > rt.max_subs:
        raise MscclCheckError(f"{where}: {n} gpus exceed the XML loader's {rt.max_subs} "
                              "children per element")
    if sorted(g.id for g in algo.gpus) != list(range(n)):
        raise MscclCheckError(f"{where}: gpu ids are not 0..{n - 1} (ngpus={n})")
    if not 1 <= algo.nchannels <= rt.max_channels:
        raise MscclCheckError(f"{where}: nchannels={algo.nchannels} outside 1..{rt.max_channels}")
    c = algo.collective
    g0 = algo.gpus[0]
    ic, oc = g0.i_chunks, g0.o_chunks
    want = {Collective.ALLGATHER: oc == n * ic, Collective.REDUCE_SCATTER: ic == n * oc,
            Collective.ALLREDUCE: ic == oc}[c]
    if not want or algo.nchunksperloop != max(ic, oc):
        raise MscclCheckError(f"{where}: i_chunks={ic}, o_chunks={oc}, nchunksperloop="
                              f"{algo.nchunksperloop} do not fit {c} on {n} gpus")
    for g in algo.gpus:
        if (g.i_chunks, g.o_chunks) != (ic, oc) or g.s_chunks < 0:
            raise MscclCheckError(f"{where}: gpu {g.id} declares other buffer sizes")


def _check_size_band(a: dict, rt: Runtime) -> None:
    """minBytes/maxBytes as the runtime reads them (module doc)."""
    where = rt.name
    try:
        lo = int(a.get("minBytes", 0))
        hi = int(a.get("maxBytes", 0 if rt.max_bytes_zero_unbounded else 1 << 27))
    except ValueError:
        raise MscclCheckError(f"{where}: minBytes/maxBytes are not integers") from None
    if lo < 0 or hi < 0:
        raise MscclCheckError(f"{where}: minBytes/maxBytes must not be negative")
    if rt.max_bytes_zero_unbounded:
        if hi and lo > hi:
            raise MscclCheckError(f"{where}: minBytes {lo} > maxBytes {hi}: never selected")
    elif lo >= hi:
        raise MscclCheckError(f"{where}: selected only when minBytes ≤ size < maxBytes, "
                              f"minBytes {lo}, maxBytes {hi}: never selected")


def _check_tb(algo: Algo, g: Gpu, tb: Tb, rt: Runtime, conns: dict, per_chan: dict,
              at: str) -> None:
    """A threadblock's attributes, peers, channel and connections (one threadblock per
    (direction, peer, channel); at most ``max_tbs_per_channel`` per direction and channel)."""
    if tb.nattrs > rt.max_attrs:
        raise MscclCheckError(f"{at}: more than {rt.max_attrs} attributes")
    for peer in (tb.send, tb.recv):
        if peer < -1 or peer >= algo.ngpus or peer == g.id:
            raise MscclCheckError(f"{at}: peer {peer} is not -1 or another gpu")
    if not 0 <= tb.chan < algo.nchannels:
        raise MscclCheckError(f"{at}: channel {tb.chan} outside 0..{algo.nchannels - 1}")
    for kind, peer in (("send", tb.send), ("recv", tb.recv)):
        if peer >= 0:
            key = (kind, peer, tb.chan)
            if key in conns:
                raise MscclCheckError(f"{at}: shares the {kind} connection to gpu "
                                      f"{peer} on channel {tb.chan} with tb {conns[key]}")
            conns[key] = tb.id
            cnt = per_chan.setdefault((kind, tb.chan), 0) + 1
            per_chan[(kind, tb.chan)] = cnt
            if cnt > rt.max_tbs_per_channel:
                raise MscclCheckError(f"{at}: more than {rt.max_tbs_per_channel} "
                                      f"{kind} threadblocks on channel {tb.chan}")


def _check_gpu(algo: Algo, g: Gpu, rt: Runtime, limit: int) -> tuple[list[int], int]:
    """One rank as its parser loads it: element count, threadblock ids, connections, steps
    per threadblock (the step rules run on all ranks at once, :func:`step_rules`).
    Returns (steps per threadblock in id order, XML elements loaded)."""
    where, n = rt.name, algo.ngpus
    nodes = 1 + n + len(g.tbs) + sum(len(tb.steps) for tb in g.tbs)
    if nodes >= rt.max_nodes:
        raise MscclCheckError(f"{where}: rank {g.id} loads {nodes} XML elements (algo, {n} "
                              f"gpus, its tbs and steps); the parser holds "
                              f"{rt.max_nodes - 1}")
    ids = sorted(tb.id for tb in g.tbs)
    if ids != list(range(len(ids))):
        raise MscclCheckError(f"{where}: gpu {g.id}: threadblock ids are not "
                              f"0..{len(ids) - 1}")
    if len(ids) > rt.max_tbs:
        raise MscclCheckError(f"{where}: gpu {g.id} has {len(ids)} threadblocks; the "
                              f"runtime allows {rt.max_tbs}")
    conns, per_chan, lengths = {}, {}, []
    for tb in sorted(g.tbs, key=lambda x: x.id):
        at = f"{where}: gpu {g.id} tb {tb.id}"
        lengths.append(len(tb.steps))
        _check_tb(algo, g, tb, rt, conns, per_chan, at)
        if len(tb.steps) > limit:
            raise MscclCheckError(
                f"{where}: gpu {g.id} tb {tb.id} has {len(tb.steps)} instructions; "
                f"the limit is {limit} (MSCCL_MAX_NUM_STEPS)")
    return lengths, nodes


def step_rules(algo: Algo, rt: Runtime | None) -> list:
    """(mask over the step table, message of a row) per rule, in the order the parser applies
    them to a step; ``rt`` None: what an execution needs (known type and buffers, peers that
    are gpus, pieces inside the buffers)."""
    lay, tab = layout_of(algo), algo.table
    ty, cnt = tab[:, TYPE], tab[:, CNT].astype(np.int64)
    peers = np.array([(tb.send, tb.recv) for tb in lay.tbs], np.int64).reshape(-1, 2)
    send, recv = peers[lay.step_tb, 0], peers[lay.step_tb, 1]
    nop, active = ty == NOP, (ty != NOP) & (ty >= 0)
    where = "" if rt is None else f"{rt.name}: "

    def here(r):
        tb = lay.tbs[lay.step_tb[r]]
        return f"{where}gpu {lay.gpus[lay.gpu_of[lay.step_tb[r]]].id} tb {tb.id} step {lay.pos[r]}"

    rules = []
    if rt is not None:
        rules += [(tab[:, S] != lay.pos, lambda r: "step numbers are not 0, 1, 2, ..."),
                  (tab[:, NATTRS] > rt.max_attrs, lambda r: f"more than {rt.max_attrs} "
                                                             "attributes")]
    n = algo.ngpus if rt is None else 1 << 30      # the limits check peers per threadblock
    rules += [
        (ty < 0, lambda r: f"type {algo.spelled(r, TYPE)!r} is not one of {', '.join(TYPES)}"),
        ((tab[:, SRCBUF] < 0) | (tab[:, DSTBUF] < 0), lambda r: "buffers must be i, o or s"),
        (np.isin(ty, type_codes(SENDS)) & ((send < 0) | (send >= n)),
         lambda r: f"a send in a threadblock without send peer (send={send[r]})"),
        (np.isin(ty, type_codes(RECVS)) & ((recv < 0) | (recv >= n)),
         lambda r: f"a receive in a threadblock without recv peer (recv={recv[r]})")]
    top = INT32 if rt is None else rt.max_count
    rules.append((active & ((cnt < 0) | (cnt >= top)),
                  lambda r: f"cnt {cnt[r]} outside 0..{top - 1}"))
    for use, bcol, ocol in ((READS, SRCBUF, SRCOFF), (WRITES, DSTBUF, DSTOFF)):
        buf = np.clip(tab[:, bcol], 0, 2).astype(np.int64)
        size = np.take_along_axis(lay.sizes, buf[:, None], 1)[:, 0]
        off = tab[:, ocol].astype(np.int64)
        inside = (off >= 0) & (off + cnt <= size) & (off <= (INT16_MAX if rt else INT32))
        rules.append((active & np.isin(ty, type_codes(use)) & (tab[:, bcol] >= 0) & ~inside,
                      lambda r, b=bcol, o=ocol, size=size: (
                          f"pieces [{tab[r, o]}, {tab[r, o] + cnt[r]}) outside buffer "
                          f"{algo.spelled(r, b)} ({size[r]} chunks, int16 offsets)")))
    if rt is not None:
        rules += _dependency_rules(algo, lay, nop)
    return [(mask, lambda r, m=msg: f"{here(r)}: {m(r)}") for mask, msg in rules]


def _dependency_rules(algo: Algo, lay: StepLayout, nop: np.ndarray) -> list:
    """``depid``/``deps``/``hasdep``: an int8 threadblock id, an existing step, a flag that
    some step at or after it sets; a nop always carries a dependency, a step after nops
    carries one, a threadblock does not end with nops."""
    tab = algo.table
    depid, deps, tgt = tab[:, DEPID], tab[:, DEPS].astype(np.int64), lay.target
    has, safe = depid >= 0, np.maximum(tgt, 0)
    length = (lay.end - lay.start)[safe]
    missing = has & ((tgt < 0) | (deps < 0) | (deps >= length))
    flagged = np.where((tab[:, HASDEP] != 0) & ~nop, np.arange(len(tab)), len(tab))
    next_flag = np.minimum.accumulate(flagged[::-1])[::-1]
    row = np.where(has & ~missing, lay.start[safe] + deps, 0)
    noflag = has & ~missing & (next_flag[row] >= lay.end[safe])
    after_nop = np.zeros(len(tab), bool)
    after_nop[1:] = nop[:-1] & (lay.pos[1:] > 0)
    last = np.zeros(len(tab), bool)
    last[lay.end[lay.end > lay.start] - 1] = True
    return [
        (has & (depid > INT8_MAX), lambda r: f"depid {depid[r]} does not fit int8"),
        (has & (depid <= INT8_MAX) & missing,
         lambda r: f"depends on missing step {depid[r]}/{deps[r]}"),
        (has & (depid <= INT8_MAX) & noflag,
         lambda r: f"waits for tb {depid[r]} step {deps[r]}, but no step there or later sets "
                   "a flag (hasdep=1): it would hang"),
        (depid < -1, lambda r: f"depid {depid[r]} is not -1 or a tb id"),
        ((tab[:, HASDEP] != 0) & (tab[:, HASDEP] != 1), lambda r: "hasdep must be 0 or 1"),
        (nop & (depid < 0), lambda r: "a nop without a dependency shifts the interpreter's "
                                      "step counter"),
        (~nop & after_nop & (depid < 0), lambda r: "follows nops but has no dependency itself "
                                                   "(the parser rejects this)"),
        (last & nop, lambda r: "ends with nops (their dependencies are dropped)")]


def raise_first(algo: Algo, rules: list) -> None:
    """MscclCheckError with the message of the first (row, rule) that fails."""
    first = None
    for i, (mask, msg) in enumerate(rules):
        bad = np.flatnonzero(mask)
        if bad.size and (first is None or (int(bad[0]), i) < first[:2]):
            first = (int(bad[0]), i, msg)
    if first is not None:
        raise MscclCheckError(first[2](first[0]))


def _starts(text: str, tag: str) -> list[int]:
    out, at = [], text.find(tag)
    while at >= 0:
        out.append(at)
        at = text.find(tag, at + 1)
    return out


def shape(text: str) -> dict:
    """{"gpus", "threadblocks", "max_tbs_per_gpu", "max_steps_per_tb"} of an XML as
    :func:`topofinder.export.msccl.writer.to_msccl_xml` writes it (checked already, one
    ``<gpu ``/``<tb ``/``<step `` tag each), by counting tags between the threadblocks'
    starts instead of parsing it again (string scans at C speed)."""
    gpus, tbs = _starts(text, "<gpu "), _starts(text, "<tb ")
    bounds = tbs + [len(text)]
    steps = [text.count("<step ", bounds[i], bounds[i + 1]) for i in range(len(tbs))]
    per_gpu = np.diff(np.searchsorted(tbs, gpus + [len(text)]))
    return {"gpus": len(gpus), "threadblocks": len(tbs),
            "max_tbs_per_gpu": int(per_gpu.max(initial=0)), "max_steps_per_tb": max(steps,
                                                                                     default=0)}
