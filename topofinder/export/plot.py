"""Frontier plot of a search result: T_L (steps of α) against τ (T_B in M/B), docs/algorithms.md,
docs/cli.md.

Drawn with matplotlib's object API on an Agg canvas (headless, no pyplot state). Bounds: the
Moore bound T_L* = min{k : Σ_{i=0..k} d^i ≥ N} (vertical line) and the bandwidth optimum
τ* = (N−1)/N (horizontal line), paper 001 §3.
"""

from __future__ import annotations

from pathlib import Path

from topofinder.compute.output import atomic_output
from topofinder.errors import TopofinderError
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.collectives import Collective

FORMATS = ("png", "svg")


def _points(result: dict) -> tuple[int, int, list[dict], int | None]:
    try:
        n, d = int(result["N"]), int(result["d"])
        frontier = list(result["frontier"])
        pts = [{"expr": str(p["expr"]), "T_L": int(p["T_L"]), "tau": float(p["tau"]),
                "tau_fc": None if p.get("tau_fc") is None else float(p["tau_fc"])}
               for p in frontier]
    except (KeyError, TypeError, ValueError) as exc:
        raise TopofinderError("plot: the search result needs N, d and a frontier of points "
                              f"with expr, T_L and tau ({exc!r} was wrong)") from None
    rec = result.get("recommended")
    if rec is not None and not (isinstance(rec, int) and 0 <= rec < len(pts)):
        raise TopofinderError(f"plot: recommended = {rec!r} is not an index into the frontier "
                              f"(0..{len(pts) - 1})")
    return n, d, pts, rec


