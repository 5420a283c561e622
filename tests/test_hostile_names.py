"""Names at the boundary (issue 27): hostile node names never reach a shell unquoted, a
spreadsheet as a formula, or a host file with control characters; names that are accepted
survive every rank format unchanged."""

import csv
import io
import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from topofinder.cli.main import main
from topofinder.model.files import read_topology
from topofinder.model.names import HOST_NAME, csv_rows

HOSTILE = Path(__file__).parent / "data" / "hostile"
FORMATS = ("csv", "hostfile", "rankfile", "torchrun")
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _export(path, fmt, capsys) -> tuple[int, str, str]:
    code = main(["export", str(path), "--what", "ranks", "--format", fmt])
    out, err = capsys.readouterr()
    return code, out, err


def _hosts(out: str, fmt: str) -> list[str]:
    """The host names read back from a rank file of format ``fmt``."""
    if fmt == "csv":
        return [row[1] for row in list(csv_rows(out, "ranks"))[1:]]
    if fmt == "hostfile":
        return [line.rsplit(" slots=1", 1)[0] for line in out.splitlines()]
    if fmt == "rankfile":
        return [line.split("=", 1)[1].rsplit(" slot=0", 1)[0] for line in out.splitlines()]
    return [shlex.split(line)[0] for line in out.splitlines()]


def _kept(names: list[str]) -> list[str] | None:
    """The names a topology keeps: names that are just its ranks 0..N−1 in order are no names
    (``Topology.labels`` None, docs of model/topology.py), and rank files call those hosts
    node0, node1, …"""
    return None if names == [str(r) for r in range(len(names))] else names


def _no_formula_cells(out: str) -> None:
    for row in csv.reader(io.StringIO(out)):
        assert not any(cell.startswith(FORMULA) for cell in row), row


def test_shell_names_are_refused_for_shells_and_kept_in_csv(capsys, tmp_path):
    names = [n["id"] for n in json.loads((HOSTILE / "names_shell.json").read_text())["nodes"]]
    for fmt in ("hostfile", "rankfile", "torchrun"):
        code, out, err = _export(HOSTILE / "names_shell.json", fmt, capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, fmt
        assert "not a plain host name" in err
    code, out, _ = _export(HOSTILE / "names_shell.json", "csv", capsys)
    assert code == 0 and _hosts(out, "csv") == names


def test_formula_names_are_neutralised_in_csv(capsys):
    code, out, _ = _export(HOSTILE / "names_formula.edges", "csv", capsys)
    assert code == 0
    _no_formula_cells(out)
    assert sorted(_hosts(out, "csv")) == sorted(['=HYPERLINK("http://x")', "+1", "@SUM(A1)",
                                                  "-2+3"])


@pytest.mark.parametrize("name, line", [("names_bidi.edges", 2), ("names_control.edges", 2),
                                        ("names_nul.json", 1)])
def test_control_and_bidi_characters_are_refused_with_the_line(name, line, capsys):
    code, out, err = _export(HOSTILE / name, "csv", capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{name}:{line}:" in err or "node name" in err
    assert err.isascii()


def test_a_bom_is_not_part_of_the_first_name():
    topo = read_topology(str(HOSTILE / "bom.edges"))
    assert list(topo.labels) == ["a", "b", "c"]


def _ring_file(folder: Path, names: list[str]) -> Path:
    """A directed ring over ``names`` (rank i = names[i]) as a node-link JSON file."""
    n = len(names)
    doc = {"directed": True, "multigraph": True, "graph": {},
           "nodes": [{"id": x, "rank": i} for i, x in enumerate(names)],
           "edges": [{"source": names[i], "target": names[(i + 1) % n]} for i in range(n)]}
    path = folder / "t.json"
    path.write_text(json.dumps(doc))
    return path


_NAME = st.text(st.one_of(st.characters(), st.sampled_from(list("$`;|&<>(){}[]'\"\\*?!#~=+-@ \t\r\n\x00\u202e\ufeff"))),
                min_size=1, max_size=12)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(_NAME, min_size=2, max_size=5, unique=True))
@example(["0", "1"])                             # names that are the ranks: no names at all
def test_fuzzed_names_through_every_rank_format(tmp_path, capsys, names):
    """Any names in a JSON topology: each rank format is refused in one line, or reads back
    the same names in rank order, CSV has no formula cell and torchrun lines are valid bash
    whose words are exactly the intended ones."""
    path = _ring_file(tmp_path, names)
    for fmt in FORMATS:
        code, out, err = _export(path, fmt, capsys)
        if code != 0:
            assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
            continue
        hosts = _kept(names) or [f"node{r}" for r in range(len(names))]
        assert _hosts(out, fmt) == hosts
        if fmt == "csv":
            _no_formula_cells(out)
        else:
            assert all(HOST_NAME.fullmatch(x) for x in hosts)
        if fmt == "torchrun" and shutil.which("bash"):
            assert subprocess.run(["bash", "-n"], input=out, text=True).returncode == 0
            for r, line in enumerate(out.splitlines()):
                assert shlex.split(line)[4] == f"--node-rank={r}"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(_NAME, min_size=2, max_size=4, unique=True))
@example(["0", "1"])
def test_accepted_names_survive_every_topology_format(tmp_path, capsys, names):
    """A topology whose names topofinder accepts is written in each format and read back with
    the same names in the same rank order, or the format is refused in one line."""
    src = _ring_file(tmp_path, names)
    try:
        read_topology(str(src))
    except Exception as exc:                     # refused on input: one line, nothing written
        assert type(exc).__name__ == "TopofinderError" and "\n" not in str(exc)
        return
    for fmt in ("edgelist", "json", "graphml"):
        out = tmp_path / f"out.{fmt}"
        code = main(["export", str(src), "--format", fmt, "-o", str(out)])
        err = capsys.readouterr().err
        if code != 0:
            assert code == 2 and len(err.strip().splitlines()) == 1
            continue
        labels = read_topology(str(out)).labels
        assert (labels and list(labels)) == _kept(names), fmt
