"""Small MSCCL++ plans built by hand for the model's tests, and the upstream examples' location.

The upstream plans live in ``shared/mscclpp/`` beside the repository (``/work/shared`` for
``/work/main`` or ``/work/wt/NAME``, or a CI clone's ``shared/``); they are read from there,
never copied into the project.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest


def upstream_dir() -> Path | None:
    """``shared/mscclpp`` in the first parent of this checkout that has one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "shared" / "mscclpp"
        if (cand / "examples").is_dir():
            return cand
    return None


#: skips a test that reads MSCCL++'s own plans when they are not beside this checkout
needs_upstream = pytest.mark.skipif(
    upstream_dir() is None,
    reason="shared/mscclpp (MSCCL++'s test plans) is not beside this checkout")


def load_upstream(name: str) -> dict:
    base = upstream_dir()
    path = base / ("fixtures" if name.endswith("_modernized.json") else "examples") / name
    return json.loads(path.read_text())


def _plan(name, collective, gpus, protocol="Simple", inplace=True):
    return {"name": name, "collective": collective, "protocol": protocol, "inplace": inplace,
            "reuse_resources": False, "num_threads_per_block": 1024,
            "use_double_scratch_buffer": False, "buffer_alignment": 16,
            "min_message_size": 0, "max_message_size": 2 ** 64 - 1, "gpus": gpus}


def allpairs_allreduce(n: int) -> dict:
    """Rank r sums chunk r of every rank's input with ``rres`` over memory channels and writes
    it back to all; a relaxed handshake first (peers' previous launch done), then a release
    signal/wait round (everyone's writes done before anyone's kernel ends)."""
    gpus = []
    for r in range(n):
        peers = [q for q in range(n) if q != r]
        k = list(range(len(peers)))
        ops = [{"name": "rlxsignal", "channel_ids": k, "channel_type": "memory"},
               {"name": "rlxwait", "channel_ids": k, "channel_type": "memory"},
               {"name": "nop"},
               {"name": "rres", "channel_type": "memory", "reduce_op": "sum",
                "src_buff": [{"type": "i", "index": r, "size": 1}]
                + [{"buffer_id": b, "index": r, "size": 1} for b in k],
                "dst_buff": [{"type": "i", "index": r, "size": 1}]
                + [{"buffer_id": b, "index": r, "size": 1} for b in k]},
               {"name": "nop"},
               {"name": "signal", "channel_ids": k, "channel_type": "memory"},
               {"name": "wait", "channel_ids": k, "channel_type": "memory"}]
        gpus.append({
            "id": r, "input_chunks": n, "output_chunks": n, "scratch_chunks": 0,
            "channels": [{"channel_type": "memory", "connected_to": peers}],
            "remote_buffers": [{"rank": q, "type": "i", "access_channel_types": ["memory"]}
                               for q in peers],
            "semaphores": [],
            "threadblocks": [{"id": 0, "ops": ops,
                              "channels": [{"channel_type": "memory", "channel_ids": k}],
                              "remote_buffer_refs": [{"access_channel_type": "memory",
                                                      "remote_buffer_ids": k}]}]})
    return _plan("allpairs_allreduce", "allreduce", gpus)


