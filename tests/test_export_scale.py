"""Schedules at N = 10^5 (issue 31): one receiver's BFB plan, the orbit form in .npz, the size
stated before writing, refusals naming the size, step JSON streamed in blocks."""

import json

import numpy as np
import pytest

import topofinder as tf
import topofinder.api.schedules as schedules
import topofinder.model.schedule as schedule_mod
from topofinder.cli.main import main as cli_main
from topofinder.errors import TopofinderError
from topofinder.export.npz import load_npz, save_npz
from topofinder.families.build import parse
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import build_schedule, symmetric_allgather
from topofinder.model.schedule import int_rows_json, validate
from topofinder.model.symmetric import OrbitSchedule, arc_sends, expand, replay_by_symmetry
from topofinder.scoring.allgather.bfb import bfb_receiver_sends, bfb_schedule


def _sorted(rows):
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("expr", ["C(16,{1,6})", "C(50,{3,7})", "DC(31,{1,5,11})",
                                  "C(64,{1,8,20})", "Torus(4,6)", "H(2,4)", "C(12,{1,6})"])
def test_receiver_plan_is_the_full_generators_rows(expr):
    """The rows into one receiver, from k + 1 searches, are the full BFB generator's rows
    into that receiver (a second method: the all-pairs generator), with the same P."""
    topo = parse(expr)
    full = bfb_schedule(topo)
    for r in (0, topo.n // 2, topo.n - 1):
        p, rows = bfb_receiver_sends(topo, r)
        assert p == full.shard_chunks
        assert np.array_equal(_sorted(rows), _sorted(full.sends[full.sends[:, 5] == r]))


def test_receiver_plan_needs_vertex_transitivity():
    with pytest.raises(TopofinderError, match="not vertex-transitive"):
        bfb_receiver_sends(parse("Kautz(2,2)"))


@pytest.mark.parametrize("expr", ["C(16,{1,6})", "L(C(16,{1,6}))", "L^2(DC(7,{1,3}))"])
def test_orbit_npz_round_trip(tmp_path, expr):
    """Orbit form written and read back: same rows, generators and topology; it replays by
    symmetry, and its extension replays in full with the T_L and τ of the construction the
    expression names (export writes BFB instead below REPLAY_LIMIT when BFB is better, as for
    L^2(DC(7,{1,3})): τ 1 against 15/14)."""
    orbit = symmetric_allgather(from_expression(expr))
    save_npz(orbit, tmp_path / "o.npz")
    back = load_npz(tmp_path / "o.npz")
    assert isinstance(back, OrbitSchedule) and back.topology.same_arcs(orbit.topology)
    assert np.array_equal(back.sends, orbit.sends) and back.shard_chunks == orbit.shard_chunks
    assert all(np.array_equal(a, b) for a, b in zip(back.generators, orbit.generators))
    replay_by_symmetry(back)
    full = expand(back)
    validate(full)
    named = build_schedule(from_expression(expr))          # the construction the recipe names
    assert (full.num_steps, full.tau) == (back.num_steps, back.tau) == (named.num_steps,
                                                                        named.tau)


def test_beyond_the_replay_limit_npz_is_the_orbit_form(tmp_path, monkeypatch):
    """With REPLAY_LIMIT below N²·d, export writes the orbit form (its size stated first) and
    refuses json and xml naming the whole schedule's row count (reduce-scatter and allreduce:
    tests/test_orbit_collectives.py)."""
    expr = "L(C(16,{1,6}))"
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 1000)
    lines = []
    built, text = tf.export_schedule_of(expr, "npz", tmp_path / "s.npz", announce=lines.append)
    assert text is None and isinstance(built, OrbitSchedule)
    rows = expand(built).num_sends
    assert len(lines) == 1 and f"standing for {rows:,} rows" in lines[0]
    assert f"{built.num_sends:,} send rows of 4 representative" in lines[0]
    replay_by_symmetry(load_npz(tmp_path / "s.npz"))
    for fmt in ("json", "xml"):
        with pytest.raises(TopofinderError, match=f"has {rows:,} send rows") as exc:
            tf.export_schedule_of(expr, fmt, tmp_path / f"s.{fmt}")
        assert "N²·d ≤ 1e+03 (here 1.6e+04)" in str(exc.value)
        assert not (tmp_path / f"s.{fmt}").exists()
    with pytest.raises(TopofinderError, match="no orbit form"):
        tf.export_schedule_of("Pi(4,64)", "npz", tmp_path / "p.npz")


