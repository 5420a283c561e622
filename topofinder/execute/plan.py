"""Per-rank message plans for executing a schedule (paper 001 §3, §7; paper 002 §4–5).

Data layout (nccl-tests' terms): every rank's buffer holds M bytes = N shards × P chunks ×
e elements; shard v is the block rank v contributes (allgather) or ends with (reduce-scatter),
at element offset v·P·e. A send row (t, v, lo, hi, u, w) of a step schedule moves elements
[(v·P + lo)·e, (v·P + hi)·e) from rank u to rank w at step t. All rows with the same
(t, u, w) travel as one packed message, their ranges in (v, lo, hi) order on both ends.

Step semantics (as :func:`topofinder.model.schedule.validate` replays them): within a step every
send reads the state before the step; in a reducing step the sender gives its partial sum away (its
copy becomes zero) and the receiver adds it to its own; in a copying (allgather) step the receiver
overwrites.

A tree schedule (paper 002: weighted spanning out-trees per root) runs as steps: P = K·lcm of
the weight denominators, tree i of root r carries the next weight·P chunks of r's shard cut
into K pipeline slices, and slice j crosses a tree edge (u, w) at step depth(w) + j.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.families.build import document_topology
from topofinder.model.documents import check_schedule_document
from topofinder.model.oneroot_schedule import ONEROOT_FORMAT, PeriodicSchedule, replay
from topofinder.model.schedule import ScheduleError, StepSchedule
from topofinder.model.inputs import read_input, read_json
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.model.collectives import Collective


#: One-root collectives (paper 003): the buffer is the root's message.
ONE_ROOT = (Collective.BROADCAST, Collective.REDUCE)


@dataclass(frozen=True)
class Program:
    """What every rank executes: ``sends`` rows (t, v, lo, hi, u, w) on N ranks with P chunks
    per shard; steps 1..``reduce_steps`` reduce, later steps copy.

    ``schedule`` is the step schedule the rows came from (for T_L and τ); ``tree_tau`` the
    pipelined tree-flow τ of a tree schedule (paper 002), else None."""

    collective: str
    num_nodes: int
    shard_chunks: int
    sends: np.ndarray
    reduce_steps: int
    kind: str                 # "steps" or "trees"
    topology: str
    method: str
    schedule: StepSchedule | None = None
    tree_tau: Fraction | None = None
    pipeline: int = 1
    root: int = 0

    @property
    def num_steps(self) -> int:
        return int(self.sends[:, 0].max()) if self.sends.shape[0] else 0

    @property
    def pieces(self) -> int:
        """N·P: the buffer is a whole number of these pieces (P for a one-root collective,
        whose buffer is the root's message alone)."""
        if self.collective in ONE_ROOT:
            return self.shard_chunks
        return self.num_nodes * self.shard_chunks


# ---- loading ---------------------------------------------------------------------------
def read_document(path: str) -> dict:
    """The JSON object in ``path`` (TopofinderError if unreadable or not JSON)."""
    doc = read_json(read_input(path, "schedule"), path)
    if not isinstance(doc, dict):
        raise TopofinderError(f"schedule {path}: a JSON object is expected "
                              f"(as written by 'topofinder export --what schedule')")
    return doc


#: Largest --pipeline, and most sends a pipelined tree schedule may expand to.
MAX_PIPELINE = 4096
MAX_SEND_ROWS = 10 ** 7


def program_from_document(doc: dict, pipeline: int = 1) -> Program:
    """A :class:`Program` from a step schedule JSON (``export --what schedule``) or a tree
    schedule JSON (``export --what schedule --kind trees``)."""
    if not 1 <= pipeline <= MAX_PIPELINE:
        raise TopofinderError(f"--pipeline must be an integer in 1..{MAX_PIPELINE}, got "
                              f"{pipeline}")
    check_schedule_document(doc, "schedule")                 # one line per malformation
    if doc.get("format") == ONEROOT_FORMAT:
        return oneroot_program(doc, pipeline)
    if "topology" not in doc:
        raise TopofinderError("schedule JSON names no topology (export writes one)")
    topo = document_topology(doc["topology"], "schedule")
    if doc.get("kind") == "trees":
        trees = TreeSchedule.from_dict(doc, topo)
        steps = tree_steps(trees, pipeline)
        try:
            tree_tau = trees.tau()
        except TopofinderError:
            tree_tau = None          # an edge off the topology: no prediction, still runs
        return Program(Collective.ALLGATHER, topo.n, steps.shard_chunks, steps.sends, 0, "trees",
                       topo.expr, trees.method, steps, tree_tau, pipeline)
    if doc.get("collective") == Collective.ALLTOALL:
        raise TopofinderError("run executes allgather, reduce-scatter and allreduce schedules; "
                              "all-to-all schedules are exported, not run")
    try:
        sched = StepSchedule.from_json(doc, topology=topo)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, TopofinderError):
            raise
        raise TopofinderError(f"malformed step schedule JSON ({exc!r})") from None
    if pipeline != 1:
        raise TopofinderError("--pipeline applies to tree schedules only")
    check_rows(sched.sends, sched.topology.n, sched.shard_chunks)
    reduce_steps = {Collective.ALLGATHER: 0, Collective.REDUCE_SCATTER: sched.num_steps,
                    Collective.ALLREDUCE: sched.reduce_steps}[sched.collective]
    return Program(sched.collective, sched.topology.n, sched.shard_chunks, sched.sends,
                   reduce_steps, "steps", sched.topology.expr, sched.method, sched)


