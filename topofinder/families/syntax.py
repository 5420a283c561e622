"""Topology expressions (docs/expressions.md): parse and print (sizes and building are in
topofinder.families.build). It lives in the families layer because the families it accepts are
the entries of topofinder.families.registry.

Grammar (whitespace anywhere; ``□`` or ``×`` may replace ``x``; ``□n`` or ``^□n`` = ``^n``)::

    expr    := term ("x" term)*                     Cartesian product A x B x ...
    term    := primary ("^" INT | "*" INT)*          G^n, G*n (left to right)
    primary := "(" expr ")" | "L" ["^" INT] "(" expr ")" | "Bi(" expr ")" | "T(" expr ")"
             | FAMILY "(" args ")" | FAMILY

FAMILY is any family of the registry (topofinder.families.registry), written as its entry's
argument kind says (a family of kind "none", such as Diamond, takes no parentheses).

Postfix ``^n`` and ``*n`` bind tighter than ``x``. The printed (canonical) form is exactly what
the generators and expansions name their results, so ``str(parse(e))`` parses to the same arcs.
Before anything is built the node and arc counts are predicted (products multiply N, L
multiplies N by d, G*n multiplies N and d by n, ...) and oversize expressions are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topofinder.errors import TopofinderError
from topofinder.families.registry import FAMILIES, accepted

#: Longest integer in an expression (every size limit fits well inside it).
MAX_DIGITS = 18

_OPERATORS = "L(G), L^n(G), Bi(G), T(G), G^n, G*n, A x B"


# ---- syntax tree ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Leaf:
    family: str
    args: tuple            # by the family's argument kind (topofinder.families.registry):
                           # ints; "set": (m, (a, ...)); "qset": (m, q, (a, ...));
                           # "name": (name,) or (d, N); "none": ()
    pos: int


@dataclass(frozen=True)
class Unary:
    op: str                # "L" (k = iterations), "*" (degree expansion), "^" (power), "Bi", "T"
    child: object
    k: int
    pos: int


@dataclass(frozen=True)
class Product:
    factors: tuple
    pos: int


def _wrap(s: str) -> str:
    """The expansions' rule: parenthesise an expression containing a product."""
    return f"({s})" if " x " in s else s


def to_text(node) -> str:
    """Canonical text of a syntax tree (the names generators and expansions give)."""
    if isinstance(node, Leaf):
        return FAMILIES[node.family].text(node.args)
    if isinstance(node, Product):
        return " x ".join(_wrap(to_text(f)) for f in node.factors)
    inner = to_text(node.child)
    if node.op == "L":
        return f"L({inner})" if node.k == 1 else f"L^{node.k}({inner})"
    if node.op in ("Bi", "T"):
        return f"{node.op}({inner})"
    return f"{_wrap(inner)}{node.op}{node.k}"


