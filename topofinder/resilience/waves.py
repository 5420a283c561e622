"""Re-cabling in waves that keep the fabric running (`export --diff OLD.csv --waves W`;
docs/algorithms.md "Waves").

A diff unplugs rows R and plugs rows A. A plugged row needs its port ends and panel position
free, so it waits for every unplugged row that held one of them (its blockers). A wave plan
gives each unplugged row a wave 1..W; each plugged row goes in the wave of its last blocker
(wave 1 without one). While wave i is done the fabric is D_i = S_{i−1} − R_i, after it
S_i = D_i + A_i (S_0 the old fabric, S_W the new one); every node keeps its port numbers
< d throughout, since rows only take ends the diff freed.

Method: unplugged rows tied by blocking (connected components of the blocker graph: units)
go whole, largest first, to the wave (of at most ⌈|R|/W⌉ rows) where their nodes have lost
the fewest rows so far, then the lightest — so a wave plugs what it unplugs and no node goes
dark in one wave when it can be avoided; then a local search (a fixed-seed random row of the wave with
the worst allreduce time moves to the wave with the best, swapped with one of its rows when
that wave is full; kept when the worst intermediate allreduce time max_i time(D_i), ties by
the sum, falls; :data:`SEARCH_STEPS` trials) improves it, deterministically. Lower bound on that worst time
for any wave plan: D_i ⊆ U = old ∪ new, so D_i's diameter is at least U's, BFB needs at least
the diameter in steps for allgather and reduce-scatter, and τ ≥ (N−1)/N (a node receives
(N−1)M/N over bandwidth B): worst ≥ 2·diam(U)·α + 2(N−1)/N·M/B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from topofinder.cabling.patch_panel import DUPLEX, KINDS, PatchPlan, PlanDiff
from topofinder.compute.output import atomic_output
from topofinder.errors import TopofinderError
from topofinder.model.names import CsvWriter
from topofinder.model.topology import Topology
from topofinder.resilience.survey import score_fabric, survey
from topofinder.workload.cost import Workload
from topofinder.cabling.patch_panel import HEADER, LABEL_COLUMNS

#: Largest N whose waves get the worst single-failure survey (asymmetric intermediate
#: fabrics have no automorphisms to share the work: one BFB score per fibre).
SURVEY_LIMIT = 128
#: Local-search moves tried per wave plan up to N = 256 (a quarter of that per doubling of N
#: beyond: one score costs about a second at N = 1024).
SEARCH_STEPS = 40


def _resources(rows: np.ndarray, kinds: np.ndarray) -> list[list[tuple]]:
    """Per row: the port ends (tx/rx at node, port) and the panel position it occupies."""
    out = []
    for r, k in zip(rows.tolist(), kinds.tolist()):
        res = [("p", r[0], r[1]), ("t", r[2], r[3]), ("r", r[4], r[5])]
        if k == DUPLEX:
            res += [("t", r[4], r[5]), ("r", r[2], r[3])]
        out.append(res)
    return out


def blockers(diff: PlanDiff) -> list[list[int]]:
    """For every plugged row, the unplugged rows that held one of its ends or its position."""
    holder: dict[tuple, int] = {}
    for i, res in enumerate(_resources(diff.removed, diff.removed_kinds)):
        for x in res:
            holder[x] = i
    return [sorted({holder[x] for x in res if x in holder})
            for res in _resources(diff.added, diff.added_kinds)]


@dataclass(frozen=True, eq=False)
class WavePlan:
    """``removed_wave`` / ``added_wave``: the wave (1..W) of every unplugged / plugged row;
    ``stats``: per wave the scores during and after it (:meth:`describe`); ``lower_bound_s``
    the bound of the module doc on the worst allreduce time during any wave."""

    diff: PlanDiff
    waves: int
    removed_wave: np.ndarray
    added_wave: np.ndarray
    stats: tuple[dict, ...]
    lower_bound_s: float

    def plan_after(self, wave: int) -> PatchPlan:
        """The plan as cabled after wave ``wave`` (0: the old plan)."""
        old = self.diff.old
        gone = _removed_mask(old, self.diff.removed[self.removed_wave <= wave],
                             self.diff.removed_kinds[self.removed_wave <= wave])
        add = self.added_wave <= wave
        return PatchPlan(old.n, np.concatenate([old.rows[~gone], self.diff.added[add]]),
                         np.concatenate([old.kinds[~gone], self.diff.added_kinds[add]]),
                         old.panel_size, old.labels)

    def write_csv(self, out) -> None:
        """The diff CSV with a ``wave`` column after ``action``."""
        if not isinstance(out, str):
            return self._write(out)
        with atomic_output(out, newline="") as fh:
            self._write(fh)

    def _write(self, fh) -> None:
        old, named = self.diff.old, self.diff.old.labels is not None
        w = CsvWriter(fh)
        w.writerow(["action", "wave"] + HEADER + (LABEL_COLUMNS if named else []))
        for action, rows, kinds, waves in (
                ("remove", self.diff.removed, self.diff.removed_kinds, self.removed_wave),
                ("add", self.diff.added, self.diff.added_kinds, self.added_wave)):
            for i in np.argsort(waves, kind="stable").tolist():
                row = rows[i].tolist()
                names = [old.label(row[2]), old.label(row[4])] if named else []
                w.writerow([action, int(waves[i])] + row + [KINDS[int(kinds[i])]] + names)


def old_index(old: PatchPlan, rows: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """For every row of ``rows``, a distinct index of the same row in ``old``."""
    at: dict[tuple, list[int]] = {}
    for i, (r, k) in enumerate(zip(old.rows.tolist(), old.kinds.tolist())):
        at.setdefault(tuple(r) + (k,), []).append(i)
    try:
        return np.array([at[tuple(r) + (k,)].pop() for r, k in
                         zip(rows.tolist(), kinds.tolist())], np.int64).reshape(-1)
    except (KeyError, IndexError):
        raise AssertionError("an unplugged row is not a row of the old plan") from None


def _removed_mask(old: PatchPlan, rows: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    gone = np.zeros(old.num_rows, bool)
    gone[old_index(old, rows, kinds)] = True
    return gone


def _plan(plan: PatchPlan, gone: np.ndarray, extra: np.ndarray, extra_kinds) -> PatchPlan:
    rows = np.concatenate([plan.rows[~gone], extra])
    kinds = np.concatenate([plan.kinds[~gone], extra_kinds])
    return PatchPlan(plan.n, rows, kinds, plan.panel_size, plan.labels)


def _topology(plan: PatchPlan, gone: np.ndarray, extra: np.ndarray, extra_kinds, expr) -> Topology:
    return _plan(plan, gone, extra, extra_kinds).to_topology(expr)


def ports_in_use(plan: PatchPlan) -> int:
    """The most ports any node uses (a port counts when it transmits or receives)."""
    tx, rx = plan.port_usage()
    ends = np.unique(np.concatenate([tx, rx]), axis=0)
    return int(np.bincount(ends[:, 0]).max()) if ends.size else 0


class _States:
    """The fabrics D_i and S_i of a wave assignment, scored (allreduce seconds)."""

    def __init__(self, diff: PlanDiff, block: list[list[int]], workload: Workload):
        self.diff, self.block, self.workload = diff, block, workload
        self.at = old_index(diff.old, diff.removed, diff.removed_kinds)
        self.memo: dict[bytes, float] = {}

    def added_waves(self, rw: np.ndarray) -> np.ndarray:
        return np.array([max((int(rw[j]) for j in b), default=1) for b in self.block],
                        np.int64).reshape(-1)

    def plan(self, rw: np.ndarray, wave: int, after: bool) -> PatchPlan:
        aw = self.added_waves(rw)
        gone = np.zeros(self.diff.old.num_rows, bool)
        gone[self.at[rw <= wave]] = True
        add = aw <= wave if after else aw < wave
        return _plan(self.diff.old, gone, self.diff.added[add], self.diff.added_kinds[add])

    def fabric(self, rw: np.ndarray, wave: int, after: bool) -> Topology:
        return self.plan(rw, wave, after).to_topology(
            f"wave {wave} {'after' if after else 'during'}")

    def during(self, rw: np.ndarray, wave: int) -> float:
        key = np.concatenate([[wave], np.minimum(rw, wave + 1)]).astype(np.int32).tobytes()
        if key not in self.memo:
            topo = self.fabric(rw, wave, False)
            self.memo[key] = score_fabric(topo, self.workload, forestcoll=False).allreduce_s
        return self.memo[key]


def _units(diff: PlanDiff, block: list[list[int]]) -> list[list[int]]:
    """Unplugged rows tied by a plugged row that waits for several of them."""
    r = diff.removed.shape[0]
    src, dst = [], []
    for b in block:
        for j in b[1:]:
            src.append(b[0])
            dst.append(j)
    g = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(r, r))
    _, label = connected_components(g, directed=False)
    units: dict[int, list[int]] = {}
    for j, lab in enumerate(label.tolist()):
        units.setdefault(lab, []).append(j)
    return sorted(units.values(), key=lambda u: (-len(u), u[0]))


def _spread(diff: PlanDiff, units: list[list[int]], waves: int, cap: int) -> np.ndarray:
    """First assignment: every blocking unit whole (so its wave plugs what it unplugs) to the
    wave with room where its nodes have lost the fewest rows so far (so no node goes dark in
    one wave), then the lightest; a unit no wave has room for is dealt row by row (W·cap ≥ |R| rows)."""
    r = diff.removed
    lost = np.zeros((waves, diff.old.n), np.int64)
    size = np.zeros(waves, np.int64)
    rw = np.ones(r.shape[0], np.int64)
    for unit in units:
        fits = bool(np.any(size + len(unit) <= cap))
        for part in [unit] if fits else [[j] for j in unit]:
            nodes = np.concatenate([r[part, 2], r[part, 4]])
            room = [w for w in range(waves) if size[w] + len(part) <= cap]
            w = min(room, key=lambda w: (int(lost[w, nodes].max()), int(size[w]), w))
            np.add.at(lost[w], nodes, 1)
            size[w] += len(part)
            rw[part] = w + 1
    return rw


def plan_waves(diff: PlanDiff, waves: int | None = None, max_down: int | None = None,
               workload: Workload | None = None, failures: bool = True,
               stats: bool = True) -> WavePlan:
    """Split ``diff`` into ``waves`` waves (or as few as keep at most ``max_down`` rows
    unplugged at once), ordered as the module doc says; TopofinderError when some wave would
    leave the fabric not strongly connected. ``stats``: score every wave (``failures``: with
    its worst single failure up to :data:`SURVEY_LIMIT` nodes)."""
    workload = workload or Workload()
    r = int(diff.removed.shape[0])
    if (waves is None) == (max_down is None):
        raise TopofinderError("waves: give --waves W or --max-down F (one of them)")
    if waves is not None and waves < 1 or max_down is not None and max_down < 1:
        raise TopofinderError("waves: --waves and --max-down must be >= 1")
    if waves is None:
        waves = max(1, math.ceil(r / max_down))
    cap = max_down if max_down is not None else max(1, math.ceil(r / waves))
    block = blockers(diff)
    rw = _spread(diff, _units(diff, block) if r else [], waves, cap)
    states = _States(diff, block, workload)

    def cost(rw):
        times = [states.during(rw, i) for i in range(1, waves + 1)]
        return max(times), sum(times)

    best = cost(rw)
    rng = np.random.default_rng(0)
    steps = SEARCH_STEPS if diff.old.n <= 256 else SEARCH_STEPS * 256 // (4 * diff.old.n)
    for _ in range(steps if waves > 1 and r > 1 else 0):
        times = [states.during(rw, i) for i in range(1, waves + 1)]
        worst, easiest = int(np.argmax(times)) + 1, int(np.argmin(times)) + 1
        if worst == easiest:
            break
        j = int(rng.choice(np.flatnonzero(rw == worst)))
        trial = rw.copy()
        there = np.flatnonzero(rw == easiest)
        if np.sum(rw == easiest) >= cap and there.size:
            trial[int(rng.choice(there))] = worst            # swap: sizes stay within cap
        trial[j] = easiest
        c = cost(trial)
        if c < best:
            rw, best = trial, c
    if not math.isfinite(best[0]):
        raise TopofinderError(f"waves: no plan of {waves} wave(s) found that keeps the fabric "
                              "strongly connected while fibres are out; give more waves "
                              "(--waves) or a smaller --max-down")
    aw = states.added_waves(rw)
    union = _topology(diff.old, np.zeros(diff.old.num_rows, bool), diff.added,
                      diff.added_kinds, "union")
    n = diff.old.n
    bound = workload.collective_time(2 * union.diameter, 2 * (n - 1) / n)
    scored = tuple(_wave_stats(states, rw, i, workload, failures)
                   for i in range(1, waves + 1)) if stats else ()
    return WavePlan(diff, waves, rw, aw, scored, bound)


def _wave_stats(states: _States, rw: np.ndarray, wave: int, workload: Workload,
                failures: bool) -> dict:
    """Scores during and after one wave, and the old fabric with this wave's fibres failed."""
    diff = states.diff
    during = states.fabric(rw, wave, False)
    after = states.fabric(rw, wave, True)
    s_during = score_fabric(during, workload, forestcoll=False)
    s_after = score_fabric(after, workload, forestcoll=False)
    gone = np.zeros(diff.old.num_rows, bool)
    gone[states.at[rw == wave]] = True
    failed = _topology(diff.old, gone, diff.added[:0], diff.added_kinds[:0], "old failed")
    s_failed = score_fabric(failed, workload, forestcoll=False)
    doc = {"wave": wave, "unplugged": int(np.sum(rw == wave)),
           "plugged": int(np.sum(states.added_waves(rw) == wave)),
           "during": s_during.as_dict(), "after": s_after.as_dict(),
           "old_with_wave_failed": s_failed.as_dict(),
           "max_ports": ports_in_use(states.plan(rw, wave, True))}
    if failures and after.n <= SURVEY_LIMIT and after.strongly_connected:
        doc["worst_single_failure"] = _worst(survey(after, workload, nodes=0))
    return doc


def _worst(doc: dict) -> dict:
    worst = doc["single_links"]["worst"]
    return {"unit": doc["single_links"]["unit"], "failure": worst.get("failure"),
            "allreduce_s": worst.get("allreduce_s")}
