"""What each MSCCL++ op does, as a generator per threadblock (see :mod:`.plan_exec` for the
semantics and their sources in ``execution_kernel.hpp``). A generator yields a ``_Wait`` when
the op cannot complete yet (a wait's ticket, a barrier, a semaphore, a packet's flag)."""

from __future__ import annotations

from topofinder.errors import TopofinderError

from .plan_exec import Run, _TB, _Wait
from .plan_parse import BufRef, Op
from .plan_state import BAD, add_values, as_data, data_of, packets_of

_LOCAL_DATA = {"copy", "re", "res", "rre", "rres", "put", "pws", "pwsf", "get", "ppkt", "rppkt",
               "respkt", "repkt", "recspkt", "recpkt", "upkt", "cpkt", "glres", "gstore",
               "gstorepkt"}


def run_threadblock(run: Run, st: _TB):
    """Every op of the threadblock in order, then a final sync (kernel end)."""
    for op in st.tb.ops:
        if op.name == "pipeline":
            for i in range(op.num_chunks):
                for inner in op.body:
                    yield from _op(run, st, inner, i * run.G, run.G)
        else:
            yield from _op(run, st, op, 0, None)


def _chan(run: Run, st: _TB, op: Op, c: int, ctype: str) -> int:
    table = st.tb.channels[ctype]
    if c >= len(table):
        raise TopofinderError(f"MSCCL++ plan: {op.where}: {ctype} channel {c} but the "
                              f"threadblock holds {len(table)}")
    return table[c]


def _flag(st: _TB) -> int:
    return st.launch


def _op(run: Run, st: _TB, op: Op, off: int, unit):
    name = op.name
    if name == "nop":
        run.sync(st, op)
    elif name in ("signal", "rlxsignal"):
        _signal(run, st, op, relaxed=name == "rlxsignal")
    elif name in ("wait", "rlxwait"):
        yield from _wait(run, st, op, relaxed=name == "rlxwait")
    elif name == "flush":
        _flush(run, st, op)
    elif name == "barrier":
        yield from _barrier(run, st, op)
    elif name in ("sem_acquire", "sem_release"):
        yield from _sem(run, st, op, name == "sem_acquire")
    elif name in _LOCAL_DATA:
        yield from _data(run, st, op, off, unit)
    else:       # pragma: no cover - the parser admits no other name
        raise TopofinderError(f"MSCCL++ plan: {op.where}: op not modelled")


def _sem_key(run: Run, st: _TB, ctype: str, c: int):
    """The semaphore a signal on ``st``'s channel ``c`` increments (the paired channel's)."""
    peer = run.peer[(st.r, ctype, c)]
    paired = run.pair[(st.r, ctype, c)]
    if paired is None:
        return ("unpaired", ctype, st.r, c, peer)
    return (peer, ctype, paired)


def _signal(run: Run, st: _TB, op: Op, relaxed: bool):
    ctype = op.channel_type
    if ctype not in ("memory", "port"):
        return
    relaxed = relaxed and ctype == "memory"
    for tid, cid in enumerate(op.channel_ids):
        c = _chan(run, st, op, cid, ctype)
        node = run.event(st, op, tid)
        if ctype == "port":
            node = run.port_lane(st, op, c, node, "signal")
        run.signals[_sem_key(run, st, ctype, c)].append(
            (node, st.launch, relaxed, (st.r, st.tb.id, tid), st.start))


def _wait(run: Run, st: _TB, op: Op, relaxed: bool):
    ctype = op.channel_type
    if ctype not in ("memory", "port"):
        return
    relaxed = relaxed and ctype == "memory"
    tickets = []
    for tid, cid in enumerate(op.channel_ids):
        key = (st.r, ctype, _chan(run, st, op, cid, ctype))
        run.expected[key] += 1
        tickets.append((tid, key, run.expected[key]))
    test = lambda: all(len(run.signals[k]) >= t for _, k, t in tickets)   # noqa: E731
    if not test():
        peers = sorted({run.peer[k] for _, k, _ in tickets})
        yield _Wait(test, f"{op.where}: a signal from rank(s) {peers}")
    for tid, key, ticket in tickets:
        node = run.event(st, op, tid)
        run.waits[key].append((node, st.launch, ticket, relaxed, (st.r, st.tb.id, tid)))