# ---- lexer and parser ----------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<sym>[(){},^*□×-]))")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = []                                   # (kind, value, pos)
        i = 0
        while True:
            m = _TOKEN.match(text, i)
            if m is None:
                j = len(text) - len(text[i:].lstrip())
                if j == len(text):
                    break
                self.fail(j, f"unexpected character {text[j]!r}")
            kind = m.lastgroup
            value = m.group(kind)
            pos = m.start(kind)
            if kind == "sym" and value == "-":
                self.fail(pos, "negative numbers are not accepted")
            if kind == "int" and len(value) > MAX_DIGITS:
                self.fail(pos, f"a number with {len(value)} digits; at most {MAX_DIGITS} are "
                               f"accepted")
            if kind == "name" and value[0] == "x" and len(value) > 1 and self.tokens \
                    and (self.tokens[-1][0] == "int" or self.tokens[-1][1] == ")"):
                # "K(3)xK(2)": an 'x' right after an operand is the product sign
                self.tokens.append(("name", "x", pos))
                value, pos = value[1:], pos + 1
            self.tokens.append((kind, int(value) if kind == "int" else value, pos))
            i = m.end()
            if kind == "name" and value in FAMILIES and FAMILIES[value].arguments == "name":
                i = self.raw_argument(i, value)
        self.tokens.append(("end", None, len(text)))
        self.i = 0

    def raw_argument(self, i: int, family: str) -> int:
        """A "name" family's argument (DistReg's catalog name): the raw text up to the
        matching ')'."""
        j = len(self.text) - len(self.text[i:].lstrip())
        if j == len(self.text) or self.text[j] != "(":
            self.fail(j, f"expected '(' after {family}")
        depth = 0
        for k in range(j, len(self.text)):
            depth += {"(": 1, ")": -1}.get(self.text[k], 0)
            if depth == 0:
                self.tokens += [("sym", "(", j), ("raw", self.text[j + 1:k], j + 1),
                                ("sym", ")", k)]
                return k + 1
        self.fail(len(self.text), f"expected ')' closing {family}(")

    def fail(self, pos: int, message: str):
        marked = f"{self.text[:pos]} >>{self.text[pos:]}" if pos < len(self.text) \
            else f"{self.text} >>(end)"
        raise TopofinderError(f"bad topology expression, {message} at column {pos + 1}: "
                              f"{marked.strip()}")

    # token helpers
    def peek(self, offset: int = 0):
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, value) -> bool:
        kind, v, _ = self.peek()
        return kind in ("sym", "name") and v == value

    def expect(self, value: str, what: str | None = None):
        kind, v, pos = self.peek()
        if not (kind in ("sym", "name") and v == value):
            found = "the end" if kind == "end" else repr(str(v))
            self.fail(pos, f"expected {what or repr(value)}, found {found}")
        return self.next()

    def integer(self, what: str) -> int:
        kind, v, pos = self.peek()
        if kind != "int":
            found = "the end" if kind == "end" else repr(str(v))
            self.fail(pos, f"expected {what} (a non-negative integer), found {found}")
        self.next()
        return v

    # grammar
    def parse(self):
        node = self.expr()
        kind, v, pos = self.peek()
        if kind != "end":
            self.fail(pos, f"unexpected {str(v)!r} (operators: {_OPERATORS})")
        return node

    def _is_product_sign(self) -> bool:
        if self.at("x") or self.at("×"):
            return True
        return self.at("□") and self.peek(1)[0] != "int"

    def expr(self):
        pos = self.peek()[2]
        factors = [self.term()]
        while self._is_product_sign():
            self.next()
            factors.append(self.term())
        if len(factors) == 1:
            return factors[0]
        flat = []
        for f in factors:          # (A x B) x C = A x B x C: same row-major node numbering
            flat.extend(f.factors if isinstance(f, Product) else [f])
        return Product(tuple(flat), pos)

    def term(self):
        node = self.primary()
        while True:
            kind, v, pos = self.peek()
            if self.at("^") or (self.at("□") and self.peek(1)[0] == "int"):
                self.next()
                if self.at("□"):
                    self.next()
                node = Unary("^", node, self.integer("a power after '^'"), pos)
            elif self.at("*"):
                self.next()
                node = Unary("*", node, self.integer("a factor after '*'"), pos)
            else:
                return node

    def primary(self):
        kind, v, pos = self.peek()
        if self.at("("):
            self.next()
            node = self.expr()
            self.expect(")", "')' closing the '(' at column " + str(pos + 1))
            return node
        if kind != "name":
            found = "the end" if kind == "end" else repr(str(v))
            self.fail(pos, f"expected a topology, found {found} (accepted: {accepted()}; operators {_OPERATORS})")
        self.next()
        if v == "L":
            k = 1
            if self.at("^"):
                self.next()
                kpos = self.peek()[2]
                k = self.integer("a line-graph power after 'L^'")
                if k < 1:
                    self.fail(kpos, f"line-graph power must be >= 1, got {k}")
            child = self.parenthesised()
            if isinstance(child, Unary) and child.op == "L":      # L(L^j(G)) = L^{j+1}(G)
                return Unary("L", child.child, child.k + k, pos)
            return Unary("L", child, k, pos)
        if v in ("Bi", "T"):
            return Unary(v, self.parenthesised(), 1, pos)
        family = FAMILIES.get(v)
        if family is None:
            self.fail(pos, f"unknown family {v!r} (accepted: {accepted()}; operators "
                           f"{_OPERATORS})")
        if family.arguments == "none":
            return Leaf(v, (), pos)
        if family.arguments == "name":
            return Leaf(v, self.name_args(v), pos)
        self.expect("(", f"'(' after {v}")
        args = self.arguments(family.signature, family.arguments, v)
        self.expect(")", f"')' closing {family.signature}")
        return Leaf(v, family.normalise(args) if family.normalise else args, pos)

    def arguments(self, shape: str, kind, name: str) -> tuple:
        """The arguments of a family of kind "set", "qset" or (lo, hi) integers."""
        if kind in ("set", "qset"):
            m = self.integer(f"the node count of {shape}")
            self.expect(",", f"',' in {shape}")
            if kind == "qset":
                q = self.integer(f"the multiplier q of {shape}")
                self.expect(",", f"',' in {shape}")
                return m, q, self.int_set(shape)
            return m, self.int_set(shape)
        args = [self.integer(f"an integer argument of {shape}")]
        while self.at(","):
            self.next()
            args.append(self.integer(f"an integer argument of {shape}"))
        lo, hi = kind
        if len(args) < lo or (hi is not None and len(args) > hi):
            self.fail(self.peek()[2], f"{name} takes {shape}, got {len(args)} argument(s)")
        return tuple(args)

    def parenthesised(self):
        self.expect("(")
        node = self.expr()
        self.expect(")")
        return node

    def int_set(self, shape: str) -> tuple:
        self.expect("{", f"'{{' starting the generator set of {shape}")
        values = [self.integer(f"a generator in {shape}")]
        while self.at(","):
            self.next()
            values.append(self.integer(f"a generator in {shape}"))
        self.expect("}", f"'}}' or ',' in the generator set of {shape}")
        return tuple(values)

    def name_args(self, family: str) -> tuple:
        """A "name" family's arguments: F(name) or F(d,N)."""
        self.expect("(", f"'(' after {family}")
        _, raw, pos = self.next()
        self.expect(")", f"')' closing {family}(")
        raw = " ".join(raw.split())
        if not raw:
            self.fail(pos, f"{family} needs a catalog name or a degree and size, "
                           f"e.g. {family}(4,32)")
        sizes = re.fullmatch(r"(\d+) ?, ?(\d+)", raw)
        return (int(sizes.group(1)), int(sizes.group(2))) if sizes else (raw,)


class PositionedError(TopofinderError):
    """A TopofinderError that already says where in the expression it arose."""


def parse_tree(text: str):
    """The syntax tree of an expression (Leaf, Unary, Product); TopofinderError with the column
    of the first error."""
    if not isinstance(text, str) or not text.strip():
        raise TopofinderError("empty topology expression; give one such as 'Pi(4,1024)' or "
                              "'L^3(C(16,{3,4}))'")
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise TopofinderError("topology expression nested too deeply") from None


def canonical(text: str) -> str:
    """The canonical printed form of an expression (nothing is built)."""
    return to_text(parse_tree(text))
