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
msccl: selected only when minBytes ≤ size < maxBytes). The step rules run as array
operations over one table of all steps.

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
file): elements become rows of one int32 table, never objects, and a DTD, entity declaration
or external entity is refused (a runtime's parser has none; it would only serve expansion
attacks).
"""

from __future__ import annotations

import os
import xml.parsers.expat as expat
from array import array
from bisect import bisect_left
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective
from topofinder.model.topology import MAX_NODES

TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
SENDS = ("s", "rcs", "rrs", "rrcs")
RECVS = ("r", "rcs", "rrs", "rrc", "rrcs")
READS = ("s", "rrs", "rrc", "rrcs", "cpy", "re")        # read the source buffer
WRITES = ("r", "rcs", "rrc", "rrcs", "cpy", "re")       # write the destination buffer
BUFFERS = ("i", "o", "s")
NOP = TYPES.index("nop")
#: Columns of the step table (:attr:`Algo.table`), one int32 row per <step>.
COLUMNS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
           "hasdep", "t", "nattrs")
(S, TYPE, SRCBUF, SRCOFF, DSTBUF, DSTOFF, CNT, DEPID, DEPS, HASDEP, T, NATTRS) = range(12)


def _codes(names) -> np.ndarray:
    return np.array([TYPES.index(x) for x in names])


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
class Tb:
    """A threadblock; ``steps``: its rows of :attr:`Algo.table`."""
    id: int
    send: int
    recv: int
    chan: int
    steps: range
    nattrs: int = 0


@dataclass
class Gpu:
    """A ``<gpu>``; ``attrs``: all its attributes as written (strings)."""
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: list
    attrs: dict = field(default_factory=dict)


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
    table: np.ndarray         # (steps, len(COLUMNS)) int32, in document order
    names: dict               # row → (type, srcbuf, dstbuf) as spelled, for unknown spellings
    layout: object = None     # _Layout, built on first use

    def spelled(self, row: int, col: int) -> str:
        """The type / buffer name of step ``row`` as the XML spells it."""
        code = int(self.table[row, col])
        if code >= 0:
            return (TYPES if col == TYPE else BUFFERS)[code]
        return self.names[row][(TYPE, SRCBUF, DSTBUF).index(col)]


_COLL = {Collective.ALLGATHER: Collective.ALLGATHER, "reducescatter": Collective.REDUCE_SCATTER,
         "reduce_scatter": Collective.REDUCE_SCATTER, Collective.ALLREDUCE: Collective.ALLREDUCE}
_TYPE_CODE = {x: i for i, x in enumerate(TYPES)}
_BUF_CODE = {x: i for i, x in enumerate(BUFFERS)}
_INT32 = 1 << 31


class _Reader:
    """expat handlers: the <algo> attributes, its <gpu> children, their <tb> children and
    those's <step> children (other elements are skipped, as the runtime's loader does), steps
    appended to one int32 array."""

    def __init__(self):
        self.stack, self.root, self.gpus = [], None, []
        self.rows, self.names, self.nsteps = array("i"), {}, 0

    def start(self, tag, a):
        depth, stack = len(self.stack), self.stack
        stack.append(tag)
        if depth == 3:
            if tag == "step" and stack[2] == "tb" and stack[1] == "gpu":
                self.step(a)
        elif depth == 0:
            if tag != "algo":
                raise MscclCheckError(f"MSCCL XML: the root element is <{tag}>, not <algo>")
            self.root = dict(a)
        elif depth == 1 and tag == "gpu":
            self.gpus.append(Gpu(int(a.get("id")), int(a.get("i_chunks")),
                                 int(a.get("o_chunks")), int(a.get("s_chunks")), [], dict(a)))
        elif depth == 2 and tag == "tb" and stack[1] == "gpu":
            self.gpus[-1].tbs.append(Tb(int(a.get("id")), int(a.get("send")),
                                        int(a.get("recv")), int(a.get("chan")),
                                        range(self.nsteps, self.nsteps), len(a)))

    def end(self, tag):
        self.stack.pop()
        if tag == "tb" and len(self.stack) == 2 and self.stack[1] == "gpu":
            tb = self.gpus[-1].tbs[-1]
            tb.steps = range(tb.steps.start, self.nsteps)

    def step(self, x):
        ty, sb, db = x["type"], x["srcbuf"], x["dstbuf"]
        codes = (_TYPE_CODE.get(ty, -1), _BUF_CODE.get(sb, -1), _BUF_CODE.get(db, -1))
        if min(codes) < 0:
            self.names[self.nsteps] = (ty, sb, db)
        values = (int(x["s"]), codes[0], codes[1], int(x["srcoff"]), codes[2], int(x["dstoff"]),
                  int(x["cnt"]), int(x["depid"]), int(x["deps"]), int(x["hasdep"]),
                  int(x.get("t", -1)), len(x))
        try:
            self.rows.extend(values)
        except OverflowError:
            raise MscclCheckError(f"MSCCL XML: step {values[0]} has an attribute beyond int32 "
                                  f"({values})") from None
        self.nsteps += 1


def _refuse_dtd(*_):
    raise MscclCheckError("MSCCL XML: DTDs and entities are refused (the runtime's parser "
                          "has none)")


def _feed(parser, xml) -> None:
    """Feed text (str, bytes), a path (os.PathLike) or a binary file to ``parser`` in 1 MiB
    pieces."""
    piece = 1 << 20
    if isinstance(xml, (str, bytes)):
        for i in range(0, len(xml), piece):
            parser.Parse(xml[i:i + piece], False)
    else:
        with open(xml, "rb") if isinstance(xml, os.PathLike) else nullcontext(xml) as f:
            while block := f.read(piece):
                parser.Parse(block, False)
    parser.Parse(b"", True)


def parse(xml) -> Algo:
    """Parse MSCCL XML — text (str, bytes), a path (os.PathLike) or a binary file — into
    :class:`Algo`, streaming (module doc); malformed XML, a DTD or an entity →
    MscclCheckError."""
    reader = _Reader()
    p = expat.ParserCreate()
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.StartDoctypeDeclHandler = p.EntityDeclHandler = _refuse_dtd
    p.ExternalEntityRefHandler = _refuse_dtd
    p.StartElementHandler, p.EndElementHandler = reader.start, reader.end
    try:
        _feed(p, xml)
    except expat.ExpatError as exc:
        raise MscclCheckError(f"MSCCL XML does not parse: {exc}") from None
    except OSError as exc:
        raise MscclCheckError(f"MSCCL XML: cannot read {xml}: {exc.strerror}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise MscclCheckError(f"malformed MSCCL XML (missing or non-integer attribute: "
                              f"{exc})") from None
    if reader.root is None:
        raise MscclCheckError("MSCCL XML does not parse: no root element")
    return _algo_of(reader)


def _algo_of(reader: _Reader) -> Algo:
    a = reader.root
    try:
        coll = a["coll"]
        if coll not in _COLL:
            raise MscclCheckError(f"MSCCL XML: coll={coll!r} is not allgather, reducescatter "
                                  "(reduce_scatter) or allreduce")
        table = np.frombuffer(reader.rows, dtype=np.int32).reshape(-1, len(COLUMNS))
        algo = Algo(a, int(a["ngpus"]), int(a["nchannels"]), int(a["nchunksperloop"]),
                    coll, _COLL[coll], bool(int(a["inplace"])),
                    bool(int(a.get("outofplace", "0"))), a["proto"], reader.gpus, table,
                    reader.names)
    except (KeyError, TypeError, ValueError) as exc:
        raise MscclCheckError(f"malformed MSCCL XML (missing or non-integer attribute: "
                              f"{exc})") from None
    _check_sizes(algo)
    return algo


#: Most chunks one buffer of one rank may declare, and most chunks over all ranks' buffers:
#: the checker holds a value id per chunk, so larger declarations are refused before
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


class _Layout:
    """An Algo's threadblocks in one global order (gpus by id, each one's tbs by id) and
    per-step arrays: ``step_tb`` (global tb), ``pos`` (index in its tb), ``target`` (global
    tb of ``depid`` on the same gpu; -1 none, -2 no such tb), ``sizes`` (i/o/s chunks of the
    step's gpu)."""

    def __init__(self, algo: Algo):
        self.gpus = sorted(algo.gpus, key=lambda g: g.id)
        self.tbs, self.gpu_of, self.local, self.base = [], [], [], []
        ids = {}
        for gp, g in enumerate(self.gpus):
            self.base.append(len(self.tbs))
            for i, tb in enumerate(sorted(g.tbs, key=lambda x: x.id)):
                ids[(gp, tb.id)] = len(self.tbs)
                self.tbs.append(tb)
                self.gpu_of.append(gp)
                self.local.append(i)
        self.ntbs = [len(g.tbs) for g in self.gpus]
        nsteps = len(algo.table)
        self.start = np.array([tb.steps.start for tb in self.tbs], np.int64)
        self.end = np.array([tb.steps.stop for tb in self.tbs], np.int64)
        self.step_tb = np.zeros(nsteps, np.int64)
        for t, tb in enumerate(self.tbs):
            self.step_tb[tb.steps.start:tb.steps.stop] = t
        self.pos = np.arange(nsteps) - self.start[self.step_tb]
        step_gpu = np.array(self.gpu_of, np.int64)[self.step_tb]
        depid = algo.table[:, DEPID].astype(np.int64)
        if all(tb.id == self.local[t] for t, tb in enumerate(self.tbs)):   # ids 0..n-1
            ntb, base = np.array(self.ntbs, np.int64), np.array(self.base, np.int64)
            self.target = np.where(depid < 0, -1, np.where(
                depid < ntb[step_gpu], base[step_gpu] + depid, -2))
        else:
            self.target = np.full(nsteps, -1, np.int64)
            for row in np.flatnonzero(depid >= 0).tolist():
                self.target[row] = ids.get((int(step_gpu[row]), int(depid[row])), -2)
        sizes = np.array([(g.i_chunks, g.o_chunks, g.s_chunks) for g in self.gpus], np.int64)
        self.sizes = sizes.reshape(-1, 3)[step_gpu]


def _layout(algo: Algo) -> _Layout:
    if algo.layout is None:
        algo.layout = _Layout(algo)
    return algo.layout


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
    _raise_first(algo, _step_rules(algo, rt))
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
    per threadblock (the step rules run on all ranks at once, :func:`_step_rules`).
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


def _step_rules(algo: Algo, rt: Runtime | None) -> list:
    """(mask over the step table, message of a row) per rule, in the order the parser applies
    them to a step; ``rt`` None: what an execution needs (known type and buffers, peers that
    are gpus, pieces inside the buffers)."""
    lay, tab = _layout(algo), algo.table
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
        (np.isin(ty, _codes(SENDS)) & ((send < 0) | (send >= n)),
         lambda r: f"a send in a threadblock without send peer (send={send[r]})"),
        (np.isin(ty, _codes(RECVS)) & ((recv < 0) | (recv >= n)),
         lambda r: f"a receive in a threadblock without recv peer (recv={recv[r]})")]
    top = _INT32 if rt is None else rt.max_count
    rules.append((active & ((cnt < 0) | (cnt >= top)),
                  lambda r: f"cnt {cnt[r]} outside 0..{top - 1}"))
    for use, bcol, ocol in ((READS, SRCBUF, SRCOFF), (WRITES, DSTBUF, DSTOFF)):
        buf = np.clip(tab[:, bcol], 0, 2).astype(np.int64)
        size = np.take_along_axis(lay.sizes, buf[:, None], 1)[:, 0]
        off = tab[:, ocol].astype(np.int64)
        inside = (off >= 0) & (off + cnt <= size) & (off <= (INT16_MAX if rt else _INT32))
        rules.append((active & np.isin(ty, _codes(use)) & (tab[:, bcol] >= 0) & ~inside,
                      lambda r, b=bcol, o=ocol, size=size: (
                          f"pieces [{tab[r, o]}, {tab[r, o] + cnt[r]}) outside buffer "
                          f"{algo.spelled(r, b)} ({size[r]} chunks, int16 offsets)")))
    if rt is not None:
        rules += _dependency_rules(algo, lay, nop)
    return [(mask, lambda r, m=msg: f"{here(r)}: {m(r)}") for mask, msg in rules]


