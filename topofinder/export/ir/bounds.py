"""Lower bounds on a lowering's ops per threadblock, from the schedule arrays alone, and the
layout pass they drive (:func:`layout_for`: an allreduce's candidate piece layout whose
fullest rank needs the fewest ops).

The bounds count runs of at most :data:`BOUND_CNT` pieces: one op per (link, step) in a
reduce phase, one per contiguous piece range in the allgather phase (paper 001 §7), plus
the staging copies when multi-range messages go through scratch. A runtime's fit check
(:mod:`topofinder.export.msccl.fit`) compares them with its limits before any lowering."""

from __future__ import annotations

import hashlib
import weakref

import numpy as np

from topofinder.export.ir.arrays import in_runs, stable_order
from topofinder.export.ir.layout import PieceLayout, allreduce_layouts, shard_layout
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule

#: Pieces per op the bounds count with (MSCCL's ``cnt`` < 72); fixed, so the layout chosen
#: for a schedule does not depend on the runtime it is written for.
BOUND_CNT = 71


def rank_need(direct: np.ndarray, staged, n: int, stage) -> np.ndarray:
    """Per rank: the least instructions its send and receive threadblocks (and, staged, its
    staging copies) need, from :func:`instruction_bounds`."""
    per_rank = _rank_bound(direct, n)
    if staged is not None:          # staged: its links plus the rank's staging copies
        with_copies = _rank_bound(staged[:n * n], n) + staged[n * n:].reshape(n, -1).sum(axis=1)
        per_rank = with_copies if stage else np.minimum(per_rank, with_copies)
    return per_rank


def layout_for(schedule: StepSchedule, k: int = 1, stage: bool | None = None) -> PieceLayout:
    """Layout pass: NCCL's shard order for allgather and reduce-scatter; for allreduce the
    candidate with the least instruction bound (:func:`least_layout`), as a runtime's fit
    check chooses it."""
    if schedule.collective != Collective.ALLREDUCE:
        return shard_layout(schedule.topology.n, schedule.shard_chunks, k)
    return least_layout(schedule, stage)[0]


_LEAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # schedule → {stage: best}


def least_layout(schedule: StepSchedule, stage):
    """Layout pass of an allreduce: of the candidate layouts, the one whose fullest rank
    needs the fewest instructions by :func:`instruction_bounds` (the first on ties); returns
    it with its bounds (direct, staged) and per-rank need. Memoised per schedule and
    ``stage``: the bounds do not depend on the channels, so instances and the interleaved
    instance (a fit check and the writer after it) share them."""
    memo = _LEAST.setdefault(schedule, {})
    if stage in memo:
        return memo[stage]
    best = None
    prep = _bound_prep(schedule)
    for layout in allreduce_layouts(schedule.topology, schedule.shard_chunks):
        direct, staged = instruction_bounds(schedule, layout.table(), stage, prep)
        per_rank = rank_need(direct, staged, schedule.topology.n, stage)
        if best is None or per_rank.max() < best[3].max():
            best = (layout, direct, staged, per_rank)
    memo[stage] = best
    return best


def _rank_bound(link: np.ndarray, n: int) -> np.ndarray:
    """Per rank: the instructions of its send and receive threadblocks, from per-link
    counts (index u·N + w)."""
    bl = link.reshape(n, n)
    return bl.sum(axis=1) + bl.sum(axis=0)


