"""Symbolic buffers, the happens-before graph and the race check of the MSCCL++ plan model.

Values. A buffer cell (one ``1/G`` of a chunk) holds ``None`` (never written), :data:`BAD`
(bytes of a packet read as data, or anything computed from them), a data value, or a packet
``(flag, value, half)`` spanning two cells (``copyToPackets`` writes data and flag interleaved,
twice the bytes: ``execution_kernel.hpp`` doubles packet offsets). A data value is a dict
``{(launch, input cell): digits}`` whose integer holds one hexadecimal digit per rank: the
number of times that rank's input cell was summed in. A reduction adds dicts digit-wise, so a
dropped contribution (digit 0) or a doubled one (digit 2) stays visible exactly; a digit
reaching 8 is refused before it could carry into the next rank's digit.

Happens-before. Every executed op is a node, numbered in the order the canonical run executes
it (a linear extension of happens-before, so a path only climbs in number). Inside a
threadblock the kernel orders threads only at ``__syncthreads`` (``nop``, ``barrier``, kernel
start/end): a signal/wait/port-put/flush is run by thread ``tid`` (its channel's position in
``channel_ids``) and is ordered after that thread's earlier ops, while data ops are spread over
all threads and are ordered only by a sync. Across threadblocks: release-signal → acquire-wait,
port-channel proxy FIFO (put/signal on one channel are delivered in order; flush waits for
them), barrier arrivals → departures, semaphore release → acquire, packet write → the read
that polls its flag, a rank's kernel end → its next launch.

Races (:meth:`Graph.check_races`): FastTrack's per-cell rule on the recorded accesses — every
access must follow the last write, every write the reads since — decided by a bidirectional breadth-first search between the two nodes that stays within
their numbers.
"""

from __future__ import annotations

from array import array
from collections import defaultdict

from topofinder.errors import TopofinderError

BAD = "bad"


def digits_all(n: int) -> int:
    """Every rank counted once: ``0x11…1`` with ``n`` digits."""
    return int("1" * n, 16) if n else 0


def high_mask(n: int) -> int:
    return int("8" * n, 16) if n else 0


def input_value(launch: int, rank: int, cell: int) -> dict:
    return {(launch, cell): 1 << (4 * rank)}


