"""Expression language (DESIGN §3) and topology files: parse/print round trips, sizes,
error positions, loading."""

import json
import os

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topofinder import families as generators
from topofinder.errors import TopofinderError
from topofinder.model.operations import (
    bidirectional, cartesian_power, cartesian_product, degree_expansion, line_graph,
)
from topofinder.model.files import read_topology, write_topology
from topofinder.families.build import load_topology, parse, predicted_size
from topofinder.families.syntax import canonical
from topofinder.families import (
    circulant, complete, complete_bipartite, de_bruijn, generalized_kautz, torus, uni_ring,
)
from topofinder.model.topology import Topology

DESIGN_EXAMPLES = ["K(5)", "K(4,4)", "H(2,3)", "Kautz(4,2)", "Pi(4,1024)", "C(16,{3,4})",
                   "DC(6,{1,2,3,4})", "BiRing(2,8)", "UniRing(1,4)", "Torus(4,8,8)",
                   "Hypercube(10)", "DBJ(4,4)", "L(K(4,4))", "L^3(C(16,{3,4}))", "K(3)*2",
                   "K(3)^2", "(K(2) x UniRing(1,3))^2", "K(2) x K(3)", "Bi(DBJ(2,3))",
                   "T(Pi(4,64))", "DistReg(4,32)", "L^2(DistReg(4,32))", "TwistedTorus(8,4,4)",
                   "BiRing(2,8) x UniRing(1,4)^2", "(UniRing(1,4) x UniRing(1,8))^2"]


@pytest.mark.parametrize("expr", DESIGN_EXAMPLES)
def test_design_examples_round_trip(expr):
    g = parse(expr)
    assert str(g) == expr == canonical(expr)
    assert parse(str(g)).same_arcs(g)
    assert predicted_size(expr) == (g.n, g.degree)


def test_printed_forms_of_generators_and_expansions_parse_back():
    a, b = circulant(7, [2, 3]), uni_ring(1, 3)
    built = [line_graph(circulant(16, [3, 4]), 3), cartesian_power(complete(3), 2),
             cartesian_power(cartesian_product(a, b), 2), degree_expansion(a, 2),
             degree_expansion(cartesian_product(a, b), 2), bidirectional(de_bruijn(2, 3)),
             generalized_kautz(3, 10).transpose(), line_graph(cartesian_product(a, b)),
             cartesian_product(line_graph(a), degree_expansion(b, 2), torus(2, 3)),
             line_graph(line_graph(complete_bipartite(2)), 2),
             cartesian_product(cartesian_product(a, b), complete(2))]
    for g in built:
        p = parse(str(g))
        assert p.same_arcs(g), str(g)
        assert str(p) == canonical(str(g))
    assert str(built[0]) == "L^3(C(16,{3,4}))" and str(built[2]) == "(C(7,{2,3}) x UniRing(1,3))^2"
    assert str(built[4]) == "(C(7,{2,3}) x UniRing(1,3))*2"
    # (A x B) x C has the same row-major numbering as A x B x C, printed flat
    assert str(parse(str(built[-1]))) == "C(7,{2,3}) x UniRing(1,3) x K(2)"


@pytest.mark.parametrize("variant,expected", [
    ("  L^3( C( 16 , { 4 , 3 } ) )  ", "L^3(C(16,{3,4}))"),
    ("C(16,{13,4})", "C(16,{3,4})"),                 # ±13 = ∓3 (mod 16): same arcs
    ("DC(6,{4,1,3,2})", "DC(6,{1,2,3,4})"),
    ("L(L(L(C(16,{3,4}))))", "L^3(C(16,{3,4}))"),
    ("L(L^2(K(4,4)))", "L^3(K(4,4))"),
    ("L^1(K(4,4))", "L(K(4,4))"),
    ("K(3) □ K(2)", "K(3) x K(2)"), ("K(3) × K(2)", "K(3) x K(2)"), ("K(3)xK(2)", "K(3) x K(2)"),
    ("K(3)□2", "K(3)^2"), ("K(3)^□2", "K(3)^2"), ("((K(3)))^2", "K(3)^2"),
    ("(K(2) x K(3)) x K(4)", "K(2) x K(3) x K(4)"), ("K(2) x (K(3) x K(4))", "K(2) x K(3) x K(4)"),
    ("DistReg( 4 , 32 )", "DistReg(4,32)"),
])
def test_notation_variants_have_one_canonical_form(variant, expected):
    assert canonical(variant) == expected
    assert parse(variant).same_arcs(parse(expected))


def test_postfix_binds_tighter_than_product():
    assert parse("K(2) x K(3)^2").n == 2 * 9
    assert parse("(K(2) x K(3))^2").n == 36
    assert parse("K(2) x K(3)*2").n == 2 * 6 and parse("K(2) x K(3)*2").degree == 1 + 4
    assert parse("K(3)*2^2").n == 36 and parse("K(3)*2^2").degree == 2 * 2 * 2


