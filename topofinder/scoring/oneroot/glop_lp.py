"""An exact_lp.LP mirrored into OR-Tools' GLOP, re-solved warm as rows are added.

Cut generation adds a few rows a round to an LP of thousands; scipy's linprog rebuilds and
solves it cold each time (1–5 s at N = 1024), GLOP keeps its basis across added rows, changed
variable bounds and a changed objective, so a round's re-solve takes a fraction of a second.
Floats only: exactness comes from exact_lp's rounding and checks, never from here."""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.scoring.oneroot.exact_lp import LP


class WarmLP:
    """GLOP on the rows of ``lp`` (maximise, x ≥ 0); :meth:`solve` first adds the rows
    ``lp`` gained since the last call."""

    def __init__(self, lp: LP):
        from ortools.linear_solver import pywraplp   # loaded when a large LP is solved
        self._lp = lp
        self._s = pywraplp.Solver.CreateSolver("GLOP")
        self._inf = self._s.infinity()
        self._x = [self._s.NumVar(0, self._inf, "") for _ in range(lp.ncols)]
        self._rows = []
        self._fixed: set = set()
        self._optimal = pywraplp.Solver.OPTIMAL

    def _sync(self) -> None:
        for i in range(len(self._rows), len(self._lp.rows)):
            cols, _, sense, rhs = self._lp.rows[i]
            c = self._s.Constraint(float(rhs) if sense == "=" else -self._inf, float(rhs))
            for j, a in zip(cols, self._lp.floats[i]):
                c.SetCoefficient(self._x[j], float(a))
            self._rows.append(c)

    def solve(self, objective: dict | None = None, fix: dict | None = None
              ) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(x, y, value) like exact_lp.solve_float: maximise ``objective`` (default the LP's)
        with the columns ``fix`` fixed (others free again); None when infeasible."""
        self._sync()
        obj = self._s.Objective()
        obj.Clear()
        for j, v in (self._lp.objective if objective is None else objective).items():
            obj.SetCoefficient(self._x[j], float(v))
        obj.SetMaximization()
        fixed = fix or {}
        for j in self._fixed:
            if j not in fixed:
                self._x[j].SetBounds(0, self._inf)
        for j, v in fixed.items():
            self._x[j].SetBounds(float(v), float(v))
        self._fixed = set(fixed)
        status = self._s.Solve()
        if status != self._optimal:
            if fixed:
                return None
            raise TopofinderError(f"the steady-state LP has no optimum (GLOP status {status})")
        x = np.array([v.solution_value() for v in self._x])
        y = np.array([c.dual_value() for c in self._rows])
        return x, y, obj.Value()