def _flush(run: Run, st: _TB, op: Op):
    for tid in range(len(op.dst)):
        if tid >= len(op.channel_ids):
            raise TopofinderError(f"MSCCL++ plan: {op.where}: flushes {len(op.dst)} channels "
                                  f"(one per dst_buff) but names {len(op.channel_ids)}")
        c = _chan(run, st, op, op.channel_ids[tid], "port")
        run.event(st, op, tid, cross=[run.lane.get((st.r, c))])
    if not op.dst and op.channel_ids:
        run.notes.add("flush without dst_buff flushes nothing (handleFlush serves nOutputs "
                      "channels)")


def _barrier(run: Run, st: _TB, op: Op):
    key = (st.r, op.barrier_id)
    n = op.num_threadblocks
    if run.barrier_n.setdefault(key, n) != n:
        raise TopofinderError(f"MSCCL++ plan: {op.where}: barrier {op.barrier_id} used with "
                              f"{n} and {run.barrier_n[key]} threadblocks")
    arrivals = run.barriers[key]
    node = run.sync(st, op, what="barrier arrival")
    arrivals.append(node)
    gen = (len(arrivals) - 1) // n
    test = lambda: len(arrivals) >= (gen + 1) * n     # noqa: E731
    if not test():
        yield _Wait(test, f"{op.where}: barrier {op.barrier_id} ({n} threadblocks)")
    run.sync(st, op, cross=arrivals[gen * n:(gen + 1) * n])


def _sem(run: Run, st: _TB, op: Op, acquire: bool):
    keys = [(st.r, s) for s in op.semaphore_ids]
    if acquire:
        for tid, key in enumerate(keys):
            test = lambda key=key: run.dsem[key] > 0      # noqa: E731
            if not test():
                yield _Wait(test, f"{op.where}: device semaphore {key[1]}")
            run.dsem[key] -= 1
            node = run.event(st, op, tid)
            run.sem_events[key][1].append((node, (st.r, st.tb.id, tid)))
    else:
        for tid, key in enumerate(keys):
            run.dsem[key] += 1
            node = run.event(st, op, tid)
            run.sem_events[key][0].append((node, (st.r, st.tb.id, tid)))


# ------------------------------------------------------------------------ data ops
def _packets_ready(run: Run, locs, flag):
    return lambda: all(data_of(run.mem.read(*lc), flag) is not None for lc in locs)


def _read_packets(run: Run, node: int, lc, flag):
    cells = run.rd(node, lc)
    for w in run.mem.writers(*lc):
        run.graph.add_edge(w, node)
    return data_of(cells, flag)


def _switch(run: Run, st: _TB, op: Op, ref, off, unit, packet=False, scr=False):
    """Every (rank, storage, start, n) of a switch channel reference's group."""
    sw = st.tb.channels["switch"][ref.switch_id]
    btype, ranks = run.plan.gpus[st.r].switch[sw]
    out = []
    for r in ranks:
        fake = _TB(r, st.tb, st.launch, st.start)
        out.append(run.loc(fake, op, BufRef(ref.index, ref.size, btype), packet, scr, off, unit))
    return out


def _need(op: Op, n_src: int, n_dst: int):
    if len(op.src) < n_src or len(op.dst) < n_dst:
        raise TopofinderError(f"MSCCL++ plan: {op.where}: needs {n_src} src_buff and {n_dst} "
                              f"dst_buff entries, has {len(op.src)} and {len(op.dst)}")


