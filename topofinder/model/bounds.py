"""Lower bounds of the α-β model that need no topology: the Moore bound on steps (paper 001 §2)."""

from __future__ import annotations

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