def instruction_bounds(schedule: StepSchedule, table: np.ndarray, stage: bool | None,
                        prep=None):
    """Lower bounds on instructions per threadblock, from the send rows: (direct, staged),
    pieces at ``table[v, c]`` (the layout's channel-0 offsets).
    ``direct[u·N + w]``: the send threadblock u→w without staging — one instruction per
    (link, step) and 71 pieces in a reduce phase (:func:`_reduce_bound`), per contiguous
    piece range and 71 pieces in the allgather phase (cnt < MSCCL_MAX_COUNT = 72).
    ``staged`` (None when nothing is staged or ``stage`` is False): the same with staged
    allgather messages (one send per block of 71 pieces), followed by the N·(steps+1) counts of
    each (rank, step)'s local threadblock, which copies every range of a multi-range message
    on both ends (paper 001 §7). ``prep``: :func:`_bound_prep` of the schedule, if known."""
    n, span = schedule.topology.n, schedule.num_steps + 1
    reduce_prep, phase = prep or _bound_prep(schedule)
    bound = _reduce_bound(reduce_prep, table, n)
    if phase is None:
        return bound, None
    direct, blocks, copies = _allgather_bounds(*phase, n, table, stage)
    if blocks is None:
        return bound + direct, None
    stage_tb = np.zeros((n, span), np.int64)
    first = reduce_until(schedule)
    stage_tb[:, first:first + copies.shape[1]] = copies
    return bound + direct, np.concatenate([bound + blocks, stage_tb.ravel()])


def _bound_prep(schedule: StepSchedule):
    """What :func:`instruction_bounds` needs that no layout changes: :func:`_reduce_prep`
    and the allgather phase's rows (steps counted from 1) with their digest, or None when
    that phase is empty."""
    until = reduce_until(schedule)
    rows = schedule.sends[schedule.sends[:, 0] > until]
    phase = None
    if rows.shape[0]:
        rows = rows - np.array([until, 0, 0, 0, 0, 0], rows.dtype)
        phase = (rows, hashlib.sha1(np.ascontiguousarray(rows)).digest())
    return _reduce_prep(schedule, until), phase


_PHASE_MEMO: dict = {}      # the last few layouts' allgather-phase bounds (_allgather_bounds)


