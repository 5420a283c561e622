"""The base catalog: entries round-trip, every stored schedule replays valid with the T_L and τ it
records, the static bases are what paper 001 Table 9 says (BW-optimal, T_L of the table), and
`topofinder catalog list` reports them."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from topofinder.expansions import analytic
from topofinder.families import catalog as cat
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.families import de_bruijn, directed_circulant
from topofinder.model.schedule import ScheduleError, StepSchedule, validate
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.topology import Topology

# (builder, args) → T_L from Table 9 / the family's diameter: K(m) 1, K(d,d) 2, H(n,q) n,
# DC(d+2,{1..d}) 2, BiRing(d,m) ⌊m/2⌋, UniRing(d,m) m−1.
TABLE9_T_L = {"complete_schedule": lambda m: 1, "bipartite_schedule": lambda d: 2,
              "hamming_schedule": lambda n, q: n, "circulant_schedule": lambda d: 2,
              "bi_ring_schedule": lambda d, m: m // 2, "uni_ring_schedule": lambda d, m: m - 1}


@pytest.mark.parametrize("build,args", analytic.STATIC_BASES,
                         ids=[f"{b.__name__}{a}" for b, a in analytic.STATIC_BASES])
def test_static_schedules_are_bw_optimal_with_table9_latency(build, args):
    s = build(*args)
    validate(s)
    g = s.topology
    assert s.num_steps == TABLE9_T_L[build.__name__](*args) == g.diameter
    assert s.tau == Fraction(g.n - 1, g.n)


def test_bfb_agrees_with_the_analytical_schedules():
    bfb = pytest.importorskip("topofinder.scoring.allgather.bfb", reason="bfb not available")
    for build, args in analytic.STATIC_BASES[:12]:
        s = build(*args)
        score = bfb.bfb_schedule(s.topology)
        assert (score.num_steps, score.tau) == (s.num_steps, s.tau), s.topology.expr


def test_entry_path_naming():
    assert cat.entry_path("DBJMod(2,4)").name == "DBJMod_2_4.json"
    assert cat.entry_path("DC(6,{1,2,3,4})").name == "DC_6_1_2_3_4.json"
    assert cat.entry_path("Diamond").name == "Diamond.json"
    with pytest.raises(TopofinderError):
        cat.entry_path("()")


def test_write_and_read_back(tmp_path):
    s = analytic.circulant_schedule(4)
    path = cat.write_entry(s.topology, s, {"command": "test", "method": "analytical",
                                           "source": "test", "seconds": 0.0}, tmp_path)
    assert path == tmp_path / "DC_6_1_2_3_4.json"
    entry = json.loads(path.read_text())
    assert (entry["N"], entry["d"], entry["T_L"], entry["tau"]) == (6, 4, 2, "5/6")
    assert entry["bw_optimal"] and entry["moore_optimal"] and entry["reverse_symmetric"]
    topo = cat.catalog_topology("DC(6,{1,2,3,4})", tmp_path)
    assert topo.same_arcs(s.topology) and topo.is_reverse_symmetric()
    back = cat.catalog_schedule("DC(6,{1,2,3,4})", tmp_path)
    validate(back)
    assert back.method == "catalog" and np.array_equal(back.sends, s.sends)
    assert (back.num_steps, back.tau) == (s.num_steps, s.tau)
    assert [e["expr"] for e in cat.entries(tmp_path)] == ["DC(6,{1,2,3,4})"]


def test_write_refuses_an_invalid_schedule(tmp_path):
    s = analytic.complete_schedule(4)
    broken = StepSchedule(s.topology, 1, s.sends[1:])          # one shard never sent
    with pytest.raises(ScheduleError):
        cat.write_entry(s.topology, broken, {}, tmp_path)
    assert not list(tmp_path.iterdir())


def test_missing_entry_names_the_known_ones(tmp_path):
    s = analytic.complete_schedule(3)
    cat.write_entry(s.topology, s, {}, tmp_path)
    with pytest.raises(TopofinderError, match=r"K\(3\)"):
        cat.load_entry("Diamond", tmp_path)


def test_reverse_isomorphism_found_when_unknown():
    known = de_bruijn(2, 3)                       # reverse-symmetric by string reversal
    bare = Topology(known.n, known.src, known.dst, expr="DBJ(2,3)")
    p = cat.find_reverse_isomorphism(bare)
    mapped = Topology(bare.n, p[bare.dst], p[bare.src], bidirectional=False)
    assert mapped.same_arcs(bare)
    assert np.array_equal(cat.find_reverse_isomorphism(directed_circulant(5, [1, 2])),
                          directed_circulant(5, [1, 2]).reverse_isomorphism)


def test_reverse_isomorphism_none_for_a_non_reverse_symmetric_graph():
    # out-degrees (2,1,1,0) but in-degrees (1,1,1,1): G^T has other degrees, so G ≇ G^T
    g = Topology(4, [0, 0, 1, 2], [1, 3, 2, 0], expr="G")
    assert cat.find_reverse_isomorphism(g) is None


# ---- the committed catalog/ directory ---------------------------------------------------------
STORED = [e for e in cat.entries() if "schedule" in e]


@pytest.mark.parametrize("entry", STORED, ids=[e["expr"] for e in STORED])
def test_every_stored_schedule_validates(entry):
    s = cat.catalog_schedule(entry["expr"])
    validate(s)
    n, d = entry["N"], entry["d"]
    assert (s.topology.n, s.topology.degree) == (n, d)
    assert s.num_steps == entry["T_L"] and s.tau == Fraction(entry["tau"])
    assert entry["bw_optimal"] == (s.tau == Fraction(n - 1, n))
    assert entry["moore_optimal"] == (s.num_steps == moore_bound_steps(n, d))
    if entry["reverse_symmetric"]:
        assert s.topology.is_reverse_symmetric()


def test_static_entries_are_in_the_catalog():
    stored = {e["expr"] for e in STORED}
    assert {b(*a).topology.expr for b, a in analytic.STATIC_BASES} <= stored


def test_catalog_list_json(capsys):
    assert main(["catalog", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["entries"]
    by_expr = {r["expr"]: r for r in rows}
    k44 = by_expr["K(4,4)"]
    assert (k44["N"], k44["d"], k44["T_L"], k44["tau_exact"]) == (8, 4, 2, "7/8")
    assert k44["bw_optimal"] and k44["moore_optimal"] and k44["schedule"] == "stored"
    assert by_expr["BiRing(2,8)"]["moore_optimal"] is False
    assert all(r["provenance"] for r in rows)


def test_catalog_list_text(capsys):
    assert main(["catalog", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:5] == ["expr", "N", "d", "T_L", "tau"]
    assert any(line.startswith("H(2,3) ") for line in out.splitlines())
