"""Dependency-driven ("async") completion time of a step schedule (docs/model.md
"Dependency-driven time"), next to the lock-step price T_L·α + τ·M/B.

Model. Every send row is one message of (hi − lo)·M/(N·P) bytes (all-to-all: amount·M/N) on
its link u→w (parallel arcs merged, capacity c, bandwidth c·b with b = B/d, d the node
bandwidth in capacity units). A send starts when every chunk it forwards (allgather: the
chunk's first copy at u) or reduces (reduce-scatter: every partial of the chunk u received
before this step) has arrived at its sender u, and its link is free; it holds the link for
bytes/(c·b) and arrives α after it leaves the link. A link serves its sends in step order;
within a step, in the order their data is ready (the order a dependency-driven runtime
issues them), ties by chunk index, then by the source's label relative to the sender,
γ_u⁻¹(v) (γ_u the element of the schedule's symmetry group taking u's orbit representative to
u; v itself without a group). Times are integers of TICK seconds (1 fs; α and each chunk's
link time rounded to it), so equal times tie exactly whatever order they were summed in and
the replay by orbits gives the whole schedule's times bit for bit. An allreduce's allgather
phase starts each shard's chunk at its owner when the owner's reduce-scatter receives of it
have arrived; links stay busy across the phases. The completion time is the last arrival.

It is never above the lock-step price (by induction every step-t send ends by the lock-step
start of step t + 1; up to the rounding of chunk times to ticks) and never below diameter·α.

Orbit schedules (topofinder.model.symmetric) are replayed on their representatives' shards
only: with a free abelian group every row's times equal those of its images, a link's sends
are the images of the representatives' rows moved onto the link's orbit representative by
γ_u⁻¹, and the order above is invariant under the group, so the representatives' rows carry
every time of the whole schedule.
"""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.alltoall_schedule import AllToAllSchedule
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.model.symmetric import OrbitSchedule, transversal
from topofinder.scoring.links import Links

#: Largest N² for which link indices are looked up in a dense N×N table (int32, 64 MB)
_DENSE_LINKS = 1 << 24
#: Most (node, shard, chunk) arrival times, and chunk sends, one replay holds (int64 each)
_MAX_CELLS = 10 ** 8
#: The replay's unit of time in seconds: times are exact int64 counts of it (to 2^62 ticks,
#: about 4.6·10^3 s).
TICK = 1e-15
_NEVER = np.iinfo(np.int64).max
_LONGEST = 2 ** 62


def async_time(schedule, alpha_s: float, bandwidth_Bps: float, size_bytes: float,
               generators=None) -> float:
    """Seconds until the last arrival of ``schedule`` (StepSchedule, OrbitSchedule or
    AllToAllSchedule) run dependency-driven (module docstring) with per-hop latency
    ``alpha_s``, node bandwidth B = ``bandwidth_Bps`` (b = B/d per capacity unit) and
    collective size M = ``size_bytes`` (allgather/reduce-scatter/allreduce: the whole vector,
    M/N per shard; all-to-all: M per node, M/N per piece). ``generators``: the symmetry group
    of a full StepSchedule, so its ties break as its orbit form's do (an OrbitSchedule uses
    its own)."""
    if not alpha_s >= 0 or not bandwidth_Bps > 0 or not size_bytes > 0:
        raise TopofinderError("async time: α must be >= 0, bandwidth and size > 0")
    if isinstance(schedule, AllToAllSchedule):
        return _alltoall(schedule, alpha_s, bandwidth_Bps, size_bytes)
    if isinstance(schedule, OrbitSchedule):
        generators = schedule.generators
    elif not isinstance(schedule, StepSchedule):
        raise TopofinderError(f"async time: not a step schedule ({type(schedule).__name__})")
    return _ReplayState(schedule, alpha_s, bandwidth_Bps, size_bytes, generators).run()