def _local_src0(op: Op, i: int):
    """``src_buff[0]``'s buffer type at ``src_buff[i]``'s offset (memory put, ppkt)."""
    s, s0 = op.src[i], op.src[0]
    return BufRef(s.index, s.size, s0.type, s0.buffer_id, s0.switch_id)


def _data(run: Run, st: _TB, op: Op, off, unit):
    """A data op: wait for its packets (if it reads any), then one node for all threads."""
    name, flag, loc = op.name, _flag(st), run.loc
    if name in ("copy", "re", "res", "rre", "rres", "upkt", "cpkt", "respkt", "repkt",
                "recspkt", "recpkt", "rppkt", "gstore", "gstorepkt", "glres"):
        _need(op, 1, 1 if name != "rppkt" else 0)
    pkt_locs = []
    if name in ("upkt", "rppkt"):     # local scratch, whatever src_buff[0] says
        pkt_locs = [loc(st, op, BufRef(op.src[0].index, op.src[0].size, "s"), packet=True)]
    elif name in ("respkt", "repkt", "recspkt", "recpkt"):
        pkt_locs = [loc(st, op, BufRef(op.src[k].index, op.src[0].size, "s"), packet=True)
                    for k in range(1, len(op.src))]
    elif name == "gstorepkt":
        pkt_locs = [loc(st, op, op.src[0], packet=True)]
    if pkt_locs:
        test = _packets_ready(run, pkt_locs, flag)
        if not test():
            yield _Wait(test, f"{op.where}: packets of launch {flag}")
    node = run.event(st, op, None)
    pipe = {"off": off, "unit": unit}
    _HANDLERS[name](run, st, op, node, pipe, pkt_locs, flag)


