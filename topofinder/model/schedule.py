"""Step schedules: data model, T_L and T_B from the sends, independent replay validation, reverse /
reduce-scatter / allreduce, chunk refinement and JSON (docs/model.md, docs/formats.md; paper 001
§3, Appendix B, E.2).

A send ``(t, v, lo, hi, u, w)`` means: at comm step t (1-based) node u sends chunks [lo, hi) of
v's shard to its out-neighbour w; every shard is cut into ``shard_chunks`` = P equal chunks.

Semantics checked by :func:`validate` (written independently of every generator):

- allgather: u may send only chunks it held before step t (its own shard, or chunks received at
  steps < t); at the end every node holds every chunk of every shard.
- reduce-scatter: every node starts with its own contribution to every chunk of every shard. A
  send moves u's partial sum of those chunks (everything u holds for them) to w, which adds it to
  its own; u then holds nothing for them until it receives again. u may send only chunks it holds
  a non-empty partial for, and a chunk at most once per step. At the end node v holds, for every
  chunk of its shard v, the reduction of all N contributions, each exactly once (partials are
  moved, never copied, so reaching N contributions means each counted once).
- allreduce: steps 1..reduce_steps are a reduce-scatter, the remaining steps an allgather.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.inputs import read_json
from topofinder.model.topology import Topology
from topofinder.model.units import exact
from topofinder.model.collectives import Collective

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)
#: The schedule document's identity (docs/formats.md): a reader checks both.
SCHEDULE_FORMAT = "topofinder-schedule"
SCHEDULE_VERSION = 1
#: One send row: at step t (1-based) node u sends chunks [lo, hi) of node v's shard to w.
SEND_COLUMNS = ("t", "v", "lo", "hi", "u", "w")
_MAX_REPLAY_CELLS = 400_000_000   # node × chunk-segment states a replay may hold in memory
_DENSE_CODES = 1 << 22            # replay breakpoint codes n·(P+1) found by a bitmap up to this
#: Largest N whose links are looked up in a dense N×N table of link indices (4·N² bytes, kept on
#: the topology: 16 MiB at N = 2048) instead of by binary search over the sorted links
DENSE_LINK_NODES = 2048
#: Largest steps × links table of per-step link loads counted densely (else by sorting sends)
_DENSE_LOADS = 1 << 24


class ScheduleError(TopofinderError):
    """A schedule that is malformed or does not perform its collective."""


class StepRows:
    """Counting shared by the step-schedule classes: ``sends`` is an (S, ·) array whose column 0
    is the step t = 1..k."""

    sends: np.ndarray

    @property
    def num_sends(self) -> int:
        return int(self.sends.shape[0])

    @property
    def num_steps(self) -> int:
        """k (T_L in steps): the largest step index (0 for an empty schedule)."""
        return int(self.sends[:, 0].max()) if self.num_sends else 0


@dataclass(frozen=True, eq=False)
class StepSchedule(StepRows):
    """A step schedule on ``topology``.

    ``sends``: int64 array (S, 6), rows (t, v, lo, hi, u, w). ``shard_chunks``: P.
    ``collective``: "allgather", "reduce-scatter" or "allreduce" (then ``reduce_steps`` leading
    steps are the reduce-scatter phase). ``method``: how it was built ("bfb", "line-graph", ...).
    """

    topology: Topology
    shard_chunks: int
    sends: np.ndarray
    collective: str = Collective.ALLGATHER
    method: str = ""
    reduce_steps: int = 0

    def __post_init__(self):
        sends = np.asarray(self.sends, dtype=np.int64)   # taken over (made read-only)
        if sends.size == 0:
            sends = sends.reshape(0, 6)
        if sends is self.sends and sends.flags.writeable and sends.base is not None:
            sends = sends.copy()                     # a view: do not freeze its owner
        if sends.ndim != 2 or sends.shape[1] != 6:
            raise ScheduleError(f"sends must be an (S, 6) array of (t, v, lo, hi, u, w) rows, "
                                f"got shape {sends.shape}")
        sends.setflags(write=False)
        object.__setattr__(self, "sends", sends)
        if int(self.shard_chunks) != self.shard_chunks or self.shard_chunks < 1:
            raise ScheduleError(f"shard_chunks must be a positive integer, got "
                                f"{self.shard_chunks}")
        object.__setattr__(self, "shard_chunks", int(self.shard_chunks))
        if self.collective not in COLLECTIVES:
            raise ScheduleError(f"collective {self.collective!r} is not one of "
                                f"{', '.join(COLLECTIVES)}")
        if self.collective != Collective.ALLREDUCE and self.reduce_steps:
            raise ScheduleError("reduce_steps applies to allreduce schedules only")

    # ---- cost --------------------------------------------------------------------------
    @cached_property
    def step_loads(self) -> tuple[Fraction, ...]:
        """For t = 1..num_steps: max over links (u, w) of load_t(u, w) / cap(u, w), in chunks
        per unit of link capacity (a k-fold multi-arc has capacity k)."""
        s = self.sends
        steps = self.num_steps
        if not steps:
            return ()
        n = self.topology.n
        t, lo, hi, u, w = s[:, 0], s[:, 2], s[:, 3], s[:, 4], s[:, 5]
        if t.min() < 1 or u.min() < 0 or w.min() < 0 or max(u.max(), w.max()) >= n:
            raise ScheduleError("sends name a step < 1 or a node outside the topology; "
                                "run validate() for details")
        dense = _dense_step_loads(self.topology, t, lo, hi, u, w, steps)
        if dense is not None:
            return dense
        key = (t * n + u) * n + w                        # sorted keys are sorted by step
        uniq, inv = np.unique(key, return_inverse=True)
        # integer chunk counts: float sums of integers are exact below 2^53
        load = np.rint(np.bincount(inv.reshape(-1), weights=(hi - lo).astype(np.float64)))
        load = load.astype(np.int64)
        lt, lu, lw = uniq // (n * n), (uniq // n) % n, uniq % n
        cap = link_capacity(self.topology, lu, lw)
        if np.any(cap == 0):
            raise ScheduleError("a send uses a missing arc; run validate() for details")
        # exact max of load/cap per step: scale every ratio to the common denominator lcm(cap)
        common = int(np.lcm.reduce(np.unique(cap)))
        scaled = load * (common // cap)
        starts = np.searchsorted(lt, np.arange(1, steps + 2))
        out = []
        for step in range(steps):
            a, b = starts[step], starts[step + 1]
            out.append(Fraction(int(scaled[a:b].max()), common) if b > a else Fraction(0))
        return tuple(out)

    @property
    def tau(self) -> Fraction:
        """T_B in units of M/B: Σ_t max_link load_t/cap · B/(N·P) (B = node bandwidth); the
        BW-optimal allgather has τ = (N−1)/N."""
        d, n = self.topology.node_bandwidth, self.topology.n   # B = Σ capacities
        return sum(self.step_loads, Fraction(0)) * Fraction(d, n * self.shard_chunks)

    # ---- serialisation (docs/formats.md) ----------------------------------------------------
    def to_dict(self, _rows: bool = False) -> dict:
        """The step-program document (docs/formats.md; schema ``schedule.schema.json``): at
        step ``t`` node ``u`` sends chunks [lo, hi) of node ``v``'s shard to ``w``. ``_rows``:
        keep ``sends`` an array, for :func:`dumps_document`."""
        doc = {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION, "kind": "steps",
               "collective": self.collective, "topology": self.topology.expr,
               "num_nodes": self.topology.n, "shard_chunks": self.shard_chunks,
               "method": self.method, "num_steps": self.num_steps,
               "tau": float(self.tau), "tau_exact": exact(self.tau)}
        if self.collective == Collective.ALLREDUCE:
            doc["reduce_scatter_steps"] = self.reduce_steps
        if self.topology.labels is not None:
            doc["labels"] = list(self.topology.labels)     # labels[rank] = host name
        doc["columns"] = list(SEND_COLUMNS)
        doc["sends"] = self.sends if _rows else self.sends.tolist()
        return doc

    def to_json(self, indent: int | None = None) -> str:
        if indent is None:
            return dumps_document(self.to_dict(_rows=True))
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, doc, topology: Topology) -> "StepSchedule":
        """From a JSON string or dict of :meth:`to_dict` shape, on ``topology`` (the document's
        ``topology`` field names it; :func:`topofinder.api.load_schedule` builds it from
        there). Documents without ``version`` (written before it existed) read the same."""
        doc = read_document(doc, topology, SEND_COLUMNS, ("collective", "shard_chunks", "sends"))
        return cls(topology, int(doc["shard_chunks"]), np.array(doc["sends"], dtype=np.int64),
                   collective=doc["collective"], method=doc.get("method", ""),
                   reduce_steps=int(doc.get("reduce_scatter_steps", 0)))


#: Largest value range of a send table written through a digit table (int_rows_json).
_TABLE_RANGE = 1 << 16
#: Rows of a send table laid out at once by int_rows_json (a cache-sized scratch buffer).
_JSON_BLOCK = 1 << 15


def int_rows_json(rows: np.ndarray) -> str:
    """``json.dumps(rows.tolist())`` of a 2-D integer array, byte for byte, built in bulk
    (:func:`int_rows_json_blocks`, joined)."""
    return "".join(int_rows_json_blocks(rows))


def int_rows_json_blocks(rows: np.ndarray):
    """The text of ``json.dumps(rows.tolist())`` in consecutive pieces of at most _JSON_BLOCK
    rows each, so a writer streams a send table without holding its text: each value's digits
    come from a table of the values' range, NUL-padded to one machine word, laid out with the
    brackets and separators, and the padding dropped (a 2.1 M-row send table: 0.5 s instead
    of 2.7 s); values of a wider range are %-formatted block by block."""
    a = np.asarray(rows, np.int64)
    if a.size == 0:
        yield json.dumps(a.tolist())
        return
    s, c = a.shape
    lo, hi = int(a.min()), int(a.max())
    yield "["
    if hi - lo > _TABLE_RANGE or max(len(str(lo)), len(str(hi))) > 8:
        row = "[" + ", ".join(["%d"] * c) + "], "
        for first in range(0, s, _JSON_BLOCK):
            block = a[first:first + _JSON_BLOCK]
            text = (row * block.shape[0]) % tuple(block.ravel().tolist())
            yield text[:-2] + "]" if first + _JSON_BLOCK >= s else text
        return
    words = [str(x).encode() for x in range(lo, hi + 1)]
    width = next(w for w in (1, 2, 4, 8) if w >= max(map(len, words)))   # one word per cell
    word = np.dtype(f"u{width}")
    table = np.frombuffer(b"".join(w.rjust(width, b"\0") for w in words), word)
    out = np.empty((_JSON_BLOCK, 2 + c * (width + 2)), np.uint8)   # a block of row texts:
    out[:, 0], out[:, -1] = ord("["), ord(" ")                     # "[" cells each with
    cells = out[:, 1:-1].reshape(_JSON_BLOCK, c, width + 2)        # ", " (the last "],") " "
    cells[:, :, width:] = np.frombuffer(b", ", np.uint8)
    cells[:, -1, width:] = np.frombuffer(b"],", np.uint8)
    digits = cells[:, :, :width].view(word)[..., 0]
    for first in range(0, s, _JSON_BLOCK):
        block = a[first:first + _JSON_BLOCK]
        digits[:block.shape[0]] = table[block - lo if lo else block]
        text = out[:block.shape[0]].reshape(-1)
        text = text[text != 0].tobytes().decode("ascii")
        yield text[:-2] + "]" if first + _JSON_BLOCK >= s else text   # no ", " after the last


def dumps_document(doc: dict, end: str = "") -> str:
    """``json.dumps(doc) + end`` (default separators) of a dict whose array values are written
    as their ``tolist()`` would be, through :func:`int_rows_json`; joined once."""
    return "".join(document_blocks(doc, end))


def document_blocks(doc: dict, end: str = ""):
    """The text of :func:`dumps_document` in pieces (arrays block by block), for streaming."""
    yield "{"
    for i, (k, v) in enumerate(doc.items()):
        yield (", " if i else "") + json.dumps(k) + ": "
        if isinstance(v, np.ndarray):
            yield from int_rows_json_blocks(v)
        else:
            yield json.dumps(v)
    yield "}" + end


def parse_object(doc) -> dict:
    """A schedule document (JSON string, bytes or an already parsed value) as a dict;
    ScheduleError when it does not parse or is not an object."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = read_json(doc, "schedule JSON")
        except TopofinderError as exc:
            raise ScheduleError(str(exc)) from None
    if not isinstance(doc, dict):
        raise ScheduleError("a schedule JSON document must be an object")
    return doc


