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
access must follow the last write, every write the reads since — decided by a search back
from the later node that never goes below the earlier node's number.
"""

from __future__ import annotations

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


class Graph:
    """Nodes (numbered in execution order) with their predecessor lists and a label each."""

    def __init__(self):
        self.preds: list[list[int]] = []
        self.label: list[tuple] = []
        self.accesses: list[tuple] = []          # (node, rank, storage, start, n, write)
        self._cache: dict[tuple[int, int], bool] = {}

    def node(self, label: tuple, preds) -> int:
        self.preds.append([p for p in preds if p is not None])
        self.label.append(label)
        return len(self.preds) - 1

    def add_edge(self, src: int, dst: int) -> None:
        self.preds[dst].append(src)

    def access(self, node: int, rank: int, storage: str, start: int, n: int, write: bool):
        if n > 0:
            self.accesses.append((node, rank, storage, start, n, write))

    def hb(self, a: int, b: int) -> bool:
        """Whether node ``a`` happens before node ``b``."""
        if a == b:
            return True
        if a > b:
            return False
        key = (a, b)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        stack, seen, found = [b], {b}, False
        preds = self.preds
        while stack and not found:
            for p in preds[stack.pop()]:
                if p == a:
                    found = True
                    break
                if p > a and p not in seen:
                    seen.add(p)
                    stack.append(p)
        self._cache[key] = found
        return found

    def check_races(self, where, limit: int = 20) -> list[str]:
        """Unordered conflicting accesses, as messages (``where(node)`` names a node)."""
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
            lw = last_write[(rank, storage)]
            rd = reads[(rank, storage)]
            for cell in range(start, start + n):
                w = lw.get(cell)
                if w is not None and w != node and not self.hb(w, node):
                    race(w, node, rank, storage, cell, "write-write" if write else "write-read")
                if write:
                    for r in rd.pop(cell, ()):
                        if r != node and not self.hb(r, node):
                            race(r, node, rank, storage, cell, "read-write")
                    lw[cell] = node
                else:
                    rd.setdefault(cell, []).append(node)
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
