"""A non-editable install works from anywhere: `pip install .` into a fresh virtual environment
(its dependencies taken from this interpreter's site-packages), then from another directory the
catalog is there and `score` and `search` give what the source tree gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topofinder.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
                   check=True, capture_output=True)
    work = base / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TOPOFINDER_CACHE"] = str(base / "cache")

    def run(*args: str) -> str:
        done = subprocess.run([str(py), "-m", "topofinder", *args], cwd=work, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run([str(py), "-c", "import topofinder; print(topofinder.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert str(venv) in where.stdout, f"not the installed copy: {where.stdout}"
    return run


def _local(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_installed_catalog_lists_the_entries(installed, capsys):
    rows = json.loads(installed("catalog", "list", "--json"))["entries"]
    assert {"Diamond", "DBJMod(2,4)", "K(4,4)"} <= {r["expr"] for r in rows}
    assert rows == json.loads(_local(capsys, "catalog", "list", "--json"))["entries"]


def test_installed_score_and_search_match_the_source_tree(installed, capsys):
    assert json.loads(installed("score", "Diamond", "--json")) == \
        json.loads(_local(capsys, "score", "Diamond", "--json"))
    remote = json.loads(installed("search", "--n", "64", "--d", "4", "--json", "--jobs", "1"))
    local = json.loads(_local(capsys, "search", "--n", "64", "--d", "4", "--json", "--jobs", "1"))
    assert remote == local
    assert any(p["expr"].startswith("L(") for p in remote["frontier"])


def test_installed_package_ships_the_schemas(installed):
    out = installed("--help")
    assert "usage: topofinder" in out
