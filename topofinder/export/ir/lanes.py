"""Lanes of the rank-program IR: a link whose ops exceed a runtime's threadblock budget (or
an interleaved program) gets further threadblocks for the same peer on further channel
lanes, each holding a consecutive group of the link's slots (step, message run). Each lane
is its own connection whose receiving threadblock only receives, in step order, so the
placement stays deadlock-free lane by lane."""

from __future__ import annotations

import numpy as np

from topofinder.export.ir.program import SLOT


def assign_lanes(progs: list, budgets, cost, ways: int = 1) -> list:
    """Placement in time: from programs resolved on one lane, deal each link's sequence of
    slots (step, run of the step's message) in turn over ``ways`` channels (slot i to
    residue i mod ways: an *interleaved* program, where consecutive messages of a link run on
    different connections side by side), then cut each residue's slots into consecutive
    groups whose ops' ``cost`` (a function of a resolved program: per op, what it counts
    against the runtime's limit, e.g. steps with the extra dependencies' ``nop`` steps) on
    the sending and on the receiving threadblock stays within a budget; residue r, group g
    runs on channel lane r + ways·g. Per budget in ``budgets``: {link (u, w): (its slots
    t·SLOT + r, sorted; the lane of each)} for the links with more than one lane, or None
    when one slot alone exceeds it."""
    n = len(progs)
    keys, sides, steps = [], [], []
    for prog in progs:
        sel = prog.arr[:, 0].astype(np.int64)
        conn = sel >= 0
        recv = (sel & 1).astype(bool)
        peer = sel >> 1
        link = np.where(recv, peer * n + prog.u, prog.u * n + peer)
        slot = prog.arr[:, 7].astype(np.int64) * SLOT + prog.arr[:, 8]
        keys.append((link * (1 << 40) + slot)[conn])
        sides.append(recv[conn])
        steps.append(cost(prog)[conn])
    key, side, step = np.concatenate(keys), np.concatenate(sides), np.concatenate(steps)
    uniq, inv = np.unique(key, return_inverse=True)
    need = np.stack([np.bincount(inv, weights=step * (side == s), minlength=uniq.size)
                     for s in (False, True)]).astype(np.int64)
    link = uniq >> 40
    heads = np.flatnonzero(np.r_[True, link[1:] != link[:-1]]).tolist() + [uniq.size]
    return [_cut_lanes(uniq, n, heads, need, budget, ways) for budget in budgets]


def _cut_lanes(key: np.ndarray, n: int, heads: list, need: np.ndarray,
               budget: int, ways: int) -> dict | None:
    """:func:`assign_lanes` for one budget: slots sorted by (link, slot) in ``key``, each
    link's slots from ``heads[i]`` on, ``need`` [send, receive] instructions per slot. Each
    residue's lanes take the longest runs of its slots within the budget on both sides (a
    greedy cut)."""
    if need.size and need.max() > budget:
        return None
    lanes = {}
    for a, b in zip(heads[:-1], heads[1:]):
        if ways == 1 and need[0, a:b].sum() <= budget and need[1, a:b].sum() <= budget:
            continue
        lane = np.zeros(b - a, np.int64)
        for r in range(min(ways, b - a)):
            lane[r::ways] = r + ways * _greedy_groups(need[:, a + r:b:ways], budget)
        if lane.any():
            lanes[divmod(int(key[a] >> 40), n)] = (key[a:b] & ((1 << 40) - 1), lane)
    return lanes


def _greedy_groups(need: np.ndarray, budget: int) -> np.ndarray:
    """Per slot (columns of ``need``, [send, receive] instructions), its group when the
    sequence is cut greedily into the longest runs within ``budget`` on both sides."""
    csum = np.concatenate([np.zeros((2, 1), np.int64), np.cumsum(need, axis=1)], axis=1)
    m, group, at, g = need.shape[1], np.zeros(need.shape[1], np.int64), 0, 0
    while at < m:
        end = min(int(np.searchsorted(csum[0], csum[0, at] + budget, side="right")),
                  int(np.searchsorted(csum[1], csum[1, at] + budget, side="right"))) - 1
        group[at:end], at, g = g, end, g + 1
    return group
