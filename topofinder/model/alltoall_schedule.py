"""All-to-all step schedules: data model, independent replay and JSON (docs/formats.md,
docs/model.md).

Uniform all-to-all: every node s has one piece (s, d) of M/N bytes for every other node d. A
send row ``(t, u, w, src, dst)`` with ``amount`` a means: at step t (1-based) node u sends the
fraction a of piece (src, dst) to its out-neighbour w. Pieces may be split, so amounts are
fractions of a piece.

Cost (the step model of docs/model.md, store-and-forward): k steps take
k·α + Σ_t max_link load_t(u, w)/cap(u, w) · (M/N)/b, with load_t(u, w) the sum of the amounts
sent on u→w at step t (a k-fold multi-arc has capacity k). The bandwidth term in units of
(M/N)/b is ``bandwidth_time`` = Σ_t max_link load_t/cap; no schedule beats 1/f (f the
concurrent flow of LP (3), topofinder.scoring.alltoall.concurrent_flow).

Amounts are floats, not Fractions: they come from an LP solution (floats with ~1e-9
precision, whose exact rational values mean nothing), JSON writes them with Python's repr so a
file replays exactly as exported, and the replay compares with tolerance ``TOL`` = 1e-9.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from topofinder.model.schedule import (SCHEDULE_FORMAT, SCHEDULE_VERSION, ScheduleError,
                                       StepRows, check_send_rows, link_capacity,
                                       read_document)
from topofinder.model.topology import Topology
from topofinder.model.collectives import Collective

COLLECTIVE = Collective.ALLTOALL
#: One send row: at step t node u sends ``amount`` of piece (src, dst) to w.
ALLTOALL_COLUMNS = ("t", "u", "w", "src", "dst", "amount")
#: Absolute tolerance (in pieces) of every replay comparison.
TOL = 1e-9
#: Node counts beyond this would overflow the int64 (node, src, dst) state codes.
_MAX_NODES = 1 << 20


@dataclass(frozen=True, eq=False)
class AllToAllSchedule(StepRows):
    """An all-to-all step schedule on ``topology``.

    ``sends``: int64 array (S, 5) of rows (t, u, w, src, dst); ``amounts``: float64 (S,), the
    fraction of piece (src, dst) each row moves. ``method``: how it was built. ``bound``: the
    LP lower bound 1/f on ``bandwidth_time`` in units of (M/N)/b, when known.
    """

    topology: Topology
    sends: np.ndarray
    amounts: np.ndarray
    method: str = ""
    bound: float | None = None

    def __post_init__(self):
        sends = np.array(self.sends, dtype=np.int64, copy=True)
        amounts = np.array(self.amounts, dtype=np.float64, copy=True).reshape(-1)
        if sends.size == 0:
            sends = sends.reshape(0, 5)
        if sends.ndim != 2 or sends.shape[1] != 5:
            raise ScheduleError(f"all-to-all sends must be an (S, 5) array of (t, u, w, src, "
                                f"dst) rows, got shape {sends.shape}")
        if amounts.shape[0] != sends.shape[0]:
            raise ScheduleError(f"{sends.shape[0]} send rows but {amounts.shape[0]} amounts")
        sends.setflags(write=False)
        amounts.setflags(write=False)
        object.__setattr__(self, "sends", sends)
        object.__setattr__(self, "amounts", amounts)

    #: "alltoall", the attribute every schedule class names its collective by
    collective = COLLECTIVE

    @cached_property
    def step_loads(self) -> tuple[float, ...]:
        """max_link load_t/cap for t = 1..k (pieces per unit capacity), from :func:`replay`:
        only a valid schedule has loads."""
        return replay(self)

    @property
    def bandwidth_time(self) -> float:
        """Σ_t max_link load_t/cap, in units of (M/N)/b (b the bandwidth of one link)."""
        return float(sum(self.step_loads))

    @property
    def gap(self) -> float | None:
        """bandwidth_time / bound − 1: how far above the LP bound 1/f (None without bound)."""
        return None if self.bound is None else self.bandwidth_time / self.bound - 1.0

    # ---- serialisation (docs/formats.md) ---------------------------------------------------
    def to_dict(self) -> dict:
        """The all-to-all schedule document (docs/formats.md, ``schedule.schema.json``)."""
        doc = {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION, "kind": "steps",
               "collective": COLLECTIVE, "topology": self.topology.expr,
               "num_nodes": self.topology.n, "method": self.method,
               "num_steps": self.num_steps, "time_unit": "(M/N)/b",
               "bandwidth_time": self.bandwidth_time,
               "step_loads": list(self.step_loads), "lp_bound": self.bound,
               "gap": self.gap}
        if self.topology.labels is not None:
            doc["labels"] = list(self.topology.labels)
        doc["columns"] = list(ALLTOALL_COLUMNS)
        doc["sends"] = [[*map(int, row), float(a)] for row, a in zip(self.sends, self.amounts)]
        return doc

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, doc, topology: Topology) -> "AllToAllSchedule":
        """From a JSON string or dict of :meth:`to_dict` shape, on ``topology``. Needs
        ``collective`` "alltoall" and ``sends``; ``columns`` and ``num_nodes``, when present,
        must match. The result is not replayed until its loads are asked for."""
        doc = read_document(doc, topology, ALLTOALL_COLUMNS, ("collective", "sends"))
        if doc["collective"] != COLLECTIVE:
            raise ScheduleError(f"not an all-to-all schedule (collective "
                                f"{doc['collective']!r})")
        rows = doc["sends"]
        if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != 6
                                             for r in rows):
            raise ScheduleError("all-to-all sends must be a list of [t, u, w, src, dst, "
                                "amount] rows")
        try:
            ints = np.array([r[:5] for r in rows], dtype=np.float64).reshape(-1, 5)
            amounts = np.array([r[5] for r in rows], dtype=np.float64)
        except (TypeError, ValueError):
            raise ScheduleError("all-to-all send rows must hold numbers") from None
        if not np.all(np.isfinite(ints)) or np.any(ints != np.rint(ints)):
            raise ScheduleError("all-to-all send rows: t, u, w, src, dst must be integers")
        bound = doc.get("lp_bound")
        return cls(topology, ints.astype(np.int64), amounts, method=doc.get("method", ""),
                   bound=None if bound is None else float(bound))


# ---- replay -----------------------------------------------------------------------------
def _describe(row, amount) -> str:
    t, u, w, s, d = (int(x) for x in row)
    return f"step {t}: node {u} sends {amount:.6g} of piece ({s}->{d}) to node {w}"


def _check_rows(s: np.ndarray, amounts: np.ndarray, topo: Topology) -> None:
    n = topo.n
    t, u, w, src, dst = s.T
    out = (u < 0) | (u >= n) | (w < 0) | (w >= n) | (src < 0) | (src >= n) | (dst < 0) \
        | (dst >= n)
    checks = [(t < 1, "steps are numbered from 1"), (out, f"a node outside 0..{n - 1}"),
              (src == dst, "a piece from a node to itself (src = dst)"),
              (~np.isfinite(amounts) | (amounts <= 0), "the amount must be a positive number")]
    check_send_rows(checks, t, u, w, topo, lambda i: _describe(s[i], amounts[i]))


def _merge(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``vals`` per key; drop entries that cancelled to below 1e-15."""
    uniq, inv = np.unique(keys, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=vals, minlength=uniq.size)
    keep = np.abs(tot) > 1e-15
    return uniq[keep], tot[keep]


