"""``topofinder check PLAN.csv SCHEDULE``: does every send of a schedule ride a cabled fibre?

A send u → w (a step-schedule row, a tree edge, an MSCCL ``s`` instruction) needs a fibre from a
TX end of node u to an RX end of node w in the plan: a ``simplex`` row src → dst, either
direction of a ``duplex`` row, or a ``loopback`` (u = w). "Enough ports": the schedule's
T_L and τ assume every k-fold multi-arc u → w of its topology is k links (paper 001 §2: a
topology is a multigraph of unit links), so the plan must carry at least k fibres u → w for
every pair the schedule uses. The topology is the one the document carries (.npz), or the one
its ``topology`` field names, renamed by its ``physical`` map (written by ``export --relabel``);
when that cannot be rebuilt, one fibre per used pair is required. When plan and schedule both
name their nodes, the names must agree rank by rank.

The schedule is checked against the plan's node numbers: a schedule exported for the cabling
before a diff, or not renamed with the diff's mapping, fails with the first send that has no
fibre.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.npz import load_npz
from topofinder.cabling.patch_panel import KINDS, PatchPlan, parse_plan
from topofinder.cabling.relabel import document_mapping, relabel_topology
from topofinder.export.msccl.reimport import parse_msccl_xml
from topofinder.families.build import document_topology
from topofinder.model.alltoall_schedule import ALLTOALL_COLUMNS
from topofinder.model.alltoall_schedule import COLLECTIVE as ALLTOALL
from topofinder.model.schedule import (COLLECTIVES, SCHEDULE_FORMAT, SCHEDULE_VERSION, SEND_COLUMNS,
                                       StepSchedule)
from topofinder.model.inputs import read_input, read_json
from topofinder.model.symmetric import OrbitSchedule, arc_sends, replay_by_symmetry
from topofinder.model.topology import MAX_NODES, Topology
from topofinder.model.units import exact
from topofinder.model.collectives import Collective


@dataclass(frozen=True)
class Sends:
    """Every send of a schedule: ``rows`` (S, 6) = t, v, lo, hi, u, w (a tree edge: t = tree
    index + 1, v = root, lo = hi = 0; an all-to-all send: v = the piece's source, lo = hi =
    0); the topology it was built for (None if unknown); the node names it carries."""

    rows: np.ndarray
    kind: str
    num_nodes: int
    topology: Topology | None
    labels: tuple[str, ...] | None
    note: str = ""


@dataclass(frozen=True)
class CheckReport:
    sends: int
    pairs: int
    fibres: int
    note: str


def _named_topology(expr, physical, labels) -> tuple[Topology | None, str]:
    if not isinstance(expr, str):
        return None, "the schedule names no topology: one fibre per used pair required"
    topo = document_topology(expr, "schedule")
    if physical is not None:
        topo = relabel_topology(topo, document_mapping(physical, labels, "schedule"))
    return topo, ""


def read_sends(path) -> Sends:
    """The sends of a schedule file: step or tree JSON, MSCCL XML, or .npz."""
    path = Path(path)
    if path.suffix == ".npz":
        sched = load_npz(path)
        return _from_object(sched)
    text = read_input(path, "schedule")
    if text.lstrip().startswith("<"):
        doc = parse_msccl_xml(text)
        physical = doc.get("physical")
        labels = doc.get("labels")
        topo, note = _named_topology(doc["topology"], physical, labels)
        return Sends(doc["sends"], "steps", doc["num_nodes"], topo, labels, note)
    if not text.lstrip().startswith(("{", "[")):
        raise TopofinderError(f"schedule {path} is neither JSON nor MSCCL XML")
    doc = read_json(text, str(path))
    if not isinstance(doc, dict) or "num_nodes" not in doc:
        raise TopofinderError(f"schedule {path}: not a topofinder schedule document")
    _check_header(doc, path)
    labels = tuple(doc["labels"]) if isinstance(doc.get("labels"), list) else None
    topo, note = _named_topology(doc.get("topology"), doc.get("physical"), labels)
    try:
        if doc.get("kind") == "trees":
            rows = [(i + 1, t["root"], 0, 0, u, w) for i, t in enumerate(doc["trees"])
                    for u, w in t["edges"]]
            kind = "trees"
        elif doc.get("collective") == Collective.ALLTOALL:       # rows t, u, w, src, dst, amount
            rows = [(r[0], r[3], 0, 0, r[1], r[2]) for r in doc["sends"]]
            kind = Collective.ALLTOALL
        else:
            rows, kind = doc["sends"], "steps"
        arr = np.array(rows, np.int64).reshape(-1, 6)
        _check_ranges(doc, arr, kind, path)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, TopofinderError):
            raise
        raise TopofinderError(f"schedule {path}: malformed sends ({exc!r})") from None
    return Sends(arr, kind, int(doc["num_nodes"]), topo, labels, note)


def _check_header(doc: dict, path) -> None:
    """The schedule document's format, version, kind, collective, columns and num_nodes are
    ones `export --what schedule` writes (docs/formats.md); TopofinderError else."""
    kind, coll = doc.get("kind", "steps"), doc.get("collective", Collective.ALLGATHER)
    allowed = ((Collective.ALLGATHER, Collective.REDUCE_SCATTER) if kind == "trees"
               else (*COLLECTIVES, ALLTOALL))
    columns = list(ALLTOALL_COLUMNS if coll == ALLTOALL else SEND_COLUMNS)
    n = doc["num_nodes"]
    problem = (
        "format" if doc.get("format", SCHEDULE_FORMAT) != SCHEDULE_FORMAT else
        "version" if doc.get("version", SCHEDULE_VERSION) != SCHEDULE_VERSION else
        "kind" if kind not in ("steps", "trees") else
        "collective" if coll not in allowed else
        "columns" if kind == "steps" and doc.get("columns", columns) != columns else
        "num_nodes" if not (isinstance(n, int) and not isinstance(n, bool)
                            and 2 <= n <= MAX_NODES) else None)
    if problem is not None:
        raise TopofinderError(f"schedule {path}: its {problem} {ascii(doc.get(problem))[:80]} is "
                              f"not one topofinder writes (format {SCHEDULE_FORMAT} version "
                              f"{SCHEDULE_VERSION}, docs/formats.md)")


def _check_ranges(doc: dict, rows: np.ndarray, kind: str, path) -> None:
    """Every row addresses steps ≥ 1, nodes 0..N−1 and (step sends) chunks 0 ≤ lo < hi ≤ P."""
    n = doc["num_nodes"]
    if not rows.size:
        return
    t, v, lo, hi, u, w = rows.T
    bad = (t < 1) | (v < 0) | (v >= n) | (u < 0) | (u >= n) | (w < 0) | (w >= n)
    if kind == "steps":
        p = doc["shard_chunks"]
        if not isinstance(p, int) or p < 1:
            raise TopofinderError(f"schedule {path}: shard_chunks must be a positive integer")
        bad |= (lo < 0) | (hi > p) | (lo >= hi)
    if kind == Collective.ALLTOALL:
        amounts = np.array([r[5] for r in doc["sends"]], dtype=float)
        bad |= ~(amounts > 0)
    if bad.any():
        row = [int(x) for x in rows[np.flatnonzero(bad)[0]]]
        raise TopofinderError(f"schedule {path}: row {row} (t, v, lo, hi, u, w) is outside "
                              f"steps >= 1, nodes 0..{n - 1} and chunks 0 <= lo < hi <= P")


def _from_object(sched) -> Sends:
    """The sends of a schedule read from .npz; of an orbit schedule (N = 10^5), replayed by
    symmetry first (one source per orbit, model/symmetric.py: replay_by_symmetry; its T_L
    and exact τ in M/B stated), one send of the extended schedule on every link it uses
    (arc_sends), which is what the fibre check needs."""
    topo = sched.topology
    if isinstance(sched, OrbitSchedule):
        replay_by_symmetry(sched)
        rows = arc_sends(sched)
        return Sends(rows, "steps", topo.n, topo, topo.labels,
                     f"orbit form: the {sched.collective} replayed by symmetry "
                     f"({sched.action.reps.size} source(s) per phase; T_L = "
                     f"{sched.num_steps}, tau = {exact(sched.tau)} M/B); {rows.shape[0]} sends "
                     f"checked, one on each link the extended schedule uses (each of its "
                     f"sends is an automorphism's image of one of them)")
    if isinstance(sched, StepSchedule):
        return Sends(sched.sends, "steps", topo.n, topo, topo.labels)
    rows = [(i + 1, t.root, 0, 0, u, w) for i, t in enumerate(sched.trees) for u, w in t.edges]
    return Sends(np.array(rows, np.int64).reshape(-1, 6), "trees", topo.n, topo, topo.labels)


def apply_diff(plan: PatchPlan, path) -> PatchPlan:
    """The plan after a diff CSV (``action,`` + plan columns): every ``remove`` row must be a
    row of the plan (it is unplugged), every ``add`` row is plugged; a port end or panel
    position used twice afterwards is an error."""
    text = read_input(path, "diff")
    lines = text.splitlines()
    if not lines or not lines[0].startswith("action,"):
        raise TopofinderError(f"{path}: a diff CSV starts with the header action,panel,...")
    body = [ln.split(",", 1) for ln in lines[1:] if ln.strip()]
    if any(len(b) != 2 or b[0] not in ("remove", "add") for b in body):
        raise TopofinderError(f"{path}: every row starts with remove or add")
    table = parse_plan("\n".join([lines[0].split(",", 1)[1]] + [b[1] for b in body]), plan.n)
    keys = [tuple(r) + (int(k),) for r, k in zip(table.rows.tolist(), table.kinds.tolist())]
    have: dict[tuple, list[int]] = {}
    for i, key in enumerate(tuple(r) + (int(k),) for r, k in zip(plan.rows.tolist(),
                                                                 plan.kinds.tolist())):
        have.setdefault(key, []).append(i)
    keep = np.ones(plan.num_rows, bool)
    added = []
    for line, ((action, _), key) in enumerate(zip(body, keys), start=2):
        if action == "remove":
            if not have.get(key):
                raise TopofinderError(f"{path} line {line}: remove {','.join(map(str, key[:6]))}"
                                      f",{KINDS[key[6]]}: the plan has no such connection")
            keep[have[key].pop()] = False
        else:
            added.append(line - 2)
    rows = np.concatenate([plan.rows[keep], table.rows[added]])
    kinds = np.concatenate([plan.kinds[keep], table.kinds[added]])
    after = PatchPlan(max(plan.n, table.n), rows, kinds, plan.panel_size,
                      plan.labels if plan.labels is not None else table.labels)
    check_ports(after, f"after the diff {path}")
    return after


def check_ports(plan: PatchPlan, where: str = "the plan") -> None:
    """TopofinderError unless every (node, port) end transmits and receives on at most one
    fibre and every panel position holds at most one connection (so no fibre is listed
    twice)."""
    tx, rx = plan.port_usage()
    for ends, side in ((tx, "transmit"), (rx, "receive")):
        uniq, counts = np.unique(ends, axis=0, return_counts=True)
        if (counts > 1).any():
            u, port = uniq[int(np.flatnonzero(counts > 1)[0])].tolist()
            raise TopofinderError(f"{where}: port {port} of node {u} would {side} on two "
                                  f"fibres")
    uniq, counts = np.unique(plan.rows[:, :2], axis=0, return_counts=True)
    if (counts > 1).any():
        panel, pos = uniq[int(np.flatnonzero(counts > 1)[0])].tolist()
        raise TopofinderError(f"{where}: panel {panel} port {pos} holds two connections")


def _describe(sends: Sends, row, plan: PatchPlan) -> str:
    t, v, lo, hi, u, w = (int(x) for x in row)

    def name(x):
        return f"node {x}" + (f" ({plan.label(x)})" if plan.labels else "")

    if sends.kind == "trees":
        return f"tree {t} (root {v}): edge {name(u)} -> {name(w)}"
    if sends.kind == Collective.ALLTOALL:
        return f"step {t}: {name(u)} sends (part of) a piece from node {v} to {name(w)}"
    return f"step {t}: {name(u)} sends chunks [{lo},{hi}) of node {v}'s shard to {name(w)}"


def check(plan: PatchPlan, sends: Sends) -> CheckReport:
    """TopofinderError naming the first offending send (or a port or panel position the plan
    uses twice), else a :class:`CheckReport`."""
    check_ports(plan)
    if sends.num_nodes > plan.n:
        raise TopofinderError(f"the schedule has {sends.num_nodes} ranks, the plan cables "
                              f"{plan.n} nodes")
    if plan.labels is not None and sends.labels is not None:
        for r, (a, b) in enumerate(zip(plan.labels, sends.labels)):
            if a != b:
                raise TopofinderError(f"rank {r} is {a!r} in the plan but {b!r} in the "
                                      "schedule: export the schedule with --relabel (the "
                                      "diff's mapping)")
    n = plan.n
    src, dst = plan.arcs()
    need = None
    if sends.topology is not None:
        t = sends.topology
        if t.n > n:
            raise TopofinderError(f"the schedule's topology has {t.n} nodes, the plan {n}")
    rows = sends.rows
    key = rows[:, 4] * n + rows[:, 5] if rows.size else np.zeros(0, np.int64)
    if rows.size and (rows[:, 4:6].min() < 0 or rows[:, 4:6].max() >= n):
        bad = int(np.flatnonzero((rows[:, 4:6] < 0).any(1) | (rows[:, 4:6] >= n).any(1))[0])
        raise TopofinderError(f"{_describe(sends, rows[bad], plan)}: a node outside the plan")
    fibres = _pair_counts(src * n + dst, key)
    if sends.topology is not None:
        need = _pair_counts(t.src * n + t.dst, key)
    missing = fibres == 0
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        u, w = int(rows[i, 4]), int(rows[i, 5])
        raise TopofinderError(f"{_describe(sends, rows[i], plan)}: no fibre from node {u} to "
                              f"node {w} in the plan")
    if need is not None:
        short = fibres < need
        if short.any():
            i = int(np.flatnonzero(short)[0])
            u, w = int(rows[i, 4]), int(rows[i, 5])
            raise TopofinderError(
                f"{_describe(sends, rows[i], plan)}: the schedule's topology has "
                f"{int(need[i])} links {u} -> {w} but the plan cables "
                f"{int(fibres[i])} fibre(s)")
    return CheckReport(int(rows.shape[0]), int(np.unique(key).size), int(src.size), sends.note)


def _pair_counts(have: np.ndarray, key: np.ndarray) -> np.ndarray:
    """How often each pair key u·N + w of ``key`` occurs in ``have`` (sorted keys, no N×N
    table: N = 10^5 would need 10^10 counters)."""
    uniq, counts = np.unique(have, return_counts=True)
    i = np.minimum(np.searchsorted(uniq, key), max(uniq.size - 1, 0))
    found = (uniq[i] == key) if uniq.size else np.zeros(key.size, bool)
    return np.where(found, counts[i] if uniq.size else 0, 0)
