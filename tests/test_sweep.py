"""Sweeps: spec checking, resumable atomic output, cache, and the Dask backend (issue 9)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topofinder.compute import parallel
from topofinder.batch import sweep
from topofinder.cli.main import main

SPEC = """
name = "tiny"
degrees = [2, 4]
n_min = 8
n_max = 24
[workload]
sizes = ["1MB", "100MB"]
"""


def _outputs(folder: Path) -> dict[str, bytes]:
    """Every text output of a sweep (plots are checked for presence only)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in (".csv", ".json"):
            files[str(path.relative_to(folder))] = path.read_bytes()
    return files


@pytest.fixture()
def spec_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.toml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted, uncached sweep every other run must reproduce byte for byte."""
    folder = tmp_path_factory.mktemp("ref")
    path = folder / "tiny.toml"
    path.write_text(SPEC)
    out, _ = sweep.run_sweep(sweep.load_spec(path), folder, jobs=1, use_cache=False,
                          progress=False)
    return _outputs(out)


#: The Dask tests' spec: 8 cells (a cluster's start and the transfers, not the cells, are what
#: they test; the README's test command runs them, so they stay short).
SMALL = SPEC.replace("n_max = 24", "n_max = 11")


@pytest.fixture()
def small_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL)
    return path


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory):
    """The uncached sequential run of SMALL, which the Dask runs must reproduce byte for byte."""
    folder = tmp_path_factory.mktemp("small")
    (folder / "tiny.toml").write_text(SMALL)
    out, _ = sweep.run_sweep(sweep.load_spec(folder / "tiny.toml"), folder, jobs=1,
                             use_cache=False, progress=False)
    return _outputs(out)


def test_sweep_writes_frontiers_best_and_plots(spec_file, tmp_path, reference):
    spec = sweep.load_spec(spec_file)
    assert len(spec.cells) == 2 * 17             # N = 8..24 at d = 2 and at d = 4
    assert {"frontier.csv", "frontier.json", "best.csv"} <= set(reference)
    assert len([k for k in reference if k.startswith("cells/")]) == 34
    out, _ = sweep.run_sweep(spec, tmp_path, jobs=1, use_cache=True, progress=False)
    assert (out / "best_d4_100MB.png").stat().st_size > 0
    header = reference["frontier.csv"].decode().splitlines()[0]
    assert header.startswith("N,d,expr,T_L,tau")


def test_killed_sweep_resumes_to_identical_files(spec_file, tmp_path, reference):
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    cmd = [sys.executable, "-m", "topofinder.cli.main", "sweep", str(spec_file), "--out", str(out),
           "--jobs", "1", "--no-cache"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cells = out / "tiny" / "cells"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if cells.exists() and len(list(cells.glob("*.json"))) >= 3:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    done_before = len(list(cells.glob("*.json")))
    # a crash can leave a temporary file behind: it must not be mistaken for a result
    (cells / ".N9_d2.json.999.tmp").write_text('{"half": ')
    assert main(["sweep", str(spec_file), "--out", str(out), "--jobs", "1", "--no-cache"]) == 0
    assert done_before <= len(list(cells.glob("N*.json"))) == 34
    assert _outputs(out / "tiny") == reference


def test_corrupt_cell_is_recomputed(spec_file, tmp_path, reference):
    spec = sweep.load_spec(spec_file)
    out, _ = sweep.run_sweep(spec, tmp_path / "c", jobs=1, use_cache=False, progress=False)
    sweep.cell_path(out, 12, 4, spec.bidirectional, spec.verify).write_text("{not json")
    sweep.run_sweep(spec, tmp_path / "c", jobs=1, use_cache=False, progress=False)
    assert _outputs(out) == reference


def test_cached_sweep_gives_the_same_files(spec_file, tmp_path, reference):
    spec = sweep.load_spec(spec_file)
    for attempt in ("cold", "warm"):
        out, _ = sweep.run_sweep(spec, tmp_path / attempt, jobs=1, use_cache=True, progress=False)
        assert _outputs(out) == reference


def test_dask_backend_matches_loky(small_spec, tmp_path, small_reference):
    pytest.importorskip("dask.distributed")
    parallel.use_dask(None)                      # a 2-worker LocalCluster
    try:
        out, _ = sweep.run_sweep(sweep.load_spec(small_spec), tmp_path / "dask", jobs=2,
                              use_cache=False, progress=False)
    finally:
        parallel.use_loky()
    assert _outputs(out) == small_reference


def test_dask_scheduler_address_gives_the_loky_table(small_spec, tmp_path, small_reference,
                                                     monkeypatch):
    """The documented recipe in small (docs/performance.md): a scheduler with two worker
    processes (a LocalCluster standing for `dask scheduler` + `dask worker`), the CLI given its
    tcp:// address and a --out relative to the driver's directory, which is not the workers'
    (they started elsewhere): the cells reach the driver's disk, and every file equals the
    loky run's (two local worker processes) and the sequential reference."""
    distributed = pytest.importorskip("dask.distributed")
    loky, _ = sweep.run_sweep(sweep.load_spec(small_spec), tmp_path / "loky", jobs=2,
                              use_cache=False, progress=False)
    assert _outputs(loky) == small_reference
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids = set(client.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids
        driver = tmp_path / "driver"
        driver.mkdir()
        monkeypatch.chdir(driver)
        assert main(["sweep", str(small_spec), "--backend", "dask", "--scheduler",
                     cluster.scheduler_address, "--out", "rel", "--no-cache"]) == 0
    assert _outputs(driver / "rel" / "tiny") == small_reference


def _killed(_):
    from types import SimpleNamespace
    from distributed import KilledWorker
    raise KilledWorker("cell", SimpleNamespace(address="tcp://127.0.0.1:1"), 3)   # a death


def test_dask_worker_deaths_are_one_line():
    """A task whose workers died too often (KilledWorker: e.g. the nanny's memory limit) ends
    run_parallel with the one-line error naming --memory-limit, not a traceback; with loky
    the same exception is not a worker death and propagates."""
    pytest.importorskip("dask.distributed")
    parallel.use_dask(None)
    try:
        with pytest.raises(parallel.TopofinderError, match="--memory-limit"):
            parallel.run_parallel(_killed, [1, 2], jobs=2)
    finally:
        parallel.use_loky()
    with pytest.raises(Exception, match="tcp://127.0.0.1:1") as exc:
        parallel.run_parallel(_killed, [1, 2], jobs=1)
    assert not isinstance(exc.value, parallel.TopofinderError)


def test_missing_spec_is_exit_2(capsys, tmp_path):
    assert main(["sweep", str(tmp_path / "none.toml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_parallel_sweep_ends_without_a_resource_warning(tmp_path):
    """Workers are killed when the command ends; nothing they made may be left to Python's
    resource tracker, which would print "leaked semaphore objects" after the last line (it
    did after every sweep: each worker's disabled progress bar made tqdm's process lock)."""
    (tmp_path / "s.toml").write_text('name = "t"\ndegrees = [4]\nn = [20, 24, 28, 32, 36, 40]\n')
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    proc = subprocess.run([sys.executable, "-m", "topofinder", "sweep", "s.toml", "--jobs", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TOPOFINDER_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert "6 of 6 cells" in proc.stdout + proc.stderr and "resource_tracker" not in proc.stderr
