"""The MSCCL XML parser of the checker: ``<algo>/<gpu>/<tb>/<step>`` read as a stream
(expat; :func:`parse` takes text, bytes, a path or a binary file): elements become rows of
one int32 table (:data:`COLUMNS`), never objects, and a DTD, entity declaration or external
entity is refused (a runtime's parser has none; it would only serve expansion attacks)."""

from __future__ import annotations

import os
import xml.parsers.expat as expat
from array import array
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from topofinder.export.msccl.limits import MscclCheckError
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


def type_codes(names) -> np.ndarray:
    return np.array([TYPES.index(x) for x in names])


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
    layout: object = None     # StepLayout, built on first use

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
INT32 = 1 << 31


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


def algo_of(xml) -> Algo:
    return xml if isinstance(xml, Algo) else parse(xml)


class StepLayout:
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


def layout_of(algo: Algo) -> StepLayout:
    if algo.layout is None:
        algo.layout = StepLayout(algo)
    return algo.layout