def add_values(a, b, high: int):
    """Sum of two data values (``BAD`` when either is not data)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return BAD
    out = dict(a)
    for k, v in b.items():
        s = out.get(k, 0) + v
        if s & high:
            raise TopofinderError("MSCCL++ plan: a reduction sums one input 8 or more times")
        out[k] = s
    return out


def describe(value, n: int) -> str:
    """A data value in words (for one-line messages)."""
    if value is None:
        return "never written"
    if not isinstance(value, dict):
        return "packet bytes / garbage" if value == BAD else "a packet, not data"
    parts = []
    for (launch, cell), dig in sorted(value.items())[:3]:
        ranks = [(r, (dig >> (4 * r)) & 15) for r in range(n) if (dig >> (4 * r)) & 15]
        shown = ",".join(f"{r}" if c == 1 else f"{r}x{c}" for r, c in ranks[:6])
        more = "…" if len(ranks) > 6 else ""
        parts.append(f"launch {launch} cell {cell} of ranks {{{shown}{more}}}")
    return " + ".join(parts) + (" + …" if len(value) > 3 else "")


_KINDS = {"T": 0, "S": 1, "L": 2, "HS": 3, "HE": 4}


class Graph:
    """Nodes (numbered in execution order): predecessor tuples and, in compact columns, what
    each node is (rank, launch, kind, block or channel, sync epoch, block, op description)."""

    def __init__(self):
        self.preds: list[tuple[int, ...]] = []
        self._cols = [array("l") for _ in range(7)]
        self._whats: list[str] = []
        self._what_id: dict[str, int] = {}
        self.accesses: list[tuple] = []          # (node, rank, storage, start, n, write)
        self._cache: dict[int, set[int]] = {}
        self._succ: list[list[int]] | None = None
        self.landmarks: dict[int, int] = {}      # kernel-end node → its bit
        self.final = False                       # all edges in: summaries may be built
        self._up: list[int] | None = None
        self._down: list[int] | None = None

    def node(self, label: tuple, preds, meta: tuple) -> int:
        """A node after ``preds``. ``label`` = (rank, block, op description, launch); ``meta``
        = (rank, launch, kind, block or channel, epoch) with kind "T" (a block's op), "S" (its
        sync, epoch = syncs so far), "L" (a proxy FIFO event), "HS"/"HE" (host before/after
        a launch) — for the shortcuts of :meth:`hb`."""
        self.preds.append(tuple(p for p in preds if p is not None))
        wid = self._what_id.get(label[2])
        if wid is None:
            wid = self._what_id[label[2]] = len(self._whats)
            self._whats.append(label[2])
        for col, v in zip(self._cols, (meta[0], meta[1], _KINDS[meta[2]], meta[3], meta[4],
                                        label[1], wid)):
            col.append(v)
        return len(self.preds) - 1

    def label(self, node: int) -> tuple:
        """(rank, block, op description, launch) of a node (block -1 for the host)."""
        c = self._cols
        return c[0][node], c[5][node], self._whats[c[6][node]], c[1][node]

    def _structural(self, a: int, b: int) -> bool:
        """Orders that follow from the shape alone (a < b): one proxy FIFO; one block after a
        sync; a rank's host and blocks across a kernel boundary, and before the proxy events
        its blocks issue after that boundary (a proxy event precedes nothing but its FIFO's
        later events: the kernel does not wait for the proxy)."""
        rank, launch, kind, key, epoch = self._cols[:5]
        ka, kb = kind[a], kind[b]
        if ka == 2:
            return kb == 2 and rank[a] == rank[b] and key[a] == key[b]
        if rank[a] != rank[b]:
            return False
        la, lb = launch[a], launch[b]
        if kb == 2:
            return la < lb or (ka == 3 and la == lb)
        if la < lb or ka == 3 or kb == 4:
            return la <= lb
        return key[a] == key[b] and ka <= 1 and kb <= 1 and (ka == 1 or epoch[b] > epoch[a])

    def add_edge(self, src: int, dst: int) -> None:
        self.preds[dst] = (*self.preds[dst], src)
        self._cache, self._succ, self._up = {}, None, None

    def _summaries(self) -> None:
        """Bitsets of the kernel ends (landmarks) before each node (``up``) and after it
        (``down``): a ≺ b whenever some end lies between them, answered without a search."""
        n = len(self.preds)
        up, marks = [0] * n, self.landmarks
        for x, ps in enumerate(self.preds):       # numbers are a topological order
            v = 1 << marks[x] if x in marks else 0
            for p in ps:
                w = up[p]
                if w and w is not v:              # share bitsets where nothing is added
                    u = v | w
                    v = w if u == w else (v if u == v else u)
            up[x] = v
        down = [0] * n
        for x in range(n - 1, -1, -1):
            v = down[x]
            if x in marks:
                v = down[x] = v | (1 << marks[x])
            if v:
                for p in self.preds[x]:
                    w = down[p]
                    if w is not v:
                        u = w | v
                        down[p] = v if u == v else (w if u == w else u)
        self._up, self._down = up, down

    def access(self, node: int, rank: int, storage: str, start: int, n: int, write: bool):
        if n > 0:
            self.accesses.append((node, rank, storage, start, n, write))

    def _successors(self) -> list[list[int]]:
        if self._succ is None or len(self._succ) != len(self.preds):
            succ: list[list[int]] = [[] for _ in self.preds]
            for node, ps in enumerate(self.preds):
                for p in ps:
                    succ[p].append(node)
            self._succ = succ
        return self._succ

    def hb(self, a: int, b: int) -> bool:
        """Whether node ``a`` happens before node ``b``: the structural shortcuts, then (once
        every edge is in) the kernel-end landmarks, then a bidirectional breadth-first search
        (forward from ``a`` below ``b``'s number, back from ``b`` above ``a``'s; the smaller
        frontier grows first) — synchronisation paths are short, their cones are not."""
        if a == b:
            return True
        if a > b:
            return False
        if self._structural(a, b):
            return True
        if self.final:
            if self._up is None:
                self._summaries()
            if self._down[a] & self._up[b]:
                return True
        known = self._cache.get(a)
        if known is None:
            known = self._cache[a] = set()
        if b in known:
            return True
        preds = self.preds
        succ = self._successors() if self.final else None     # edges still being added
        fwd, bwd = {a}, {b}
        ffront, bfront = [a], [b]
        while ffront and bfront:
            if succ is not None and len(ffront) <= len(bfront):
                nxt = []
                for x in ffront:
                    for y in succ[x]:
                        if y == b or y in bwd:
                            known.add(b)
                            return True
                        if y < b and y not in fwd:
                            fwd.add(y)
                            nxt.append(y)
                ffront = nxt
            else:
                nxt = []
                for x in bfront:
                    for y in preds[x]:
                        if y == a or y in fwd:
                            known.add(b)
                            return True
                        if y > a and y not in bwd:
                            bwd.add(y)
                            nxt.append(y)
                bfront = nxt
        return False

    def _chain(self, x: int) -> tuple:
        """(chain, position): nodes of one chain with smaller positions happen before larger
        ones (structurally): a proxy FIFO by number, a block by (launch, sync epoch, sync before
        the ops of its epoch), a rank's host events by (launch, start before end)."""
        rank, launch, kind, key, epoch = (c[x] for c in self._cols[:5])
        if kind == 2:
            return ("L", rank, key), (x,)
        if kind >= 3:
            return ("H", rank), (launch, kind)
        return ("B", rank, key), (launch, epoch, 1 - kind)

    def _latest(self, nodes: dict[int, int]) -> dict[int, int]:
        """The nodes (with their cell) not structurally before another of ``nodes``: the
        others happen before one of these, so ordering these after an access orders them all."""
        best: dict[tuple, tuple] = {}
        for x, cell in nodes.items():
            chain, pos = self._chain(x)
            cur = best.get(chain)
            if cur is None or pos > cur[0]:
                best[chain] = (pos, {x: cell})
            elif pos == cur[0]:
                cur[1][x] = cell
        return {x: c for _, xs in best.values() for x, c in xs.items()}

    def check_races(self, where, limit: int = 20) -> list[str]:
        """Unordered conflicting accesses, as messages (``where(node)`` names a node); the
        first ``limit`` are reported and the search stops there. Per access, only the latest
        of the cells' last writers (and, for a write, of the reads since) on each chain are
        tested: the earlier ones precede them, so the verdict is the same."""
        self.final = True
        last_write: dict[tuple, dict[int, int]] = defaultdict(dict)
        reads: dict[tuple, dict[int, list[int]]] = defaultdict(dict)
        found: list[str] = []
        reported: set[tuple[int, int]] = set()

        def race(a: int, b: int, rank: int, storage: str, cell: int, kind: str):
            if (a, b) in reported or len(found) >= limit:
                return
            reported.add((a, b))
            found.append(f"{kind} race on rank {rank} {storage}[cell {cell}]: {where(a)} and "
                         f"{where(b)} are not ordered")

        for node, rank, storage, start, n, write in self.accesses:
            if len(found) >= limit:
                break
            lw = last_write[(rank, storage)]
            rd = reads[(rank, storage)]
            writers: dict[int, int] = {}
            readers: dict[int, int] = {}
            for cell in range(start, start + n):
                w = lw.get(cell)
                if w is not None and w != node and w not in writers:
                    writers[w] = cell
                if write:
                    for r in rd.pop(cell, ()):
                        if r != node and r not in readers:
                            readers[r] = cell
                    lw[cell] = node
                else:
                    rd.setdefault(cell, []).append(node)
            for w, cell in self._latest(writers).items():
                if not self.hb(w, node):
                    race(w, node, rank, storage, cell, "write-write" if write else "write-read")
            for r, cell in self._latest(readers).items():
                if not self.hb(r, node):
                    race(r, node, rank, storage, cell, "read-write")
        return found


