"""Read an MSCCL++ plan written by :mod:`.plan_writer` back as the step schedule it runs.

Every rank's buffers are followed chunk by chunk as the piece each place holds (allgather:
rank r's input chunk c' is piece r·K·P + c'; reduce phases: a rank's input place x' holds its
contribution to piece x', or, an allreduce whose ``topofinder`` block records the IR's piece
layout, to the piece the layout puts there). Step by step (``t`` of the ops), first every
rank's puts move the pieces their sources hold into the receivers' places (each entry a send
of those pieces from the rank to the buffer's owner), then every rank's copies and
reductions (``re`` must add partials of one piece) run in program order. The sends found
make the step schedule, which the caller replays (:func:`topofinder.model.schedule.validate`)
to price it."""

from __future__ import annotations

import json

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.layout import PieceLayout
from topofinder.model.collectives import Collective
from topofinder.model.schedule import ScheduleError, StepSchedule
from topofinder.model.topology import Topology

from .plan_writer import PLAN_FORMAT

_BUF = {"i": 0, "o": 1, "s": 2}
_PUTS = ("put", "pws", "pwsf")


def schedule_from_plan(text: str | dict, topology: Topology) -> StepSchedule:
    """The step schedule a topofinder MSCCL++ plan (JSON text or parsed document) runs on
    ``topology`` (module doc), with shard_chunks K·P. ScheduleError when a reduction adds
    partials of different pieces or a put reads a place holding nothing."""
    doc = json.loads(text) if isinstance(text, str) else text
    meta = doc.get("topofinder") or {}
    if meta.get("format") != PLAN_FORMAT:
        raise TopofinderError("not a topofinder MSCCL++ plan (no 'topofinder' block)")
    n, coll = len(doc["gpus"]), meta["collective"]
    if coll not in (Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE):
        raise TopofinderError(f"a {coll} plan is no step schedule of the three collectives; "
                              "check it with the execution model (check_plan)")
    if n != topology.n:
        raise TopofinderError(f"the plan has {n} ranks, the topology {topology.n} nodes")
    kp = meta["shard_chunks"] * meta["channels"]
    content = []
    for g in doc["gpus"]:
        r = g["id"]
        bufs = [np.full(g["input_chunks"], -1, np.int64), np.full(g["output_chunks"], -1,
                                                                    np.int64),
                np.full(g["scratch_chunks"], -1, np.int64)]
        if coll == Collective.ALLGATHER:
            own = r * kp + np.arange(kp)
            if doc["inplace"]:
                bufs[1][own] = own
            else:
                bufs[0][:] = own
        else:
            bufs[0][:] = _input_pieces(meta, n)
        content.append(bufs)
    puts, local = {}, {}                    # step → [(rank, op)], each rank's in program order
    for r, g in enumerate(doc["gpus"]):
        for t, op in _program(g):
            (puts if op["name"] in _PUTS else local).setdefault(t, []).append((r, op))
    moved, heads = [], []                   # pieces each put entry moved; (t, rank, peer)
    for t in sorted(set(puts) | set(local)):
        for r, op in puts.get(t, ()):
            for src, (w, dbuf, didx, size) in op["moves"]:
                pieces = content[r][src[0]][src[1]:src[1] + size]
                if (pieces < 0).any():
                    raise ScheduleError(f"plan step {t}: rank {r} puts a place holding "
                                        "nothing")
                content[w][dbuf][didx:didx + size] = pieces
                moved.append(pieces.copy())
                heads.append((t, r, w, size))
        for r, op in local.get(t, ()):
            if op["name"] in ("copy", "re"):
                srcs = [content[r][_BUF[b["type"]]][b["index"]:b["index"] + b["size"]]
                        for b in op["src_buff"]]
                if op["name"] == "re" and not all((x == srcs[0]).all() for x in srcs):
                    raise ScheduleError(f"plan step {t}: rank {r} adds partials of "
                                        "different pieces")
                d = op["dst_buff"][0]
                content[r][_BUF[d["type"]]][d["index"]:d["index"] + d["size"]] = srcs[0]
    h = np.array(heads, np.int64).reshape(-1, 4)
    sends = [np.column_stack([np.repeat(h[:, 0], h[:, 3]), np.concatenate(moved),
                              np.repeat(h[:, 1], h[:, 3]), np.repeat(h[:, 2], h[:, 3])])] \
        if moved else []
    rows = np.concatenate(sends) if sends else np.zeros((0, 4), np.int64)
    return StepSchedule(topology, kp, _as_rows(rows, kp), collective=coll,
                        method="mscclpp plan", reduce_steps=meta.get("reduce_scatter_steps", 0))


