"""The dependency floors in pyproject.toml are real: a fresh virtual environment with exactly
those minimum versions installs topofinder and passes the API, CLI, expression, schedule and
search tests (slow: it downloads the old wheels)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBSET = ["test_api.py", "test_cli.py", "test_expr.py", "test_schedule.py", "test_search.py",
          "test_forestcoll.py", "test_alltoall.py", "test_patch_panel.py", "test_plot.py"]


def floors() -> list[str]:
    """`name==minimum` for every runtime dependency (each must have a `>=` floor)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = []
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)>=([0-9][0-9.]*)", dep.replace(" ", ""))
        assert m, f"dependency {dep!r} has no '>=' floor"
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


def test_every_dependency_has_a_floor():
    assert len(floors()) >= 7


@pytest.mark.slow
def test_the_floors_install_and_pass(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run(pip + floors() + ["pytest", "hypothesis", "jsonschema"], check=True)
    subprocess.run(pip + ["--no-deps", str(ROOT)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TOPOFINDER_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *[str(ROOT / "tests" / t) for t in SUBSET]],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
