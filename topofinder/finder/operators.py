"""The expansion-operator registry (paper 001 §5; docs/extending.md): one entry per operator a
recipe can apply — line graph, degree expansion, Cartesian power and product, Bi(G), routed
k-step. An entry holds everything the finder needs: how the recipe prints, the topology
(topofinder.model.operations), the allgather schedule (topofinder.expansions.schedules, or a
scorer on the whole topology), the exact prediction (topofinder.expansions.predict) and the
search rules (which smaller sizes grow into (n, k), a T_L lower bound, which candidates may be
operands and which flags the result carries). Recipes (`recipe`), building and verifying
(`verify`) and the predicted growth (`growth`) all read this table.

Candidates and recipe nodes are passed in duck-typed (``.n``, ``.d``, ``.t_l``, ``.tau``,
the flags; ``.children``, ``.k``, ``.expr``): this module sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from topofinder.errors import TopofinderError
from topofinder.expansions import predict
from topofinder.expansions import schedules
from topofinder.model import operations
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology
from topofinder.scoring.allgather.bfb import bfb_schedule
from topofinder.scoring.allgather.kstep import routed_schedule

#: (operand sizes, k) of one way to grow into a size; k is the factor/exponent/steps (0: none)
Growth = tuple[tuple[tuple[int, int], ...], int]


def _no_growth(n: int, k: int) -> list[Growth]:
    return []


@dataclass(frozen=True)
class Operator:
    """One expansion operator. ``text(recipe)`` → its expression; ``topology(children, k)`` →
    the expanded Topology; ``schedule(child_schedules, topology, k)`` → its allgather, where
    both arguments are thunks (an operator scheduled on the whole topology never builds the
    children's schedules); ``predict(operands, k)`` → exact (N, d, T_L, τ) of the result (None:
    the finder does not grow by it); ``grows_into(n, k)`` → the (operand sizes, k) that
    produce size (n, k); ``lower_bound(moore, k)`` → a T_L lower bound from the operands' Moore
    bounds; ``operand_limits(limit, operands, k)`` → the T_L below which an operand can still
    give T_L < limit; ``accepts(candidate)``: may be an operand; ``flags(operands, k)`` → the
    result's Candidate flags. ``associative``: nested applications flatten (products).
    ``preconditions(g, a)``: (name, holds) of each precondition of the operator's theorem on
    its operand topology g and allgather a (its T_L, τ exact; topofinder.finder.certify).
    ``symbol``: the grammar's operator it expands (topofinder.families.syntax: "L", "*", "^",
    "Bi", "x"; None: not written in expressions); ``repeats``: the grammar's k counts
    applications (L^k) rather than being the operator's own k."""

    name: str
    method: str
    text: Callable[[Any], str]
    topology: Callable[[list[Topology], int], Topology]
    schedule: Callable[[Callable[[], list[StepSchedule]], Callable[[], Topology], int],
                       StepSchedule]
    predict: Callable[[list, int], tuple] | None = None
    grows_into: Callable[[int, int], list[Growth]] = _no_growth
    lower_bound: Callable[[list[int], int], int] = lambda moore, k: sum(moore)
    operand_limits: Callable[[float, tuple, int], list[float]] = \
        lambda limit, operands, k: [limit] * len(operands)
    accepts: Callable[[Any], bool] = lambda c: True
    flags: Callable[[list, int], dict] = lambda cs, k: {}
    associative: bool = False
    symbol: str | None = None
    repeats: bool = False
    preconditions: Callable[[Topology, Any], list[tuple[str, bool]]] = lambda g, a: []


OPERATORS: dict[str, Operator] = {}


def register(operator: Operator) -> Operator:
    """Add an expansion operator to recipes, verification and the finder's growth."""
    if operator.name in OPERATORS or operator.name == "base":
        raise TopofinderError(f"cannot register operator {operator.name!r}: the name is taken")
    OPERATORS[operator.name] = operator
    return operator


def by_symbol(symbol: str) -> Operator | None:
    """The registered operator that expands the grammar's operator ``symbol`` (None: none)."""
    return next((op for op in OPERATORS.values() if op.symbol == symbol), None)


