"""The one-root share of a search workload (issue 30): every frontier point's broadcast is
priced at M/(TP·b), TP the exact multi-port steady-state throughput from root 0. Checked
against score_oneroot's TP and an independent networkx min over v of maxflow(0, v) on small
graphs, the time against the formula by hand, the root-independence on vertex-transitive
topologies, the objective mix, the search document against its schema, and bad shares."""

from fractions import Fraction
from importlib.resources import files
import csv
import io
import json

import jsonschema
import networkx as nx
import pytest

from topofinder.api import score_oneroot
from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.collectives import Collective
from topofinder.workload.broadcast import broadcast_tp
from topofinder.workload.cost import Workload
from topofinder.workload.rank import search

SMALL = ["C(8,{1,3})", "K(4)", "Pi(3,16)", "Hypercube(3)", "C(10,{1,2,5})", "Torus(3,4)", "Pi(2,9)"]


def _min_maxflow(expr: str, root: int = 0) -> int:
    topo = load_topology(expr)
    g = nx.DiGraph()
    for u, w, c in zip(topo.src.tolist(), topo.dst.tolist(), topo.arc_capacity.tolist()):
        if u != w:
            g.add_edge(u, w, capacity=g.get_edge_data(u, w, {"capacity": 0})["capacity"] + c)
    return min(nx.maximum_flow_value(g, root, v) for v in range(topo.n) if v != root)


@pytest.mark.parametrize("expr", SMALL)
def test_tp_equals_score_oneroot_and_maxflow(expr):
    tp = broadcast_tp(expr)
    scored = score_oneroot(expr, Collective.BROADCAST, port_model="multi", compare=False)
    assert tp == Fraction(scored["TP_exact"]) == _min_maxflow(expr)


@pytest.mark.parametrize("expr", ["C(8,{1,3})", "Hypercube(3)", "Torus(3,4)"])
def test_vertex_transitive_root_does_not_matter(expr):
    n = load_topology(expr).n
    values = {score_oneroot(expr, Collective.BROADCAST, root=r, port_model="multi",
                            compare=False)["TP_exact"] for r in range(n)}
    assert values == {f"{broadcast_tp(expr)}/1"}


def test_broadcast_time_by_hand():
    w = Workload.from_strings("10us", "100Gbps", "1MB:0.25,4MB:0.75", broadcast_share=0.5)
    mean = 0.25 * 2 ** 20 + 0.75 * 4 * 2 ** 20
    b = 100e9 / 8 / 4                        # link bandwidth at d = 4
    assert w.broadcast_time(4, Fraction(7, 3)) == pytest.approx(mean / (Fraction(7, 3) * b),
                                                                 rel=1e-15)
    assert w.broadcast_time(4, None) is None
    assert w.objective(2.0, None, 1.0) == 1.5
    both = Workload.from_strings(alltoall_share=0.2, broadcast_share=0.3)
    assert both.objective(1.0, 2.0, 4.0) == pytest.approx(0.5 + 0.4 + 1.2)
    assert both.objective(1.0, None, 4.0) == pytest.approx(0.7 + 1.2)


def test_search_prices_every_point():
    w = Workload.from_strings("10us", "100Gbps", "1MB", broadcast_share=0.5)
    result = search(16, 3, w, jobs=1, use_cache=False, baselines=True)
    doc = result.to_dict()
    jsonschema.validate(doc, json.loads((files("topofinder") / "schemas" /
                                         "search.schema.json").read_text()))
    assert doc["workload"]["broadcast_share"] == 0.5
    for p in doc["frontier"]:
        b = p["broadcast"]
        tp = Fraction(score_oneroot(p["expr"], Collective.BROADCAST, port_model="multi",
                                    compare=False)["TP_exact"])
        assert Fraction(b["TP_exact"]) == tp and (b["root"], b["port_model"]) == (0, "multi")
        assert b["time_s"] == pytest.approx(2 ** 20 / (float(tp) * 100e9 / 8 / 3), rel=1e-12)
        assert p["objective_s"] == pytest.approx(0.5 * p["allreduce_time_s"] + 0.5 * b["time_s"])
    assert "broadcast_TP_exact" in result.records()[0]
    for b in doc["baselines"]:
        if b["expr"] is not None:
            assert Fraction(b["broadcast"]["TP_exact"]) == _min_maxflow(b["expr"])
    plain = search(16, 3, Workload(), jobs=1, use_cache=False).to_dict()
    assert all("broadcast" not in p for p in plain["frontier"])
    assert "broadcast_share" not in plain["workload"]


@pytest.mark.parametrize("kwargs,message", [
    ({"broadcast_share": 1.5}, "broadcast share must be a number in"),
    ({"broadcast_share": "x"}, "broadcast share must be a number in"),
    ({"broadcast_share": 0.6, "alltoall_share": 0.6}, "add up to 1.2"),
])
def test_bad_shares(kwargs, message):
    with pytest.raises(TopofinderError, match=message):
        Workload.from_strings(**kwargs)


def test_cli_table_and_bad_share(capsys):
    from topofinder.cli.main import main

    assert main(["search", "--n", "8", "--d", "2", "--broadcast-share", "0.4", "--jobs", "1",
                 "--no-baselines", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "broadcast TP" in out.splitlines()[1]
    assert main(["search", "--n", "8", "--d", "2", "--broadcast-share", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "broadcast share must be" in err and "\n" not in err
    assert main(["search", "--n", "8", "--d", "2", "--broadcast-share", "0.3", "--robust",
                 "--no-cache"]) == 2                 # the worst failure has no broadcast price
    err = capsys.readouterr().err.strip()
    assert "--robust" in err and "\n" not in err


def test_sweep_spec_reads_the_share(tmp_path):
    from topofinder.batch.sweep import load_spec

    spec = tmp_path / "s.toml"
    spec.write_text('name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nbroadcast_share = 0.25\n')
    assert load_spec(str(spec)).workloads[0].broadcast_share == 0.25
    spec.write_text('name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nbroadcast_share = "a"\n')
    with pytest.raises(TopofinderError, match="broadcast_share must be a number"):
        load_spec(str(spec))


@pytest.mark.parametrize("share,winner", [(0.0, "Pi(2,8)"), (0.5, "UniRing(2,8)")])
def test_sweep_best_ranks_by_the_broadcast_mix(tmp_path, share, winner):
    """Two points with equal allreduce times: the broadcast share picks the one of higher TP
    (UniRing(2,8): 2, Pi(2,8): 1, min over v of maxflow)."""
    from topofinder.batch.sweep import load_spec, write_summaries

    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nsizes = ["1MB"]\n'
                    f'broadcast_share = {share}\n')
    same = {"T_L": 4, "tau": 1.0, "tau_exact": "1/1", "schedule": "bfb", "verified": False,
            "allreduce_T_L": 8, "allreduce_tau_exact": "2/1"}
    cells = [{"N": 8, "d": 2, "frontier": [{"expr": e, **same}
                                            for e in ("Pi(2,8)", "UniRing(2,8)")]}]
    write_summaries(load_spec(str(spec)), cells, tmp_path)
    best = next(csv.DictReader(io.StringIO((tmp_path / "best.csv").read_text())))
    assert best["expr"] == winner and _min_maxflow(winner) == (2 if share else 1)
    if share:
        assert float(best["broadcast_time_s"]) == pytest.approx(2 ** 20 / (2 * 100e9 / 8 / 2))
