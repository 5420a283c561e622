"""An MSCCL XML checker: the runtime parsers' limits, and a bounded-buffer execution model.

Two independent checks of an MSCCL algorithm XML (``<algo>/<gpu>/<tb>/<step>``):

:func:`check_limits` emulates what the msccl-executor-nccl parser (Azure/msccl-executor-nccl,
``src/misc/msccl/msccl_parser.cc``, ``src/include/msccl/msccl_struct.h``,
``src/include/msccl/msccl_parser.h``) and the older microsoft/msccl parser
(``src/graph/topo.cc``, ``src/include/msccl.h``, ``src/graph/xml.h``) accept on every rank:
XML elements per rank (the loader keeps the ``algo``, every ``gpu`` and the rank's own ``tb``
and ``step`` elements, 4096 in all), sub-elements per element (1024), attributes per element
(16) and value length (255), step index ``s`` < MSCCL_MAX_NUM_STEPS (64 in the executor's
default build, 256 in microsoft/msccl), threadblocks (executor 32 per channel × 32 channels,
msccl 216), send/recv threadblocks per channel (32), ``cnt`` < 72, offsets in the buffer and in
int16, ``depid`` in int8, the spelling of ``coll`` (executor ``reducescatter``, msccl
``reduce_scatter``) and the ``maxBytes`` rule (executor: 0 = no limit, bounds inclusive;
msccl: selected only when minBytes ≤ size < maxBytes).

:func:`execute` runs the XML the way the interpreter does, with every connection — one per
(sending gpu, receiving gpu, channel) — a FIFO holding at most ``capacity`` transmissions of one
piece (``cnt`` = 1; NCCL's Simple protocol buffers two at large sizes). Every threadblock
executes its steps in order; an instruction with ``cnt`` = c moves c pieces one by one, so a
send blocks while the receiver's FIFO is full and a receive while it is empty; ``depid``/``deps``
wait for the flag the depended-on threadblock sets when an instruction with ``hasdep="1"``
completes (as the kernel does: flag = that instruction's step). A receive must take a whole
message of its own ``cnt``. Buffers carry symbolic data — every element is (element index,
set of contributing ranks) — so copies, reductions and the final result are checked exactly:
allgather (every rank holds every rank's input at its place), reduce-scatter and allreduce
(every element is the reduction of all ranks' contributions of that element, each once).
In-place runs alias the buffers as NCCL does; out-of-place runs fail on any write to the input.
Intra-rank data races (two threadblocks touching a piece, one writing, with no chain of
dependencies between them) are reported too (vector clocks over threadblocks).

When no threadblock can progress before all finish, :class:`MscclDeadlock` names the blocked
threadblocks and what each waits for.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import deque
from dataclasses import dataclass, field

from topofinder.errors import TopofinderError
from topofinder.model.topology import MAX_NODES
from topofinder.model.collectives import Collective

TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
SENDS = ("s", "rcs", "rrs", "rrcs")
RECVS = ("r", "rcs", "rrs", "rrc", "rrcs")
BUFFERS = ("i", "o", "s")


@dataclass(frozen=True)
class Runtime:
    """Parser limits of one MSCCL runtime (file references in the module doc)."""
    name: str
    max_steps: int            # MSCCL_MAX_NUM_STEPS: step index s must be below it
    max_tbs: int              # MSCCL_MAX_NUM_THREAD_BLOCKS: tb id must be below it
    max_tbs_per_channel: int  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL (send / recv peers)
    max_count: int            # MSCCL_MAX_COUNT: cnt must be below it
    max_channels: int         # MAXCHANNELS
    max_nodes: int            # MAX_NODES: XML elements the loader keeps per rank
    max_subs: int             # MAX_SUBS: children per element (not checked by the parser)
    max_attrs: int            # MAX_ATTR_COUNT
    max_str: int              # MAX_STR_LEN
    colls: dict = field(default_factory=dict)   # collective → spelling of coll
    max_bytes_zero_unbounded: bool = True


RUNTIMES = {
    "msccl-executor": Runtime("msccl-executor", 64, 32 * 32, 32, 72, 32, 4096, 1024, 16, 255,
                              {Collective.ALLGATHER: Collective.ALLGATHER,
                               Collective.REDUCE_SCATTER: "reducescatter",
                               Collective.ALLREDUCE: Collective.ALLREDUCE}, True),
    "msccl": Runtime("msccl", 256, 216, 32, 72, 32, 4096, 1024, 16, 255,
                     {Collective.ALLGATHER: Collective.ALLGATHER,
                      Collective.REDUCE_SCATTER: "reduce_scatter",
                      Collective.ALLREDUCE: Collective.ALLREDUCE}, False),
}
INT16_MAX, INT8_MAX = 32767, 127


class MscclCheckError(TopofinderError):
    """An XML a runtime would refuse, or a run that does not compute the collective."""


class MscclDeadlock(MscclCheckError):
    """No threadblock can progress before the program ends."""


def get_runtime(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise TopofinderError(f"runtime {name!r}: accepted are {', '.join(RUNTIMES)}")
    return RUNTIMES[name]


# ---- parsed form ---------------------------------------------------------------------------
@dataclass
class Step:
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: int
    t: int = -1
    nattrs: int = 0


@dataclass
class Tb:
    id: int
    send: int
    recv: int
    chan: int
    steps: list
    nattrs: int = 0


@dataclass
class Gpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: list


@dataclass
class Algo:
    attrs: dict
    ngpus: int
    nchannels: int
    nchunksperloop: int
    coll: str                 # as spelled in the XML
    collective: str           # allgather / reduce-scatter / allreduce
    inplace: bool
    outofplace: bool
    proto: str
    gpus: list


_COLL = {Collective.ALLGATHER: Collective.ALLGATHER, "reducescatter": Collective.REDUCE_SCATTER,
         "reduce_scatter": Collective.REDUCE_SCATTER, Collective.ALLREDUCE: Collective.ALLREDUCE}


def parse(text) -> Algo:
    """Parse MSCCL XML text (or an Element) into :class:`Algo`; malformed → MscclCheckError."""
    try:
        root = ET.fromstring(text) if isinstance(text, (str, bytes)) else text
    except ET.ParseError as exc:
        raise MscclCheckError(f"MSCCL XML does not parse: {exc}") from None
    if root.tag != "algo":
        raise MscclCheckError(f"MSCCL XML: the root element is <{root.tag}>, not <algo>")
    try:
        a = root.attrib
        coll = a["coll"]
        if coll not in _COLL:
            raise MscclCheckError(f"MSCCL XML: coll={coll!r} is not allgather, reducescatter "
                                  "(reduce_scatter) or allreduce")
        gpus = []
        for g in root.findall("gpu"):
            tbs = []
            for tb in g.findall("tb"):
                steps = []
                for st in tb.findall("step"):
                    x = st.attrib
                    steps.append(Step(int(x["s"]), x["type"], x["srcbuf"], int(x["srcoff"]),
                                      x["dstbuf"], int(x["dstoff"]), int(x["cnt"]),
                                      int(x["depid"]), int(x["deps"]), int(x["hasdep"]),
                                      int(x.get("t", -1)), len(x)))
                tbs.append(Tb(int(tb.get("id")), int(tb.get("send")), int(tb.get("recv")),
                              int(tb.get("chan")), steps, len(tb.attrib)))
            gpus.append(Gpu(int(g.get("id")), int(g.get("i_chunks")), int(g.get("o_chunks")),
                            int(g.get("s_chunks")), tbs))
        algo = Algo(dict(a), int(a["ngpus"]), int(a["nchannels"]), int(a["nchunksperloop"]),
                    coll, _COLL[coll], bool(int(a["inplace"])),
                    bool(int(a.get("outofplace", "0"))), a["proto"], gpus)
    except (KeyError, TypeError, ValueError) as exc:
        raise MscclCheckError(f"malformed MSCCL XML (missing or non-integer attribute: "
                              f"{exc})") from None
    _check_sizes(algo)
    return algo


#: Most chunks one buffer of one rank may declare, and most chunks over all ranks' buffers:
#: the checker holds a symbolic value per chunk, so larger declarations are refused before
#: any is allocated.
MAX_CHUNKS = 1 << 20
MAX_ELEMENTS = 1 << 24


def _check_sizes(algo: Algo) -> None:
    """MscclCheckError unless ngpus, nchannels, nchunksperloop and every buffer size lie in
    the ranges the checker can hold (ngpus ≤ MAX_NODES, chunk counts ≤ MAX_CHUNKS)."""
    if not 1 <= algo.ngpus <= MAX_NODES or len(algo.gpus) != algo.ngpus:
        raise MscclCheckError(f"MSCCL XML: ngpus={algo.ngpus} must be 1..{MAX_NODES} and equal "
                              f"the {len(algo.gpus)} <gpu> elements")
    if not 1 <= algo.nchannels <= 64 or not 0 <= algo.nchunksperloop <= MAX_CHUNKS:
        raise MscclCheckError(f"MSCCL XML: nchannels={algo.nchannels} must be 1..64 and "
                              f"nchunksperloop={algo.nchunksperloop} 0..{MAX_CHUNKS}")
    total = 0
    for g in algo.gpus:
        sizes = (g.i_chunks, g.o_chunks, g.s_chunks)
        if not all(0 <= x <= MAX_CHUNKS for x in sizes):
            raise MscclCheckError(f"MSCCL XML: gpu {g.id} declares buffers of {sizes} chunks; "
                                  f"each must be 0..{MAX_CHUNKS}")
        total += sum(sizes)
    if total > MAX_ELEMENTS:
        raise MscclCheckError(f"MSCCL XML: the buffers hold {total} chunks in all; at most "
                              f"{MAX_ELEMENTS} are checked")


def _algo(xml) -> Algo:
    return xml if isinstance(xml, Algo) else parse(xml)


# ---- parser limits ---------------------------------------------------------------------------
def check_limits(xml, runtime: str = "msccl-executor", max_steps: int | None = None) -> dict:
    """Raise MscclCheckError naming the first thing ``runtime``'s parser refuses on some
    rank (module doc); return {"max_steps_per_tb", "max_tbs_per_gpu", "max_nodes_per_rank",
    "steps_per_tb": {gpu: [len per tb]}}."""
    rt = get_runtime(runtime)
    limit = rt.max_steps if max_steps is None else int(max_steps)
    algo = _algo(xml)
    _check_algo(algo, rt)
    stats = {"max_steps_per_tb": 0, "max_tbs_per_gpu": 0, "max_nodes_per_rank": 0,
             "steps_per_tb": {}}
    for g in algo.gpus:
        lengths, nodes = _check_gpu(algo, g, rt, limit)
        stats["steps_per_tb"][g.id] = lengths
        stats["max_steps_per_tb"] = max(stats["max_steps_per_tb"], max(lengths, default=0))
        stats["max_tbs_per_gpu"] = max(stats["max_tbs_per_gpu"], len(g.tbs))
        stats["max_nodes_per_rank"] = max(stats["max_nodes_per_rank"], nodes)
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


def _check_gpu(algo: Algo, g: Gpu, rt: Runtime, limit: int) -> tuple[list[int], int]:
    """One rank as its parser loads it: element count, threadblock ids, connections, steps.
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
    byid = {tb.id: tb for tb in g.tbs}
    sizes = {"i": g.i_chunks, "o": g.o_chunks, "s": g.s_chunks}
    conns, per_chan, lengths = {}, {}, []
    for tb in sorted(g.tbs, key=lambda x: x.id):
        at = f"{where}: gpu {g.id} tb {tb.id}"
        lengths.append(len(tb.steps))
        _check_tb(algo, g, tb, rt, conns, per_chan, at)
        if len(tb.steps) > limit:
            raise MscclCheckError(
                f"{where}: gpu {g.id} tb {tb.id} has {len(tb.steps)} instructions; "
                f"the limit is {limit} (MSCCL_MAX_NUM_STEPS)")
        pending_nops = 0
        for i, st in enumerate(tb.steps):
            here = f"{at} step {i}"
            if st.s != i:
                raise MscclCheckError(f"{here}: step numbers are not 0, 1, 2, ...")
            _check_step(st, tb, rt, sizes, here)
            _check_dependency(st, byid, here)
            if st.type == "nop":
                pending_nops += 1
            else:
                if pending_nops and st.depid < 0:
                    raise MscclCheckError(f"{here}: follows nops but has no dependency "
                                          "itself (the parser rejects this)")
                pending_nops = 0
        if pending_nops:
            raise MscclCheckError(f"{at}: ends with nops (their dependencies are dropped)")
    return lengths, nodes


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


