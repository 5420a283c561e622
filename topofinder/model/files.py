"""Topology files (docs/expressions.md, docs/formats.md): edge list, node-link JSON (networkx), GraphML.

Edge list: one ``u v [capacity]`` line per arc u→v (a k-fold multi-arc is k lines, a duplex
link two lines), ``#`` starts a comment; capacity is an integer in units of the base link
bandwidth b (default 1). JSON is networkx's node-link format of a MultiDiGraph with an integer
``capacity`` per edge; GraphML the same graph in GraphML. Files read may use any node names
(host names such as ``gpu-00``); nodes are numbered 0..N−1 (the ranks): by an explicit rank
when the file gives one (``# node RANK NAME`` lines of an edge list, a ``rank`` attribute on
every JSON/GraphML node), else integer names in increasing order, others in order of
appearance; the names are kept as :attr:`Topology.labels`. Written files carry the same
name ↔ rank map, so a file written and read back has the same ranks and names.

Undirected input: ``undirected=True`` reads every line / edge as one cable, i.e. a pair of
arcs (``networkx.write_edgelist`` writes one line per undirected edge). When an edge list read
as arcs is not strongly connected but is connected as cables, reading stops with a message
that names a node that cannot be reached and suggests ``--undirected``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET

import networkx as nx

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

FORMATS = ("edgelist", "json", "graphml")


def _labelled_networkx(topo: Topology) -> nx.MultiDiGraph:
    """to_networkx with nodes named by their labels and a ``rank`` attribute on each."""
    g = topo.to_networkx()
    if topo.labels is None:
        return g
    nx.set_node_attributes(g, {i: i for i in range(topo.n)}, "rank")
    return nx.relabel_nodes(g, dict(enumerate(topo.labels)))


def topology_text(topo: Topology, fmt: str) -> str:
    """The file contents of ``topo`` in ``fmt`` (one of FORMATS)."""
    if fmt == "edgelist":
        head = (f"# topofinder topology {topo.expr}: N = {topo.n}, {topo.num_arcs} arcs\n"
                f"# one line per arc: u v{' capacity' if topo.heterogeneous else ''}\n")
        names = [str(i) for i in range(topo.n)]
        if topo.labels is not None:
            bad = next((x for x in topo.labels if not re.fullmatch(r"[^\s#]+", x)), None)
            if bad is not None:
                raise TopofinderError(f"node name {bad!r} has a space or '#'; write this "
                                      "topology as json or graphml")
            names = list(topo.labels)
            head += "".join(f"# node {i} {x}\n" for i, x in enumerate(names))
        src = [names[u] for u in topo.src.tolist()]
        dst = [names[w] for w in topo.dst.tolist()]
        if topo.heterogeneous:
            rows = zip(src, dst, topo.capacity.tolist())
            return head + "".join(f"{u} {w} {c}\n" for u, w, c in rows)
        return head + "".join(f"{u} {w}\n" for u, w in zip(src, dst))
    if fmt == "json":
        data = nx.node_link_data(_labelled_networkx(topo), edges="edges")
        return json.dumps(data) + "\n"
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(_labelled_networkx(topo))) + "\n"
    raise TopofinderError(f"unknown topology format {fmt!r}; accepted: {', '.join(FORMATS)}")


def write_topology(topo: Topology, fmt: str, path: str | None) -> None:
    """Write ``topo`` as ``fmt`` to ``path`` (stdout if None). The file appears complete or
    not at all: it is written to a temporary file beside it and renamed into place."""
    text = topology_text(topo, fmt)
    if path is None:
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".topofinder-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise TopofinderError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def read_topology(path: str, undirected: bool | None = None) -> Topology:
    """Read an edge list, node-link JSON or GraphML file (recognised by its first character:
    ``{`` JSON, ``<`` GraphML, else edge list). The topology's expr is the path.
    ``undirected``: True reads every edge as one cable (two arcs); False as the file says
    (arcs for an edge list); None as False, but an edge list that is strongly connected only
    when read as cables is refused with a hint (module doc)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopofinderError(f"cannot read topology file {path}: {exc}") from None
    head = text.lstrip()[:1]
    if head == "{":
        return _read_json(path, text, undirected)
    if head == "<":
        return _read_graphml(path, undirected)
    return _read_edgelist(path, text, undirected)


def _read_edgelist(path: str, text: str, undirected: bool | None) -> Topology:
    arcs, declared = [], {}
    for lineno, line in enumerate(text.splitlines(), 1):
        directive = re.fullmatch(r"\s*#\s*node\s+(\d+)\s+(\S+)\s*", line)
        if directive:
            rank, name = int(directive.group(1)), directive.group(2)
            if rank in declared:
                raise TopofinderError(f"{path}:{lineno}: rank {rank} is declared twice")
            declared[rank] = name
            continue
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) not in (2, 3):
            raise TopofinderError(f"{path}:{lineno}: expected 'u v [capacity]', got "
                                  f"{line.strip()!r}")
        cap = 1
        if len(fields) == 3:
            if not re.fullmatch(r"\d+", fields[2]) or int(fields[2]) < 1:
                raise TopofinderError(f"{path}:{lineno}: capacity must be a positive integer, "
                                      f"got {fields[2]!r}")
            cap = int(fields[2])
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
    if undirected:
        return _topology(path, labels, arcs, directed=False, ranked=ranked)
    topo = _topology(path, labels, arcs, directed=True, ranked=ranked)
    if undirected is None and not topo.strongly_connected:
        cables = _topology(path, labels, arcs, directed=False, ranked=ranked)
        if cables.strongly_connected:
            raise TopofinderError(
                f"{path}: read as one arc per line (u -> v), {topo.unreachable_text()}, but as "
                f"one undirected cable per line (networkx.write_edgelist) every node reaches "
                f"every other: pass --undirected to read it as cables")
    return topo


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
    ranked = _ranked(path, data["nodes"])
    if ranked:
        labels = [node["id"] for node in sorted(data["nodes"], key=lambda x: x["rank"])]
    for i, edge in enumerate(data[key]):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise TopofinderError(f"{path}: {key}[{i}] needs 'source' and 'target'")
        cap = edge.get("capacity", 1)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise TopofinderError(f"{path}: {key}[{i}] capacity must be a positive integer, "
                                  f"got {cap!r}")
        arcs.append((edge["source"], edge["target"], cap))
    return _topology(path, labels, arcs, ranked=ranked,
                     directed=not undirected and bool(data.get("directed", True)))


