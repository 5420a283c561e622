"""Small MSCCL++ plans built by hand for the model's tests, and the upstream examples' location.

The upstream plans live in ``shared/mscclpp/`` beside the repository (``/work/shared`` for
``/work/main`` or ``/work/wt/NAME``, or a CI clone's ``shared/``); they are read from there,
never copied into the project.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path


def upstream_dir() -> Path | None:
    """``shared/mscclpp`` in the first parent of this checkout that has one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "shared" / "mscclpp"
        if (cand / "examples").is_dir():
            return cand
    return None


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