def test_cli_states_npz_size_and_refuses_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 1000)
    out = tmp_path / "s.npz"
    assert cli_main(["export", "C(16,{1,6})", "--what", "schedule", "--format", "npz",
                        "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "schedule npz (allgather, orbit form)" in err and f"writing {out}" in err
    assert cli_main(["export", "C(16,{1,6})", "--what", "schedule", "-o",
                        str(tmp_path / "s.json")]) == 2
    assert "write --format npz" in capsys.readouterr().err


def test_json_streamed_in_blocks_is_the_text(tmp_path, monkeypatch):
    """A schedule JSON written to a file block by block (blocks of 7 rows here) is byte for
    byte the returned text and json.dumps of the document; the size line counts its rows
    (stated from ANNOUNCE_ROWS rows: 300 here; a smaller schedule says nothing)."""
    monkeypatch.setattr(schedule_mod, "_JSON_BLOCK", 7)
    monkeypatch.setattr(schedules, "ANNOUNCE_ROWS", 300)
    sched = tf.schedule("C(16,{1,6})", "allreduce")
    text = tf.export_schedule(sched, "json")
    lines = []
    assert tf.export_schedule(sched, "json", tmp_path / "s.json", announce=lines.append) is None
    assert (tmp_path / "s.json").read_text() == text
    assert json.loads(text) == sched.to_dict()
    assert lines == [f"schedule JSON: {sched.num_sends:,} send rows, about "
                     f"{schedules.json_bytes(sched) / 1e6:,.1f} MB"]   # below 1 GB: MB
    assert abs(schedules.json_bytes(sched) - len(text)) < 0.3 * len(text)
    quiet = []
    tf.export_schedule(tf.schedule("C(16,{1,6})"), "json", tmp_path / "q.json",
                       announce=quiet.append)
    assert quiet == []                       # 293 rows < 300
    for a in (np.arange(7 * 6).reshape(7, 6), np.arange(15 * 2).reshape(15, 2) * 10**9,
              np.zeros((0, 6), np.int64)):
        assert int_rows_json(a) == json.dumps(a.tolist())


@pytest.mark.parametrize("expr", ["C(16,{1,6})", "L(C(16,{1,6}))", "L^2(DC(7,{1,3}))"])
def test_arc_sends_are_sends_of_the_extension_on_every_used_link(expr):
    """arc_sends (breadth-first over generator powers) against the expanded schedule: each
    row is one of its sends, one per link, covering exactly the links it uses."""
    orbit = symmetric_allgather(from_expression(expr))
    full = expand(orbit).sends
    rows = arc_sends(orbit)
    n = orbit.topology.n
    pairs = rows[:, 4] * n + rows[:, 5]
    assert np.unique(pairs).size == pairs.size
    assert set(pairs.tolist()) == set((full[:, 4] * n + full[:, 5]).tolist())
    assert set(map(tuple, rows.tolist())) <= set(map(tuple, full.tolist()))


def test_check_reads_the_orbit_npz(tmp_path, monkeypatch):
    """`check PLAN SCHEDULE.npz` on an orbit schedule: ok on its plan; a plan without the fibre
    of a link only the extension uses (no representative's send rides it) fails naming it."""
    expr = "L(C(16,{1,6}))"
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 1000)
    tf.export_schedule_of(expr, "npz", tmp_path / "s.npz")
    plan = tmp_path / "plan.csv"
    tf.export_patch_panel(expr).write_csv(plan)
    report = tf.check_schedule(plan, tmp_path / "s.npz")
    assert report.pairs == parse(expr).link_matrix.nnz and "orbit form" in report.note
    orbit = load_npz(tmp_path / "s.npz")
    used = set((orbit.sends[:, 4] * 64 + orbit.sends[:, 5]).tolist())
    lines = plan.read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines[1:], 1)
               if int(ln.split(",")[2]) * 64 + int(ln.split(",")[4]) not in used)
    u, w = lines[cut].split(",")[2], lines[cut].split(",")[4]
    plan.write_text("\n".join(lines[:cut] + lines[cut + 1:]) + "\n")
    with pytest.raises(TopofinderError, match=f"no fibre from node {u} to node {w}"):
        tf.check_schedule(plan, tmp_path / "s.npz")
