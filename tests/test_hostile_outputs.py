"""Outputs never clobber inputs (issue 27): -o naming an input of the same command, two outputs
on one file, the command's own stdout, and replacements that would change owner or keep a
setuid bit are refused or handled; stdout writes are complete or an error."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from topofinder.cli.main import main
from topofinder.compute import output

RING = "0 1\n1 2\n2 0\n"


def _refused(argv, capsys, says: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.strip().splitlines()[-1].startswith("topofinder:")


@pytest.fixture()
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_o_naming_the_input_topology_is_refused(here, capsys):
    (here / "ring.edges").write_text(RING)
    _refused(["export", "ring.edges", "-o", "ring.edges"], capsys, "input of this command")
    assert (here / "ring.edges").read_text() == RING


def test_o_naming_the_input_through_a_symlink_is_refused(here, capsys):
    (here / "ring.edges").write_text(RING)
    (here / "link.edges").symlink_to(here / "ring.edges")
    _refused(["export", "ring.edges", "-o", "link.edges"], capsys, "input of this command")
    assert (here / "ring.edges").read_text() == RING


def test_diff_o_old_csv_is_refused(here, capsys):
    assert main(["export", "C(6,{1,2})", "--what", "patch-panel", "-o", "old.csv"]) == 0
    before = (here / "old.csv").read_bytes()
    _refused(["export", "C(6,{1,3})", "--what", "patch-panel", "--diff", "old.csv", "-o",
              "old.csv"], capsys, "input of this command")
    assert (here / "old.csv").read_bytes() == before
    assert not (here / "old-mapping.csv").exists()        # nothing written before refusing


@pytest.mark.parametrize("flag", ["--mapping"])
def test_two_outputs_on_one_file_are_refused_before_writing(here, capsys, flag):
    assert main(["export", "C(6,{1,2})", "--what", "patch-panel", "-o", "old.csv"]) == 0
    capsys.readouterr()
    _refused(["export", "C(6,{1,3})", "--what", "patch-panel", "--diff", "old.csv", flag,
              "x.csv", "-o", "x.csv"], capsys, "two outputs")
    assert not (here / "x.csv").exists()


def test_layout_and_o_on_one_file_are_refused(here, capsys):
    assert main(["export", "C(6,{1,2})", "--what", "patch-panel", "-o", "p.csv"]) == 0
    capsys.readouterr()
    _refused(["export", "C(6,{1,2})", "--what", "cross-connects", "--layout", "c.csv", "-o",
              "c.csv"], capsys, "two outputs")


def test_o_dev_stdout_appended_to_a_log_is_refused(here):
    log = here / "log.txt"
    log.write_text("earlier lines\n")
    with open(log, "a") as fh:
        code = subprocess.run([sys.executable, "-m", "topofinder", "export", "C(6,{1,2})",
                               "-o", "/dev/stdout"], stdout=fh, stderr=subprocess.PIPE,
                              text=True, cwd=here).returncode
    assert code == 2 and log.read_text() == "earlier lines\n"


def test_a_replaced_file_loses_setuid_and_keeps_its_owner(here):
    target = here / "t.edges"
    target.write_text("old\n")
    os.chmod(target, 0o4755 | stat.S_ISGID)
    if os.getuid() == 0:
        os.chown(target, 12345, 12345)
    output.write_text(target, "new\n")
    st = target.stat()
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(st.st_mode) == 0o755
    if os.getuid() == 0:
        assert (st.st_uid, st.st_gid) == (12345, 12345)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_short_write_to_stdout_is_an_error(here):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-u", "-m", "topofinder", "export", "Pi(4,64)"],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=here)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_an_ascii_only_stdout_is_one_line(here):
    (here / "t.json").write_text('{"directed": true, "multigraph": true, "graph": {}, '
                                 '"nodes": [{"id": "gp\\u00fc"}, {"id": "b"}], "edges": '
                                 '[{"source": "gp\\u00fc", "target": "b"}, '
                                 '{"source": "b", "target": "gp\\u00fc"}]}')
    proc = subprocess.run([sys.executable, "-m", "topofinder", "export", "t.json",
                           "--what", "ranks"], capture_output=True, text=True, cwd=here,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_tables_on_an_ascii_only_stdout_do_not_trace(here):
    proc = subprocess.run([sys.executable, "-m", "topofinder", "search", "--n", "8", "--d", "2",
                           "--jobs", "1", "--no-cache"], capture_output=True, text=True,
                          cwd=here, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and proc.stdout
