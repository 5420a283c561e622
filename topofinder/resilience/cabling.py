"""The patch-panel plan of a degraded fabric and the fibre moves of a bypass (docs/formats.md).

The degraded plan is the intact plan (``plan_patch_panel``) with the dead connections taken
out: a dead fibre's row (a duplex cable that lost one direction becomes a simplex row of the
surviving one, same ports and panel position), a dead cable's row, every row at a dead node.
Each fibre patched in (``+u->w``) takes a free transmit port of u and a free receive port of
w (ports 0..d−1) and the first panel position freed by the failure. Survivors are then
renumbered as the degraded topology numbers them and keep their names, so `check` compares a
degraded schedule with this plan rank by rank.
"""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.cabling.patch_panel import (
    DEFAULT_PANEL_SIZE, DUPLEX, SIMPLEX, PatchPlan, PlanDiff, plan_patch_panel,
)
from topofinder.model.failures import Failure, degrade, survivors
from topofinder.model.topology import Topology


def _find(rows, kinds, keep, u: int, w: int, duplex: bool) -> int:
    """A kept row carrying u → w: a simplex row, else (``duplex``) a duplex cable u–w."""
    simplex = keep & (kinds != DUPLEX) & (rows[:, 2] == u) & (rows[:, 4] == w)
    if simplex.any() and not duplex:
        return int(np.flatnonzero(simplex)[0])
    cable = keep & (kinds == DUPLEX) & (((rows[:, 2] == u) & (rows[:, 4] == w))
                                        | ((rows[:, 2] == w) & (rows[:, 4] == u)))
    if cable.any():
        return int(np.flatnonzero(cable)[0])
    if simplex.any():
        return int(np.flatnonzero(simplex)[0])
    raise TopofinderError(f"the plan cables no {'cable' if duplex else 'fibre'} {u}->{w}")


def _free(ends: np.ndarray, node: int, d: int) -> int:
    used = set(ends[ends[:, 0] == node, 1].tolist())
    for p in range(d):
        if p not in used:
            return p
    raise TopofinderError(f"node {node} has no free port left among 0..{d - 1}")


def _patch_in(plan: PatchPlan, keep, freed: list, added, d: int):
    """Rows for the fibres patched in, on free ports and freed (then new) panel positions."""
    rows = []
    for u, w in added:
        after = PatchPlan(plan.n, np.concatenate([plan.rows[keep]] + rows),
                          np.concatenate([plan.kinds[keep],
                                          np.full(len(rows), SIMPLEX, np.int8)]))
        tx, rx = after.port_usage()
        if freed:
            panel, pos = freed.pop(0)
        else:
            taken = set(map(tuple, after.rows[:, :2].tolist()))
            panel, pos = next((p, q) for p in range(plan.num_panels + 1)
                              for q in range(0, plan.panel_size or 10**9, 2)
                              if (p, q) not in taken)
        rows.append(np.array([[panel, pos, u, _free(tx, u, d), w, _free(rx, w, d)]]))
    return np.concatenate(rows) if rows else np.zeros((0, 6), np.int64)


def failure_cabling(topo: Topology, failure: Failure, cabling: str = "auto",
                    panel_size: int | None = DEFAULT_PANEL_SIZE) -> PlanDiff:
    """The moves from the intact plan to the degraded one, in intact node numbers: rows
    unplugged (dead and, for a half-dead duplex cable, re-plugged as simplex) and plugged.
    TopofinderError when the failure names no such element or disconnects the fabric."""
    degrade(topo, failure)
    old = plan_patch_panel(topo, cabling, panel_size)
    rows, kinds = old.rows.copy(), old.kinds.copy()
    keep = np.ones(old.num_rows, bool)
    changed = []
    for (u, w), duplex in [(f, False) for f in failure.fibres] + [(c, True) for c in
                                                                  failure.cables]:
        i = _find(rows, kinds, keep, u, w, duplex)
        keep[i] = False
        if kinds[i] == DUPLEX and not duplex:          # the other direction survives
            r = rows[i]
            changed.append([r[0], r[1], w, r[5] if r[4] == w else r[3], u,
                            r[3] if r[2] == u else r[5]])
    dead = np.zeros(topo.n, bool)
    dead[list(failure.nodes)] = True
    gone = keep & (dead[rows[:, 2]] | dead[rows[:, 4]])
    freed = [tuple(r) for r in rows[gone, :2].tolist()]
    keep &= ~gone
    base = PatchPlan(old.n, np.concatenate([rows[keep], np.array(changed, np.int64)
                                            .reshape(-1, 6)]),
                     np.concatenate([kinds[keep], np.full(len(changed), SIMPLEX, np.int8)]),
                     panel_size)
    added = _patch_in(base, np.ones(base.num_rows, bool), freed, failure.added, topo.degree)
    add_rows = np.concatenate([np.array(changed, np.int64).reshape(-1, 6), added])
    add_kinds = np.full(len(add_rows), SIMPLEX, np.int8)
    new = PatchPlan(old.n, np.concatenate([base.rows, added]),
                    np.concatenate([base.kinds, np.full(len(added), SIMPLEX, np.int8)]),
                    panel_size, old.labels)
    return PlanDiff(old, new, np.arange(old.n), old.rows[~keep], old.kinds[~keep], add_rows,
                    add_kinds, None, "failure", topo)


def degraded_plan(topo: Topology, failure: Failure, cabling: str = "auto",
                  panel_size: int | None = DEFAULT_PANEL_SIZE) -> PatchPlan:
    """The degraded fabric's plan in its own (survivor) numbering, with node names."""
    plan = failure_cabling(topo, failure, cabling, panel_size).new
    alive = survivors(topo.n, failure)
    new = np.full(topo.n, -1)
    new[alive] = np.arange(alive.size)
    rows = plan.rows.copy()
    rows[:, 2], rows[:, 4] = new[rows[:, 2]], new[rows[:, 4]]
    labels = tuple(topo.label(int(v)) for v in alive) if alive.size < topo.n else topo.labels
    return PatchPlan(int(alive.size), rows, plan.kinds, panel_size, labels)