def oneroot_program(doc: dict, batches: int = 1) -> Program:
    """A periodic one-root schedule (docs/formats.md) as steps: ``batches`` periods' worth of
    messages, P = batches × (messages per period) chunks of the root's buffer; step = (period,
    slot), empty steps dropped. A reduce runs the broadcast schedule of G^T backwards: every
    send reversed in time and direction, partial sums moving towards the root."""
    sched = PeriodicSchedule.from_dict(doc)
    replay(sched)
    offsets = np.cumsum([0] + [w for w, _ in sched.trees])
    per_period, nslots = int(offsets[-1]), len(sched.slots)
    lags = [row[5] for _, sends in sched.slots for row in sends]
    rows = []
    for r in range(batches + max(lags, default=0)):
        for k, (_, sends) in enumerate(sched.slots):
            for u, w, tree, lo, hi, lag in sends:
                if 0 <= r - lag < batches:
                    base = (r - lag) * per_period + int(offsets[tree])
                    rows.append((r * nslots + k + 1, 0, base + lo, base + hi, u, w))
    sends = np.array(rows, np.int64)
    sends[:, 0] = np.unique(sends[:, 0], return_inverse=True)[1] + 1
    steps = int(sends[:, 0].max())
    if sched.collective == Collective.REDUCE:
        sends[:, 0] = steps + 1 - sends[:, 0]
        sends[:, [4, 5]] = sends[:, [5, 4]]
    return Program(sched.collective, sched.n, batches * per_period, sends,
                   steps if sched.collective == Collective.REDUCE else 0, "oneroot",
                   sched.topology or "(one-root schedule)", "periodic", None, None, batches,
                   sched.root)


def check_rows(sends: np.ndarray, n: int, p: int) -> None:
    """Rows the executor can address: steps ≥ 1, ranks in 0..N-1, 0 ≤ lo < hi ≤ P. (Whether
    they perform the collective is what the run checks.)"""
    if sends.shape[0] == 0:
        return
    t, v, lo, hi, u, w = sends.T
    bad = ((t < 1) | (v < 0) | (v >= n) | (u < 0) | (u >= n) | (w < 0) | (w >= n)
           | (lo < 0) | (hi > p) | (lo >= hi))
    if bad.any():
        row = [int(x) for x in sends[np.flatnonzero(bad)[0]]]
        raise ScheduleError(f"send row {row} (t, v, lo, hi, u, w) is outside steps ≥ 1, "
                            f"ranks 0..{n - 1}, chunks 0 ≤ lo < hi ≤ {p}")


