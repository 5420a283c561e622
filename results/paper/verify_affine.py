"""Replay the exported allgather schedule of the new best points at d = 2 and 4 (issue 18).

For every 5th N (and both sizes), the best point of results/paper/best.csv whose expression
uses an affine digraph is exported the way `topofinder export EXPR --what schedule` does
(topofinder.api.schedule: BFB for Aff bases, the line-graph construction for L(Aff(...))),
replayed by the independent validator, and its (T_L, τ) compared with the sweep's table
(predicted values: exact for bases, the expansion theorems' for line graphs and degree
expansions, which the exported schedule may beat in T_L or τ — "match": neither is above the
table; "equal": both are the same number).
Run from the repository root: python3 results/paper/verify_affine.py [DEGREE ...] →
verify_d{2,4}.csv.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import pandas as pd

import topofinder as tf
from topofinder.model.schedule import validate

HERE = Path(__file__).parent


def main() -> None:
    best = pd.read_csv(HERE / "best.csv")
    for d in [int(a) for a in sys.argv[1:]] or (2, 4):
        verify(best[(best.d == d) & best.expr.str.contains("Aff") & (best.N % 5 == 0)], d)


def verify(rows: pd.DataFrame, d: int) -> None:
    out = []
    for expr in sorted(set(rows.expr), key=lambda e: int(rows[rows.expr == e].N.iloc[0])):
        table = rows[rows.expr == expr].iloc[0]
        s = tf.schedule(expr, "allgather")
        validate(s)
        out.append({"N": int(table.N), "expr": expr, "T_L_table": int(table.T_L),
                    "tau_table": float(table.tau), "T_L_replayed": s.num_steps,
                    "tau_replayed": str(Fraction(s.tau)),
                    "equal": s.num_steps == table.T_L and abs(float(s.tau) - table.tau) < 1e-12,
                    "match": s.num_steps <= table.T_L and float(s.tau) <= table.tau + 1e-12})
    df = pd.DataFrame(out)
    df.to_csv(HERE / f"verify_d{d}.csv", index=False)
    print(f"d = {d}: {len(df)} schedules replayed: {int(df.match.sum())} at or below the table's "
          f"(T_L, tau), {int(df.equal.sum())} equal to it")


if __name__ == "__main__":
    main()