def _check_step(st: Step, tb: Tb, rt: Runtime, sizes: dict, here: str) -> None:
    """A step's attributes, type, buffers, peer, ``cnt`` and offset ranges."""
    if st.nattrs > rt.max_attrs:
        raise MscclCheckError(f"{here}: more than {rt.max_attrs} attributes")
    if st.type not in TYPES:
        raise MscclCheckError(f"{here}: type {st.type!r} is not one of {', '.join(TYPES)}")
    if st.srcbuf not in BUFFERS or st.dstbuf not in BUFFERS:
        raise MscclCheckError(f"{here}: buffers must be i, o or s")
    if st.type in SENDS and tb.send < 0:
        raise MscclCheckError(f"{here}: a send in a threadblock without send peer")
    if st.type in RECVS and tb.recv < 0:
        raise MscclCheckError(f"{here}: a receive in a threadblock without recv peer")
    if st.type == "nop":
        return
    if not 0 <= st.cnt < rt.max_count:
        raise MscclCheckError(f"{here}: cnt {st.cnt} outside 0..{rt.max_count - 1}")
    reads = st.type in ("s", "rrs", "rrc", "rrcs", "cpy", "re")
    writes = st.type in ("r", "rcs", "rrc", "rrcs", "cpy", "re")
    for use, buf, off in ((reads, st.srcbuf, st.srcoff), (writes, st.dstbuf, st.dstoff)):
        if use and not (0 <= off and off + st.cnt <= sizes[buf] and off <= INT16_MAX):
            raise MscclCheckError(f"{here}: pieces [{off}, {off + st.cnt}) outside buffer {buf} "
                                  f"({sizes[buf]} chunks, int16 offsets)")


