"""Build the topology an expression names (paper 001 Table 9 families, the catalog, the
expansion operators) or read it from a file; sizes are predicted and checked first.

The grammar lives in :mod:`topofinder.families.syntax`; this module evaluates its syntax tree:
leaves by their entries in :mod:`topofinder.families.registry`, operators by
:mod:`topofinder.model.operations`.
"""

from __future__ import annotations

import os
from math import prod

from topofinder.errors import TopofinderError
from topofinder.families.registry import FAMILIES, MAX_ARCS, MAX_LINE_POWER, capped_pow
from topofinder.families.syntax import Leaf, PositionedError, Product, parse_tree, to_text
from topofinder.model import operations
from topofinder.model.failures import degrade, split_expression
from topofinder.model.files import read_topology
from topofinder.model.needs import Need
from topofinder.model.topology import MAX_NODES, Topology


# ---- size prediction -----------------------------------------------------------------------
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
                n = n * capped_pow(d, node.k)
            elif node.op == "*":
                n, d = n * node.k, d * node.k
            elif node.op == "^":
                n, d = capped_pow(n, node.k), d * node.k
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
        """The family's size rule; a family without one (small catalog graphs) is built."""
        try:
            size = FAMILIES[leaf.family].size(*leaf.args)
        except PositionedError:
            raise
        except TopofinderError as exc:
            raise PositionedError(f"{exc}{self.context(leaf)}") from None
        if size is not None:
            return size
        g = self.build(leaf)
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
            g = FAMILIES[node.family].build(*node.args)
            return g if g.expr == key else g.renamed(key)
        if isinstance(node, Product):
            return operations.cartesian_product(*[self.build(f) for f in node.factors])
        child = self.build(node.child)
        if node.op == "L":
            return operations.line_graph(child, node.k)
        if node.op == "*":
            return operations.degree_expansion(child, node.k)
        if node.op == "^":
            return operations.cartesian_power(child, node.k)
        if node.op == "Bi":
            return operations.bidirectional(child)
        return child.transpose()


def _short(n: int) -> str:
    return str(n) if n < 10 ** 15 else "more than 10^15"


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


def load_topology(expr_or_path: str, undirected: bool | None = None,
                  need: Need | None = None) -> Topology:
    """A topology from an existing file (edge list, node-link JSON, GraphML; see
    topofinder.model.files.read_topology, which ``undirected`` is passed to) or else from an
    expression. ``Fail(EXPR; ITEMS)`` is EXPR after those failures (model/failures.py).
    ``need``: what the command needs of a file's connectivity (model/needs.py). A path that
    exists and is not a directory (a regular file, or a pipe such as ``<(cat f.edges)``) is
    read as a file."""
    failed = split_expression(expr_or_path)
    if failed is not None:
        return degrade(load_topology(failed[0], undirected), failed[1])
    if os.path.exists(expr_or_path) and not os.path.isdir(expr_or_path):
        return read_topology(expr_or_path, undirected, need)
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
