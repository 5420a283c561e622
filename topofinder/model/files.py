"""Topology files (docs/expressions.md, docs/formats.md): edge list, node-link JSON (networkx),
GraphML.

Edge list: one ``u v [capacity]`` line per arc u→v (a k-fold multi-arc is k lines, a duplex
link two lines), ``#`` starts a comment; capacity is an integer in units of the base link
bandwidth b (default 1). JSON is networkx's node-link format of a MultiDiGraph with an integer
``capacity`` per edge; GraphML the same graph in GraphML. Written files number nodes 0..N−1 as
the Topology (and the schedule export) does; files read may use any labels, which are
renumbered 0..N−1 (integer labels in increasing order, others in order of appearance).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import networkx as nx

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

FORMATS = ("edgelist", "json", "graphml")
#: Largest link capacity read (in units of the base link bandwidth b): sums over N·d arcs stay
#: far inside int64.
MAX_CAPACITY = 10 ** 9


def topology_text(topo: Topology, fmt: str) -> str:
    """The file contents of ``topo`` in ``fmt`` (one of FORMATS)."""
    if fmt == "edgelist":
        head = (f"# topofinder topology {topo.expr}: N = {topo.n}, {topo.num_arcs} arcs\n"
                f"# one line per arc: u v{' capacity' if topo.heterogeneous else ''}\n")
        if topo.heterogeneous:
            rows = zip(topo.src.tolist(), topo.dst.tolist(), topo.capacity.tolist())
            return head + "".join(f"{u} {w} {c}\n" for u, w, c in rows)
        return head + "".join(f"{u} {w}\n" for u, w in zip(topo.src.tolist(), topo.dst.tolist()))
    if fmt == "json":
        data = nx.node_link_data(topo.to_networkx(), edges="edges")
        return json.dumps(data) + "\n"
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(topo.to_networkx())) + "\n"
    raise TopofinderError(f"unknown topology format {fmt!r}; accepted: {', '.join(FORMATS)}")


def write_topology(topo: Topology, fmt: str, path: str | None) -> None:
    """Write ``topo`` as ``fmt`` to ``path`` (stdout if None). The file appears complete or
    not at all: it is written to a temporary file beside it and renamed into place."""
    write_text(path, topology_text(topo, fmt))


def read_topology(path: str) -> Topology:
    """Read an edge list, node-link JSON or GraphML file (recognised by its first character:
    ``{`` JSON, ``<`` GraphML, else edge list). The topology's expr is the path."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopofinderError(f"cannot read topology file {path}: {exc}") from None
    head = text.lstrip()[:1]
    if head == "{":
        return _read_json(path, text)
    if head == "<":
        return _read_graphml(path)
    return _read_edgelist(path, text)


def _read_edgelist(path: str, text: str) -> Topology:
    arcs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) not in (2, 3):
            raise TopofinderError(f"{path}:{lineno}: expected 'u v [capacity]', got "
                                  f"{line.strip()!r}")
        cap = 1
        if len(fields) == 3:
            if not re.fullmatch(r"\d{1,10}", fields[2]) or not 1 <= int(fields[2]) <= MAX_CAPACITY:
                raise TopofinderError(f"{path}:{lineno}: capacity must be an integer in "
                                      f"1..{MAX_CAPACITY}, "
                                      f"got {fields[2]!r}")
            cap = int(fields[2])
        arcs.append((fields[0], fields[1], cap))
    if not arcs:
        raise TopofinderError(f"{path}: no arcs found (expected lines 'u v [capacity]')")
    labels = list(dict.fromkeys(x for u, w, _ in arcs for x in (u, w)))
    return _topology(path, labels, arcs, directed=True)


def _read_json(path: str, text: str) -> Topology:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopofinderError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    key = "edges" if isinstance(data, dict) and "edges" in data else "links"
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) \
            or not isinstance(data.get(key), list):
        raise TopofinderError(f"{path}: not a node-link topology (expected a JSON object with "
                              f"'nodes' and 'edges' lists)")
    labels, arcs = [], []
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise TopofinderError(f"{path}: nodes[{i}] has no 'id'")
        labels.append(node["id"])
    for i, edge in enumerate(data[key]):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise TopofinderError(f"{path}: {key}[{i}] needs 'source' and 'target'")
        cap = edge.get("capacity", 1)
        if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= MAX_CAPACITY:
            raise TopofinderError(f"{path}: {key}[{i}] capacity must be an integer in "
                                  f"1..{MAX_CAPACITY}, "
                                  f"got {cap!r}")
        arcs.append((edge["source"], edge["target"], cap))
    return _topology(path, labels, arcs, directed=bool(data.get("directed", True)))


def _read_graphml(path: str) -> Topology:
    try:
        g = nx.read_graphml(path, force_multigraph=True)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise TopofinderError(f"{path}:{line}: not valid GraphML XML ({exc})") from None
    except (nx.NetworkXError, KeyError, ValueError) as exc:
        raise TopofinderError(f"{path}: not a GraphML topology ({exc})") from None
    labels = list(g.nodes)
    arcs = []
    for i, (u, w, data) in enumerate(g.edges(data=True)):
        cap = data.get("capacity", 1)
        if not isinstance(cap, int) or not 1 <= cap <= MAX_CAPACITY:
            raise TopofinderError(f"{path}: edge {i} ({u} -> {w}) capacity must be an integer "
                                  f"in 1..{MAX_CAPACITY}, got {cap!r}")
        arcs.append((u, w, cap))
    return _topology(path, labels, arcs, directed=g.is_directed())


def _topology(path: str, labels: list, arcs: list, directed: bool) -> Topology:
    """Renumber labels 0..N−1 (integer-like labels numerically, others in given order) and
    build; an undirected edge is a pair of arcs."""
    names = [str(x) for x in labels]
    if len(set(names)) != len(names):
        raise TopofinderError(f"{path}: node labels repeat")
    if all(re.fullmatch(r"-?\d+", s) for s in names):
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
    return Topology(len(names), src, dst, expr=path, capacity=cap)
