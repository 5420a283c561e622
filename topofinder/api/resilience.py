"""Failures (docs/algorithms.md "Failures"): the degraded fabric a failure leaves, the survey of
every single (and the worst paired) fibre and node failure by automorphism orbits, bypass
re-patching of a dead node with its patch-panel diff, and which spare node replaces it.

>>> d = fail("C(16,{1,6})")
>>> d["single_links"]["orbits"], d["single_nodes"]["worst"]["tau_exact"]
(2, '56/45')
"""

from __future__ import annotations

from topofinder.api.topology import Source, load
from topofinder.cabling.patch_panel import PlanDiff
from topofinder.resilience.cabling import failure_cabling
from topofinder.resilience.repatch import repatch
from topofinder.resilience.spares import SparePlan, plan_spare
from topofinder.resilience.survey import PAIR_BUDGET, survey
from topofinder.workload.cost import Workload


def failed(source: str, fibres=(), nodes=()) -> str:
    """The expression of ``source`` after failing ``fibres`` ("u->w", "u<->w") and ``nodes``
    (intact numbers): ``Fail(EXPR; ...)``, loadable like any expression.

    >>> failed("C(16,{1,6})", ["0->1"], [5])
    'Fail(C(16,{1,6}); 0->1, 5)'
    >>> load(failed("C(16,{1,6})", nodes=[5])).labels[5]
    '6'
    """
    items = [str(f) for f in fibres] + [str(int(v)) for v in nodes]
    if not items:
        return source
    expr = f"Fail({source}; {', '.join(items)})"
    load(expr)          # the failure must name existing elements and keep the fabric connected
    return expr


def fail(source: Source, workload: Workload | None = None, *, links: int = 1, nodes: int = 1,
         cabling: str = "auto", alltoall: bool = False, pair_budget: int = PAIR_BUDGET,
         progress=None) -> dict:
    """The `topofinder fail --json` document: every single fibre (a duplex cable when cabled
    duplex) and node failure, one per automorphism orbit, scored by BFB T_L and τ, τ_fc and
    the allreduce time; worst / median / best regression and the critical elements; with
    ``links=2`` / ``nodes=2`` the worst pair (exhaustive by orbits up to ``pair_budget``
    candidates, sampled beyond). docs/algorithms.md "Failures"."""
    return survey(load(source), workload, links, nodes, cabling, alltoall, pair_budget,
                  progress)


def bypass(source: Source, node: int, workload: Workload | None = None, *,
           cabling: str = "auto", panel_size: int = 1008) -> tuple[dict, PlanDiff]:
    """Bypass re-patching of dead ``node``: the chosen matching of its in- to its
    out-neighbours (exact over all d! for d ≤ 6) with the re-patched, do-nothing and intact
    scores, its ``expr`` (export its schedule like any expression), and the patch-panel diff
    from the intact plan (``.write_csv``)."""
    topo = load(source)
    chosen = repatch(topo, node, workload)
    doc = chosen.as_dict()
    doc["expr"] = f"Fail({topo.expr}; {chosen.failure})"
    return doc, failure_cabling(topo, chosen.failure, cabling, panel_size)


def spare(source: Source, node: int, spares: int, *, cabling: str = "auto",
          panel_size: int = 1008, trunks: int | None = None) -> SparePlan:
    """Which of ``spares`` spare nodes (N..N+S−1 on the fixed panel layout of `export --what
    cross-connects`) replaces dead ``node`` with the fewest patch cords moved; ``.as_dict()``,
    ``.removed`` / ``.added`` cross-connects (topofinder.resilience.spares)."""
    return plan_spare(load(source), node, spares, cabling, panel_size, trunks)
