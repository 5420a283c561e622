"""The physical model a patch-panel robot or an optical circuit switch works with.

Every end of every node port is wired once and for all to its own panel port (the *layout*):
the transmit (TX) and receive (RX) ends of port p of node u sit on panel ``panel(u)`` at ports
2(i·d + p) and 2(i·d + p) + 1, i = u's place on its panel; nodes fill panels in consecutive
blocks. When N·2d exceeds the panel size the nodes spread over several panels, and every
ordered pair of panels (a, b) is joined by T_ab pre-wired *trunk* fibres: trunk t leaves panel
a at an ``out`` port and arrives at panel b at an ``in`` port (trunk ends follow the node ends
on each panel, pair by pair). A *configuration* of the fabric is
then only a list of cross-connects (panel, from_port, to_port), each a patch cord from a TX or
trunk-in port to an RX or trunk-out port of the same panel:

- a fibre u·p → w·q with both nodes on panel a is one cross-connect (a, TX(u,p), RX(w,q));
- across panels it is two: (a, TX(u,p), out_t(a→b)) and (b, in_t(a→b), RX(w,q)).

A duplex cable of the plan is its two fibres; a loopback one fibre from a node to itself.
Recabling is a list of cross-connects to remove and to add (a robot's work list); connections
the new plan keeps keep their trunks, so only changed fibres cost cross-connect moves.
Trunk counts: T for every ordered panel pair (given), or per pair the least that carries every
configuration asked for (the layout is sized with the plans it must carry); the panel count is
the least for which node ends and trunk ends fit the panel size.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from pathlib import Path

import numpy as np

from topofinder.compute.output import atomic_output
from topofinder.errors import TopofinderError
from topofinder.model.names import CsvWriter
from topofinder.cabling.patch_panel import DUPLEX, PatchPlan

LAYOUT_HEADER = ["panel", "panel_port", "role", "node", "port", "peer_panel", "peer_port"]
CONFIG_HEADER = ["panel", "from_port", "to_port", "src_node", "src_port", "dst_node",
                 "dst_port"]
MAX_PANELS = 4096


@dataclass(frozen=True)
class Layout:
    """``n`` nodes of ``d`` ports, ``per_panel`` nodes on each of ``panels`` panels of
    ``panel_size`` ports; ``trunks``: (a, b, T) = T trunk fibres from panel a to panel b."""

    n: int
    d: int
    panel_size: int
    panels: int
    per_panel: int
    trunks: tuple[tuple[int, int, int], ...]

    def __post_init__(self):
        ptr = [2 * self.per_panel * self.d] * self.panels
        out_base, in_base = {}, {}
        for a, b, t in self.trunks:
            out_base[(a, b)], in_base[(a, b)] = ptr[a], ptr[b]
            ptr[a] += t
            ptr[b] += t
        object.__setattr__(self, "_out", out_base)
        object.__setattr__(self, "_in", in_base)
        object.__setattr__(self, "_count", {(a, b): t for a, b, t in self.trunks})
        object.__setattr__(self, "ports_used", max(ptr))

    def panel_of(self, u: int) -> int:
        return u // self.per_panel

    def tx(self, u: int, p: int) -> int:
        return 2 * ((u % self.per_panel) * self.d + p)

    def rx(self, u: int, p: int) -> int:
        return self.tx(u, p) + 1

    def trunk_count(self, a: int, b: int) -> int:
        return self._count.get((a, b), 0)

    def trunk_out(self, a: int, b: int, t: int) -> int:
        """Port of panel a where trunk t towards panel b starts."""
        return self._out[(a, b)] + t

    def trunk_in(self, b: int, a: int, t: int) -> int:
        """Port of panel b where trunk t from panel a arrives."""
        return self._in[(a, b)] + t

    def write_csv(self, out) -> None:
        """Every wired panel port: ``tx``/``rx`` ends of (node, port), ``trunk-out``/
        ``trunk-in`` ends with the panel port at the other end of the trunk."""
        if isinstance(out, (str, Path)):
            with atomic_output(out, newline="") as f:
                return self.write_csv(f)
        rows = []
        for u in range(self.n):
            for p in range(self.d):
                rows.append([self.panel_of(u), self.tx(u, p), "tx", u, p, "", ""])
                rows.append([self.panel_of(u), self.rx(u, p), "rx", u, p, "", ""])
        for a, b, count in self.trunks:
            for t in range(count):
                rows.append([a, self.trunk_out(a, b, t), "trunk-out", "", "", b,
                             self.trunk_in(b, a, t)])
                rows.append([b, self.trunk_in(b, a, t), "trunk-in", "", "", a,
                             self.trunk_out(a, b, t)])
        w = CsvWriter(out)
        w.writerow(LAYOUT_HEADER)
        w.writerows(sorted(rows, key=lambda r: (r[0], r[1])))


def fibres(plan: PatchPlan) -> list[tuple[int, int, int, int]]:
    """The directional fibres (u, p, w, q) of a plan: TX of u·p to RX of w·q."""
    r = plan.rows.tolist()
    out = [(s[2], s[3], s[4], s[5]) for s in r]
    out += [(s[4], s[5], s[2], s[3]) for s, k in zip(r, plan.kinds.tolist()) if k == DUPLEX]
    return out


def _trunk_need(plans, per_panel: int) -> dict[tuple[int, int], int]:
    """Per ordered panel pair, the most fibres any of ``plans`` runs from one to the other."""
    need: dict[tuple[int, int], int] = {}
    for plan in plans:
        f = np.array(fibres(plan), np.int64).reshape(-1, 4)
        a, b = f[:, 0] // per_panel, f[:, 2] // per_panel
        cross = a != b
        pairs, counts = np.unique(np.stack([a[cross], b[cross]], 1), axis=0,
                                  return_counts=True)
        for (x, y), c in zip(pairs.tolist(), counts.tolist()):
            need[(x, y)] = max(need.get((x, y), 0), c)
    return need


def make_layout(n: int, d: int, panel_size: int, plans=(), trunks: int | None = None
                ) -> Layout:
    """The layout with the fewest panels of ``panel_size`` ports that holds every node end
    and the trunks: ``trunks`` per ordered panel pair, or per pair the most fibres any of
    ``plans`` runs between them."""
    if panel_size < 2 * d:
        raise TopofinderError(f"a panel of {panel_size} ports cannot hold the {2 * d} port "
                              f"ends of one node (d = {d})")
    panels = max(1, ceil(2 * n * d / panel_size))
    while panels <= min(n, MAX_PANELS):
        per = ceil(n / panels)
        used = ceil(n / per)
        if trunks is not None:
            pairs = tuple((a, b, trunks) for a in range(used) for b in range(used)
                          if a != b and trunks)
        else:
            pairs = tuple((a, b, t) for (a, b), t in sorted(_trunk_need(plans, per).items()))
        lay = Layout(n, d, panel_size, used, per, pairs)
        if lay.ports_used <= panel_size:
            return lay
        panels += 1
    raise TopofinderError(f"no layout of {n} nodes with {d} ports on panels of {panel_size} "
                          f"ports has room for the trunks (give fewer --trunks or bigger "
                          "panels)")


@dataclass(frozen=True)
class Configuration:
    """Cross-connects (panel, from_port, to_port) and the fibre (u, p, w, q) each carries
    (a cross-panel fibre appears in two cross-connects)."""

    layout: Layout
    connects: tuple[tuple[int, int, int, int, int, int, int], ...]

    def write_csv(self, out, header=CONFIG_HEADER, prefix=()) -> None:
        if isinstance(out, (str, Path)):
            with atomic_output(out, newline="") as f:
                return self.write_csv(f, header, prefix)
        w = CsvWriter(out)
        w.writerow(header)
        for c in self.connects:
            w.writerow(list(prefix) + list(c))

    def trace(self) -> list[tuple[int, int, int, int]]:
        """Follow every cord from a TX port through trunks to an RX port: the fibres the
        configuration really realises (independent of the fibre columns)."""
        lay = self.layout
        role: dict[tuple[int, int], tuple] = {}
        for u in range(lay.n):
            for p in range(lay.d):
                role[(lay.panel_of(u), lay.tx(u, p))] = ("tx", u, p)
                role[(lay.panel_of(u), lay.rx(u, p))] = ("rx", u, p)
        for a, b, count in lay.trunks:
            for t in range(count):
                role[(a, lay.trunk_out(a, b, t))] = ("out", b, lay.trunk_in(b, a, t))
        cord = {}
        for a, x, y, *_ in self.connects:
            if (a, x) in cord:
                raise AssertionError(f"panel {a} port {x} has two cords")
            cord[(a, x)] = y
        out = []
        for (a, x), y in cord.items():
            if role.get((a, x), ("",))[0] != "tx":
                continue
            _, u, p = role[(a, x)]
            here, port = a, y
            while role.get((here, port), ("",))[0] == "out":
                _, nxt, arrive = role[(here, port)]
                here, port = nxt, cord[(nxt, arrive)]
            kind, w, q = role[(here, port)]
            if kind != "rx":
                raise AssertionError("a cord path ends on a port that is not a receiver")
            out.append((u, p, w, q))
        return out


def configure(layout: Layout, plan: PatchPlan, previous: Configuration | None = None
              ) -> Configuration:
    """The cross-connects realising ``plan`` on ``layout``; fibres also in ``previous`` keep
    their trunks there (so they keep their cross-connects)."""
    lay = layout
    used: dict[tuple[int, int], set[int]] = {}
    kept_trunk: dict[tuple[int, int, int, int], list[int]] = {}
    if previous is not None:
        for a, x, y, u, p, w, q in previous.connects:
            if lay.panel_of(u) == a and lay.panel_of(w) != a:
                t = y - lay.trunk_out(a, lay.panel_of(w), 0)
                kept_trunk.setdefault((u, p, w, q), []).append(t)
    want = fibres(plan)
    assigned: dict[int, int] = {}
    for i, f in enumerate(want):             # first the fibres that keep their trunk
        if f in kept_trunk and kept_trunk[f]:
            t = kept_trunk[f].pop()
            ab = (lay.panel_of(f[0]), lay.panel_of(f[2]))
            if t not in used.setdefault(ab, set()):
                used[ab].add(t)
                assigned[i] = t
    connects = []
    for i, (u, p, w, q) in enumerate(want):
        a, b = lay.panel_of(u), lay.panel_of(w)
        if max(p, q) >= lay.d or max(u, w) >= lay.n:
            raise TopofinderError(f"fibre {u}.{p} -> {w}.{q} is outside the layout "
                                  f"({lay.n} nodes, {lay.d} ports)")
        if a == b:
            connects.append((a, lay.tx(u, p), lay.rx(w, q), u, p, w, q))
            continue
        t = assigned.get(i)
        if t is None:
            free = used.setdefault((a, b), set())
            t = next((k for k in range(lay.trunk_count(a, b)) if k not in free), None)
            if t is None:
                raise TopofinderError(f"panel {a} -> panel {b} needs more than the "
                                      f"{lay.trunk_count(a, b)} trunk fibres of the layout")
            free.add(t)
        connects.append((a, lay.tx(u, p), lay.trunk_out(a, b, t), u, p, w, q))
        connects.append((b, lay.trunk_in(b, a, t), lay.rx(w, q), u, p, w, q))
    return Configuration(lay, tuple(sorted(connects)))


def connect_changes(old: Configuration, new: Configuration):
    """(removed, added): cross-connects of ``old`` not in ``new`` and vice versa (by panel
    and ports)."""
    key = lambda c: c[:3]                                   # noqa: E731
    old_keys = {key(c) for c in old.connects}
    new_keys = {key(c) for c in new.connects}
    removed = [c for c in old.connects if key(c) not in new_keys]
    added = [c for c in new.connects if key(c) not in old_keys]
    return removed, added


def write_changes(removed, added, out) -> None:
    """CSV ``action,`` + :data:`CONFIG_HEADER`: cords to unplug (remove) and plug (add)."""
    if isinstance(out, (str, Path)):
        with atomic_output(out, newline="") as f:
            return write_changes(removed, added, f)
    w = CsvWriter(out)
    w.writerow(["action"] + CONFIG_HEADER)
    for action, rows in (("remove", removed), ("add", added)):
        for c in rows:
            w.writerow([action] + list(c))
