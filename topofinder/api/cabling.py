"""Cabling: the patch-panel plan of a topology, the fibres to move from an old plan (with
the node relabelling that keeps the most fibres), the cross-connects of a fixed layout, and
the check that a schedule only sends on cabled fibres (docs/cli.md, export and check)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from topofinder.api.topology import Source, load
from topofinder.errors import TopofinderError
from topofinder.cabling.check import CheckReport, apply_diff, check, read_sends
from topofinder.cabling.ocs import (
    netconf_text, padded, parse_ocs, ports_per_node, sonic_text,
)
from topofinder.cabling.patch_panel import (
    PatchPlan, PlanDiff, diff_plans, parse_plan, plan_patch_panel,
)
from topofinder.compute.output import write_text
from topofinder.model.inputs import read_input
from topofinder.cabling.physical import (
    Configuration, Layout, configure, connect_changes, make_layout, write_changes,
)
from topofinder.model.failures import split_expression
from topofinder.resilience.cabling import degraded_plan
from topofinder.resilience.waves import WavePlan, plan_waves
from topofinder.workload.cost import Workload

Plan = str | os.PathLike | PatchPlan


def _plan(plan: Plan, n: int | None = None) -> PatchPlan:
    """A plan: given, or read from a patch-panel CSV or an OCS table (sonic-ocs, netconf);
    ``n``: at least that many nodes (growth: nodes without fibres yet)."""
    if isinstance(plan, PatchPlan):
        return plan
    text = read_input(plan, "patch-panel plan")
    ocs = parse_ocs(text, os.fspath(plan))
    if ocs is None:
        return parse_plan(text, n)
    return padded(ocs, n)


def ocs_tables(source: Source, fmt: str, *, old: Plan | None = None,
               waves: int | None = None, max_down: int | None = None, wave: int | None = None,
               workload: Workload | None = None, cabling: str = "auto",
               panel_size: int = 1008, method: str = "exact",
               undirected: bool | None = None, path: str | os.PathLike | None = None) -> str:
    """`export --what cross-connects --format sonic-ocs|netconf` (topofinder.cabling.ocs):
    the topology's cross-connects; with ``old`` the switch taken from the old plan to the
    new one (with ``waves``/``max_down`` wave by wave; ``wave``: the state after that
    wave). sonic-ocs is one CONFIG_DB state (the last, or ``wave``'s); netconf every step.
    Returns the text, also written to ``path`` when given ("-": standard output)."""
    if fmt not in ("sonic-ocs", "netconf"):
        raise TopofinderError(f"cross-connects format {fmt!r}: accepted are csv, sonic-ocs, "
                              "netconf")
    if old is None:
        states = [export_patch_panel(source, cabling, panel_size, undirected=undirected)]
    elif waves is None and max_down is None:
        diff = diff_plans(_plan(old), load(source, undirected), cabling, panel_size,
                          method=method)
        states = [diff.old, diff.new]
    else:
        plan = wave_plan(old, source, waves, max_down, workload, cabling=cabling,
                         panel_size=panel_size, method=method, undirected=undirected,
                         stats=False)
        states = [plan.plan_after(i) for i in range(plan.waves + 1)]
    if wave is not None:
        if not 0 <= wave < len(states):
            raise TopofinderError(f"--wave {wave}: the plan has waves 1..{len(states) - 1}")
        states = states[:wave + 1]
    d = ports_per_node(states)
    text = sonic_text(states[-1], d) if fmt == "sonic-ocs" else netconf_text(states, d)
    if path is not None:
        write_text(path, text)
    return text


def export_patch_panel(source: Source, cabling: str = "auto", panel_size: int = 1008, *,
                       undirected: bool | None = None) -> PatchPlan:
    """The patch-panel cabling plan of a topology (write it with ``.write_csv(path)``):
    ``cabling`` simplex fibres, duplex cables, or auto (duplex when bidirectional);
    ``panel_size`` ports per panel, two per connection. A degraded fabric ``Fail(EXPR; ...)``
    gets EXPR's plan without the dead connections, in survivor numbering with node names
    (topofinder.resilience.cabling)."""
    failed = split_expression(source) if isinstance(source, str) else None
    if failed is not None:
        return degraded_plan(load(failed[0], undirected), failed[1], cabling, panel_size)
    return plan_patch_panel(load(source, undirected), cabling, panel_size)


def diff_patch_panel(old: Plan, source: Source, cabling: str = "auto", panel_size: int = 1008,
                     *, method: str = "exact", undirected: bool | None = None) -> PlanDiff:
    """The fibres to move from the plan ``old`` (CSV path or PatchPlan) to a topology, its
    nodes relabelled to keep fibres (``method`` exact: an isomorphism when there is one,
    else a QAP search; heuristic: iterated linear assignment only). ``.write_csv`` writes the
    remove/add rows, ``.write_mapping`` the relabelling :func:`relabel` reads; ``.moves``,
    ``.isomorphic`` (None: undecided, install pynauty) and ``.method`` summarise it."""
    topo = load(source, undirected)
    return diff_plans(_plan(old, topo.n), topo, cabling, panel_size, method=method)


def wave_plan(old: Plan, source: Source, waves: int | None = None,
              max_down: int | None = None, workload: Workload | None = None, *,
              cabling: str = "auto", panel_size: int = 1008, method: str = "exact",
              undirected: bool | None = None, stats: bool = True) -> WavePlan:
    """The diff from ``old`` to a topology (:func:`diff_patch_panel`) split into ``waves``
    waves (or waves of at most ``max_down`` unplugged rows) that keep the fabric strongly
    connected, ordered to lower the worst allreduce time while a wave is out
    (topofinder.resilience.waves): ``.write_csv`` writes the diff with a ``wave`` column,
    ``.plan_after(i)`` the plan as cabled after wave i, ``.stats`` each wave's scores."""
    diff = diff_plans(_plan(old), load(source, undirected), cabling, panel_size, method=method)
    return plan_waves(diff, waves, max_down, workload, stats=stats)


@dataclass(frozen=True)
class CrossConnects:
    """A fixed layout (which node port end and trunk end sits on which panel port) and the
    cross-connects on it: of the plan (``configuration``), or after a diff the cords to
    unplug (``removed``) and plug (``added``) to go from the old plan to the new one."""

    layout: Layout
    configuration: Configuration
    removed: list | None = None
    added: list | None = None

    def write_csv(self, out) -> None:
        """The configuration CSV, or after a diff ``action,`` + the cross-connect columns."""
        if self.removed is None:
            self.configuration.write_csv(out)
        else:
            write_changes(self.removed, self.added, out)


def cross_connects(plan: PatchPlan | PlanDiff, panel_size: int = 1008,
                   trunks: int | None = None, degree: int = 0) -> CrossConnects:
    """The cross-connects of ``plan`` (or of a diff's old and new plans, fibres kept on their
    trunks) on the smallest fixed layout for both: ``trunks`` fibres per ordered panel pair
    (default: the fewest the plans need); the layout gives every node max(``degree``, the
    highest port the plans use + 1) ports."""
    if trunks is not None and trunks < 0:
        raise TopofinderError("cross-connects: --trunks must be >= 0")
    plans = [plan.old, plan.new] if isinstance(plan, PlanDiff) else [plan]
    if isinstance(plan, PlanDiff) and plan.topology is not None:
        degree = max(degree, plan.topology.degree)
    d = max([degree] + [int(p.rows[:, [3, 5]].max()) + 1 for p in plans if p.num_rows])
    layout = make_layout(plans[0].n, d, panel_size, plans, trunks)
    first = configure(layout, plans[0])
    if len(plans) == 1:
        return CrossConnects(layout, first)
    removed, added = connect_changes(first, configure(layout, plans[1], previous=first))
    return CrossConnects(layout, first, removed, added)


def export_cross_connects(source: Source, panel_size: int = 1008, trunks: int | None = None,
                          *, cabling: str = "auto", old: Plan | None = None,
                          method: str = "exact", undirected: bool | None = None
                          ) -> tuple[CrossConnects, PlanDiff | None]:
    """`export --what cross-connects`: the topology's plan (or, with ``old``, its diff from
    the old plan, as :func:`diff_patch_panel`) on a fixed layout (:func:`cross_connects`,
    nodes of at least the topology's degree ports). Returns the cross-connects and the diff."""
    topo = load(source, undirected)
    if old is None:
        return cross_connects(plan_patch_panel(topo, cabling, panel_size), panel_size, trunks,
                              topo.degree), None
    diff = diff_plans(_plan(old), topo, cabling, panel_size, method=method)
    return cross_connects(diff, panel_size, trunks, topo.degree), diff


def check_schedule(plan: Plan, schedule: str | os.PathLike,
                   diff: str | os.PathLike | None = None) -> CheckReport:
    """Check that every send u → w of a schedule file (step or tree JSON, MSCCL XML, .npz)
    rides a fibre the plan cables from u to w, k fibres for a k-fold multi-arc; ``diff``: a
    diff CSV applied to the plan first. Raises TopofinderError at the first offending send;
    the report counts ``sends``, node ``pairs`` and ``fibres`` directions (and a ``note``)."""
    patch = _plan(plan)
    if diff is not None:
        patch = apply_diff(patch, diff)
    return check(patch, read_sends(schedule))