def _read_graphml(path: str, undirected: bool | None = None) -> Topology:
    try:
        g = nx.read_graphml(path, force_multigraph=True)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise TopofinderError(f"{path}:{line}: not valid GraphML XML ({exc})") from None
    except (nx.NetworkXError, KeyError, ValueError) as exc:
        raise TopofinderError(f"{path}: not a GraphML topology ({exc})") from None
    labels = list(g.nodes)
    ranked = _ranked(path, [g.nodes[v] for v in labels])
    if ranked:
        labels.sort(key=lambda v: g.nodes[v]["rank"])
    arcs = []
    for i, (u, w, data) in enumerate(g.edges(data=True)):
        cap = data.get("capacity", 1)
        if not isinstance(cap, int) or cap < 1:
            raise TopofinderError(f"{path}: edge {i} ({u} -> {w}) capacity must be a positive "
                                  f"integer, got {cap!r}")
        arcs.append((u, w, cap))
    return _topology(path, labels, arcs, directed=not undirected and g.is_directed(),
                     ranked=ranked)


def _topology(path: str, labels: list, arcs: list, directed: bool,
              ranked: bool = False) -> Topology:
    """Renumber labels 0..N−1 (in the given order when ``ranked``, else integer-like labels
    numerically, others in given order) and build, keeping the names; an undirected edge is a
    pair of arcs."""
    names = [str(x) for x in labels]
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
    if len(names) < 2:
        return Topology(len(names), src, dst, expr=path, capacity=cap)
    return Topology(len(names), src, dst, expr=path, capacity=cap, labels=names)