def ring_allgather(n: int) -> dict:
    """In-place ring allgather over port channels: a handshake (signal the previous rank that
    this launch started, wait for the next), then n-1 steps of put + signal to the next rank
    and wait from the previous one, and a flush of the channel before the kernel ends."""
    gpus = []
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        peers = [nxt] if nxt == prv else [nxt, prv]
        cn, cp = peers.index(nxt), peers.index(prv)
        ops = [{"name": "signal", "channel_ids": [cp], "channel_type": "port"},
               {"name": "wait", "channel_ids": [cn], "channel_type": "port"},
               {"name": "nop"}]
        for s in range(n - 1):
            c = (r - s) % n
            ops += [{"name": "put", "channel_ids": [cn], "channel_type": "port",
                     "src_buff": [{"type": "o", "index": c, "size": 1}],
                     "dst_buff": [{"buffer_id": 0, "index": c, "size": 1}]},
                    {"name": "signal", "channel_ids": [cn], "channel_type": "port"},
                    {"name": "wait", "channel_ids": [cp], "channel_type": "port"},
                    {"name": "nop"}]
        ops.append({"name": "flush", "channel_ids": [cn], "channel_type": "port",
                    "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}]})
        gpus.append({
            "id": r, "input_chunks": 1, "output_chunks": n, "scratch_chunks": 0,
            "channels": [{"channel_type": "port", "connected_to": peers}],
            "remote_buffers": [{"rank": nxt, "type": "o", "access_channel_types": ["port"]}],
            "semaphores": [],
            "threadblocks": [{"id": 0, "ops": ops,
                              "channels": [{"channel_type": "port",
                                            "channel_ids": list(range(len(peers)))}],
                              "remote_buffer_refs": [{"access_channel_type": "port",
                                                      "remote_buffer_ids": [0]}]}]})
    return _plan("ring_allgather", "allgather", gpus)


def ops_of(plan: dict, rank: int, tb: int = 0) -> list:
    return plan["gpus"][rank]["threadblocks"][tb]["ops"]


def mutated(plan: dict, fn) -> dict:
    """A deep copy of ``plan`` changed by ``fn(copy)``."""
    out = copy.deepcopy(plan)
    fn(out)
    return out


def doubling_allgather(n: int) -> dict:
    """In-place recursive-doubling allgather over port channels (n a power of two): at step s
    rank r puts its block of 2^s chunks to rank r xor 2^s; a handshake on all channels first
    and a flush of all channels last (one ``dst_buff`` per channel, as ``handleFlush`` needs)."""
    steps = n.bit_length() - 1
    gpus = []
    for r in range(n):
        peers = [r ^ (1 << s) for s in range(steps)]
        k = list(range(steps))
        ops = [{"name": "signal", "channel_ids": k, "channel_type": "port"},
               {"name": "wait", "channel_ids": k, "channel_type": "port"},
               {"name": "nop"}]
        for s in range(steps):
            base = r >> s << s
            ops += [{"name": "put", "channel_ids": [s], "channel_type": "port",
                     "src_buff": [{"type": "o", "index": base, "size": 1 << s}],
                     "dst_buff": [{"buffer_id": s, "index": base, "size": 1 << s}]},
                    {"name": "signal", "channel_ids": [s], "channel_type": "port"},
                    {"name": "wait", "channel_ids": [s], "channel_type": "port"},
                    {"name": "nop"}]
        ops.append({"name": "flush", "channel_ids": k, "channel_type": "port",
                    "dst_buff": [{"buffer_id": s, "index": 0, "size": 1} for s in k]})
        gpus.append({
            "id": r, "input_chunks": 1, "output_chunks": n, "scratch_chunks": 0,
            "channels": [{"channel_type": "port", "connected_to": peers}],
            "remote_buffers": [{"rank": q, "type": "o", "access_channel_types": ["port"]}
                               for q in peers],
            "semaphores": [],
            "threadblocks": [{"id": 0, "ops": ops,
                              "channels": [{"channel_type": "port", "channel_ids": k}],
                              "remote_buffer_refs": [{"access_channel_type": "port",
                                                      "remote_buffer_ids": k}]}]})
    return _plan("doubling_allgather", "allgather", gpus)


def scratch_allgather(double: bool) -> dict:
    """Two ranks, out of place: each puts its input into the peer's scratch over a memory
    channel, then copies the peer's chunk from its own scratch into the output. Under double
    scratch the local copy reads the half of the launch (``scratchOffset_``) but the raw
    remote put always writes the first half, so the second launch reads nothing."""
    gpus = []
    for r in range(2):
        p = 1 - r
        ops = [{"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
               {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "nop"},
               {"name": "put", "channel_type": "memory",
                "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}]},
               {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"type": "o", "index": r, "size": 1}]},
               {"name": "nop"},
               {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
               {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "nop"},
               {"name": "copy", "src_buff": [{"type": "s", "index": 0, "size": 1}],
                "dst_buff": [{"type": "o", "index": p, "size": 1}]}]
        gpus.append({
            "id": r, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 1,
            "channels": [{"channel_type": "memory", "connected_to": [p]}],
            "remote_buffers": [{"rank": p, "type": "s", "access_channel_types": ["memory"]}],
            "semaphores": [],
            "threadblocks": [{"id": 0, "ops": ops,
                              "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                              "remote_buffer_refs": [{"access_channel_type": "memory",
                                                      "remote_buffer_ids": [0]}]}]})
    plan = _plan("scratch_allgather", "allgather", gpus, inplace=False)
    plan["use_double_scratch_buffer"] = double
    return plan


def barrier_copy(n_barrier: int = 2, barrier: bool = True) -> dict:
    """One rank, out of place: block 0 copies the input to scratch, block 1 copies scratch to
    the output, a ``barrier`` of ``n_barrier`` blocks between them."""
    bar = [{"name": "barrier", "barrier_id": 0, "num_threadblocks": n_barrier}] if barrier else []
    tb0 = [{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
            "dst_buff": [{"type": "s", "index": 0, "size": 1}]}] + bar
    tb1 = bar + [{"name": "copy", "src_buff": [{"type": "s", "index": 0, "size": 1}],
                  "dst_buff": [{"type": "o", "index": 0, "size": 1}]}]
    gpu = {"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 1,
           "channels": [], "remote_buffers": [], "semaphores": [],
           "threadblocks": [{"id": 0, "ops": tb0, "channels": []},
                            {"id": 1, "ops": tb1, "channels": []}]}
    return _plan("barrier_copy", "allreduce", [gpu], inplace=False)


def allpairs_reduce_scatter(n: int, inplace: bool = True) -> dict:
    """Rank r sums chunk r of every rank's input with ``rre`` (remote reads) into its output
    chunk, between a relaxed handshake and a release signal/wait round."""
    plan = allpairs_allreduce(n)
    plan["name"], plan["collective"], plan["inplace"] = "allpairs_rs", "reducescatter", inplace
    for r, g in enumerate(plan["gpus"]):
        g["output_chunks"] = 1
        rres = g["threadblocks"][0]["ops"][3]
        rres["name"] = "rre"
        rres["dst_buff"] = [{"type": "o", "index": 0, "size": 1}]
    return plan


def root_broadcast(n: int, root: int = 0, inplace: bool = False) -> dict:
    """The root puts its input into every other rank's output over memory channels (and
    copies it to its own output out of place); the others first tell the root their output
    is free (relaxed) and then wait for its signal."""
    gpus = []
    for r in range(n):
        if r == root:
            peers = [q for q in range(n) if q != root]
            k = list(range(len(peers)))
            ops = [{"name": "rlxwait", "channel_ids": k, "channel_type": "memory"},
                   {"name": "nop"},
                   {"name": "put", "channel_type": "memory",
                    "src_buff": [{"type": "i", "index": 0, "size": 1} for _ in k],
                    "dst_buff": [{"buffer_id": b, "index": 0, "size": 1} for b in k]}]
            if not inplace:
                ops.append({"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                            "dst_buff": [{"type": "o", "index": 0, "size": 1}]})
            ops += [{"name": "nop"},
                    {"name": "signal", "channel_ids": k, "channel_type": "memory"}]
        else:
            peers, k = [root], [0]
            ops = [{"name": "rlxsignal", "channel_ids": k, "channel_type": "memory"},
                   {"name": "wait", "channel_ids": k, "channel_type": "memory"}]
        remote = ([{"rank": q, "type": "o", "access_channel_types": ["memory"]} for q in peers]
                  if r == root else [])
        gpus.append({
            "id": r, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
            "channels": [{"channel_type": "memory", "connected_to": peers}],
            "remote_buffers": remote, "semaphores": [],
            "threadblocks": [{"id": 0, "ops": ops,
                              "channels": [{"channel_type": "memory", "channel_ids": k}],
                              "remote_buffer_refs": [{"access_channel_type": "memory",
                                                      "remote_buffer_ids": k if remote else []}]}]})
    return _plan("root_broadcast", "broadcast", gpus, inplace=inplace)


def shared_wait_allgather(ordered: bool = True) -> dict:
    """Two ranks, out of place, memory channels, a relaxed handshake first. Rank 1 puts its
    input into rank 0's output and signals; rank 0 puts its input into rank 1's scratch and
    signals twice. On rank 1 the channel is waited on by two threadblocks: block 0 takes the
    handshake and the first signal, block 1 the second, then copies the scratch to the output.
    With ``ordered`` block 0 releases a device semaphore that block 1 acquires before its wait,
    so the tickets go to the blocks in this order in every run; without, block 1 may take the
    handshake's ticket and copy the scratch before the data is there."""
    gpus = []
    for r in range(2):
        p = 1 - r
        tb0 = [{"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
               {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "nop"},
               {"name": "put", "channel_type": "memory",
                "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"buffer_id": 0, "index": 0 if r == 0 else 1, "size": 1}]},
               {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"type": "o", "index": r, "size": 1}]},
               {"name": "nop"},
               {"name": "signal", "channel_ids": [0], "channel_type": "memory"}]
        tbs = [tb0]
        if r == 0:
            tb0 += [{"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "wait", "channel_ids": [0], "channel_type": "memory"}]
        else:
            tb0.append({"name": "wait", "channel_ids": [0], "channel_type": "memory"})
            tb1 = [{"name": "wait", "channel_ids": [0], "channel_type": "memory"},
                   {"name": "nop"},
                   {"name": "copy", "src_buff": [{"type": "s", "index": 0, "size": 1}],
                    "dst_buff": [{"type": "o", "index": 0, "size": 1}]}]
            if ordered:
                tb0.append({"name": "sem_release", "semaphore_ids": [0]})
                tb1.insert(0, {"name": "sem_acquire", "semaphore_ids": [0]})
            tbs.append(tb1)
        gpus.append({
            "id": r, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": r,
            "channels": [{"channel_type": "memory", "connected_to": [p]}],
            "remote_buffers": [{"rank": p, "type": "s" if r == 0 else "o",
                                "access_channel_types": ["memory"]}],
            "semaphores": [{"init_value": 0}] if r == 1 and ordered else [],
            "threadblocks": [{"id": i, "ops": ops,
                              "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                              "remote_buffer_refs": [{"access_channel_type": "memory",
                                                      "remote_buffer_ids": [0]}]}
                             for i, ops in enumerate(tbs)]})
    return _plan("shared_wait_allgather", "allgather", gpus, inplace=False)
