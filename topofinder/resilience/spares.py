"""Spare nodes (`fail --repatch NODE --spares S`): which spare replaces a dead node with the
fewest cross-connect moves (docs/algorithms.md "Failures").

The physical model is cabling/physical.py's: every node port is wired for good to its own
panel ports, nodes fill panels in consecutive blocks, panels are joined by pre-wired trunks,
and a fibre is one patch cord on a panel (two, through a trunk, across panels). The S spares
are nodes N..N+S−1 of the layout, cabled to nothing. Spare s replaces dead node x when every
fibre of x is moved to the same port of s: the fabric is the intact one with s playing x (so
T_L, τ and the schedule, relabelled, are the intact ones). Its cost is the cords unplugged
plus plugged between the two configurations (``connect_changes``). The trunks are sized for
the intact plan and every replacement (spares are planned with the cabling), or ``trunks``
per panel pair; a spare that would need more is infeasible. Every spare is tried: exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from topofinder.errors import TopofinderError
from topofinder.cabling.patch_panel import DEFAULT_PANEL_SIZE, PatchPlan, plan_patch_panel
from topofinder.cabling.physical import Configuration, configure, connect_changes, make_layout
from topofinder.model.topology import Topology


@dataclass(frozen=True)
class SparePlan:
    """``spare`` replaces ``node``: ``removed``/``added`` cross-connects between the
    configurations ``before`` and ``after``; ``costs[s]`` the cords moved for every spare
    (None: not enough trunks)."""

    node: int
    spare: int
    removed: list
    added: list
    costs: dict
    before: Configuration
    after: Configuration

    def as_dict(self) -> dict:
        return {"node": self.node, "spare": self.spare,
                "cords_unplugged": len(self.removed), "cords_plugged": len(self.added),
                "panel_of_node": self.before.layout.panel_of(self.node),
                "spares": [{"spare": s, "panel": self.before.layout.panel_of(s), "cords": c}
                           for s, c in self.costs.items()]}


#: Most spare nodes tried: each is a full re-configuration of the panels (10^9 ran for ever).
MAX_SPARES = 1024


def plan_spare(topo: Topology, node: int, spares: int, cabling: str = "auto",
               panel_size: int = DEFAULT_PANEL_SIZE, trunks: int | None = None) -> SparePlan:
    """The spare (of ``spares``, nodes N..N+S−1) that replaces dead ``node`` with the fewest
    cords moved (module docstring)."""
    if not 0 <= node < topo.n:
        raise TopofinderError(f"{topo.expr}: node {node} is out of range 0..{topo.n - 1}")
    if not 1 <= spares <= MAX_SPARES:
        raise TopofinderError(f"--spares must be a number of spare nodes in 1..{MAX_SPARES}, "
                              f"got {spares}")
    plan = plan_patch_panel(topo, cabling, panel_size)
    total = topo.n + spares
    intact = PatchPlan(total, plan.rows, plan.kinds, panel_size)
    replaced = {}
    for s in range(topo.n, total):
        rows = intact.rows.copy()
        for col in (2, 4):
            rows[rows[:, col] == node, col] = s
        replaced[s] = PatchPlan(total, rows, intact.kinds, panel_size)
    layout = make_layout(total, topo.degree, panel_size, [intact, *replaced.values()], trunks)
    before = configure(layout, intact)
    costs, best = {}, None
    for s, plan_s in replaced.items():
        try:
            after = configure(layout, plan_s, before)
        except TopofinderError:
            costs[s] = None                      # its fibres need more trunks than are wired
            continue
        removed, added = connect_changes(before, after)
        costs[s] = len(removed) + len(added)
        if best is None or costs[s] < costs[best[0]]:
            best = (s, removed, added, after)
    if best is None:
        raise TopofinderError(f"no spare can replace node {node}: every one needs more trunk "
                              f"fibres than the layout has (give --trunks)")
    return SparePlan(node, *best[:3], costs, before, best[3])