def plot_frontier(search_result: dict, path: str) -> None:
    """Draw the frontier of a ``search --json`` document to ``path`` (.png or .svg): labelled
    points (T_L in steps, τ in M/B), T_B^FC markers where given, the Moore and bandwidth
    bounds, and the recommended point highlighted."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise TopofinderError(f"plot: {path!r} has extension '.{fmt}'; accepted are "
                              + ", ".join("." + f for f in FORMATS))
    n, d, pts, rec = _points(search_result)
    bases = [b for b in search_result.get("baselines") or [] if isinstance(b, dict)
             and b.get("expr") and isinstance(b.get("allreduce_time_s"), (int, float))]
    side = bool(bases) and rec is not None
    robust = [p for p in search_result["frontier"] if isinstance(p.get("robust"), dict)]
    cols = 1 + side + bool(robust)
    fig = Figure(figsize=(8 + 6 * (cols - 1), 5.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, cols, 1)
    if side:
        _baseline_panel(fig.add_subplot(1, cols, 2), search_result, bases)
    if robust:
        _degraded_panel(fig.add_subplot(1, cols, cols), [
            (p["expr"], p["robust"].get("intact_bfb_allreduce_s"),
             {"worst single failure": p["robust"].get("worst_allreduce_s")})
            for p in robust], "intact vs worst single failure (search --robust)")
    moore, tau_opt = moore_bound_steps(n, d), (n - 1) / n
    ax.axvline(moore, color="tab:gray", ls="--", lw=1, label=f"Moore bound T_L* = {moore}")
    ax.axhline(tau_opt, color="tab:green", ls=":", lw=1.2,
               label=f"BW optimum (N−1)/N = {tau_opt:.5f}")
    if pts:
        order = sorted(range(len(pts)), key=lambda i: (pts[i]["T_L"], pts[i]["tau"]))
        xs = [pts[i]["T_L"] for i in order]
        ys = [pts[i]["tau"] for i in order]
        ax.step(xs, ys, where="post", color="tab:blue", alpha=0.35, lw=1)
        ax.scatter(xs, ys, color="tab:blue", zorder=3, label="frontier (BFB / expansion τ)")
        fc = [(p["T_L"], p["tau_fc"]) for p in pts if p["tau_fc"] is not None]
        if fc:
            ax.scatter(*zip(*fc), marker="_", s=120, color="tab:orange", zorder=3,
                       label="T_B^FC (tree-flow optimum)")
        mid = (min(xs) + max(xs)) / 2
        for rank, i in enumerate(order):
            p = pts[i]
            right = p["T_L"] > mid and len(xs) > 1       # label inwards, not off the axes
            ax.annotate(p["expr"], (p["T_L"], p["tau"]), textcoords="offset points",
                        xytext=(-7 if right else 7, 5 if rank % 2 == 0 else -11),
                        ha="right" if right else "left", fontsize=8)
        if rec is not None:
            r = pts[rec]
            t = frontier_time(search_result, rec)
            ax.scatter([r["T_L"]], [r["tau"]], marker="*", s=320, color="tab:red",
                       edgecolor="black", zorder=4,
                       label=f"recommended: {r['expr']}" + (f" (allreduce {t})" if t else ""))
    _excess_scale(ax, n, [p["tau"] for p in pts] + [p["tau_fc"] for p in pts
                                                      if p["tau_fc"] is not None])
    ax.set_xlabel("T_L (steps of α)")
    ax.set_ylabel("τ = T_B (units of M/B; log scale of the excess over (N−1)/N)")
    ax.set_title(_title(search_result, n, d))
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.15)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    with rc_context({"svg.fonttype": "none"}), atomic_output(path, "wb") as fh:
        fig.savefig(fh, format=fmt)                    # SVG text stays text (editable)


def _baseline_panel(ax, result: dict, bases: list[dict]) -> None:
    """Allreduce and all-to-all times (log scale) of the recommendation and each baseline
    (paper 001 Fig. 7), each baseline bar labelled with the recommendation's speedup."""
    best = result["frontier"][result["recommended"]]
    rows = [("recommended\n" + str(best["expr"]), best, None)]
    rows += [(f"{b['name']}\n{b['expr']}", b, b.get("speedup") or {}) for b in bases]
    kinds = [("allreduce_time_s", Collective.ALLREDUCE, Collective.ALLREDUCE, "tab:blue"),
             ("alltoall_time_s", "all-to-all", Collective.ALLTOALL, "tab:purple")]
    if "moe" in result:
        kinds.append(("iteration", "MoE iteration", "objective", "tab:gray"))
    height = 0.8 / len(kinds)
    for k, (key, label, speed_key, colour) in enumerate(kinds):
        for i, (_, entry, speed) in enumerate(rows):
            value = entry.get(key)
            if key == "iteration":
                value = (value or {}).get("iteration_s")
            if not isinstance(value, (int, float)) or value <= 0:
                continue
            y = i + (k - (len(kinds) - 1) / 2) * height
            ax.barh(y, value * 1e6, height=height, color=colour,
                    label=label if i == 0 else None)
            x = speed.get(speed_key) if speed else None
            if isinstance(x, (int, float)):
                ax.annotate(f"{x:.1f}×", (value * 1e6, y), textcoords="offset points",
                            xytext=(3, -3), fontsize=7)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi * 2.5)                             # room for the speedup labels
    ax.set_xlabel("time (µs, log scale); labels: baseline / recommended")
    ax.set_title("recommendation against the baselines at the same N, d")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def _degraded_panel(ax, rows, title: str) -> None:
    """Allreduce time (µs) of each topology intact and degraded: ``rows`` of (label, intact
    seconds, {kind: degraded seconds or None (disconnects)}), one group of bars per row."""
    kinds = sorted({k for _, _, deg in rows for k in deg})
    colours = ["tab:red", "tab:orange", "tab:purple", "tab:brown"]
    height = 0.8 / (1 + len(kinds))
    for i, (label, intact, degraded) in enumerate(rows):
        bars = [("intact", intact, "tab:blue")] + [
            (k, degraded.get(k), colours[j % len(colours)]) for j, k in enumerate(kinds)]
        for k, (name, value, colour) in enumerate(bars):
            y = i + (k - len(kinds) / 2) * height
            if isinstance(value, (int, float)):
                ax.barh(y, value * 1e6, height=height, color=colour,
                        label=name if i == 0 else None)
                if intact and k:
                    ax.annotate(f"×{value / intact:.3f}", (value * 1e6, y),
                                textcoords="offset points", xytext=(3, -3), fontsize=7)
            elif k:
                ax.annotate(f"{name}: disconnects", (0, y), fontsize=7)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    lo, hi = ax.get_xlim()
    ax.set_xlim(0, hi * 1.15)                               # room for the ratio labels
    ax.set_xlabel("allreduce time (µs), BFB on the intact and the degraded digraph")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))   # clear of the bars


