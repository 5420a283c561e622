"""Lower bounds of the α-β model that need no topology: the Moore bound on steps (paper 001 §2),
and the check of a claimed (T_L, τ) against it, the hop bound and (N−1)/N."""

from __future__ import annotations

from fractions import Fraction

from topofinder.errors import TopofinderError


def moore_bound_steps(n: int, d: int) -> int:
    """T_L*(N, d) in steps: min{k : Σ_{i=0..k} d^i ≥ N} (the Moore bound, docs/model.md)."""
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


def check_claim(n: int, d: int, t_l: int, tau: Fraction | str | None = None,
                what: str = "schedule", diameter: int | None = None) -> None:
    """TopofinderError unless an allgather claim on N nodes of degree d with homogeneous links
    can be true: T_L ≥ the Moore bound (001 Def 9), T_L ≥ the diameter (the hop bound) and
    τ ≥ (N−1)/N (001 Def 11). Used to re-validate results read back from a cache or file."""
    moore = moore_bound_steps(n, d)
    if diameter is not None and diameter < moore:
        raise TopofinderError(f"{what}: diameter {diameter} below the Moore bound {moore} "
                              f"for N = {n}, d = {d}")
    if t_l < max(moore, diameter or 0):
        raise TopofinderError(f"{what}: T_L = {t_l} below the bound {max(moore, diameter or 0)} "
                              f"(Moore / hop bound) for N = {n}, d = {d}")
    if tau is not None and Fraction(tau) < Fraction(n - 1, n):
        raise TopofinderError(f"{what}: tau = {tau} below (N-1)/N = {n - 1}/{n}")