def _check_dependency(st: Step, byid: dict, here: str) -> None:
    """``depid``/``deps``/``hasdep``: an int8 threadblock id, an existing step, a flag that
    some step at or after it sets; a nop always carries a dependency."""
    if st.depid >= 0:
        if st.depid > INT8_MAX:
            raise MscclCheckError(f"{here}: depid {st.depid} does not fit int8")
        tgt = byid.get(st.depid)
        if tgt is None or not 0 <= st.deps < len(tgt.steps):
            raise MscclCheckError(f"{here}: depends on missing step {st.depid}/{st.deps}")
        if not any(x.hasdep and x.type != "nop" for x in tgt.steps[st.deps:]):
            raise MscclCheckError(f"{here}: waits for tb {st.depid} step {st.deps}, but no "
                                  "step there or later sets a flag (hasdep=1): it would hang")
    elif st.depid != -1:
        raise MscclCheckError(f"{here}: depid {st.depid} is not -1 or a tb id")
    if st.hasdep not in (0, 1):
        raise MscclCheckError(f"{here}: hasdep must be 0 or 1")
    if st.type == "nop" and st.depid < 0:
        raise MscclCheckError(f"{here}: a nop without a dependency shifts the interpreter's "
                              "step counter")


# ---- execution ---------------------------------------------------------------------------
class _Mem:
    """One rank's buffers with NCCL's in-place aliasing; symbolic values, access checks and
    vector-clock race detection."""

    def __init__(self, algo: Algo, g: Gpu, inplace: bool, ntbs: int):
        self.rank, self.coll, self.inplace = g.id, algo.collective, inplace
        self.size = {"i": g.i_chunks, "o": g.o_chunks, "s": g.s_chunks}
        self.cells = {}
        self.writer, self.readers = {}, {}
        r = g.id
        full_i = g.i_chunks
        if algo.collective == Collective.ALLGATHER:
            for e in range(full_i):
                self.cells[self.phys("i", e)] = (r * full_i + e, 1 << r)
        else:
            for e in range(full_i):
                self.cells[("i", e)] = (e, 1 << r)

    def phys(self, buf: str, off: int):
        if not self.inplace:
            return (buf, off)
        if self.coll == Collective.ALLGATHER and buf == "i":
            return ("o", self.rank * self.size["i"] + off)
        if self.coll == Collective.REDUCE_SCATTER and buf == "o":
            return ("i", self.rank * self.size["o"] + off)
        if self.coll == Collective.ALLREDUCE and buf == "o":
            return ("i", off)
        return (buf, off)

    def read(self, buf, off, tb, epoch, vc, at):
        key = self.phys(buf, off)
        val = self.cells.get(key)
        if val is None:
            raise MscclCheckError(f"{at}: reads {buf}[{off}], which holds no data yet")
        w = self.writer.get(key)
        if w is not None and w[0] != tb and vc[w[0]] < w[1]:
            raise MscclCheckError(f"{at}: reads {buf}[{off}] written by tb {w[0]} with no "
                                  "dependency ordering the two (data race)")
        self.readers.setdefault(key, {})[tb] = epoch
        return val

    def write(self, buf, off, val, tb, epoch, vc, at):
        key = self.phys(buf, off)
        if not self.inplace and key[0] == "i":
            raise MscclCheckError(f"{at}: writes the input buffer i[{off}] of an out-of-place "
                                  "run (NCCL's sendbuff is const)")
        w = self.writer.get(key)
        if w is not None and w[0] != tb and vc[w[0]] < w[1]:
            raise MscclCheckError(f"{at}: overwrites {buf}[{off}] written by tb {w[0]} with no "
                                  "dependency ordering the two (data race)")
        for rtb, ep in self.readers.get(key, {}).items():
            if rtb != tb and vc[rtb] < ep:
                raise MscclCheckError(f"{at}: overwrites {buf}[{off}] while tb {rtb} may still "
                                      "read it (no dependency orders them: data race)")
        self.readers[key] = {}
        self.writer[key] = (tb, epoch)
        self.cells[key] = val


