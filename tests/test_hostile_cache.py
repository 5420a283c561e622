"""The disk cache holds data, not code (issue 27): planted or edited entries are never executed
nor served, and the cache directory is private."""

import json
import os
import stat
from fractions import Fraction
from pathlib import Path

import pytest

from topofinder.batch import sweep
from topofinder.cli.main import main
from topofinder.compute import cache
from topofinder.errors import TopofinderError
from topofinder.finder.growth import Candidate
from topofinder.finder.recipe import base
from topofinder.model.bounds import moore_bound_steps

HOSTILE = Path(__file__).parent / "data" / "hostile"


def _search(capsys) -> dict:
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _entries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.json")]


@pytest.fixture()
def private_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "cache"
    monkeypatch.setenv("TOPOFINDER_CACHE", str(root))
    return root


def test_values_round_trip_through_json():
    recipe = base("C(16,{1,2})", "bfb")
    value = [(Candidate(recipe, 16, 4, 3, Fraction(15, 16)), {"x": (1, 2.5, None)}),
             {3: float("inf"), "k": [True, "s"]}]
    assert cache.decode(json.loads(json.dumps(cache.encode(value)))) == value


@pytest.mark.parametrize("data", [{"t": "record", "name": "Popen", "v": {}},
                                  {"t": "dict", "v": [[1]]}, {"x": 1}, [1, 2],
                                  {"t": "float", "v": "__import__('os')"}])
def test_decode_refuses_what_it_did_not_write(data):
    with pytest.raises(ValueError):
        cache.decode(data)


def test_a_planted_pickle_is_never_executed(private_cache, capsys):
    first = _search(capsys)
    planted = (HOSTILE / "cache_entry.pkl").read_bytes()
    for path in _entries(private_cache):
        path.write_bytes(planted)
    (private_cache / "output.pkl").write_bytes(planted)       # the old joblib layout
    assert _search(capsys) == first
    assert not list(Path.cwd().glob("pwned*"))


def test_an_entry_below_the_moore_bound_is_not_served(private_cache, capsys):
    first = _search(capsys)
    forged = 0
    for path in _entries(private_cache):
        doc = json.loads(path.read_text())
        if '"T_L"' not in json.dumps(doc["result"]):
            continue
        # every T_L set to 1 step and re-signed: a consistent hash, an impossible claim
        result = doc["result"]
        _set_t_l(result)
        doc["result"], doc["sha256"] = result, cache._digest(result)
        path.write_text(json.dumps(doc))
        forged += 1
    assert forged
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    again = json.loads(out)
    assert "below the bound" in err and again == first
    assert all(p["T_L"] >= moore_bound_steps(16, 2) for p in again["frontier"])


def _set_t_l(data):
    """Every "T_L" key of an encoded value set to 1 (in place)."""
    if isinstance(data, dict):
        if data.get("t") == "dict":
            for pair in data["v"]:
                if pair[0] in ("T_L", "allreduce_T_L"):
                    pair[1] = 1
        if data.get("t") == "record" and "t_l" in data["v"]:
            data["v"]["t_l"] = 1
        for v in data.values():
            _set_t_l(v)
    elif isinstance(data, list):
        for v in data:
            _set_t_l(v)


def test_directories_are_private_even_with_umask_000(tmp_path, monkeypatch, capsys):
    root = tmp_path / "a" / "b"
    monkeypatch.setenv("TOPOFINDER_CACHE", str(root))
    old = os.umask(0)
    try:
        _search(capsys)
    finally:
        os.umask(old)
    for d in [tmp_path / "a", root, *[p for p in root.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_world_writable_cache_is_refused(tmp_path, monkeypatch, capsys):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(root))
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert "writable by others" in err and len(err.strip().splitlines()) == 1


def test_a_cache_owned_by_another_user_is_refused(tmp_path, monkeypatch, capsys):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(root))
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1"]) == 2
    assert "owned by another user" in capsys.readouterr().err


def test_the_root_directory_is_refused(monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", "/")
    with pytest.raises(TopofinderError, match="root directory"):
        cache.cached(len)
    assert not (Path("/") / cache.ENTRIES).exists()


def test_an_impossible_cell_file_is_not_published(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    spec_path = tmp_path / "s.toml"
    spec_path.write_text('name = "s"\ndegrees = [2]\nn = [16]\n[workload]\nsizes = ["1MB"]\n')
    spec = sweep.load_spec(spec_path)
    planted = sweep.cell_path(tmp_path / "s", 16, 2)
    planted.parent.mkdir(parents=True)
    planted.write_text((HOSTILE / "impossible_cell.json").read_text())
    out, failed = sweep.run_sweep(spec, tmp_path, jobs=1, progress=False)
    assert not failed
    best = (out / "best.csv").read_text()
    assert "forged" not in best and "forged" not in (out / "frontier.csv").read_text()
    assert json.loads(planted.read_text())["frontier"][0]["T_L"] >= moore_bound_steps(16, 2)


@pytest.mark.parametrize("loop", ["self", "pair", "below"])
def test_a_symlink_loop_is_one_line(tmp_path, monkeypatch, capsys, loop):
    """A TOPOFINDER_CACHE that is (or passes through) a symlink loop: one line, no traceback
    (Path.resolve raised RuntimeError before Python 3.13)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(a if loop == "self" else b)
    if loop != "self":
        b.symlink_to(a)
    monkeypatch.setenv("TOPOFINDER_CACHE", str(a / "sub" if loop == "below" else a))
    assert main(["search", "--n", "16", "--d", "2", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "symlink loop" in err and "\n" not in err and "Traceback" not in err
