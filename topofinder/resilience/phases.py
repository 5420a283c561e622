"""Phase plans (`search --phases WORKLOAD.toml`): one fabric for every phase of a workload, or
one per phase with the reconfiguration cost counted (docs/algorithms.md "Phase plans").

A cycle runs phases i = 1..K in order, phase i performing ``share_i`` × ``operations`` of its
collective mix (allreduce of its sizes, mixed with all-to-all by its share), then starts again.
With fabric F_i in phase i a cycle costs

    Σ_i share_i·ops·obj_i(F_i) + Σ_i switch(F_i → F_{i+1})   (indices cyclic),

switch = 0 between equal fabrics, else the OCS's fixed cost, or for a patch panel the moves of
the diff F_i → F_{i+1} (topofinder.resilience.moves) times the time per move. The best
assignment over the candidates (the search's frontier) is exact by dynamic programming over
the cycle: fix F_1, relax phase by phase, close the cycle — O(K·|C|³). The single-fabric plan is
the best F for Σ_i share_i·obj_i(F). Break-even: per-phase fabrics save
ops·(Σ share_i obj_i(F) − Σ share_i obj_i(F_i)) per cycle and cost the switches S, so they pay
from ops* = S / (the saving per operation) on; stated as operations per cycle and as seconds of
communication per cycle.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from topofinder.cabling.patch_panel import plan_patch_panel
from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.inputs import read_input
from topofinder.resilience.moves import default_method, point_moves
from topofinder.workload.cost import Workload, parse_time
from topofinder.workload.rank import FrontierPoint

PHASE_KEYS = {"name", "share", "size", "alltoall_share"}


@dataclass(frozen=True)
class Phases:
    """``phases``: (name, share, Workload); ``operations``: collective calls per cycle;
    ``switch_s``: the fixed cost of one reconfiguration (OCS) or None; ``per_move_s``: the
    time per fibre moved (patch panel) or None."""

    phases: tuple[tuple[str, float, Workload], ...]
    operations: float
    switch_s: float | None
    per_move_s: float | None


def load_phases(path) -> Phases:
    """Read the phases TOML (docs/formats.md "Phase workloads")."""
    where = f"phases {path}"
    try:
        doc = tomllib.loads(read_input(path, "phases workload"))
    except tomllib.TOMLDecodeError as exc:
        raise TopofinderError(f"{where}: not TOML ({exc})") from None
    net = doc.get("network", {})
    rec = doc.get("reconfiguration", {})
    raw = doc.get("phase")
    if not isinstance(raw, list) or not raw or not isinstance(net, dict) \
            or not isinstance(rec, dict):
        raise TopofinderError(f"{where}: needs [[phase]] tables (name, share, size, "
                              "alltoall_share), optional [network] and [reconfiguration]")
    if ("cost" in rec) == ("per_move" in rec):
        raise TopofinderError(f"{where}: [reconfiguration] needs exactly one of cost = "
                              "'10ms' (OCS) or per_move = '2min' (patch panel)")
    phases = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or set(p) - PHASE_KEYS or "share" not in p:
            raise TopofinderError(f"{where}: phase {i + 1}: keys are {sorted(PHASE_KEYS)}, "
                                  "share required")
        share = p["share"]
        if isinstance(share, bool) or not isinstance(share, (int, float)) or share <= 0:
            raise TopofinderError(f"{where}: phase {i + 1}: share must be a positive number")
        w = Workload.from_strings(str(net.get("alpha", "10us")),
                                  str(net.get("bandwidth", "100Gbps")),
                                  str(p.get("size", "1MB")), p.get("alltoall_share", 0))
        phases.append((str(p.get("name", f"phase {i + 1}")), float(share), w))
    total = sum(s for _, s, _ in phases)
    phases = [(n, s / total, w) for n, s, w in phases]
    ops = doc.get("operations", 1000)
    if isinstance(ops, bool) or not isinstance(ops, (int, float)) or ops <= 0:
        raise TopofinderError(f"{where}: operations (collective calls per cycle) must be > 0")
    cost = parse_time(str(rec["cost"])) if "cost" in rec else None
    per_move = parse_time(str(rec["per_move"])) if "per_move" in rec else None
    return Phases(tuple(phases), float(ops), cost, per_move)


def objective(point: FrontierPoint, n: int, d: int, w: Workload) -> float:
    """Seconds per operation of the phase workload ``w`` on a frontier point."""
    allreduce = w.collective_time(point.allreduce_T_L, point.allreduce_tau)
    alltoall = w.alltoall_time(n, d, point.alltoall_f)
    if w.alltoall_share > 0 and alltoall is None:
        return float("inf")
    return w.objective(allreduce, alltoall)


def switch_costs(points, spec: Phases) -> list[list[float]]:
    """switch(F_a → F_b) in seconds for every ordered pair of candidates."""
    k = len(points)
    cost = [[0.0] * k for _ in range(k)]
    plans = {}
    for a in range(k):
        for b in range(k):
            if a == b:
                continue
            if spec.switch_s is not None:
                cost[a][b] = spec.switch_s
                continue
            if a not in plans:
                plans[a] = plan_patch_panel(load_topology(points[a].expr))
            moves, _ = point_moves(plans[a], points[b].expr,
                                   default_method(plans[a].n))
            cost[a][b] = moves * spec.per_move_s
    return cost


def best_cycle(per_op: list[list[float]], switch: list[list[float]], ops: float,
               shares: list[float]) -> tuple[float, list[int]]:
    """Least cycle cost and its assignment (one candidate per phase), exact by DP."""
    k, m = len(shares), len(per_op[0])
    best, plan = float("inf"), []
    for first in range(m):
        cost = {first: (shares[0] * ops * per_op[0][first], [first])}
        for i in range(1, k):
            cost = {c: min(((v + switch[p][c] + shares[i] * ops * per_op[i][c], path + [c])
                            for p, (v, path) in cost.items()), key=lambda t: t[0])
                    for c in range(m)}
        for last, (v, path) in cost.items():
            total = v + (switch[last][first] if k > 1 else 0.0)
            if total < best:
                best, plan = total, path
    return best, plan


def phase_plan(points, n: int, d: int, spec: Phases) -> dict:
    """The `phases` section of the search document (module doc)."""
    shares = [s for _, s, _ in spec.phases]
    per_op = [[objective(p, n, d, w) for p in points] for _, _, w in spec.phases]
    switch = switch_costs(points, spec)
    single = min(range(len(points)),
                 key=lambda c: sum(s * per_op[i][c] for i, s in enumerate(shares)))
    single_rate = sum(s * per_op[i][single] for i, s in enumerate(shares))
    total, assign = best_cycle(per_op, switch, spec.operations, shares)
    switches = sum(switch[assign[i]][assign[(i + 1) % len(assign)]]
                   for i in range(len(assign))) if len(assign) > 1 else 0.0
    rate = sum(s * per_op[i][assign[i]] for i, s in enumerate(shares))
    saving = single_rate - rate
    even = switches / saving if saving > 0 else None
    return {
        "phases": [{"name": nm, "share": s, "workload": w.describe()}
                   for nm, s, w in spec.phases],
        "operations": spec.operations,
        "switch": ({"cost_s": spec.switch_s} if spec.switch_s is not None
                   else {"per_move_s": spec.per_move_s}),
        "single": {"expr": points[single].expr, "cycle_s": spec.operations * single_rate},
        "per_phase": {"exprs": [points[c].expr for c in assign], "cycle_s": total,
                      "switch_s": switches},
        "choice": "per_phase" if total < spec.operations * single_rate else "single",
        "break_even_operations": even,
        "break_even_s": None if even is None else even * rate,
    }
