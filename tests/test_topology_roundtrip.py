"""Export-then-read round trips of every topology format keep the topology and its names
(issue 40), hostile names included: spaces, quotes, '#', unicode, words of the edge-list
format (``switch``, ``node_bandwidth``), numbers as names in another order, leading dashes."""

import json

import networkx as nx
import pytest

from topofinder.cli.main import main
from topofinder.model.files import FORMATS, read_topology, topology_text
from topofinder.model.topology import Topology

HOSTILE = [
    ["switch", "h1", "h2"],
    ["a b", 'q"uote', '"lead', "end\\", "x#y", "#"],
    ["ünï", "节点", "Ωmega", "e\u0301"],
    ["3", "1", "2", "0"],                       # numbers as names, not in rank order
    ["-1", "--help", "-", "c=1/2"],
    ["node_bandwidth", "SWITCH", "node", "# node 0 x"],
]


def _ring(names, switches=None, node_cap=None):
    n = len(names)
    return Topology(n, list(range(n)) + [1], [(i + 1) % n for i in range(n)] + [0],
                    capacity=[1 + i % 3 for i in range(n)] + [5], labels=names,
                    switches=switches, node_cap=node_cap)


def _same(a: Topology, b: Topology) -> None:
    assert b.same_arcs(a)
    assert [b.label(i) for i in range(b.n)] == [a.label(i) for i in range(a.n)]
    assert (b.switches is None) == (a.switches is None)
    if a.switches is not None:
        assert b.switches.tolist() == a.switches.tolist()
    assert b.node_cap == a.node_cap


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("names", HOSTILE, ids=range(len(HOSTILE)))
def test_round_trip_keeps_arcs_and_names(tmp_path, fmt, names):
    topo = _ring(names, switches=[0] if len(names) > 3 else None,
                 node_cap=3 if fmt != "graphml" else None)
    path = tmp_path / f"t.{fmt}"
    path.write_text(topology_text(topo, fmt), encoding="utf-8")
    _same(topo, read_topology(str(path)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_undirected_json_through_the_cli(tmp_path, capsys, fmt):
    """An undirected node-link JSON (networkx) with a node named ``switch``, exported as
    every format by the CLI, reads back as the same arcs and names without --undirected."""
    g = nx.Graph()
    g.add_edges_from([("switch", "h1"), ("switch", "h2"), ("h1", "h2 x")])
    src = tmp_path / "in.json"
    src.write_text(json.dumps(nx.node_link_data(g, edges="edges")))
    out = tmp_path / f"out.{fmt}"
    assert main(["export", str(src), "--what", "topology", "--format", fmt, "-o", str(out)]) == 0
    capsys.readouterr()
    _same(read_topology(str(src)), read_topology(str(out)))
    assert main(["score", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["N"] == 4


def test_quoted_keyword_is_a_node_not_a_directive(tmp_path):
    f = tmp_path / "k.edges"
    f.write_text('"switch" h1\nh1 h2\nh2 "switch"\nswitch h1\n')
    topo = read_topology(str(f))
    assert topo.labels == ("switch", "h1", "h2") and topo.switches.tolist() == [1]


@pytest.mark.parametrize("line,message", [('"a b 1', "unterminated"), ('"a"b c', "followed"),
                                          ('"\\q" b', "bad escape")])
def test_bad_quotes_one_line(tmp_path, line, message):
    from topofinder.errors import TopofinderError
    f = tmp_path / "q.edges"
    f.write_text(line + "\n")
    with pytest.raises(TopofinderError, match=message):
        read_topology(str(f))