def test_transpose_reverses_every_arc():
    g, t = parse("Pi(3,10)"), parse("T(Pi(3,10))")
    assert t.same_arcs(Topology(g.n, g.dst, g.src)) and str(t) == "T(Pi(3,10))"
    assert parse("T(T(Pi(3,10)))").same_arcs(g)


def test_distance_regular_names_route_to_the_catalog():
    for name in ["K55-I", "IncPG2-3", "Octahedron"]:
        g = parse(f"DistReg({name})")
        assert str(g) == f"DistReg({name})" and parse(str(g)).same_arcs(g)
    g = parse("L(DistReg(K55-I))")                 # K(5,5) minus a perfect matching: 10 nodes
    assert g.n == 10 * 4 and str(g) == "L(DistReg(K55-I))"
    with pytest.raises(TopofinderError, match="NoSuchGraph"):
        parse("DistReg(NoSuchGraph)")


def test_search_found_bases_route_to_the_catalog():
    # Diamond (N=8, d=2, Fig. 19) and DBJMod come from topofinder.families.catalog when it has them
    for expr, n, d in [("Diamond", 8, 2), ("DBJMod(2,4)", 16, 2)]:
        try:
            g = parse(expr)
        except TopofinderError as exc:
            assert expr in str(exc) and "\n" not in str(exc)
        else:
            assert (g.n, g.degree, str(g)) == (n, d, expr)


# ---- hypothesis: generated expressions round-trip ---------------------------------------
LEAVES = [("K(3)", 3, 2), ("K(2)", 2, 1), ("K(2,2)", 4, 2), ("H(2,2)", 4, 2),
          ("Kautz(2,1)", 6, 2), ("Pi(2,5)", 5, 2), ("Pi(3,4)", 4, 3), ("C(7,{2,3})", 7, 4),
          ("C(6,{3,1})", 6, 4), ("DC(5,{2,1})", 5, 2), ("BiRing(2,4)", 4, 2),
          ("UniRing(1,3)", 3, 1), ("UniRing(2,2)", 2, 2), ("Torus(3,2)", 6, 4),
          ("Hypercube(2)", 4, 2), ("DBJ(2,2)", 4, 2), ("TwistedTorus(4,2)", 8, 4),
          ("DistReg(Octahedron)", 6, 4)]
SPACE = st.sampled_from(["", " ", "  "])


def _extend(children):
    """One operator over generated sub-expressions (text, N, d); children parenthesised."""
    def unary(op):
        def make(t):
            text, n, d = t
            return {"L": (f"L({text})", n * d, d), "L2": (f"L^2({text})", n * d * d, d),
                    "Bi": (f"Bi({text})", n, 2 * d), "T": (f"T( {text} )", n, d),
                    "^2": (f"({text})^2", n * n, 2 * d), "*2": (f"({text})*2", 2 * n, 2 * d),
                    "()": (f"({text})", n, d)}[op]
        return make
    unaries = [children.map(unary(op)) for op in ["L", "L2", "Bi", "T", "^2", "*2", "()"]]
    product = st.tuples(children, children, st.sampled_from([" x ", "x", " □ ", "×"])).map(
        lambda p: (f"({p[0][0]}){p[2]}({p[1][0]})", p[0][1] * p[1][1], p[0][2] + p[1][2]))
    return st.one_of(*unaries, product)


EXPRESSIONS = st.recursive(st.sampled_from(LEAVES), _extend, max_leaves=4).filter(
    lambda t: t[1] <= 1500 and t[1] * t[2] <= 15000)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(EXPRESSIONS, SPACE)
def test_generated_expressions_round_trip(item, pad):
    text, n, d = item
    g = parse(pad + text + pad)
    assert (g.n, g.degree) == (n, d) == predicted_size(text)
    assert str(g) == canonical(text) == canonical(str(g))
    again = parse(str(g))
    assert again.same_arcs(g) and str(again) == str(g)


# ---- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,column", [
    ("C(16,{3,4}", 11), ("K(3) x Q(2)", 8), ("K(3) x", 7), ("L^3(C(16,{3,4})))", 17),
    ("K(3)@", 5), ("Torus()", 7), ("K(-1)", 3), ("L^0(K(3))", 3), ("K(3) K(3)", 6),
    ("C(8,{1;2})", 7), ("Pi(4)", 5), ("Hypercube(1,2)", 14),
])
def test_bad_expression_points_at_the_offending_character(text, column):
    with pytest.raises(TopofinderError) as info:
        parse(text)
    msg = str(info.value)
    assert "\n" not in msg and f"at column {column}:" in msg
    marked = (f"{text[:column - 1]} >>{text[column - 1:]}" if column <= len(text)
              else f"{text} >>(end)").strip()
    assert msg.endswith(marked)


def test_unknown_family_lists_what_is_accepted():
    with pytest.raises(TopofinderError, match=r"unknown family 'Foo'.*Kautz\(d,n\).*Pi\(d,m\)"):
        parse("Foo(3)")


