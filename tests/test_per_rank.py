"""Per-rank schedules (topofinder.finder.per_rank, `export --rank/--ranks`, `check` of a set of
rank files): the union of every block's rows is the whole exported schedule, both when it is
cut from the whole schedule and when it is generated from the expansion rules."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topofinder import api
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.finder import certify, per_rank
from topofinder.finder.recipe import apply, base
from topofinder.finder.verify import (build_schedule, build_topology, collective_schedule,
                                      transposed_schedule)
from topofinder.model.collectives import Collective
from topofinder.model.schedule import allreduce, reduce_scatter, relabel, validate

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE)


def _canon(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def _union(blocks_rows) -> tuple[np.ndarray, np.ndarray]:
    sends = np.concatenate([s for s, _ in blocks_rows])
    receives = np.concatenate([r for _, r in blocks_rows])
    return _canon(sends), _canon(receives)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_union_of_rank_documents_is_the_whole_export(collective):
    """Within the replay limit: every block's sends, and every block's receives, together are
    the schedule `export` writes, row for row."""
    recipe = apply("line", (base("Pi(3,12)"),))
    whole = collective_schedule(recipe, collective)
    docs = [per_rank.rank_document(recipe, np.arange(a, min(a + 7, 36)), collective)
            for a in range(0, 36, 7)]
    assert {d["shard_chunks"] for d in docs} == {whole.shard_chunks}
    sends, receives = _union([(d["sends"], d["receives"]) for d in docs])
    assert np.array_equal(sends, _canon(whole.sends))
    assert np.array_equal(receives, _canon(whole.sends))


#: (recipe, reverse-symmetric?) — the rule path covers Thm 2 and Thm 1 reduce-scatters
RULED = [apply("degree", (apply("line", (base("Pi(4,125)"),)),), 2),
         apply("degree", (apply("line", (apply("line", (base("Pi(4,25)"),)),)),), 2),
         apply("line", (apply("power", (base("C(6,{1,2})"),), 2),))]


@pytest.mark.parametrize("recipe", RULED, ids=lambda r: r.expr)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_rule_generated_blocks_are_the_construction(recipe, collective):
    """Beyond the replay limit the blocks come from the rules (here forced at small N): their
    union is the construction's allgather, its reduce-scatter (Thm 2 when G is reverse-
    symmetric, else the construction on the transposes reversed, Thm 1), or both in turn —
    and that whole schedule replays."""
    topo = build_topology(recipe)
    ag = build_schedule(recipe)
    if per_rank._reversible(topo):
        rs = reduce_scatter(ag)
    else:
        tr, _ = certify.construction_rule(recipe, 0, transposed_schedule)
        pi = per_rank.transposed_map(recipe, tr, 0)
        rs = reduce_scatter(relabel(tr.materialise(), pi, topo.transpose()), topology=topo)
    whole = {Collective.ALLGATHER: ag, Collective.REDUCE_SCATTER: rs,
             Collective.ALLREDUCE: allreduce(rs, ag)}[collective]
    validate(whole)
    n = topo.n
    step = max(1, n // 5)
    parts = [per_rank._constructed(recipe, topo, np.arange(a, min(a + step, n)), collective,
                                    limit=0)
             for a in range(0, n, step)]
    assert {h["shard_chunks"] for h, _, _ in parts} == {whole.shard_chunks}
    sends, receives = _union([(s, r) for _, s, r in parts])
    assert np.array_equal(sends, _canon(whole.sends))
    assert np.array_equal(receives, _canon(whole.sends))


def test_cli_rank_files_checked_together(tmp_path, capsys):
    """Rank 0 and two of its out-neighbours, exported one by one, pass `check` together;
    with one receive from rank 0 dropped from a neighbour's file, they disagree."""
    expr = "L(Pi(4,125))*2"
    plan = tmp_path / "plan.csv"
    assert main(["export", expr, "--what", "patch-panel", "-o", str(plan)]) == 0
    topo = build_topology(apply("degree", (apply("line", (base("Pi(4,125)"),)),), 2))
    ranks = [0, *sorted(set(topo.dst[topo.src == 0].tolist()))[:2]]
    files = []
    for r in ranks:
        out = tmp_path / f"r{r}.json"
        assert main(["export", expr, "--what", "schedule", "--rank", str(r), "--collective",
                     "allreduce", "-o", str(out)]) == 0
        files.append(str(out))
    capsys.readouterr()
    assert main(["check", str(plan), *files]) == 0
    assert "agree" in capsys.readouterr().err
    doc = json.loads(open(files[1]).read())
    drop = next(i for i, r in enumerate(doc["receives"]) if r[4] == 0)
    del doc["receives"][drop]
    open(files[1], "w").write(json.dumps(doc))
    with pytest.raises(TopofinderError, match="disagree"):
        api.check_rank_schedules(str(plan), files)
    doc["receives"].append([1, 0, 0, 1, 0, ranks[1]][:5] + [ranks[1]])
    doc["receives"][-1][2] = 0.5
    open(files[1], "w").write(json.dumps(doc))
    with pytest.raises(TopofinderError, match="six integers"):
        api.check_rank_schedules(str(plan), files)


def test_bad_block_refused():
    with pytest.raises(TopofinderError):
        per_rank.rank_document(apply("line", (base("Pi(3,12)"),)), [36])


def test_rank_document_matches_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources
    schema = json.loads(resources.files("topofinder.schemas")
                        .joinpath("rank_schedule.schema.json").read_text())
    doc = per_rank.rank_document(apply("line", (base("Pi(3,12)"),)), [3, 4],
                                 Collective.ALLREDUCE)
    doc = json.loads(json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v
                                 for k, v in doc.items()}))
    jsonschema.validate(doc, schema)


@pytest.mark.parametrize("expr", ["Pi(3,12)", "Pi(4,125)", "Aff(12,5,{1,3})"])
def test_bfb_rows_of_a_few_receivers_are_the_whole_schedules(expr):
    """bfb_receiver_rows at the whole topology's step loads gives exactly bfb_schedule's rows
    into those receivers (and its P), on G and on G^T (not vertex-transitive)."""
    from topofinder.families.build import parse
    from topofinder.scoring.allgather.bfb import bfb_receiver_rows, bfb_schedule, bfb_score
    g = parse(expr)
    for topo in (g, g.transpose()):
        whole = bfb_schedule(topo)
        r = np.array([0, topo.n // 3, topo.n - 1])
        p, rows = bfb_receiver_rows(topo, r, bfb_score(topo).step_load)
        assert p == whole.shard_chunks
        assert np.array_equal(_canon(rows), _canon(whole.sends[np.isin(whole.sends[:, 5], r)]))
