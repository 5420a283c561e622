"""The bench cases of DESIGN §13, registered with :func:`topofinder.bench.case`."""

from topofinder.bench import case
from topofinder.expansions import line_graph
from topofinder.expr import parse
from topofinder.generators import circulant, generalized_kautz


@case("build L^3(C(16,{3,4})) (N=1024)", 0.2, group="foundation", repeat=5)
def _build_line_graph(_):
    line_graph(circulant(16, [3, 4]), 3)


@case("build Pi(4,2000)", 0.2, group="foundation", repeat=5)
def _build_pi(_):
    generalized_kautz(4, 2000)


@case("parse L^3(C(16,{3,4})) (N=1024)", 0.2, group="foundation", repeat=5)
def _parse_line_graph(_):
    parse("L^3(C(16,{3,4}))")


@case("parse Pi(4,2000)", 0.2, group="foundation", repeat=5)
def _parse_pi(_):
    parse("Pi(4,2000)")