def _allgather_bounds(rows: np.ndarray, digest: bytes, n: int, table: np.ndarray, stage):
    """The allgather phase's part of :func:`instruction_bounds` (``rows``: its sends, steps
    counted from 1; ``digest``: theirs): per link u·N + w the direct send instructions and,
    unless ``stage`` is False, the staged sends, and per (rank, phase step) the staging
    copies (else None, None). Memoised on rows and layout (four entries, one per candidate
    layout): the API's early check of an allgather and the writer's check of the
    collective share the work."""
    memo = (digest, n, table.tobytes(), stage is False)
    if memo in _PHASE_MEMO:
        return _PHASE_MEMO[memo]
    t, v, lo, hi, u, w = (rows[:, i] for i in range(6))
    span = int(t.max()) + 1
    row, start, end = _piece_ranges(v, lo, hi, table)
    key = (u[row] * n + w[row]) * span + t[row]
    order = stable_order(key * (int(table.max()) + 1) + start)
    key, start, end = key[order], start[order], end[order]
    brk = np.ones(key.size, bool)
    brk[1:] = (key[1:] != key[:-1]) | (start[1:] != end[:-1])
    new = np.r_[True, key[1:] != key[:-1]]
    runs_kt, runs = key[new], np.bincount(np.cumsum(new) - 1, weights=brk)
    run_len = np.bincount(np.cumsum(brk) - 1, weights=end - start)
    direct = np.bincount(key[brk] // span, weights=np.ceil(run_len / BOUND_CNT),
                         minlength=n * n).astype(np.int64)
    out = (direct, None, None)
    if stage is not False:
        pieces = np.bincount(np.cumsum(new) - 1, weights=end - start)
        blocks = np.ceil(pieces / BOUND_CNT)
        extra = np.maximum(0, runs - blocks)
        lk, st = runs_kt // span, runs_kt % span
        copies = np.bincount(lk // n * span + st, weights=extra, minlength=n * span) + \
            np.bincount(lk % n * span + st, weights=extra, minlength=n * span)
        out = (direct, np.bincount(lk, weights=blocks, minlength=n * n).astype(np.int64),
               copies.astype(np.int64).reshape(n, span))
    if len(_PHASE_MEMO) >= 4:
        del _PHASE_MEMO[next(iter(_PHASE_MEMO))]
    _PHASE_MEMO[memo] = out
    return out


def reduce_until(schedule: StepSchedule) -> int:
    """The last step of the reduce phase (0: none)."""
    return {Collective.ALLGATHER: 0, Collective.REDUCE_SCATTER: schedule.num_steps,
            Collective.ALLREDUCE: schedule.reduce_steps}[schedule.collective]


def _piece_ranges(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, table: np.ndarray):
    """Send rows (shard v, chunks [lo, hi)) as ranges of offsets: (row index, start, end),
    a row whose chunks are not adjacent in ``table`` cut into one range per chunk."""
    m = v.size
    split = (hi - lo > 1) & (table[v, np.minimum(lo + 1, hi - 1)] != table[v, lo] + 1)
    rep = np.where(split, hi - lo, 1)
    row = np.repeat(np.arange(m), rep)
    c = lo[row] + in_runs(rep)
    start = table[v[row], c]
    return row, start, start + np.where(split[row], 1, hi[row] - lo[row])


def _reduce_prep(schedule: StepSchedule, reduce_until: int):
    """What the reduce phase's bound needs that no layout changes, one entry per piece
    sent in that phase: (v, c, message key (u·N + w)·(steps + 1) + t, sent from the input,
    the receiver's partial in its input, the last partial of the receiver's own chunk);
    None when the phase is empty."""
    n, p, span = schedule.topology.n, schedule.shard_chunks, schedule.num_steps + 1
    s = schedule.sends[schedule.sends[:, 0] <= reduce_until]
    if not s.shape[0]:
        return None
    rep = s[:, 3] - s[:, 2]
    row = np.repeat(np.arange(s.shape[0]), rep)
    c = s[row, 2] + in_runs(rep)
    t, v, u, w = s[row, 0], s[row, 1], s[row, 4], s[row, 5]
    piece = v * p + c
    at_w, at_u = w * (n * p) + piece, u * (n * p) + piece
    order = np.argsort((at_w * span + t) * n + u)
    first, last = np.zeros(row.size, bool), np.zeros(row.size, bool)
    new = np.r_[True, at_w[order][1:] != at_w[order][:-1]]
    first[order] = new
    last[order] = np.r_[new[1:], True]
    arrival = np.full(n * n * p, schedule.num_steps + 1, np.int64)
    arrival[at_w[order][new]] = t[order][new]          # (sorted by step within a place)
    sent = np.full(n * n * p, schedule.num_steps + 1, np.int64)
    np.minimum.at(sent, at_u, t)
    from_input = arrival[at_u] >= t
    cur_input = first & (sent[at_w] > t)
    final = last & (v == w)
    return v, c, (u * n + w) * span + t, from_input, cur_input, final, span


def _reduce_bound(prep, table: np.ndarray, n: int) -> np.ndarray:
    """Per link (index u·N + w): a lower bound on the reduce phase's send instructions, from
    :func:`_reduce_prep` and the layout's offsets ``table[v, c]``. The lowering orders a
    message by where its pieces sit at the sender; those still in the sender's input come
    first, by offset, and two neighbours among them share a run only if their offsets follow,
    both receivers' partials are in the input (the first arrival there) or both elsewhere,
    and both land in scratch or both in the output (the last partial of the receiver's own
    chunk). Each such segment, and the rest of the message, needs one instruction per
    ``BOUND_CNT`` pieces. Exact arithmetic on the send rows, one entry per piece."""
    if prep is None:
        return np.zeros(n * n, np.int64)
    v, c, msg, from_input, cur_input, final, span = prep
    pos = table[v, c]
    wide = int(table.max()) + 1
    order = stable_order((2 * msg + ~from_input) * wide + pos)
    msg, pos, inp = msg[order], pos[order], from_input[order]
    cur, fin = cur_input[order], final[order]
    brk = np.r_[True, (msg[1:] != msg[:-1]) | (inp[1:] != inp[:-1])]
    brk[1:] |= inp[1:] & ((pos[1:] != pos[:-1] + 1) | (cur[1:] != cur[:-1]) |
                          (fin[1:] != fin[:-1]))
    seg = np.cumsum(brk) - 1
    blocks = np.ceil(np.bincount(seg) / BOUND_CNT)
    return np.bincount(msg[brk] // span, weights=blocks, minlength=n * n).astype(np.int64)
