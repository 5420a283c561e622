"""Sweep specs are checked as strictly as the command line's options, cells are keyed by what
their content depends on, and a failing cell is reported without aborting the sweep."""

from __future__ import annotations

import json

import pytest

from topofinder.batch import sweep
from topofinder.cli.main import main
from topofinder.errors import TopofinderError

def _spec(tmp_path, text: str):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


GOOD = 'name = "t"\ndegrees = [2]\nn = [8, 9]\n'


@pytest.mark.parametrize("text,words", [
    ('name = "t"\ndegrees = [2]\nn = [8]\nbidirectional = "no"\n', "true or false"),
    ('name = "t"\ndegrees = [true]\nn = [8]\n', "degrees"),
    ('name = "t"\ndegrees = [17]\nn = [64]\n', "1..16"),
    ('name = "t"\ndegrees = [2]\nn = [8]\nworkload = 3\n', "table"),
    ('name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nfoo = 1\n', "unknown workload key"),
    ('name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nalltoall_share = "0.5"\n', "number"),
    ('name = "t"\ndegrees = [2]\nn = [8]\n[workload]\nsizes = [1]\n', "strings"),
    ('name = "x\\u0000y"\ndegrees = [2]\nn = [8]\n', "plain folder name"),
    ('name = "../up"\ndegrees = [2]\nn = [8]\n', "plain folder name"),
    ('name = "t"\ndegrees = [9]\nn = [4]\n', "no cell"),
    ('name = "t"\ndegrees = [2]\nn_min = 2\nn_max = 100000000\n', "cells"),
    ('name = "t"\ndegrees = [2]\nn = [8]\nverify = 1\n', "true or false"),
    ('degrees = []\nn = [8]', "degrees"),
    ('degrees = [2]\nn_min = 10\nn_max = 5', "n_min"),
    ("degrees = [2]\nn = [8]\ncolour = 'red'", "unknown key"),
    ('degrees = [2\n', "not valid TOML"),
])
def test_bad_specs_are_refused_in_one_line(tmp_path, text, words):
    with pytest.raises(TopofinderError) as err:
        sweep.load_spec(_spec(tmp_path, text))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_spec_paths_that_are_not_files(tmp_path, capsys):
    assert main(["sweep", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    spec = _spec(tmp_path, GOOD)
    out = tmp_path / "afile"
    out.write_text("x")
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1"]) == 2
    assert "is a file" in capsys.readouterr().err


def test_cells_are_keyed_by_what_changes_them(tmp_path):
    plain = sweep.load_spec(_spec(tmp_path, 'name = "t"\ndegrees = [4]\nn = [20]\n'))
    duplex = sweep.load_spec(_spec(tmp_path, 'name = "t"\ndegrees = [4]\nn = [20]\n'
                                             'bidirectional = true\n'))
    out, _ = sweep.run_sweep(plain, tmp_path, jobs=1, use_cache=False, progress=False)
    sweep.run_sweep(duplex, tmp_path, jobs=1, use_cache=False, progress=False)
    a = json.loads(sweep.cell_path(out, 20, 4).read_text())
    b = json.loads(sweep.cell_path(out, 20, 4, bidirectional=True).read_text())
    assert (a["bidirectional"], b["bidirectional"]) == (False, True)
    frontier = json.loads((out / "frontier.json").read_text())["cells"]
    assert all(c["bidirectional"] for c in frontier)         # the rerun did not reuse a
    assert {p["expr"] for p in b["frontier"]} != {p["expr"] for p in a["frontier"]}


def test_a_failing_cell_is_reported_and_the_rest_written(tmp_path, monkeypatch, capsys):
    real = sweep.compute_cell

    def flaky(n, k, bidirectional, verify):
        if n == 9:
            raise TopofinderError("cell blew up")
        return real(n, k, bidirectional, verify)

    monkeypatch.setattr(sweep, "compute_cell", flaky)
    spec = _spec(tmp_path, GOOD)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r"), "--jobs", "1",
                 "--no-cache"]) == 1
    err_out = capsys.readouterr().out
    assert "1 of 2 cells" in err_out and "cell blew up" in err_out
    folder = tmp_path / "r" / "t"
    assert "9,2,cell blew up" in (folder / "failed.csv").read_text()
    assert sweep.cell_path(folder, 8, 2).exists() and not sweep.cell_path(folder, 9, 2).exists()
    monkeypatch.setattr(sweep, "compute_cell", real)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r"), "--jobs", "1",
                 "--no-cache"]) == 0
    assert not (folder / "failed.csv").exists()
