"""Topology expressions (DESIGN §3): parse, print, size prediction, loading.

Grammar (whitespace anywhere; ``□`` or ``×`` may replace ``x``; ``□n`` or ``^□n`` = ``^n``)::

    expr    := term ("x" term)*                     Cartesian product A x B x ...
    term    := primary ("^" INT | "*" INT)*          power G^n, degree expansion G*n (left to right)
    primary := "(" expr ")" | "L" ["^" INT] "(" expr ")" | "Bi(" expr ")" | "T(" expr ")"
             | FAMILY "(" args ")" | "Diamond"

Postfix ``^n`` and ``*n`` bind tighter than ``x``. The printed (canonical) form is exactly what
the generators and expansions name their results, so ``str(parse(e))`` parses to the same arcs.
Before anything is built the node and arc counts are predicted (products multiply N, L
multiplies N by d, G*n multiplies N and d by n, ...) and oversize expressions are refused.
"""

from __future__ import annotations

import importlib

import os
import re
from dataclasses import dataclass
from math import prod

from topofinder.errors import TopofinderError
from topofinder.topology import MAX_NODES, Topology

#: Largest arc count (N·d) built: 16 bytes of numpy per arc, so 256 MB of arc arrays.
MAX_ARCS = 16_000_000
#: Largest line-graph iteration (past it a degree >= 2 base exceeds MAX_NODES anyway).
MAX_LINE_POWER = 64

# family: (argument shape, description for error messages)
_FAMILIES = {
    "K": ("K(m) or K(d,d)", (1, 2)),
    "H": ("H(n,q)", (2, 2)),
    "Kautz": ("Kautz(d,n)", (2, 2)),
    "Pi": ("Pi(d,m)", (2, 2)),
    "C": ("C(m,{a,...})", "set"),
    "DC": ("DC(m,{a,...})", "set"),
    "BiRing": ("BiRing(d,m)", (2, 2)),
    "UniRing": ("UniRing(d,m)", (2, 2)),
    "Torus": ("Torus(m1,...,mk)", (1, None)),
    "TwistedTorus": ("TwistedTorus(2a,a,...)", (2, None)),
    "Hypercube": ("Hypercube(n)", (1, 1)),
    "DBJ": ("DBJ(d,n)", (2, 2)),
    "DBJMod": ("DBJMod(d,n)", (2, 2)),
    "DistReg": ("DistReg(name) or DistReg(d,N)", "name"),
    "Diamond": ("Diamond", None),
}
_OPERATORS = "L(G), L^n(G), Bi(G), T(G), G^n, G*n, A x B"
_ACCEPTED = ", ".join(v[0] for v in _FAMILIES.values()) + "; operators " + _OPERATORS


# ---- syntax tree ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Leaf:
    family: str
    args: tuple            # ints; C/DC: (m, (a, ...)); DistReg: (name,) or (d, N); Diamond: ()
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


def _print(node) -> str:
    """Canonical text of a syntax tree (the names generators and expansions give)."""
    if isinstance(node, Leaf):
        if node.family == "Diamond":
            return "Diamond"
        if node.family in ("C", "DC"):
            m, gens = node.args
            return f"{node.family}({m},{{{','.join(map(str, gens))}}})"
        return f"{node.family}({','.join(map(str, node.args))})"
    if isinstance(node, Product):
        return " x ".join(_wrap(_print(f)) for f in node.factors)
    inner = _print(node.child)
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
            if kind == "name" and value[0] == "x" and len(value) > 1 and self.tokens \
                    and (self.tokens[-1][0] == "int" or self.tokens[-1][1] == ")"):
                # "K(3)xK(2)": an 'x' right after an operand is the product sign
                self.tokens.append(("name", "x", pos))
                value, pos = value[1:], pos + 1
            self.tokens.append((kind, int(value) if kind == "int" else value, pos))
            i = m.end()
            if kind == "name" and value == "DistReg":
                i = self.raw_argument(i)
        self.tokens.append(("end", None, len(text)))
        self.i = 0

    def raw_argument(self, i: int) -> int:
        """DistReg's argument is a catalog name: the raw text up to the matching ')'."""
        j = len(self.text) - len(self.text[i:].lstrip())
        if j == len(self.text) or self.text[j] != "(":
            self.fail(j, "expected '(' after DistReg")
        depth = 0
        for k in range(j, len(self.text)):
            depth += {"(": 1, ")": -1}.get(self.text[k], 0)
            if depth == 0:
                self.tokens += [("sym", "(", j), ("raw", self.text[j + 1:k], j + 1),
                                ("sym", ")", k)]
                return k + 1
        self.fail(len(self.text), "expected ')' closing DistReg(")

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
            self.fail(pos, f"expected a topology, found {found} (accepted: {_ACCEPTED})")
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
        if v not in _FAMILIES:
            self.fail(pos, f"unknown family {v!r} (accepted: {_ACCEPTED})")
        if v == "Diamond":
            return Leaf("Diamond", (), pos)
        if v == "DistReg":
            return Leaf("DistReg", self.distreg_args(), pos)
        shape, arity = _FAMILIES[v][0], _FAMILIES[v][1]
        self.expect("(", f"'(' after {v}")
        if arity == "set":
            m = self.integer(f"the node count of {shape}")
            self.expect(",", f"',' in {shape}")
            gens = self.int_set(shape)
            self.expect(")", f"')' closing {shape}")
            if v == "C":       # a and m−a give the same bidirectional arcs
                gens = tuple(sorted(min(a, m - a) if 0 < a < m else a for a in gens))
            else:
                gens = tuple(sorted(gens))
            return Leaf(v, (m, gens), pos)
        args = [self.integer(f"an integer argument of {shape}")]
        while self.at(","):
            self.next()
            args.append(self.integer(f"an integer argument of {shape}"))
        lo, hi = arity
        if len(args) < lo or (hi is not None and len(args) > hi):
            self.fail(self.peek()[2], f"{v} takes {shape}, got {len(args)} argument(s)")
        self.expect(")", f"')' closing {shape}")
        return Leaf(v, tuple(args), pos)

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

    def distreg_args(self) -> tuple:
        """DistReg(name) or DistReg(d,N)."""
        self.expect("(", "'(' after DistReg")
        _, raw, pos = self.next()
        self.expect(")", "')' closing DistReg(")
        raw = " ".join(raw.split())
        if not raw:
            self.fail(pos, "DistReg needs a catalog name or a degree and size, "
                           "e.g. DistReg(4,32)")
        sizes = re.fullmatch(r"(\d+) ?, ?(\d+)", raw)
        return (int(sizes.group(1)), int(sizes.group(2))) if sizes else (raw,)


