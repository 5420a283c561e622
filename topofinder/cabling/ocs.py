"""Optical circuit switch (OCS) tables of a cabling plan (docs/formats.md "OCS tables").

Every node port p of node u has a transmit end, on the OCS's A-side port ``k A`` with
k = u·d + p + 1, and a receive end, on the B-side port ``k B``. A fibre u→w of the plan (row
src port p, dst port q; a duplex cable is two fibres) is the cross-connect of ``kA`` to
``k'B``. Two writers:

- ``sonic-ocs``: SONiC CONFIG_DB JSON (SONiC doc/ocs/ocs_hld.md): ``OCS_PORT`` keyed by the
  simplex port id (``"1A"``, ``"64B"``) with ``label`` and ``state`` (``normal`` when the port
  carries a cross-connect, ``force_blocked`` otherwise) and ``OCS_CROSS_CONNECT`` keyed
  ``"1A-2B"`` with ``a_side`` and ``b_side``. It is the whole state (CONFIG_DB is declarative).
- ``netconf``: Polatis-style NETCONF ``<edit-config>`` payloads on the optical-switch model
  (``cross-connects/pair{ingress, egress}``; ingress port k, egress port N·d + k), one
  ``<config>`` per step: the cross-connects to delete (``nc:operation="delete"``) then those to
  create, each port's label in ``port{port-id, port-label}``.

Labels are ``NODE:PORT:tx`` / ``NODE:PORT:rx`` with NODE the plan's node name (checked by the
name policy, topofinder.model.names); JSON and XML escaping keep any name inert. Both formats
read back as a plan (:func:`parse_ocs`) for `check`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

import numpy as np

from topofinder.cabling.patch_panel import DUPLEX, LOOPBACK, SIMPLEX, PatchPlan
from topofinder.errors import TopofinderError
from topofinder.model.names import check_name

NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
OPSW = "http://www.polatis.com/yang/optical-switch"
STATES = ("normal", "force_blocked")


def fibres(plan: PatchPlan) -> list[tuple[int, int, int, int]]:
    """(src node, src port, dst node, dst port) of every fibre (duplex: both directions)."""
    out = []
    for r, k in zip(plan.rows.tolist(), plan.kinds.tolist()):
        out.append((r[2], r[3], r[4], r[5]))
        if k == DUPLEX:
            out.append((r[4], r[5], r[2], r[3]))
    return out


def ports_per_node(plans) -> int:
    return max([int(p.rows[:, [3, 5]].max()) + 1 for p in plans if p.num_rows] + [1])


def _labels(plan: PatchPlan, d: int) -> list[str]:
    """Port labels by A/B index k − 1 (the same for both sides but the tx/rx suffix)."""
    return [f"{check_name(plan.label(u), 'OCS table')}:{p}" for u in range(plan.n)
            for p in range(d)]


def _pairs(plan: PatchPlan, d: int) -> list[tuple[int, int]]:
    return sorted((u * d + p + 1, w * d + q + 1) for u, p, w, q in fibres(plan))


def sonic_config(plan: PatchPlan, d: int | None = None) -> dict:
    """CONFIG_DB tables ``OCS_PORT`` and ``OCS_CROSS_CONNECT`` of the plan (module doc)."""
    d = d or ports_per_node([plan])
    pairs = _pairs(plan, d)
    used_a, used_b = {a for a, _ in pairs}, {b for _, b in pairs}
    names = _labels(plan, d)
    ports = {}
    for k, name in enumerate(names, start=1):
        ports[f"{k}A"] = {"label": f"{name}:tx", "state": STATES[k not in used_a]}
        ports[f"{k}B"] = {"label": f"{name}:rx", "state": STATES[k not in used_b]}
    connects = {f"{a}A-{b}B": {"a_side": f"{a}A", "b_side": f"{b}B"} for a, b in pairs}
    return {"OCS_PORT": ports, "OCS_CROSS_CONNECT": connects}


def sonic_text(plan: PatchPlan, d: int | None = None) -> str:
    return json.dumps(sonic_config(plan, d), indent=2, ensure_ascii=True) + "\n"


def netconf_text(states: list[PatchPlan], d: int | None = None) -> str:
    """NETCONF edit-config payloads taking the switch from nothing through ``states`` (the
    plan as cabled, then after each wave): per step the deleted pairs, then the created."""
    d = d or ports_per_node(states)
    n = states[0].n
    names = _labels(states[0], d)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<edit-configs xmlns="{OPSW}" xmlns:nc="{NC}" nodes="{n}" ports-per-node="{d}">']
    before: list[tuple[int, int]] = []
    for step, plan in enumerate(states):
        now = _pairs(plan, d)
        gone, new = _minus(before, now), _minus(now, before)
        out.append(f'  <config step="{step}" xmlns="{NC}">')
        out.append(f'    <cross-connects xmlns="{OPSW}">')
        for a, b in gone:
            out.append(f'      <pair nc:operation="delete"><ingress>{a}</ingress>'
                       f'<egress>{n * d + b}</egress></pair>')
        for a, b in new:
            out.append(f'      <pair nc:operation="create"><ingress>{a}</ingress>'
                       f'<egress>{n * d + b}</egress></pair>')
        out.append('    </cross-connects>')
        if step == 0:
            for k, name in enumerate(names, start=1):
                for pid, side in ((k, "tx"), (n * d + k, "rx")):
                    out.append(f'    <port xmlns="{OPSW}"><port-id>{pid}</port-id><port-label>'
                               f'{escape(name + ":" + side)}</port-label></port>')
        out.append('  </config>')
        before = now
    out.append('</edit-configs>')
    return "\n".join(out) + "\n"


def _minus(a, b):
    """Multiset a − b of pairs."""
    left = {}
    for x in b:
        left[x] = left.get(x, 0) + 1
    out = []
    for x in a:
        if left.get(x, 0):
            left[x] -= 1
        else:
            out.append(x)
    return out


# ---- reading back ---------------------------------------------------------------------------
def _node_names(labels: dict[int, str], where: str) -> tuple[int, list[str]]:
    """(d, names by node) from the port labels ``NODE:PORT:side`` by A-side index k."""
    names: dict[int, str] = {}
    for k, label in labels.items():
        try:
            node, _port, _side = label.rsplit(":", 2)
        except ValueError:
            raise TopofinderError(f"{where}: port {k} label {ascii(label[:40])} is not "
                                  "NODE:PORT:tx|rx") from None
        names[k] = check_name(node, where)
    order = list(dict.fromkeys(names[k] for k in sorted(names)))
    if not order or len(names) % len(order):
        raise TopofinderError(f"{where}: the port labels do not give every node the same "
                              "number of ports")
    return len(names) // len(order), order


def _plan_of(pairs: list[tuple[int, int]], n: int, d: int, names: list[str],
             where: str) -> PatchPlan:
    rows, kinds = [], []
    for i, (a, b) in enumerate(pairs):
        if not (1 <= a <= n * d and 1 <= b <= n * d):
            raise TopofinderError(f"{where}: cross-connect {a}A-{b}B names a port outside "
                                  f"1..{n * d}")
        u, p = divmod(a - 1, d)
        w, q = divmod(b - 1, d)
        rows.append([0, 2 * i, u, p, w, q])
        kinds.append(LOOPBACK if u == w else SIMPLEX)
    labels = None if names == [str(i) for i in range(n)] else tuple(names)
    if labels is not None and len(set(labels)) != n:
        raise TopofinderError(f"{where}: two nodes have the same name")
    return PatchPlan(n, np.array(rows, np.int64).reshape(-1, 6), np.array(kinds, np.int8),
                     labels=labels)


def parse_sonic(text: str, where: str = "sonic-ocs") -> PatchPlan:
    """The plan a ``sonic-ocs`` CONFIG_DB document cables (one simplex row per
    cross-connect)."""
    try:
        doc = json.loads(text)
        ports, connects = doc["OCS_PORT"], doc["OCS_CROSS_CONNECT"]
        labels = {int(k[:-1]): v["label"] for k, v in ports.items() if k.endswith("A")}
        pairs = [(int(v["a_side"][:-1]), int(v["b_side"][:-1])) for v in connects.values()
                 if v["a_side"].endswith("A") and v["b_side"].endswith("B")]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TopofinderError(f"{where}: not a CONFIG_DB document with OCS_PORT (keys kA, "
                              "label) and OCS_CROSS_CONNECT (a_side kA, b_side kB)") from None
    if len(pairs) != len(connects):
        raise TopofinderError(f"{where}: a cross-connect must join an A-side to a B-side port")
    d, names = _node_names(labels, where)
    return _plan_of(pairs, len(names), d, names, where)


def parse_netconf(text: str, where: str = "netconf") -> PatchPlan:
    """The plan after every step of a ``netconf`` document (deletes then creates)."""
    try:
        root = ET.fromstring(text)
        n, d = int(root.get("nodes")), int(root.get("ports-per-node"))
    except (ET.ParseError, TypeError, ValueError):
        raise TopofinderError(f"{where}: not a topofinder netconf document (edit-configs with "
                              "nodes and ports-per-node)") from None
    labels, live = {}, []
    for cfg in root.findall(f"{{{NC}}}config"):
        for port in cfg.findall(f"{{{OPSW}}}port"):
            pid, label = port.findtext(f"{{{OPSW}}}port-id"), port.findtext(
                f"{{{OPSW}}}port-label")
            if pid is not None and pid.isdigit() and int(pid) <= n * d and label is not None:
                labels[int(pid)] = label
        for pair in cfg.iter(f"{{{OPSW}}}pair"):
            try:
                a = int(pair.findtext(f"{{{OPSW}}}ingress"))
                b = int(pair.findtext(f"{{{OPSW}}}egress")) - n * d
            except (TypeError, ValueError):
                raise TopofinderError(f"{where}: a pair needs integer ingress and egress") \
                    from None
            op = pair.get(f"{{{NC}}}operation")
            if op == "delete":
                if (a, b) not in live:
                    raise TopofinderError(f"{where}: deletes {a}->{n * d + b}, not connected")
                live.remove((a, b))
            else:
                live.append((a, b))
    got_d, names = _node_names(labels, where)
    if got_d != d or len(names) != n:
        raise TopofinderError(f"{where}: the port labels disagree with nodes={n}, "
                              f"ports-per-node={d}")
    return _plan_of(live, n, d, names, where)


def padded(plan: PatchPlan, n: int | None) -> PatchPlan:
    """``plan`` with nodes up to ``n`` (growth: new nodes without fibres, named by number)."""
    if n is None or n <= plan.n:
        return plan
    labels = None if plan.labels is None else plan.labels + tuple(
        str(i) for i in range(plan.n, n))
    return PatchPlan(n, plan.rows, plan.kinds, plan.panel_size, labels)


def parse_ocs(text: str, where: str) -> PatchPlan | None:
    """A plan from either OCS format, or None when ``text`` is neither."""
    head = text.lstrip()[:200]
    if head.startswith("{") and "OCS_PORT" in text[:4096]:
        return parse_sonic(text, where)
    if head.startswith("<") and "edit-configs" in head:
        return parse_netconf(text, where)
    return None
