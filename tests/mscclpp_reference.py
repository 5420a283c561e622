"""An independent reference interpreter of MSCCL++ execution plans, for cross-checking the
package's model (topofinder/export/mscclpp).

Deliberately different in method. The package runs one canonical schedule and decides races
from a happens-before graph. This interpreter is a naive explicit-state machine: memory is a
dict ``(rank, storage, cell) -> value`` with values as explicit sorted tuples of contributions
``(launch, rank, input cell)``; every op runs atomically when its turn is drawn; port-channel
puts and signals go into a per-channel FIFO that a separate "proxy" action drains at a moment
the schedule chooses (flush waits for it to empty); every rank's launches follow each other and
the host rewrites the input before each launch and reads the output after it. Schedules are
drawn at random (seeded) or explored exhaustively with a state cache for small plans. A race
shows here as a schedule whose outputs differ from the collective's; a deadlock as a state
with no enabled action before every launch ends; unequal signals as a launch whose counters
do not return to balance.

It reads the JSON itself and covers the ops the memory/port-channel plans use, device semaphores
included (no switch channels, pipelines or barriers); within an op it does not see threads, so it is
blind to missing ``nop``s and to relaxed orderings, which the package's model checks.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

DOUBLED = {"ppkt": "dst", "rppkt": "both", "cpkt": "dst", "upkt": "src"}


def _contrib(launch, rank, cell):
    return ((launch, rank, cell),)


def _merge(a, b):
    if not isinstance(a, tuple) or not isinstance(b, tuple) or a == ("?",) or b == ("?",):
        return ("?",)
    return tuple(sorted(a + b))


@dataclass
class Outcome:
    """What one schedule produced."""

    deadlock: bool
    outputs: dict          # (rank, launch) -> tuple of cell values
    unbalanced: bool
    steps: int


class Reference:
    """Static tables of a plan (channels, pairing, buffers) and the interpreter."""

    def __init__(self, doc: dict, launches: int = 2, root: int = 0):
        self.doc, self.launches, self.root = doc, launches, root
        self.n = len(doc["gpus"])
        self.coll = doc["collective"].replace("_", "").replace("-", "")
        self.inplace = doc["inplace"]
        self.packets = doc["protocol"] == "LL"
        self.double = doc.get("use_double_scratch_buffer", False)
        tbgs = [op.get("tbg_info", {}).get("tbg_size", 1) for g in doc["gpus"]
                for tb in g["threadblocks"] for op in tb["ops"]]
        self.G = math.lcm(1, *tbgs)
        self.chan = {}       # (rank, type, idx) -> peer
        by_peer = {}         # (rank, type, peer) -> that rank's channel indices to peer, in order
        for g in doc["gpus"]:
            for t in ("memory", "port"):
                peers = [p for ch in g["channels"] if ch["channel_type"] == t
                         for p in ch["connected_to"]]
                for i, p in enumerate(peers):
                    self.chan[(g["id"], t, i)] = p
                    by_peer.setdefault((g["id"], t, p), []).append(i)
        self.mate = {}       # (rank, type, idx) -> the peer's channel that receives my signals
        for (r, t, p), mine in by_peer.items():
            theirs = by_peer.get((p, t, r), [])
            for k, i in enumerate(mine):
                self.mate[(r, t, i)] = (p, t, theirs[k]) if k < len(theirs) else ("nowhere", r, t, i)
        self.programs = {}
        self.blocks = {g["id"]: [tb["id"] for tb in g["threadblocks"]] for g in doc["gpus"]}
        self._tables = {}
        self.touched = set()     # (what, rank) a step changed: wakes the fast scheduler
        self.queued = set()      # proxy FIFOs a step appended to
        for g in doc["gpus"]:
            for tb in g["threadblocks"]:
                flat = []
                for op in tb["ops"]:
                    if op["name"] == "pipeline":
                        raise ValueError("the reference does not run pipelines")
                    flat.append(op)
                self.programs[(g["id"], tb["id"])] = flat

    # ----------------------------------------------------------------- addressing
    def _table(self, r, tb, what, kind):
        """A threadblock's channel ids or remote buffer ids of one type, in the JSON's order."""
        key = (r, tb, what, kind)
        got = self._tables.get(key)
        if got is None:
            tbd = self.doc["gpus"][r]["threadblocks"][tb]
            if what == "channels":
                got = [i for ch in tbd["channels"] if ch["channel_type"] == kind
                       for i in ch["channel_ids"]]
            else:
                got = [i for ref in tbd.get("remote_buffer_refs", [])
                       if ref["access_channel_type"] == kind for i in ref["remote_buffer_ids"]]
            self._tables[key] = got
        return got

    def _tbchan(self, r, t, tb, c, kind):
        """Threadblock-local channel c → the rank's channel index."""
        return self._table(r, tb, "channels", kind)[c]

    def _remote(self, r, tb, bid, kind):
        rb = self.doc["gpus"][r]["remote_buffers"][self._table(r, tb, "remote", kind)[bid]]
        return rb["rank"], rb["type"]

    def _extent(self, rank, btype):
        """(storage, first cell, cells) of a buffer type on a rank, aliased as NCCL does."""
        g = self.doc["gpus"][rank]
        cin, cout = g["input_chunks"] * self.G, g["output_chunks"] * self.G
        scr = g["scratch_chunks"] * self.G * (2 if self.packets else 1) * (2 if self.double else 1)
        if btype == "s":
            return "s", 0, scr
        if not self.inplace:
            return ("in", 0, cin) if btype == "i" else ("out", 0, cout)
        if self.coll == "allgather":
            return ("out", rank * cin, cin) if btype == "i" else ("out", 0, cout)
        if self.coll == "reducescatter":
            return ("in", 0, cin) if btype == "i" else ("in", rank * cout, cout)
        return "out", 0, (cin if btype == "i" else cout)

    def cells(self, r, tb, op, ref, launch, size=None, doubled=False, scratch_half=True,
              force=None):
        """Memory keys one buffer reference covers."""
        if force is not None:
            owner, btype = r, force
        elif "buffer_id" in ref:
            kind = op.get("channel_type", "memory")
            owner, btype = self._remote(r, tb, ref["buffer_id"], kind)
        else:
            owner, btype = r, ref["type"]
        info = op.get("tbg_info", {"tb_id": 0, "tbg_size": 1})
        total = (ref["size"] if size is None else size) * self.G
        part = total // info["tbg_size"]
        first = ref["index"] * self.G + info["tb_id"] * part
        if doubled:
            first, part = 2 * first, 2 * part
        storage, base, extent = self._extent(owner, btype)
        remote_raw = "buffer_id" in ref and force is None and not doubled
        if storage == "s" and self.double and scratch_half and not remote_raw and launch % 2 == 0:
            first += extent // 2
        if first + part > extent:
            raise IndexError(f"{op['name']} out of range")
        return [(owner, storage, base + first + k) for k in range(part)]

    # ----------------------------------------------------------------- schedules
    def initial(self):
        st = {"mem": {}, "pc": {}, "launch": {r: 0 for r in range(self.n)},
              "inb": {}, "exp": {}, "fifo": {}, "out": {}, "sent": {}, "waited": {},
              "sem": {(g["id"], i): s["init_value"] for g in self.doc["gpus"]
                      for i, s in enumerate(g.get("semaphores", []))}}
        for r in range(self.n):
            self._begin(st, r)
        return st

    def _begin(self, st, r):
        st["launch"][r] += 1
        launch = st["launch"][r]
        storage, base, extent = self._extent(r, "i")
        for c in range(extent):
            st["mem"][(r, storage, base + c)] = _contrib(launch, r, c)
        for tb in self.blocks[r]:
            st["pc"][(r, tb)] = 0

    def _end(self, st, r):
        storage, base, extent = self._extent(r, "o")
        launch = st["launch"][r]
        st["out"][(r, launch)] = tuple(st["mem"].get((r, storage, base + c)) for c in range(extent))
        if launch < self.launches:
            self._begin(st, r)
        else:
            for tb in self.blocks[r]:
                st["pc"][(r, tb)] = None

    def actions(self, st):
        """Enabled actions: ('tb', rank, tb), ('proxy', channel key), ('end', rank)."""
        acts = []
        for (r, tb), pc in st["pc"].items():
            if pc is None:
                continue
            prog = self.programs[(r, tb)]
            if pc < len(prog) and self.enabled(st, r, tb, prog[pc]):
                acts.append(("tb", r, tb))
        for key, q in st["fifo"].items():
            if q:
                acts.append(("proxy", key))
        for r in range(self.n):
            keys = [k for k in st["pc"] if k[0] == r]
            if keys and all(st["pc"][k] is not None and st["pc"][k] >= len(self.programs[k])
                            for k in keys):
                acts.append(("end", r))
        return acts

    def finished(self, st):
        return all(pc is None for pc in st["pc"].values()) and not any(st["fifo"].values())

    def _pkt_ready(self, st, keys, launch):
        return all(isinstance(st["mem"].get(k), tuple) and len(st["mem"][k]) == 3
                   and st["mem"][k][0] == "pkt" and st["mem"][k][1] == launch for k in keys)

    def enabled(self, st, r, tb, op):
        name, launch = op["name"], st["launch"][r]
        if name in ("wait", "rlxwait"):
            t = op["channel_type"]
            for c in op["channel_ids"]:
                key = (r, t, self._tbchan(r, t, tb, c, t))
                if st["inb"].get(key, 0) < st["exp"].get(key, 0) + 1:
                    return False
            return True
        if name == "sem_acquire":
            need = {}
            for i in op["semaphore_ids"]:
                need[i] = need.get(i, 0) + 1
            return all(st["sem"][(r, i)] >= k for i, k in need.items())
        if name == "flush":
            for c in op["channel_ids"][:len(op.get("dst_buff", []))]:
                if st["fifo"].get((r, self._tbchan(r, "port", tb, c, "port"))):
                    return False
            return True
        if name in ("upkt", "rppkt"):
            return self._pkt_ready(st, self.cells(r, tb, op, op["src_buff"][0], launch,
                                                  doubled=True, force="s"), launch)
        if name in ("respkt", "repkt", "recspkt", "recpkt"):
            size = op["src_buff"][0]["size"]
            return all(self._pkt_ready(st, self.cells(r, tb, op, s, launch, size=size,
                                                      doubled=True, force="s"), launch)
                       for s in op["src_buff"][1:])
        return True

    def step(self, st, act):
        if act[0] == "end":
            self._end(st, act[1])
        elif act[0] == "proxy":
            self._deliver(st, act[1])
        else:
            _, r, tb = act
            op = self.programs[(r, tb)][st["pc"][(r, tb)]]
            self.execute(st, r, tb, op)
            st["pc"][(r, tb)] += 1

    def _deliver(self, st, key):
        item = st["fifo"][key].popleft()
        if item[0] == "signal":
            self._signal(st, item[1], item[2])
        else:
            _, src, dst = item
            vals = [st["mem"].get(k) for k in src]
            for k, v in zip(dst, vals):
                st["mem"][k] = v
            if dst:
                self.touched.add(("mem", dst[0][0]))
        self.touched.add(("fifo", key[0]))

    def _signal(self, st, chan, launch):
        mate = self.mate[chan]
        self.touched.add(("sig", mate[0]))
        st["inb"][mate] = st["inb"].get(mate, 0) + 1
        st["sent"][(mate, launch)] = st["sent"].get((mate, launch), 0) + 1

    def execute(self, st, r, tb, op):
        name, launch, mem = op["name"], st["launch"][r], st["mem"]
        t = op.get("channel_type")
        src, dst = op.get("src_buff", []), op.get("dst_buff", [])

        def get(keys):
            return [("?",) if isinstance(mem.get(k), tuple) and mem.get(k)[:1] == ("pkt",)
                    else mem.get(k) for k in keys]

        def put(keys, vals):
            for k, v in zip(keys, vals):
                mem[k] = v
            if keys:
                self.touched.update({("mem", keys[0][0]), ("mem", keys[-1][0])})

        def pkts(keys):
            return [mem[k][2] for k in keys[::2]]

        def as_pkts(vals):
            return [("pkt", launch, v) for v in vals for _ in (0, 1)]

        if name in ("signal", "rlxsignal") and t in ("memory", "port"):
            for c in op["channel_ids"]:
                chan = (r, t, self._tbchan(r, t, tb, c, t))
                if t == "port":
                    st["fifo"].setdefault((r, chan[2]), deque()).append(("signal", chan, launch))
                    self.queued.add((r, chan[2]))
                else:
                    self._signal(st, chan, launch)
        elif name in ("wait", "rlxwait") and t in ("memory", "port"):
            for c in op["channel_ids"]:
                key = (r, t, self._tbchan(r, t, tb, c, t))
                st["exp"][key] = st["exp"].get(key, 0) + 1
                st["waited"][(key, launch)] = st["waited"].get((key, launch), 0) + 1
        elif name == "copy":
            put(self.cells(r, tb, op, dst[0], launch),
                get(self.cells(r, tb, op, src[0], launch)))
        elif name in ("put", "pws", "pwsf"):
            for i, d in enumerate(dst):
                s = dict(src[i], type=src[0]["type"]) if t == "memory" else src[i]
                dk = self.cells(r, tb, op, d, launch, scratch_half=False)
                sk = self.cells(r, tb, op, s, launch, size=d["size"], scratch_half=(t == "memory"))
                if t == "memory":
                    put(dk, get(sk))
                else:
                    c = self._tbchan(r, "port", tb, op["channel_ids"][i], "port")
                    st["fifo"].setdefault((r, c), deque()).append(("put", sk, dk))
                    self.queued.add((r, c))
                    if name != "put":
                        st["fifo"][(r, c)].append(("signal", (r, "port", c), launch))
        elif name == "get":
            for s, d in zip(src, dst):
                remote = self.cells(r, tb, op, dict(s, index=d["index"]), launch)
                local = self.cells(r, tb, op, dict(d, index=s["index"], size=s["size"]), launch)
                put(local, get(remote))
        elif name in ("re", "res", "rre", "rres"):
            size = src[0]["size"]
            acc = get(self.cells(r, tb, op, src[0], launch))
            for s in src[1:]:
                acc = [_merge(a, b) for a, b in
                       zip(acc, get(self.cells(r, tb, op, s, launch, size=size)))]
            put(self.cells(r, tb, op, dst[0], launch), acc)
            if name in ("res", "rres"):
                for d in dst[1:]:
                    put(self.cells(r, tb, op, d, launch, size=size), acc)
        elif name == "ppkt":
            for i, d in enumerate(dst):
                vals = get(self.cells(r, tb, op, dict(src[i], type=src[0]["type"]), launch))
                put(self.cells(r, tb, op, d, launch, size=src[i]["size"], doubled=True),
                    as_pkts(vals))
        elif name == "rppkt":
            vals = pkts(self.cells(r, tb, op, src[0], launch, doubled=True, force="s"))
            for d in dst:
                put(self.cells(r, tb, op, d, launch, size=src[0]["size"], doubled=True),
                    as_pkts(vals))
        elif name in ("respkt", "repkt", "recspkt", "recpkt"):
            size = src[0]["size"]
            acc = get(self.cells(r, tb, op, src[0], launch))
            for s in src[1:]:
                acc = [_merge(a, b) for a, b in zip(acc, pkts(self.cells(
                    r, tb, op, s, launch, size=size, doubled=True, force="s")))]
            put(self.cells(r, tb, op, dst[0], launch, size=size), acc)
            rest = dst[1:]
            if name in ("recspkt", "recpkt"):
                put(self.cells(r, tb, op, dst[1], launch, size=size, doubled=True), as_pkts(acc))
                rest = dst[2:]
            if name in ("respkt", "recspkt"):
                for d in rest:
                    put(self.cells(r, tb, op, d, launch, size=size, doubled=True), as_pkts(acc))
        elif name == "upkt":
            vals = pkts(self.cells(r, tb, op, src[0], launch, doubled=True, force="s"))
            put(self.cells(r, tb, op, dst[0], launch, size=src[0]["size"]), vals)
        elif name == "cpkt":
            vals = get(self.cells(r, tb, op, src[0], launch))
            put(self.cells(r, tb, op, dst[0], launch, size=src[0]["size"], doubled=True),
                as_pkts(vals))
        elif name in ("sem_acquire", "sem_release"):
            for i in op["semaphore_ids"]:
                st["sem"][(r, i)] += -1 if name == "sem_acquire" else 1
            self.touched.add(("sem", r))
        elif name in ("nop", "flush", "signal", "wait", "rlxsignal", "rlxwait"):
            pass
        else:
            raise ValueError(f"the reference does not run {name}")

    # ----------------------------------------------------------------- verdicts
    def expected(self, rank, launch):
        g = self.doc["gpus"][rank]
        n, G = self.n, self.G
        cin, cout = g["input_chunks"] * G, g["output_chunks"] * G
        every = lambda c: tuple((launch, q, c) for q in range(n))     # noqa: E731
        if self.coll == "allreduce":
            return tuple(every(c) for c in range(cout))
        if self.coll == "allgather":
            return tuple(_contrib(launch, c // cin, c % cin) for c in range(cout))
        if self.coll == "reducescatter":
            return tuple(every(rank * cout + c) for c in range(cout))
        if self.coll == "broadcast":
            return tuple(_contrib(launch, self.root, c) for c in range(cout))
        raise ValueError(self.coll)

    def outcome(self, st, deadlock, steps):
        init = {(g["id"], i): s["init_value"] for g in self.doc["gpus"]
                for i, s in enumerate(g.get("semaphores", []))}
        unbalanced = any(st["sent"].get((k, L), 0) != st["waited"].get((k, L), 0)
                         for k in set(st["inb"]) | set(st["exp"]) for L in
                         range(1, self.launches + 1)) or (not deadlock and st["sem"] != init)
        return Outcome(deadlock, dict(st["out"]), unbalanced, steps)

    def correct(self, out: Outcome) -> bool:
        """No deadlock, balanced counters, and every rank's output after every launch equal
        to :meth:`expected` (a value object shared by many cells is compared once per cell
        position, so large allreduce plans stay linear)."""
        if out.deadlock or out.unbalanced:
            return False
        seen = {}
        for r in range(self.n):
            for launch in range(1, self.launches + 1):
                got = out.outputs.get((r, launch))
                if got is None:
                    return False
                want = self._expected_cells(r, launch)
                if len(got) != len(want):
                    return False
                for c, (v, w) in enumerate(zip(got, want)):
                    key = (id(v), w)
                    if key not in seen:
                        seen[key] = (v, self._value(w) == v)   # keep v alive: ids stay unique
                    if not seen[key][1]:
                        return False
        return True

    def _expected_cells(self, rank, launch):
        """What :meth:`expected` holds, as cheap descriptors ``(launch, ranks, input cell)``
        (ranks: one rank or "all")."""
        g = self.doc["gpus"][rank]
        cin, cout = g["input_chunks"] * self.G, g["output_chunks"] * self.G
        if self.coll == "allreduce":
            return [(launch, "all", c) for c in range(cout)]
        if self.coll == "allgather":
            return [(launch, c // cin, c % cin) for c in range(cout)]
        if self.coll == "reducescatter":
            return [(launch, "all", rank * cout + c) for c in range(cout)]
        if self.coll == "broadcast":
            return [(launch, self.root, c) for c in range(cout)]
        raise ValueError(self.coll)

    def _value(self, desc):
        launch, who, cell = desc
        if who == "all":
            return tuple((launch, q, cell) for q in range(self.n))
        return _contrib(launch, who, cell)

    def run_random(self, seed: int, lazy_proxy: float = 0.0, max_steps: int = 10 ** 9) -> Outcome:
        """One random schedule: each step draws uniformly among the enabled actions; with
        ``lazy_proxy`` p > 0 the proxies are drawn only with probability 1 - p while a
        threadblock or a kernel end can move (late deliveries expose races). Event-driven: a
        threadblock found blocked is parked until a step changes what it waits for on its rank
        (a signal's arrival, a semaphore, a drained FIFO, memory)."""
        rng = random.Random(seed)
        st = self.initial()
        blocks, proxies, ends = _Pool(), _Pool(), _Pool()
        parked = {}                         # (what, rank) → blocks waiting for it
        left = {}

        def start(r):                       # a launch of rank r began: its blocks may move
            keys = [(r, tb) for tb in self.blocks[r] if self.programs[(r, tb)]]
            left[r] = len(keys)
            for key in keys:
                blocks.add(key)
            if not keys and self.blocks[r]:
                ends.add(r)

        for r in range(self.n):
            start(r)
        steps = 0
        while True:
            if steps >= max_steps:
                raise RuntimeError("schedule too long")
            moving = len(blocks) + len(ends)
            total = moving + len(proxies)
            if total == 0:
                return self.outcome(st, not self.finished(st), steps)
            if moving and lazy_proxy and rng.random() < lazy_proxy:
                i = rng.randrange(moving)
            else:
                i = rng.randrange(total)
            self.touched, self.queued = set(), set()
            if i < len(blocks):
                r, tb = key = blocks.items[i]
                prog, pc = self.programs[key], st["pc"][key]
                if not self.enabled(st, r, tb, prog[pc]):
                    blocks.remove(key)
                    parked.setdefault((_BLOCKED_ON.get(prog[pc]["name"], "mem"), r),
                                      set()).add(key)
                    continue
                self.execute(st, r, tb, prog[pc])
                st["pc"][key] = pc + 1
                if pc + 1 == len(prog):
                    blocks.remove(key)
                    left[r] -= 1
                    if left[r] == 0:
                        ends.add(r)
            elif i < moving:
                r = ends.items[i - len(blocks)]
                ends.remove(r)
                launch = st["launch"][r]
                self._end(st, r)
                if st["launch"][r] > launch:          # the next launch began
                    start(r)
            else:
                key = proxies.items[i - moving]
                self._deliver(st, key)
                self.queued.add(key)
            for key in self.queued:
                if st["fifo"].get(key):
                    proxies.add(key)
                else:
                    proxies.discard(key)
            for what in self.touched:
                for key in parked.pop(what, ()):
                    blocks.add(key)
            steps += 1

    def explore(self, max_states: int = 200000) -> list[Outcome]:
        """Every reachable final state (exhaustive, with a cache of visited states)."""
        import copy
        seen, finals, stack = set(), [], [self.initial()]
        while stack:
            st = stack.pop()
            key = _freeze(st)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > max_states:
                raise RuntimeError("too many states for exhaustive exploration")
            acts = self.actions(st)
            if not acts:
                finals.append(self.outcome(st, not self.finished(st), 0))
                continue
            for act in acts:
                nxt = copy.deepcopy(st)
                self.step(nxt, act)
                stack.append(nxt)
        return finals


#: What a blocked op waits for (packet reads wait for memory, "mem").
_BLOCKED_ON = {"wait": "sig", "rlxwait": "sig", "sem_acquire": "sem", "flush": "fifo"}


class _Pool:
    """A set with uniform random access: items in a list, positions in a dict."""

    def __init__(self):
        self.items, self.pos = [], {}

    def __len__(self):
        return len(self.items)

    def add(self, x):
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def remove(self, x):
        i = self.pos.pop(x)
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def discard(self, x):
        if x in self.pos:
            self.remove(x)


def _freeze(st):
    return tuple((k, tuple(sorted(v.items(), key=repr)) if isinstance(v, dict) else v)
                 for k, v in sorted(st.items()) if k != "fifo") + (
        tuple(sorted((k, tuple(map(repr, q))) for k, q in st["fifo"].items())),)
