"""The facts `topofinder score` reports for one topology (DESIGN §12 field names)."""

from __future__ import annotations

from fractions import Fraction

from topofinder.errors import TopofinderError
from topofinder.topology import Topology


def moore_bound_steps(n: int, d: int) -> int:
    """T_L*(N, d) in steps: min{k : Σ_{i=0..k} d^i ≥ N} (the Moore bound, DESIGN §1)."""
    if d < 1:
        raise TopofinderError(f"the Moore bound needs degree d >= 1, got {d}")
    if d == 1:
        return n - 1
    k, reach, power = 0, 1, 1
    while reach < n:
        k += 1
        power *= d
        reach += power
    return k


def describe(topo: Topology, recipe=None, alltoall: str = "bracket",
             alltoall_gap: float = 0.01, progress=None) -> dict:
    """Structural facts and every available score of ``topo``; τ values in M/B. With the
    ``recipe`` an expression names (topofinder.recipe.from_expression), the schedule of that
    construction is built, replayed and reported too when it is not plain BFB. ``alltoall``:
    "bracket" (certified [f, upper] of relative gap ≤ ``alltoall_gap``), "exact" or "bound";
    ``progress(iteration, lower, upper)`` follows a long bracket computation."""
    n, d = topo.n, topo.degree
    info = {
        "expr": topo.expr,
        "N": n,
        "d": d,
        "diameter": topo.diameter,
        "bidirectional": bool(topo.bidirectional),
        "regular": topo.is_regular,
        "self_loops": topo.self_loops,
        "heterogeneous": topo.heterogeneous,
        "moore_T_L": moore_bound_steps(n, d),
        "tau_opt": (n - 1) / n,
        "tau_opt_exact": f"{n - 1}/{n}",
    }
    _add_bfb(info, topo)
    _add_forestcoll(info, topo)
    _add_alltoall(info, topo, alltoall, alltoall_gap, progress)
    if recipe is not None and recipe.method != "bfb":
        _add_named_schedule(info, recipe)
    return info


def _add_named_schedule(info: dict, recipe) -> None:
    """The expression's own construction (line graph, power, catalog, ...): its replayed T_L
    and τ, which can beat BFB (e.g. the catalog's Diamond: 7/8 against BFB's 1)."""
    from topofinder.schedule import validate
    from topofinder.verify import build_schedule

    schedule = build_schedule(recipe)
    validate(schedule)
    tau = schedule.tau
    info["schedule"] = recipe.method
    info["schedule_T_L"] = schedule.num_steps
    info["schedule_tau"] = float(tau)
    info["schedule_tau_exact"] = f"{tau.numerator}/{tau.denominator}"
    info["schedule_bw_optimal"] = tau == Fraction(info["N"] - 1, info["N"])


def _add_bfb(info: dict, topo: Topology) -> None:
    """Optimal BFB schedule: T_L (steps) and τ (M/B, exact as "p/q"); BW-optimal iff
    τ = (N−1)/N, Moore-optimal iff T_L equals the Moore bound (paper 001 Appendix C)."""
    from topofinder.bfb import bfb_score

    score = bfb_score(topo)
    info["T_L"] = score.T_L
    info["tau_bfb"] = float(score.tau)
    info["tau_bfb_exact"] = f"{score.tau.numerator}/{score.tau.denominator}"
    info["bw_optimal"] = score.bw_optimal
    info["moore_optimal"] = score.T_L == info["moore_T_L"]


def _add_forestcoll(info: dict, topo: Topology) -> None:
    """T_B^FC (paper 002 optimality (⋆)), its bottleneck cut, and BFB τ / T_B^FC when the
    BFB fields are present (how much a tree-flow schedule could gain, DESIGN §7)."""
    from fractions import Fraction

    from topofinder.forestcoll import throughput_optimum

    opt = throughput_optimum(topo)
    info["tau_fc"] = float(opt.tau)
    info["tau_fc_exact"] = f"{opt.tau.numerator}/{opt.tau.denominator}"
    info["bottleneck_cut_size"] = opt.cut_size
    info["bottleneck_cut_capacity"] = opt.cut_capacity
    if "tau_bfb_exact" in info:
        info["bfb_fc_ratio"] = float(Fraction(info["tau_bfb_exact"]) / opt.tau)


def _add_alltoall(info: dict, topo: Topology, mode: str = "bracket", gap: float = 0.01,
                  progress=None) -> None:
    """All-to-all concurrent flow f (link capacity 1) as a certified bracket, the Moore bound
    and the all-to-all time in M/B (paper 001 LP (3), App. A.5)."""
    from topofinder.alltoall import alltoall_summary

    info.update(alltoall_summary(topo, mode=mode, gap=gap, progress=progress))