def tree_steps(trees: TreeSchedule, pipeline: int = 1) -> StepSchedule:
    """The tree-flow allgather as a step schedule (module docstring): P = K·lcm of the weight
    denominators; slice j of a tree crosses edge (u, w) at step depth(w) + j."""
    n, k = trees.topology.n, int(pipeline)
    if not trees.trees:
        raise TopofinderError("tree schedule has no trees")
    denom = lcm(*[t.weight.denominator for t in trees.trees])
    p = denom * k
    rows_needed = k * sum(len(t.edges) for t in trees.trees)
    if rows_needed > MAX_SEND_ROWS:
        raise TopofinderError(f"the pipelined tree schedule has {rows_needed} sends; at most "
                              f"{MAX_SEND_ROWS} are run (lower --pipeline)")
    nxt = [0] * n
    rows = []
    for i, tree in enumerate(trees.trees):
        if not 0 <= tree.root < n:
            raise TopofinderError(f"tree {i}: root {tree.root} outside 0..{n - 1}")
        if tree.weight <= 0:
            raise TopofinderError(f"tree {i}: weight {tree.weight} is not positive")
        units = int(tree.weight * denom)
        lo = nxt[tree.root] * k
        nxt[tree.root] += units
        if nxt[tree.root] > denom:
            raise TopofinderError(f"root {tree.root}: tree weights sum to more than 1")
        for depth, u, w in _edges_by_depth(tree, n, i):
            for j in range(k):
                rows.append((depth + j, tree.root, lo + j * units, lo + (j + 1) * units, u, w))
    short = [r for r in range(n) if nxt[r] != denom]
    if short:
        raise TopofinderError(f"root {short[0]}: tree weights sum to "
                              f"{Fraction(nxt[short[0]], denom)}, not 1")
    return StepSchedule(trees.topology, p, np.array(rows, np.int64).reshape(-1, 6),
                        collective=Collective.ALLGATHER, method=trees.method or "trees")


def _edges_by_depth(tree, n: int, index: int):
    """(depth of child, parent, child) for every edge, breadth first from the root."""
    children: dict[int, list[int]] = {}
    for u, w in tree.edges:
        if not (0 <= u < n and 0 <= w < n):
            raise TopofinderError(f"tree {index}: edge {u}->{w} names a node outside "
                                  f"0..{n - 1}")
        children.setdefault(u, []).append(w)
    out, seen, frontier, depth = [], {tree.root}, [tree.root], 0
    while frontier:
        depth += 1
        new = []
        for u in frontier:
            for w in children.get(u, ()):
                if w in seen:
                    raise TopofinderError(f"tree {index}: node {w} is reached twice from "
                                          f"root {tree.root} (not a tree)")
                seen.add(w)
                out.append((depth, u, w))
                new.append(w)
        frontier = new
    if len(out) != len(tree.edges):
        raise TopofinderError(f"tree {index}: {len(tree.edges) - len(out)} edges are not "
                              f"reachable from root {tree.root}")
    return out


# ---- per-rank plan ---------------------------------------------------------------------
@dataclass
class Message:
    """One packed message of a step: element ranges [a, b) of the rank's buffer, in order,
    contiguous ranges merged; ``buffer`` is the contiguous packing space (allocated later)."""

    peer: int
    starts: np.ndarray
    stops: np.ndarray
    count: int
    buffer: np.ndarray | None = field(default=None, repr=False)


@dataclass
class Step:
    """Step ``t`` as seen by one rank: messages out and in; ``reduce`` adds on receipt."""

    t: int
    reduce: bool
    sends: list[Message]
    recvs: list[Message]


def rank_plan(program: Program, rank: int, chunk_elements: int) -> list[Step]:
    """The steps in which ``rank`` sends or receives, with packed messages per (step, peer),
    for chunks of ``chunk_elements`` elements."""
    s, p, e = program.sends, program.shard_chunks, int(chunk_elements)
    out = _messages(s[s[:, 4] == rank], peer_col=5, p=p, e=e)
    inc = _messages(s[s[:, 5] == rank], peer_col=4, p=p, e=e)
    steps = []
    for t in sorted(set(out) | set(inc)):
        steps.append(Step(t, t <= program.reduce_steps, out.get(t, []), inc.get(t, [])))
    return steps


