"""The `search` document as text: the frontier table with the recommendation marked, the
MoE iteration split and the baselines' speedups."""

from __future__ import annotations

from fractions import Fraction

from topofinder.cli.common import table
from topofinder.api import Collective


#: The frontiers a point can be on (FrontierPoint.frontiers), as the table abbreviates them.
_SHORT = {Collective.ALLGATHER: "ag", Collective.ALLREDUCE: "ar", Collective.ALLTOALL: "a2a",
          Collective.BROADCAST: "bc", "objective": "mix"}


def format_frontier(result: dict) -> str:
    """The frontier as an aligned table with the recommendation marked."""
    rows = [("", "expression", "T_L", "tau", "tau_fc", "diam", "flags", Collective.ALLREDUCE,
             "allreduce async", "all-to-all", "schedule", "verified", "frontier")]
    for i, p in enumerate(result["frontier"]):
        flags = ("B" if p["bw_optimal"] else "-") + ("M" if p["moore_optimal"] else "-") + (
            "D" if p["bidirectional"] else "-")
        fc = "" if p["tau_fc"] is None else f"{p['tau_fc']:.4f}"
        rows.append(("*" if i == result["recommended"] else "", p["expr"], str(p["T_L"]),
                     f"{p['tau']:.4f}", fc, "" if p["diameter"] is None else str(p["diameter"]),
                     flags, _us(p["allreduce_time_s"]), _us(p.get("allreduce_async_s")),
                     _us(p["alltoall_time_s"]), p["schedule"], _verified(p),
                     "+".join(_SHORT.get(f, f) for f in p.get("frontiers", ()))))
    if any(Collective.BROADCAST in p for p in result["frontier"]):
        rows[0] += ("broadcast TP", Collective.BROADCAST)
        for i, p in enumerate(result["frontier"]):
            b = p[Collective.BROADCAST]
            rows[i + 1] += (b["TP_exact"] or "", _us(b["time_s"]))
    if any(p.get("robust") for p in result["frontier"]):
        rows[0] += ("worst failure",)
        for i, p in enumerate(result["frontier"]):
            r = p["robust"]
            rows[i + 1] += ("disconnects" if r.get("disconnects") else
                            f"{_us(r['worst_allreduce_s'])} ({r['worst_failure']})",)
    if "moves" in result:
        rows[0] += ("moves", "moves >=", "(obj, moves)")
        pareto = set(result["moves"]["frontier"])
        for i, p in enumerate(result["frontier"]):
            rows[i + 1] += (str(p["moves"]), str(p["moves_lower_bound"]),
                            "P" if i in pareto else "")
    if "hierarchy" in result:
        rows[0] += ("GPU algbw",)
        for i, p in enumerate(result["frontier"]):
            mark = " <" if i == result["hierarchy"]["recommended"] else ""
            rows[i + 1] += (f"{p['hier_algbw_GBps']:.2f} GB/s{mark}",)
    lines = [f"N = {result['N']}, d = {result['d']}: {len(result['frontier'])} Pareto-efficient "
             f"topologies (T_L in steps, tau and tau_fc in M/B)"]
    if "hierarchy" in result:
        h = result["hierarchy"]
        lines.append(f"servers of {h['gpus_per_node']} GPUs, intra {h['intra']}: GPU algbw = "
                     "ForestColl's allgather optimum M/T over all GPUs (< marks the best)")
    lines += table(rows)
    best = result["frontier"][result["recommended"]]
    lines.append("flags: B = BW-optimal, M = Moore-optimal, D = bidirectional (duplex); "
                 "allreduce: lock-step T_L*alpha + tau*M/B, async: dependency-driven "
                 f"(ranked by {result['workload'].get('price', 'lockstep')})")
    for p in result["frontier"]:
        if p.get("certificate"):
            lines.append(f"verified by construction: {p['expr']}: operands replayed in full "
                         f"({', '.join(p['certificate']['bases'])}), preconditions checked, "
                         f"{p['certificate']['sample']} receivers replayed exactly (seed "
                         f"{p['certificate']['seed']}): {p['certificate']['detection']}")
    lines.append("frontier: the point is Pareto-optimal for " + ", ".join(
        f"{short} = {'the workload mix' if name == 'objective' else name}"
        for name, short in _SHORT.items()
        if any(name in p.get("frontiers", ()) for p in result["frontier"])))
    if not all(p["verified"] or p.get("cabled") for p in result["frontier"]):
        lines.append("note: schedules too large to replay in memory were not built; their T_L "
                     "and tau are the exact BFB scores / theorem values (verified: false)")
    skipped = result.get("skipped_bases", [])
    if skipped:
        at = [b["expr"] for b in skipped if b["N"] == result["N"]]
        lines.append(f"note: {len(skipped)} bases without a vertex-transitive symmetry were not "
                     f"scored, their exact BFB score costing O(N²·d) beyond the limit"
                     + (f" ({', '.join(at)} at this size)" if at else ""))
    for p in result.get("skipped_points", []):
        lines.append(f"left out: {p['expr']} (predicted T_L {p['T_L']}, tau "
                     f"{float(Fraction(p['tau_exact'])):.4f}): {p['reason']}")
    lines.append(f"recommended (*): {best['expr']} — allreduce "
                 f"{_us(best['allreduce_time_s'])} for the workload")
    if "moves" in result:
        lines += _format_moves(result)
    if "phases" in result:
        lines += _format_phases(result["phases"])
    if "moe" in result:
        lines += _format_iterations(result)
    if result.get("baselines"):
        lines += _format_baselines(result)
    return "\n".join(lines)