def operator(name: str) -> Operator:
    """The registered operator ``name``; ValueError for an unknown one (a programming error)."""
    if name not in OPERATORS:
        raise ValueError(f"unknown recipe op {name!r}")
    return OPERATORS[name]


# ---- arithmetic shared by the growth rules -----------------------------------------------------
def divisors(n: int) -> list[int]:
    small = [i for i in range(1, int(n ** 0.5) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def integer_root(n: int, e: int) -> int | None:
    r = round(n ** (1.0 / e))
    for cand in (r - 1, r, r + 1):
        if cand >= 2 and cand ** e == n:
            return cand
    return None


def _top_level(expr: str) -> str:
    """The characters of ``expr`` outside every pair of parentheses/braces."""
    depth, out = 0, []
    for c in expr:
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def operand_text(expr: str) -> str:
    """Postfix ^n and *n bind tighter than ' x ', so only a product needs parentheses, as an
    operand of a postfix operator or of a product (the grammar's canonical form,
    topofinder.families.syntax)."""
    return f"({expr})" if " x " in _top_level(expr) else expr


def _line_text(recipe) -> str:
    node, times = recipe, 0
    while node.op == "line":
        node, times = node.children[0], times + 1
    return f"L({node.expr})" if times == 1 else f"L^{times}({node.expr})"


def _line_pre(g: Topology, a) -> list[tuple[str, bool]]:
    """Def 12, Thm 7, 10: homogeneous links; every out-neighbourhood above one node (τ exact)."""
    return [("homogeneous links (Def 12)", not g.heterogeneous),
            ("every out-neighbourhood has more than one node (Thm 10: tau exact)",
             bool(g.link_matrix.getnnz(axis=1).min() > 1))]


def _degree_pre(g: Topology, a) -> list[tuple[str, bool]]:
    """Def 13, Thm 11: no self-loops, d-regular, homogeneous links."""
    return [("no self-loops (Def 13)", g.self_loops == 0), ("d-regular (Thm 11)", g.is_regular),
            ("homogeneous links (Thm 11)", not g.heterogeneous)]


def _bi_pre(g: Topology, a) -> list[tuple[str, bool]]:
    """App. A.6: a known reverse isomorphism; no 2-cycles (then τ' = τ exactly)."""
    m = g.link_matrix
    return [("a known reverse isomorphism (App. A.6)",
             operations.known_reverse_isomorphism(g) is not None),
            ("no 2-cycles (App. A.6: tau exact)", m.multiply(m.T).nnz == 0)]


def _one(c) -> tuple:
    return c.n, c.d, c.t_l, c.tau


# ---- the built-in operators ----------------------------------------------------------------
def _line_growth(n: int, k: int) -> list[Growth]:
    return [(((n // k, k),), 0)] if k >= 2 and n % k == 0 and n // k >= 2 else []


def _degree_growth(n: int, k: int) -> list[Growth]:
    return [(((n // m, k // m),), m) for m in divisors(k) if m >= 2 and n % m == 0
            and n // m >= 2]


def _power_growth(n: int, k: int) -> list[Growth]:
    roots = [(integer_root(n, e), e) for e in range(2, k + 1) if k % e == 0]
    return [(((r, k // e),), e) for r, e in roots if r is not None]


def _product_growth(n: int, k: int) -> list[Growth]:
    out = []
    for n1 in divisors(n):
        if 2 <= n1 and n1 * n1 <= n:
            for k1 in range(1, k):
                a, b = (n1, k1), (n // n1, k - k1)
                if a <= b:
                    out.append(((a, b), 0))
    return out


def _register_builtins() -> None:
    register(Operator(
        "line", "line-graph", _line_text,
        lambda ts, k: operations.line_graph(ts[0]),
        lambda kids, topo, k: schedules.line_graph_schedule(kids()[0]),
        lambda cs, k: predict.predict_line_graph(*_one(cs[0])),           # Thm 7, 10
        _line_growth, lambda moore, k: moore[0] + 1,
        lambda limit, operands, k: [limit - 1],
        flags=lambda cs, k: dict(exact=cs[0].exact and cs[0].lg_exact,
                                 reverse_symmetric=cs[0].reverse_symmetric,
                                 lg_exact=cs[0].lg_exact, loop_free=cs[0].loop_free),
        symbol="L", repeats=True, preconditions=_line_pre))
    register(Operator(
        "degree", "degree", lambda r: f"{operand_text(r.children[0].expr)}*{r.k}",
        lambda ts, k: operations.degree_expansion(ts[0], k),
        lambda kids, topo, k: schedules.degree_schedule(kids()[0], k),
        lambda cs, k: predict.predict_degree_expansion(*_one(cs[0]), k),  # Thm 11
        _degree_growth, lambda moore, k: moore[0] + 1,
        lambda limit, operands, k: [limit - 1],
        accepts=lambda c: c.loop_free,                # Thm 11 needs a base without self-loops
        flags=lambda cs, k: dict(exact=cs[0].exact, bidirectional=cs[0].bidirectional,
                                 reverse_symmetric=cs[0].reverse_symmetric, loop_free=True),
        symbol="*", preconditions=_degree_pre))
    register(Operator(
        "power", "cartesian-power", lambda r: f"{operand_text(r.children[0].expr)}^{r.k}",
        lambda ts, k: operations.cartesian_power(ts[0], k),
        lambda kids, topo, k: schedules.power_schedule(kids()[0], k),
        lambda cs, k: predict.predict_cartesian_power(*_one(cs[0]), k),   # Thm 12
        _power_growth, lambda moore, k: k * moore[0],
        lambda limit, operands, k: [(limit - 1) // k + 1],
        flags=lambda cs, k: dict(exact=cs[0].exact, bidirectional=cs[0].bidirectional,
                                 reverse_symmetric=cs[0].reverse_symmetric,
                                 bfb_bw_optimal=cs[0].bfb_bw_optimal,
                                 loop_free=cs[0].loop_free),
        symbol="^", preconditions=lambda g, a: [("an operand of N >= 2 (Def 14)", g.n >= 2)]))
    register(Operator(
        "bi", "bidirectional", lambda r: f"Bi({r.children[0].expr})",
        lambda ts, k: operations.bidirectional(ts[0]),
        lambda kids, topo, k: schedules.bidirectional_schedule(kids()[0]),
        lambda cs, k: predict.predict_bidirectional(*_one(cs[0])),       # App. A.6
        lambda n, k: [(((n, k // 2),), 0)] if k % 2 == 0 else [],
        lambda moore, k: moore[0],
        accepts=lambda c: c.reverse_symmetric and not c.bidirectional,
        flags=lambda cs, k: dict(exact=False, bidirectional=True, reverse_symmetric=True,
                                 loop_free=cs[0].loop_free),
        symbol="Bi", preconditions=_bi_pre))
    register(Operator(
        "product", "bfb", lambda r: " x ".join(operand_text(c.expr) for c in r.children),
        lambda ts, k: operations.cartesian_product(*ts),
        lambda kids, topo, k: bfb_schedule(topo()),                       # Thm 13: BFB
        lambda cs, k: predict.predict_product([(c.n, c.d, c.t_l) for c in cs]),
        _product_growth, lambda moore, k: sum(moore),
        lambda limit, operands, k: [limit - moore_bound_steps(*operands[1]),
                                    limit - moore_bound_steps(*operands[0])],
        accepts=lambda c: c.bfb_bw_optimal,           # simple, BW-optimal BFB factors
        flags=lambda cs, k: dict(exact=True, bidirectional=all(c.bidirectional for c in cs),
                                 reverse_symmetric=all(c.reverse_symmetric for c in cs),
                                 bfb_bw_optimal=True, lg_exact=True),
        associative=True, symbol="x"))
    register(Operator(
        "kstep", "kstep", lambda r: r.children[0].expr,  # the same topology, another schedule
        lambda ts, k: ts[0],
        lambda kids, topo, k: routed_schedule(topo(), k).schedule))


_register_builtins()
