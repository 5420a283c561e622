"""The facts `topofinder score` reports for one topology (docs/cli.md field names)."""

from __future__ import annotations

from fractions import Fraction

from topofinder.errors import TopofinderError
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.topology import Topology
from topofinder.model.schedule import validate
from topofinder.finder.verify import build_schedule
from topofinder.scoring.allgather import bfb, bfb_bits
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.scoring.alltoall.concurrent_flow import alltoall_summary
from topofinder.model.units import exact


#: Seconds of ForestColl max-flows `score` spends before reporting a bracket instead.
FC_TIME_LIMIT = 120.0
#: Largest estimated BFB scoring time (s) `score` starts; beyond it the topology is refused.
SCORE_TIME_LIMIT = 3600.0


def bfb_seconds(topo: Topology) -> float:
    """Rough BFB scoring time on one core, from N, arcs and k distinct in-neighbours
    (calibrated on this project's bench machine; docs/performance.md): a vertex-transitive
    topology costs k + 1 breadth-first searches, others N²/64 words per slot set and level
    (topofinder.scoring.allgather.bfb_bits) or, beyond its k, a dense N×N pass per slot."""
    n, arcs = topo.n, topo.link_matrix.nnz
    k = max(int(topo.link_matrix.getnnz(axis=0).max()) if n else 0, 1)
    if topo.vertex_transitive and k >= bfb.DENSE_SLOTS:
        return 1.3e-8 * k * n * n / 64 * 2
    if topo.vertex_transitive:
        return 5e-9 * (k + 1) * (n + arcs)
    if k <= bfb_bits.MAX_SLOTS:
        return 1.3e-8 * n * n * (k + 2 ** k) / 64
    return 2e-9 * n * n * k * 8


def check_scorable(topo: Topology, limit: float = SCORE_TIME_LIMIT) -> None:
    """TopofinderError, before any work, when scoring would take longer than ``limit`` s."""
    seconds = bfb_seconds(topo)
    if seconds > limit:
        raise TopofinderError(
            f"{topo.expr}: N = {topo.n} with {topo.link_matrix.nnz} links would take about "
            f"{seconds / 3600:.1f} h to score (limit {limit / 3600:g} h); score a smaller or "
            f"sparser topology")


def describe(topo: Topology, recipe=None, alltoall: str = "bracket",
             alltoall_gap: float = 0.01, progress=None, stages=None,
             fc_time_limit: float | None = None) -> dict:
    """Structural facts and every available score of ``topo``; τ values in M/B with B the
    node bandwidth (a compute node's summed link capacity, stated as ``B``). ``tau_opt`` is
    the single-node bound (N−1)/N · B / min_v B⁻(v) ((N−1)/N on a regular homogeneous
    fabric; a self-loop counts as a port, wasted). With the ``recipe`` an expression names
    (topofinder.finder.recipe.from_expression), the schedule of that construction is built,
    replayed and reported too when it is not plain BFB. A switched fabric gets the ForestColl
    scores only (BFB and all-to-all treat every node as a GPU). ``alltoall``: "bracket"
    (certified [f, upper] of relative gap ≤ ``alltoall_gap``), "exact" or "bound";
    ``progress(iteration, lower, upper)`` follows a long bracket computation and
    ``stages(stage, done, total)`` the streamed BFB scoring and ForestColl's max-flows;
    ``fc_time_limit`` (s) caps ForestColl's max-flows (then a certified bracket)."""
    if not topo.strongly_connected:
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): no collective can complete on it")
    if not topo.has_switches:
        check_scorable(topo)
    n = topo.num_compute
    d = int(topo.out_degrees[topo.compute_nodes].max())   # ports of a compute node
    bound = Fraction(n - 1, n) * Fraction(topo.node_bandwidth, topo.min_ingress)
    scored: dict = {}
    if not topo.has_switches:       # first: its breadth-first search also gives the diameter
        scored["bfb"] = bfb_score(topo, _stage(stages, "BFB step loads"))
    info = {
        "expr": topo.expr,
        "N": n,
        "d": d,
        "diameter": topo.diameter,
        "bidirectional": bool(topo.bidirectional),
        "regular": topo.is_regular,
        "self_loops": topo.self_loops,
        "heterogeneous": topo.heterogeneous,
        "switches": int(topo.n - n),
        "B": f"{topo.node_bandwidth} {topo.capacity_unit or 'b'}",
        "moore_T_L": moore_bound_steps(n, d),
        "tau_opt": float(bound),
        "tau_opt_exact": exact(bound),
    }
    pipelined = None
    if "bfb" in scored:
        pipelined = _add_bfb(info, scored["bfb"])
    _add_forestcoll(info, topo, pipelined, _stage(stages, "ForestColl max-flows"),
                    fc_time_limit)
    if not topo.has_switches:
        _add_alltoall(info, topo, alltoall, alltoall_gap, progress)
    if recipe is not None and recipe.method != "bfb":
        _add_named_schedule(info, recipe)
    return info


