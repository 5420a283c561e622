"""Per-rank schedules of points verified by symmetry (topofinder.finder.per_rank, orbit form):
beyond the replay limit a rank's rows are the representatives' rows carried by the group, and
the union of every rank's rows is the orbit-form schedule `export` writes whole (its
equivariant extension, replayed in full here at small N)."""

from __future__ import annotations

import numpy as np
import pytest

from topofinder import api
from topofinder.api import schedules
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.export.npz import load_npz
from topofinder.finder import per_rank
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import build_topology, symmetric_collective
from topofinder.model.collectives import Collective
from topofinder.model.schedule import validate
from topofinder.model.symmetric import expand

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)

#: symmetric families search verifies by symmetry: a circulant, a directed circulant, a torus
#: (Z_6 acting on the first coordinate), a hypercube (Z_2), a Cayley graph of Z_10 that is not
#: reverse-symmetric (Aff: the reduce-scatter is BFB on G^T, Thm 1), a line graph (the group
#: lifted to the arcs; of Aff: the reduce-scatter BFB on L(G)^T), a Cartesian power and
#: products (two generators; a factor with fewer symmetries: two orbits)
FAMILIES = ["C(64,{1,5,12})", "DC(30,{1,7})", "Torus(6,8)", "Hypercube(5)", "Aff(60,7,{1,3})",
            "L(C(20,{1,4}))", "L(Aff(60,7,{1,3}))", "C(6,{1,2})^2", "C(12,{1,3})xC(5,{1})",
            "C(12,{1,3})xPi(2,6)"]


def _canon(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


@pytest.mark.parametrize("expr", FAMILIES)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_union_of_orbit_rank_documents_is_the_whole_export(expr, collective, monkeypatch):
    """With the replay limit below N²·d (as at N = 10^5), `export --format npz` writes the
    orbit form and `export --rank` carries it: every block's sends, and every block's
    receives, together are the orbit form's extension row for row — a schedule the ordinary
    validator replays in full."""
    monkeypatch.setattr(per_rank, "REPLAY_LIMIT", 0)
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 0)
    whole_orbit = api.schedule(expr, collective)
    whole = expand(whole_orbit)
    validate(whole)
    n = whole.topology.n
    docs = [per_rank.rank_document(from_expression(expr), np.arange(a, min(a + 7, n)),
                                   collective) for a in range(0, n, 7)]
    assert {d["made"].split(" (")[0] for d in docs} == {"orbit form"}
    assert {(d["shard_chunks"], d["num_steps"]) for d in docs} == {
        (whole.shard_chunks, whole.num_steps)}
    if collective == Collective.ALLREDUCE:
        assert {d["reduce_scatter_steps"] for d in docs} == {whole.reduce_steps}
    for key, col in (("sends", 4), ("receives", 5)):
        for d in docs:
            assert np.isin(d[key][:, col], d["ranks"]).all()
        rows = _canon(np.concatenate([d[key] for d in docs]))
        assert np.array_equal(rows, _canon(whole.sends))


def test_cli_rank_files_of_the_orbit_npz_rebuild_it(tmp_path, monkeypatch):
    """Through files: the orbit npz `export` writes and the npz rank files of every rank
    (`--ranks` blocks) hold the same schedule; `check` takes the rank files together."""
    expr = "L(C(16,{1,6}))"
    monkeypatch.setattr(per_rank, "REPLAY_LIMIT", 0)
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 0)
    assert main(["export", expr, "--what", "schedule", "--collective", "allreduce",
                 "--format", "npz", "-o", str(tmp_path / "s.npz")]) == 0
    whole = _canon(expand(load_npz(tmp_path / "s.npz")).sends)
    files = []
    for a in range(0, 64, 16):
        out = tmp_path / f"r{a}.npz"
        assert main(["export", expr, "--what", "schedule", "--ranks", f"{a}:{a + 16}",
                     "--collective", "allreduce", "--format", "npz", "-o", str(out)]) == 0
        files.append(str(out))
    got = [np.load(f) for f in files]
    assert np.array_equal(_canon(np.concatenate([g["receives"] for g in got])), whole)
    assert np.array_equal(_canon(np.concatenate([g["sends"] for g in got])), whole)
    plan = tmp_path / "plan.csv"
    assert main(["export", expr, "--what", "patch-panel", "-o", str(plan)]) == 0
    assert main(["check", str(plan), *files]) == 0


def _allgather_receipts_complete(doc, n: int) -> None:
    """Every rank y of an allgather document receives every other shard v's P chunks exactly
    once (the allgather's defining property) and never its own."""
    p, r = doc["shard_chunks"], doc["receives"]
    for y in doc["ranks"]:
        mine = r[r[:, 5] == y]
        assert not (mine[:, 1] == y).any()
        cover = np.zeros(n, np.int64)
        np.add.at(cover, mine[:, 1], mine[:, 3] - mine[:, 2])
        assert (np.delete(cover, y) == p).all()
        order = np.lexsort((mine[:, 2], mine[:, 1]))
        v, lo, hi = mine[order, 1], mine[order, 2], mine[order, 3]
        same = v[1:] == v[:-1]
        assert (lo[1:][same] == hi[:-1][same]).all()         # runs tile [0, P), no overlap


