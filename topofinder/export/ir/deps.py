"""Dependency resolution of the rank-program IR: threadblock placement for a lane plan and
the vector-clock rule choosing each op's waits (module doc of
:mod:`topofinder.export.ir.program`)."""

from __future__ import annotations

import numpy as np


def resolve(progs: list, lanes: dict | None = None, batch: int = 64,
             check=None) -> str | None:
    """Place each program's recorded instructions on threadblocks for ``lanes``
    (:meth:`RankProgram._place`) and compute their dependencies: an instruction waits for the
    candidates (:meth:`RankProgram._candidates`) its vector clock does not already imply, tried
    by decreasing clock sum (:func:`_choose_deps`, on ``batch`` ranks side by side, their
    instructions and threadblocks numbered on across ranks); :meth:`RankProgram.take` keeps it.
    ``check``: called on each resolved batch; its first answer other than None stops the
    resolve (the later ranks keep their previous resolution) and is returned."""
    for lo in range(0, len(progs), batch):
        part, placed = progs[lo:lo + batch], []
        for prog in part:
            tb, idx = prog._place(lanes or {})
            placed.append((tb, idx, *prog._candidates(tb, idx)))
        sizes = np.array([p[0].size for p in placed])
        ntbs = np.array([len(prog.tb_peer) for prog in part])
        j0, b0 = np.cumsum(sizes) - sizes, np.cumsum(ntbs) - ntbs
        dj, db, di = _choose_deps(np.concatenate([p[0] + b for p, b in zip(placed, b0)]),
                                  np.concatenate([p[1] for p in placed]),
                                  np.concatenate([p[2] + j for p, j in zip(placed, j0)]),
                                  np.concatenate([p[3] + b for p, b in zip(placed, b0)]),
                                  np.concatenate([p[4] for p in placed]), np.repeat(b0, ntbs))
        cut = np.searchsorted(dj, np.r_[j0, sizes.sum()])
        for prog, p, j, b, a, e in zip(part, placed, j0, b0, cut[:-1], cut[1:]):
            prog.take(p[0], (dj[a:e] - j, db[a:e] - b, di[a:e]))
        problem = None if check is None else check(part)
        if problem is not None:
            return problem
    return None


def _choose_deps(tb: np.ndarray, idx: np.ndarray, cj: np.ndarray, cb: np.ndarray,
                 ci: np.ndarray, first: np.ndarray):
    """The dependencies the vector-clock rule chooses from the candidates ``cj``, ``cb``,
    ``ci`` (:meth:`RankProgram._candidates`; ``tb``, ``idx``: each instruction's threadblock and
    index; ``first``: per threadblock, the first of its rank's). An instruction's clock (per
    threadblock, how many of its instructions are known done) is the entry-wise maximum of
    its threadblock's previous clock and its candidates' clocks, whichever are chosen (a
    skipped one is implied), and only threadblocks some candidate lies on carry entries
    (:func:`_waited_clocks`). So candidate (b, i) of an instruction on threadblock a is
    chosen iff i is at least entry b of every clock a joined before it — its earlier
    instructions' candidates and its own tried earlier, by decreasing clock sum, stably: a
    prefix maximum per threadblock. Returns (instruction, threadblock, index) arrays, by
    instruction then in the order tried."""
    if not cj.size:
        return cj, cb, ci
    ta = tb[cj]
    waited = np.zeros(first.size, np.int64)
    waited[cb] = 1
    seen = np.cumsum(waited)
    col = seen - 1 - (seen - waited)[first]         # a waited threadblock's clock column
    nw, wb, inner = int(col[cb].max()) + 1, col[cb], waited[ta] > 0
    keys, rows = _waited_clocks(nw, cj[inner], ta[inner], idx[cj[inner]], cb[inner],
                                ci[inner], col)
    at = _last_at(keys, cb, ci)
    clock = np.zeros((cj.size, nw), np.int64)
    clock[at >= 0] = rows[at[at >= 0]]
    clock[np.arange(cj.size), wb] = ci + 1
    o = np.lexsort((-clock.sum(1), cj, ta))
    new = np.r_[True, ta[o][1:] != ta[o][:-1]]
    lift = np.cumsum(new) * (int(clock.max()) + 1)
    seen = clock[o]
    seen += lift[:, None]
    np.maximum.accumulate(seen, axis=0, out=seen)   # per threadblock a, the clocks so far
    e = np.arange(o.size)
    before = seen[e - 1, wb[o]] - lift[e - 1]
    before[new] = 0
    pick = o[ci[o] >= before]
    pick = pick[np.argsort(cj[pick], kind="stable")]
    return cj[pick], cb[pick], ci[pick]


