"""Executor plans without MPI: the per-rank packed messages, run in one process, perform the
collective (checked against numpy sums/concatenations), and a corrupted schedule does not."""

import json
import subprocess
import sys

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.execute.plan import (
    chunk_elements, program_from_document, rank_plan, simulate,
)
from topofinder.families.build import parse
from topofinder.scoring.trees.forestcoll import optimal_trees, throughput_optimum
from topofinder.finder.recipe import from_expression
from topofinder.model.schedule import validate
from topofinder.finder.verify import collective_schedule


def step_doc(expr, collective):
    return json.loads(collective_schedule(from_expression(expr), collective).to_json())


def tree_doc(expr):
    topo = parse(expr)
    return json.loads(optimal_trees(topo, optimum=throughput_optimum(topo)).to_json())


def inputs(program, e, seed=1):
    """Integer-valued float64 data per rank (exact sums); allgather: only the own shard."""
    rng = np.random.default_rng(seed)
    n, shard = program.num_nodes, program.shard_chunks * e
    return [rng.integers(-99, 100, n * shard).astype(np.float64) for _ in range(n)]


def run(program, e, data):
    """Buffers after the simulated run: allgather starts from NaN plus the own shard."""
    n, shard = program.num_nodes, program.shard_chunks * e
    work = []
    for r in range(n):
        if program.collective == "allgather":
            w = np.full(n * shard, np.nan)
            w[r * shard:(r + 1) * shard] = data[r][r * shard:(r + 1) * shard]
        else:
            w = data[r].copy()
        work.append(w)
    return simulate(program, work, e)


def expected(program, e, data):
    """The collective computed directly with numpy (independent of any schedule)."""
    n, shard = program.num_nodes, program.shard_chunks * e
    total = np.sum(data, axis=0)
    if program.collective == "allreduce":
        return [total] * n
    if program.collective == "reduce-scatter":
        return [total[r * shard:(r + 1) * shard] for r in range(n)]
    gathered = np.concatenate([data[r][r * shard:(r + 1) * shard] for r in range(n)])
    return [gathered] * n


def result(program, e, work):
    shard = program.shard_chunks * e
    if program.collective == "reduce-scatter":
        return [w[r * shard:(r + 1) * shard] for r, w in enumerate(work)]
    return work


@pytest.mark.parametrize("expr,collective", [
    ("C(16,{1,6})", "allreduce"),
    ("Torus(4,4)", "reduce-scatter"),
    ("Torus(4,4)", "allgather"),
    ("L(K(3,3))", "allreduce"),
])
def test_step_schedules_perform_their_collective(expr, collective):
    program = program_from_document(step_doc(expr, collective))
    e = 3
    data = inputs(program, e)
    got = result(program, e, run(program, e, data))
    for g, want in zip(got, expected(program, e, data)):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("pipeline", [1, 3])
def test_tree_schedule_runs_as_steps(pipeline):
    doc = tree_doc("Torus(4,4)")
    program = program_from_document(doc, pipeline)
    validate(program.schedule)                   # independent replay of the step form
    e = 2
    data = inputs(program, e)
    for g, want in zip(run(program, e, data), expected(program, e, data)):
        np.testing.assert_array_equal(g, want)
    # every tree edge carries its tree's share once per slice: K·Σ edges rows
    assert program.sends.shape[0] == pipeline * sum(len(t["edges"]) for t in doc["trees"])


def test_pipelining_trees_lowers_tau_towards_the_tree_flow_value():
    # one tree of height h in K slices: T_L = h + K − 1 and each step carries 1/K of a tree
    doc = tree_doc("Torus(4,4)")
    taus = [program_from_document(doc, k).schedule.tau for k in (1, 2, 8)]
    tree_tau = program_from_document(doc).tree_tau
    assert taus[0] >= taus[1] >= taus[2] >= tree_tau
    assert taus[2] < taus[0] or taus[0] == tree_tau       # already at the tree-flow value


@pytest.mark.parametrize("collective", ["allreduce", "allgather"])
def test_a_dropped_send_gives_a_wrong_result(collective):
    doc = step_doc("C(8,{1,2})", collective)
    doc["sends"] = doc["sends"][:-1]
    program = program_from_document(doc)
    e = 2
    data = inputs(program, e)
    got = result(program, e, run(program, e, data))
    assert any(not np.array_equal(g, w) for g, w in zip(got, expected(program, e, data)))


def test_messages_are_packed_per_step_and_peer_and_match_on_both_ends():
    program = program_from_document(step_doc("C(16,{1,6})", "allreduce"))
    plans = [rank_plan(program, r, 5) for r in range(16)]
    sent, received = {}, {}
    for r, steps in enumerate(plans):
        for step in steps:
            peers = [m.peer for m in step.sends]
            assert len(peers) == len(set(peers))      # one message per (step, peer)
            for m in step.sends:
                sent[(step.t, r, m.peer)] = m.count
            for m in step.recvs:
                received[(step.t, m.peer, r)] = m.count
    assert sent == received
    s = program.sends
    for (t, u, w), count in sent.items():
        rows = s[(s[:, 0] == t) & (s[:, 4] == u) & (s[:, 5] == w)]
        assert count == 5 * int((rows[:, 3] - rows[:, 2]).sum())


def test_size_is_rounded_to_whole_pieces():
    assert chunk_elements(1024 ** 2, 4, 64) == 4096
    assert chunk_elements(1_000_000, 4, 64) == 3906           # 999 936 bytes
    assert chunk_elements(10, 8, 64) == 1                      # at least one element


def test_bad_rows_and_trees_are_bad_input():
    doc = step_doc("Torus(4,4)", "allgather")
    doc["sends"][0][3] = doc["shard_chunks"] + 1
    with pytest.raises(TopofinderError, match="outside"):
        program_from_document(doc)
    trees = tree_doc("Torus(4,4)")
    trees["trees"][0]["weight"] = "1/2"
    with pytest.raises(TopofinderError, match="sum to"):
        program_from_document(trees)
    with pytest.raises(TopofinderError, match="tree schedules only"):
        program_from_document(step_doc("Torus(4,4)", "allgather"), pipeline=2)


def _without_mpi4py(path, env_rank=None):
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "from topofinder.execute.mpi import main\n"
            f"sys.exit(main([{str(path)!r}]))")
    env = None
    if env_rank is not None:
        import os
        env = {**os.environ, "PMI_RANK": str(env_rank)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)


def test_missing_mpi4py_is_one_line_from_rank_zero_only(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(step_doc("Torus(4,4)", "allgather")))
    out = _without_mpi4py(path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "mpi4py" in out.stderr
    quiet = _without_mpi4py(path, env_rank=3)
    assert quiet.returncode == 2 and quiet.stderr == ""
