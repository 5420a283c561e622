"""The family registry is the one place a family lives (docs/extending.md): a toy family added
here, at run time, by one `register` call is parsed, built, scored and found by `search`, from
the API and the command line alike.

The toy is the Möbius ladder Mobius(m): the ring 0..m−1 with the m/2 diameters i ~ i + m/2,
3-regular and bidirectional. At m = 8 (the Wagner graph) its diameter is 2, the Moore bound of
(N, d) = (8, 3) (1 + 3 < 8 <= 1 + 3 + 9), and BFB reaches τ = 7/8 = (N−1)/N, the bandwidth
optimum — so no topology can dominate it, and no built-in base or expansion at (8, 3) reaches
both bounds (the frontier without it is Pi(3,8) at (2, 9/8) and H(3,2) at (3, 7/8)).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import networkx as nx
import numpy as np
import pytest

from topofinder.api import score, search
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.families.build import parse, predicted_size
from topofinder.families.registry import FAMILIES, Family, register
from topofinder.model.topology import Topology


def mobius(m: int) -> Topology:
    """The Möbius ladder on m nodes (m even, m >= 6)."""
    if m < 6 or m % 2:
        raise TopofinderError(f"Mobius(m) needs an even m >= 6, got {m}")
    x = np.arange(m)
    dst = np.concatenate([(x + 1) % m, (x - 1) % m, (x + m // 2) % m])
    return Topology(m, np.tile(x, 3), dst, expr=f"Mobius({m})", bidirectional=True)


def _register_toy() -> None:
    register(Family("Mobius", "Mobius(m)", (1, 1), mobius, lambda m: (m, 3),
                    lambda n, d, at_target: [f"Mobius({n})"] if d == 3 and n % 2 == 0
                    and n >= 6 else []))


@pytest.fixture
def toy_family():
    _register_toy()
    yield
    del FAMILIES["Mobius"]


def _schema(name: str) -> dict:
    return json.loads((files("topofinder") / "schemas" / name).read_text())


def test_toy_family_parses_builds_and_scores(toy_family):
    g = parse("L(Mobius(8))")
    assert predicted_size("Mobius(8) x K(3)") == (24, 5)
    wagner = nx.circulant_graph(8, [1, 4])
    assert nx.is_isomorphic(nx.Graph(parse("Mobius(8)").to_networkx()), wagner)
    assert (g.n, g.degree, g.expr) == (24, 3, "L(Mobius(8))")
    s = score("Mobius(8)")
    assert (s["N"], s["d"], s["diameter"], s["T_L"], s["tau_bfb_exact"]) == (8, 3, 2, 2, "7/8")
    assert nx.diameter(wagner) == 2
    with pytest.raises(TopofinderError, match="Mobius takes Mobius"):
        parse("Mobius(8,2)")


def test_toy_family_is_found_by_search(toy_family):
    result = search(8, 3, jobs=1, use_cache=False)
    assert [(p.expr, p.T_L, p.tau_exact) for p in result.frontier] == [("Mobius(8)", 2, "7/8")]
    jsonschema.validate(result.to_dict(), _schema("search.schema.json"))


def test_toy_family_from_the_command_line(toy_family, capsys):
    assert main(["score", "Mobius(8)", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema("score.schema.json"))
    assert (doc["expr"], doc["T_L"], doc["tau_bfb_exact"]) == ("Mobius(8)", 2, "7/8")
    assert main(["search", "--n", "8", "--d", "3", "--json", "--jobs", "1", "--no-cache",
                 "--no-baselines"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema("search.schema.json"))
    assert doc["frontier"][doc["recommended"]]["expr"] == "Mobius(8)"


def test_without_the_toy_the_frontier_is_the_builtin_one():
    """The same search before registering: Mobius is unknown and (8, 3) has no point at both
    bounds (so the test above cannot pass by accident)."""
    with pytest.raises(TopofinderError, match="unknown family 'Mobius'"):
        parse("Mobius(8)")
    frontier = search(8, 3, jobs=1, use_cache=False).frontier
    assert [(p.expr, p.T_L, p.tau_exact) for p in frontier] == [("Pi(3,8)", 2, "9/8"),
                                                               ("H(3,2)", 3, "7/8")]


def test_registry_refuses_a_taken_or_reserved_name():
    with pytest.raises(TopofinderError, match="taken"):
        register(FAMILIES["Pi"])
    with pytest.raises(TopofinderError, match="taken"):
        register(Family("L", "L(m)", (1, 1), mobius, lambda m: (m, 3)))


def test_the_disk_cache_does_not_miss_a_family_registered_later(tmp_path, monkeypatch):
    """A cached search made before the family existed is not served after registering it:
    the registered families are part of every cache key."""
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    before = search(8, 3, jobs=1).frontier
    assert [p.expr for p in before] == ["Pi(3,8)", "H(3,2)"]
    _register_toy()
    try:
        after = search(8, 3, jobs=1).frontier
    finally:
        del FAMILIES["Mobius"]
    assert [(p.expr, p.T_L, p.tau_exact) for p in after] == [("Mobius(8)", 2, "7/8")]
    assert search(8, 3, jobs=1).frontier == before          # and back again, from the cache


def test_search_document_is_unchanged_by_the_typed_records(capsys):
    """`search --n 16 --d 3 --json` (baselines on, the default) prints exactly the document
    the code printed before the search result became a typed record (tests/data/
    search_n16_d3.json, written by that code; rewritten when issue 41 added the price fields
    `allgather_time_s`, `*_async_s`, `workload.price` and `speedup.allreduce_async`, every
    other value checked equal first), and it validates against the shipped schema."""
    assert main(["search", "--n", "16", "--d", "3", "--json", "--jobs", "1",
                 "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, _schema("search.schema.json"))
    expected = json.loads((Path(__file__).parent / "data" / "search_n16_d3.json").read_text())
    for p in doc["frontier"]:              # added by issue 39 (a frontier per collective)
        assert p.pop("frontiers")
    assert _same(doc, expected)


def _same(a, b) -> bool:
    """Equal documents: same keys, order and values, floats to 1e-9 relative (LP solutions
    may differ in the last bits between solver builds); exact fractions stay exact text."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return b == pytest.approx(a, rel=1e-9)
    return type(a) is type(b) and a == b
