"""Periodic one-root broadcast schedules (paper 003 §5.3–5.4) and their independent replay.

A schedule repeats a period of length ``period`` (time units: a unit message takes 1/C on a
link of capacity C). Each period the root injects a new *batch*: tree l carries ``weight_l``
distinct messages of every batch (indices 0..weight_l−1) along its spanning out-tree. The
period is cut into consecutive ``slots``; a send row [u, w, l, lo, hi, lag] in a slot of
period r moves messages [lo, hi) of tree l of batch r − lag over the link u→w (batches < 0 are
the fictitious start-up messages, 003 Figure 2's "×", and are skipped). The throughput is
Σ_l weight_l / period messages per time unit.

:func:`replay` checks, without trusting the builder: the trees span from the root over
existing links; every slot obeys the port model (``one``: a node sends to at most one node and
receives from at most one, each link busy count/C ≤ slot; ``multi``: per link count/C ≤ slot;
``node`` with B: count ≤ C·slot per link, Σ sends and Σ receives of a node ≤ B·slot); every
tree link carries each index of its tree exactly once per period; a sender holds each message
it sends at the slot's start; and every node ends with every message of every batch injected.
It returns the measured throughput and the time by which the first K messages reached all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from topofinder.model.schedule import ScheduleError
from topofinder.model.units import exact
from topofinder.model.collectives import Collective

ONEROOT_FORMAT = "topofinder-oneroot-schedule"
ONEROOT_VERSION = 1
SEND_COLUMNS = ("u", "w", "tree", "lo", "hi", "lag")


@dataclass(frozen=True)
class PeriodicSchedule:
    """A periodic broadcast schedule (module doc). ``links``: (u, w, capacity) rows;
    ``trees``: (weight, parent node per node, −1 at the root); ``slots``: (duration, sends)."""

    n: int
    root: int
    port_model: str
    bandwidth: Fraction | None
    links: tuple
    period: Fraction
    trees: tuple
    slots: tuple
    collective: str = Collective.BROADCAST
    topology: str = ""

    @property
    def throughput(self) -> Fraction:
        return Fraction(sum(w for w, _ in self.trees)) / self.period

    def to_dict(self) -> dict:
        return {"format": ONEROOT_FORMAT, "version": ONEROOT_VERSION,
                "collective": self.collective, "topology": self.topology,
                "n": self.n, "root": self.root,
                "port_model": self.port_model,
                "node_bandwidth": None if self.bandwidth is None else exact(self.bandwidth),
                "throughput": exact(self.throughput), "period": exact(self.period),
                "links": [list(map(int, lk)) for lk in self.links],
                "trees": [{"weight": int(w), "parent": list(map(int, p))}
                          for w, p in self.trees],
                "send_columns": list(SEND_COLUMNS),
                "slots": [{"duration": exact(d), "sends": [list(map(int, s)) for s in sends]}
                          for d, sends in self.slots]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, doc: dict) -> "PeriodicSchedule":
        if doc.get("format") != ONEROOT_FORMAT:
            raise ScheduleError(f"not a {ONEROOT_FORMAT} document")
        try:
            bw = doc.get("node_bandwidth")
            return cls(int(doc["n"]), int(doc["root"]), doc["port_model"],
                       None if bw is None else Fraction(bw),
                       tuple(tuple(lk) for lk in doc["links"]), Fraction(doc["period"]),
                       tuple((int(t["weight"]), tuple(t["parent"])) for t in doc["trees"]),
                       tuple((Fraction(s["duration"]), tuple(tuple(r) for r in s["sends"]))
                             for s in doc["slots"]), doc.get("collective", Collective.BROADCAST),
                       str(doc.get("topology", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScheduleError(f"malformed one-root schedule: {exc}") from None


@dataclass(frozen=True)
class Replay:
    """Measured throughput (messages per time unit), and for the first ``messages`` messages
    the time ``completion`` at which every node holds them all."""

    throughput: Fraction
    messages: int
    completion: Fraction


def _depths(s: PeriodicSchedule, caps: dict) -> list[list[int]]:
    depths = []
    for l, (weight, parent) in enumerate(s.trees):
        if weight <= 0 or len(parent) != s.n or parent[s.root] != -1:
            raise ScheduleError(f"tree {l}: needs a positive weight and parent[root] = -1")
        depth = [-1] * s.n
        depth[s.root] = 0
        for v in range(s.n):
            path = []
            while depth[v] < 0 and len(path) <= s.n:
                path.append(v)
                u = parent[v]
                if not (0 <= u < s.n) or (u, v) not in caps:
                    raise ScheduleError(f"tree {l}: node {v} has parent {u}, not a link")
                v = u
            if depth[v] < 0:
                raise ScheduleError(f"tree {l} has a cycle through node {path[0]}")
            for k, x in enumerate(reversed(path)):
                depth[x] = depth[v] + k + 1
        depths.append(depth)
    return depths


def _check_slot(s: PeriodicSchedule, caps: dict, k: int, dur: Fraction, sends) -> None:
    """The port model in slot k (module doc)."""
    count: dict = {}
    for row in sends:
        u, w, l, lo, hi, lag = row
        if (u, w) not in caps or not 0 <= l < len(s.trees) or s.trees[l][1][w] != u:
            raise ScheduleError(f"slot {k}: send {list(row)} is not a link of tree {l}")
        if not (0 <= lo < hi <= s.trees[l][0]) or lag < 0:
            raise ScheduleError(f"slot {k}: send {list(row)} has a bad range or lag")
        count[(u, w)] = count.get((u, w), 0) + hi - lo
    for (u, w), c in count.items():
        if c > caps[(u, w)] * dur:
            raise ScheduleError(f"slot {k}: link {u}->{w} needs {Fraction(c, caps[(u, w)])} "
                                f"time units, the slot lasts {dur}")
    if s.port_model == "multi":
        return
    for end, what in ((0, "sends to"), (1, "receives from")):
        per = {}
        for key, c in count.items():
            per.setdefault(key[end], []).append(c)
        for node, cs in per.items():
            if s.port_model == "one" and len(cs) > 1:
                raise ScheduleError(f"slot {k}: node {node} {what} {len(cs)} nodes at once "
                                    "(one-port)")
            if s.port_model == "node" and sum(cs) > s.bandwidth * dur:
                raise ScheduleError(f"slot {k}: node {node} moves {sum(cs)} messages, over "
                                    f"its bandwidth {s.bandwidth} x {dur}")


def _check_coverage(s: PeriodicSchedule) -> None:
    seen: dict = {}
    for _, sends in s.slots:
        for u, w, l, lo, hi, _ in sends:
            seen.setdefault((l, w), []).append((lo, hi))
    for l, (weight, parent) in enumerate(s.trees):
        for w in range(s.n):
            if w == s.root:
                continue
            spans = sorted(seen.get((l, w), []))
            ends = [0] + [hi for _, hi in spans]
            if [lo for lo, _ in spans] != ends[:-1] or ends[-1] != weight:
                raise ScheduleError(f"tree {l}: link {parent[w]}->{w} does not carry each of "
                                    f"its {weight} messages exactly once per period")


def replay(s: PeriodicSchedule, messages: int = 0) -> Replay:
    """Replay ``s`` (module doc) long enough to deliver ``messages`` messages (at least one
    batch); ScheduleError naming the first violation."""
    caps = {(int(u), int(w)): int(c) for u, w, c in s.links}
    if len(caps) != len(s.links) or any(c <= 0 for c in caps.values()):
        raise ScheduleError("links must be distinct with positive capacities")
    _depths(s, caps)
    if sum(d for d, _ in s.slots) != s.period or any(d <= 0 for d, _ in s.slots):
        raise ScheduleError("slot durations must be positive and sum to the period")
    for k, (dur, sends) in enumerate(s.slots):
        _check_slot(s, caps, k, dur, sends)
    _check_coverage(s)
    per_batch = sum(w for w, _ in s.trees)
    batches = max(1, -(-messages // per_batch))
    max_lag = max((r[5] for _, sends in s.slots for r in sends), default=0)
    arrival = [np.full((s.n, batches, w), np.inf) for w, _ in s.trees]
    for a in arrival:
        a[s.root] = 0.0
    exact_time: dict = {}
    for r in range(batches + max_lag + 1):
        t0 = s.period * r
        for k, (dur, sends) in enumerate(s.slots):
            for u, w, l, lo, hi, lag in sends:
                b = r - lag
                if not 0 <= b < batches:
                    continue
                if np.any(arrival[l][u, b, lo:hi] > float(t0)):
                    raise ScheduleError(f"period {r} slot {k}: node {u} sends messages "
                                        f"[{lo},{hi}) of tree {l} batch {b} before holding "
                                        "them")
                arrival[l][w, b, lo:hi] = np.minimum(arrival[l][w, b, lo:hi], float(t0 + dur))
                exact_time[float(t0 + dur)] = t0 + dur
            t0 += dur
    if any(np.isinf(a).any() for a in arrival):
        raise ScheduleError("some node never receives some message")
    order = np.concatenate([np.concatenate([a[:, b, :] for a in arrival], axis=1)
                            for b in range(batches)], axis=1)
    k = messages if messages else per_batch
    return Replay(s.throughput, k, exact_time.get(float(order[:, :k].max()), Fraction(0)))
