"""One-root collectives on platform files as paper 003 draws them (issue 40): directed arcs,
costs c = 1/capacity, checked for what the collective needs (reachability from or to the
root), through the command line.

References: paper 003 §3.1 (Figure 1: optimum 1, best tree 2/3, best DAG 4/5); the reduce on
G^T equals the broadcast on G (003 §6, reversal); reachability by hand on small files."""

import json
from pathlib import Path

import pytest

from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.needs import Need

DATA = Path(__file__).parent / "data"
FIG1 = str(DATA / "paper003_fig1.edges")
FIG1_REV = str(DATA / "paper003_fig1_reversed.edges")


def _score(capsys, *args):
    assert main(["score", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_figure1_through_the_cli(capsys):
    doc = _score(capsys, FIG1, "--collective", "broadcast", "--root", "0", "--port-model",
                 "one")
    assert (doc["TP_exact"], doc["best_tree_exact"], doc["best_dag_exact"]) == \
        ("1/1", "2/3", "4/5")
    assert doc["best_dag_method"].startswith("exact")


def test_figure1_reduce_on_the_reverse(capsys):
    doc = _score(capsys, FIG1_REV, "--collective", "reduce", "--port-model", "one")
    assert (doc["TP_exact"], doc["best_tree_exact"], doc["best_dag_exact"]) == \
        ("1/1", "2/3", "4/5")


def test_costs_and_capacities_read_alike():
    a, b = load_topology(FIG1, need=Need("broadcast")), load_topology(FIG1_REV,
                                                                      need=Need("reduce"))
    assert a.transpose().same_arcs(b)
    assert sorted(a.arc_capacity.tolist()) == [1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("collective,path,node,what", [
    ("reduce", FIG1, "1", "cannot reach root 0"),
    ("gather", FIG1, "1", "cannot reach root 0"),
    ("broadcast", FIG1_REV, "1", "cannot be reached from root 0"),
    ("scatter", FIG1_REV, "1", "cannot be reached from root 0"),
])
def test_the_error_names_a_node_and_the_collective(capsys, collective, path, node, what):
    assert main(["score", path, "--collective", collective]) == 2
    err = capsys.readouterr().err.strip()
    assert f"node {node} {what}" in err and collective in err and "\n" not in err


def test_other_commands_keep_strong_connectivity(capsys):
    assert main(["score", FIG1]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach node 0" in err and "every node to reach every other" in err


def test_directed_file_with_no_cable_reading_refused_for_reduce(tmp_path, capsys):
    f = tmp_path / "star.edges"
    f.write_text("0 1\n0 2\n")     # reachable from 0; as cables too, so no hint is wrong
    assert main(["score", str(f), "--collective", "broadcast", "--json"]) == 0
    capsys.readouterr()
    f.write_text("0 1\n2 1\n")     # node 2 is reached by nobody, whatever the reading
    assert main(["score", str(f), "--collective", "broadcast", "--directed"]) == 2
    assert "node 2 cannot be reached from root 0" in capsys.readouterr().err


@pytest.mark.parametrize("token,message", [("c=2/3", "is not 1/k"), ("c=0", "is not 1/k"),
                                           ("c=x", "capacity must be")])
def test_bad_costs_one_line(tmp_path, token, message):
    f = tmp_path / "bad.edges"
    f.write_text(f"0 1 {token}\n1 0 1\n")
    with pytest.raises(TopofinderError, match=message):
        load_topology(str(f))


def test_json_cost_attribute(tmp_path):
    f = tmp_path / "fig1.json"
    edges = [(0, 1, 1), (0, 2, "1"), (1, 2, 1), (2, 1, 1), (1, 3, "1/2"), (2, 4, 0.5)]
    f.write_text(json.dumps({"directed": True, "nodes": [{"id": i} for i in range(5)],
                             "edges": [{"source": u, "target": w, "cost": c}
                                       for u, w, c in edges]}))
    assert load_topology(str(f), need=Need("broadcast")).same_arcs(
        load_topology(FIG1, need=Need("broadcast")))


def test_process_substitution_is_read_once(tmp_path):
    """`score <(cat f.edges) --collective broadcast --schedule S`: a pipe at /dev/fd/N is read
    (once: score and schedule share the topology; a pipe cannot be re-read)."""
    import subprocess
    import sys
    out = tmp_path / "s.json"
    cmd = (f"{sys.executable} -m topofinder score <(cat {FIG1}) --collective broadcast "
           f"--schedule {out} --json")
    run = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                         cwd=Path(__file__).parent.parent)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["TP_exact"] == "1/1"
    assert json.loads(out.read_text())["throughput"] == "1/1"