def async_with_reverse(allgather, alpha_s: float, bandwidth_Bps: float,
                       size_bytes: float) -> tuple[float, float]:
    """(allgather, allreduce) seconds of :func:`async_time` for ``allgather`` (StepSchedule or
    OrbitSchedule) and for the allreduce that runs it reversed, then runs it (Thm 2's
    reduce-scatter on a bidirectional topology: steps k + 1 − t, sender and receiver
    swapped; workload.async_price builds the same allreduce laid out), bit for bit, without
    laying out the allreduce's rows: both phases read the allgather's, in step order."""
    if not alpha_s >= 0 or not bandwidth_Bps > 0 or not size_bytes > 0:
        raise TopofinderError("async time: α must be >= 0, bandwidth and size > 0")
    if allgather.collective != Collective.ALLGATHER:
        raise TopofinderError(f"async time: not an allgather ({allgather.collective})")
    if not allgather.topology.bidirectional:
        raise TopofinderError("async time: an allgather reversed is a reduce-scatter only on "
                              "a bidirectional topology (Thm 2)")
    generators = allgather.generators if isinstance(allgather, OrbitSchedule) else None
    return _ReplayState(allgather, alpha_s, bandwidth_Bps, size_bytes,
                        generators).run_with_reverse()


def async_profile(schedule, workload, generators=None) -> float:
    """Expected dependency-driven seconds over ``workload``'s size profile
    (topofinder.workload.cost.Workload: α, B and [(M, weight)])."""
    return sum(w * async_time(schedule, workload.alpha_s, workload.bandwidth_Bps, m, generators)
               for m, w in workload.sizes)


def _phases(schedule) -> list[tuple[np.ndarray, str]]:
    """(rows, collective) per phase, steps kept global (links stay ordered across phases)."""
    s = schedule.sends
    if schedule.collective != Collective.ALLREDUCE:
        return [(s, schedule.collective)]
    first = s[:, 0] <= schedule.reduce_steps
    k = int(np.count_nonzero(first))
    if first[:k].all():                  # the reduce-scatter's rows first: no copies
        return [(s[:k], Collective.REDUCE_SCATTER), (s[k:], Collective.ALLGATHER)]
    return [(s[first], Collective.REDUCE_SCATTER), (s[~first], Collective.ALLGATHER)]


