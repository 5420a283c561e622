"""Best topology per N for one degree and message size (paper 001 Fig. 15), drawn headless."""

from __future__ import annotations

from pathlib import Path

from topofinder.compute.output import atomic_output


def plot_best_per_n(best: list[dict], path: Path, degree: int, size_label: str) -> None:
    """Allreduce time of the best frontier point at every N, coloured by topology family.
    ``best``: rows with N, expr, allreduce_time_s. Written atomically (png or svg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families: dict[str, list[tuple[int, float]]] = {}
    for row in sorted(best, key=lambda r: r["N"]):
        families.setdefault(_family(row["expr"]), []).append(
            (row["N"], row["allreduce_time_s"] * 1e6))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, pts in sorted(families.items(), key=lambda kv: -len(kv[1])):
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, label=f"{name} ({len(pts)})")
    ax.set_xlabel("N (nodes)")
    ax.set_ylabel("allreduce time (µs)")
    ax.set_title(f"Best topology per N, d = {degree}, M = {size_label}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, markerscale=2, ncol=2, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_output(path, "wb", follow=False) as fh:      # a results-folder file
            fig.savefig(fh, dpi=130, format="png")
    finally:
        plt.close(fig)


def _family(expr: str) -> str:
    """The outermost construction of an expression: 'L(...)' → line graph, 'A x B' → product,
    else the family name before the first parenthesis."""
    if expr.startswith("L(") or expr.startswith("L^"):
        return "line graph"
    depth = 0
    for i, c in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and expr[i:i + 3] == " x ":
            return "product"
    if expr.endswith(")") is False and ("^" in expr or "*" in expr):
        return "power" if "^" in expr.rsplit(")", 1)[-1] else "degree expansion"
    return expr.split("(", 1)[0]
