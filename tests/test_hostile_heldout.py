"""The held-out hostile cases of issue 27 (inputs the first round of tests did not cover): each
is refused in one line with exit status 2, or handled, never a traceback, a hang or a read
without end."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topofinder.cli.main import main

HOSTILE = Path(__file__).parent / "data" / "hostile"


def _one_line_exit_2(argv, capsys) -> str:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("name, says", [
    ("cap_5000_digits.edges", "capacity must be"),
    ("node_bandwidth_5000_digits.edges", "node_bandwidth must be"),
    ("rank_5000_digits.json", "digits"),
    ("unit_list.json", "capacity_unit"),
    ("duplicate_edges_key.json", "'edges' appears twice"),
    ("node_id_list.json", "a node id is a string or an integer"),
    ("node_id_null.json", "a node id is a string or an integer")])
def test_odd_numbers_keys_and_ids_in_topology_files(name, says, capsys):
    """Integers of thousands of digits (Python's int-from-text limit raised ValueError), a key
    given twice (other JSON readers keep the first), ids that are lists, objects, null or
    true (named by their Python repr before)."""
    assert says in _one_line_exit_2(["score", HOSTILE / name], capsys)


def test_a_schedule_with_a_repeated_key_is_refused(capsys):
    """num_nodes 6 then 7: Python keeps the last, other tools the first; neither is safe."""
    err = _one_line_exit_2(["check", HOSTILE / "plan_c6.csv",
                            HOSTILE / "schedule_duplicate_num_nodes.json"], capsys)
    assert "'num_nodes' appears twice" in err


def test_a_csv_field_over_the_csv_limit_is_one_line(tmp_path, capsys):
    plan = (HOSTILE / "plan_c6.csv").read_text()
    path = tmp_path / "plan.csv"
    path.write_text(plan + '"' + "x" * 200_000 + '",1,2,3,4,5,duplex\n')
    err = _one_line_exit_2(["check", path, HOSTILE / "schedule_c6.json"], capsys)
    assert "not valid CSV" in err and "xxxx" not in err


@pytest.mark.parametrize("argv", [
    ["check", "/dev/zero", "{H}/schedule_c6.json"],
    ["check", "{H}/plan_c6.csv", "/dev/zero"],
    ["check", "{H}/plan_c6.csv", "{H}/schedule_c6.json", "--diff", "/dev/zero"],
    ["run", "/dev/zero"],
    ["export", "C(6,{1,2})", "--what", "ranks", "--relabel", "/dev/zero"],
    ["sweep", "/dev/zero"],
    ["search", "--n", "6", "--d", "2", "--workload", "/dev/zero"]])
def test_a_device_as_an_input_is_refused_before_reading(argv, capsys, tmp_path, monkeypatch):
    """/dev/zero has no end: every reader refuses a device (a pipe is still read)."""
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{H}", str(HOSTILE)) for a in argv]
    assert "not a regular file" in _one_line_exit_2(argv, capsys)


@pytest.mark.parametrize("argv", [
    ["check", "{T}", "{H}/schedule_c6.json"],
    ["check", "{H}/plan_c6.csv", "{T}"],
    ["run", "{T}"],
    ["export", "C(6,{1,2})", "--what", "ranks", "--relabel", "{T}"]])
def test_a_directory_as_an_input_is_one_line(argv, capsys, tmp_path):
    argv = [a.replace("{H}", str(HOSTILE)).replace("{T}", str(tmp_path)) for a in argv]
    assert "is a directory" in _one_line_exit_2(argv, capsys)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_pipe_is_still_an_input(tmp_path, capsys):
    """`check <(cat plan.csv) schedule.json`: process substitution hands over a pipe."""
    plan = (HOSTILE / "plan_c6.csv").read_text()
    r, w = os.pipe()
    os.write(w, plan.encode())
    os.close(w)
    try:
        assert main(["check", f"/dev/fd/{r}", str(HOSTILE / "schedule_c6.json")]) == 0
    finally:
        os.close(r)
    assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize("name, says", [
    ("schedule_physical_collapsed.json", "permutation"),
    ("schedule_physical_object.json", "permutation"),
    ("schedule_labels_bidi.json", "U+202E")])
def test_the_relabelling_a_schedule_records_is_checked(name, says, capsys):
    """'physical' [0, 0, 0, 0, 0, 0] collapsed the six nodes into one and check said ok; an
    object there was a TypeError traceback; a bidi mark in 'labels' went through."""
    argv = ["check", HOSTILE / "plan_c6.csv", HOSTILE / name]
    assert says in _one_line_exit_2(argv, capsys)


def test_a_size_listed_twice_in_a_sweep_is_refused_before_the_sweep(tmp_path, capsys):
    """Both sizes wrote best_d2_1MB.png: the second write was refused after the whole sweep,
    under its progress bar."""
    err = _one_line_exit_2(["sweep", HOSTILE / "sweep_size_twice.toml", "--jobs", "1",
                            "--no-cache", "--out", tmp_path], capsys)
    assert "'1MB' twice" in err and not any(tmp_path.iterdir())


def test_a_huge_sweep_name_is_not_echoed(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "' + "x" * 100_000 + '"\ndegrees = [2]\nn = [6]\n')
    err = _one_line_exit_2(["sweep", spec, "--out", tmp_path], capsys)
    assert "plain folder name" in err and len(err) < 300


@pytest.mark.parametrize("extra", [["--mapping", "{OLD}"], ["-o", "{OLD_STEM}.csv"]])
def test_a_diff_output_on_its_input_is_refused_before_the_diff(extra, tmp_path, capsys):
    """--mapping OLD.csv, or -o X.csv whose default mapping X-mapping.csv is the old plan:
    refused before the diff is computed and reported (it printed its counts, then the error)."""
    old = tmp_path / "old-mapping.csv"
    old.write_bytes((HOSTILE / "plan_c6.csv").read_bytes())
    before = old.read_bytes()
    argv = ["export", "C(6,{1,3})", "--what", "patch-panel", "--diff", old,
            *[a.replace("{OLD}", str(old)).replace("{OLD_STEM}", str(tmp_path / "old"))
              for a in extra]]
    if "-o" not in argv:
        argv += ["-o", tmp_path / "new.csv"]
    assert "input of this command" in _one_line_exit_2(argv, capsys)
    assert old.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_links_planted_in_a_sweep_folder_are_replaced_not_followed(tmp_path, capsys):
    """Whoever can write into the results folder planted frontier.csv, best.csv and a cell
    as links to a file of the user's (and a cell as a link to /dev/zero): the sweep wrote
    through the first link, clobbering the file, and would have read /dev/zero for ever."""
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me\n")
    folder = tmp_path / "out" / "tiny"
    (folder / "cells").mkdir(parents=True)
    for name in ("frontier.csv", "best.csv", "frontier.json"):
        (folder / name).symlink_to(secret)
    (folder / "cells" / "N6_d2.json").symlink_to("/dev/zero")
    spec = tmp_path / "tiny.toml"
    spec.write_text('name = "tiny"\ndegrees = [2]\nn = [6]\n')
    assert main(["sweep", str(spec), "--jobs", "1", "--no-cache", "--out",
                 str(tmp_path / "out")]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert secret.read_text() == "keep me\n"
    for name in ("frontier.csv", "best.csv", "frontier.json", "cells/N6_d2.json"):
        assert not (folder / name).is_symlink() and (folder / name).stat().st_size > 0


def test_a_huge_trees_per_root_is_refused_in_one_line(capsys):
    """--trees-per-root 10^9 overflowed int64 in the ForestColl capacities (a traceback)."""
    err = _one_line_exit_2(["export", "C(6,{1,2})", "--what", "schedule", "--kind", "trees",
                            "--trees-per-root", "1000000000"], capsys)
    assert "1..4096" in err


def test_fixed_k_trees_on_link_capacities_near_the_limit(tmp_path, capsys):
    """Capacities of 10^9 (the largest read): ⌊U·C(e)⌋ passed int64 (OverflowError); now exact.
    The schedule is written, and with k = 1 its tree count is one per root."""
    out = tmp_path / "trees.json"
    assert main(["export", str(HOSTILE / "capacities_1e9.edges"), "--what", "schedule",
                 "--kind", "trees", "--trees-per-root", "1", "-o", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    trees = __import__("json").loads(out.read_text())["trees"]
    assert sorted(t["root"] for t in trees) == [0, 1, 2]


@pytest.mark.parametrize("extra, says", [
    (["--gpus-per-node", "2", "--intra", "NVSwitch nan"], "--intra"),
    (["--gpus-per-node", "2", "--intra", "mesh"], "--intra"),
    (["--rank-by", "robust"], "needs --robust")])
def test_search_options_are_refused_before_the_search(extra, says, capsys, monkeypatch):
    """A bad --intra or --rank-by robust without --robust was refused after the whole
    search, under its progress bar (two lines on stderr)."""
    def no_search(*args, **kwargs):
        raise AssertionError("the search ran")
    monkeypatch.setattr(sys.modules["topofinder.api.search"], "_search", no_search)
    err = _one_line_exit_2(["search", "--n", "6", "--d", "2", "--jobs", "1", "--no-cache",
                            "--no-baselines", *extra], capsys)
    assert says in err


def test_a_huge_spare_pool_is_refused_in_one_line(capsys):
    """fail --repatch 0 --spares 10^9 re-configured the panels for each spare: no end."""
    err = _one_line_exit_2(["fail", "C(6,{1,2})", "--repatch", "0", "--spares", "1000000000"],
                           capsys)
    assert "1..1024" in err


@pytest.mark.parametrize("argv, status", [
    (["score", "C(6,{9})"], 2),
    (["search", "--n", "6", "--d", "2", "--jobs", "1", "--no-cache", "--no-baselines"], 0)])
def test_a_closed_standard_error_keeps_the_exit_status(argv, status, tmp_path):
    """`2>&-`: the search's progress bar wrote to a missing stderr (AttributeError, exit 1
    with no word); a C library writing to descriptor 2 would have written into whatever file
    the command had opened there."""
    proc = subprocess.run([sys.executable, "-m", "topofinder", *argv], cwd=tmp_path,
                          stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(2),
                          timeout=600)
    assert proc.returncode == status


def test_export_pick_refuses_a_device(capsys):
    """export /dev/zero --pick 0 read until memory ran out."""
    assert "not a regular file" in _one_line_exit_2(["export", "/dev/zero", "--pick", "0"],
                                                    capsys)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and links")
def test_cache_entries_that_are_links_or_fifos_are_recomputed(tmp_path, monkeypatch, capsys):
    """Every entry of a warm cache replaced by a link to /dev/zero and one by a FIFO: the
    next search read /dev/zero until the kernel killed it (or waited on the FIFO for ever);
    now each is ignored with a note and the result is the same."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    argv = ["search", "--n", "8", "--d", "2", "--jobs", "1", "--no-baselines", "--json"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    assert entries
    for path in entries:
        path.unlink()
        path.symlink_to("/dev/zero")
    entries[0].unlink()
    os.mkfifo(entries[0])
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == first and "ignoring cache entry" in err and "Traceback" not in err
