"""Run an MSCCL++ plan: every op of every rank, ``launches`` kernels in a row, as the kernel does.

Semantics as read in microsoft/mscclpp ``src/core/include/execution_kernel.hpp`` (the
``handle*`` functions), ``include/mscclpp/semaphore_device.hpp`` and ``executor.cc``:

- Channels pair by count: ``setupConnections`` tags each rank's connections to a peer in order
  (memory before port), so the k-th channel r→p of a type pairs with the k-th p→r. A signal on
  r's channel adds 1 to the paired channel's inbound counter; a wait takes the next ticket of
  its own channel's expected counter (shared by every user of the channel) and spins until the
  inbound count reaches it. Counters live in GPU memory and persist across launches.
- ``signal``/``wait`` release/acquire; ``rlxsignal``/``rlxwait`` on memory channels are relaxed:
  they count, and order only what preceded the signalling *kernel* (a kernel boundary is a
  system-scope fence), never data written inside it; on port channels both are the ordinary
  proxy signal/wait.
  Switch-channel signal/wait do nothing. Thread ``tid`` serves ``channel_ids[tid]``.
- Memory-channel ``put``/``pws``/``pwsf`` copy directly (``pws`` over memory does *not*
  signal); the source is always ``src_buff[0]``'s buffer at ``src_buff[i]``'s offset. Port
  ``put`` goes through the proxy FIFO of the channel; ``pws`` adds a signal, ``pwsf`` a flush.
- ``flush`` flushes only ``len(dst_buff)`` channels (``handleFlush`` counts ``nOutputs``), so a
  flush written with ``channel_ids`` alone flushes nothing.
- ``get`` copies remote ``src_buff[i]`` at ``dst_buff[i]``'s offset into the local buffer of
  ``dst_buff[i]`` at ``src_buff[i]``'s offset (the offsets are swapped in ``handleGet``).
- ``re``/``res``: dst[0] = src[0] + src[1:] (local), ``res`` also writes dst[1:] remotely;
  ``rre``/``rres``: the same with remote src[1:]. ``reduce_op`` is never read: always a sum.
- Packet ops (LL): ``ppkt``, ``cpkt``, ``rppkt``, ``upkt``, ``repkt``/``respkt``,
  ``recpkt``/``recspkt``, ``gstorepkt`` — packet offsets doubled, ``scratchOffset_`` (the half
  in use under double scratch, by launch parity) added where the kernel adds it; a packet read
  polls until every packet carries this launch's flag.
- ``glres``/``gstore``: multimem load-reduce/store over the switch channel's rank group.
- ``nop`` is ``__syncthreads``; ``barrier`` a ``DeviceSyncer`` over ``num_threadblocks``
  blocks (persistent); ``sem_acquire``/``sem_release`` counting device semaphores (persistent).
- ``pipeline``: the body runs once per unit; the model takes one unit = one chunk, so
  ``num_chunks`` iterations over a chunk each (sizes past the end wrap as ``uint32_t`` does).
"""

from __future__ import annotations

from collections import defaultdict
from math import lcm

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective

from .plan_parse import BufRef, Op, Plan
from .plan_state import (BAD, Graph, Memory, add_values, as_data, data_of, high_mask,
                         input_value, packets_of)

#: The plan's ``collective`` spellings (the DSL writes ``reducescatter``) → the collective.
COLLECTIVES = {Collective.ALLGATHER: Collective.ALLGATHER, Collective.ALLREDUCE: Collective.ALLREDUCE,
               Collective.BROADCAST: Collective.BROADCAST,
               Collective.REDUCE_SCATTER: Collective.REDUCE_SCATTER,
               "reducescatter": Collective.REDUCE_SCATTER,
               "reduce_scatter": Collective.REDUCE_SCATTER}


class _Wait:
    """What a blocked threadblock waits for: a test and its description."""

    __slots__ = ("test", "what")

    def __init__(self, test, what: str):
        self.test, self.what = test, what


class _TB:
    """A running threadblock: its rank, plan, launch and intra-block ordering state."""

    __slots__ = ("r", "tb", "launch", "start", "sync", "since", "thread")

    def __init__(self, r, tb, launch, start):
        self.r, self.tb, self.launch, self.start = r, tb, launch, start
        self.sync, self.since, self.thread = start, [], {}


