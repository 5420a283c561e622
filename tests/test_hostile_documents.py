"""Hostile input documents (issue 27): a `topology` field naming another file is never echoed,
and inputs that ask for huge work are refused in one line before it starts."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topofinder.cli.main import main

HOSTILE = Path(__file__).parent / "data" / "hostile"


def _one_line_exit_2(argv, capsys) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return out + err


def _secrets() -> list[str]:
    """Strings of the files the hostile documents name, which must never be printed."""
    lines = [x for x in Path("/etc/passwd").read_text().splitlines() if x] \
        if Path("/etc/passwd").exists() else []
    env = [f"{k}={v}" for k, v in os.environ.items() if len(v) > 3]
    return lines[:5] + env[:20]


@pytest.mark.parametrize("argv", [
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_passwd.json")],
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_environ.json")],
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_passwd.xml")],
    ["run", str(HOSTILE / "schedule_passwd.json")],
    ["run", str(HOSTILE / "schedule_environ.json")],
    ["export", str(HOSTILE / "search_passwd.json"), "--pick", "0"]])
def test_a_topology_field_naming_another_file_is_never_echoed(argv, capsys):
    text = _one_line_exit_2(argv, capsys)
    assert "not a readable topology file" in text
    for secret in _secrets():
        assert secret not in text


@pytest.mark.parametrize("argv, says", [
    (["check", "{H}/plan_node_1e12.csv", "{H}/schedule_c6.json"], "below 1000000"),
    (["check", "{H}/plan_c6.csv", "{H}/xml_ichunks_1e12.xml"], "each must be 0.."),
    (["check", "{H}/plan_c6.csv", "{H}/xml_ngpus_minus4.xml"], "ngpus=-4"),
    (["check", "{H}/plan_c6.csv", "{H}/bomb.npz"], "at most"),
    (["check", "{H}/plan_c6.csv", "{H}/lying_header.npz"], "declares more data"),
    (["check", "{H}/plan_c6.csv", "{H}/empty.npz"], "cannot read schedule .npz"),
    (["sweep", "{H}/sweep_n_2p63.toml"], "2..1000000"),
    (["sweep", "{H}/sweep_300_sizes.toml"], "at most 16"),
    (["run", "{H}/trees_c6.json", "--pipeline", "1000000000"], "1..4096"),
    (["run", "{H}/trees_c6.json", "--pipeline", "1e9"], "invalid int"),
    (["search", "--n", "8", "--d", "2", "--jobs", "1", "--no-cache", "--no-baselines",
      "--gpus-per-node", "1000000"], "at most 1000000 GPUs")])
def test_huge_requests_are_refused_in_one_line(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{H}", str(HOSTILE)) for a in argv]
    assert says in _one_line_exit_2(argv, capsys)


def test_a_huge_topology_file_is_refused_before_reading(tmp_path, capsys):
    path = tmp_path / "huge.edges"
    with open(path, "wb") as fh:                 # sparse: 2 GB on paper, nothing on disk
        fh.truncate(2 << 30)
    assert "larger than" in _one_line_exit_2(["score", str(path)], capsys)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX signals")
def test_ctrl_c_inside_an_exact_all_to_all_solve_acts_within_a_second(tmp_path):
    """The symmetric all-to-all LP of L^3(C(16,{3,4})) runs for tens of seconds inside HiGHS,
    which does not return to Python; the interrupt watchdog ends the run anyway."""
    proc = subprocess.Popen([sys.executable, "-m", "topofinder", "score", "L^3(C(16,{3,4}))",
                             "--alltoall", "exact"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    time.sleep(12)
    assert proc.poll() is None, "the solve ended before the signal; pick a larger case"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 1.5
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "topofinder: interrupted"


#: How the command is started: `python -m topofinder`, and as the installed ``topofinder``
#: program's script does it (import ``entry`` from topofinder.__main__, then call it).
LAUNCHERS = {"module": ["-m", "topofinder"],
             "script": ["-c", "import sys; from topofinder.__main__ import entry; "
                              "sys.exit(entry())"]}


@pytest.mark.parametrize("launcher, after", [
    *(("module", t) for t in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5)),
    *(("script", t) for t in (0.3, 0.6, 1.0))])
def test_ctrl_c_while_starting_is_one_line(tmp_path, launcher, after):
    """Ctrl-C at any moment of a short command — its imports (also the script's, before any
    command code runs), the handlers being installed, lazy imports of solvers, the
    interpreter's teardown — ends in one line and 130, or the command's own status; never a
    traceback or a silent death by SIGINT (status -2). (A signal in the interpreter's own
    start-up, its first ~0.05 s before any line of the program runs, is Python's to report.)"""
    proc = subprocess.Popen([sys.executable, *LAUNCHERS[launcher], "score", "C(8,{1,2})"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    assert proc.returncode in (0, 130) and (proc.returncode == 0 or
                                            err.strip() == "topofinder: interrupted")


#: (plan, schedule) pairs that ``check`` must refuse, by what its one line says; every plan
#: and schedule not named here is the valid C6 one.
BAD_CHECK_INPUTS = {
    "version 2": {"schedule": "schedule_version2.json"},
    "collective 'broadcast'": {"schedule": "schedule_broadcast.json"},
    "step 0 is outside 1..": {"schedule": "schedule_step0.json"},
    "chunk hi 99 is outside 1..4": {"schedule": "schedule_shard_out_of_range.json"},
    "columns": {"schedule": "schedule_columns_reversed.json"},
    "two fibres": {"plan": "plan_fibre_twice.csv"},
    "two fibres ": {"plan": "plan_port_twice.csv"},
}


@pytest.mark.parametrize("says", BAD_CHECK_INPUTS)
def test_check_validates_the_plan_and_the_document_first(says, capsys):
    files = {"plan": "plan_c6.csv", "schedule": "schedule_c6.json", **BAD_CHECK_INPUTS[says]}
    text = _one_line_exit_2(["check", str(HOSTILE / files["plan"]),
                             str(HOSTILE / files["schedule"])], capsys)
    assert says.strip() in text


def test_the_valid_pair_still_checks(capsys):
    assert main(["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_c6.json")]) == 0


@pytest.mark.parametrize("name", ["unit_zero.json", "unit_unknown.json"])
def test_an_unknown_capacity_unit_is_refused_on_input(name, capsys):
    """A unit '0' used to be appended to every exported capacity (1 → 10)."""
    assert "capacity_unit" in _one_line_exit_2(["export", str(HOSTILE / name)], capsys)


@pytest.mark.parametrize("argv", [
    ["check", "{H}/plan_c6.csv", "{H}/schedule_num_nodes_x.json"],
    ["check", "{H}/plan_c6.csv", "{H}/schedule_num_nodes_null.json"],
    ["check", "{H}/plan_c6.csv", "{H}/schedule_num_nodes_1e400.json"],
    ["check", "{H}/plan_c6.csv", "{H}/nested_schedule.json"],
    ["check", "{H}/plan_c6.csv", "{H}/trees_weight_den0.npz"],
    ["run", "{H}/schedule_num_nodes_x.json"],
    ["run", "{H}/schedule_num_nodes_null.json"],
    ["run", "{H}/schedule_num_nodes_1e400.json"],
    ["run", "{H}/nested_schedule.json"],
    ["score", "{H}/nested.json"],
    ["sweep", "{H}/nested.toml"],
    ["search", "--n", "8", "--d", "2", "--workload", "{H}/nested.toml"],
    ["export", "{H}/nested.json", "--pick", "0"]])
def test_former_tracebacks_are_one_line(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _one_line_exit_2([a.replace("{H}", str(HOSTILE)) for a in argv], capsys)
