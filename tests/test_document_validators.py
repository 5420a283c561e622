"""Every malformed input document is refused in one line (issue 39): one validator per
document kind (topofinder.model.documents), shared by `check`, `run`, `export --pick` and
api.load_schedule. Each case starts from a document topofinder wrote and breaks one thing."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import topofinder as tf
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.model import documents

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict:
    """Valid documents of every kind, written by topofinder itself."""
    out = {"steps": json.loads(tf.schedule("C(4,{1,2})").to_json()),
           "allreduce": json.loads(tf.schedule("C(6,{1,2})", "allreduce").to_json()),
           "trees": json.loads(tf.schedule("C(6,{1,2})", kind="trees").to_json()),
           "alltoall": json.loads(tf.schedule("C(6,{1,2})", "alltoall").to_json())}
    path = tmp_path_factory.mktemp("oneroot") / "b.json"
    assert main(["score", "C(6,{1,2})", "--collective", "broadcast", "--schedule",
                 str(path)]) == 0
    out["oneroot"] = json.loads(path.read_text())
    out["search"] = {"format": "topofinder-search", "version": 1, "N": 6, "d": 4,
                     "frontier": [{"expr": "C(6,{1,2})", "T_L": 2}], "recommended": 0}
    return out


def _set(path: str, value):
    """A mutation setting the field at ``path`` ("sends.0.5": doc["sends"][0][5]); ``...``
    deletes it."""
    def apply(doc):
        *head, last = [int(k) if k.lstrip("-").isdigit() else k for k in path.split(".")]
        for k in head:
            doc = doc[k]
        if value is ...:
            del doc[last]
        else:
            doc[last] = copy.deepcopy(value)
    return apply


VALIDATORS = {"steps": documents.check_schedule_document,
              "allreduce": documents.check_schedule_document,
              "trees": documents.check_schedule_document,
              "alltoall": documents.check_schedule_document,
              "oneroot": documents.check_schedule_document,
              "search": documents.check_search_document}

CASES = [
    # step schedules: the issue's four, then their kin
    ("steps", "sends.0.5", 0.5), ("steps", "sends.0.5", 1.0), ("steps", "sends.0.0", 10 ** 18),
    ("steps", "labels", ["n0"]), ("steps", "labels", [{"a": 1}] * 4),
    ("steps", "labels", ["a", "a", "b", "c"]), ("steps", "labels", "abcd"),
    ("steps", "labels", ["x" * 300] * 4), ("steps", "sends.0.0", 0), ("steps", "sends.0.0", -1),
    ("steps", "sends.0.1", True), ("steps", "sends.0.1", None), ("steps", "sends.0.1", "1"),
    ("steps", "sends.0.1", [1]), ("steps", "sends.0", [1, 1, 0, 1, 1]),
    ("steps", "sends.0", [1, 1, 0, 1, 1, 0, 0]), ("steps", "sends", {"0": 1}),
    ("steps", "sends", [[[1, 1, 0, 1, 1, 0]]]), ("steps", "sends", "x"),
    ("steps", "sends.0.4", 4), ("steps", "sends.0.1", -1), ("steps", "sends.0.2", 1),
    ("steps", "sends.0.3", 2), ("steps", "sends.0.5", 2 ** 70), ("steps", "num_nodes", True),
    ("steps", "num_nodes", 4.0), ("steps", "num_nodes", "4"), ("steps", "num_nodes", 10 ** 7),
    ("steps", "num_nodes", -4), ("steps", "num_nodes", ...), ("steps", "num_nodes", [4]),
    ("steps", "shard_chunks", 0), ("steps", "shard_chunks", 1.5), ("steps", "shard_chunks", True),
    ("steps", "shard_chunks", ...), ("steps", "num_steps", 2), ("steps", "num_steps", 1.0),
    ("steps", "collective", "broadcast"), ("steps", "kind", "loops"),
    ("steps", "columns", ["w", "u", "hi", "lo", "v", "t"]), ("steps", "version", 2),
    ("steps", "format", "other"), ("steps", "tau", NAN), ("steps", "tau", INF),
    ("steps", "tau", -1), ("steps", "tau", "1"), ("steps", "tau_exact", "1/0"),
    ("steps", "tau_exact", "one"), ("steps", "physical", [0, 0, 1, 2]),
    ("steps", "physical", [0, 1, 2]), ("steps", "physical", [0, 1, 2, 3.0]),
    ("steps", "physical", [{"0": 0}] * 4), ("steps", "topology", 5),
    ("steps", "method", ["bfb"]),
    ("steps", "sends", [[1, 1, 0, 1, 1, 0]] * 2 + [[3, 1, 0, 1, 1, 0]]),
    ("allreduce", "reduce_scatter_steps", 0), ("allreduce", "reduce_scatter_steps", 99),
    ("allreduce", "reduce_scatter_steps", 1.5),
    # tree schedules
    ("trees", "trees.0.root", 1.5), ("trees", "trees.0.root", 6), ("trees", "trees.0.root", True),
    ("trees", "trees.0.weight", "0/1"), ("trees", "trees.0.weight", "3/2"),
    ("trees", "trees.0.weight", "1/0"), ("trees", "trees.0.weight", 0.25),
    ("trees", "trees.0.weight", "1" * 200 + "/3"), ("trees", "trees.0.edges", [[0]]),
    ("trees", "trees.0.edges", [[0, 1.0]]), ("trees", "trees.0.edges", [[0, 9]]),
    ("trees", "trees.0.edges", [[[0, 1]]]), ("trees", "trees.0", [0, "1/4", []]),
    ("trees", "trees", "x"), ("trees", "trees", ...), ("trees", "collective", "alltoall"),
    ("trees", "trees.0.routes", [{"edge": [0, 1], "path": [0, 1.5], "weight": "1/4"}]),
    ("trees", "trees.0.routes", ["x"]), ("trees", "num_nodes", 6.5),
    # all-to-all
    ("alltoall", "sends.0", [1, 0, 1]), ("alltoall", "sends.0.5", NAN),
    ("alltoall", "sends.0.5", 0), ("alltoall", "sends.0.5", -0.25), ("alltoall", "sends.0.5", 2),
    ("alltoall", "sends.0.5", "1/4"), ("alltoall", "sends.0.5", True),
    ("alltoall", "sends.0.0", 10 ** 18), ("alltoall", "sends.0.1", 6),
    ("alltoall", "sends.0.3", 1.5),
    ("alltoall", "step_loads", [0.25]), ("alltoall", "step_loads", [NAN, 1.25]),
    ("alltoall", "lp_bound", 0), ("alltoall", "bandwidth_time", INF),
    ("alltoall", "columns", ["t", "u", "w"]),
    # one-root (broadcast) schedules
    ("oneroot", "n", 1.5), ("oneroot", "root", 9), ("oneroot", "links.0", [0, 1]),
    ("oneroot", "links.0.2", 0), ("oneroot", "trees.0.parent", [-1, 0]),
    ("oneroot", "trees.0.parent.0", 0), ("oneroot", "trees.0.parent.1", 7),
    ("oneroot", "trees.0.weight", 0), ("oneroot", "trees.0.weight", 1.5),
    ("oneroot", "slots.0.sends.0.2", 5), ("oneroot", "slots.0.sends.0.3", 1),
    ("oneroot", "slots.0.sends.0.4", 99), ("oneroot", "slots.0.sends.0.5", -1),
    ("oneroot", "slots.0.duration", "0/1"), ("oneroot", "period", "x"),
    ("oneroot", "port_model", "many"), ("oneroot", "collective", "scatter"),
    ("oneroot", "slots", [[]]),
    # search results (export --pick)
    ("search", "frontier", "x"), ("search", "frontier", []), ("search", "frontier.0.expr", 5),
    ("search", "frontier.0", "C(6,{1,2})"), ("search", "N", "6"), ("search", "N", True),
    ("search", "recommended", 9), ("search", "format", "topofinder-score"),
    ("search", "frontier.0.T_L", 1.5), ("search", "d", ...),
]


@pytest.mark.parametrize("kind,path,value", CASES,
                         ids=[f"{k}:{p}={ascii(v)[:20]}" for k, p, v in CASES])
def test_each_malformed_document_is_refused_in_one_line(docs, kind, path, value):
    doc = copy.deepcopy(docs[kind])
    _set(path, value)(doc)
    with pytest.raises(TopofinderError) as exc:
        VALIDATORS[kind](doc, "doc")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("doc")


@pytest.mark.parametrize("kind", VALIDATORS)
def test_the_documents_topofinder_writes_pass(docs, kind):
    VALIDATORS[kind](docs[kind], "doc")


def test_huge_arrays_are_refused_before_work(docs, monkeypatch):
    doc = copy.deepcopy(docs["steps"])
    doc["labels"] = ["n"] * 100_000
    with pytest.raises(TopofinderError, match="at most 4 items"):
        documents.check_schedule_document(doc, "doc")
    monkeypatch.setattr(documents, "MAX_ROWS", 5)
    with pytest.raises(TopofinderError, match="at most 5 items"):
        documents.check_schedule_document(docs["steps"], "doc")


def test_the_schemas_agree_with_the_validators(docs):
    """What the JSON schema rejects among these cases, the validator rejects too; and every
    document topofinder writes passes both."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(tf.__file__).parent / "schemas" /
                         "schedule.schema.json").read_text())
    for kind in ("steps", "allreduce", "trees", "alltoall"):
        jsonschema.validate(docs[kind], schema)
    for kind, path, value in CASES:
        if kind == "search" or kind == "oneroot":
            continue
        doc = copy.deepcopy(docs[kind])
        _set(path, value)(doc)
        if not jsonschema.Draft202012Validator(schema).is_valid(doc):
            with pytest.raises(TopofinderError):
                documents.check_schedule_document(doc, "doc")