class Run:
    """One canonical execution with its graph, values and counters."""

    def __init__(self, plan: Plan, collective: str, launches: int, relaxed_orders: bool,
                 root: int = 0):
        self.plan, self.n, self.launches = plan, len(plan.gpus), launches
        self.collective, self.relaxed_orders, self.root = collective, relaxed_orders, root
        sizes = {op.tbg[1] for g in plan.gpus for tb in g.threadblocks for o in tb.ops
                 for op in (o, *o.body)}
        self.G = lcm(*sizes) if sizes else 1
        if self.G > 64:
            raise TopofinderError(f"MSCCL++ plan: threadblock-group sizes need {self.G} cells "
                                  "per chunk in the model (more than 64)")
        self.high = high_mask(self.n)
        self.graph = Graph()
        self.bufmap = [self._buffers(g) for g in plan.gpus]
        self.mem = Memory([{k: v for k, v in self._storage_sizes(g).items()} for g in plan.gpus])
        self._pair_channels()
        self.signals = defaultdict(list)    # sem key → [(node, launch, relaxed, source)]
        self.waits = defaultdict(list)      # sem key → [(node, launch, ticket, relaxed, source)]
        self.expected = defaultdict(int)
        self.lane = {}
        self.barriers = defaultdict(list)
        self.barrier_n = {}
        self.dsem = {(g.rank, i): v for g in self.plan.gpus for i, v in enumerate(g.semaphores)}
        self.sem_events = defaultdict(lambda: ([], []))     # key → (releases, acquires)
        self.outputs = {}                   # (rank, launch) → output cells at kernel end
        self.deadlock: str | None = None
        self.notes: set[str] = set()

    # ---------------------------------------------------------------- layout
    def _storage_sizes(self, g) -> dict[str, int]:
        G, cin, cout = self.G, g.input_chunks * self.G, g.output_chunks * self.G
        scr = g.scratch_chunks * G * (2 if self.plan.packets else 1) * (
            2 if self.plan.double_scratch else 1)
        if self.plan.inplace:
            if self.collective == Collective.REDUCE_SCATTER:
                return {"in": cin, "scr": scr}
            return {"out": max(cin, cout), "scr": scr}
        return {"in": cin, "out": cout, "scr": scr}

    def _buffers(self, g) -> dict[str, tuple[str, int, int]]:
        """Buffer type → (storage, first cell, cells), aliased in place as NCCL does."""
        G, r = self.G, g.rank
        cin, cout = g.input_chunks * G, g.output_chunks * G
        s = self._storage_sizes(g)["scr"]
        if not self.plan.inplace:
            return {"i": ("in", 0, cin), "o": ("out", 0, cout), "s": ("scr", 0, s)}
        if self.collective == Collective.ALLGATHER:
            return {"i": ("out", r * cin, cin), "o": ("out", 0, cout), "s": ("scr", 0, s)}
        if self.collective == Collective.REDUCE_SCATTER:
            return {"i": ("in", 0, cin), "o": ("in", r * cout, cout), "s": ("scr", 0, s)}
        return {"i": ("out", 0, cin), "o": ("out", 0, cout), "s": ("scr", 0, s)}

    def _pair_channels(self):
        """``self.peer[(r, type, c)]`` and the paired channel ``self.pair[(r, type, c)]``."""
        self.peer, self.pair = {}, {}
        order = {}
        for g in self.plan.gpus:
            for ctype in ("memory", "port"):
                seen = defaultdict(int)
                for c, p in enumerate(g.channels[ctype]):
                    if p == g.rank:
                        raise TopofinderError(f"MSCCL++ plan: rank {g.rank} {ctype} channel {c} "
                                              "connects to itself (not modelled)")
                    self.peer[(g.rank, ctype, c)] = p
                    order[(g.rank, ctype, p, seen[p])] = c
                    seen[p] += 1
        for (r, ctype, p, k), c in order.items():
            self.pair[(r, ctype, c)] = order.get((p, ctype, r, k))

    def loc(self, st: _TB, op: Op, ref: BufRef, packet=False, scr_off=True, off=0, unit=None):
        """(rank, storage, first cell, cells) that ``ref`` of ``op`` addresses."""
        r, tb = st.r, st.tb
        if ref.buffer_id is not None:
            ctype = op.channel_type
            owner, btype, _ = self.plan.gpus[r].remote_buffers[tb.remote_refs[ctype][ref.buffer_id]]
        elif ref.switch_id is not None:
            raise TopofinderError(f"MSCCL++ plan: {op.where}: a switch channel reference on an "
                                  "op that does not use one")
        else:
            owner, btype = r, ref.type
        storage, base, extent = self.bufmap[owner][btype]
        tid, ts = op.tbg
        part = ref.size * self.G // ts
        start, n = ref.index * self.G + tid * part, part
        if unit is not None:
            n = n - off if n - off >= 0 else unit
            n, start = min(n, unit), start + off
        if packet:
            start, n = 2 * start, 2 * n
        if storage == "scr" and scr_off and self.plan.double_scratch and st.launch % 2 == 0:
            start += extent // 2
        if start + n > extent:
            raise TopofinderError(
                f"MSCCL++ plan: {op.where} on rank {r} (launch {st.launch}): cells "
                f"[{start}, {start + n}) of rank {owner}'s '{btype}' buffer, which has "
                f"{extent} (chunk index out of range)")
        return owner, storage, base + start, n

    # ---------------------------------------------------------------- events
    def _label(self, st: _TB, op: Op | None, what: str = ""):
        return (st.r, st.tb.id, op.where if op else what, st.launch)

    def event(self, st: _TB, op: Op | None, thread, cross=()) -> int:
        """A node of threadblock ``st`` run by ``thread`` (an int, or ``None`` for all)."""
        preds = [st.sync, *cross]
        if thread is not None and thread in st.thread:
            preds.append(st.thread[thread])
        node = self.graph.node(self._label(st, op), preds)
        st.since.append(node)
        if thread is not None:
            st.thread[thread] = node
        return node

    def sync(self, st: _TB, op: Op | None, cross=(), what="") -> int:
        """``__syncthreads``: a node after everything the block did since its last sync."""
        node = self.graph.node(self._label(st, op, what), [st.sync, *st.since, *cross])
        st.sync, st.since, st.thread = node, [], {}
        return node

    def rd(self, node, loc):
        r, s, a, n = loc
        self.graph.access(node, r, s, a, n, False)
        return self.mem.read(r, s, a, n)

    def wr(self, node, loc, values):
        r, s, a, n = loc
        if len(values) != n:
            values = (values + [BAD] * n)[:n]
        self.graph.access(node, r, s, a, n, True)
        self.mem.write(r, s, a, values, node)

    def port_lane(self, st: _TB, op: Op, c: int, issue: int, label: str) -> int:
        key = (st.r, c)
        node = self.graph.node((st.r, st.tb.id, f"{op.where} [proxy {label}]", st.launch),
                               [issue, self.lane.get(key)])
        self.lane[key] = node
        return node

    # ---------------------------------------------------------------- launches
    def host_start(self, r: int, launch: int, prev_end: int | None) -> int:
        """The host writes fresh inputs before launch ``launch`` (stream-ordered on rank r)."""
        node = self.graph.node((r, -1, "host writes the input", launch), [prev_end])
        storage, base, extent = self.bufmap[r]["i"]
        vals = [input_value(launch, r, c) for c in range(extent)]
        self.wr(node, (r, storage, base, extent), vals)
        return node

    def host_end(self, r: int, launch: int, finals: list[int]) -> int:
        node = self.graph.node((r, -1, "kernel end; host reads the output", launch), finals)
        storage, base, extent = self.bufmap[r]["o"]
        self.outputs[(r, launch)] = self.rd(node, (r, storage, base, extent))
        return node

    def run(self, run_threadblock):
        """Run every rank's launches; ``run_threadblock(run, st)`` is a threadblock's generator."""
        plan = self.plan
        state = {g.rank: [1, None, []] for g in plan.gpus}   # launch, start node, active list
        for g in plan.gpus:
            self._start(g.rank, 1, None, state, run_threadblock)
        while True:
            progressed = False
            for r, (launch, start, active) in state.items():
                for item in active:
                    if item[1] is None:
                        continue
                    gen, wait = item[1], item[2]
                    while wait is None or wait.test():
                        progressed = True
                        try:
                            wait = next(gen)
                        except StopIteration:
                            item[1] = None
                            break
                    item[2] = wait
            for r in list(state):
                launch, start, active = state[r]
                if active and all(item[1] is None for item in active):
                    end = self.host_end(r, launch, [x for item in active
                                                    for x in (item[0].sync, *item[0].since)])
                    if launch < self.launches:
                        self._start(r, launch + 1, end, state, run_threadblock)
                    else:
                        state[r][2] = []
                    progressed = True
            if not any(item[1] is not None for _, _, a in state.values() for item in a):
                return
            if not progressed:
                blocked = [f"rank {item[0].r} tb {item[0].tb.id} (launch {item[0].launch}) "
                           f"waits for {item[2].what}"
                           for _, _, a in state.values() for item in a if item[1] is not None]
                self.deadlock = (f"deadlock: no threadblock can progress; {len(blocked)} "
                                 f"blocked, e.g. " + "; ".join(blocked[:4]))
                return

    def _start(self, r, launch, prev_end, state, run_threadblock):
        """Launch ``launch`` on rank r (a rank without threadblocks ends it at once)."""
        start = self.host_start(r, launch, prev_end)
        active = []
        for tb in self.plan.gpus[r].threadblocks:
            st = _TB(r, tb, launch, start)
            active.append([st, run_threadblock(self, st), None])
        state[r] = [launch, start, active]
        if not active:
            end = self.host_end(r, launch, [start])
            if launch < self.launches:
                self._start(r, launch + 1, end, state, run_threadblock)