def _dependency_rules(algo: Algo, lay: _Layout, nop: np.ndarray) -> list:
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


def _raise_first(algo: Algo, rules: list) -> None:
    """MscclCheckError with the message of the first (row, rule) that fails."""
    first = None
    for i, (mask, msg) in enumerate(rules):
        bad = np.flatnonzero(mask)
        if bad.size and (first is None or (int(bad[0]), i) < first[:2]):
            first = (int(bad[0]), i, msg)
    if first is not None:
        raise MscclCheckError(first[2](first[0]))


# ---- execution ---------------------------------------------------------------------------
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
        lay = self.lay = _layout(algo)
        n = algo.ngpus
        if [g.id for g in lay.gpus] != list(range(n)) or len({g.i_chunks for g in lay.gpus}) > 1:
            raise MscclCheckError(f"cannot execute: gpu ids are not 0..{n - 1} or the gpus "
                                  "declare different input sizes")
        _raise_first(algo, _step_rules(algo, None))
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
        lay, tab = _layout(algo), algo.table
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


def _deadlock_message(lay: _Layout, tab: np.ndarray, stuck: list, capacity, pc_of, k_of,
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
    algo = _algo(xml)
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
    algo = _algo(xml)
    stats = check_limits(algo, runtime, max_steps)
    for mode in [m for m, ok in ((True, algo.inplace), (False, algo.outofplace)) if ok]:
        data = _DataRun(algo, mode, False)
        data.run(min(capacities, default=1))
        data.check_result()
    for cap in capacities:
        if _bounded(algo, cap):
            _Flow(algo, cap).run()
    return stats


def _starts(text: str, tag: str) -> list[int]:
    out, at = [], text.find(tag)
    while at >= 0:
        out.append(at)
        at = text.find(tag, at + 1)
    return out


def shape(text: str) -> dict:
    """{"gpus", "threadblocks", "max_tbs_per_gpu", "max_steps_per_tb"} of an XML as
    :func:`topofinder.export.schedule_xml.to_msccl_xml` writes it (checked already, one
    ``<gpu ``/``<tb ``/``<step `` tag each), by counting tags between the threadblocks'
    starts instead of parsing it again (string scans at C speed)."""
    gpus, tbs = _starts(text, "<gpu "), _starts(text, "<tb ")
    bounds = tbs + [len(text)]
    steps = [text.count("<step ", bounds[i], bounds[i + 1]) for i in range(len(tbs))]
    per_gpu = np.diff(np.searchsorted(tbs, gpus + [len(text)]))
    return {"gpus": len(gpus), "threadblocks": len(tbs),
            "max_tbs_per_gpu": int(per_gpu.max(initial=0)), "max_steps_per_tb": max(steps,
                                                                                     default=0)}