def test_beyond_the_real_limit_a_rank_receives_every_shard_once():
    """N = 4096, d = 16: N²·d = 2.7e8 is beyond the replay limit, so the orbit path runs
    unforced; rank 0 and its out-neighbours receive every other shard in full, once each, and
    what rank 0 sends to a neighbour is exactly what that neighbour receives from it."""
    expr = "C(4096,{1,3,17,64,301,777,1500,2001})"
    recipe = from_expression(expr)
    topo = build_topology(recipe)
    assert topo.n ** 2 * topo.degree > per_rank.REPLAY_LIMIT
    nbrs = np.unique(topo.dst[topo.src == 0])
    doc = per_rank.rank_document(recipe, np.concatenate([[0], nbrs]))
    assert doc["made"].startswith("orbit form")
    _allgather_receipts_complete(doc, topo.n)
    s, r = doc["sends"], doc["receives"]
    assert np.array_equal(_canon(s[s[:, 4] == 0]), _canon(r[r[:, 4] == 0]))
    assert set(s[s[:, 4] == 0, 5].tolist()) == set(nbrs.tolist())


@pytest.mark.parametrize("collective,why", [(Collective.ALLTOALL, "pieces"),
                                            (Collective.BROADCAST, "mscclpp")])
def test_collectives_without_a_per_rank_document_say_why(collective, why):
    with pytest.raises(TopofinderError, match=f"no per-rank {collective} schedule: .*{why}"):
        api.export_rank_schedule("C(16,{1,6})", (0, 1), collective)


def test_no_orbit_form_beyond_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(per_rank, "REPLAY_LIMIT", 0)
    with pytest.raises(TopofinderError, match="neither expansion rules nor an orbit form"):
        per_rank.rank_document(from_expression("Pi(4,64)"), [0])


@pytest.mark.slow
@pytest.mark.parametrize("expr,made", [("C(100000,{1,8218,33894,36797})", "orbit form"),
                                       ("L^2(Pi(4,3125))*2", "expansion rules")])
def test_sampled_rank_files_at_n_100000_pass_check_together(tmp_path, expr, made):
    """N = 10^5: a circulant search verifies by symmetry, and the point `search --n 100000
    --d 8` recommends, verified by construction. 64 sampled ranks (rank 0, three of its
    in-neighbours and 60 drawn at random), one npz file each, pass `check` together against
    the patch-panel plan (send/receive agreement between files, every send on a fibre); every
    allgather receipt is complete; a file with one receive dropped disagrees."""
    recipe = from_expression(expr)
    topo = build_topology(recipe)
    rng = np.random.default_rng(39)
    nbrs = np.unique(topo.src[topo.dst == 0])[:3]
    ranks = np.unique(np.concatenate([[0], nbrs, rng.choice(topo.n, 60, replace=False)]))
    ranks = np.concatenate([ranks, rng.choice(np.setdiff1d(np.arange(topo.n), ranks),
                                              64 - ranks.size, replace=False)])
    assert np.unique(ranks).size == 64
    plan = tmp_path / "plan.csv"
    assert main(["export", expr, "--what", "patch-panel", "-o", str(plan)]) == 0
    files = []
    for r in ranks.tolist():
        out = tmp_path / f"r{r}.npz"
        doc = api.export_rank_schedule(expr, (r, r + 1), Collective.ALLGATHER, "npz", out)
        _allgather_receipts_complete(doc, topo.n)
        files.append(str(out))
    assert doc["made"].startswith(made)
    assert main(["check", str(plan), *files]) == 0
    zero = np.load(files[0])
    kept = {k: zero[k] for k in zero.files}
    drop = np.flatnonzero(kept["receives"][:, 4] == nbrs[0])[0]
    kept["receives"] = np.delete(kept["receives"], drop, axis=0)
    np.savez_compressed(tmp_path / "r0.npz", **kept)
    with pytest.raises(TopofinderError, match="disagree"):
        api.check_rank_schedules(str(plan), files)


@pytest.mark.parametrize("expr,sizes", [("Torus(6,8)", [6, 8]), ("Torus(2,3,4)", [2, 3, 4]),
                                        ("Hypercube(5)", [2] * 5)])
def test_torus_and_hypercube_bases_act_by_coordinates(expr, sizes):
    """A torus or hypercube base's group is each coordinate's rotation (one orbit, so one
    representative to replay and carry), not the translations of Z_N (N/m_1 or N/2 orbits);
    its orbit BFB keeps BFB's optimal T_L and τ (figures unchanged)."""
    from topofinder.finder.verify import recipe_group, symmetric_allgather
    from topofinder.scoring.allgather.bfb import bfb_score
    recipe = from_expression(expr)
    assert [m for m, _ in recipe_group(recipe)] == sizes
    orbit = symmetric_allgather(recipe)
    assert orbit.action.reps.size == 1
    best = bfb_score(build_topology(recipe))
    assert (orbit.num_steps, orbit.tau) == (best.T_L, best.tau)
