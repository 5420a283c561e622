"""Recipes: how a candidate topology is composed from bases by expansions (paper 001 §5.4).

A recipe is a small immutable tree. Its expression is what the CLI prints; ``build_topology`` and
(in topofinder.finder.verify) ``build_schedule`` follow the same tree, so a frontier point can be
rebuilt exactly from its recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from topofinder.finder.bases import catalog_bases
from topofinder.model.syntax import Leaf, Product, parse_tree, to_text


@dataclass(frozen=True)
class Recipe:
    """``op`` is one of:

    - ``base``: a topology named by ``expr`` whose schedule comes from ``source``
      ("bfb": the optimal BFB schedule, or "catalog": the stored schedule);
    - ``line``: L(child); ``degree``: child*k; ``power``: child^k;
    - ``product``: children[0] x children[1] x ... scheduled by BFB (Thm 13);
    - ``bi``: Bi(child) for a reverse-symmetric child (Appendix A.6);
    - ``kstep``: child's topology with a routed k-step schedule (k = ``k``,
      topofinder.scoring.allgather.kstep); its expression is the child's (the same topology).
    """

    op: str
    children: tuple["Recipe", ...] = ()
    k: int = 0
    base_expr: str = ""
    source: str = ""

    @property
    def expr(self) -> str:
        if self.op == "base":
            return self.base_expr
        if self.op == "kstep":
            return self.children[0].expr
        if self.op == "line":
            inner, times = self._line_chain()
            return f"L({inner.expr})" if times == 1 else f"L^{times}({inner.expr})"
        if self.op == "degree":
            return f"{_postfix_operand(self.children[0].expr)}*{self.k}"
        if self.op == "power":
            return f"{_postfix_operand(self.children[0].expr)}^{self.k}"
        if self.op == "product":
            return " x ".join(_product_operand(c.expr) for c in self.children)
        if self.op == "bi":
            return f"Bi({self.children[0].expr})"
        raise ValueError(f"unknown recipe op {self.op!r}")

    def _line_chain(self) -> tuple["Recipe", int]:
        node, times = self, 0
        while node.op == "line":
            node, times = node.children[0], times + 1
        return node, times

    @property
    def method(self) -> str:
        """How the outermost schedule is built (the `schedule` field of search --json)."""
        own = {"base": self.source or "bfb", "line": "line-graph", "degree": "degree",
               "power": "cartesian-power", "product": "bfb", "bi": "bidirectional",
               "kstep": "kstep"}[self.op]
        return own if self.op == "kstep" or not self.uses_kstep else f"{own}+kstep"

    @property
    def uses_kstep(self) -> bool:
        return self.op == "kstep" or any(c.uses_kstep for c in self.children)

    def __str__(self) -> str:
        return self.expr


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


def _postfix_operand(expr: str) -> str:
    """Postfix ^n and *n bind tighter than ' x ', so only a product needs parentheses (the
    expression grammar's canonical form, topofinder.model.syntax)."""
    return f"({expr})" if " x " in _top_level(expr) else expr


def _product_operand(expr: str) -> str:
    return f"({expr})" if " x " in _top_level(expr) else expr


def base(expr: str, source: str = "bfb") -> Recipe:
    return Recipe("base", base_expr=expr, source=source)


def line(child: Recipe) -> Recipe:
    return Recipe("line", (child,))


def degree(child: Recipe, k: int) -> Recipe:
    return Recipe("degree", (child,), k=k)


def power(child: Recipe, k: int) -> Recipe:
    return Recipe("power", (child,), k=k)


def product(*children: Recipe) -> Recipe:
    flat: list[Recipe] = []
    for c in children:
        flat.extend(c.children if c.op == "product" else (c,))
    return Recipe("product", tuple(flat))


def kstep(child: Recipe, steps: int) -> Recipe:
    return Recipe("kstep", (child,), k=steps)


def bi(child: Recipe) -> Recipe:
    return Recipe("bi", (child,))


def from_expression(text: str) -> Recipe:
    """The recipe an expression names: L, ^n, *n, Bi and ' x ' become the expansions (their
    schedules by Defs 1, 14, 2, App. A.6 and BFB for products); a search-found catalog base
    uses its stored schedule; every other leaf, and any transpose T(...), is scheduled by BFB
    as a whole."""
    found = catalog_bases()

    def walk(node) -> Recipe:
        if isinstance(node, Leaf):
            text = to_text(node)
            return base(text, "catalog" if text in found else "bfb")
        if isinstance(node, Product):
            return product(*[walk(f) for f in node.factors])
        if node.op == "T":
            return base(to_text(node), "bfb")
        child = walk(node.child)
        if node.op == "L":
            for _ in range(node.k):
                child = line(child)
            return child
        return {"^": power, "*": degree}[node.op](child, node.k) if node.op in "^*" else bi(child)

    return walk(parse_tree(text))