class _ReplayState:
    """One replay: link free times, and per phase the arrival of every (node, shard, chunk)."""

    def __init__(self, schedule, alpha, bandwidth, size, generators):
        topo = schedule.topology
        self.n, self.p, self.alpha = topo.n, schedule.shard_chunks, _ticks(alpha)
        self.schedule = schedule
        self.orbit = isinstance(schedule, OrbitSchedule)
        self.links = Links.of(topo)
        b = float(bandwidth) / topo.node_bandwidth                # bytes/s per capacity unit
        chunk = float(size) / (self.n * self.p) / b / TICK       # one chunk on capacity 1
        self.chunk_ticks = np.rint(chunk / np.maximum(self.links.cap, 1)).astype(np.int64)
        self.free = np.zeros(self.links.num, np.int64)
        self.dense = None                 # link index by u·N + w, when N² is small enough
        if self.n * self.n <= _DENSE_LINKS:
            self.dense = np.full(self.n * self.n, -1, np.int32)
            self.dense[self.links.keys] = np.arange(self.links.num, dtype=np.int32)
        gens = [np.asarray(g, np.int64) for g in (generators or ())]
        self.back = transversal(self.n, gens) if gens else None
        self.canon = None           # an orbit schedule's link ↦ its image at the sender's rep.
        if self.back is not None:
            from_orbits = np.asarray(self.back(np.arange(self.n), np.arange(self.n)))
            self.orbit_rep = from_orbits                           # smallest node of the orbit
            if self.orbit:
                tail, head = self.links.tail, self.links.head
                self.canon = self._link(self.back(tail, tail), self.back(tail, head))
        else:
            self.orbit_rep = np.arange(self.n)

    def _link(self, u, w) -> np.ndarray:
        if self.dense is not None:
            return self.dense[u * self.n + w].astype(np.int64)
        return self.links.index(u, w)

    def _canonical(self, v, u, w):
        """(link, γ_u⁻¹(v)) of rows with sender u: an orbit schedule's rows stand for their
        images, so their link is moved onto u's orbit representative by γ_u⁻¹ too."""
        link = self._link(u, w)
        if self.back is None:
            return link, v
        return (link if self.canon is None else self.canon[link]), self.back(u, v)

    def run(self) -> float:
        done, last = None, 0
        for rows, collective in _phases(self.schedule):
            if rows.shape[0] == 0:
                continue
            phase = self._prepare(_by_step(rows), collective == Collective.REDUCE_SCATTER)
            at, done = self._replay(phase, done)
            last = max(last, at)
        return last * TICK

    def run_with_reverse(self) -> tuple[float, float]:
        """(allgather, allreduce) seconds: the schedule (an allgather) alone, then the allreduce
        that runs it reversed (steps k + 1 − t, sender and receiver swapped: Thm 2's
        reduce-scatter) and then runs it again with steps k + t, links busy across; the same
        rows served in the same order as :func:`async_time` of that allreduce laid out."""
        if self.schedule.sends.shape[0] == 0:
            return 0.0, 0.0
        k = self.schedule.num_steps
        cols = _by_step(self.schedule.sends)
        forward = self._prepare(cols, False)
        alone, _ = self._replay(forward, None)
        self.free[:] = 0
        t, v, lo, hi, u, w = cols
        reverse = self._prepare((k + 1 - t, v, lo, hi, w, u), True, reverse_of=forward)
        first, done = self._replay(reverse, None)
        forward.last_step += k
        then, _ = self._replay(forward, done)
        return alone * TICK, max(first, then) * TICK

    def _prepare(self, cols: tuple, reduce: bool, reverse_of=None) -> "_Phase":
        """A phase's per-row arrays from its columns (t, v, lo, hi, u, w), rows in step order
        (``reverse_of``: the columns are that phase's, steps reversed and u, w swapped: its
        steps' runs are taken last to first, and its shard indices and cells reused)."""
        t, v, lo, hi, u, w = cols
        ph = _Phase()
        ph.reduce, ph.p = reduce, self.p
        if reverse_of is None:
            ph.sources = np.flatnonzero(np.bincount(v, minlength=self.n))
            r = ph.sources.size
            if r == self.n:                              # every node's shard: index = node
                vi = v
            else:
                index = np.zeros(self.n, np.int64)
                index[ph.sources] = np.arange(r)
                vi = index[v]
            ph.read = (u * r + vi) * self.p + lo            # flat cell of each row's first chunk
            ph.write = (w * r + vi) * self.p + lo
            ph.runs = list(_runs(t))
            ph.last_step = int(t[-1])
            ph.count = hi - lo
            ph.single = bool(np.all(ph.count == 1))
            ph.chunks = int(ph.count.sum())
        else:
            for name in ("sources", "count", "single", "chunks"):
                setattr(ph, name, getattr(reverse_of, name))
            ph.read, ph.write = reverse_of.write, reverse_of.read
            ph.runs = reverse_of.runs[::-1]
            ph.last_step = int(t[ph.runs[-1][0]])
        cells = self.n * ph.sources.size * self.p
        if cells > _MAX_CELLS or ph.chunks > _MAX_CELLS:
            raise TopofinderError(f"async time: {cells:.3g} node × shard × chunk states "
                                  f"(P = {self.p}); more than {_MAX_CELLS:.0e} are not "
                                  f"timed")
        if reverse_of is not None and self.back is None:    # keys (lo, v) as the forward's
            ph.link, ph.key = self._link(u, w), reverse_of.key
            ph.group = reverse_of.link      # the same queues, ordered as the forward's
        else:
            ph.link, rel = self._canonical(v, u, w)
            ph.key = lo * self.n + rel
            ph.group = ph.link
        ph.dur = self.chunk_ticks[ph.link]
        if not ph.single:
            ph.dur = ph.count * ph.dur
        ph.busy = float(ph.dur.sum())
        return ph

    def _reduced(self, arrival: np.ndarray, sources: np.ndarray):
        """shards ↦ (shards, P) times their reduction is complete at their owner: that of the
        reduce-scatter source in the same orbit (equal by symmetry)."""
        own = arrival[sources, np.arange(sources.size), :]
        by_orbit = dict(zip(self.orbit_rep[sources].tolist(), range(sources.size)))

        def done(shards):
            return own[[by_orbit[int(r)] for r in self.orbit_rep[shards]]]
        return done

    def _replay(self, ph: "_Phase", done) -> tuple[int, object]:
        """Serve a phase's steps in order from the link times in ``free`` (updated): its last
        arrival in ticks, and for a reduce-scatter the owners' completion (:meth:`_reduced`;
        ``done``, that of the reduce-scatter before an allgather phase)."""
        if not ph.busy + float(self.alpha) * (ph.last_step + 1) < _LONGEST:
            raise TopofinderError(f"async time: the schedule may take more than "
                                  f"{_LONGEST * TICK:.3g} s; too long to time")
        sources, p = ph.sources, self.p
        arrival = np.full((self.n, sources.size, p), 0 if ph.reduce else _NEVER, np.int64)
        if not ph.reduce:
            arrival[sources, np.arange(sources.size), :] = 0 if done is None else done(sources)
        flat = arrival.reshape(-1)
        read, write, link, key, dur, count = ph.read, ph.write, ph.link, ph.key, ph.dur, ph.count
        combine = np.maximum if ph.reduce else np.minimum
        last = 0
        for a, b in ph.runs:
            if ph.single:                             # one chunk per row: no expansion
                ready = flat[read[a:b]]
            else:
                cnt = count[a:b]
                offsets = np.concatenate(([0], np.cumsum(cnt)[:-1]))
                cell_row = np.repeat(np.arange(b - a), cnt)
                within = np.arange(cell_row.size) - offsets[cell_row]
                ready = np.maximum.reduceat(flat[read[a:b][cell_row] + within], offsets)
            if ready.max() == _NEVER:
                raise TopofinderError("async time: a send forwards a chunk its sender never "
                                      "received; validate the schedule first")
            arrive = serve(self.free, link[a:b], ready, key[a:b], dur[a:b],
                           ph.group[a:b]) + self.alpha
            last = max(last, int(arrive.max()))
            if ph.single:
                combine.at(flat, write[a:b], arrive)
            else:
                combine.at(flat, write[a:b][cell_row] + within, arrive[cell_row])
        return last, (self._reduced(arrival, sources) if ph.reduce else None)