def _waited_clocks(nw: int, cj, ta, x, cb, ci, col):
    """The clocks of the instructions on waited threadblocks that have candidates (per
    candidate in record order: instruction ``cj`` at index ``x`` on threadblock ``ta``, its
    candidate (``cb``, ``ci``); ``col``: per threadblock, its entry among its rank's ``nw``).
    Each candidate is one node of a chain per threadblock: its clock is the entry-wise
    maximum of the previous node's (own entry raised to x + 1) and the candidate's (the last
    instruction's clock on ``cb`` at index ≤ ``ci``, entry cb raised to ci + 1); a clock is
    packed in one integer, a field of ``width`` bits with a guard bit per entry (maximum by
    guard-bit subtraction). Returns keys threadblock·2^32 + index (ascending) and the
    instructions' clocks (rows of ``nw`` entries)."""
    g = cj.size
    if not g:
        return cj, np.zeros((0, nw), np.int64)
    width = 16 << int(max(int(x.max(initial=0)), int(ci.max(initial=0))) + 2 >= 1 << 15)
    last = np.r_[cj[1:] != cj[:-1], True]           # an instruction's last node: its clock
    o = np.lexsort((np.arange(g), ta))              # nodes per threadblock, in order
    first = np.r_[True, ta[o][1:] != ta[o][:-1]]
    prev = np.r_[g, o[:-1]]
    prev[first] = g                                 # node g: the empty clock
    prev = prev[np.argsort(o)]
    step = np.where(prev == g, x + 1, x - x[np.minimum(prev, g - 1)])
    step[~np.r_[True, cj[1:] != cj[:-1]]] = 0       # a further candidate of one instruction
    fin = np.flatnonzero(last)
    fin = fin[np.lexsort((x[fin], ta[fin]))]
    keys = ta[fin] * (1 << 32) + x[fin]
    at = _last_at(keys, cb, ci)
    hit = at >= 0
    look = np.where(hit, fin[at], g)
    lift = np.where(hit, ci - x[look % g], ci + 1)
    shift = (width * col[ta]).tolist(), (width * col[cb]).tolist()
    own = [s << w for s, w in zip(step.tolist(), shift[0])]
    rise = [s << w for s, w in zip(lift.tolist(), shift[1])]
    guard = sum(1 << (width * b + width - 1) for b in range(nw))
    top = width - 1
    clocks = [0] * (g + 1)
    for n, (p, dp, q, dq) in enumerate(zip(prev.tolist(), own, look.tolist(), rise)):
        u, v = clocks[p] + dp, clocks[q] + dq
        m = ((u | guard) - v) & guard
        clocks[n] = v ^ ((u ^ v) & (m - (m >> top)))
    nbytes = width // 8 * nw
    packed = b"".join(clocks[n].to_bytes(nbytes, "little") for n in fin.tolist())
    return keys, np.frombuffer(packed, f"<u{width // 8}").reshape(-1, nw).astype(np.int64)


def _last_at(keys: np.ndarray, b: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Per (b, i), the position in ``keys`` (threadblock·2^32 + index, ascending) of the
    last key on threadblock b at index ≤ i, −1 if none."""
    at = np.searchsorted(keys, b * (1 << 32) + i, side="right") - 1
    hit = at >= 0
    hit[hit] = keys[at[hit]] >> 32 == b[hit]
    return np.where(hit, at, -1)
