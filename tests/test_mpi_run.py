"""The MPI executor on this machine: `mpiexec -n 16` runs exported schedules, each checked by
the executor against MPI's own collective; a corrupted schedule is reported wrong (exit 1);
bad input is one line from rank 0 with exit 2.

mpiexec comes from the `mpi` extra (MPICH's wheel installs it next to the interpreter's
scripts); the tests skip only when mpi4py cannot be imported."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from topofinder import api
from topofinder.families.build import parse
from topofinder.scoring.trees.forestcoll import optimal_trees, throughput_optimum
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule

pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed: pip install 'topofinder[mpi]'")

LAUNCH_TIMEOUT_S = 300       # generous: 16 ranks share 2 cores; no timing assertion


def mpiexec() -> str:
    """The mpiexec of this interpreter's environment (the wheel's), else the one on PATH."""
    for where in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable), None):
        found = shutil.which("mpiexec", path=where)
        if found:
            return found
    pytest.fail("mpi4py imports but no mpiexec was found: pip install 'topofinder[mpi]'")


def launch(n, *args, module=("-m", "topofinder.run")):
    cmd = [mpiexec(), "-n", str(n), sys.executable, *module, *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def schedules(tmp_path_factory):
    d = tmp_path_factory.mktemp("schedules")
    paths = {}
    for name, expr, coll in [("allreduce", "C(16,{1,6})", "allreduce"),
                             ("reduce-scatter", "Torus(4,4)", "reduce-scatter"),
                             ("small", "C(8,{1,2})", "allreduce")]:
        paths[name] = d / f"{name}.json"
        paths[name].write_text(collective_schedule(from_expression(expr), coll).to_json())
    topo = parse("Torus(4,4)")
    paths["trees"] = d / "trees.json"
    paths["trees"].write_text(optimal_trees(topo, optimum=throughput_optimum(topo)).to_json())
    return paths


def check_verified(out, collective, mpi_name):
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verified"] is True and doc["wrong_elements"] == 0
    assert doc["collective"] == collective and doc["checked_against"] == mpi_name
    assert doc["ranks"] == 16 and doc["runs_checked"] == 3
    assert doc["bytes"] == doc["pieces"] * doc["chunk_elements"] * 4
    assert doc["measured"]["time_s"] > 0 and doc["predicted"]["time_s"] > 0
    print(f"{collective}: {doc['measured']['time_s'] * 1e3:.1f} ms "
          f"(MPI {doc['mpi']['time_s'] * 1e3:.1f} ms)")
    return doc


RUN = ("--size", "256KB", "--iters", "2", "--warmup", "1", "--json")


def test_bfb_allreduce_of_circulant_runs_under_mpi(schedules):
    out = launch(16, schedules["allreduce"], *RUN)
    doc = check_verified(out, "allreduce", "MPI_Allreduce")
    assert doc["topology"] == "C(16,{1,6})" and doc["kind"] == "steps"
    # busbw = algbw · 2(N−1)/N (nccl-tests)
    m = doc["measured"]
    assert m["busbw_GBps"] == pytest.approx(m["algbw_GBps"] * 2 * 15 / 16)


def test_forestcoll_tree_allgather_of_torus_runs_under_mpi(schedules):
    # through the `topofinder run` subcommand this time
    out = launch(16, "run", schedules["trees"], *RUN,
                 module=("-c", "import sys; from topofinder.cli.main import main; "
                               "sys.exit(main(sys.argv[1:]))"))
    doc = check_verified(out, "allgather", "MPI_Allgather")
    assert doc["kind"] == "trees" and doc["tree_flow_tau"] == "15/16"


def test_reduce_scatter_runs_under_mpi(schedules):
    out = launch(16, schedules["reduce-scatter"], *RUN)
    check_verified(out, "reduce-scatter", "MPI_Reduce_scatter_block")


def test_corrupted_schedule_is_reported_wrong(schedules, tmp_path):
    doc = json.loads(schedules["small"].read_text())
    doc["sends"] = doc["sends"][1:]              # drop one reduce-scatter send
    bad = tmp_path / "corrupted.json"
    bad.write_text(json.dumps(doc))
    out = launch(8, bad, "--size", "1000000", "--iters", "1", "--warmup", "0", "--json")
    assert out.returncode == 1, out.stderr
    rep = json.loads(out.stdout)
    assert rep["verified"] is False and rep["wrong_elements"] > 0
    # 1 000 000 B is not a multiple of the 8·P pieces: rounded, and said so
    assert rep["rounded"] is True and rep["bytes"] % (rep["pieces"] * 4) == 0
    intact = launch(8, schedules["small"], "--size", "1000000", "--iters", "1",
                    "--warmup", "0")
    assert intact.returncode == 0, intact.stderr
    assert "verified: yes" in intact.stdout and "rounded to a multiple" in intact.stdout


@pytest.mark.parametrize("case", ["ranks", "unreadable", "not-json"])
def test_bad_input_is_one_line_from_rank_zero(schedules, tmp_path, case):
    path = {"ranks": schedules["reduce-scatter"], "unreadable": tmp_path / "missing.json",
            "not-json": tmp_path / "x.json"}[case]
    if case == "not-json":
        path.write_text("<algo/>")
    out = launch(2, path, "--size", "4KB")
    assert out.returncode == 2
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr
    if case == "ranks":
        assert "mpiexec -n 16" in out.stderr


def test_degraded_allreduce_runs_among_the_15_survivors(tmp_path):
    """Node 5 of a 16-node fabric dead: the repaired allreduce (BFB on the survivors, names
    kept) runs under `mpiexec -n 15` and matches MPI_Allreduce."""
    path = tmp_path / "degraded.json"
    path.write_text(api.schedule("Fail(C(16,{1,6}); 5)", "allreduce").to_json())
    out = launch(15, path, *RUN)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verified"] is True and doc["wrong_elements"] == 0 and doc["ranks"] == 15
    assert doc["topology"] == "Fail(C(16,{1,6}); 5)"
    assert doc["checked_against"] == "MPI_Allreduce"


@pytest.mark.parametrize("collective,mpi_name", [("broadcast", "MPI_Bcast"),
                                                 ("reduce", "MPI_Reduce")])
def test_oneroot_periodic_schedule_runs_under_mpi(tmp_path, collective, mpi_name):
    """Paper 003's periodic one-port schedule of Torus(4,4) from root 5, 4 periods' worth."""
    path = tmp_path / f"{collective}.json"
    api.schedule_oneroot("Torus(4,4)", collective, root=5, port_model="one", path=path)
    out = launch(16, path, "--size", "256KB", "--iters", "2", "--warmup", "1", "--pipeline", "4",
                 "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verified"] is True and doc["checked_against"] == mpi_name
    assert doc["ranks"] == 16 and doc["measured"]["time_s"] > 0 and doc["mpi"]["time_s"] > 0
