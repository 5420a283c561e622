"""Topology finder (paper 001 §5.4, Appendix A.3; docs/algorithms.md): bottom-up predicted search.

For a target (N, d) the finder
1. finds every intermediate size/degree (n, k) that can still grow to (N, d) — line graphs
   multiply n by k, degree expansion multiplies n and k, powers raise n and multiply k, products
   multiply n and add degrees, Bi doubles k;
2. seeds each (n, k) with base topologies (catalog entries and generative families), each scored
   exactly (BFB scorer or the catalog's stored schedule);
3. applies expansions bottom-up with predicted (T_L, τ) (docs/algorithms.md), keeping only a
   Pareto set at every intermediate (n, k);
4. returns the Pareto frontier at (N, d), which topofinder.finder.verify then builds and replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from itertools import product

from topofinder.compute.cache import record
from topofinder.errors import TopofinderError
from topofinder.finder.operators import OPERATORS
from topofinder.finder.recipe import Recipe, apply
from topofinder.model.bounds import moore_bound_steps
from topofinder.scoring.allgather.bfb import MAX_SUBSET_BITS

MAX_TARGET_NODES = 1_000_000
#: Largest target degree: the BFB generator handles up to 16 distinct in-neighbours.
MAX_TARGET_DEGREE = MAX_SUBSET_BITS


@record
@dataclass(frozen=True)
class Candidate:
    """A topology recipe with its (predicted or scored) performance.

    ``t_l`` in steps, ``tau`` in M/B (exact). ``exact``: ``tau`` is the schedule's exact value
    (False: an upper bound from a theorem). Flags carried for later expansions:
    ``bidirectional`` (duplex-cablable), ``reverse_symmetric`` (Bi and reduce-scatter by
    Thm 2), ``bfb_bw_optimal`` (BFB schedule that is BW-optimal: products keep it, Thm 13),
    ``lg_exact`` (line graph adds exactly 1/N, Thm 10), ``loop_free`` (no self-loops: degree
    expansion's Thm 11 needs it).
    """

    recipe: Recipe
    n: int
    d: int
    t_l: int
    tau: Fraction
    exact: bool = True
    bidirectional: bool = False
    reverse_symmetric: bool = False
    bfb_bw_optimal: bool = False
    lg_exact: bool = False
    loop_free: bool = True

    @property
    def expr(self) -> str:
        return self.recipe.expr

    @property
    def flags(self) -> tuple[bool, ...]:
        return (self.bidirectional, self.reverse_symmetric, self.bfb_bw_optimal, self.lg_exact,
                self.loop_free)


# ---- Pareto ------------------------------------------------------------------------------------
def _preference(c: Candidate) -> tuple:
    """Tie-break among equal (T_L, τ): exact before predicted, then the shorter expression."""
    return (not c.exact, len(c.expr), c.expr)


def dominates(a: Candidate, b: Candidate, with_flags: bool = True) -> bool:
    """a is no worse than b in T_L and τ (and, with flags, has every flag b has), and better in
    one of them — or equal in both and preferred by the tie-break."""
    if a.t_l > b.t_l or a.tau > b.tau:
        return False
    if with_flags and any(fb and not fa for fa, fb in zip(a.flags, b.flags)):
        return False
    if a.t_l < b.t_l or a.tau < b.tau:
        return True
    if with_flags and a.flags != b.flags:
        return True                                   # strictly more flags
    return _preference(a) < _preference(b)


def pareto(cands, with_flags: bool = True) -> list[Candidate]:
    """The candidates no other candidate dominates, sorted by T_L then τ."""
    unique = {}
    for c in cands:
        key = (c.expr, c.recipe.uses_kstep, c.flags if with_flags else ())
        if key not in unique or _preference(c) < _preference(unique[key]):
            unique[key] = c
    pool = sorted(unique.values(), key=lambda c: (c.t_l, c.tau, _preference(c)))
    return [c for c in pool if not any(dominates(o, c, with_flags) for o in pool if o is not c)]


# ---- reachable (n, k) --------------------------------------------------------------------------
def predecessors(n: int, k: int) -> list[tuple[str, tuple, int]]:
    """Ways to obtain an n-node degree-k topology from smaller ones, as (op, operand sizes, k)
    over the registered operators (topofinder.finder.operators)."""
    return [(op.name, operands, arg) for op in OPERATORS.values()
            for operands, arg in op.grows_into(n, k)]


def reachable_states(n: int, d: int) -> list[tuple[int, int]]:
    """Every (n', k') from which (n, d) can be reached, smallest first."""
    seen, stack = set(), [(n, d)]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        for op in predecessors(*state):
            stack.extend(op[1])
    return sorted(seen)


# ---- expansions on candidates (predictions of docs/algorithms.md) ----------------------------
def expand(name: str, operands: tuple[Candidate, ...], k: int = 0) -> Candidate:
    """The candidate the operator ``name`` makes of ``operands``: its exact predicted
    (N, d, T_L, τ) and the flags the operator says it carries."""
    op = OPERATORS[name]
    n, d, t_l, tau = op.predict(list(operands), k)
    return Candidate(apply(name, tuple(c.recipe for c in operands), k), n, d, t_l, tau,
                     **op.flags(list(operands), k))


def op_lower_bound(op) -> int:
    """A lower bound on T_L of anything the expansion ``op`` can produce: every schedule of an
    (m, k) topology takes at least the Moore bound, and each operator says what it adds (L and
    G*n a step, Thm 7, 11; G^e multiplies by e, Thm 12; products add, Thm 13; Bi keeps T_L)."""
    name, operands, k = op
    return OPERATORS[name].lower_bound([moore_bound_steps(m, j) for m, j in operands], k)


def bandwidth_cutoff(cands: list[Candidate], n: int) -> float:
    """The least T_L of a BW-optimal candidate that carries every flag: anything with that
    many steps or more is dominated by it (τ ≥ (N−1)/N always), so expansions whose
    `op_lower_bound` reaches it need not be built. ∞ when there is no such candidate."""
    best = Fraction(n - 1, n)
    return min((c.t_l for c in cands if c.tau == best and all(c.flags)), default=float("inf"))


def useful_ops(n: int, k: int, limit: float) -> list[tuple]:
    """The expansions into (n, k) that can produce a candidate with T_L < ``limit``."""
    return [op for op in predecessors(n, k) if op_lower_bound(op) < limit]


def operand_limits(op, limit: float) -> list[float]:
    """For each operand of ``op``: the T_L below which its candidates can still yield a result
    with T_L < ``limit`` (inverting the operator's `op_lower_bound` rule)."""
    name, operands, k = op
    if limit == float("inf"):
        return [limit] * len(operands)
    return OPERATORS[name].operand_limits(limit, operands, k)


def grow(frontiers: dict, n: int, k: int, ops: list[tuple] | None = None) -> list[Candidate]:
    """Candidates for (n, k) obtained by one expansion (``ops``, default all) of the frontiers
    of smaller states: every combination of accepted operands (for equal operand sizes, each
    unordered combination once)."""
    out = []
    for name, operands, arg in predecessors(n, k) if ops is None else ops:
        if any(s not in frontiers for s in operands):
            continue
        op = OPERATORS[name]
        pools = [[c for c in frontiers[s] if op.accepts(c)] for s in operands]
        for combo in product(*pools):
            if all(operands[i] != operands[i + 1] or combo[i].expr <= combo[i + 1].expr
                   for i in range(len(combo) - 1)):
                out.append(expand(name, combo, arg))
    return out


def validate_target(n, d, bidirectional: bool = False) -> tuple[int, int]:
    """Check a user's (N, d); TopofinderError with what is accepted otherwise."""
    def as_int(value, name, lowest):
        try:
            number = int(str(value), 10)
        except ValueError:
            raise TopofinderError(f"--{name} must be a whole number, got {value!r}") from None
        if number < lowest:
            raise TopofinderError(f"--{name} must be >= {lowest}, got {number}")
        return number

    n = as_int(n, "n", 2)
    d = as_int(d, "d", 1)
    if n > MAX_TARGET_NODES:
        raise TopofinderError(f"--n {n} is too large; topofinder handles N <= {MAX_TARGET_NODES}")
    if d >= n:
        raise TopofinderError(f"--d {d} must be smaller than --n {n} (at most N-1 ports are "
                              f"useful without parallel links)")
    if d > MAX_TARGET_DEGREE:
        raise TopofinderError(f"--d {d} is too large; the search handles d <= "
                              f"{MAX_TARGET_DEGREE} (its BFB schedule generator splits a node's "
                              f"in-links by subsets of up to {MAX_TARGET_DEGREE})")
    if bidirectional and (n * d) % 2 == 1:
        raise TopofinderError(f"--bidirectional with N = {n} and d = {d}: duplex cables pair "
                              f"ports, so N·d must be even")
    if bidirectional and d == 1:
        raise TopofinderError("--bidirectional needs d >= 2 when N > 2 (d = 1 duplex cables "
                              "only connect pairs of nodes)")
    return n, d

