"""MSCCL-style XML for step schedules (paper 001 §7, paper 002 §6.1): writer and parser.

The compilers of both papers lower a mathematical schedule to per-GPU *threadblocks*, each an
ordered list of send / receive / reduce / copy instructions, in the XML the MSCCL interpreter
runs. This writer does the same for a :class:`~topofinder.model.schedule.StepSchedule`:

- Buffer layout. With P chunks per shard and k channels, every shard is cut into k·P pieces:
  piece j·P + c of shard v is sub-chunk j of chunk c, and sits at offset v·k·P + j·P + c of
  an N·k·P-piece buffer. Channel j runs the whole schedule on the pieces j·P..j·P+P−1 of every
  shard (the usual MSCCL "instances"), so the send (t, v, lo, hi, u, w) becomes, on channel j,
  one message of hi − lo pieces at offset v·k·P + j·P + lo.
- allgather: works in the output buffer ``o``; each rank first copies its shard from ``i``
  (``cpy``), then sends (``s``) and receives (``r``) per the schedule. reduce-scatter: works
  in place in the input buffer ``i``; a receive reduces into the local partial (``rrc``), or
  overwrites it (``r``) if the rank already passed its partial on; the rank's own shard is
  finally copied to ``o``. allreduce: in place in ``i`` (``inplace="1"``), reduce-scatter
  steps then allgather steps.
- Threadblocks: one per (peer, channel), with ``send``/``recv`` set to that peer where the
  rank sends to / receives from it; instructions run in the schedule's step order.
- Dependencies: an instruction waits for the last instruction on this rank that wrote the
  pieces it reads (and, for a write, the last one that read them) when that instruction is in
  another threadblock. MSCCL allows one dependency per instruction, so extra ones become
  ``nop`` instructions placed before it, as the MSCCL tools do; ``hasdep`` marks depended-on
  instructions.
- Every ``step`` also carries ``t``, the step of the mathematical schedule (an attribute
  runtimes ignore), so :func:`parse_msccl_xml` recovers the sends exactly.

Intended for the sizes an MSCCL runtime handles (it caps instructions per threadblock); for
large N export the compact .npz instead.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.schedule import ScheduleError, StepSchedule
from topofinder.model.topology import Topology

PROTOCOLS = ("Simple", "LL", "LL128")
SEND_TYPES = ("s", "rcs", "rrs", "rrcs")
RECV_TYPES = ("r", "rcs", "rrc", "rrs", "rrcs")


class _Op:
    __slots__ = ("kind", "peer", "v", "lo", "hi", "t", "deps", "tb", "index", "hasdep")

    def __init__(self, kind, peer, v, lo, hi, t):
        self.kind, self.peer, self.v, self.lo, self.hi, self.t = kind, peer, v, lo, hi, t
        self.deps: list[_Op] = []
        self.tb, self.index, self.hasdep = -1, -1, False


def _rank_ops(schedule: StepSchedule) -> list[list[_Op]]:
    """Per rank, the channel-independent instruction list in global order (step, sends before
    receives, row order) with data dependencies resolved at chunk granularity."""
    n, p = schedule.topology.n, schedule.shard_chunks
    coll = schedule.collective
    s = schedule.sends
    order = np.lexsort((np.arange(s.shape[0]), s[:, 0]))
    s = s[order]
    ops: list[list[_Op]] = [[] for _ in range(n)]
    writer: dict[tuple[int, int], np.ndarray] = {}    # (rank, shard) → last writer per chunk
    reader: dict[tuple[int, int], np.ndarray] = {}
    table: list[_Op] = []
    # state for reduce-scatter phases: does the rank hold a partial of the chunk?
    holds: dict[tuple[int, int], np.ndarray] = {}

    def arr(store, key, fill):
        if key not in store:
            store[key] = np.full(p, fill, np.int64)
        return store[key]

    def add(u, op, reads, writes):
        deps = set()
        for (v, lo, hi) in reads:
            deps.update(arr(writer, (u, v), -1)[lo:hi].tolist())
        for (v, lo, hi) in writes:
            deps.update(arr(writer, (u, v), -1)[lo:hi].tolist())
            deps.update(arr(reader, (u, v), -1)[lo:hi].tolist())
        deps.discard(-1)
        op.deps = [table[i] for i in sorted(deps)]
        idx = len(table)
        table.append(op)
        for (v, lo, hi) in reads:
            arr(reader, (u, v), -1)[lo:hi] = idx
        for (v, lo, hi) in writes:
            arr(writer, (u, v), -1)[lo:hi] = idx
        ops[u].append(op)

    if coll == "allgather":
        for u in range(n):
            add(u, _Op("cpy", -1, u, 0, p, 0), [], [(u, 0, p)])
    reduce_until = {"allgather": 0, "reduce-scatter": schedule.num_steps + 1,
                    "allreduce": schedule.reduce_steps}[coll]
    steps, first = np.unique(s[:, 0], return_index=True)
    bounds = np.append(first, s.shape[0])
    for j in range(steps.size):
        rows = s[bounds[j]:bounds[j + 1]].tolist()
        reducing = rows[0][0] <= reduce_until
        for t, v, lo, hi, u, w in rows:
            add(u, _Op("s", w, v, lo, hi, t), [(v, lo, hi)], [])
            if reducing:
                h = arr(holds, (u, v), 1)
                h[lo:hi] = 0
        for t, v, lo, hi, u, w in rows:
            if reducing:
                h = arr(holds, (w, v), 1)
                if np.all(h[lo:hi] == 1):
                    kind = "rrc"
                elif np.all(h[lo:hi] == 0):
                    kind = "r"
                else:
                    raise ScheduleError(
                        f"step {t}: node {w} receives chunks [{lo},{hi}) of node {v}'s shard "
                        "while holding partials of only some of them; refine the chunks "
                        "(schedule.refine) before lowering to MSCCL")
                h[lo:hi] = 1
                add(w, _Op(kind, u, v, lo, hi, t), [(v, lo, hi)] if kind == "rrc" else [],
                    [(v, lo, hi)])
            else:
                add(w, _Op("r", u, v, lo, hi, t), [], [(v, lo, hi)])
    if coll == "reduce-scatter":
        for u in range(n):
            add(u, _Op("cpy", -1, u, 0, p, schedule.num_steps + 1), [(u, 0, p)], [])
    return ops


def to_msccl_xml(schedule: StepSchedule, channels: int = 1, protocol: str = "Simple",
                 name: str | None = None, extra: dict | None = None) -> str:
    """The MSCCL-style XML of ``schedule`` (module doc). ``channels``: instances of the
    schedule on separate channels, each moving 1/channels of every chunk; ``protocol``:
    Simple, LL or LL128; ``extra``: more attributes of ``<algo>`` (strings). A topology with
    node labels gives every ``<gpu>`` a ``label`` attribute (its host name)."""
    if protocol not in PROTOCOLS:
        raise TopofinderError(f"protocol {protocol!r}: accepted are {', '.join(PROTOCOLS)}")
    if not isinstance(channels, int) or not 1 <= channels <= 32:
        raise TopofinderError(f"channels = {channels!r}: accepted are integers 1..32")
    topo, p, k = schedule.topology, schedule.shard_chunks, channels
    n, coll = topo.n, schedule.collective
    ops = _rank_ops(schedule)
    per_shard = k * p
    inplace = coll != "allgather"
    algo = ET.Element("algo", {
        "name": name or f"topofinder_{coll}_{topo.expr}", "proto": protocol,
        "nchannels": str(k), "nchunksperloop": str(n * per_shard), "ngpus": str(n),
        "coll": coll.replace("-", ""), "inplace": "1" if inplace else "0",
        "outofplace": "0" if coll == "allreduce" else "1", "minBytes": "0", "maxBytes": "0",
        "topology": topo.expr, "shard_chunks": str(p), "num_steps": str(schedule.num_steps),
        "reduce_scatter_steps": str(schedule.reduce_steps), **(extra or {})})
    data = "o" if coll == "allgather" else "i"
    for u in range(n):
        send_peers = {op.peer for op in ops[u] if op.kind == "s"}
        recv_peers = {op.peer for op in ops[u] if op.kind in ("r", "rrc")}
        peers = sorted(send_peers | recv_peers) or [-1]
        tb_of = {q: i for i, q in enumerate(peers)}
        for op in ops[u]:
            op.tb = tb_of.get(op.peer, 0)
        steps: list[list[tuple[_Op | None, _Op | None]]] = [[] for _ in peers]
        for op in ops[u]:                        # (nop carrying a dep, or the op itself)
            external = [d for d in op.deps if d.tb != op.tb]
            for d in external[:-1]:
                steps[op.tb].append((None, d))
            steps[op.tb].append((op, external[-1] if external else None))
        for lst in steps:
            for i, (op, _) in enumerate(lst):
                if op is not None:
                    op.index = i
        for lst in steps:
            for _, dep in lst:
                if dep is not None:
                    dep.hasdep = True
        o_chunks = n * per_shard if coll != "reduce-scatter" else per_shard
        gpu = ET.SubElement(algo, "gpu", {"id": str(u), "i_chunks": str(
            per_shard if coll == "allgather" else n * per_shard), "o_chunks": str(o_chunks),
            "s_chunks": "0"})
        if topo.labels is not None:
            gpu.set("label", topo.labels[u])
        for j in range(k):
            for b, q in enumerate(peers):
                tb = ET.SubElement(gpu, "tb", {
                    "id": str(j * len(peers) + b),
                    "send": str(q if q in send_peers else -1),
                    "recv": str(q if q in recv_peers else -1), "chan": str(j)})
                for i, (op, dep) in enumerate(steps[b]):
                    depid = "-1" if dep is None else str(j * len(peers) + dep.tb)
                    deps = "-1" if dep is None else str(dep.index)
                    attrs = {"s": str(i)}
                    if op is None:
                        attrs.update(type="nop", srcbuf=data, srcoff="0", dstbuf=data,
                                     dstoff="0", cnt="0", t=str(-1))
                    else:
                        attrs.update(_fields(op, coll, data, j, p, per_shard))
                    attrs.update(depid=depid, deps=deps,
                                 hasdep="1" if op is not None and op.hasdep else "0")
                    ET.SubElement(tb, "step", attrs)
    ET.indent(algo, space=" ")
    return ET.tostring(algo, encoding="unicode") + "\n"


def _fields(op: _Op, coll: str, data: str, j: int, p: int, per_shard: int) -> dict:
    off = op.v * per_shard + j * p + op.lo
    cnt = op.hi - op.lo
    if op.kind == "cpy" and coll == "allgather":         # own shard: input → output
        src, srcoff, dst, dstoff = "i", j * p, "o", off
    elif op.kind == "cpy":                              # reduce-scatter: result → output
        src, srcoff, dst, dstoff = "i", off, "o", j * p
    else:
        src, srcoff, dst, dstoff = data, off, data, off
    return {"type": op.kind, "srcbuf": src, "srcoff": str(srcoff), "dstbuf": dst,
            "dstoff": str(dstoff), "cnt": str(cnt), "t": str(op.t)}


# ---- parser ---------------------------------------------------------------------------------
def parse_msccl_xml(text: str) -> dict:
    """Parse XML from :func:`to_msccl_xml` (or any MSCCL XML whose steps carry ``t``) and
    check it: every send step is matched, in order, by a receive of the same pieces on the
    peer's threadblock of the same channel; dependencies name existing steps; every channel
    carries the same sends. Returns {"collective", "topology", "num_nodes", "shard_chunks",
    "channels", "protocol", "reduce_scatter_steps", "sends": (S, 6) array (t, v, lo, hi, u, w)
    in chunk units, sorted, "labels" (the gpus' ``label`` attributes or None), "physical"
    (the ``physical`` attribute of an ``export --relabel`` file, or None)}."""
    try:
        algo = ET.fromstring(text)
    except ET.ParseError as exc:
        raise TopofinderError(f"MSCCL XML does not parse: {exc}") from None
    try:
        n, k = int(algo.get("ngpus")), int(algo.get("nchannels"))
        per_shard = int(algo.get("nchunksperloop")) // n
        p = int(algo.get("shard_chunks", per_shard // k))
        coll = {"allgather": "allgather", "reducescatter": "reduce-scatter",
                "allreduce": "allreduce"}[algo.get("coll")]
        per_channel: list[list] = [[] for _ in range(k)]
        names = {int(g.get("id")): g.get("label") for g in algo.iter("gpu")}
        labels = tuple(names.get(i) or str(i) for i in range(n)) if any(names.values()) \
            else None
        physical = [int(x) for x in algo.get("physical").split()] \
            if algo.get("physical") else None
        queues: dict[tuple, list] = defaultdict(list)   # (u, w, chan) → [(kind, off, cnt)]
        for gpu in algo.iter("gpu"):
            u = int(gpu.get("id"))
            tbs = {int(tb.get("id")): tb for tb in gpu.iter("tb")}
            lengths = {i: len(tb.findall("step")) for i, tb in tbs.items()}
            for tb in tbs.values():
                send, recv, chan = int(tb.get("send")), int(tb.get("recv")), int(
                    tb.get("chan"))
                for i, st in enumerate(tb.iter("step")):
                    if int(st.get("s")) != i:
                        raise TopofinderError(f"gpu {u} tb {tb.get('id')}: step numbers "
                                              "are not 0, 1, 2, ...")
                    depid, deps = int(st.get("depid")), int(st.get("deps"))
                    if depid >= 0 and (depid not in tbs or deps >= lengths[depid]):
                        raise TopofinderError(f"gpu {u} tb {tb.get('id')} step {i}: "
                                              f"dependency on missing step {depid}/{deps}")
                    kind, cnt = st.get("type"), int(st.get("cnt"))
                    if kind in SEND_TYPES:
                        off = int(st.get("srcoff"))
                        if send < 0:
                            raise TopofinderError(f"gpu {u} tb {tb.get('id')}: a send in a "
                                                  "threadblock without a send peer")
                        v, rest = divmod(off, per_shard)
                        j, lo = divmod(rest, p)
                        if j != chan or lo + cnt > p:
                            raise TopofinderError(f"gpu {u}: send at offset {off} lies "
                                                  f"outside channel {chan}'s pieces")
                        per_channel[chan].append((int(st.get("t")), v, lo, lo + cnt, u, send))
                        queues[(u, send, chan, "s")].append((off, cnt))
                    if kind in RECV_TYPES:
                        if recv < 0:
                            raise TopofinderError(f"gpu {u} tb {tb.get('id')}: a receive in "
                                                  "a threadblock without a recv peer")
                        queues[(recv, u, chan, "r")].append((int(st.get("dstoff")), cnt))
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise TopofinderError(f"malformed MSCCL XML ({exc!r})") from None
    for (u, w, chan, kind), q in queues.items():
        other = queues.get((u, w, chan, "r" if kind == "s" else "s"), [])
        if q != other:
            raise TopofinderError(f"channel {chan}: the sends of gpu {u} to gpu {w} do not "
                                  f"match the receives posted by gpu {w} (same pieces, order)")
    rows = [np.array(sorted(c), np.int64).reshape(-1, 6) for c in per_channel]
    if any(not np.array_equal(r, rows[0]) for r in rows[1:]):
        raise TopofinderError("MSCCL XML: the channels do not carry the same schedule")
    return {"collective": coll, "topology": algo.get("topology"), "num_nodes": n,
            "shard_chunks": p, "channels": k, "protocol": algo.get("proto"),
            "reduce_scatter_steps": int(algo.get("reduce_scatter_steps", 0)),
            "sends": rows[0], "labels": labels, "physical": physical}


def schedule_from_xml(text: str, topology: Topology) -> StepSchedule:
    """The step schedule an XML from :func:`to_msccl_xml` encodes, on ``topology``."""
    doc = parse_msccl_xml(text)
    if doc["num_nodes"] != topology.n:
        raise TopofinderError(f"the XML is for {doc['num_nodes']} ranks, {topology.expr} has "
                              f"{topology.n} nodes")
    return StepSchedule(topology, doc["shard_chunks"], doc["sends"],
                        collective=doc["collective"],
                        reduce_steps=doc["reduce_scatter_steps"]
                        if doc["collective"] == "allreduce" else 0)


def trees_as_steps(trees) -> StepSchedule:
    """A tree-flow allgather (paper 002) as the step schedule MSCCL executes: P = lcm of the
    weight denominators, tree i of root r carries the next weight·P chunks of r's shard, and
    every tree edge (u, w) sends them at step depth(w). (The runtime pipelines these sends;
    the steps only fix the order.)"""
    topo = trees.topology
    p = lcm(*[Fraction(t.weight).denominator for t in trees.trees]) if trees.trees else 1
    nxt = defaultdict(int)
    rows = []
    for t in trees.trees:
        size = Fraction(t.weight) * p
        lo = nxt[t.root]
        nxt[t.root] += int(size)
        children = defaultdict(list)
        for u, w in t.edges:
            children[u].append(w)
        frontier, depth = [t.root], 0
        while frontier:
            depth += 1
            new = []
            for u in frontier:
                for w in children[u]:
                    rows.append((depth, t.root, lo, lo + int(size), u, w))
                    new.append(w)
            frontier = new
    return StepSchedule(topo, p, np.array(rows, np.int64).reshape(-1, 6),
                        collective="allgather", method=trees.method or "trees")