def _format_moves(result: dict) -> list[str]:
    """The (objective, moves) frontier as "within K moves: best point" lines."""
    m, pts = result["moves"], result["frontier"]
    lines = [f"moves from {m['from']} ({m['rows']} rows as cabled; relabelling by "
             f"{m['method']}: 'export EXPR --what patch-panel --diff {m['from']} --diff-method "
             f"{m['method']}' unplugs exactly 'moves' rows; 'moves >=' holds for any "
             f"relabelling)" + ("" if m["max_moves"] is None else
                                f"; only points within {m['max_moves']} moves")]
    for i in m["frontier"]:
        p = pts[i]
        lines.append(f"  within {p['moves']} moves: {p['expr']}"
                     + (" (as cabled)" if p.get("cabled") else "")
                     + f" — objective {_us(p['objective_s'])}")
    return lines


def _format_phases(ph: dict) -> list[str]:
    """One fabric for all phases against one per phase, and the break-even."""
    names = ", ".join(f"{p['name']} ({p['share']:.0%})" for p in ph["phases"])
    per = ph["per_phase"]
    even = ph["break_even_operations"]
    return ["", f"phases {names}, {ph['operations']:g} operations per cycle:",
            f"  one fabric: {ph['single']['expr']} — {_ms(ph['single']['cycle_s'])} per cycle",
            f"  one per phase: {' -> '.join(per['exprs'])} — {_ms(per['cycle_s'])} per cycle "
            f"(switching {_ms(per['switch_s'])})",
            f"  answer: {'one per phase' if ph['choice'] == 'per_phase' else 'one fabric'}; "
            + ("per-phase fabrics never pay (no saving)" if even is None else
               f"per-phase fabrics pay from {even:.4g} operations per cycle "
               f"({_ms(ph['break_even_s'])} of communication) on")]


def _verified(p: dict) -> str:
    """How a point was verified: full, symmetry, construction (k receivers sampled), no."""
    how = p.get("verified_by") or "no"
    cert = p.get("certificate")
    return f"{how} (k={cert['sample']})" if cert else how


def _ms(x) -> str:
    return "" if x is None else f"{x * 1e3:.2f} ms"


def _us(x) -> str:
    return "" if x is None else f"{x * 1e6:.1f} us"


def _speed(x) -> str:
    return "" if x is None else f"{x:.2f}x"


def _split(it: dict) -> tuple[str, ...]:
    return (_ms(it["compute_s"]), _ms(it["allreduce_unoverlapped_s"]), _ms(it["alltoall_s"]),
            _ms(it["iteration_s"]))


def _format_iterations(result: dict) -> list[str]:
    """The MoE iteration split of every frontier point (paper 001 Fig. 9)."""
    m = result["moe"]
    rows = [("", "expression", "compute", "allreduce (unoverlapped)", "all-to-all",
             "iteration")]
    for i, p in enumerate(result["frontier"]):
        rows.append(("*" if i == result["recommended"] else "", p["expr"])
                    + _split(p["iteration"]))
    for b in result.get("baselines", []):
        if b.get("iteration"):
            rows.append(("b", f"{b['name']}: {b['expr']}") + _split(b["iteration"]))
    head = (f"MoE iteration ({m['file']}): {len(m['buckets_bytes'])} allreduce bucket(s)"
            f"{' overlapping backward' if m['overlap'] else ''}, {m['alltoall_count']} "
            f"all-to-all(s) of {m['alltoall_bytes'] / 2 ** 20:g} MB per node; "
            "* recommended, b baseline")
    it = result["frontier"][result["recommended"]]["iteration"]
    tail = (f"recommended (*) for the MoE iteration: "
            f"{result['frontier'][result['recommended']]['expr']} — {_ms(it['iteration_s'])} "
            f"= compute {_ms(it['compute_s'])} + unoverlapped allreduce "
            f"{_ms(it['allreduce_unoverlapped_s'])} + all-to-all {_ms(it['alltoall_s'])}")
    return ["", head] + table(rows) + [tail]


def _format_baselines(result: dict) -> list[str]:
    """Each baseline's times and how much faster the recommendation is (paper 001 Fig. 7)."""
    moe = "moe" in result
    rows = [("baseline", "expression", "T_L", "tau", "schedule", Collective.ALLREDUCE,
             "allreduce async", "all-to-all", "speedup allreduce", "speedup async",
             "speedup all-to-all")
            + (("speedup iteration",) if moe else ())]
    notes = []
    for b in result["baselines"]:
        if b["expr"] is None:
            notes.append(f"{b['name']}: {b['note']}")
            continue
        sp = b["speedup"]
        rows.append((b["name"], b["expr"], str(b["T_L"]), f"{float(Fraction(b['tau'])):.4f}",
                     b["schedule"], _us(b["allreduce_time_s"]), _us(b.get("allreduce_async_s")),
                     _us(b["alltoall_time_s"]), _speed(sp[Collective.ALLREDUCE]),
                     _speed(sp.get("allreduce_async")), _speed(sp[Collective.ALLTOALL]))
                    + ((_speed(sp["objective"]),) if moe else ()))
        if b["note"]:
            notes.append(f"{b['name']}: {b['note']}")
    lines = ["", "baselines at the same N and d (speedup = baseline time / recommended time; "
                 "all-to-all at the baseline's upper f, so a lower bound)"]
    if len(rows) > 1:
        lines += table(rows)
    return lines + notes
