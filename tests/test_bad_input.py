"""Every input gets an answer or one clear line: malformed files, hostile options and
impossible requests end with exit status 2 and a single line on stderr, never a traceback,
and nothing is left half-written. The last test throws random argument vectors and random
file contents at the command line."""

from __future__ import annotations

import json
import os
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topofinder.cli.main import main


def _run(args, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code, err, expect=2):
    assert code == expect, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("topofinder: "), err
    assert "Traceback" not in err


@pytest.fixture
def files(tmp_path):
    made = {
        "garbage.csv": b"garbage\x00\xff\xfe\n",
        "no_expr.json": b'{"frontier": [{"foo": 1}]}',
        "bad_type.json": b'{"frontier": [{"expr": 5}]}',
        "empty_frontier.json": b'{"frontier": []}',
        "big_capacity.txt": b"0 1 99999999999999999999999\n1 0 1\n",
        "ring.txt": b"0 1\n1 2\n2 0\n",
        "binary.txt": bytes(range(256)),
        "bench.json": b"{not json",
    }
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize("args", [
    ["export", "{d}/no_expr.json", "--pick", "0", "--what", "schedule"],
    ["export", "{d}/bad_type.json", "--pick", "0"],
    ["export", "{d}/empty_frontier.json", "--pick", "0"],
    ["export", "{d}/ring.txt", "--what", "patch-panel", "--diff", "{d}/garbage.csv"],
    ["score", "{d}/big_capacity.txt"],
    ["score", "{d}/binary.txt"],
    ["score", "C(" + "9" * 5000 + ",{1})"],
    ["score", "Pi(4," + "1" * 5000 + ")"],
    ["search", "--n", "64", "--d", "17"],
    ["search", "--n", "64", "--d", "63"],
    ["search", "--n", "1e3", "--d", "4"],
    ["search", "--n", "16", "--d", "2", "--jobs", "0"],
    ["catalog", "build", "Diamond", "--target", "-1", "--no-write"],
    ["catalog", "build", "Diamond", "--time-limit", "nan", "--no-write"],
    ["catalog", "build", "Diamond", "--steps", "1000000", "--no-write"],
    ["catalog", "build", "Diamond", "--chunks", "1000000", "--no-write"],
    ["catalog", "build", "--name", "$$$", "--n", "8", "--d", "2", "--steps", "3",
     "--chunks", "2", "--no-write"],
    ["bench", "--repeat", "1000000000"],
    ["export", "C(8,{1,2})", "--what", "schedule", "--kind", "trees",
     "--collective", "allreduce", "--format", "npz"],
])
def test_bad_input_is_one_line_exit_2(args, files, capsys):
    code, out, err = _run([a.replace("{d}", str(files)) for a in args], capsys)
    _one_line(code, err)
    assert out == ""


def test_corrupt_bench_report_is_refused_and_kept(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    (files / "results").mkdir()
    (files / "results" / "bench.json").write_bytes(b"{not json")
    code, _, err = _run(["bench", "parse Pi"], capsys)
    _one_line(code, err)
    assert (files / "results" / "bench.json").read_bytes() == b"{not json"


def test_cache_that_is_a_file_is_one_line(files, capsys, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(files / "ring.txt"))
    code, _, err = _run(["search", "--n", "16", "--d", "2", "--jobs", "1"], capsys)
    _one_line(code, err)
    assert "TOPOFINDER_CACHE" in err


def test_a_corrupt_cache_entry_is_recomputed_quietly(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path))
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    broken = 0
    for root, _, names in os.walk(tmp_path):
        for name in names:
            if name.endswith(".json"):
                with open(os.path.join(root, name), "wb") as fh:
                    fh.write(b"garbage")
                broken += 1
    assert broken
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == first and "Traceback" not in err


def test_jobs_beyond_the_cores_are_capped(capsys):
    code, out, _ = _run(["search", "--n", "16", "--d", "2", "--jobs", "1000", "--json"], capsys)
    assert code == 0 and json.loads(out)["frontier"]


_WORDS = st.sampled_from(["search", "score", "export", "sweep", "catalog", "bench", "list",
                          "build", "--n", "--d", "--size", "--alpha", "--bandwidth", "--json",
                          "--what", "schedule", "topology", "patch-panel", "--format", "xml",
                          "npz", "--pick", "--kind", "trees", "--collective", "allreduce",
                          "--alltoall-share", "--jobs", "--diff", "-o", "Pi(4,64)", "C(8,{1,2})",
                          "L(", "K(3)", "0", "-1", "2", "1e400", "nan", "1MB", "10us", "{",
                          "--target", "--steps", "--help-me", "", " "])
_TEXT = st.text(alphabet=string.printable + "µ□×\x00", max_size=12)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.one_of(_WORDS, _TEXT), max_size=6), st.binary(max_size=200))
def test_random_argument_vectors_never_trace(tmp_path, monkeypatch, capsys, argv, blob):
    """Random words and random file contents: an answer, or one line and exit 2."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "blob").write_bytes(blob)
    argv = [a if a != "{" else "blob" for a in argv]
    if "search" in argv or "sweep" in argv or "bench" in argv or "build" in argv:
        argv = ["score" if a in ("search", "sweep", "bench", "build") else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as done:                  # --help prints and exits 0
        code = done.code
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    assert code in (0, 1, 2)
    if code == 2:
        assert len([line for line in err.splitlines() if line.strip()]) == 1, err
