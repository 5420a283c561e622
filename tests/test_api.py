"""The Python API (docs/api.md): its doctests, the README and docs examples, networkx input,
records for pandas, and the JSON Schemas shipped in the package checked against real output."""

from __future__ import annotations

import doctest
import importlib
import json
import pkgutil
import re
from fractions import Fraction
from importlib.resources import files
from pathlib import Path

import jsonschema
import networkx as nx
import pytest

import topofinder
import topofinder.api
from topofinder.cli.main import main
from topofinder.families.build import parse

ROOT = Path(__file__).resolve().parent.parent


def _schema(name: str) -> dict:
    return json.loads((files("topofinder") / "schemas" / name).read_text())


def test_api_doctests():
    attempted = 0
    for info in pkgutil.iter_modules(topofinder.api.__path__, "topofinder.api."):
        result = doctest.testmod(importlib.import_module(info.name),
                                 optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, info.name
        attempted += result.attempted
    for module in (topofinder, topofinder.api):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
    assert attempted >= 12


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_api_example_runs_as_a_doctest():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    parser = doctest.DocTestParser()
    test = parser.get_doctest(section, {}, "README Python API", "README.md", 0)
    assert len(test.examples) >= 5
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0


def test_docs_api_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks((ROOT / "docs" / "api.md").read_text())
    assert blocks
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), scope)


def test_load_networkx_graphs_keeps_the_arcs():
    g = nx.petersen_graph()
    topo = topofinder.load(g)
    assert (topo.n, topo.degree, topo.num_arcs) == (10, 3, 30)
    assert topofinder.score(g)["diameter"] == nx.diameter(g)
    d = nx.MultiDiGraph()
    d.add_edges_from([("a", "b"), ("b", "c"), ("c", "a"), ("c", "a")])
    assert topofinder.load(d).num_arcs == 4
    with pytest.raises(topofinder.TopofinderError):
        topofinder.load(nx.Graph())
    with pytest.raises(topofinder.TopofinderError):
        topofinder.load(3.5)


def test_score_of_an_expression_equals_the_cli(capsys):
    assert main(["score", "C(16,{1,6})", "--json"]) == 0
    prices = topofinder.collective_prices("C(16,{1,6})", topofinder.Workload())
    assert json.loads(capsys.readouterr().out) == {**topofinder.score("C(16,{1,6})"), **prices}


def test_records_are_flat_and_match_the_document():
    result = topofinder.search(16, 2, jobs=1, use_cache=False)
    rows = result.records()
    doc = result.to_dict()
    assert len(rows) == len(doc["frontier"]) and sum(r["recommended"] for r in rows) == 1
    for row, point in zip(rows, doc["frontier"]):
        assert all(not isinstance(v, (dict, list, tuple)) for v in row.values())
        assert {k: row[k] for k in point} == {**point,
                                              "frontiers": "+".join(point["frontiers"])}
    assert result.best.expr == doc["frontier"][doc["recommended"]]["expr"]
    assert topofinder.records(result) == rows
    jsonschema.validate(doc, _schema("search.schema.json"))


def test_schedule_documents_match_their_schema_and_round_trip():
    schema = _schema("schedule.schema.json")
    for collective in ("allgather", "reduce-scatter", "allreduce"):
        s = topofinder.schedule("Torus(4,4)", collective)
        doc = s.to_dict()
        jsonschema.validate(doc, schema)
        back = topofinder.load_schedule(json.dumps(doc))
        assert (back.collective, back.num_steps, back.tau) == (collective, s.num_steps, s.tau)
    trees = topofinder.schedule("Torus(4,4)", kind="trees")
    jsonschema.validate(trees.to_dict(), schema)
    assert topofinder.load_schedule(trees.to_json()).tau() == trees.tau()


def test_schemas_reject_broken_documents():
    """The schemas are not vacuous: a wrong field type or a missing field is refused."""
    doc = topofinder.schedule("C(8,{1,2})").to_dict()
    for broken in ({**doc, "sends": [[1, 2, 3]]}, {**doc, "tau_exact": "0.5"},
                   {k: v for k, v in doc.items() if k != "sends"}, {**doc, "version": 2}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, _schema("schedule.schema.json"))
    score = topofinder.score("K(5)")
    jsonschema.validate(score, _schema("score.schema.json"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**score, "T_L": "3"}, _schema("score.schema.json"))


def test_one_spelling_for_exact_ratios_and_shared_keys():
    """Every *_exact value is "p/q" (denominator always written) and the same concept has the
    same key in score and search."""
    score = topofinder.score("L(K(4,4))")
    point = topofinder.search(32, 4, jobs=1).to_dict()["frontier"][0]
    for doc in (score, point):
        for key, value in doc.items():
            if key.endswith("_exact") and value is not None:
                assert re.fullmatch(r"\d+/\d+", value), (key, value)
                assert abs(float(Fraction(value)) - doc[key[:-len("_exact")]]) < 1e-12
    assert score["tau_bfb_exact"] == "1/1"
    shared = {"alltoall_f", "alltoall_f_upper", "alltoall_bound", "alltoall_method", "T_L",
              "diameter", "bidirectional", "bw_optimal", "moore_optimal", "tau_fc",
              "tau_fc_exact"}
    assert shared <= set(score) and shared <= set(point)


def test_load_accepts_paths_and_topologies(tmp_path):
    path = tmp_path / "ring.txt"
    path.write_text(topofinder.export_topology("UniRing(1,5)"))
    topo = topofinder.load(path)
    assert topo.same_arcs(parse("UniRing(1,5)"))
    assert topofinder.load(topo) is topo