def _add_named_schedule(info: dict, recipe) -> None:
    """The expression's own construction (line graph, power, catalog, ...): its replayed T_L
    and τ, which can beat BFB (e.g. the catalog's Diamond: 7/8 against BFB's 1)."""
    try:
        schedule = build_schedule(recipe)
    except TopofinderError as exc:               # the construction does not apply here
        info["schedule"] = recipe.method
        info["schedule_note"] = f"not applicable: {exc}; export uses the BFB schedule"
        return
    validate(schedule)
    tau = schedule.tau
    info["schedule"] = recipe.method
    info["schedule_T_L"] = schedule.num_steps
    info["schedule_tau"] = float(tau)
    info["schedule_tau_exact"] = exact(tau)
    info["schedule_bw_optimal"] = tau == Fraction(info["tau_opt_exact"])
    bfb = (info["T_L"], Fraction(info["tau_bfb_exact"]))
    if bfb != (schedule.num_steps, tau) and bfb[0] <= schedule.num_steps and bfb[1] <= tau:
        info["schedule_note"] = "BFB on the same topology is at least as good in T_L and tau; " \
                                "export uses the BFB schedule"


def _stage(stages, name: str):
    """A (done, total) progress callback for one named stage, or None."""
    return None if stages is None else (lambda done, total: stages(name, done, total))


def _add_bfb(info: dict, score) -> Fraction | None:
    """Optimal BFB schedule: T_L (steps) and τ (M/B, exact as "p/q"); BW-optimal iff
    τ = (N−1)/N, Moore-optimal iff T_L equals the Moore bound (paper 001 Appendix C)."""
    info["T_L"] = score.T_L
    info["tau_bfb"] = float(score.tau)
    info["tau_bfb_exact"] = exact(score.tau)
    info["bw_optimal"] = score.tau == Fraction(info["tau_opt_exact"])
    info["moore_optimal"] = score.T_L == info["moore_T_L"]
    return score.pipelined_load


def _add_forestcoll(info: dict, topo: Topology, pipelined: Fraction | None = None,
                    progress=None, time_limit: float | None = None) -> None:
    """T_B^FC (paper 002 optimality (⋆)), its bottleneck cut, and BFB τ / T_B^FC when the
    BFB fields are present (how much a tree-flow schedule could gain, docs/algorithms.md).
    ``pipelined``: BFB's barrier-free load, an upper bound that can settle T_B^FC at once;
    after ``time_limit`` s of max-flows T_B^FC is reported as a bracket (``tau_fc_optimal`` False)."""
    opt = throughput_optimum(topo, pipelined, progress=progress, time_limit=time_limit)
    info["tau_fc"] = float(opt.tau)
    info["tau_fc_exact"] = exact(opt.tau)
    info["bottleneck_cut_size"] = opt.cut_size
    info["bottleneck_cut_capacity"] = opt.cut_capacity
    info["fc_ratio"] = float(opt.ratio)
    info["fc_ratio_exact"] = exact(opt.ratio)
    info["fc_optimal_is_bound"] = opt.tau == Fraction(info["tau_opt_exact"])
    if "tau_bfb_exact" in info:
        info["bfb_fc_ratio"] = float(Fraction(info["tau_bfb_exact"]) / opt.tau)
    info["tau_fc_optimal"] = opt.settled
    if not opt.settled:
        upper = None if opt.upper is None else opt.tau / opt.ratio * opt.upper
        info["tau_fc_upper"] = None if upper is None else float(upper)
        info["tau_fc_upper_exact"] = None if upper is None else exact(upper)
        done, total = opt.sinks
        info["fc_note"] = (f"time limit {time_limit:g} s reached after {done} of {total} "
                           f"max-flow sinks: tau_fc is the best cut found (a lower bound), "
                           f"tau_fc_upper BFB's barrier-free schedule")


def _add_alltoall(info: dict, topo: Topology, mode: str = "bracket", gap: float = 0.01,
                  progress=None) -> None:
    """All-to-all concurrent flow f (link capacity 1) as a certified bracket, the Moore bound
    and the all-to-all time in M/B (paper 001 LP (3), App. A.5; docs/algorithms.md)."""
    info.update(alltoall_summary(topo, mode=mode, gap=gap, progress=progress))
