"""Switch node removal by edge splitting (paper 002 §5.3, Algorithm 2/3, Theorems 5–6).

Input: the scaled fabric G({U·C(e)}) — integer tree slots per link on all nodes, switches
included — and k trees per root. Each switch w is removed by repeatedly replacing γ slots of
an ingress link e = (u, w) and of an egress link f = (w, t) by γ slots of a direct logical
link (u, t), where (Theorem 6, with D⃗_k the fabric plus a source s and arcs s→c of
capacity k to every compute node c, N = |V_c|)

    γ = min{ c(e), c(f), min_v F(u, w; D̂_(u,w),v) − N·k, min_v F(w, t; D̂_(w,t),v) − N·k },

D̂_(u,w),v = D⃗_k plus ∞ arcs u→s, u→t, v→w and D̂_(w,t),v = D⃗_k plus ∞ arcs w→s, u→t,
v→t: the min cuts of these networks are exactly the s–v cuts whose exiting capacity the
split lowers (u, t ∈ S ∌ w, or w ∈ S ∌ u, t), so min_v F(s, v) ≥ N·k survives and the
compute-only graph G* keeps k spanning out-trees per root at the same optimum. Every slot of
a logical link remembers the physical path (through switches) it stands for, so trees
packed on G* map back to routes in G (the routing table of Algorithm 3).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from topofinder.errors import TopofinderError


class _Paths:
    """A multiset of physical paths (tuples of node ids) with integer slot counts."""

    __slots__ = ("items",)

    def __init__(self, items=None):
        self.items: list[list] = items or []          # [[path, count], ...]

    @property
    def total(self) -> int:
        return sum(c for _, c in self.items)

    def add(self, path: tuple, count: int) -> None:
        for item in self.items:
            if item[0] == path:
                item[1] += count
                return
        self.items.append([path, count])

    def take(self, count: int) -> list[tuple[tuple, int]]:
        """Remove ``count`` slots (first paths first); returns [(path, slots), ...]."""
        out = []
        while count:
            path, have = self.items[-1]
            used = min(have, count)
            out.append((path, used))
            count -= used
            if used == have:
                self.items.pop()
            else:
                self.items[-1][1] -= used
        return out


def _pair_up(a: list[tuple[tuple, int]], b: list[tuple[tuple, int]]):
    """Concatenate γ ingress path slots with γ egress path slots one to one."""
    out, i, j = [], 0, 0
    a, b = [list(x) for x in a], [list(x) for x in b]
    while i < len(a) and j < len(b):
        used = min(a[i][1], b[j][1])
        out.append((a[i][0] + b[j][0][1:], used))
        a[i][1] -= used
        b[j][1] -= used
        i += a[i][1] == 0
        j += b[j][1] == 0
    return out


# Switches with at most this many ingress links get the spreading first pass of
# _Splitter.remove (NVSwitch boxes: a star G*, trees of height 1–2); wider switches (a shared
# IB switch) split as Algorithm 2 does, whose sparser G* keeps the number of trees small.
SPREAD_MAX_PORTS = 16


class _Splitter:
    """Current graph as {(x, y): _Paths}; γ of Theorem 6 by 2·N max-flows per pair."""

    def __init__(self, n: int, compute: np.ndarray, links: dict[tuple[int, int], int], k: int):
        self.n, self.k = n, k
        self.compute = [int(c) for c in compute]
        self.need = len(self.compute) * k
        self.edges: dict[tuple[int, int], _Paths] = {}
        for (x, y), c in links.items():
            if c > 0 and x != y:
                self.edges[(x, y)] = _Paths([[(x, y), int(c)]])
        self.maxflows = 0

    def _cap(self, e) -> int:
        p = self.edges.get(e)
        return 0 if p is None else p.total

    def _network(self):
        """D⃗_k as arrays (tails, heads, caps): fabric arcs and s = n → compute nodes."""
        keys = list(self.edges)
        tails = [x for x, _ in keys] + [self.n] * len(self.compute)
        heads = [y for _, y in keys] + self.compute
        caps = [self.edges[e].total for e in keys] + [self.k] * len(self.compute)
        return tails, heads, caps

    def _min_flow(self, base, src: int, dst: int, fixed, v_arc_head) -> int:
        """min over compute v of F(src, dst) in D⃗_k + ``fixed`` ∞ arcs + ∞ arc v→head,
        stopping early once it reaches N·k (no slot can then be split)."""
        tails, heads, caps = base
        inf = sum(caps) + 1
        from ortools.graph.python import max_flow   # heavy; loaded on first use
        mf = max_flow.SimpleMaxFlow()
        mf.add_arcs_with_capacity(np.array(tails + [a for a, _ in fixed] + self.compute, np.int32),
                                  np.array(heads + [b for _, b in fixed]
                                           + [v_arc_head] * len(self.compute), np.int32),
                                  np.array(caps + [inf] * len(fixed) + [0] * len(self.compute),
                                           np.int64))
        first = len(tails) + len(fixed)
        best = None
        for i in range(len(self.compute)):
            mf.set_arc_capacity(first + i, inf)
            if mf.solve(src, dst) != mf.OPTIMAL:
                raise RuntimeError("max-flow failed while splitting switch edges")
            self.maxflows += 1
            mf.set_arc_capacity(first + i, 0)
            flow = mf.optimal_flow()
            best = flow if best is None else min(best, flow)
            if best - self.need <= 0:
                break
        return best

    def gamma(self, u: int, w: int, t: int) -> int:
        """Theorem 6: the most slots of (u, w), (w, t) that can become (u, t)."""
        g = min(self._cap((u, w)), self._cap((w, t)))
        if g <= 0:
            return 0
        base = self._network()
        s = self.n
        g = min(g, self._min_flow(base, u, w, [(u, s), (u, t)], w) - self.need)
        if g <= 0:
            return 0
        g = min(g, self._min_flow(base, w, t, [(w, s), (u, t)], t) - self.need)
        return max(g, 0)

    def split(self, u: int, w: int, t: int, g: int) -> None:
        ins = self.edges[(u, w)].take(g)
        outs = self.edges[(w, t)].take(g)
        for e in ((u, w), (w, t)):
            if self.edges[e].total == 0:
                del self.edges[e]
        if u == t:
            return                           # a loop carries nothing; its slots are dropped
        target = self.edges.setdefault((u, t), _Paths())
        for path, c in _pair_up(ins, outs):
            target.add(path, c)

    def remove(self, w: int, spread: bool = True) -> None:
        """Algorithm 2 for switch w: every egress slot paired with ingress slots. With
        ``spread`` a first pass splits each (ingress, egress) pair by at most an even share
        of the egress link (any amount ≤ γ keeps Theorem 6's guarantee), so the logical
        links fan out over many compute pairs (denser G*, lower trees); the second pass is
        Algorithm 2 as written and removes what is left."""
        outs = [e for e in self.edges if e[0] == w]
        ins = [e for e in self.edges if e[1] == w]
        if spread and len(ins) <= SPREAD_MAX_PORTS:
            share = {f: -(-self._cap(f) // max(1, len(ins) - 1)) for f in outs}
            for k in range(len(ins)):                       # rotate: f_j pairs e_{j+k}
                for j, f in enumerate(outs):
                    e = ins[(j + k) % len(ins)]
                    if e not in self.edges or f not in self.edges or e[0] == f[1]:
                        continue
                    g = min(self.gamma(e[0], w, f[1]), share[f])
                    if g:
                        self.split(e[0], w, f[1], g)
        for f in outs:
            t = f[1]
            for e in [e for e in self.edges if e[1] == w]:
                if (w, t) not in self.edges:
                    break
                if e not in self.edges:
                    continue
                g = self.gamma(e[0], w, t)
                if g:
                    self.split(e[0], w, t, g)
            if (w, t) in self.edges:
                raise TopofinderError(f"edge splitting could not remove switch {w}: its "
                                      f"link to {t} keeps {self._cap((w, t))} slots (the "
                                      "fabric must have equal ingress and egress bandwidth "
                                      "at every node, paper 002 App. E.2)")
        if any(w in e for e in self.edges):
            raise TopofinderError(f"edge splitting left links at switch {w}: its ingress "
                                  "and egress bandwidth differ (paper 002 App. E.2)")


def split_switches(n: int, compute, switches, links: dict[tuple[int, int], int], k: int):
    """Remove ``switches`` from the slot graph ``links`` {(x, y): slots} (paper 002 Alg. 3).

    Returns (logical, maxflows): logical = {(u, t): [(path, slots), ...]} between compute
    nodes, each path the physical node sequence u → switches → t, slots summing to the
    capacity of logical link (u, t) in G*."""
    inflow, outflow = defaultdict(int), defaultdict(int)
    for (x, y), c in links.items():
        if x != y:
            outflow[x] += c
            inflow[y] += c
    for v in range(n):
        if inflow[v] != outflow[v]:
            raise TopofinderError(f"edge splitting needs an Eulerian fabric (equal ingress and "
                                  f"egress bandwidth at every node, paper 002 Thm 4–6); node "
                                  f"{v} has {inflow[v]} in and {outflow[v]} out")
    sp = _Splitter(n, np.asarray(compute), links, k)
    for w in switches:
        sp.remove(int(w))
    logical = {e: [(tuple(p), c) for p, c in paths.items] for e, paths in sp.edges.items()}
    return logical, sp.maxflows
