"""Output files never destroy what is at the path and appear complete or not at all; every
writer of the command line goes through the same checks, and failures are one line, exit 2."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from topofinder.cli.main import main
from topofinder.compute.output import atomic_output, write_text
from topofinder.errors import TopofinderError

WRITERS = [  # (arguments before -o, what the file starts with)
    (["export", "C(8,{1,2})"], "# topofinder topology"),
    (["export", "C(8,{1,2})", "--format", "json"], "{"),
    (["export", "C(8,{1,2})", "--what", "schedule"], "{"),
    (["export", "C(8,{1,2})", "--what", "schedule", "--format", "xml"], "<algo"),
    (["export", "C(8,{1,2})", "--what", "schedule", "--kind", "trees"], "{"),
    (["export", "C(8,{1,2})", "--what", "patch-panel"], "panel,"),
]


def _leftovers(directory) -> list[str]:
    return [p for p in os.listdir(directory) if p.endswith(".tmp")]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("good\n")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as fh:
            fh.write("half")
            raise RuntimeError("killed half way")
    assert target.read_text() == "good\n" and not _leftovers(tmp_path)


def test_symlink_is_followed_and_kept(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


@pytest.mark.parametrize("kind", ["fifo", "directory", "hardlink", "readonly", "device"])
def test_targets_that_would_be_destroyed_are_refused(tmp_path, kind):
    path = tmp_path / "target"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "hardlink":
        path.write_text("keep\n")
        os.link(path, tmp_path / "other")
    elif kind == "readonly":
        path.write_text("keep\n")
        path.chmod(0o444)
    else:
        path = "/dev/null"
    before = os.lstat(path)
    with pytest.raises(TopofinderError) as err:
        write_text(path, "x")
    assert "\n" not in str(err.value)
    after = os.lstat(path)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert not _leftovers(tmp_path)


def test_new_files_get_the_same_permissions_from_every_writer(tmp_path):
    mask = os.umask(0o022)
    try:
        modes = set()
        for i, (args, head) in enumerate(WRITERS):
            out = tmp_path / f"w{i}"
            assert main([*args, "-o", str(out)]) == 0
            assert out.read_text().startswith(head)
            modes.add(stat.S_IMODE(out.stat().st_mode))
        assert modes == {0o644}
        existing = tmp_path / "w0"
        existing.chmod(0o600)
        assert main([*WRITERS[0][0], "-o", str(existing)]) == 0
        assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    finally:
        os.umask(mask)
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("args", [w[0] for w in WRITERS])
def test_missing_directory_is_one_line_exit_2(args, capsys):
    assert main([*args, "-o", "/nonexistent/dir/out"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_closed_stdout_is_one_line_exit_2():
    done = subprocess.run(f"{sys.executable} -m topofinder export 'C(8,{{1,2}})' >&-",
                          shell=True, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "standard output is closed" in done.stderr


@pytest.mark.parametrize("args", [["--size", "1e400"], ["--alpha", "1e400s"],
                                  ["--bandwidth", "1e400Gbps"], ["--size", "1MB:inf,2MB:1"],
                                  ["--alltoall-share", "abc"], ["--alltoall-share", "20%"],
                                  ["--alltoall-share", "nan"]])
def test_non_finite_or_malformed_workloads_are_refused(args, capsys):
    assert main(["search", "--n", "16", "--d", "2", "--json", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