def _reduce(a, b, at):
    if a[0] != b[0]:
        raise MscclCheckError(f"{at}: reduces element {a[0]} with element {b[0]}")
    if a[1] & b[1]:
        raise MscclCheckError(f"{at}: counts the contribution of rank(s) "
                              f"{_ranks(a[1] & b[1])} to element {a[0]} twice")
    return (a[0], a[1] | b[1])


def _ranks(mask: int) -> str:
    out = [str(i) for i in range(mask.bit_length()) if mask >> i & 1]
    return ",".join(out[:6]) + ("..." if len(out) > 6 else "")


class _TbState:
    __slots__ = ("idx", "in_msg", "k", "mem", "out_msg", "pc", "rank", "started", "tb", "vc")

    def __init__(self, rank, tb, idx, ntbs, mem):
        self.rank, self.tb, self.idx, self.pc, self.k = rank, tb, idx, 0, 0
        self.started = False
        self.vc = [0] * ntbs
        self.mem = mem
        self.out_msg = None
        self.in_msg = None


def execute(xml, capacity: int = 1, inplace: bool | None = None, record: bool = False) -> dict:
    """Run the XML on FIFO connections holding ``capacity`` one-piece transmissions and check
    the collective's result (module doc). ``inplace``: run in place (default: in place if the
    XML allows only that). Raises MscclDeadlock or MscclCheckError; returns {"transfers":
    [(src gpu, dst gpu, chan, t, element, mask)] if ``record``, "instructions": total}."""
    algo = _algo(xml)
    if capacity < 1:
        raise TopofinderError("capacity must be at least 1 transmission")
    if inplace is None:
        inplace = algo.inplace and not algo.outofplace
    if inplace and not algo.inplace or not inplace and not algo.outofplace:
        raise MscclCheckError(f"the XML declares inplace={int(algo.inplace)}, outofplace="
                              f"{int(algo.outofplace)}: it cannot run "
                              f"{'in place' if inplace else 'out of place'}")
    machine = _Machine(algo, inplace, capacity, record)
    machine.run()
    _check_result(algo, machine.mems, inplace)
    return {"transfers": machine.transfers,
            "instructions": sum(len(st.tb.steps) for st in machine.states)}


