"""Move-aware search (issue 38): moves equal the written diff's removals, the lower bound is
sound (brute force over every relabelling on small N), the cabled fabric is at 0 moves."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from topofinder import api
from topofinder.cabling.move_bound import removals_lower_bound
from topofinder.cabling.patch_panel import _diff_with, diff_plans, plan_patch_panel
from topofinder.cli.main import main
from topofinder.families.build import load_topology
from topofinder.model.topology import Topology
from topofinder.resilience.moves import point_moves


def _random_regular(n, d, seed, bidirectional):
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(n) for _ in range(d // 2 if bidirectional else d)]
    src = np.concatenate([np.arange(n) for _ in perms])
    dst = np.concatenate(perms)
    if bidirectional:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return Topology(n, src, dst, expr=f"R{seed}")


def _removed(old, new, phys, duplex):
    """Rows of ``old`` no relabelled new row matches: the multiset difference of (ends,
    kind) keys, computed apart from the diff."""
    have = Counter()
    for r, k in zip(old.rows.tolist(), old.kinds.tolist()):
        have[(min(r[2], r[4]), max(r[2], r[4]), k) if k == 1 else (r[2], r[4], k)] += 1
    want = Counter()
    for s, t in zip(phys[new.src].tolist(), phys[new.dst].tolist()):
        if s == t:
            want[(s, t, 2)] += 1
        elif duplex:
            if s < t:
                want[(s, t, 1)] += 1
        else:
            want[(s, t, 0)] += 1
    return old.num_rows - sum((have & want).values())


def _fewest_removals(old, new):
    duplex = bool(new.bidirectional and np.any(old.kinds == 1))
    return min(_removed(old, new, np.array(p), duplex)
               for p in itertools.permutations(range(new.n)))


def test_removal_count_matches_the_diff():
    old = plan_patch_panel(_random_regular(6, 2, 1, True))
    new = _random_regular(6, 2, 2, True)
    for p in list(itertools.permutations(range(6)))[::97]:
        assert _removed(old, new, np.array(p), True) == \
            _diff_with(old, new, np.array(p), "auto", None).removed.shape[0]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("bidirectional", [False, True])
def test_bound_never_exceeds_the_best_relabelling(seed, bidirectional):
    """Brute force: the fewest removals over all 7! relabellings is >= the bound."""
    n = 7
    old = plan_patch_panel(_random_regular(n, 2, seed, bidirectional))
    new = _random_regular(n, 2, 100 + seed, bidirectional)
    bound = removals_lower_bound(n, old.rows, old.kinds, new)
    assert 0 <= bound <= _fewest_removals(old, new)


def test_bound_counts_triangles():
    """C(6,{1,2}) has 2 triangles (each cable of the two triangles {0,2,4}, {1,3,5} on one),
    K(3,3) = C(6,{1,3}) none: at least one cable moves, and no relabelling does better than
    the bound."""
    old = plan_patch_panel(load_topology("C(6,{1,2})"))
    new = load_topology("C(6,{1,3})")          # K(3,3): bipartite, no triangle
    bound = removals_lower_bound(6, old.rows, old.kinds, new)
    assert 1 <= bound <= _fewest_removals(old, new)


@pytest.mark.parametrize("old_expr,new_expr", [
    ("C(16,{1,6})", "C(16,{3,4})"), ("C(16,{1,6})", "L(C(4,{1,2}))"),
    ("L(C(4,{1,2}))", "L(C(4,{1,3}))"), ("Torus(4,4)", "C(16,{1,4})"),
    ("C(32,{1,7})", "C(32,{2,5})")])
def test_moves_equal_the_written_diff(tmp_path, old_expr, new_expr):
    plan = plan_patch_panel(load_topology(old_expr))
    for method in ("exact", "heuristic"):
        moves, bound = point_moves(plan, new_expr, method)
        diff = diff_plans(plan, load_topology(new_expr), method=method)
        assert moves == diff.removed.shape[0] >= bound


def test_search_from_plan_reports_moves_and_the_cabled_fabric(tmp_path, capsys):
    old = tmp_path / "old.csv"
    assert main(["export", "C(16,{1,6})", "--what", "patch-panel", "-o", str(old)]) == 0
    capsys.readouterr()
    assert main(["search", "--n", "16", "--d", "4", "--from", str(old), "--json",
                 "--no-baselines", "--jobs", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, json.loads((Path(api.__file__).parents[1] / "schemas" /
                                         "search.schema.json").read_text()))
    pts = doc["frontier"]
    cabled = [p for p in pts if p.get("cabled")]
    assert len(cabled) == 1 and cabled[0]["moves"] == 0
    for p in pts:
        assert p["moves"] >= p["moves_lower_bound"] >= 0
        if not p["cabled"]:
            diff = api.diff_patch_panel(old, p["expr"], method=doc["moves"]["method"])
            assert p["moves"] == diff.removed.shape[0]
    # the (objective, moves) frontier: no listed point is beaten in both
    front = doc["moves"]["frontier"]
    for i in front:
        assert not any(q["moves"] <= pts[i]["moves"] and q["objective_s"] < pts[i]["objective_s"]
                       for q in pts)
    assert main(["search", "--n", "16", "--d", "4", "--from", str(old), "--json",
                 "--no-baselines", "--jobs", "1", "--max-moves", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(p["moves"] == 0 for p in doc["frontier"])
    assert doc["frontier"][doc["recommended"]]["cabled"] is True


def test_search_from_an_expression_and_a_table(capsys):
    assert main(["search", "--n", "16", "--d", "4", "--from", "Torus(4,4)",
                 "--no-baselines", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "moves >=" in out and "within 0 moves: Torus(4,4) (as cabled)" in out


def test_max_moves_needs_from(capsys):
    assert main(["search", "--n", "16", "--d", "4", "--max-moves", "3"]) == 2
    assert "needs --from" in capsys.readouterr().err


def test_from_with_another_node_count_is_refused(capsys):
    assert main(["search", "--n", "16", "--d", "4", "--from", "C(12,{1,5})",
                 "--no-baselines", "--jobs", "1"]) == 2
    assert "12 nodes" in capsys.readouterr().err


@pytest.mark.slow
def test_held_out_pairs_at_1024():
    """N = 1024, d = 4: the search's moves equal the heuristic diff's removals."""
    plan = plan_patch_panel(load_topology("L^3(C(16,{1,6}))"))
    for expr in ("L^4(C(4,{1,2}))", "L^2(Aff(64,17,{7,21,29,31}))", "L^3(C(16,{1,6}))",
                 "C(1024,{1,5})"):
        moves, bound = point_moves(plan, expr, "heuristic")
        diff = diff_plans(plan, load_topology(expr), method="heuristic")
        assert moves == diff.removed.shape[0] >= bound