@pytest.mark.parametrize("text,fragment", [
    ("Hypercube(40)", "1099511627776 nodes"), ("L^12(K(5))", "nodes"),
    ("K(1000)*1000", "arcs"), ("K(2) x Hypercube(30)", "nodes"), ("H(1000000000,2)", "nodes"),
    ("K(3)^100000000", "nodes"), ("L^100000(UniRing(1,3))", "line-graph power"),
])
def test_oversize_expressions_are_refused_before_anything_is_built(text, fragment, monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("built before the size check")
    for name in ["hypercube", "complete", "hamming", "uni_ring"]:
        monkeypatch.setattr(generators, name, no_build)
    with pytest.raises(TopofinderError, match=fragment) as info:
        parse(text)
    assert "\n" not in str(info.value)
    with pytest.raises(TopofinderError):
        predicted_size(text)


def test_family_errors_inside_an_expression_say_where():
    with pytest.raises(TopofinderError, match=r"gcd.*at column 3") as info:
        parse("L(C(16,{2,4}))")
    assert "\n" not in str(info.value)
    with pytest.raises(TopofinderError, match="even degree"):
        parse("BiRing(3,8)")


# ---- topology files --------------------------------------------------------------------------
HETERO = Topology(4, [0, 0, 1, 2, 3, 3], [1, 1, 2, 3, 0, 3], capacity=[1, 2, 3, 1, 4, 1])


@pytest.mark.parametrize("fmt", ["edgelist", "json", "graphml"])
@pytest.mark.parametrize("topo", [HETERO, parse("L(C(7,{2,3}))"), parse("C(6,{3,1})")])
def test_write_read_round_trip(fmt, topo, tmp_path):
    path = str(tmp_path / f"t.{fmt}")
    write_topology(topo, fmt, path)
    back = load_topology(path)
    assert back.same_arcs(topo) and str(back) == path
    assert back.heterogeneous == topo.heterogeneous and back.self_loops == topo.self_loops


def test_edge_list_with_comments_and_foreign_labels(tmp_path):
    path = tmp_path / "cabling.txt"
    path.write_text("# my cluster\n10 20\n20 30  # a comment\n\n30 10 2\n")
    g = load_topology(str(path))
    assert g.same_arcs(Topology(3, [0, 1, 2], [1, 2, 0], capacity=[1, 1, 2]))
    named = tmp_path / "hosts.txt"
    named.write_text("gpu-b gpu-a\ngpu-a gpu-b\n")
    assert load_topology(str(named)).same_arcs(Topology(2, [0, 1], [1, 0]))


def test_undirected_node_link_json_gives_arc_pairs(tmp_path):
    path = tmp_path / "ring.json"
    path.write_text(json.dumps(nx.node_link_data(nx.cycle_graph(5), edges="edges")))
    g = load_topology(str(path))
    assert g.same_arcs(circulant(5, [1])) and g.bidirectional


@pytest.mark.parametrize("name,content,where", [
    ("bad.txt", "0 1\n1 2 3 4\n", "bad.txt:2:"),
    ("cap.txt", "0 1\n1 0 0\n", "cap.txt:2:"),
    ("empty.txt", "# nothing\n", "no arcs"),
    ("one.txt", "0 0\n", "N >= 2"),
    ("bad.json", '{"nodes": [\n  {"id": 0},\n  oops\n]}', "bad.json:3:"),
    ("shape.json", '{"nodes": [{"id": 0}], "edges": [{"source": 0}]}', "edges[0]"),
    ("ghost.json", '{"nodes": [{"id": 0}, {"id": 1}], "edges": [{"source": 0, "target": 7}]}',
     "undeclared node"),
    ("bad.graphml", "<graphml>\n<graph>\n</grph>", "bad.graphml:3:"),
])
def test_malformed_files_name_the_file_and_line(name, content, where, tmp_path):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopofinderError) as info:
        read_topology(str(path))
    assert where in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_reported_as_such():
    with pytest.raises(TopofinderError, match="no such topology file: nowhere/t.txt"):
        load_topology("nowhere/t.txt")


def test_write_is_atomic(tmp_path):
    g = parse("K(3)")
    with pytest.raises(TopofinderError, match="unknown topology format 'dot'.*edgelist"):
        write_topology(g, "dot", str(tmp_path / "x.dot"))
    with pytest.raises(TopofinderError, match="cannot write"):
        write_topology(g, "edgelist", str(tmp_path / "missing" / "x.txt"))
    (tmp_path / "adir").mkdir()
    with pytest.raises(TopofinderError, match="cannot write"):
        write_topology(g, "json", str(tmp_path / "adir"))      # rename onto a directory fails
    assert sorted(os.listdir(tmp_path)) == ["adir"]             # no temporary file left behind
    assert os.listdir(tmp_path / "adir") == []