def _write(tmp_path, name, doc) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("kind,path,value,says", [
    ("steps", "sends.0.5", 0.5, "not an integer"),
    ("steps", "sends.0.0", 10 ** 18, "outside 1.."),
    ("steps", "labels", ["n0"], "one name"),
    ("steps", "labels", [{"a": 1}] * 4, "one name"),
    ("alltoall", "sends.0", [1, 0, 1], "must be [t, u, w, src, dst, amount]"),
])
def test_check_refuses_the_issues_documents_in_one_line(docs, tmp_path, kind, path, value, says):
    """Through `python3 -m topofinder check` as a user runs it: exit 2, one line, no
    traceback."""
    plan = tmp_path / "plan.csv"
    assert main(["export", docs[kind]["topology"], "--what", "patch-panel", "-o",
                 str(plan)]) == 0
    doc = copy.deepcopy(docs[kind])
    _set(path, value)(doc)
    proc = subprocess.run([sys.executable, "-m", "topofinder", "check", str(plan),
                           _write(tmp_path, "s.json", doc)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parents[1])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert says in proc.stderr


def test_run_and_export_pick_share_the_validators(docs, tmp_path, capsys):
    doc = copy.deepcopy(docs["steps"])
    doc["sends"][0][5] = 0.5
    assert main(["run", _write(tmp_path, "s.json", doc)]) == 2
    err = capsys.readouterr().err
    assert "not an integer" in err and len(err.strip().splitlines()) == 1
    search = copy.deepcopy(docs["search"])
    search["frontier"][0]["expr"] = ["C(6,{1,2})"]
    assert main(["export", _write(tmp_path, "r.json", search), "--pick", "0"]) == 2
    err = capsys.readouterr().err
    assert "'expr'" in err and len(err.strip().splitlines()) == 1


def test_a_malformed_npz_is_refused_in_one_line(tmp_path, capsys):
    """The .npz reader checks its arrays as the JSON validators check fields."""
    good = tmp_path / "s.npz"
    tf.export_schedule(tf.schedule("C(4,{1,2})"), "npz", good)
    plan = tmp_path / "plan.csv"
    assert main(["export", "C(4,{1,2})", "--what", "patch-panel", "-o", str(plan)]) == 0
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    for key, value in [("sends", arrays["sends"].astype(float) + 0.5),
                       ("sends", np.where(np.arange(arrays["sends"].size).reshape(
                           arrays["sends"].shape) == 0, 10 ** 18, arrays["sends"])),
                       ("labels", np.array(["a"])), ("n", np.array(True)),
                       ("n", np.array(10 ** 9)), ("shard_chunks", np.array(0)),
                       ("sends", arrays["sends"][:5])]:
        bad = tmp_path / "bad.npz"
        np.savez(bad, **{**arrays, key: value})
        assert main(["check", str(plan), str(bad)]) == 2, key
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (key, err)
