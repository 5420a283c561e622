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

from topofinder.expansions import predict
from topofinder.finder import recipe as rc
from topofinder.errors import TopofinderError
from topofinder.model.bounds import moore_bound_steps
from topofinder.scoring.allgather.bfb import MAX_SUBSET_BITS
from topofinder.finder.recipe import Recipe

MAX_TARGET_NODES = 1_000_000
#: Largest target degree: the BFB generator handles up to 16 distinct in-neighbours.
MAX_TARGET_DEGREE = MAX_SUBSET_BITS


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
def _divisors(n: int) -> list[int]:
    small = [i for i in range(1, int(n ** 0.5) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def _integer_root(n: int, e: int) -> int | None:
    r = round(n ** (1.0 / e))
    for cand in (r - 1, r, r + 1):
        if cand >= 2 and cand ** e == n:
            return cand
    return None


def predecessors(n: int, k: int) -> list[tuple[str, tuple]]:
    """Ways to obtain an n-node degree-k topology from smaller ones, as (op, operands)."""
    out = []
    if k >= 2 and n % k == 0 and n // k >= 2:
        out.append(("line", ((n // k, k),)))
    for m in _divisors(k):
        if m >= 2 and n % m == 0 and n // m >= 2:
            out.append(("degree", ((n // m, k // m),), m))
    for e in range(2, k + 1):
        if k % e == 0:
            r = _integer_root(n, e)
            if r is not None:
                out.append(("power", ((r, k // e),), e))
    if k % 2 == 0:
        out.append(("bi", ((n, k // 2),)))
    for n1 in _divisors(n):
        if 2 <= n1 and n1 * n1 <= n:
            for k1 in range(1, k):
                a, b = (n1, k1), (n // n1, k - k1)
                if a <= b:
                    out.append(("product", (a, b)))
    return out


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
def expand_line(c: Candidate) -> Candidate:
    n, d, t_l, tau = predict.predict_line_graph(c.n, c.d, c.t_l, c.tau)
    return Candidate(rc.line(c.recipe), n, d, t_l, tau, exact=c.exact and c.lg_exact,
                     reverse_symmetric=c.reverse_symmetric, lg_exact=c.lg_exact,
                     loop_free=c.loop_free)


def expand_degree(c: Candidate, m: int) -> Candidate:
    n, d, t_l, tau = predict.predict_degree_expansion(c.n, c.d, c.t_l, c.tau, m)
    return Candidate(rc.degree(c.recipe, m), n, d, t_l, tau, exact=c.exact,
                     bidirectional=c.bidirectional, reverse_symmetric=c.reverse_symmetric,
                     loop_free=True)          # only loop-free bases are degree-expanded


def expand_power(c: Candidate, e: int) -> Candidate:
    n, d, t_l, tau = predict.predict_cartesian_power(c.n, c.d, c.t_l, c.tau, e)
    return Candidate(rc.power(c.recipe, e), n, d, t_l, tau, exact=c.exact,
                     bidirectional=c.bidirectional, reverse_symmetric=c.reverse_symmetric,
                     bfb_bw_optimal=c.bfb_bw_optimal, loop_free=c.loop_free)


def expand_product(a: Candidate, b: Candidate) -> Candidate:
    """Product scheduled by BFB: T_L = Σ diameters, BW-optimal (Thm 13) — both factors are
    simple digraphs with BW-optimal BFB schedules (``bfb_bw_optimal``)."""
    n, d, t_l, tau = predict.predict_product([(c.n, c.d, c.t_l) for c in (a, b)])
    return Candidate(rc.product(a.recipe, b.recipe), n, d, t_l, tau, exact=True,
                     bidirectional=a.bidirectional and b.bidirectional,
                     reverse_symmetric=a.reverse_symmetric and b.reverse_symmetric,
                     bfb_bw_optimal=True, lg_exact=True)  # every node has >= 2 out-neighbours


def expand_bi(c: Candidate) -> Candidate:
    n, d, t_l, tau = predict.predict_bidirectional(c.n, c.d, c.t_l, c.tau)
    return Candidate(rc.bi(c.recipe), n, d, t_l, tau, exact=False, bidirectional=True,
                     reverse_symmetric=True, loop_free=c.loop_free)


def op_lower_bound(op) -> int:
    """A lower bound on T_L of anything the expansion ``op`` can produce: every schedule of an
    (m, k) topology takes at least the Moore bound; L and G*n add a step (Thm 7, 11), G^e
    multiplies by e (Thm 12), products add their factors' diameters (Thm 13), Bi keeps T_L."""
    kind, operands = op[0], op[1]
    moore = [moore_bound_steps(m, k) for m, k in operands]
    if kind in ("line", "degree"):
        return moore[0] + 1
    if kind == "power":
        return op[2] * moore[0]
    return sum(moore)                                  # product, or bi (one operand)


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
    with T_L < ``limit`` (inverting the T_L rules of `op_lower_bound`)."""
    kind, operands = op[0], op[1]
    if limit == float("inf"):
        return [limit] * len(operands)
    if kind in ("line", "degree"):
        return [limit - 1]
    if kind == "power":
        return [(limit - 1) // op[2] + 1]
    if kind == "bi":
        return [limit]
    a, b = operands                                    # product: T_L adds up
    return [limit - moore_bound_steps(*b), limit - moore_bound_steps(*a)]


def grow(frontiers: dict, n: int, k: int, ops: list[tuple] | None = None) -> list[Candidate]:
    """Candidates for (n, k) obtained by one expansion (``ops``, default all) of the frontiers
    of smaller states."""
    out = []
    for op in predecessors(n, k) if ops is None else ops:
        kind, operands = op[0], op[1]
        if any(s not in frontiers for s in operands):
            continue
        if kind == "line":
            out += [expand_line(c) for c in frontiers[operands[0]]]
        elif kind == "degree":
            out += [expand_degree(c, op[2]) for c in frontiers[operands[0]] if c.loop_free]
        elif kind == "power":
            out += [expand_power(c, op[2]) for c in frontiers[operands[0]]]
        elif kind == "bi":
            out += [expand_bi(c) for c in frontiers[operands[0]] if c.reverse_symmetric
                    and not c.bidirectional]
        elif kind == "product":
            left = [c for c in frontiers[operands[0]] if c.bfb_bw_optimal]
            right = [c for c in frontiers[operands[1]] if c.bfb_bw_optimal]
            out += [expand_product(a, b) for a in left for b in right
                    if operands[0] != operands[1] or a.expr <= b.expr]
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

