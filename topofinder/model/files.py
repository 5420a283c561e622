"""Topology files (docs/expressions.md, docs/formats.md): edge list, node-link JSON (networkx),
GraphML.

Edge list: one ``u v [capacity]`` line per arc u→v (a k-fold multi-arc is k lines, a duplex
link two lines), ``#`` starts a comment; capacity is an integer in units of the base link
bandwidth b (default 1), a cost ``c=1/k`` (paper 003's time per unit message: capacity k), or
a physical bandwidth such as ``300GB/s`` or ``200Gbps`` (then every capacity must carry a
unit); a line ``switch X [Y ...]`` marks switch nodes (paper 002 V_s);
a line ``node_bandwidth B`` states the per-node send and receive cap of the ``node`` port model
(one-root collectives; B a positive integer, decimal or ``p/q`` in capacity units, or with a
unit such as ``400GB/s`` when the capacities carry units). JSON is networkx's node-link format
of a MultiDiGraph with a ``capacity`` per edge, ``"switch": true`` on switch nodes and the cap
as the graph attribute ``node_bandwidth``; GraphML the same graph in GraphML. Files read may use any
node names (host names such as ``gpu-00``); nodes are numbered 0..N−1 (the ranks): by an
explicit rank when the file gives one (``# node RANK NAME`` lines of an edge list, a ``rank``
attribute on every JSON/GraphML node), else integer names in increasing order, others in order
of appearance; the names are kept as :attr:`Topology.labels`. Written files carry the same
name ↔ rank map, so a file written and read back has the same ranks and names.

Undirected input: ``undirected=True`` reads every line / edge as one cable, i.e. a pair of
arcs (``networkx.write_edgelist`` writes one line per undirected edge). When an edge list read
as arcs does not meet what the command needs (model/needs.py: reachability from the root for
broadcast/scatter, to it for reduce/gather, else strong connectivity) but would as cables,
reading stops with a message that names a node that cannot be reached and suggests
``--undirected``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from fractions import Fraction
from typing import TYPE_CHECKING

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.model.inputs import read_input, read_json
from topofinder.model.names import check_name
from topofinder.model.needs import Need
from topofinder.model.topology import Topology

if TYPE_CHECKING:           # networkx loads only for the JSON and GraphML formats
    import networkx as nx

FORMATS = ("edgelist", "json", "graphml")
#: Largest link capacity read (in units of the base link bandwidth b): sums over N·d arcs stay
#: far inside int64.
MAX_CAPACITY = 10 ** 9
#: Largest topology file read (bytes; the largest topology, N = 10^6 nodes of degree 16, is
#: smaller).
MAX_FILE_BYTES = 512 << 20


def _labelled_networkx(topo: Topology) -> nx.MultiDiGraph:
    """to_networkx with nodes named by their labels and a ``rank`` attribute on each."""
    import networkx as nx
    g = topo.to_networkx()
    if topo.labels is None:
        return g
    nx.set_node_attributes(g, {i: i for i in range(topo.n)}, "rank")
    return nx.relabel_nodes(g, dict(enumerate(topo.labels)))


def topology_text(topo: Topology, fmt: str) -> str:
    """The file contents of ``topo`` in ``fmt`` (one of FORMATS)."""
    if fmt == "edgelist":
        unit = topo.capacity_unit
        head = (f"# topofinder topology {topo.expr}: N = {topo.n}, {topo.num_arcs} arcs\n"
                f"# one line per arc: u v{' capacity' if topo.heterogeneous or unit else ''}\n")
        names = [str(i) for i in range(topo.n)]
        if topo.labels is not None:
            names = [_token(x) for x in topo.labels]
            head += "".join(f"# node {i} {x}\n" for i, x in enumerate(names))
        if topo.has_switches:
            head += "switch " + " ".join(names[s] for s in topo.switches.tolist()) + "\n"
        if topo.node_cap is not None:
            head += f"node_bandwidth {topo.node_cap}{unit or ''}\n"
        src = [names[u] for u in topo.src.tolist()]
        dst = [names[w] for w in topo.dst.tolist()]
        if topo.heterogeneous or unit:
            rows = zip(src, dst, topo.arc_capacity.tolist())
            return head + "".join(f"{u} {w} {c}{unit or ''}\n" for u, w, c in rows)
        return head + "".join(f"{u} {w}\n" for u, w in zip(src, dst))
    if fmt == "json":
        import networkx as nx
        data = nx.node_link_data(_labelled_networkx(topo), edges="edges")
        return json.dumps(data) + "\n"
    if fmt == "graphml":
        import networkx as nx
        return "\n".join(nx.generate_graphml(_labelled_networkx(topo))) + "\n"
    raise TopofinderError(f"unknown topology format {fmt!r}; accepted: {', '.join(FORMATS)}")


def write_topology(topo: Topology, fmt: str, path: str | None) -> None:
    """Write ``topo`` as ``fmt`` to ``path`` (stdout if None). The file appears complete or
    not at all: it is written to a temporary file beside it and renamed into place."""
    write_text(path, topology_text(topo, fmt))


def read_topology(path: str, undirected: bool | None = None, need: Need | None = None
                  ) -> Topology:
    """Read an edge list, node-link JSON or GraphML file (recognised by its first character:
    ``{`` JSON, ``<`` GraphML, else edge list). The topology's expr is the path.
    ``undirected``: True reads every edge as one cable (two arcs); False as the file says
    (arcs for an edge list); None as False, but an edge list that meets ``need`` only when
    read as cables is refused with a hint (module doc). ``need`` (model/needs.py; default
    strong connectivity): a one-root collective's need is checked here, a one-line error
    naming an unreachable node and the collective."""
    need = need or Need()
    text = read_input(path, "topology file", MAX_FILE_BYTES)
    head = text.lstrip()[:1]
    if head == "{":
        topo = _read_json(path, text, undirected)
    elif head == "<":
        topo = _read_graphml(path, text, undirected)
    else:
        topo = _read_edgelist(path, text, undirected, need)
    if need.collective is not None:
        gap = need.gap(topo)
        if gap is not None:
            raise TopofinderError(f"{path}: {gap}")
    return topo


# bandwidth units accepted on capacities: prefix (GB/s per unit) and bytes (B) or bits (b)
_PREFIX = {"T": Fraction(1000), "G": Fraction(1), "M": Fraction(1, 1000)}
_KIND = {"Bps": Fraction(1), "bps": Fraction(1, 8)}
_CAPACITY = re.compile(r"(\d{1,30}(?:\.\d{1,30})?)\s*([A-Za-z]+/?[A-Za-z]*)?")
# output units tried in turn: capacities become integers in the first that fits
_OUTPUT_UNITS = (("GB/s", Fraction(1)), ("Gbps", Fraction(1, 8)), ("MB/s", Fraction(1, 1000)),
                 ("Mbps", Fraction(1, 8000)))


_COST = re.compile(r"(?:c|cost)=(\d{1,30})(?:/(\d{1,30}))?", re.IGNORECASE)


def _from_cost(token, where: str) -> int:
    """The capacity 1/c of a cost c (paper 003's c_{j,k}: time per unit message) given as
    'c=1/2' or 'cost=1/2' on an edge-list line, or as a ``cost`` attribute (a number or a
    string '1/2'); 1/c must be a positive integer."""
    if isinstance(token, bool) or not isinstance(token, (int, float, str)):
        raise TopofinderError(f"{where}: cost must be a number such as 1/2, got {token!r}")
    text = str(token) if isinstance(token, str) else f"c={Fraction(token)}"
    m = _COST.fullmatch(text.strip() if text.lower().startswith("c") else f"c={text.strip()}")
    if m is None:
        raise TopofinderError(f"{where}: cost must be 1/k for a positive integer k (e.g. "
                              f"c=1/2), got {str(token)[:40]!r}")
    num, den = int(m.group(1)), int(m.group(2) or 1)
    if num == 0 or den == 0 or den % num:
        raise TopofinderError(f"{where}: cost {num}/{den} is not 1/k for a positive integer k "
                              f"(capacities 1/c are integers in units of b; scale the costs)")
    return _capacity(den // num, where)


def _capacity(token, where: str):
    """A capacity: positive int (units of b) or a Fraction of GB/s from '300GB/s', '200Gbps';
    'c=1/k' (a cost) is capacity k."""
    if isinstance(token, str) and _COST.fullmatch(token.strip()) is not None:
        return _from_cost(token, where)
    if isinstance(token, int) and not isinstance(token, bool):
        if not 1 <= token <= MAX_CAPACITY:
            raise TopofinderError(f"{where}: capacity must be an integer in 1..{MAX_CAPACITY}, "
                                  f"got {token!r}")
        return token
    m = _CAPACITY.fullmatch(str(token).strip()) if isinstance(token, str) else None
    if m is None:
        raise TopofinderError(f"{where}: capacity must be a positive integer or a bandwidth "
                              f"such as '300GB/s' or '200Gbps', got {token!r}")
    value, unit = Fraction(m.group(1)), m.group(2)
    if unit is None:
        if value.denominator != 1 or not 1 <= value <= MAX_CAPACITY:
            raise TopofinderError(f"{where}: capacity must be an integer in 1..{MAX_CAPACITY}, "
                                  f"got {token!r}")
        return int(value)
    key = unit.replace("/s", "ps")         # GB/s → GBps (bytes), Gb/s → Gbps (bits)
    if key[:1] not in _PREFIX or key[1:] not in _KIND or value <= 0:
        raise TopofinderError(f"{where}: unknown bandwidth {token!r}; units accepted: GB/s, "
                              f"Gbps (Gb/s), TB/s, Tbps, MB/s, Mbps")
    return value * _PREFIX[key[:1]] * _KIND[key[1:]]


_NODE_CAP = re.compile(r"(\d{1,30}(?:\.\d{1,30})?|\d{1,30}/0*[1-9]\d{0,29})"
                       r"\s*([A-Za-z]+/?[A-Za-z]*)?")


def _node_cap(token, where: str) -> tuple[Fraction, bool]:
    """A node bandwidth cap: (value, False) in capacity units from an int, '3', '1.5' or
    '3/2', or (value in GB/s, True) from a bandwidth such as '400GB/s' or '3/2Tbps'."""
    bad = TopofinderError(f"{where}: node_bandwidth must be a positive number (e.g. 4, 1.5, "
                          f"3/2) or a bandwidth such as '400GB/s', got {str(token)[:40]!r}")
    if isinstance(token, bool) or not isinstance(token, (int, str)):
        raise bad
    m = _NODE_CAP.fullmatch(str(token).strip())
    if m is None:
        raise bad
    value, unit = Fraction(m.group(1)), m.group(2)
    if value <= 0 or value > MAX_CAPACITY ** 2:
        raise bad
    if unit is None:
        return value, False
    key = unit.replace("/s", "ps")
    if key[:1] not in _PREFIX or key[1:] not in _KIND:
        raise bad
    return value * _PREFIX[key[:1]] * _KIND[key[1:]], True


def _cap_in_units(path: str, node_cap, unit: str | None, physical: str | None):
    """The node cap in the topology's capacity units (None if the file states none): a
    bandwidth with a unit is converted into the capacities' unit; a bare number next to
    capacities written with units is refused (its unit would be ambiguous)."""
    if node_cap is None:
        return None
    value, has_unit = node_cap
    if has_unit:
        if unit is None:
            raise TopofinderError(f"{path}: node_bandwidth carries a unit but the capacities "
                                  f"do not; give both units or neither")
        return value / dict(_OUTPUT_UNITS)[unit]
    if physical is not None:
        raise TopofinderError(f"{path}: the capacities carry bandwidth units; give "
                              f"node_bandwidth one too (e.g. 400GB/s)")
    return value


def _line_of(text: str, needle: str) -> int | str:
    """The 1-based line of the first ``needle`` in ``text`` ('?' if absent)."""
    at = text.find(needle)
    return "?" if at < 0 else text.count("\n", 0, at) + 1


def _unify_capacities(path: str, arcs: list) -> tuple[list, str | None]:
    """Arcs with integer capacities: unitless as given, or all converted to the coarsest of
    GB/s, Gbps, MB/s, Mbps in which every physical bandwidth is an integer."""
    physical = [isinstance(c, Fraction) for _, _, c in arcs]
    if not any(physical):
        return arcs, None
    if not all(physical):
        raise TopofinderError(f"{path}: some capacities carry a bandwidth unit and others do "
                              f"not; give every capacity a unit (e.g. 300GB/s) or none")
    for name, size in _OUTPUT_UNITS:
        scaled = [c / size for _, _, c in arcs]
        if all(x.denominator == 1 for x in scaled):
            if max(scaled) > MAX_CAPACITY:
                raise TopofinderError(f"{path}: a capacity exceeds {MAX_CAPACITY} {name}")
            return [(u, w, int(x)) for (u, w, _), x in zip(arcs, scaled)], name
    raise TopofinderError(f"{path}: bandwidths finer than 1 Mbps are not supported")


#: Words with a meaning in the first field of an edge-list line.
_KEYWORDS = ("switch", "node_bandwidth")
_PLAIN = re.compile(r'[^\s#"][^\s#]*')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def _token(name: str) -> str:
    """A node name as an edge-list field: as it is when it is one plain word, else (spaces,
    '#', a leading '"', a keyword such as ``switch``) a JSON string literal."""
    if _PLAIN.fullmatch(name) and name.lower() not in _KEYWORDS:
        return name
    return json.dumps(name, ensure_ascii=False)


def _fields(line: str, where: str) -> tuple[list[str], bool]:
    """The fields of an edge-list line up to a '#' comment (a field starting with '"' is a
    JSON string literal, so it may hold spaces and '#'), and whether the first was quoted."""
    fields, quoted, at = [], False, 0
    while True:
        while at < len(line) and line[at].isspace():
            at += 1
        if at == len(line) or line[at] == "#":
            return fields, quoted
        m = (_QUOTED if line[at] == '"' else _PLAIN).match(line, at)
        if m is None:
            raise TopofinderError(f"{where}: unterminated quoted name")
        if line[at] == '"':
            try:
                fields.append(json.loads(m.group()))
            except ValueError:
                raise TopofinderError(f"{where}: bad escape in a quoted name") from None
            quoted = quoted or not fields[1:]
        else:
            fields.append(m.group())
        at = m.end()
        if at < len(line) and not line[at].isspace() and line[at] != "#":
            raise TopofinderError(f"{where}: a quoted name must be followed by a space")


def _directive(line: str, where: str) -> tuple[int, str] | None:
    """(rank, name) of a '# node RANK NAME' line (NAME one field, maybe quoted), else None."""
    m = re.fullmatch(r"\s*#\s*node\s+(\d+)\s+(.*?)\s*", line)
    if m is None:
        return None
    try:
        fields, _ = _fields(m.group(2), where)
    except TopofinderError:
        return None
    return (int(m.group(1)), fields[0]) if len(fields) == 1 else None


def _read_edgelist(path: str, text: str, undirected: bool | None, need: Need) -> Topology:
    arcs, declared, switches, cap_b = [], {}, [], None
    for lineno, line in enumerate(text.splitlines(), 1):
        directive = _directive(line, f"{path}:{lineno}")
        if directive:
            rank, name = directive
            if rank in declared:
                raise TopofinderError(f"{path}:{lineno}: rank {rank} is declared twice")
            declared[rank] = name
            continue
        fields, quoted = _fields(line, f"{path}:{lineno}")
        if not fields:
            continue
        if fields[0].lower() == "switch" and not quoted:
            if len(fields) < 2:
                raise TopofinderError(f"{path}:{lineno}: 'switch' needs at least one node")
            switches += fields[1:]
            continue
        if fields[0].lower() == "node_bandwidth" and not quoted:
            if len(fields) != 2 or cap_b is not None:
                raise TopofinderError(f"{path}:{lineno}: expected one 'node_bandwidth B' line "
                                      f"with one value")
            cap_b = _node_cap(fields[1], f"{path}:{lineno}")
            continue
        if len(fields) not in (2, 3):
            raise TopofinderError(f"{path}:{lineno}: expected 'u v [capacity]' or "
                                  f"'switch X ...', got {len(fields)} fields")
        cap = _capacity(fields[2], f"{path}:{lineno}") if len(fields) == 3 else 1
        arcs.append((fields[0], fields[1], cap))
    if not arcs:
        raise TopofinderError(f"{path}: no arcs found (expected lines 'u v [capacity]')")
    if declared:
        if sorted(declared) != list(range(len(declared))):
            raise TopofinderError(f"{path}: the '# node RANK NAME' lines must number the nodes "
                                  f"0..{len(declared) - 1}")
        labels, ranked = [declared[r] for r in range(len(declared))], True
    else:
        labels, ranked = list(dict.fromkeys(x for u, w, _ in arcs for x in (u, w))), False
    missing = [x for x in switches if x not in set(labels)]
    if missing:
        raise TopofinderError(f"{path}: switch {missing[0]!r} appears on no arc")
    if undirected:
        return _topology(path, labels, arcs, directed=False, ranked=ranked, switches=switches,
                         node_cap=cap_b)
    topo = _topology(path, labels, arcs, directed=True, ranked=ranked, switches=switches,
                     node_cap=cap_b)
    gap = need.gap(topo) if undirected is None else None
    if gap is not None:
        cables = _topology(path, labels, arcs, directed=False, ranked=ranked,
                           switches=switches, node_cap=cap_b)
        if need.gap(cables) is None:
            raise TopofinderError(
                f"{path}: read as one arc per line (u -> v), {gap}; read as one undirected "
                f"cable per line (networkx.write_edgelist) it would: pass --undirected to "
                f"read it as cables")
    return topo


def _edge_capacity(attrs: dict, where: str):
    """A JSON/GraphML edge's capacity: its ``capacity``, else 1/``cost``, else 1."""
    if "capacity" in attrs and "cost" in attrs:
        raise TopofinderError(f"{where}: give a capacity or a cost, not both")
    if "cost" in attrs:
        return _from_cost(attrs["cost"], where)
    return _capacity(attrs.get("capacity", 1), where)


def _ranked(path: str, nodes: list) -> bool:
    """True when every node carries an integer ``rank`` attribute and they number 0..N−1."""
    ranks = [node.get("rank") if isinstance(node, dict) else None for node in nodes]
    if not ranks or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        return False
    if sorted(ranks) != list(range(len(ranks))):
        raise TopofinderError(f"{path}: the nodes' 'rank' attributes must number them "
                              f"0..{len(ranks) - 1}")
    return True


def _read_json(path: str, text: str, undirected: bool | None = None) -> Topology:
    data = read_json(text, path)
    key = "edges" if isinstance(data, dict) and "edges" in data else "links"
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) \
            or not isinstance(data.get(key), list):
        raise TopofinderError(f"{path}: not a node-link topology (expected a JSON object with "
                              f"'nodes' and 'edges' lists)")
    labels, arcs, switches = [], [], []
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise TopofinderError(f"{path}: nodes[{i}] has no 'id'")
        if isinstance(node["id"], bool) or not isinstance(node["id"], (str, int)):
            raise TopofinderError(f"{path}: nodes[{i}] has the id {ascii(node['id'])[:40]}; "
                                  f"a node id is a string or an integer")
        labels.append(node["id"])
        if _is_switch(node):
            switches.append(node["id"])
    ranked = _ranked(path, data["nodes"])
    if ranked:
        labels = [node["id"] for node in sorted(data["nodes"], key=lambda x: x["rank"])]
    for i, edge in enumerate(data[key]):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise TopofinderError(f"{path}: {key}[{i}] needs 'source' and 'target'")
        cap = _edge_capacity(edge, f"{path}: {key}[{i}]")
        arcs.append((edge["source"], edge["target"], cap))
    graph = data.get("graph") if isinstance(data.get("graph"), dict) else {}
    cap_b = graph.get("node_bandwidth")
    if cap_b is not None:
        line = _line_of(text, '"node_bandwidth"')
        cap_b = _node_cap(cap_b, f"{path}:{line}")
    return _topology(path, labels, arcs, ranked=ranked,
                     directed=not undirected and bool(data.get("directed", True)),
                     switches=switches, unit=graph.get("capacity_unit"), node_cap=cap_b)


def _is_switch(attrs: dict) -> bool:
    """A node attribute marks a switch: ``switch`` true (bool, 1, 'true') or ``type`` 'switch'."""
    flag = attrs.get("switch", False)
    if isinstance(flag, str):
        flag = flag.strip().lower() in ("1", "true", "yes")
    return bool(flag) or str(attrs.get("type", "")).lower() == "switch"


def _read_graphml(path: str, text: str, undirected: bool | None = None) -> Topology:
    import networkx as nx
    try:
        g = nx.parse_graphml(text, force_multigraph=True)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise TopofinderError(f"{path}:{line}: not valid GraphML XML ({exc})") from None
    except (nx.NetworkXError, KeyError, ValueError) as exc:
        raise TopofinderError(f"{path}: not a GraphML topology ({exc})") from None
    labels = list(g.nodes)
    switches = [v for v, data in g.nodes(data=True) if _is_switch(data)]
    ranked = _ranked(path, [g.nodes[v] for v in labels])
    if ranked:
        labels.sort(key=lambda v: g.nodes[v]["rank"])
    arcs = []
    for i, (u, w, data) in enumerate(g.edges(data=True)):
        cap = _edge_capacity(data, f"{path}: edge {i} ({u} -> {w})")
        arcs.append((u, w, cap))
    cap_b = g.graph.get("node_bandwidth")
    if cap_b is not None:
        line = _line_of(text, f">{cap_b}</data>")
        cap_b = _node_cap(cap_b, f"{path}:{line}")
    return _topology(path, labels, arcs, directed=not undirected and g.is_directed(),
                     ranked=ranked, switches=switches, unit=g.graph.get("capacity_unit"),
                     node_cap=cap_b)


def _topology(path: str, labels: list, arcs: list, directed: bool, ranked: bool = False,
              switches=(), unit: str | None = None, node_cap=None) -> Topology:
    """Renumber labels 0..N−1 (in the given order when ``ranked``, else integer-like labels
    numerically, others in given order) and build, keeping the names; an undirected edge is a
    pair of arcs; physical capacities share one unit, and the node cap (from _node_cap) is
    stated in it."""
    arcs, physical = _unify_capacities(path, arcs)
    if unit is not None and (not isinstance(unit, str) or unit not in dict(_OUTPUT_UNITS)):
        raise TopofinderError(f"{path}: capacity_unit {ascii(str(unit))[:40]} is not one of "
                              f"{', '.join(dict(_OUTPUT_UNITS))}")
    unit = physical or unit
    node_cap = _cap_in_units(path, node_cap, unit, physical)
    names = [check_name(str(x), f"{path}: node {i}") for i, x in enumerate(labels)]
    if len(set(names)) != len(names):
        raise TopofinderError(f"{path}: node labels repeat")
    if not ranked and all(re.fullmatch(r"-?\d+", s) for s in names):
        names = sorted(names, key=int)
    index = {s: i for i, s in enumerate(names)}
    src, dst, cap = [], [], []
    for u, w, c in arcs:
        for a, b in ((u, w), (w, u)) if not directed else ((u, w),):
            if str(a) not in index or str(b) not in index:
                raise TopofinderError(f"{path}: an edge names an undeclared node "
                                      f"({a!r} -> {b!r})")
            src.append(index[str(a)])
            dst.append(index[str(b)])
            cap.append(c)
    unknown = [x for x in switches if str(x) not in index]
    if unknown:
        raise TopofinderError(f"{path}: switch {unknown[0]!r} is not a node")
    sw = sorted(index[str(x)] for x in switches) or None
    if len(names) < 2:
        return Topology(len(names), src, dst, expr=path, capacity=cap, switches=sw,
                        capacity_unit=unit, node_cap=node_cap)
    return Topology(len(names), src, dst, expr=path, capacity=cap, labels=names, switches=sw,
                    capacity_unit=unit, node_cap=node_cap)
