"""Node bandwidth caps in topology files (docs/formats.md "Topology files"): exact round trips
in the three formats, one-line refusals naming file:line (edge-list cases in
test_switched_fabrics.py's table of bad edge lists), and `--port-model node` reading the
cap (the CLI flag overriding it). Values are checked against the same platform built with an
explicit bandwidth, and against the receive-cap bound TP ≤ B (every destination receives TP
unit messages per unit time) met with equality on a degree-4 circulant (multi-port TP = 4)."""

from fractions import Fraction
import json

import pytest

from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.files import FORMATS, read_topology, topology_text
from topofinder.model.topology import Topology
from topofinder.scoring.oneroot.platform import from_topology
from topofinder.scoring.oneroot.steady import throughput
from topofinder.scoring.oneroot.summary import oneroot_score


def _capped(topo: Topology, cap) -> Topology:
    return Topology(topo.n, topo.src, topo.dst, expr=topo.expr, capacity=topo.capacity,
                    switches=topo.switches, capacity_unit=topo.capacity_unit,
                    labels=topo.labels, node_cap=cap)


def _roundtrip(tmp_path, topo, fmt):
    path = tmp_path / f"t.{fmt}"
    path.write_text(topology_text(topo, fmt))
    return read_topology(str(path))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cap", [Fraction(5, 2), Fraction(3), Fraction(7, 3)])
def test_round_trip_exact(tmp_path, fmt, cap):
    base = Topology(4, [0, 1, 2, 3, 0, 2], [1, 2, 3, 0, 2, 0], expr="g", capacity=[1, 2, 1, 3,
                    2, 1], labels=["a", "b", "c", "d"])
    back = _roundtrip(tmp_path, _capped(base, cap), fmt)
    assert back.node_cap == cap and isinstance(back.node_cap, Fraction)
    arcs = sorted(zip(back.src.tolist(), back.dst.tolist(), back.arc_capacity.tolist()))
    assert back.labels == base.labels and arcs == sorted(zip(base.src.tolist(),
                                                             base.dst.tolist(),
                                                             base.arc_capacity.tolist()))
    again = _roundtrip(tmp_path, back, fmt)
    assert again.node_cap == cap


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_without_cap(tmp_path, fmt):
    assert _roundtrip(tmp_path, load_topology("C(8,{1,3})"), fmt).node_cap is None


def test_physical_units(tmp_path):
    """A cap with a unit is converted into the capacities' unit; written back with it."""
    path = tmp_path / "p.txt"
    path.write_text("node_bandwidth 1.2Tbps\n0 1 100Gbps\n1 0 100Gbps\n1 2 200Gbps\n"
                    "2 1 200Gbps\n")
    topo = read_topology(str(path))
    # capacities become integers in GB/s? 100 Gbps = 12.5 GB/s, so the unit is Gbps
    assert topo.capacity_unit == "Gbps" and topo.node_cap == 1200
    for fmt in FORMATS:
        back = _roundtrip(tmp_path, topo, fmt)
        assert back.node_cap == 1200 and back.capacity_unit == "Gbps"


@pytest.mark.parametrize("value", ["0", "-1", "x", True, [2], 0])
def test_json_bad_values_name_the_line(tmp_path, value):
    doc = {"directed": True, "multigraph": True,
           "graph": {"name": "g", "node_bandwidth": value},
           "nodes": [{"id": 0}, {"id": 1}],
           "edges": [{"source": 0, "target": 1}, {"source": 1, "target": 0}]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc, indent=1))
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1)
                if "node_bandwidth" in x)
    with pytest.raises(TopofinderError, match=f"bad.json:{line}: node_bandwidth must be"):
        read_topology(str(path))


def test_graphml_bad_value_names_the_line(tmp_path):
    good = topology_text(_capped(load_topology("C(6,{1})"), Fraction(3, 2)), "graphml")
    path = tmp_path / "bad.graphml"
    path.write_text(good.replace(">3/2</data>", ">0</data>"))
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if ">0</data>" in x)
    with pytest.raises(TopofinderError, match=f"bad.graphml:{line}: node_bandwidth must be"):
        read_topology(str(path))


@pytest.mark.parametrize("cap", [Fraction(1), Fraction(5, 2), Fraction(4), Fraction(6)])
def test_node_port_model_reads_the_file_cap(tmp_path, cap):
    topo = _roundtrip(tmp_path, _capped(load_topology("C(8,{1,3})"), cap), "edgelist")
    from_file = throughput(from_topology(topo, 0, "node")).value
    explicit = throughput(from_topology(load_topology("C(8,{1,3})"), 0, "node", cap)).value
    assert from_file == explicit == min(cap, 4)
    # the flag (API argument) overrides the file
    assert oneroot_score(topo, port_model="node", bandwidth="1", compare=False)["TP_exact"] \
        == "1/1"


def test_cli_node_port_model_from_file(tmp_path, capsys):
    from topofinder.cli.main import main

    path = tmp_path / "c.txt"
    path.write_text(topology_text(_capped(load_topology("C(8,{1,3})"), Fraction(5, 2)),
                                  "edgelist"))
    args = ["score", str(path), "--collective", "broadcast", "--port-model", "node", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["TP_exact"] == "5/2" and doc["node_bandwidth"] == "5/2"
    assert main(args + ["--node-bandwidth", "3/2"]) == 0
    assert json.loads(capsys.readouterr().out)["TP_exact"] == "3/2"
    plain = tmp_path / "p.txt"
    plain.write_text("0 1\n1 0\n")
    assert main(["score", str(plain), "--collective", "broadcast", "--port-model", "node"]) == 2
    assert "states node_bandwidth" in capsys.readouterr().err