class _Phase:
    """One phase's rows laid out for :meth:`_ReplayState._replay`: per row (in step order) its
    first read and written cell, link, queue key, chunk count and link ticks; the (start,
    end) runs of its steps in serving order; its shards and last (global) step."""


def _by_step(rows: np.ndarray) -> tuple:
    """The six columns of ``rows`` in stable step order (views when already in it)."""
    t = rows[:, 0]
    if np.any(t[1:] < t[:-1]):
        order = step_order(t)
        return tuple(c[order] for c in rows.T)
    return tuple(np.ascontiguousarray(c) for c in rows.T)


def step_order(t: np.ndarray) -> np.ndarray:
    """The stable order of rows by step (a radix sort on 16 bits when the steps fit)."""
    if int(t.min()) >= 0 and int(t.max()) < 2 ** 15:
        t = t.astype(np.int16)
    return np.argsort(t, kind="stable")


def _runs(t: np.ndarray):
    """(start, end) of each run of equal values in the sorted array ``t``."""
    cuts = np.flatnonzero(np.diff(t)) + 1
    return zip(np.concatenate(([0], cuts)).tolist(), np.append(cuts, t.size).tolist())


def serve(free: np.ndarray, link: np.ndarray, ready: np.ndarray, key: np.ndarray,
          dur: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """Finish times of one step's sends: each link (``free``: when it is next free, updated)
    takes its sends in order of (ready, key), each starting at max(ready, previous finish)
    and holding the link ``dur`` ticks.

    The queue's recursion fin_i = max(r_i, fin_{i−1}) + d_i (r of a link's first send raised
    to ``free``) unrolls to fin_i = G_i + max_{j ≤ i} (r_j − G_{j−1}), G the running sum of d
    along the queue (Lindley's recursion): one running maximum per link, taken for all links
    at once (:func:`_running_max`), all in exact int64. ``group``: any relabelling of the
    links one to one (the queues are sorted by it instead; each queue's order and times are
    the same — the reduce-scatter phase groups its sends by the allgather's links, so that its
    sends, laid out by those, are found nearly in order)."""
    if np.bincount(link).max() == 1:                 # no queue: one send on every link
        fin = np.maximum(ready, free[link]) + dur
        free[link] = fin
        return fin
    order = _queue_order(link if group is None else group, ready, key)
    lk, rd, du = link[order], ready[order], dur[order]
    first = np.empty(lk.size, bool)
    first[0] = True
    np.not_equal(lk[1:], lk[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], lk.size) - 1
    rd[starts] = np.maximum(rd[starts], free[lk[starts]])
    total = np.cumsum(du)
    fin = total + _running_max(rd - (total - du), np.cumsum(first) - 1, starts)
    free[lk[ends]] = fin[ends]
    out = np.empty_like(fin)
    out[order] = fin
    return out


def _queue_order(link: np.ndarray, ready: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The stable order of sends by (link, ready, key): one int64 sort key when the three
    fit in 62 bits, else a lexicographic sort. The packed keys are sorted stably (a merge
    sort, fast on runs) when they are mostly in order already (under one descent in eight:
    the two-tree allgather's large steps, under 1 %) — else by the faster unstable sort, kept when
    no two keys are equal (the usual case, where every order is the stable one)."""
    low = int(ready.min())
    key_bits = int(key.max()).bit_length()
    ready_bits = (int(ready.max()) - low).bit_length()
    link_bits = int(link.max()).bit_length()
    if link_bits + ready_bits + key_bits <= 62:
        packed = (((link << ready_bits) | (ready - low)) << key_bits) | key
        if 8 * np.count_nonzero(packed[1:] < packed[:-1]) < packed.size:
            return np.argsort(packed, kind="stable")
        order = np.argsort(packed)
        ranked = packed[order]
        if np.any(ranked[1:] == ranked[:-1]):
            order = np.argsort(packed, kind="stable")
        return order
    if ready_bits + key_bits <= 62:
        return np.lexsort((((ready - low) << key_bits) | key, link))
    return np.lexsort((key, ready, link))


def _running_max(x: np.ndarray, segment: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running maximum of ``x`` restarted at every segment (``segment``: each entry's
    segment number, non-decreasing; ``starts``: each segment's first index), exact: shifted
    so every segment's values lie above all earlier segments' when that fits in int64, else
    by doubling (after the pass of width s, each entry holds the maximum of the 2s entries of
    its segment ending at it)."""
    low, high = int(x.min()), int(x.max())
    span = high - low + 1
    if span * starts.size < 2 ** 62:
        lift = segment * span - low
        return np.maximum.accumulate(x + lift) - lift
    pos = np.arange(x.size) - starts[segment]
    out, width = x.copy(), 1
    while width <= int(pos.max()):
        out[width:] = np.where(pos[width:] >= width, np.maximum(out[width:], out[:-width]),
                               out[width:])
        width *= 2
    return out


def _alltoall(schedule: AllToAllSchedule, alpha: float, bandwidth: float, size: float) -> float:
    """All-to-all rows (t, u, w, src, dst) with amounts: a send of piece (src, dst) is ready when
    every receive of that piece at u from an earlier step has arrived (at 0 when u = src)."""
    topo = schedule.topology
    n, s, amounts = topo.n, schedule.sends, schedule.amounts
    if s.shape[0] == 0:
        return 0.0
    links = Links.of(topo)
    piece = float(size) / n / (float(bandwidth) / topo.node_bandwidth) / TICK
    if not s[:, 0].max() * _ticks(alpha) + piece * float(amounts.sum()) < _LONGEST:
        raise TopofinderError(f"async time: the schedule may take more than "
                              f"{_LONGEST * TICK:.3g} s; too long to time")
    alpha = _ticks(alpha)
    held = np.unique((s[:, 2] * n + s[:, 3]) * n + s[:, 4])       # (node, src, dst) received
    arrival = np.zeros(held.size, np.int64)
    free = np.zeros(links.num, np.int64)
    order = np.argsort(s[:, 0], kind="stable")
    s, amounts = s[order], amounts[order]
    last = 0
    for step in np.split(np.arange(s.shape[0]), np.flatnonzero(np.diff(s[:, 0])) + 1):
        t, u, w, src, dst = s[step].T
        key = (u * n + src) * n + dst
        at = np.minimum(np.searchsorted(held, key), held.size - 1)
        ready = np.where(held[at] == key, arrival[at], 0)
        link = links.index(u, w)
        dur = np.rint(amounts[step] * piece / links.cap[link]).astype(np.int64)
        arrive = serve(free, link, ready, src * n + dst, dur) + alpha
        last = max(last, int(arrive.max()))
        np.maximum.at(arrival, np.searchsorted(held, (w * n + src) * n + dst), arrive)
    return last * TICK


def _ticks(seconds: float) -> int:
    """``seconds`` as a whole number of TICKs."""
    return int(round(float(seconds) / TICK))
