"""The rank-program IR: one rank's ordered ops over chunk runs, placed on threadblocks.

A :class:`RankProgram` is what the lowering (:func:`~topofinder.export.ir.lowering.lower`)
builds once from a step schedule, for any runtime: the ops of instance 0 (instance j of K
runs the same ops on its own pieces, offsets shifted by
:func:`~topofinder.export.ir.layout.channel_shift`; scratch offsets by j·``scratch``).
Units: offsets and counts are *pieces*, 1/(K·P) of a shard (P = ``shard_chunks``); a run
is ``cnt`` consecutive pieces of one buffer from ``off``.

Fields of a recorded op (columns of :attr:`RankProgram.arr`, :data:`FIELDS`):

- ``sel``: the threadblock *selector* — send to peer w: 2w; receive from peer x: 2x + 1;
  the local threadblock: −1; step t's staging (copy) threadblock: −2 − t.
- ``kind``: index into :data:`KINDS` — ``send`` (read src, send to the peer), ``recv``
  (receive into dst), ``recv_reduce`` (receive, reduce with src, write dst), ``copy``
  (src to dst).
- ``src_buf``, ``src_off``, ``dst_buf``, ``dst_off``: buffer (index into :data:`BUFFERS`,
  input/output/scratch) and offset of the source and destination runs (a send's dst is its
  src: where the receiver puts it is the receiving op's).
- ``cnt``: pieces in the run (at most the lowering's ``max_cnt``).
- ``step``: the schedule step t (1-based; 0: the initial copy; the reduce phase's last step
  for the copies that end it).
- ``run``: index r of the run within step t's message on its link; (t, r) is the op's
  *slot* (integer t·:data:`SLOT` + r), the unit lanes deal out.
- ``read_buf``, ``read_off``, ``write_buf``, ``write_off``: the run the op reads and the run
  it writes in this rank's memory (buffer −1: none), for the dependencies.

Placement and dependencies (:func:`~topofinder.export.ir.deps.resolve`, for a lane plan of
:func:`~topofinder.export.ir.lanes.assign_lanes`) then give, per rank: threadblocks
``tb_peer`` [(``"send"`` | ``"recv"`` | ``"local"``, peer or −1)] with their ``lane``
(instance j, lane i runs on channel j·L + i, L lanes in all), each op's threadblock
``tb_of`` and order (``order``, ``tb_start``, ``tb_len``: threadblock b's ops are
``order[tb_start[b]:tb_start[b] + tb_len[b]]``, indices into ``arr``), and ``deps``: arrays
(op, threadblock, index of the op waited for in that threadblock) — the fewest waits under
the vector-clock rule that order every op after the last op of another threadblock that
wrote what it reads (in place also: read or wrote what it writes). ``dep_count``: per op,
its dependencies (a runtime with one dependency per op spends extra steps on the others).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.arrays import in_runs
from topofinder.model.collectives import Collective

#: Op kinds (the ``kind`` field's codes).
KINDS = ("send", "recv", "recv_reduce", "copy")
KIND_CODE = {kind: i for i, kind in enumerate(KINDS)}
#: Buffers (the ``*_buf`` fields' codes).
BUFFERS = ("input", "output", "scratch")
#: Columns of :attr:`RankProgram.arr` (module doc).
FIELDS = ("sel", "kind", "src_buf", "src_off", "dst_buf", "dst_off", "cnt", "step", "run",
          "read_buf", "read_off", "write_buf", "write_off")
#: A slot (step t, run r) as the integer t·SLOT + r.
SLOT = 1 << 20
#: One op as :meth:`RankProgram.ops` lists it: kind name, src and dst (buffer name, offset),
#: cnt (pieces), schedule step, deps ((threadblock, index), ...).
Op = namedtuple("Op", "kind src dst cnt step deps")


class RankProgram:
    """One rank's program of instance 0 (module doc). The lowering records its ops in order
    (:meth:`load`), each on a threadblock selector; :func:`~topofinder.export.ir.deps.resolve`
    then places them on threadblocks for given lanes and computes their dependencies, so one
    lowering serves the one-lane and the laned programs.

    Attributes: ``u`` (the rank), ``out_peers``/``in_peers`` (ranks it sends to / receives
    from), ``inplace``, ``coll`` (the collective), ``kp`` (pieces per shard, K·P), ``arr``
    (ops × :data:`FIELDS`, int32, record order), ``scratch`` (scratch pieces of one
    instance); after a resolve ``tb_peer``, ``lane``, ``tb_of``, ``order``, ``tb_start``,
    ``tb_len``, ``deps``, ``dep_count`` (module doc)."""

    def __init__(self, u: int, out_peers, in_peers, inplace: bool, coll: str, piece_count: int):
        self.u = u
        self.out_peers, self.in_peers = list(out_peers), list(in_peers)
        self.arr, self.scratch, self.conflicts = np.zeros((0, len(FIELDS)), np.int32), 0, None
        self.inplace, self.coll, self.kp = inplace, coll, piece_count

    def load(self, rows: np.ndarray, scratch: int) -> None:
        """Take the recorded ops (rows of :data:`FIELDS`, in record order) and the scratch
        pieces one instance uses."""
        self.arr, self.scratch, self.conflicts = rows, scratch, None

    def cells(self, buf: np.ndarray, off: np.ndarray) -> np.ndarray:
        """Integer keys 3·offset + buffer code of places (buf, off), aliased as in memory."""
        if self.inplace:
            off = off.copy()
            alias = {Collective.ALLGATHER: (0, 1, self.u * self.kp),
                     Collective.REDUCE_SCATTER: (1, 0, self.u * self.kp),
                     Collective.ALLREDUCE: (1, 0, 0), Collective.BROADCAST: (0, 1, 0)}[self.coll]
            hit = buf == alias[0]
            off[hit] += alias[2]
            buf = np.where(hit, alias[1], buf)
        return 3 * off + buf

    def _place(self, lanes: dict) -> tuple[np.ndarray, np.ndarray]:
        """Threadblock placement for ``lanes``: each instruction's threadblock and index in
        it; sets ``tb_peer`` and ``lane``: connections' lane-0 threadblocks first (sends,
        receives), the local one, then the others as first used."""
        rec = self.arr
        sel = rec[:, 0].astype(np.int64)
        slot = rec[:, 7].astype(np.int64) * SLOT + rec[:, 8]
        lane = np.zeros(len(rec), np.int64)
        for code, link in [(2 * w, (self.u, w)) for w in self.out_peers] + \
                [(2 * x + 1, (x, self.u)) for x in self.in_peers]:
            if link in lanes:
                hit = sel == code
                slots, lane_of = lanes[link]
                lane[hit] = lane_of[np.searchsorted(slots, slot[hit])]
        span = int(lane.max(initial=0)) + 1         # a threadblock as selector·span + lane
        key = sel * span + lane
        fixed = [2 * w * span for w in self.out_peers] + \
            [(2 * x + 1) * span for x in self.in_peers] + [-span]
        uniq, first = np.unique(key, return_index=True)
        known = set(fixed)
        keys = np.array(fixed + [k for k in uniq[np.argsort(first)].tolist() if k not in known],
                        np.int64)
        srt = np.argsort(keys)
        tb = srt[np.searchsorted(keys[srt], key)]
        sels, self.lane = (keys // span).tolist(), (keys % span).tolist()
        self.tb_peer = [("local", -1) if s < 0 else ("recv" if s & 1 else "send", s >> 1)
                        for s in sels]
        counts = np.bincount(tb, minlength=len(keys))
        order = np.argsort(tb, kind="stable")
        idx = np.empty(len(rec), np.int64)
        idx[order] = in_runs(counts)
        self.order, self.tb_len, self.tb_start = order, counts, np.cumsum(counts) - counts
        return tb, idx

    def _events(self, rows: np.ndarray, buf: np.ndarray, off: np.ndarray, cnt: np.ndarray):
        """(instruction, piece index k, cell) of the ``cnt`` pieces each row touches."""
        rep = cnt[rows]
        j = np.repeat(rows, rep)
        k = in_runs(rep)
        return j, k, np.repeat(self.cells(buf[rows], off[rows]), rep) + 3 * k

    def _conflicts(self):
        """What each instruction must follow, whatever the placement: (instruction,
        instruction it follows, order key) arrays — the last writer of each piece read; in
        place also of each piece written the last writer and the readers since. Out of place
        every write goes to a place nothing touched before (the input is never written,
        scratch is fresh, an output place is written at its piece's first arrival), so
        readers are tracked in place only, and a write elsewhere is refused. Computed once
        per lowering (one-lane and laned resolves share it)."""
        if self.conflicts is not None:
            return self.conflicts
        rec = self.arr.astype(np.int64)
        cnt = rec[:, 6]
        rj, rk, rc = self._events(np.flatnonzero(rec[:, 9] >= 0), rec[:, 9], rec[:, 10], cnt)
        wj, wk, wc = self._events(np.flatnonzero(rec[:, 11] >= 0), rec[:, 11], rec[:, 12], cnt)
        isw = np.r_[np.zeros(rj.size, bool), np.ones(wj.size, bool)]
        j, k, cell = np.r_[rj, wj], np.r_[rk, wk], np.r_[rc, wc]
        ev = np.argsort((cell * (len(rec) + 1) + j) * 2 + isw)      # (cell, j, isw): unique
        j, k, cell, isw = j[ev], k[ev], cell[ev], isw[ev]
        pos = np.arange(j.size)
        start = np.maximum.accumulate(np.where(np.r_[True, cell[1:] != cell[:-1]], pos, 0))
        last = np.maximum.accumulate(np.where(isw, pos, -1))
        prev = np.r_[-1, last[:-1]][:j.size]
        prev[prev < start] = -1                 # the last write before each event, same cell
        if not self.inplace and ((isw & (prev >= 0)).any() or (isw & (cell % 3 == 0)).any()):
            raise TopofinderError("lowering: internal error, an out-of-place write "
                                  "hits a place in use")
        had = prev >= 0
        cj, cw, ck = j[had], j[prev[had]], (isw[had].astype(np.int64) << 40) | (k[had] << 31)
        if self.inplace:                        # readers since the last write, per write
            nxt = np.minimum.accumulate(np.where(isw, pos, j.size)[::-1])[::-1]
            rd = np.flatnonzero(~isw)
            rd = rd[nxt[rd] < j.size]
            rd = rd[cell[nxt[rd]] == cell[rd]]
            w = nxt[rd]
            cj = np.r_[cj, j[w]]
            cw = np.r_[cw, j[rd]]
            ck = np.r_[ck, (1 << 40) | (k[w] << 31) | (1 + j[rd])]
        self.conflicts = cj, cw, ck
        return self.conflicts

    def _candidates(self, tb: np.ndarray, idx: np.ndarray):
        """Per op, the (threadblock, index) it must wait for, as arrays sorted by op then by
        the order :func:`~topofinder.export.ir.deps.resolve` tries them: of what it must
        follow (:meth:`_conflicts`), on other threadblocks, the last op per threadblock."""
        cj, cw, ck = self._conflicts()
        cb, ci = tb[cw], idx[cw]
        keep = cb != tb[cj]
        cj, cb, ci, ck = cj[keep], cb[keep], ci[keep], ck[keep]
        g = np.argsort(cj * (len(self.tb_peer) + 1) + cb, kind="stable")
        cj, cb, ci, ck = cj[g], cb[g], ci[g], ck[g]
        if not cj.size:
            return cj, cb, ci
        head = np.flatnonzero(np.r_[True, (cj[1:] != cj[:-1]) | (cb[1:] != cb[:-1])])
        cj, cb = cj[head], cb[head]
        ci, ck = np.maximum.reduceat(ci, head), np.minimum.reduceat(ck, head)
        g = np.argsort((cj << 42) | ck, kind="stable")
        return cj[g], cb[g], ci[g]

    def take(self, tb: np.ndarray, deps) -> None:
        """Set the resolution (:func:`~topofinder.export.ir.deps.resolve`): ``tb_of`` (each
        op's threadblock), ``deps`` (op, threadblock, index) arrays, by op then in the order
        chosen, and ``dep_count`` (per op, its dependencies)."""
        self.tb_of, self.deps = tb, deps
        self.dep_count = np.bincount(deps[0], minlength=len(tb))

    def ops(self, b: int) -> list:
        """Threadblock b's ops in order, as :data:`Op` tuples."""
        lo = int(self.tb_start[b])
        js = self.order[lo:lo + self.tb_len[b]]
        dj, db, di = self.deps
        first = np.searchsorted(dj, js)
        many = np.searchsorted(dj, js, side="right") - first
        at = np.repeat(first, many) + in_runs(many)         # these ops' deps, in op order
        pairs = list(zip(db[at].tolist(), di[at].tolist()))
        ends = np.cumsum(many).tolist()
        return [Op(KINDS[kind], (BUFFERS[sb], so), (BUFFERS[tb], to), cnt, t, tuple(pairs[a:e]))
                for (_, kind, sb, so, tb, to, cnt, t), a, e in zip(self.arr[js, :8].tolist(),
                                                                   [0] + ends, ends)]

    def positions(self) -> np.ndarray:
        """Per op (record order), its index in its threadblock (the index ``deps`` name)."""
        idx = np.empty(len(self.order), np.int64)
        idx[self.order] = in_runs(self.tb_len)
        return idx

    def emitted(self) -> list[int]:
        """Threadblocks an emitter writes, in id order: all but an empty local one."""
        return [b for b, (kind, _) in enumerate(self.tb_peer)
                if kind != "local" or self.tb_len[b]]

    def per_tb(self, weights: np.ndarray) -> list[int]:
        """Per emitted threadblock, the sum of per-op ``weights`` (e.g. a runtime's steps
        per op)."""
        per = np.bincount(self.tb_of, weights=weights,
                          minlength=len(self.tb_peer)).astype(np.int64)
        return per[self.emitted()].tolist()
