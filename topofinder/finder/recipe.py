"""Recipes: how a candidate topology is composed from bases by expansions (paper 001 §5.4).

A recipe is a small immutable tree of registered operators (topofinder.finder.operators) over
bases. Its expression is what the CLI prints; ``build_topology`` and ``build_schedule`` (in
topofinder.finder.verify) follow the same tree, so a frontier point can be rebuilt exactly from
its recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from topofinder.compute.cache import record
from topofinder.finder.bases import catalog_bases
from topofinder.finder.operators import by_symbol, operator
from topofinder.families.syntax import Leaf, Product, parse_tree, to_text


@record
@dataclass(frozen=True)
class Recipe:
    """``op`` is ``base`` — a topology named by ``base_expr`` whose schedule comes from
    ``source`` ("bfb": the optimal BFB schedule, or "catalog": the stored schedule) — or the
    name of a registered expansion operator (topofinder.finder.operators: ``line`` L(child),
    ``degree`` child*k, ``power`` child^k, ``product`` children[0] x children[1] x ...
    scheduled by BFB (Thm 13), ``bi`` Bi(child) of a reverse-symmetric child (App. A.6),
    ``kstep`` the child's topology with a routed k-step schedule of k = ``k`` steps).
    """

    op: str
    children: tuple["Recipe", ...] = ()
    k: int = 0
    base_expr: str = ""
    source: str = ""

    @property
    def expr(self) -> str:
        return self.base_expr if self.op == "base" else operator(self.op).text(self)

    @property
    def method(self) -> str:
        """How the outermost schedule is built (the `schedule` field of search --json)."""
        own = (self.source or "bfb") if self.op == "base" else operator(self.op).method
        return own if self.op == "kstep" or not self.uses_kstep else f"{own}+kstep"

    @property
    def uses_kstep(self) -> bool:
        return self.op == "kstep" or any(c.uses_kstep for c in self.children)

    def __str__(self) -> str:
        return self.expr


def base(expr: str, source: str = "bfb") -> Recipe:
    return Recipe("base", base_expr=expr, source=source)


def apply(op: str, children: tuple[Recipe, ...], k: int = 0) -> Recipe:
    """The registered operator ``op`` applied to ``children`` (nested applications of an
    associative operator, such as products, are flattened)."""
    if operator(op).associative:
        children = tuple(g for c in children for g in (c.children if c.op == op else (c,)))
    return Recipe(op, tuple(children), k)


def from_expression(text: str) -> Recipe:
    """The recipe an expression names: each operator of the grammar with a registered
    expansion (its ``symbol``: L, ^n, *n, Bi and ' x ') becomes that expansion (schedules by
    Defs 1, 14, 2, App. A.6 and BFB for products); a search-found catalog base
    uses its stored schedule; every other leaf, and any transpose T(...), is scheduled by BFB
    as a whole."""
    found = catalog_bases()

    def walk(node) -> Recipe:
        if isinstance(node, Leaf):
            text = to_text(node)
            return base(text, "catalog" if text in found else "bfb")
        if isinstance(node, Product):
            return apply(by_symbol("x").name, tuple(walk(f) for f in node.factors))
        op = by_symbol(node.op)
        if op is None:                               # T(...): no expansion schedules it
            return base(to_text(node), "bfb")
        child = walk(node.child)
        if op.repeats:                               # L^k(G) = L(L(...L(G)))
            for _ in range(node.k):
                child = apply(op.name, (child,))
            return child
        return apply(op.name, (child,), node.k)

    return walk(parse_tree(text))