def read_document(doc, topology: Topology, columns, required) -> dict:
    """The checks every schedule JSON reader shares: ``doc`` (a JSON string or dict) parses to
    an object (:func:`parse_object`) holding the ``required`` keys, of this ``version``, with
    these ``columns`` and ``num_nodes`` (when present) matching ``topology``. Returns the
    dict; ScheduleError else."""
    doc = parse_object(doc)
    missing = [k for k in required if k not in doc]
    if missing:
        raise ScheduleError(f"schedule JSON lacks {', '.join(missing)}")
    if doc.get("version", SCHEDULE_VERSION) != SCHEDULE_VERSION:
        raise ScheduleError(f"schedule JSON version {doc['version']!r}; this topofinder "
                            f"reads version {SCHEDULE_VERSION}")
    if list(doc.get("columns", columns)) != list(columns):
        raise ScheduleError(f"schedule JSON columns {doc['columns']!r}; expected "
                            f"{list(columns)}")
    if "num_nodes" in doc and int(doc["num_nodes"]) != topology.n:
        raise ScheduleError(f"schedule is for {doc['num_nodes']} nodes, the topology has "
                            f"{topology.n}")
    return doc


def send_rows(*blocks) -> np.ndarray:
    """An (S, 6) send table from consecutive blocks of rows, each block given as its six
    columns (t, v, lo, hi, u, w): arrays of the block's length, or scalars repeated; column v
    is always an array. Laid out column by column (Fortran order), so no row is written with
    a stride, and with no intermediate copies (np.stack, then np.concatenate, wrote every
    value twice, strided)."""
    sizes = [np.shape(cols[1])[0] for cols in blocks]
    out = np.empty((sum(sizes), 6), np.int64, order="F")
    at = 0
    for size, cols in zip(sizes, blocks):
        for j, col in enumerate(cols):
            out[at:at + size, j] = col
        at += size
    return out


