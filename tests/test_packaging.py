"""A non-editable install works from anywhere: `pip install .` into a fresh virtual environment
(its dependencies taken from this interpreter's site-packages), then from another directory the
catalog is there and `score` and `search` give what the source tree gives.

The fresh environment sees this interpreter's site directories through a ``.pth`` file rather
than ``venv --system-site-packages``: run from inside a virtual environment, that option gives
the *base* interpreter's packages, not the environment's (where the dependencies are)."""

from __future__ import annotations

import json
import os
import site
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
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    _see_our_packages(py)
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


def _site_dirs() -> list[str]:
    """The site directories this interpreter imports its dependencies from."""
    dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE
                                     else [])
    return [d for d in dirs if os.path.isdir(d)]


def _see_our_packages(py: Path) -> None:
    """Append this interpreter's site directories to the venv's path (after its own
    site-packages, so the copy installed there wins; their .pth files, such as an editable
    install's, are not run)."""
    own = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    Path(own, "outer-site.pth").write_text("".join(f"{d}\n" for d in _site_dirs()))


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
