"""Where `export --what patch-panel --diff` writes its relabelling (issue 38): never a file
named after the option when the diff goes to stdout."""

from __future__ import annotations

import os

import pytest

from topofinder.cli.main import main


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _old(here, capsys):
    assert main(["export", "C(8,{1,2})", "--what", "patch-panel", "-o", "old.csv"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("out", [[], ["-o", "-"]])
def test_diff_on_stdout_writes_no_stray_mapping(here, capsys, out):
    _old(here, capsys)
    assert main(["export", "C(8,{1,3})", "--what", "patch-panel", "--diff", "old.csv"]
                + out) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("action,panel,")
    assert "relabelling not written" in cap.err
    assert sorted(os.listdir(here)) == ["old.csv"]


def test_diff_on_stdout_mapping_to_its_own_file(here, capsys):
    _old(here, capsys)
    assert main(["export", "C(8,{1,3})", "--what", "patch-panel", "--diff", "old.csv",
                 "-o", "-", "--mapping", "map.csv"]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("action,panel,")
    assert sorted(os.listdir(here)) == ["map.csv", "old.csv"]
    lines = (here / "map.csv").read_text().splitlines()
    assert lines[0] == "node,node_label,physical_node,physical_label" and len(lines) == 9


def test_mapping_on_stdout_next_to_a_diff_file(here, capsys):
    _old(here, capsys)
    assert main(["export", "C(8,{1,3})", "--what", "patch-panel", "--diff", "old.csv",
                 "-o", "d.csv", "--mapping", "-"]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("node,node_label,physical_node,physical_label")
    assert sorted(os.listdir(here)) == ["d.csv", "old.csv"]


def test_both_on_stdout_is_refused(here, capsys):
    _old(here, capsys)
    assert main(["export", "C(8,{1,3})", "--what", "patch-panel", "--diff", "old.csv",
                 "-o", "-", "--mapping", "-"]) == 2
    cap = capsys.readouterr()
    assert "both on stdout" in cap.err and cap.out == ""
    assert sorted(os.listdir(here)) == ["old.csv"]