def _input_pieces(meta: dict, n: int) -> np.ndarray:
    """Per input place of a reduce phase, the piece v·K·P + j·P + c whose contribution it
    holds: NCCL's shard order, or an allreduce's recorded layout (instance j's block of N·P
    places, shard v's chunk c at base[v] + c·stride[v] in it)."""
    p, k = meta["shard_chunks"], meta["channels"]
    if "layout" not in meta:
        return np.arange(n * k * p)
    lay = meta["layout"]
    layout = PieceLayout(np.array(lay["base"], np.int64), np.array(lay["stride"], np.int64),
                         p, lay.get("name", ""))
    table = layout.table() if layout.base.shape == layout.stride.shape == (n,) else None
    if table is None or table.min(initial=0) < 0 or table.max(initial=0) >= n * p or \
            (layout.inverse(n * p) < 0).any():
        raise TopofinderError(f"plan layout: not a layout of {n}·{p} pieces")
    inv = layout.inverse(n * p)
    j = np.repeat(np.arange(k), n * p)
    x = np.tile(inv, k)
    return x // p * (k * p) + j * p + x % p


def _as_rows(moved: np.ndarray, kp: int) -> np.ndarray:
    """(t, piece, u, w) per piece sent as send rows (t, v, lo, hi, u, w), consecutive chunks
    of one shard on one link in one step joined."""
    if not moved.shape[0]:
        return np.zeros((0, 6), np.int64)
    t, x, u, w = moved.T
    v, c = x // kp, x % kp
    o = np.lexsort((c, v, w, u, t))
    t, v, c, u, w = t[o], v[o], c[o], u[o], w[o]
    new = np.r_[True, (t[1:] != t[:-1]) | (u[1:] != u[:-1]) | (w[1:] != w[:-1])
                | (v[1:] != v[:-1]) | (c[1:] != c[:-1] + 1)]
    hs = np.flatnonzero(new)
    ends = np.r_[hs[1:], t.size]
    return np.column_stack([t[hs], v[hs], c[hs], c[ends - 1] + 1, u[hs], w[hs]])


def _program(g: dict) -> list:
    """Rank ``g``'s data ops (those with ``t``) in program order: threadblocks in the order
    their semaphore handovers chain them (a threadblock whose first op is no acquire starts a
    chain), each
    put with its moves ((buffer, index) source, (rank, buffer, index, size) destination)."""
    tbs = {tb["id"]: tb for tb in g["threadblocks"]}
    released, acquires = {}, {}
    for tb in g["threadblocks"]:             # handovers: a last-op release, a first-op acquire
        ops = tb["ops"]
        if ops and ops[-1]["name"] == "sem_release":
            released[ops[-1]["semaphore_ids"][0]] = tb["id"]
        if ops and ops[0]["name"] == "sem_acquire":
            acquires[tb["id"]] = ops[0]["semaphore_ids"][0]
    nxt = {released[s]: t for t, s in acquires.items() if s in released}
    order = []
    for start in sorted(set(tbs) - set(acquires)):
        at = start
        while at is not None:
            order.append(at)
            at = nxt.get(at)
    remote = g["remote_buffers"]
    out = []
    for i in order:
        tb = tbs[i]
        refs = {x["access_channel_type"]: x["remote_buffer_ids"]
                for x in tb.get("remote_buffer_refs", [])}
        for op in tb["ops"]:
            if "t" not in op:
                continue
            if op["name"] in _PUTS:
                ids = refs[op.get("channel_type", "port")]
                moves = []
                for s, d in zip(op["src_buff"], op["dst_buff"]):
                    rb = remote[ids[d["buffer_id"]]]
                    moves.append(((_BUF[s["type"]], s["index"]),
                                  (rb["rank"], _BUF[rb["type"]], d["index"], d["size"])))
                op = dict(op, moves=moves)
            out.append((op["t"], op))
    return out
