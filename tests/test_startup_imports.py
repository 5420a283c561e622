"""What a command loads (docs/performance.md "Start-up"): the command line and `search` import
only what they run, and a verifying worker only what its task needs. Each check runs a fresh
interpreter and reads its ``sys.modules``: a module-level import that drags in one of these
modules again fails here (no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Never loaded by building the command line (every command's parser) or by `search`: the
#: bench cases, the schedule writers, the API modules behind other commands, networkx (its
#: graphs are for topology files and catalog builds; search tests isomorphism with igraph),
#: joblib (loky pools and Dask only: a search's helpers are forks of its process), the MPI
#: executor, and the cabling and resilience modules of `search --robust/--phases/--from`.
NOT_FOR_SEARCH = ("topofinder.batch.bench_cases", "topofinder.batch.bench",
                  "topofinder.batch.sweep", "topofinder.export.msccl.writer",
                  "topofinder.export.mscclpp.plan_writer", "topofinder.export.chakra",
                  "topofinder.export.npz", "topofinder.api.batch", "topofinder.api.cabling",
                  "topofinder.api.schedules", "topofinder.api.plans",
                  "topofinder.api.rank_schedules", "topofinder.finder.per_rank",
                  "topofinder.execute.mpi", "topofinder.execute.plan",
                  "topofinder.cabling", "topofinder.resilience.robust",
                  "topofinder.resilience.moves", "topofinder.resilience.phases",
                  "matplotlib", "networkx", "joblib")
#: Libraries a parser never needs (each 0.05–0.4 s to import; the solvers load where a
#: problem is solved).
NOT_FOR_PARSING = NOT_FOR_SEARCH + ("scipy.optimize", "ortools", "igraph")
#: Not imported by unpickling a worker's tasks (verify_candidate, the baselines' scorer).
NOT_FOR_WORKERS = ("networkx", "scipy.optimize", "ortools", "igraph", "matplotlib",
                   "topofinder.api", "topofinder.cli", "topofinder.export",
                   "topofinder.cabling", "topofinder.resilience", "topofinder.batch")


def _loaded(code: str, tmp_path: Path) -> set[str]:
    """The modules a fresh ``python -c code`` (run from the repository) has loaded at its end."""
    out = tmp_path / "modules.json"
    script = (f"{code}\nimport json, sys\n"      # a lazy module not run yet is not loaded
              f"loaded = [n for n, m in sys.modules.items() if type(m).__name__ != '_LazyModule']\n"
              f"open({str(out)!r}, 'w').write(json.dumps(sorted(loaded)))\n")
    env = dict(os.environ, TOPOFINDER_CACHE=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    return set(json.loads(out.read_text()))


def _offenders(loaded: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))


def test_offenders_sees_a_package_and_its_submodules():
    loaded = {"networkx", "networkx.classes", "networkxx", "topofinder.api.search"}
    assert _offenders(loaded, ("networkx", "topofinder.api.search")) == [
        "networkx", "networkx.classes", "topofinder.api.search"]


def test_building_the_command_line_loads_no_heavy_module(tmp_path):
    loaded = _loaded("from topofinder.cli.main import build_parser\nbuild_parser()", tmp_path)
    assert "topofinder.cli.search" in loaded          # the check looks at the right process
    assert _offenders(loaded, NOT_FOR_PARSING) == []


def test_search_loads_only_what_it_runs(tmp_path):
    loaded = _loaded("import contextlib, io\nfrom topofinder.cli.main import main\n"
                     "with contextlib.redirect_stdout(io.StringIO()):\n"
                     "    assert main(['search', '--n', '16', '--d', '2', '--jobs', '1', "
                     "'--json']) == 0", tmp_path)
    assert "topofinder.finder.verify" in loaded        # it did search
    assert _offenders(loaded, NOT_FOR_SEARCH) == []


def test_a_workers_tasks_load_no_front_end_or_heavy_module(tmp_path):
    loaded = _loaded("import pickle\nfrom topofinder.compute import parallel\n"
                     "from topofinder.finder.verify import verify_candidate\n"
                     "from topofinder.workload import baseline_speedups\n"
                     "pickle.dumps((parallel._ready, verify_candidate, "
                     "baseline_speedups._score_and_price))", tmp_path)
    assert "topofinder.scoring.allgather.bfb" in loaded
    assert _offenders(loaded, NOT_FOR_WORKERS) == []


def test_a_lazy_module_runs_on_first_use(tmp_path):
    """topofinder.compute.lazy: declared, the module is not run (its imports not loaded); the
    first attribute read runs it, and it is then the package's attribute like any import."""
    loaded = _loaded("from topofinder.compute.lazy import lazy_module\n"
                     "moves = lazy_module('topofinder.resilience.moves')\n"
                     "import sys\n"
                     "assert 'topofinder.cabling.ocs' not in sys.modules\n"
                     "assert callable(moves.move_aware)\n"
                     "import topofinder.resilience\n"
                     "assert topofinder.resilience.moves.move_aware is moves.move_aware\n"
                     "assert lazy_module('topofinder.resilience.moves') is moves", tmp_path)
    assert {"topofinder.resilience.moves", "topofinder.cabling.ocs"} <= loaded