def _messages(rows: np.ndarray, peer_col: int, p: int, e: int) -> dict[int, list[Message]]:
    if rows.shape[0] == 0:
        return {}
    t, v, lo, hi, peer = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, peer_col]
    order = np.lexsort((hi, lo, v, peer, t))      # the same order on sender and receiver
    t, v, lo, hi, peer = t[order], v[order], lo[order], hi[order], peer[order]
    a, b = (v * p + lo) * e, (v * p + hi) * e
    key = t * (peer.max() + 1) + peer
    cuts = np.flatnonzero(np.diff(key)) + 1
    result: dict[int, list[Message]] = {}
    for grp in np.split(np.arange(t.size), cuts):
        ga, gb = a[grp], b[grp]
        join = np.flatnonzero(ga[1:] != gb[:-1]) + 1     # a new range starts here
        starts = ga[np.concatenate(([0], join))]
        stops = gb[np.concatenate((join - 1, [grp.size - 1]))]
        msg = Message(int(peer[grp[0]]), starts, stops, int((gb - ga).sum()))
        result.setdefault(int(t[grp[0]]), []).append(msg)
    return result


def chunk_elements(size_bytes: float, itemsize: int, pieces: int) -> int:
    """Elements per chunk so that the buffer (pieces × that) is nearest ``size_bytes``;
    at least 1."""
    return max(1, round(size_bytes / itemsize / pieces))


# ---- moving data -------------------------------------------------------------------------
def allocate(steps: list[Step], dtype) -> None:
    """Give every message its contiguous packing buffer (once, before timing)."""
    for step in steps:
        for msg in step.sends + step.recvs:
            msg.buffer = np.empty(msg.count, dtype)


def outgoing(msg: Message, data: np.ndarray, reduce: bool) -> np.ndarray:
    """The contiguous array to send for ``msg``: a view of ``data`` when the message is one
    range of a copying step (nothing writes ``data`` before the step's receives complete),
    else the packed buffer. In a reducing step the sender's partials are given away (zeroed)."""
    if len(msg.starts) == 1 and not reduce:
        return data[msg.starts[0]:msg.stops[0]]
    buf, off = msg.buffer, 0
    for a, b in zip(msg.starts.tolist(), msg.stops.tolist()):
        buf[off:off + b - a] = data[a:b]
        off += b - a
    if reduce:
        for a, b in zip(msg.starts.tolist(), msg.stops.tolist()):
            data[a:b] = 0
    return buf


def incoming(msg: Message, data: np.ndarray, reduce: bool) -> None:
    """Unpack a received message into ``data``: add (reducing step) or overwrite."""
    buf, off = msg.buffer, 0
    for a, b in zip(msg.starts.tolist(), msg.stops.tolist()):
        if reduce:
            data[a:b] += buf[off:off + b - a]
        else:
            data[a:b] = buf[off:off + b - a]
        off += b - a


def simulate(program: Program, data: list[np.ndarray], e: int) -> list[np.ndarray]:
    """Run ``program`` for all ranks in one process (the same packing code as the MPI run,
    messages handed over directly); ``data[r]`` is rank r's working buffer, changed in place."""
    n = program.num_nodes
    plans = [rank_plan(program, r, e) for r in range(n)]
    for r in range(n):
        allocate(plans[r], data[r].dtype)
    by_step: dict[int, list[tuple[int, Step]]] = {}
    for r in range(n):
        for step in plans[r]:
            by_step.setdefault(step.t, []).append((r, step))
    for t in sorted(by_step):
        sent = {}
        for r, step in by_step[t]:
            for msg in step.sends:
                sent.setdefault((r, msg.peer), []).append(
                    outgoing(msg, data[r], step.reduce).copy())
        for r, step in by_step[t]:
            for msg in step.recvs:
                msg.buffer[:] = sent[(msg.peer, r)].pop(0)
                incoming(msg, data[r], step.reduce)
    return data
