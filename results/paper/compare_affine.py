"""Old vs new best allreduce time per N at the degrees of the affine catalog (issue 18):
results/paper/best_before_affine.csv (the sweep committed before the catalog) against
results/paper/best.csv (rerun with it).

Run from the repository root after `topofinder sweep search/paper.toml --no-cache` (a sweep
before issue 27, which priced the allreduce as twice the allgather as best_before_affine.csv does):
    python3 results/paper/compare_affine.py
Writes results/paper/compare_d{2,4}.csv, .md and .png.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).parent
KEY = ["N", "d", "size"]


DEGREES = (2, 4)


def main() -> None:
    old = pd.read_csv(HERE / "best_before_affine.csv")
    new = pd.read_csv(HERE / "best.csv")
    merged = old.merge(new, on=KEY, suffixes=("_old", "_new"))
    for d in DEGREES:
        compare(merged[merged.d == d].copy(), d)


def compare(both: pd.DataFrame, d: int) -> None:
    both["improvement"] = 1 - both.allreduce_time_s_new / both.allreduce_time_s_old
    both.to_csv(HERE / f"compare_d{d}.csv", index=False, float_format="%.6g")

    lines = [f"# d = {d} sweep: best allreduce time per N, before and after the affine catalog",
             "", "α = 10 µs, B = 100 Gbps, 4 ≤ N ≤ 2000; improvement = 1 − new/old "
             f"(compare_affine.py; rows in compare_d{d}.csv).", "",
             "| size | N values | improved (> 0.01 %) | share | median improvement among "
             "them | max | worse |", "|---|---|---|---|---|---|---|"]
    for size, grp in both.groupby("size", sort=False):
        better = grp[grp.improvement > 1e-4]
        worse = int((grp.improvement < -1e-9).sum())
        lines.append(f"| {size} | {len(grp)} | {len(better)} | {len(better) / len(grp):.1%} | "
                     f"{better.improvement.median():.2%} | {better.improvement.max():.2%} | "
                     f"{worse} |")
    allg = both[both.improvement > 1e-4]
    lines += ["", f"Both sizes together: {len(allg)} of {len(both)} (N, size) cells improved, "
              f"median {allg.improvement.median():.2%}.", ""]
    (HERE / f"compare_d{d}.md").write_text("\n".join(lines))

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (size, grp) in zip(axes, both.groupby("size", sort=False)):
        ax.scatter(grp.N, grp.allreduce_time_s_old * 1e6, s=4, label="before (committed sweep)")
        ax.scatter(grp.N, grp.allreduce_time_s_new * 1e6, s=4, label="with affine digraphs")
        ax.set_xlabel("N (nodes)")
        ax.set_ylabel("best allreduce time (µs)")
        ax.set_title(f"d = {d}, M = {size}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(HERE / f"compare_d{d}.png", dpi=130)
    plt.close(fig)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