class _PositionedError(TopofinderError):
    """A TopofinderError that already says where in the expression it arose."""


def _syntax(text: str):
    if not isinstance(text, str) or not text.strip():
        raise TopofinderError("empty topology expression; give one such as 'Pi(4,1024)' or "
                              "'L^3(C(16,{3,4}))'")
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise TopofinderError("topology expression nested too deeply") from None


def canonical(text: str) -> str:
    """The canonical printed form of an expression (nothing is built)."""
    return _print(_syntax(text))


# ---- size prediction -----------------------------------------------------------------------
def _capped_pow(base: int, exp: int) -> int:
    """base**exp, but stops growing once past the node limit (so 2**10**9 is instant)."""
    if base <= 1:
        return base ** min(exp, 1)
    result = 1
    for _ in range(exp):
        result *= base
        if result > MAX_NODES * MAX_ARCS:
            return result
    return result


class _Builder:
    """Predicts sizes, then builds bottom-up, one Topology per distinct sub-expression."""

    def __init__(self, text: str):
        self.text = text
        self.built: dict[str, Topology] = {}

    def context(self, node) -> str:
        return "" if _print(node) == self.text.strip() else \
            f" (in {self.text!r} at column {node.pos + 1})"

    def size(self, node) -> tuple[int, int]:
        """Upper bounds (N, d) of a sub-expression; TopofinderError if past the limits."""
        if isinstance(node, Leaf):
            n, d = self.leaf_size(node)
        elif isinstance(node, Product):
            sizes = [self.size(f) for f in node.factors]
            n, d = prod(s[0] for s in sizes), sum(s[1] for s in sizes)
        else:
            n, d = self.size(node.child)
            if node.op == "L" and node.k > MAX_LINE_POWER:
                raise _PositionedError(f"line-graph power {node.k} is too large; accepted: "
                                       f"1..{MAX_LINE_POWER}{self.context(node)}")
            if node.op == "L":
                n = n * _capped_pow(d, node.k)
            elif node.op == "*":
                n, d = n * node.k, d * node.k
            elif node.op == "^":
                n, d = _capped_pow(n, node.k), d * node.k
            elif node.op == "Bi":
                d = 2 * d
        if n > MAX_NODES:
            raise _PositionedError(f"{_print(node)} would have {_short(n)} nodes; topofinder "
                                  f"handles N <= {MAX_NODES}{self.context(node)}")
        if n * d > MAX_ARCS:
            raise _PositionedError(f"{_print(node)} would have {_short(n * d)} arcs (N·d); "
                                  f"topofinder handles at most {MAX_ARCS}{self.context(node)}")
        return n, d

    def leaf_size(self, leaf: Leaf) -> tuple[int, int]:
        f, a = leaf.family, leaf.args
        if f == "K":
            return (a[0], a[0] - 1) if len(a) == 1 else (2 * a[0], a[0])
        if f == "H":
            return _capped_pow(a[1], a[0]), a[0] * (a[1] - 1)
        if f == "Kautz":
            if a[1] > MAX_LINE_POWER:
                raise _PositionedError(f"Kautz(d,n) = L^n(K(d+1)) needs n <= {MAX_LINE_POWER}, "
                                       f"got n = {a[1]}{self.context(leaf)}")
            return _capped_pow(a[0], a[1]) * (a[0] + 1), a[0]
        if f == "Pi":
            return a[1], a[0]
        if f in ("C", "DC"):
            return a[0], len(a[1]) * (2 if f == "C" else 1)
        if f in ("BiRing", "UniRing"):
            return a[1], a[0]
        if f in ("Torus", "TwistedTorus"):
            return prod(a), 2 * len(a)
        if f == "Hypercube":
            return _capped_pow(2, a[0]), a[0]
        if f in ("DBJ", "DBJMod"):
            return _capped_pow(a[0], a[1]), a[0]
        if f == "DistReg" and len(a) == 2:
            return a[1], a[0]
        g = self.build(leaf)                   # a small catalog graph: its size is its own
        return g.n, int(max(g.out_degrees.max(), g.in_degrees.max()))

    def build(self, node) -> Topology:
        key = _print(node)
        if key not in self.built:
            try:
                self.built[key] = self.make(node, key)
            except _PositionedError:
                raise
            except TopofinderError as exc:
                raise _PositionedError(f"{exc}{self.context(node)}") from None
        return self.built[key]

    def make(self, node, key: str) -> Topology:
        from topofinder import expansions as ex

        if isinstance(node, Leaf):
            g = _make_leaf(node.family, node.args, key)
            return g if g.expr == key else g.renamed(key)
        if isinstance(node, Product):
            return ex.cartesian_product(*[self.build(f) for f in node.factors])
        child = self.build(node.child)
        if node.op == "L":
            return ex.line_graph(child, node.k)
        if node.op == "*":
            return ex.degree_expansion(child, node.k)
        if node.op == "^":
            return ex.cartesian_power(child, node.k)
        if node.op == "Bi":
            return ex.bidirectional(child)
        return child.transpose()