class _Machine:
    """Every rank's threadblocks, the completion flags and the FIFO connections of one run."""

    def __init__(self, algo: Algo, inplace: bool, capacity: int, record: bool):
        self.capacity = capacity
        self.states, self.flags, self.fifos, self.mems = [], {}, {}, {}
        for g in algo.gpus:
            ntbs = len(g.tbs)
            mem = self.mems[g.id] = _Mem(algo, g, inplace, ntbs)
            for i, tb in enumerate(sorted(g.tbs, key=lambda x: x.id)):
                self.states.append(_TbState(g.id, tb, i, ntbs, mem))
                self.flags[(g.id, tb.id)] = (-1, [0] * ntbs)
        self.transfers = [] if record else None
        self.msg_ids = iter(range(1 << 62))

    def conn(self, src, dst, chan) -> deque:
        q = self.fifos.get((src, dst, chan))
        if q is None:
            q = self.fifos[(src, dst, chan)] = deque()
        return q

    def run(self) -> None:
        """Step every threadblock as far as it goes, round after round, until all finish;
        MscclDeadlock when a round makes no progress, MscclCheckError on data left in flight."""
        active = list(self.states)
        while active:
            progress = False
            still = []
            for st in active:
                before = (st.pc, st.k)
                while self.step(st):
                    pass
                if (st.pc, st.k) != before:
                    progress = True
                if st.pc < len(st.tb.steps):
                    still.append(st)
            active = still
            if active and not progress:
                raise MscclDeadlock(_deadlock_message(active, self.fifos, self.flags,
                                                      self.capacity))
        left = [(k, len(q)) for k, q in self.fifos.items() if q]
        if left:
            (u, w, c), m = left[0]
            raise MscclCheckError(f"{m} piece(s) sent by gpu {u} to gpu {w} on channel {c} are "
                                  "never received")

    def step(self, st: _TbState) -> bool:
        """Advance one instruction of ``st`` to completion if it can (True), else False."""
        tb = st.tb
        if st.pc >= len(tb.steps):
            return False
        ins = tb.steps[st.pc]
        at = f"gpu {st.rank} tb {tb.id} step {ins.s} ({ins.type})"
        if not st.started:
            if ins.depid >= 0:
                fl, snap = self.flags.get((st.rank, ins.depid), (-1, None))
                if fl < ins.deps:
                    return False
                st.vc = [max(x, y) for x, y in zip(st.vc, snap)]
            st.started = True
        kind, mem, epoch = ins.type, st.mem, st.pc + 1
        if kind == "nop" or ins.cnt == 0:
            pass
        elif kind in ("cpy", "re"):
            for k in range(ins.cnt):
                v = mem.read(ins.srcbuf, ins.srcoff + k, st.idx, epoch, st.vc, at)
                if kind == "re":
                    v = _reduce(mem.read(ins.dstbuf, ins.dstoff + k, st.idx, epoch, st.vc, at),
                                v, at)
                mem.write(ins.dstbuf, ins.dstoff + k, v, st.idx, epoch, st.vc, at)
        elif not self.transfer(st, ins, at):
            return False
        st.vc[st.idx] = epoch
        if ins.hasdep and kind != "nop":
            self.flags[(st.rank, tb.id)] = (ins.s, list(st.vc))
        st.pc += 1
        st.k = 0
        st.started = False
        return True

    def transfer(self, st: _TbState, ins: Step, at: str) -> bool:
        """Move the pieces of a send/receive instruction one by one while the FIFOs allow;
        True once all ``cnt`` have moved."""
        tb, mem, epoch, vc = st.tb, st.mem, st.pc + 1, st.vc
        kind = ins.type
        inq = self.conn(tb.recv, st.rank, tb.chan) if kind in RECVS else None
        outq = self.conn(st.rank, tb.send, tb.chan) if kind in SENDS else None
        while st.k < ins.cnt:
            if inq is not None and not inq:
                return False
            if outq is not None and len(outq) >= self.capacity:
                return False
            k = st.k
            if inq is not None:
                x, mid, unit, cnt, _ = inq[0]
                if k == 0:
                    if unit != 0 or cnt != ins.cnt:
                        raise MscclCheckError(
                            f"{at}: receives {ins.cnt} pieces but the next message from gpu "
                            f"{tb.recv} on channel {tb.chan} has {cnt}")
                    st.in_msg = mid
                elif mid != st.in_msg or unit != k:
                    raise MscclCheckError(f"{at}: message boundaries do not match")
                inq.popleft()
                if kind in ("r", "rcs"):
                    val = x
                else:
                    val = _reduce(mem.read(ins.srcbuf, ins.srcoff + k, st.idx, epoch, vc, at),
                                  x, at)
                if kind in ("r", "rcs", "rrc", "rrcs"):
                    mem.write(ins.dstbuf, ins.dstoff + k, val, st.idx, epoch, vc, at)
            else:
                val = mem.read(ins.srcbuf, ins.srcoff + k, st.idx, epoch, vc, at)
            if outq is not None:
                if k == 0:
                    st.out_msg = next(self.msg_ids)
                outq.append((val, st.out_msg, k, ins.cnt, ins.t))
                if self.transfers is not None:
                    self.transfers.append((st.rank, tb.send, tb.chan, ins.t, val[0], val[1]))
            st.k += 1
        return True


