"""What a one-sided runtime needs of the rank-program IR beyond the ops: which receive each
send meets, and in which order a step's local ops must run.

- Pairing (:func:`pair_ops`): a send of rank u to w at slot (step t, run r) and the receive
  of w from u at the same slot move the same pieces (the lowering cuts both ends of a link's
  message into the same runs, :func:`~topofinder.export.ir.lowering.lower`). A runtime whose
  sender writes into the receiver's memory (MSCCL++'s ``put``) takes the destination from
  the paired receive.
- Rounds (:func:`local_rounds`): the local ops of one step (``recv_reduce`` read after the
  step's data arrived, ``copy``) that must follow another local op of the same step on the
  same rank — it wrote what they read, or (in place) read what they write — in round 1 or
  later: an op's round is one more than the largest round of the ops it must follow, so a
  runtime that runs a step's local ops side by side separates rounds by a barrier. A local
  op never waits for a send or receive of its own step (sends read only earlier steps' data,
  receives of the step land before its local ops run).
- Hazards (:func:`overwrites_sent`): a local op writing, in place, a place a send of the same
  or an earlier step read; a runtime whose sends are read asynchronously (by a proxy) cannot
  order them without a flush."""

from __future__ import annotations

import numpy as np

from topofinder.export.ir.arrays import in_runs
from topofinder.export.ir.program import KIND_CODE, SLOT

#: The op kinds that run locally after their step's receives.
LOCAL = (KIND_CODE["recv_reduce"], KIND_CODE["copy"])


def pair_ops(progs: list) -> np.ndarray:
    """Per op of the programs concatenated in rank order, the index (in that concatenation)
    of the op it pairs with: a send's receive, a receive's send; −1 for local ops."""
    n = len(progs)
    arr = np.concatenate([p.arr for p in progs]).astype(np.int64) if progs else \
        np.zeros((0, 13), np.int64)
    rank = np.repeat(np.arange(n), [len(p.arr) for p in progs])
    sel, kind = arr[:, 0], arr[:, 1]
    peer = sel >> 1
    conn = sel >= 0
    recv = conn & (sel & 1).astype(bool)
    link = np.where(recv, peer * n + rank, rank * n + peer)
    key = (link << 40) | (arr[:, 7] * SLOT + arr[:, 8])
    send_at = np.flatnonzero(conn & ~recv)
    recv_at = np.flatnonzero(recv)
    ro = recv_at[np.argsort(key[recv_at])]
    hit = np.searchsorted(key[ro], key[send_at])
    hit = np.minimum(hit, max(ro.size - 1, 0))
    if send_at.size != recv_at.size or (ro.size and (key[ro[hit]] != key[send_at]).any()):
        raise ValueError("rank programs: a send without its receive")
    partner = np.full(kind.size, -1, np.int64)
    partner[send_at] = ro[hit]
    partner[ro[hit]] = send_at
    return partner


def _local_pairs(prog):
    """(op, op it must follow) arrays among one step's local ops of ``prog`` (module doc),
    from the piece-level conflicts (:meth:`RankProgram._conflicts`)."""
    cj, cw, _ = prog._conflicts()
    kind, step = prog.arr[:, 1], prog.arr[:, 7]
    local = np.isin(kind, LOCAL)
    keep = local[cj] & local[cw] & (step[cj] == step[cw]) & (cj != cw)
    return cj[keep], cw[keep]


def _raw_pairs(progs: list):
    """(op, op it must follow) arrays over the out-of-place ``progs`` concatenated: a local
    op of step t > 0 and the local ops of the same step and rank that wrote what it reads,
    found on runs (a step's local writes on one rank are disjoint runs: out of place every
    write goes to a place nothing touched before). None if the writes are not disjoint."""
    arr = np.concatenate([p.arr for p in progs]).astype(np.int64)
    rank = np.repeat(np.arange(len(progs)), [len(p.arr) for p in progs])
    kind, cnt, step = arr[:, 1], arr[:, 6], arr[:, 7]
    loc = np.flatnonzero(np.isin(kind, LOCAL) & (step > 0))
    wide = int(max(arr[:, 10].max(initial=0), arr[:, 12].max(initial=0),
                   0) + cnt.max(initial=0)) + 1
    group = (rank * (int(step.max(initial=0)) + 1) + step) * 3
    w = loc[arr[loc, 11] >= 0]
    wkey = (group[w] + arr[w, 11]) * wide + arr[w, 12]
    o = np.argsort(wkey)
    w, wkey = w[o], wkey[o]
    wend = wkey + cnt[w]
    if (wend[:-1] > wkey[1:]).any():
        return None
    r = loc[arr[loc, 9] >= 0]
    rkey = (group[r] + arr[r, 9]) * wide + arr[r, 10]
    lo = np.searchsorted(wend, rkey, side="right")
    hi = np.searchsorted(wkey, rkey + cnt[r], side="left")
    many = np.maximum(hi - lo, 0)
    cj = np.repeat(r, many)
    cw = w[np.repeat(lo, many) + in_runs(many)]
    keep = cj != cw
    return cj[keep], cw[keep]


def local_rounds(progs: list) -> np.ndarray:
    """Per op of ``progs`` concatenated in rank order, its round among its step's local ops
    (module doc; 0 for sends and receives)."""
    pairs = None if any(p.inplace for p in progs) else _raw_pairs(progs)
    if pairs is None:
        sizes = np.array([len(p.arr) for p in progs], np.int64)
        first = np.cumsum(sizes) - sizes
        got = [_local_pairs(p) for p in progs]
        pairs = (np.concatenate([a + f for (a, _), f in zip(got, first)] + [first[:0]]),
                 np.concatenate([b + f for (_, b), f in zip(got, first)] + [first[:0]]))
    cj, cw = pairs
    rnd = np.zeros(sum(len(p.arr) for p in progs), np.int64)
    for _ in range(rnd.size + 1):
        new = rnd.copy()
        np.maximum.at(new, cj, rnd[cw] + 1)
        if (new == rnd).all():
            return rnd
        rnd = new
    raise ValueError("rank programs: local ops of one step wait for each other in a cycle")


def overwrites_sent(prog) -> tuple[int, int] | None:
    """The first (local op, send op) of ``prog`` where the local op writes, in place, what
    the send read at the same or an earlier step (module doc), or None. (Out of place every
    write goes to a place nothing touched before, which the lowering checks.)"""
    if not prog.inplace:
        return None
    cj, cw, ck = prog._conflicts()
    kind, step = prog.arr[:, 1], prog.arr[:, 7]
    war = (ck & ((1 << 31) - 1)) > 0                    # a write after a read (readers since)
    bad = war & np.isin(kind[cj], LOCAL) & (kind[cw] == KIND_CODE["send"]) & \
        (step[cw] <= step[cj])
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return int(cj[i]), int(cw[i])