def _copy(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    vals = as_data(run.rd(node, run.loc(st, op, op.src[0], **pipe)))
    run.wr(node, run.loc(st, op, op.dst[0], **pipe), vals)


def _reduce(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    """``re``/``res`` (local inputs) and ``rre``/``rres`` (remote inputs), size of src[0]."""
    name, size = op.name, op.src[0].size
    base = run.loc(st, op, op.src[0], **pipe)
    acc = as_data(run.rd(node, base))
    for ref in op.src[1:]:
        if name in ("re", "res") and ref.buffer_id is not None:
            raise TopofinderError(f"MSCCL++ plan: {op.where}: {name} reads local buffers "
                                  "only (src_buff[1:] must have 'type')")
        if name in ("rre", "rres") and ref.buffer_id is None:
            raise TopofinderError(f"MSCCL++ plan: {op.where}: {name} reads remote "
                                  "buffers (src_buff[1:] need 'buffer_id')")
        lc = run.loc(st, op, BufRef(ref.index, size, ref.type, ref.buffer_id), **pipe)
        acc = [add_values(a, b, run.high) for a, b in zip(acc, as_data(run.rd(node, lc)))]
    run.wr(node, run.loc(st, op, op.dst[0], **pipe), acc[:base[3]])
    if name in ("res", "rres"):
        for ref in op.dst[1:]:
            _remote_only(op, ref)
            run.wr(node, run.loc(st, op, BufRef(ref.index, size, None, ref.buffer_id), **pipe),
                   acc)


def _put(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    """Memory channel: a direct copy per dst (no signal, whatever the name); port: proxy."""
    if op.channel_type == "port":
        _port_puts(run, st, op, node, pipe, signal=op.name != "put", flush=op.name == "pwsf")
        return
    for i, ref in enumerate(op.dst):
        _remote_only(op, ref)
        src = run.loc(st, op, _local_src0(op, min(i, len(op.src) - 1)), **pipe)
        dst = run.loc(st, op, ref, **pipe)
        run.wr(node, dst, as_data(run.rd(node, src[:3] + (dst[3],))))


def _get(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    """Remote src[i] at dst[i]'s offset → local dst[i] buffer at src[i]'s offset."""
    if op.channel_type == "port":
        raise TopofinderError(f"MSCCL++ plan: {op.where}: get over a port channel")
    if len(op.dst) < len(op.src):
        raise TopofinderError(f"MSCCL++ plan: {op.where}: get needs a dst_buff per src_buff")
    for s, d in zip(op.src, op.dst):
        remote = run.loc(st, op, BufRef(d.index, s.size, None, s.buffer_id), **pipe)
        local = run.loc(st, op, BufRef(s.index, s.size, d.type), **pipe)
        run.wr(node, local, as_data(run.rd(node, remote)))


def _ppkt(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    if op.channel_type == "port":
        _port_puts(run, st, op, node, pipe, packet=True)
        return
    for i, ref in enumerate(op.dst):
        _remote_only(op, ref)
        vals = as_data(run.rd(node, run.loc(st, op, _local_src0(op, min(i, len(op.src) - 1)))))
        size = op.src[min(i, len(op.src) - 1)].size
        run.wr(node, run.loc(st, op, BufRef(ref.index, size, None, ref.buffer_id), packet=True),
               packets_of(vals, flag))


def _rppkt(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    vals = _read_packets(run, node, pkt_locs[0], flag)
    if op.channel_type == "port":
        _port_puts(run, st, op, node, pipe, packet=True, from_scratch=True)
        return
    for ref in op.dst:
        _remote_only(op, ref)
        run.wr(node, run.loc(st, op, BufRef(ref.index, op.src[0].size, None, ref.buffer_id),
                             packet=True), packets_of(vals, flag))


def _reduce_packets(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    """src[0] (data) + packets of src[1:] in local scratch → dst[0] (data); ``rec*`` also
    dst[1] as packets; ``*s*`` also the remaining dst as remote packets."""
    name, size = op.name, op.src[0].size
    acc = as_data(run.rd(node, run.loc(st, op, op.src[0])))
    for lc in pkt_locs:
        acc = [add_values(a, b, run.high) for a, b in zip(acc, _read_packets(run, node, lc, flag))]
    run.wr(node, run.loc(st, op, BufRef(op.dst[0].index, size, op.dst[0].type)), acc)
    first_remote = 1
    if name in ("recspkt", "recpkt"):
        _need(op, 1, 2)
        d1 = op.dst[1]
        run.wr(node, run.loc(st, op, BufRef(d1.index, size, d1.type), packet=True),
               packets_of(acc, flag))
        first_remote = 2
    if name in ("respkt", "recspkt"):
        for ref in op.dst[first_remote:]:
            _remote_only(op, ref)
            run.wr(node, _mem_remote(run, st, op, ref, size, packet=True), packets_of(acc, flag))


def _upkt(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    vals = _read_packets(run, node, pkt_locs[0], flag)
    d = op.dst[0]
    run.wr(node, run.loc(st, op, BufRef(d.index, op.src[0].size, d.type)), vals)


def _cpkt(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    vals = as_data(run.rd(node, run.loc(st, op, op.src[0])))
    d = op.dst[0]
    run.wr(node, run.loc(st, op, BufRef(d.index, op.src[0].size, d.type), packet=True),
           packets_of(vals, flag))


def _multimem(run: Run, st: _TB, op: Op, node, pipe, pkt_locs, flag):
    """``glres`` load-reduces the group's src and stores to all; ``gstore``/``gstorepkt``
    store local data/packets to every rank of the group."""
    if op.name == "glres":
        vals = None
        for lc in _switch(run, st, op, op.src[0], **pipe):
            got = as_data(run.rd(node, lc))
            vals = got if vals is None else [add_values(a, b, run.high)
                                             for a, b in zip(vals, got)]
        targets = _switch(run, st, op, op.dst[0], **pipe)
    elif op.name == "gstore":
        vals = as_data(run.rd(node, run.loc(st, op, op.src[0], **pipe)))
        targets = _switch(run, st, op, op.dst[0], **pipe)
    else:
        vals = packets_of(_read_packets(run, node, pkt_locs[0], flag), flag)
        targets = _switch(run, st, op, op.dst[0], 0, None, packet=True, scr=True)
    for lc in targets:
        run.wr(node, lc, vals)


_HANDLERS = {"copy": _copy, "re": _reduce, "res": _reduce, "rre": _reduce, "rres": _reduce,
             "put": _put, "pws": _put, "pwsf": _put, "get": _get, "ppkt": _ppkt,
             "rppkt": _rppkt, "respkt": _reduce_packets, "repkt": _reduce_packets,
             "recspkt": _reduce_packets, "recpkt": _reduce_packets, "upkt": _upkt,
             "cpkt": _cpkt, "glres": _multimem, "gstore": _multimem, "gstorepkt": _multimem}


def _remote_only(op: Op, ref):
    if ref.buffer_id is None:
        raise TopofinderError(f"MSCCL++ plan: {op.where}: this dst_buff entry must be a "
                              "remote buffer ('buffer_id')")


def _mem_remote(run: Run, st: _TB, op: Op, ref, size, packet=False):
    """A remote buffer reached through ``memoryChannelBufferPtrs_`` whatever the op's type."""
    owner, btype, _ = run.plan.gpus[st.r].remote_buffers[
        st.tb.remote_refs["memory"][ref.buffer_id]] if ref.buffer_id < len(
            st.tb.remote_refs["memory"]) else (None, None, None)
    if owner is None:
        raise TopofinderError(f"MSCCL++ plan: {op.where}: buffer_id {ref.buffer_id} is not a "
                              "memory remote buffer of the threadblock")
    fake = Op(name=op.name, where=op.where, channel_type="memory", tbg=op.tbg)
    return run.loc(st, fake, BufRef(ref.index, size, None, ref.buffer_id), packet=packet)


def _port_puts(run: Run, st: _TB, op: Op, node: int, pipe, signal=False, flush=False,
               packet=False, from_scratch=False):
    """Thread ``tid`` hands put ``tid`` to the proxy of channel ``channel_ids[tid]``."""
    if len(op.channel_ids) < len(op.dst):
        raise TopofinderError(f"MSCCL++ plan: {op.where}: {len(op.dst)} puts but "
                              f"{len(op.channel_ids)} channels")
    for tid, ref in enumerate(op.dst):
        _remote_only(op, ref)
        c = _chan(run, st, op, op.channel_ids[tid], "port")
        owner = run.plan.gpus[st.r].remote_buffers[st.tb.remote_refs["port"][ref.buffer_id]][0]
        if owner != run.peer[(st.r, "port", c)]:
            raise TopofinderError(f"MSCCL++ plan: {op.where}: puts into rank {owner}'s buffer "
                                  f"over a port channel to rank {run.peer[(st.r, 'port', c)]}")
        issue = run.event(st, op, tid)
        lane = run.port_lane(st, op, c, issue, "put")
        if from_scratch:
            s = op.src[0]
            src = run.loc(st, op, BufRef(s.index, s.size, "s"), packet=True)
            dst = run.loc(st, op, BufRef(ref.index, s.size, None, ref.buffer_id), packet=True)
        elif packet:
            s = op.src[tid] if tid < len(op.src) else op.src[0]
            src = run.loc(st, op, s, packet=True, scr_off=True)
            dst = run.loc(st, op, BufRef(ref.index, s.size, None, ref.buffer_id), packet=True)
        else:
            s = op.src[tid] if tid < len(op.src) else op.src[0]
            src = run.loc(st, op, s, scr_off=False, **pipe)
            dst = run.loc(st, op, ref, scr_off=False, **pipe)
            src = src[:3] + (dst[3],)
        run.wr(lane, dst, run.rd(lane, src))
        if signal:
            sig = run.port_lane(st, op, c, issue, "signal")
            run.signals[_sem_key(run, st, "port", c)].append(
                (sig, st.launch, False, (st.r, st.tb.id, tid), st.start))
        if flush:
            run.event(st, op, tid, cross=[run.lane[(st.r, c)]])