def _short(n: int) -> str:
    return str(n) if n < 10 ** 15 else "more than 10^15"


def _make_leaf(family: str, a: tuple, key: str) -> Topology:
    from topofinder import generators as gen

    simple = {"H": gen.hamming, "Kautz": gen.kautz, "Pi": gen.generalized_kautz,
              "BiRing": gen.bi_ring, "UniRing": gen.uni_ring, "Torus": gen.torus,
              "TwistedTorus": gen.twisted_torus, "Hypercube": gen.hypercube,
              "DBJ": gen.de_bruijn}
    if family in simple:
        return simple[family](*a)
    if family == "K":
        return gen.complete(a[0]) if len(a) == 1 else gen.complete_bipartite(*a)
    if family == "C":
        return gen.circulant(a[0], list(a[1]))
    if family == "DC":
        return gen.directed_circulant(a[0], list(a[1]))
    if family == "DistReg":
        return _distance_regular(a)
    return _catalog(key)                       # Diamond, DBJMod(d,n)


def _distance_regular(a: tuple) -> Topology:
    try:
        drg = importlib.import_module("topofinder.generators.distance_regular")
    except ModuleNotFoundError as exc:
        if exc.name != "topofinder.generators.distance_regular":
            raise
        raise TopofinderError("DistReg(...) needs the distance-regular catalog "
                              "(topofinder.generators.distance_regular), which is not "
                              "installed") from None
    try:
        if len(a) == 2:
            return drg.distance_regular_by_size(*a)
        return drg.distance_regular(a[0])
    except KeyError:
        names = ", ".join(getattr(drg, "CATALOG_NAMES", []))
        raise TopofinderError(f"DistReg({','.join(map(str, a))}) is not in the catalog; "
                              f"accepted names: {names}") from None


def _catalog(key: str) -> Topology:
    try:
        from topofinder.catalog import catalog_topology
    except ImportError as exc:
        if exc.name not in ("topofinder.catalog", None):
            raise
        raise TopofinderError(f"{key} is a search-found base topology from the catalog "
                              f"(topofinder.catalog), which is not available yet") from None
    try:
        return catalog_topology(key)
    except KeyError:
        raise TopofinderError(f"{key} is not in the catalog of search-found bases") from None


# ---- public API ----------------------------------------------------------------------------
def predicted_size(text: str) -> tuple[int, int]:
    """(N, d) of an expression without building it (catalog leaves are built: they are
    small); exact for regular topologies, an upper bound otherwise."""
    tree = _syntax(text)
    return _Builder(text).size(tree)


def parse(text: str) -> Topology:
    """Build the topology named by an expression; its ``expr`` is the canonical form."""
    tree = _syntax(text)
    builder = _Builder(text)
    try:
        builder.size(tree)
        return builder.build(tree)
    except RecursionError:
        raise TopofinderError("topology expression nested too deeply") from None


def load_topology(expr_or_path: str) -> Topology:
    """A topology from an existing file (edge list, node-link JSON, GraphML; see
    topofinder.export.topology.read_topology) or else from an expression."""
    if os.path.isfile(expr_or_path):
        from topofinder.export.topology import read_topology
        return read_topology(expr_or_path)
    try:
        return parse(expr_or_path)
    except TopofinderError:
        if "/" in expr_or_path or "." in expr_or_path or os.sep in expr_or_path:
            raise TopofinderError(
                f"no such topology file: {expr_or_path} (give an existing edge list, JSON or "
                f"GraphML file, or an expression such as 'Pi(4,1024)')") from None
        raise
