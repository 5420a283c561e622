"""Affine digraphs Aff(N,q,{a,...}) and their catalog (topofinder.families.basic.affine,
topofinder.finder.affine_catalog; issue 18 "topologies for every N")."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.families import affine, generalized_kautz
from topofinder.families.build import parse
from topofinder.families.catalog import affine_bases
from topofinder.finder import affine_catalog
from topofinder.finder.bases import base_expressions
from topofinder.api import schedule as tf_schedule
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.schedule import validate
from topofinder.scoring.allgather.bfb import bfb_schedule, bfb_score


def _arcs(t):
    return sorted(zip(np.asarray(t.src).tolist(), np.asarray(t.dst).tolist()))


def test_arcs_follow_the_affine_map_with_loops_joined_into_a_cycle():
    t = parse("Aff(11,2,{1,5})")
    raw = sorted((x, (2 * x + a) % 11) for x in range(11) for a in (1, 5))
    # x + 1 ≡ 0 and x + 5 ≡ 0 (mod 11): loops at 6 and 10 become the cycle 6 → 10 → 6
    assert [(x, w) for x, w in raw if x == w] == [(6, 6), (10, 10)]
    expected = sorted([(x, w) for x, w in raw if x != w] + [(6, 10), (10, 6)])
    assert _arcs(t) == expected
    assert t.expr == "Aff(11,2,{1,5})"
    one = parse("Aff(7,3,{1})")                       # 2x + 1 ≡ 0: one loop, kept
    assert one.self_loops == 1 and (3, 3) in _arcs(one)


def test_pi_is_the_affine_map_with_q_minus_d():
    """Pi(4,25) has no loops (5·x ≡ −a has no solution mod 25), so it is Aff(25,21,{21..24})."""
    pi = generalized_kautz(4, 25)
    assert pi.self_loops == 0
    assert _arcs(affine(25, 21, [21, 22, 23, 24])) == _arcs(pi)


@pytest.mark.parametrize("n,q,gens", [(37, 5, [1, 2, 3, 4]), (101, 7, [3, 9, 27, 50]),
                                      (64, 3, [1, 2, 5, 11]), (1000, 691, [49, 115, 767, 945])])
def test_loops_are_rewired_and_degrees_stay_regular(n, q, gens):
    t = affine(n, q, gens)
    x = np.arange(n)
    raw_loops = sum(int(np.count_nonzero((q * x + a) % n == x)) for a in gens)
    assert t.self_loops == (raw_loops if raw_loops == 1 else 0)
    assert np.all(t.out_degrees == 4) and np.all(t.in_degrees == 4)


@pytest.mark.parametrize("text,needle", [("Aff(10,2,{1,3})", "gcd"),
                                         ("Aff(10,3,{1,11})", "differ"),
                                         ("Aff(10,10,{1,2})", "q must be"),
                                         ("Aff(10,3)", "expected ','")])
def test_bad_affine_expressions_are_one_line_errors(text, needle):
    with pytest.raises(TopofinderError) as err:
        parse(text)
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("n", [50, 333])
def test_search_is_a_deterministic_pareto_set_scored_exactly(n):
    front = affine_catalog.search(n, 4, tries=24)
    assert front == affine_catalog.search(n, 4, tries=24)
    assert front
    limit = generalized_kautz(4, n).diameter + 2
    for prev, e in zip(front, front[1:]):
        assert prev["diameter"] < e["diameter"] and prev["tau"] > e["tau"]
    for e in front:
        t = parse(e["expr"])
        assert t.diameter == e["diameter"] <= limit       # independent BFS (scipy)
        assert bfb_score(t).tau == e["tau"]


@pytest.mark.parametrize("d", [2, 4])
def test_shipped_catalog_entries_are_what_they_claim(d):
    doc = json.loads(affine_catalog.CATALOG_FILE.read_text())
    block = doc["degrees"][str(d)]
    assert block["provenance"]["command"].startswith(f"topofinder catalog affine --d {d} ")
    rows = block["entries"]
    assert len(rows) > 1500
    rng = np.random.default_rng(d)
    for n in rng.choice([int(k) for k in rows], 6, replace=False):
        for e in rows[str(n)]:
            t = parse(e["expr"])
            assert (t.n, t.degree) == (n, d)
            assert t.diameter == e["diameter"] <= generalized_kautz(d, n).diameter + 2
            assert bfb_score(t).tau == Fraction(e["tau"])
    assert ("Aff" in " ".join(x for x, _ in base_expressions(1500, d)))


def test_affine_bfb_schedule_replays_and_beats_pi_at_1mb():
    """N = 1500: Pi's BFB pays 1.3289 at 6 steps; the catalog's affine digraph takes 7 steps at
    τ near 1, and its BFB schedule replays to the stored τ."""
    expr = affine_bases()[(1500, 4)][0]
    t = parse(expr)
    score = bfb_score(t)
    schedule = bfb_schedule(t)
    validate(schedule)
    assert (schedule.num_steps, schedule.tau) == (score.T_L, score.tau) == (t.diameter, score.tau)
    pi = bfb_score(generalized_kautz(4, 1500))
    alpha, m_over_b = 10e-6, 2 ** 20 * 8 / 100e9
    new = score.T_L * alpha + float(score.tau) * m_over_b
    old = pi.T_L * alpha + float(pi.tau) * m_over_b
    assert new < 0.95 * old


def test_catalog_affine_cli_writes_a_catalog(tmp_path, capsys):
    out = tmp_path / "aff.json"
    assert main(["catalog", "affine", "--n-min", "5", "--n-max", "12", "--tries", "4",
                 "--jobs", "1", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    block = doc["degrees"]["4"]
    assert block["provenance"]["command"].startswith("topofinder catalog affine --d 4")
    assert all(parse(e["expr"]).n == int(n) for n, rows in block["entries"].items()
               for e in rows)
    # a second degree is added to the same file, the first kept
    assert main(["catalog", "affine", "--d", "2", "--n-min", "5", "--n-max", "9", "--tries",
                 "4", "--jobs", "1", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["degrees"]) == {"2", "4"} and doc["degrees"]["4"] == block


def test_catalog_affine_cli_refuses_bad_ranges(tmp_path, capsys):
    assert main(["catalog", "affine", "--n-min", "50", "--n-max", "10",
                 "-o", str(tmp_path / "x.json")]) != 0
    err = capsys.readouterr().err
    assert "catalog affine" in err and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("extra, target, needle", [
    (["--seed", "-1"], "x.json", "seed must be >= 0"),
    (["--jobs", "0"], "x.json", "--jobs must be >= 1"),
    ([], "missing/x.json", "no such directory"),
    ([], "notes.md", "is not an affine catalog"),
    ([], "bad.json", "is not an affine catalog"),
])
def test_catalog_affine_cli_refuses_bad_output_before_searching(tmp_path, capsys, monkeypatch,
                                                                extra, target, needle):
    (tmp_path / "notes.md").write_text("# my notes\n")
    (tmp_path / "bad.json").write_text("{not json")
    before = {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()}
    monkeypatch.setattr(affine_catalog, "run_parallel",
                        lambda *a, **k: pytest.fail("searched before checking the output"))
    assert main(["catalog", "affine", "--d", "2", "--n-min", "5", "--n-max", "9",
                 "-o", str(tmp_path / target), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()} == before


def test_line_graph_of_an_affine_digraph_is_moore_and_bandwidth_optimal_at_16_2():
    """L(Aff(8,3,{1,3})) replays at (T_L, τ) = (4, 15/16): the Moore bound (1+2+4+8 < 16 nodes
    within 3 hops) and the bandwidth bound (N−1)/N at once, so it dominates paper 001
    Table 9's DBJMod(2,4) (5, 15/16) and L(Diamond) (4, 1)."""
    s = tf_schedule("L(Aff(8,3,{1,3}))", "allgather")
    validate(s)
    assert (s.num_steps, s.tau) == (moore_bound_steps(16, 2), Fraction(15, 16))