class Memory:
    """Each rank's storages (``in``, ``out``, ``scr``) as lists of cells, with the node that
    last wrote each cell (a packet read is ordered after its writer)."""

    def __init__(self, sizes: list[dict[str, int]]):
        self.cells = [{k: [None] * v for k, v in s.items()} for s in sizes]
        self.writer = [{k: [None] * v for k, v in s.items()} for s in sizes]

    def size(self, rank: int, storage: str) -> int:
        return len(self.cells[rank][storage])

    def read(self, rank: int, storage: str, start: int, n: int) -> list:
        return self.cells[rank][storage][start:start + n]

    def write(self, rank: int, storage: str, start: int, values: list, node: int) -> None:
        self.cells[rank][storage][start:start + len(values)] = values
        self.writer[rank][storage][start:start + len(values)] = [node] * len(values)

    def writers(self, rank: int, storage: str, start: int, n: int) -> set:
        return {w for w in self.writer[rank][storage][start:start + n] if w is not None}


def packets_of(values: list, flag: int) -> list:
    """Data cells as packet cells (two per data cell)."""
    out = []
    for v in values:
        out.append((flag, v, 0))
        out.append((flag, v, 1))
    return out


def data_of(cells: list, flag: int):
    """Packet cells as data cells, or ``None`` while any packet lacks this launch's flag."""
    out = []
    for i in range(0, len(cells) - 1, 2):
        a, b = cells[i], cells[i + 1]
        if (not isinstance(a, tuple) or not isinstance(b, tuple) or a[0] != flag
                or b[0] != flag or a[2] != 0 or b[2] != 1):
            return None
        out.append(a[1] if a[1] is b[1] or a[1] == b[1] else BAD)
    return out


def as_data(cells: list) -> list:
    """Cells read as data: packets read raw are garbage."""
    return [BAD if isinstance(c, tuple) else c for c in cells]