def _links(topo: Topology) -> tuple[np.ndarray, np.ndarray] | None:
    """(table, cap): table[u·N + w] the index of the link u→w in ``cap`` (its summed arc
    capacity), or len(cap) − 1, whose capacity is 0, where there is no link; None beyond
    DENSE_LINK_NODES. Computed once per topology."""
    if topo.n > DENSE_LINK_NODES:
        return None
    known = topo.__dict__.get("_dense_links")
    if known is None:
        lm = topo.link_matrix.tocoo()
        cap = np.append(lm.data.astype(np.int64), 0)
        table = np.full(topo.n * topo.n, cap.size - 1, np.int32)
        table[lm.row.astype(np.int64) * topo.n + lm.col] = np.arange(cap.size - 1)
        known = topo.__dict__["_dense_links"] = (table, cap)
    return known


def _dense_step_loads(topo: Topology, t, lo, hi, u, w, steps: int) -> tuple | None:
    """StepSchedule.step_loads counted in a dense (step, link) table: the same exact values
    (the max of load/cap per step does not depend on the common denominator it is scaled
    to), without sorting the sends. None when the table would be too large."""
    links = _links(topo)
    if links is None or steps * links[1].size > _DENSE_LOADS:
        return None
    table, cap = links
    link = table[u * topo.n + w].astype(np.int64)
    if np.any(cap[link] == 0):
        raise ScheduleError("a send uses a missing arc; run validate() for details")
    width = cap.size
    load = np.bincount((t - 1) * width + link, weights=(hi - lo).astype(np.float64),
                       minlength=steps * width)
    load = np.rint(load).astype(np.int64).reshape(steps, width)
    caps = cap[:-1]
    common = int(np.lcm.reduce(np.unique(caps[caps > 0])))
    scaled = load[:, :-1] * (common // np.maximum(caps, 1))
    return tuple(Fraction(int(x), common) for x in scaled.max(axis=1))


def link_capacity(topo: Topology, u, w) -> np.ndarray:
    """Summed capacity of the arcs u→w for arrays u, w (0 where there is none; self-loops
    carry nothing)."""
    u, w = np.asarray(u, np.int64), np.asarray(w, np.int64)
    links = _links(topo) if u.size else None
    if links is not None and min(u.min(), w.min()) >= 0 and max(u.max(), w.max()) < topo.n:
        table, cap = links
        return cap[table[u * topo.n + w]]
    lm = topo.link_matrix.tocoo()
    keys = lm.row.astype(np.int64) * topo.n + lm.col
    order = np.argsort(keys)
    keys, caps = keys[order], lm.data[order].astype(np.int64)
    q = np.asarray(u, np.int64) * topo.n + np.asarray(w, np.int64)
    if keys.size == 0:
        return np.zeros(q.shape, np.int64)
    idx = np.minimum(np.searchsorted(keys, q), keys.size - 1)
    return np.where(keys[idx] == q, caps[idx], 0)


# ---- validation ------------------------------------------------------------------------
def validate(schedule: StepSchedule) -> None:
    """Replay ``schedule`` and raise ScheduleError naming the first violation (docs/model.md,
    Appendix B): malformed rows, out-of-range chunks, missing arcs, sends of unheld chunks,
    incomplete collectives."""
    s, topo, p = schedule.sends, schedule.topology, schedule.shard_chunks
    _check_rows(s, topo, p)
    if schedule.collective == Collective.ALLGATHER:
        _replay_allgather(s, topo.n, p)
    elif schedule.collective == Collective.REDUCE_SCATTER:
        _replay_reduce_scatter(s, topo.n, p)
    else:
        r = schedule.reduce_steps
        first = s[:, 0] <= r
        try:
            _replay_reduce_scatter(s[first], topo.n, p)
        except ScheduleError as exc:
            raise ScheduleError(f"allreduce, reduce-scatter phase: {exc}") from None
        second = s[~first].copy()
        second[:, 0] -= r
        try:
            _replay_allgather(second, topo.n, p)
        except ScheduleError as exc:
            raise ScheduleError(f"allreduce, allgather phase (steps shifted by {r}): "
                                f"{exc}") from None


def validate_sources(schedule: StepSchedule, sources) -> None:
    """Replay only the shards of ``sources`` (node ids) of an allgather or reduce-scatter whose
    rows all carry one of those shards: the same checks as :func:`validate`, each shard's
    spreading being independent of the others'. Used by replay by symmetry (one source per
    orbit, topofinder.model.symmetric)."""
    s, topo, p = schedule.sends, schedule.topology, schedule.shard_chunks
    sources = np.unique(np.asarray(sources, np.int64))
    _check_rows(s, topo, p)
    stray = ~np.isin(s[:, 1], sources)
    if stray.any():
        raise ScheduleError(f"{_describe(s[np.argmax(stray)])}: not a shard being replayed")
    if schedule.collective == Collective.ALLGATHER:
        _replay_allgather(s, topo.n, p, sources)
    elif schedule.collective == Collective.REDUCE_SCATTER:
        _replay_reduce_scatter(s, topo.n, p, sources)
    else:
        raise ScheduleError("a replay by sources takes an allgather or a reduce-scatter")


def _describe(row) -> str:
    t, v, lo, hi, u, w = (int(x) for x in row)
    return f"step {t}: node {u} sends chunks [{lo},{hi}) of node {v}'s shard to node {w}"


def check_send_rows(checks: list, t: np.ndarray, u: np.ndarray, w: np.ndarray,
                    topo: Topology, describe) -> None:
    """ScheduleError naming the earliest-step row (ties: the first listed) that fails one of
    ``checks`` — (mask over rows, reason) pairs, the first failing reason wins — or sends u→w
    over no link of ``topo``; ``describe(i)`` says what row i does."""
    bad = np.zeros(t.shape[0], bool)
    for mask, _ in checks:
        bad |= mask
    ok = ~bad
    if bad.any():
        cap = np.zeros(t.shape[0], np.int64)
        cap[ok] = link_capacity(topo, u[ok], w[ok])
    else:                                  # every row names nodes in range: no copies
        cap = link_capacity(topo, u, w)
    checks = [*checks, (ok & (cap == 0), f"no link u->w in {topo.expr}")]
    bad |= checks[-1][0]
    if bad.any():
        cand = np.flatnonzero(bad)
        i = cand[np.lexsort((cand, t[cand]))[0]]
        reason = next(msg for mask, msg in checks if mask[i])
        raise ScheduleError(f"{describe(i)}: {reason}")


def _check_rows(s: np.ndarray, topo: Topology, p: int) -> None:
    n = topo.n
    if s.shape[0] == 0:
        return
    t, v, lo, hi, u, w = s.T
    if t.min() >= 1 and lo.min() >= 0 and hi.max() <= p and not (lo >= hi).any() \
            and min(v.min(), u.min(), w.min()) >= 0 and max(v.max(), u.max(), w.max()) < n \
            and link_capacity(topo, u, w).all():
        return                             # well formed (by reductions, without row masks)
    checks = [
        (t < 1, "steps are numbered from 1"),
        ((v < 0) | (v >= n) | (u < 0) | (u >= n) | (w < 0) | (w >= n),
         f"a node outside 0..{n - 1}"),
        ((lo < 0) | (hi > p), f"chunk range outside [0, {p})"),
        (lo >= hi, "an empty chunk range (need lo < hi)"),
    ]
    check_send_rows(checks, t, u, w, topo, lambda i: _describe(s[i]))


class _Segments:
    """Chunk ranges refined per shard: every lo/hi of a shard's sends is a breakpoint, so each
    send covers whole segments and all nodes share the segmentation of a shard."""

    def __init__(self, s: np.ndarray, n: int, p: int, sources: np.ndarray | None = None):
        self.n, self.p = n, p
        sources = np.arange(n, dtype=np.int64) if sources is None else sources
        base = np.asarray(sources, np.int64) * (p + 1)
        v, lo, hi = s[:, 1], s[:, 2], s[:, 3]
        points = (base, base + p, v * (p + 1) + lo, v * (p + 1) + hi)
        space = n * (p + 1)
        self.rank = None                  # code -> segment index, when a bitmap beats sorting
        if space <= max(_DENSE_CODES, 2 * s.shape[0]):
            present = np.zeros(space, bool)
            for x in points:
                present[x] = True
            codes = np.flatnonzero(present)
            self.rank = np.cumsum(present, dtype=np.int64) - 1
        else:
            codes = np.unique(np.concatenate(points))
        self.codes = codes
        self.shard = codes // (p + 1)
        self.pos = codes % (p + 1)
        self.real = self.pos < p          # the point at position P starts no segment
        self.g = codes.size
        if n * self.g > _MAX_REPLAY_CELLS:
            raise TopofinderError(f"schedule too large to replay: {n} nodes × {self.g} chunk "
                                  f"segments exceeds {_MAX_REPLAY_CELLS} states")

    def ranges(self, s: np.ndarray):
        """Segment index ranges [a, b) covered by each send's chunk range."""
        v = s[:, 1] * (self.p + 1)
        if self.rank is not None:         # the rows' codes are breakpoints, all present
            return self.rank[v + s[:, 2]], self.rank[v + s[:, 3]]
        return (np.searchsorted(self.codes, v + s[:, 2]),
                np.searchsorted(self.codes, v + s[:, 3]))

    @staticmethod
    def expand(a: np.ndarray, b: np.ndarray):
        """Concatenated aranges a[i]..b[i]-1 and the owning row of each element."""
        lens = b - a
        owner = np.repeat(np.arange(a.size), lens)
        starts = np.cumsum(lens) - lens
        idx = np.arange(owner.size) - np.repeat(starts - a, lens)
        return idx, owner, starts


def _replay_allgather(s: np.ndarray, n: int, p: int, sources: np.ndarray | None = None) -> None:
    """Allgather replay of the shards of ``sources`` (default all; every row's v must be one
    of them): the shards spread independently, so a subset replays on its own."""
    seg = _Segments(s, n, p, sources)
    never = np.iinfo(np.int64).max
    arrival = np.full((n, seg.g), never, np.int64)   # first step after which a node holds it
    arrival[seg.shard, np.arange(seg.g)] = 0
    if s.shape[0]:
        a, b = seg.ranges(s)
        t, u, w = s[:, 0], s[:, 4], s[:, 5]
        flat = arrival.reshape(-1)
        if np.all(b - a == 1):            # one segment per send (tree schedules): no expansion
            idx, owner = a, None
            np.minimum.at(flat, w * seg.g + a, t)
            held_at = latest = flat[u * seg.g + a]
        else:
            idx, owner, starts = seg.expand(a, b)
            np.minimum.at(flat, w[owner] * seg.g + idx, t[owner])
            held_at = flat[u[owner] * seg.g + idx]
            latest = np.maximum.reduceat(held_at, starts)
        bad = np.flatnonzero(latest >= t)
        if bad.size:
            i = bad[np.lexsort((bad, t[bad]))[0]]
            own = np.array([i]) if owner is None else np.flatnonzero(owner == i)
            k = idx[own[np.argmax(held_at[own] >= t[i])]]
            raise ScheduleError(f"{_describe(s[i])}, but node {int(u[i])} does not hold chunk "
                                f"{int(seg.pos[k])} of that shard before step {int(t[i])}")
    missing = (arrival == never) & seg.real[None, :]
    if missing.any():
        x, k = np.argwhere(missing)[0]
        raise ScheduleError(f"incomplete allgather: node {int(x)} never receives chunk "
                            f"{int(seg.pos[k])} of node {int(seg.shard[k])}'s shard")


def _replay_reduce_scatter(s: np.ndarray, n: int, p: int,
                           sources: np.ndarray | None = None) -> None:
    """Reduce-scatter replay of the shards of ``sources`` (default all), as above."""
    seg = _Segments(s, n, p, sources)
    count = np.ones((n, seg.g), np.int64)     # contributions in each node's partial sum
    flat = count.reshape(-1)
    # who wrote last into each state: a state sent from twice in one step is one whose
    # earlier sender is overwritten (no sort); by np.unique where the scratch would be large
    last = np.empty(flat.size, np.int32) if flat.size <= _DENSE_LOADS else None
    if s.shape[0]:
        s = s[np.argsort(s[:, 0], kind="stable")]
        a, b = seg.ranges(s)
        steps, first = np.unique(s[:, 0], return_index=True)
        bounds = np.append(first, s.shape[0])
        for j in range(steps.size):
            rows = slice(bounds[j], bounds[j + 1])
            sub = s[rows]
            idx, owner, _ = seg.expand(a[rows], b[rows])
            src = sub[owner, 4] * seg.g + idx
            dst = sub[owner, 5] * seg.g + idx
            vals = flat[src]
            empty = np.flatnonzero(vals == 0)
            if empty.size:
                e = empty[0]
                raise ScheduleError(
                    f"{_describe(sub[owner[e]])}, but node {int(sub[owner[e], 4])} holds no "
                    f"partial sum of chunk {int(seg.pos[idx[e]])} then (already sent on)")
            e = _first_repeat(src, last)
            if e is not None:
                raise ScheduleError(
                    f"{_describe(sub[owner[e]])}, but it sends chunk {int(seg.pos[idx[e]])} "
                    f"of that shard more than once in step {int(sub[0, 0])} (its "
                    f"contributions would be counted twice)")
            flat[src] = 0
            np.add.at(flat, dst, vals)
    own = count[seg.shard, np.arange(seg.g)]
    short = np.flatnonzero(seg.real & (own != n))
    if short.size:
        k = short[0]
        raise ScheduleError(f"incomplete reduce-scatter: node {int(seg.shard[k])} ends with "
                            f"{int(own[k])} of {n} contributions to chunk {int(seg.pos[k])} "
                            f"of its shard")


def _first_repeat(src: np.ndarray, last: np.ndarray | None) -> int | None:
    """The first position of the smallest value that occurs more than once in ``src``, None
    when all differ; ``last``: scratch indexed by the values (or None: by sorting)."""
    if last is None:
        _, first_i, times = np.unique(src, return_index=True, return_counts=True)
        return int(first_i[np.argmax(times > 1)]) if np.any(times > 1) else None
    order = np.arange(src.size, dtype=np.int32)
    last[src] = order
    repeated = last[src] != order
    if not repeated.any():
        return None
    return int(np.argmax(src == src[repeated].min()))


# ---- transformations ---------------------------------------------------------------------
def reverse(schedule: StepSchedule, topology: Topology | None = None) -> StepSchedule:
    """The reverse schedule A^T on G^T (Def 5, Thm 1 of paper 001): ((v,C),(u,w),T−t+1) for
    every ((v,C),(w,u),t); an allgather becomes a reduce-scatter and vice versa.
    ``topology``: a name for G^T (must have the arcs of the transpose); default transpose()."""
    if schedule.collective == Collective.ALLREDUCE:
        raise ScheduleError("reverse applies to allgather and reduce-scatter schedules")
    gt = schedule.topology.transpose()
    if topology is not None:
        if not topology.same_arcs(gt):
            raise ScheduleError(f"{topology.expr} is not the transpose of "
                                f"{schedule.topology.expr}")
        gt = topology
    s = schedule.sends
    out = send_rows((schedule.num_steps + 1 - s[:, 0], s[:, 1], s[:, 2], s[:, 3], s[:, 5],
                     s[:, 4]))
    other = (Collective.REDUCE_SCATTER if schedule.collective == Collective.ALLGATHER
             else Collective.ALLGATHER)
    return StepSchedule(gt, schedule.shard_chunks, out, collective=other,
                        method=schedule.method)


def relabel(schedule: StepSchedule, perm, topology: Topology) -> StepSchedule:
    """Schedule isomorphism f(A) (Def 7): node x becomes perm[x]; ``topology`` is f(G)."""
    perm = np.asarray(perm, np.int64)
    src = Topology(topology.n, perm[schedule.topology.src], perm[schedule.topology.dst],
                   capacity=schedule.topology.capacity, bidirectional=False)
    if not topology.same_arcs(src):
        raise ScheduleError(f"the permutation does not map {schedule.topology.expr} onto "
                            f"{topology.expr}")
    s = schedule.sends
    out = np.stack([s[:, 0], perm[s[:, 1]], s[:, 2], s[:, 3], perm[s[:, 4]], perm[s[:, 5]]],
                   axis=1)
    return StepSchedule(topology, schedule.shard_chunks, out, collective=schedule.collective,
                        method=schedule.method, reduce_steps=schedule.reduce_steps)


def reduce_scatter(allgather: StepSchedule, topology: Topology | None = None) -> StepSchedule:
    """A reduce-scatter with the same T_L and T_B as ``allgather`` (Appendix B).

    With ``topology`` = G: ``allgather`` must run on G^T and is reversed (Thm 1). Without it,
    the reduce-scatter runs on G = allgather.topology, which must be reverse-symmetric with a
    known isomorphism (bidirectional: the identity; else ``reverse_isomorphism`` p, an
    isomorphism G^T → G), and is f(A^T) (Thm 2)."""
    if allgather.collective != Collective.ALLGATHER:
        raise ScheduleError(f"reduce_scatter needs an allgather schedule, got "
                            f"{allgather.collective}")
    if topology is not None:
        return reverse(allgather, topology)
    g = allgather.topology
    if g.bidirectional:
        return reverse(allgather, g)
    if g.reverse_isomorphism is None:
        raise ScheduleError(f"{g.expr} has no known reverse isomorphism: build the allgather "
                            f"on its transpose and pass topology=G (Thm 1)")
    return relabel(reverse(allgather), g.reverse_isomorphism, g)


def refine(schedule: StepSchedule, factor: int) -> StepSchedule:
    """The same schedule with every chunk cut into ``factor`` equal chunks (P → factor·P)."""
    s = schedule.sends.copy()
    s[:, 2:4] *= int(factor)
    return StepSchedule(schedule.topology, schedule.shard_chunks * int(factor), s,
                        collective=schedule.collective, method=schedule.method,
                        reduce_steps=schedule.reduce_steps)


def allreduce(reduce_scatter_schedule: StepSchedule,
              allgather: StepSchedule) -> StepSchedule:
    """Allreduce = reduce-scatter then allgather on the same topology (paper 001 §3): steps of
    the allgather follow the reduce-scatter's; P = lcm of both chunk counts; T_L and τ add."""
    rs, ag = reduce_scatter_schedule, allgather
    if rs.collective != Collective.REDUCE_SCATTER or ag.collective != Collective.ALLGATHER:
        raise ScheduleError("allreduce needs a reduce-scatter and an allgather schedule")
    if not rs.topology.same_arcs(ag.topology):
        raise ScheduleError(f"allreduce phases run on different topologies "
                            f"({rs.topology.expr}, {ag.topology.expr})")
    p = lcm(rs.shard_chunks, ag.shard_chunks)
    rs, ag = refine(rs, p // rs.shard_chunks), refine(ag, p // ag.shard_chunks)
    second = ag.sends.copy()
    second[:, 0] += rs.num_steps
    method = rs.method if rs.method == ag.method else f"{rs.method}+{ag.method}"
    return StepSchedule(ag.topology, p, np.concatenate([rs.sends, second]),
                        collective=Collective.ALLREDUCE, method=method, reduce_steps=rs.num_steps)
