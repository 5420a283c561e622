"""Build the topology an expression names (paper 001 Table 9 families, the catalog, the
expansion operators) or read it from a file; sizes are predicted and checked first.

The grammar lives in :mod:`topofinder.model.syntax`; this module evaluates its syntax tree:
leaves by the family generators and the catalog, operators by :mod:`topofinder.model.operations`.
"""

from __future__ import annotations

import os
from math import prod

from topofinder import families as gen
from topofinder.families import baselines
from topofinder.errors import TopofinderError
from topofinder.families.distance_regular import (
    CATALOG_NAMES, distance_regular, distance_regular_by_size,
)
from topofinder.families.catalog import catalog_topology
from topofinder.model import operations as ex
from topofinder.model.failures import degrade, split_expression
from topofinder.model.files import read_topology
from topofinder.model.syntax import (
    MAX_ARCS, MAX_LINE_POWER, Leaf, PositionedError, Product, parse_tree, to_text,
)
from topofinder.model.topology import MAX_NODES, Topology


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
        return "" if to_text(node) == self.text.strip() else \
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
                raise PositionedError(f"line-graph power {node.k} is too large; accepted: "
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
            raise PositionedError(f"{to_text(node)} would have {_short(n)} nodes; topofinder "
                                  f"handles N <= {MAX_NODES}{self.context(node)}")
        if n * d > MAX_ARCS:
            raise PositionedError(f"{to_text(node)} would have {_short(n * d)} arcs (N·d); "
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
                raise PositionedError(f"Kautz(d,n) = L^n(K(d+1)) needs n <= {MAX_LINE_POWER}, "
                                       f"got n = {a[1]}{self.context(leaf)}")
            return _capped_pow(a[0], a[1]) * (a[0] + 1), a[0]
        if f == "Pi":
            return a[1], a[0]
        if f in ("C", "DC"):
            return a[0], len(a[1]) * (2 if f == "C" else 1)
        if f == "Aff":
            return a[0], len(a[2])
        if f in ("BiRing", "UniRing", "ShiftedRing"):
            return a[1], a[0]
        if f == "DBT":
            return a[0], 4
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
        key = to_text(node)
        if key not in self.built:
            try:
                self.built[key] = self.make(node, key)
            except PositionedError:
                raise
            except TopofinderError as exc:
                raise PositionedError(f"{exc}{self.context(node)}") from None
        return self.built[key]

    def make(self, node, key: str) -> Topology:
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
    simple = {"H": gen.hamming, "Kautz": gen.kautz, "Pi": gen.generalized_kautz,
              "BiRing": gen.bi_ring, "UniRing": gen.uni_ring, "Torus": gen.torus,
              "TwistedTorus": gen.twisted_torus, "Hypercube": gen.hypercube,
              "DBJ": gen.de_bruijn, "ShiftedRing": baselines.shifted_ring,
              "DBT": baselines.double_binary_tree}
    if family in simple:
        return simple[family](*a)
    if family == "K":
        return gen.complete(a[0]) if len(a) == 1 else gen.complete_bipartite(*a)
    if family == "C":
        return gen.circulant(a[0], list(a[1]))
    if family == "DC":
        return gen.directed_circulant(a[0], list(a[1]))
    if family == "Aff":
        return gen.affine(a[0], a[1], list(a[2]))
    if family == "DistReg":
        return _distance_regular(a)
    return _catalog(key)                       # Diamond, DBJMod(d,n)


def _distance_regular(a: tuple) -> Topology:
    try:
        if len(a) == 2:
            return distance_regular_by_size(*a)
        return distance_regular(a[0])
    except KeyError:
        names = ", ".join(CATALOG_NAMES)
        raise TopofinderError(f"DistReg({','.join(map(str, a))}) is not in the catalog; "
                              f"accepted names: {names}") from None


def _catalog(key: str) -> Topology:
    try:
        return catalog_topology(key)
    except KeyError:
        raise TopofinderError(f"{key} is not in the catalog of search-found bases") from None


# ---- public API ----------------------------------------------------------------------------
def predicted_size(text: str) -> tuple[int, int]:
    """(N, d) of an expression without building it (catalog leaves are built: they are
    small); exact for regular topologies, an upper bound otherwise."""
    tree = parse_tree(text)
    return _Builder(text).size(tree)


def document_topology(value, where: str) -> Topology:
    """The topology a document's ``topology`` field names (a schedule, MSCCL XML or search
    result written by export): an expression, or a topology file. The file must read as a
    topology; when it does not, the error names the file but never quotes its content (the
    field may name any file, such as /etc/passwd)."""
    if not isinstance(value, str) or not value.strip():
        raise TopofinderError(f"{where}: the 'topology' field is not a topology expression or "
                              f"file name")
    failed = split_expression(value)
    if failed is not None:
        return degrade(document_topology(failed[0], where), failed[1])
    if os.path.exists(value):
        if not os.path.isfile(value):
            raise TopofinderError(f"{where}: its topology {ascii(value[:200])} is not a "
                                  f"regular file")
        try:
            return read_topology(value)
        except TopofinderError:
            raise TopofinderError(f"{where}: its topology file {ascii(value[:200])} is not a "
                                  f"readable topology file (edge list, JSON or GraphML)") from None
    try:
        return parse(value)
    except TopofinderError:
        raise TopofinderError(f"{where}: its topology {ascii(value[:200])} is neither an existing "
                              f"topology file nor a valid expression") from None


def parse(text: str) -> Topology:
    """Build the topology named by an expression; its ``expr`` is the canonical form."""
    tree = parse_tree(text)
    builder = _Builder(text)
    try:
        builder.size(tree)
        return builder.build(tree)
    except RecursionError:
        raise TopofinderError("topology expression nested too deeply") from None


def load_topology(expr_or_path: str, undirected: bool | None = None) -> Topology:
    """A topology from an existing file (edge list, node-link JSON, GraphML; see
    topofinder.model.files.read_topology, which ``undirected`` is passed to) or else from an
    expression. ``Fail(EXPR; ITEMS)`` is EXPR after those failures (model/failures.py)."""
    failed = split_expression(expr_or_path)
    if failed is not None:
        return degrade(load_topology(failed[0], undirected), failed[1])
    if os.path.isfile(expr_or_path):
        return read_topology(expr_or_path, undirected)
    if undirected:
        raise TopofinderError(f"--undirected applies to topology files; {expr_or_path!r} is "
                              "not an existing file")
    try:
        return parse(expr_or_path)
    except TopofinderError:
        if "/" in expr_or_path or "." in expr_or_path or os.sep in expr_or_path:
            raise TopofinderError(
                f"no such topology file: {expr_or_path} (give an existing edge list, JSON or "
                f"GraphML file, or an expression such as 'Pi(4,1024)')") from None
        raise