def _deadlock_message(active, fifos, flags, capacity) -> str:
    parts = []
    for st in active[:4]:
        ins = st.tb.steps[st.pc]
        what = f"gpu {st.rank} tb {st.tb.id} at step {ins.s} ({ins.type}, piece {st.k}/{ins.cnt})"
        if not st.started and ins.depid >= 0:
            why = f"waits for tb {ins.depid} step {ins.deps}"
        elif ins.type in RECVS and not fifos.get((st.tb.recv, st.rank, st.tb.chan)):
            why = f"waits for data from gpu {st.tb.recv}"
        else:
            why = f"waits for space to gpu {st.tb.send}"
        parts.append(f"{what} {why}")
    return (f"deadlock at buffer capacity {capacity}: {len(active)} threadblock(s) cannot "
            f"progress; " + "; ".join(parts))


def _check_result(algo: Algo, mems: dict, inplace: bool) -> None:
    n = algo.ngpus
    full = (1 << n) - 1
    for g in algo.gpus:
        mem = mems[g.id]
        if algo.collective == Collective.ALLGATHER:
            ic = g.i_chunks
            expect = [(x, 1 << (x // ic)) for x in range(g.o_chunks)]
        elif algo.collective == Collective.REDUCE_SCATTER:
            expect = [(g.id * g.o_chunks + c, full) for c in range(g.o_chunks)]
        else:
            expect = [(e, full) for e in range(g.o_chunks)]
        for c, want in enumerate(expect):
            got = mem.cells.get(mem.phys("o", c))
            if got != want:
                if got is None:
                    desc = "nothing"
                else:
                    desc = f"element {got[0]} from rank(s) {_ranks(got[1])}"
                raise MscclCheckError(
                    f"wrong {algo.collective} result: gpu {g.id} output piece {c} holds {desc}, "
                    f"expected element {want[0]} from rank(s) {_ranks(want[1])}")


def check(xml, runtime: str = "msccl-executor", capacities=(1, 2),
          max_steps: int | None = None) -> dict:
    """Limits of ``runtime`` plus an execution at every capacity in every mode the XML
    declares (in place / out of place); returns the limits' statistics."""
    algo = _algo(xml)
    stats = check_limits(algo, runtime, max_steps)
    modes = [m for m, ok in ((True, algo.inplace), (False, algo.outofplace)) if ok]
    for cap in capacities:
        for mode in modes:
            execute(algo, cap, inplace=mode)
    return stats