def plot_failures(surveys: list[dict], path: str) -> None:
    """Intact, median and worst single fibre and node failure (allreduce µs) of each
    `topofinder fail --json` document in ``surveys``, drawn to ``path`` (.png or .svg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise TopofinderError(f"plot: {path!r} has extension '.{fmt}'; accepted are "
                              + ", ".join("." + f for f in FORMATS))
    rows = []
    for doc in surveys:
        deg = {}
        for key, unit in (("single_links", "link"), ("single_nodes", "node")):
            for which in ("median", "worst"):
                if key in doc:
                    deg[f"{which} {unit}"] = doc[key][which].get("allreduce_s")
        rows.append((doc["expr"], doc["intact"].get("allreduce_s"), deg))
    fig = Figure(figsize=(10, 1.2 + 1.3 * len(rows)), dpi=120)
    FigureCanvasAgg(fig)
    n = {doc["N"] for doc in surveys}
    _degraded_panel(fig.add_subplot(), rows, "single failures: intact, median and worst"
                    + (f", N = {n.pop()}" if len(n) == 1 else ""))
    fig.tight_layout()
    with atomic_output(path, "wb") as fh:
        fig.savefig(fh, format=fmt)


def _excess_scale(ax, n: int, taus: list[float]) -> None:
    """y axis: log10(τ − τ* + δ) with δ = 1/(10N), so frontier points that all sit just above
    the BW optimum τ* = (N−1)/N separate; ticks at the plotted τ values and τ*."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    opt, delta = (n - 1) / n, 1 / (10 * n)
    ax.set_yscale("function", functions=(
        lambda y: np.log10(np.maximum(np.asarray(y, float) - opt + delta, delta / 100)),
        lambda z: 10 ** np.asarray(z, float) - delta + opt))
    ticks: list[float] = []
    for t in sorted(taus + [opt]):                   # exact values, near-duplicates merged
        if not ticks or t - ticks[-1] > 1e-9:
            ticks.append(t)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.5f}"))
    lo, hi = np.log10(delta), np.log10(max([opt + 1 / n] + taus) - opt + delta)
    pad = min(0.08 * (hi - lo), 1.0)
    ax.set_ylim(opt - delta + 10 ** (lo - pad), opt - delta + 10 ** (hi + pad))


def frontier_time(result: dict, i: int) -> str | None:
    """The allreduce time of frontier point i as text (µs), if the result has it."""
    t = result["frontier"][i].get("allreduce_time_s")
    return f"{t * 1e6:.1f} µs" if isinstance(t, (int, float)) else None


def _title(result: dict, n: int, d: int) -> str:
    """Title with the workload as the user gave it (α, bandwidth, size, all-to-all share)."""
    title = f"Pareto frontier, N = {n}, d = {d}"
    w = result.get("workload")
    if isinstance(w, dict):
        names = {"alpha": "α", "bandwidth": "B", "size": "M", "alltoall_share": "all-to-all"}
        shown = [f"{sym} = {w[k]}" for k, sym in names.items()
                 if k in w and not (k == "alltoall_share" and not w[k])]
        if shown:
            title += "\nworkload: " + ", ".join(shown)
    return title
