"""Exact optima of small-coefficient LPs from a floating-point HiGHS solve.

The LP is  maximise c·x  subject to  A_i·x ≤ b_i (i in ``le``), A_i·x = b_i (i in ``eq``),
x ≥ 0, with rational data. HiGHS (dual simplex, so a vertex) returns x and the row duals y;
both are rounded to nearby rationals (continued fractions, denominators up to Q for a few Q)
and accepted only if, exactly in Fractions,

    primal:  x ≥ 0,  A_le·x ≤ b_le,  A_eq·x = b_eq;
    dual:    y_le ≥ 0,  Aᵀy ≥ c;
    c·x = b·y.

Weak duality then makes c·x the exact optimum, and (x, y) its certificate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from topofinder.errors import TopofinderError

#: Denominator limits tried in turn for the rational recovery.
DENOMINATORS = (10**3, 10**6, 10**9, 10**12)


@dataclass
class LP:
    """maximise Σ objective[j]·x_j over x ≥ 0 subject to the rows; a row is
    (columns, coefficients, sense '<=' or '=', right-hand side), all rational."""

    ncols: int
    objective: dict[int, Fraction]
    rows: list[tuple[list[int], list[Fraction], str, Fraction]] = field(default_factory=list)

    floats: list = field(default_factory=list)

    def add(self, cols, coefs, sense: str, rhs) -> int:
        coefs = [Fraction(c) for c in coefs]
        self.rows.append((list(cols), coefs, sense, Fraction(rhs)))
        self.floats.append(np.array([float(c) for c in coefs]))
        return len(self.rows) - 1


@dataclass(frozen=True)
class Solution:
    """An exact optimum: ``value`` = c·x = b·y, primal ``x`` and row duals ``y`` (Fractions)."""

    value: Fraction
    x: list[Fraction]
    y: list[Fraction]


def solve_float(lp: LP, objective: dict | None = None, fix: dict | None = None
                ) -> tuple[np.ndarray, np.ndarray, float]:
    """HiGHS dual simplex on ``lp`` (or on its rows with another ``objective`` to maximise
    and columns ``fix``ed to values): (x, y, value) in floating point; y ≥ 0 on ≤ rows."""
    from scipy.optimize import linprog      # heavy (0.3 s): loaded on first use, as kstep's
    le = [i for i, r in enumerate(lp.rows) if r[2] == "<="]
    eq = [i for i, r in enumerate(lp.rows) if r[2] == "="]

    def matrix(idx):
        if not idx:
            return None, None
        lens = [len(lp.rows[i][0]) for i in idx]
        rr = np.repeat(np.arange(len(idx)), lens)
        cc = np.concatenate([np.asarray(lp.rows[i][0], np.int64) for i in idx])
        vv = np.concatenate([lp.floats[i] for i in idx])
        a = sp.csr_matrix((vv, (rr, cc)), shape=(len(idx), lp.ncols))
        return a, np.array([float(lp.rows[i][3]) for i in idx])

    c = np.zeros(lp.ncols)
    for j, v in (lp.objective if objective is None else objective).items():
        c[j] = -float(v)
    bounds = np.zeros((lp.ncols, 2))
    bounds[:, 1] = np.inf
    for j, v in (fix or {}).items():
        bounds[j] = float(v)
    a_ub, b_ub = matrix(le)
    a_eq, b_eq = matrix(eq)
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                  method="highs-ds", options={"primal_feasibility_tolerance": 1e-10,
                                              "dual_feasibility_tolerance": 1e-10})
    if res.status != 0:
        raise TopofinderError(f"the steady-state LP has no optimum ({res.message})")
    y = np.zeros(len(lp.rows))
    if le:
        y[le] = -res.ineqlin.marginals
    if eq:
        y[eq] = -res.eqlin.marginals
    return res.x, y, -res.fun


def _round(v: np.ndarray, q: int) -> list[Fraction]:
    return [Fraction(float(t)).limit_denominator(q) for t in v]


def dual_bound(lp: LP, y: list[Fraction]) -> Fraction | None:
    """b·y if ``y`` is exactly dual feasible (y ≥ 0 on ≤ rows, Aᵀy ≥ c), an upper bound on
    the optimum by weak duality; else None."""
    price = [Fraction(0)] * lp.ncols
    value = Fraction(0)
    for (cols, coefs, sense, rhs), yi in zip(lp.rows, y):
        if sense == "<=" and yi < 0:
            return None
        if yi:
            value += yi * rhs
            for j, a in zip(cols, coefs):
                price[j] += yi * a
    if any(price[j] < lp.objective.get(j, 0) for j in range(lp.ncols)):
        return None
    return value


def round_dual(lp: LP, y_f: np.ndarray) -> tuple[Fraction, list[Fraction]] | None:
    """(b·y, y) for the first rounding of the float duals that is exactly dual feasible."""
    for q in DENOMINATORS:
        y = _round(y_f, q)
        value = dual_bound(lp, y)
        if value is not None:
            return value, y
    return None


def verify(lp: LP, x: list[Fraction], y: list[Fraction]) -> Fraction | None:
    """c·x if (x, y) is an exact primal–dual optimal pair of ``lp`` (see module doc), else
    None."""
    if any(t < 0 for t in x):
        return None
    for cols, coefs, sense, rhs in lp.rows:
        lhs = sum((a * x[j] for j, a in zip(cols, coefs)), Fraction(0))
        if (sense == "<=" and lhs > rhs) or (sense == "=" and lhs != rhs):
            return None
    value = sum((v * x[j] for j, v in lp.objective.items()), Fraction(0))
    return value if value == dual_bound(lp, y) else None


def solve_exact(lp: LP, floats=None) -> Solution:
    """The exact optimum of ``lp`` with its certificate; ``floats`` = (x, y, value) from an
    earlier :func:`solve_float` of the same LP. TopofinderError if no rounding certifies."""
    x_f, y_f, _ = solve_float(lp) if floats is None else floats
    for q in DENOMINATORS:
        x, y = _round(x_f, q), _round(y_f, q)
        value = verify(lp, x, y)
        if value is not None:
            return Solution(value, x, y)
    raise TopofinderError("could not recover an exact optimum of the steady-state LP from "
                          "HiGHS's solution (denominators beyond 10^12)")
