"""The `topofinder` command: score/export output and one-line errors for bad input."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from topofinder.cli.main import main
from topofinder.families.build import load_topology, parse

SCORE_FIELDS = {"expr", "N", "d", "diameter", "bidirectional", "regular", "self_loops",
                "moore_T_L", "tau_opt"}


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("expr,expected", [
    # L^3 of C(16,{3,4}): N = 16·4^3, diameter D(C) + 3 = 3 + 3, Moore bound for d=4 is 5
    ("L^3(C(16,{3,4}))", {"N": 1024, "d": 4, "diameter": 6, "bidirectional": False,
                          "regular": True, "self_loops": 0, "moore_T_L": 5}),
    # Pi(4,1024): 5x ≡ −a (mod 1024) has one solution per a → 4 self-loops; Thm 21: D <= 5+1
    ("Pi(4,1024)", {"N": 1024, "d": 4, "bidirectional": False, "self_loops": 4,
                    "moore_T_L": 5}),
    # Torus(4,8): diameter 2 + 4, bidirectional; Moore: 1+4+16 < 32 <= 1+4+16+64
    ("Torus(4,8)", {"N": 32, "d": 4, "diameter": 6, "bidirectional": True, "moore_T_L": 3}),
])
def test_score_json_fields(capsys, expr, expected):
    code, out, err = _run(capsys, "score", expr, "--json")
    assert code == 0 and err == ""
    info = json.loads(out)
    assert SCORE_FIELDS <= set(info)
    assert info["expr"] == expr
    for key, value in expected.items():
        assert info[key] == value, key
    assert info["tau_opt"] == pytest.approx((info["N"] - 1) / info["N"])
    if expr.startswith("Pi"):
        assert info["diameter"] <= info["moore_T_L"] + 1


def test_score_plain_text_lists_the_fields(capsys):
    code, out, _ = _run(capsys, "score", "K(4,4)")
    assert code == 0
    rows = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert rows["N"] == "8" and rows["diameter"] == "2"


@pytest.mark.parametrize("fmt", ["edgelist", "json", "graphml"])
def test_export_round_trips_through_load_topology(capsys, tmp_path, fmt):
    expr = "L(C(7,{2,3})) x UniRing(2,3)"
    path = str(tmp_path / f"topo.{fmt}")
    code, out, err = _run(capsys, "export", expr, "--what", "topology", "--format", fmt,
                          "-o", path)
    assert code == 0 and out == "" and err == ""
    assert load_topology(path).same_arcs(parse(expr))
    # and the file scores like the expression
    code, out, _ = _run(capsys, "score", path, "--json")
    assert code == 0 and json.loads(out)["diameter"] == parse(expr).diameter


def test_export_edgelist_to_stdout_has_one_line_per_arc(capsys):
    code, out, _ = _run(capsys, "export", "C(6,{3,1})")          # default format: edgelist
    g = parse("C(6,{1,3})")
    arcs = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert code == 0 and len(arcs) == g.num_arcs == 6 * 4
    assert sorted(arcs).count("0 3") == 2                         # a = m/2: a double arc


BAD_INPUTS = [
    (["score", "K(1)"], "m >= 2"),                    # N < 2
    (["score", "Pi(4,1)"], "m >= 2"),
    (["score", "Pi(0,5)"], "d >= 1"),                 # d < 1
    (["score", "BiRing(3,8)"], "even degree"),        # odd degree where even is needed
    (["score", "C(8,{2,4})"], "gcd"),                 # disconnected circulant
    (["score", "Foo(3)"], "unknown family"),
    (["score", "L^3(C(16,{3,4})"], "column"),         # malformed
    (["score", "Hypercube(40)"], "1000000"),          # more than 10^6 nodes
    (["score", "missing/topo.txt"], "no such topology file"),
    (["export", "K(1)", "-o", "OUT"], "m >= 2"),
    (["export", "C(8,{2,4})", "--format", "json", "-o", "OUT"], "gcd"),
    (["export", "Hypercube(40)", "-o", "OUT"], "1000000"),
    (["export", "K(3)", "--format", "dot", "-o", "OUT"], "edgelist, json, graphml"),
    (["export", "K(3)", "-o", "MISSING"], "cannot write"),
    (["score"], "EXPR"),                              # argparse errors are one line too
    # an unknown option names the command it was given to and that command's help
    (["search", "--n", "8", "--d", "2", "--bogus"],
     "error: search: unrecognized arguments: --bogus (see 'topofinder search --help')"),
    (["frob"], "error: argument COMMAND: invalid choice: 'frob'"),
]


@pytest.mark.parametrize("argv,fragment", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(capsys, tmp_path, argv, fragment):
    out_file = tmp_path / "out.txt"
    subst = {"OUT": str(out_file), "MISSING": str(tmp_path / "no" / "out.txt")}
    argv = [subst.get(a, a) for a in argv]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("topofinder: error: ")
    assert fragment in lines[0] and "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_installed_console_script():
    exe = shutil.which("topofinder")
    assert exe is not None, "the console script is missing: run python3 -m pip install -e ."
    helped = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    for command in ["search", "score", "export", "bench"]:
        assert command in helped.stdout
    bad = subprocess.run([exe, "score", "Hypercube(40)"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
    assert "Traceback" not in bad.stderr


def test_export_refuses_a_bad_price_figure_before_writing(tmp_path):
    """The stated prices' --size is checked before the schedule is written: a refused export
    leaves no file behind (it used to write the schedule, then fail on the price)."""
    out = tmp_path / "s.json"
    done = subprocess.run([sys.executable, "-m", "topofinder", "export", "C(8,{1,3})", "--what",
                           "schedule", "--size", "1XB", "-o", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "unknown unit 'XB'" in done.stderr
    assert not out.exists()