def replay(schedule: AllToAllSchedule) -> tuple[float, ...]:
    """Replay ``schedule`` from the sends alone and return max_link load_t/cap for each step
    t = 1..k; ScheduleError (one line) on the first violation.

    Start: node s holds 1 of piece (s, d) for every d ≠ s. Step t: every send must use a link
    and move no more of a piece than its sender held at the START of step t
    (store-and-forward: what arrives in step t leaves in step t+1 at the earliest; all of a
    node's sends of a piece in one step together count). End: piece (s, d) is at d with
    amount 1 and nowhere else. All within ``TOL``.
    """
    topo, s, amounts = schedule.topology, schedule.sends, schedule.amounts
    n = topo.n
    if n > _MAX_NODES:
        raise ScheduleError(f"all-to-all replay handles at most {_MAX_NODES} nodes")
    if s.shape[0]:
        _check_rows(s, amounts, topo)
    steps = schedule.num_steps
    src0 = np.repeat(np.arange(n, dtype=np.int64), n)
    dst0 = np.tile(np.arange(n, dtype=np.int64), n)
    pieces = src0 != dst0
    held_k = np.sort(((src0 * n + src0) * n + dst0)[pieces])      # code (node·N + src)·N + dst
    held_v = np.ones(held_k.size)
    order = np.argsort(s[:, 0], kind="stable")
    s, amounts = s[order], amounts[order]
    starts = np.searchsorted(s[:, 0], np.arange(1, steps + 2))
    loads = []
    for step in range(steps):
        a, b = starts[step], starts[step + 1]
        if a == b:
            loads.append(0.0)
            continue
        rows, amt = s[a:b], amounts[a:b]
        _, u, w, src, dst = rows.T
        out_k = (u * n + src) * n + dst
        uniq, inv = np.unique(out_k, return_inverse=True)
        inv = inv.reshape(-1)
        sent = np.bincount(inv, weights=amt, minlength=uniq.size)
        pos = np.minimum(np.searchsorted(held_k, uniq), max(held_k.size - 1, 0))
        have = np.where(held_k[pos] == uniq, held_v[pos], 0.0) if held_k.size else \
            np.zeros(uniq.size)
        over = np.flatnonzero(sent > have + TOL)
        if over.size:
            g = over[0]
            i = int(np.flatnonzero(inv == g)[0])
            raise ScheduleError(f"{_describe(rows[i], amt[i])}, but node {int(u[i])} holds "
                                f"only {have[g]:.6g} of that piece at the start of step "
                                f"{step + 1} and sends {sent[g]:.6g} of it in this step")
        held_k, held_v = _merge(np.concatenate([held_k, uniq, (w * n + src) * n + dst]),
                                np.concatenate([held_v, -sent, amt]))
        link_k, link_inv = np.unique(u * n + w, return_inverse=True)
        load = np.bincount(link_inv.reshape(-1), weights=amt, minlength=link_k.size)
        loads.append(float((load / link_capacity(topo, link_k // n, link_k % n)).max()))
    node, rest = held_k // (n * n), held_k % (n * n)
    src, dst = rest // n, rest % n
    at_dst = node == dst
    got = np.zeros(n * n)
    np.add.at(got, (src * n + dst)[at_dst], held_v[at_dst])
    got = got.reshape(n, n)
    np.fill_diagonal(got, 1.0)
    wrong = np.argwhere(np.abs(got - 1.0) > TOL)
    if wrong.size:
        ps, pd = (int(x) for x in wrong[0])
        where = np.flatnonzero((src == ps) & (dst == pd) & ~at_dst & (held_v > TOL))
        elsewhere = (f"; node {int(node[where[0]])} holds {held_v[where[0]]:.6g} of it"
                     if where.size else "")
        raise ScheduleError(f"incomplete all-to-all: piece ({ps}->{pd}) ends with "
                            f"{got[ps, pd]:.6g} (not 1) at node {pd}{elsewhere}")
    stray = np.flatnonzero(~at_dst & (np.abs(held_v) > TOL))
    if stray.size:
        x = stray[0]
        raise ScheduleError(f"all-to-all leaves {held_v[x]:.6g} of piece ({int(src[x])}->"
                            f"{int(dst[x])}) at node {int(node[x])}, not its destination")
    return tuple(loads)
