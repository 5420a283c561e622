"""Patch-panel cabling plans (docs/formats.md): node ports, fibres, panels, and plan diffs.

Port model. Node u has d ports 0..d−1; each port is a transceiver with a transmit (TX) and a
receive (RX) end. Every arc u→w of the topology is carried by the TX end of one port of u and
the RX end of one port of w, so a regular topology uses exactly d ports per node and every port
at most one fibre each way. Rows (CSV header ``panel,panel_port,src_node,src_port,dst_node,
dst_port,kind``) are one per connection:

- ``simplex``: one fibre, TX of (src_node, src_port) → RX of (dst_node, dst_port). A d-regular
  digraph (multi-arcs and self-loops included) is split into d permutations σ_p by bipartite
  edge colouring (König: a d-regular bipartite multigraph is d-edge-colourable; found here by d
  successive perfect matchings), and port p of u transmits to port p of σ_p(u).
- ``duplex``: one cable carrying src→dst and dst→src, for bidirectional topologies (every arc
  paired with a reverse arc). Cables are an edge colouring of the underlying undirected
  multigraph H: when H is bipartite, König gives a 1-factorisation and both ends of every cable
  use the same port number. Otherwise H may have no 1-factorisation (odd cycles, class-2
  graphs); then H is oriented along Euler tours (|out−in| ≤ 1), the orientation is
  ⌈d/2⌉-edge-coloured, every colour class (paths and cycles) is alternated between ports 2c and
  2c+1, and only one cable per odd cycle ends on different port numbers — each row states both
  ends' ports (:attr:`PatchPlan.crossed` counts them).
- ``loopback``: a self-loop u→u, one fibre from TX of src_port to RX of dst_port of the same
  node (src_node = dst_node; a fresh plan uses one port, src_port = dst_port).

Panel-port accounting. Every row is one cross-connect between two adjacent ports of one panel:
its src end (the fibre from the src node port) sits at the even port ``panel_port`` and its dst
end at ``panel_port + 1``. A panel of ``panel_size`` ports (even) therefore holds
``panel_size // 2`` connections; rows are filled in (src_node, src_port) order, panel after
panel, so consecutive nodes share a panel. Self-loop fibres count like any other connection.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, maximum_bipartite_matching

from topofinder.compute.output import atomic_output
from topofinder.model.inputs import read_input
from topofinder.errors import TopofinderError
from topofinder.model.names import CsvWriter, check_name, csv_rows
from topofinder.cabling.node_matching import best_relabelling, find_isomorphism
from topofinder.model.topology import MAX_NODES, Topology

HEADER = ["panel", "panel_port", "src_node", "src_port", "dst_node", "dst_port", "kind"]
LABEL_COLUMNS = ["src_label", "dst_label"]      # present when the nodes have names


def _to_path(out, write) -> bool:
    """When ``out`` is a path, open it and call ``write`` on the file; True if it did."""
    if not isinstance(out, (str, Path)):
        return False
    with atomic_output(out, newline="") as f:
        write(f)
    return True
KINDS = ("simplex", "duplex", "loopback")
SIMPLEX, DUPLEX, LOOPBACK = 0, 1, 2
DEFAULT_PANEL_SIZE = 1008    # ports of the paper's optical patch panel (paper 001 §2.1)


@dataclass(frozen=True, eq=False)
class PatchPlan:
    """A cabling plan. ``rows``: int64 (R, 6) = panel, panel_port, src_node, src_port,
    dst_node, dst_port; ``kinds``: int8 (R,) codes into :data:`KINDS`; ``n``: nodes;
    ``labels``: the node names (host names, by node number) or None."""

    n: int
    rows: np.ndarray
    kinds: np.ndarray
    panel_size: int | None = None
    labels: tuple[str, ...] | None = None

    def label(self, node: int) -> str:
        return str(node) if self.labels is None else self.labels[node]

    @property
    def num_rows(self) -> int:
        return int(self.rows.shape[0])

    @property
    def num_panels(self) -> int:
        return int(self.rows[:, 0].max()) + 1 if self.num_rows else 0

    @property
    def crossed(self) -> int:
        """Duplex cables whose two ends use different port numbers."""
        duplex = self.kinds == DUPLEX
        return int(np.count_nonzero(self.rows[duplex, 3] != self.rows[duplex, 5]))

    def arcs(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of every arc the plan carries (a duplex row gives both directions)."""
        r, duplex = self.rows, self.kinds == DUPLEX
        return (np.concatenate([r[:, 2], r[duplex, 4]]),
                np.concatenate([r[:, 4], r[duplex, 2]]))

    def to_topology(self, expr: str = "G") -> Topology:
        """The topology the plan realises (unit capacities; capacity is a property of the
        transceivers, not of the cabling)."""
        src, dst = self.arcs()
        return Topology(self.n, src, dst, expr=expr, labels=self.labels)

    def port_usage(self) -> tuple[np.ndarray, np.ndarray]:
        """(tx, rx): for every (node, port) end, how many fibres transmit / receive there."""
        r, duplex = self.rows, self.kinds == DUPLEX
        tx = np.concatenate([r[:, 2:4], r[duplex, 4:6]])
        rx = np.concatenate([r[:, 4:6], r[duplex, 2:4]])
        return tx, rx

    def write_csv(self, out) -> None:
        """Write the CSV (header :data:`HEADER`, plus :data:`LABEL_COLUMNS` when the nodes
        have names) to a path or a text file object."""
        if _to_path(out, self.write_csv):
            return
        w = CsvWriter(out)
        w.writerow(HEADER + (LABEL_COLUMNS if self.labels else []))
        for row, k in zip(self.rows.tolist(), self.kinds.tolist()):
            names = [self.label(row[2]), self.label(row[4])] if self.labels else []
            w.writerow(row + [KINDS[k]] + names)

    def to_csv(self) -> str:
        buf = io.StringIO()
        self.write_csv(buf)
        return buf.getvalue()


# ---- port assignment -------------------------------------------------------------------------
def _bipartite_colouring(n_left: int, n_right: int, left: np.ndarray, right: np.ndarray,
                         colours: int) -> np.ndarray:
    """Colour the edges (left[i], right[i]) of a bipartite multigraph of maximum degree
    ≤ ``colours`` so that no two edges at a vertex share a colour (König's edge-colouring
    theorem). Pads to a ``colours``-regular multigraph, then peels perfect matchings
    (Hopcroft–Karp, scipy) — each exists by Hall's theorem. Returns one colour per edge."""
    m = left.size
    da = colours - np.bincount(left, minlength=n_left)
    db = colours - np.bincount(right, minlength=n_right)
    if da.min(initial=0) < 0 or db.min(initial=0) < 0:
        raise ValueError("a vertex has more edges than colours")
    n = max(n_left, n_right)        # square up: extra vertices carry only padding edges
    da = np.concatenate([da, np.full(n - n_left, colours)])
    db = np.concatenate([db, np.full(n - n_right, colours)])
    L = np.concatenate([left, np.repeat(np.arange(n), da)])
    R = np.concatenate([right, np.repeat(np.arange(n), db)])
    colour = np.full(L.size, -1, np.int64)
    alive = np.arange(L.size)
    for c in range(colours):
        key = L[alive] * n + R[alive]
        order = np.argsort(key, kind="stable")
        skey = key[order]
        g = sp.csr_matrix((np.ones(alive.size, np.int8), (L[alive], R[alive])), shape=(n, n))
        match = maximum_bipartite_matching(g, perm_type="column")
        if np.any(match < 0):
            raise AssertionError("no perfect matching in a regular bipartite multigraph")
        pos = np.searchsorted(skey, np.arange(n) * n + match)   # first alive copy of each pair
        chosen = alive[order[pos]]
        colour[chosen] = c
        keep = np.ones(alive.size, bool)
        keep[order[pos]] = False
        alive = alive[keep]
    return colour[:m]


def _simplex_ports(topo: Topology) -> np.ndarray:
    """Port p for every arc: port p of u transmits to port p of σ_p(u)."""
    d = max(int(topo.out_degrees.max()), int(topo.in_degrees.max()))
    return _bipartite_colouring(topo.n, topo.n, topo.src, topo.dst, d)


def _undirected_edges(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Pair every non-loop arc u→w with a reverse arc: the cables (a, b), a < b."""
    s, t = topo.src, topo.dst
    fwd = s < t
    a, b = s[fwd], t[fwd]
    ra, rb = t[s > t], s[s > t]
    k1, k2 = np.sort(a * topo.n + b), np.sort(ra * topo.n + rb)
    if not np.array_equal(k1, k2):
        raise TopofinderError(f"{topo.expr} is not bidirectional (some arc u→w has no reverse "
                              "arc w→u); duplex cabling needs one; use simplex cabling")
    return k1 // topo.n, k1 % topo.n


def _bipartition(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Side 0/1 of every node if the undirected graph (a, b) is bipartite, else None. Uses the
    bipartite double cover: it is bipartite iff v and v' lie in different components."""
    g = sp.coo_matrix((np.ones(2 * a.size), (np.concatenate([a, a + n]),
                                             np.concatenate([b + n, b]))), shape=(2 * n, 2 * n))
    _, label = connected_components(g, directed=False)
    if np.any(label[:n] == label[n:]):
        return None
    return (label[:n] > label[n:]).astype(np.int64)


def _euler_orientation(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Orient every edge (True: a→b) so that |out−in| ≤ 1 at every node: walk Euler circuits
    (Hierholzer) of the graph with one extra node joined to every odd-degree node."""
    deg = np.bincount(np.concatenate([a, b]), minlength=n)
    odd = np.flatnonzero(deg % 2)
    ea = np.concatenate([a, odd])
    eb = np.concatenate([b, np.full(odd.size, n)])
    m = ea.size
    ends = np.concatenate([ea, eb])
    edge = np.concatenate([np.arange(m), np.arange(m)])
    order = np.argsort(ends, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n + 1))]).tolist()
    inc = edge[order].tolist()
    ea_l, eb_l = ea.tolist(), eb.tolist()
    used = [False] * m
    forward = [True] * m
    ptr = start[:-1]
    for v0 in range(n + 1):
        stack = [v0]
        while stack:
            v = stack[-1]
            p, end = ptr[v], start[v + 1]
            while p < end and used[inc[p]]:
                p += 1
            ptr[v] = p
            if p == end:
                stack.pop()
                continue
            e = inc[p]
            used[e] = True
            w = eb_l[e] if ea_l[e] == v else ea_l[e]
            forward[e] = ea_l[e] == v
            stack.append(w)
    return np.array(forward[:a.size], bool)


def _alternate(tail: np.ndarray, head: np.ndarray, colour: np.ndarray, n: int):
    """Ports for oriented edges coloured into partial permutations: along every path or
    cycle of colour c alternate ports 2c and 2c+1; an odd cycle's closing edge is crossed.
    Returns (tail_port, head_port)."""
    tp = np.empty(tail.size, np.int64)
    hp = np.empty(tail.size, np.int64)
    for c in np.unique(colour).tolist():
        idx = np.flatnonzero(colour == c)
        out_e = dict(zip(tail[idx].tolist(), idx.tolist()))
        in_e = dict(zip(head[idx].tolist(), idx.tolist()))
        done: set[int] = set()
        for e0 in idx.tolist():
            if e0 in done:
                continue
            e = e0                                   # walk back to a path start (or loop)
            while True:
                prev = in_e.get(int(tail[e]))
                if prev is None or prev == e0:
                    break
                e = prev
            first, bit = e, 0
            while e is not None and e not in done:
                done.add(e)
                tp[e] = hp[e] = 2 * c + bit
                nxt = out_e.get(int(head[e]))
                if nxt == first and tp[first] == tp[e]:     # odd cycle closes on itself
                    hp[e] = 2 * c + 1 - bit
                e, bit = nxt, 1 - bit
    return tp, hp


def _compact(nodes: np.ndarray, ports: np.ndarray, d: int) -> np.ndarray:
    """Move ends on ports ≥ d (or −1) onto the node's free ports < d, lowest first."""
    ports = ports.copy()
    bad = np.flatnonzero((ports >= d) | (ports < 0))
    if bad.size == 0:
        return ports
    by_node: dict[int, list[int]] = {}
    for i in bad.tolist():
        by_node.setdefault(int(nodes[i]), []).append(i)
    for u, ends in by_node.items():
        taken = set(ports[(nodes == u) & (ports >= 0) & (ports < d)].tolist())
        free = [p for p in range(d) if p not in taken]
        if len(free) < len(ends):
            raise AssertionError("a node has more connection ends than ports")
        for i, p in zip(ends, free):
            ports[i] = p
    return ports


def _duplex_connections(topo: Topology):
    """(src, src_port, dst, dst_port, kind) arrays of a duplex plan; see the module doc."""
    d = topo.degree
    loops = np.flatnonzero(topo.src == topo.dst)
    a, b = _undirected_edges(topo)
    if a.size:
        side = _bipartition(topo.n, a, b)
        if side is not None:                      # König: a 1-factorisation of H
            left = np.where(side[a] == 0, a, b)
            right = np.where(side[a] == 0, b, a)
            deg = np.bincount(np.concatenate([a, b]), minlength=topo.n).max()
            col = _bipartite_colouring(topo.n, topo.n, left, right, int(deg))
            a, b, pa, pb = left, right, col, col.copy()
        else:
            fwd = _euler_orientation(topo.n, a, b)
            tail, head = np.where(fwd, a, b), np.where(fwd, b, a)
            deg = max(np.bincount(tail, minlength=topo.n).max(),
                      np.bincount(head, minlength=topo.n).max())
            col = _bipartite_colouring(topo.n, topo.n, tail, head, int(deg))
            pa, pb = _alternate(tail, head, col, topo.n)
            a, b = tail, head
    else:
        pa = pb = np.zeros(0, np.int64)
    nodes = np.concatenate([a, b, topo.src[loops]])
    ports = np.concatenate([pa, pb, np.full(loops.size, -1)])
    ports = _compact(nodes, ports, d)
    m, k = a.size, loops.size
    src = np.concatenate([a, topo.src[loops]])
    dst = np.concatenate([b, topo.src[loops]])
    sport = np.concatenate([ports[:m], ports[2 * m:]])
    dport = np.concatenate([ports[m:2 * m], ports[2 * m:]])
    kind = np.concatenate([np.full(m, DUPLEX), np.full(k, LOOPBACK)]).astype(np.int8)
    return src, sport, dst, dport, kind


def _place(conn: np.ndarray, kinds: np.ndarray, panel_size: int | None):
    """Sort connections by (src node, src port) and give each two adjacent panel ports."""
    order = np.lexsort((conn[:, 1], conn[:, 0]))
    conn, kinds = conn[order], kinds[order]
    per = conn.shape[0] if panel_size is None else panel_size // 2
    i = np.arange(conn.shape[0])
    panel, slot = (i // per, i % per) if per else (i * 0, i)
    rows = np.column_stack([panel, 2 * slot, conn]).astype(np.int64)
    return rows, kinds


def _check_panel_size(panel_size: int | None) -> None:
    if panel_size is not None and (panel_size < 2 or panel_size % 2):
        raise TopofinderError(f"panel size {panel_size}: a panel needs an even number >= 2 of "
                              "ports (each connection uses two adjacent panel ports)")


def plan_patch_panel(topo: Topology, cabling: str = "auto",
                     panel_size: int | None = DEFAULT_PANEL_SIZE) -> PatchPlan:
    """The cabling plan of ``topo``. ``cabling``: ``simplex`` (one fibre per arc), ``duplex``
    (one cable per arc pair; needs a bidirectional topology) or ``auto`` (duplex when the
    topology is bidirectional). ``panel_size``: ports per panel (None: one panel)."""
    _check_panel_size(panel_size)
    if cabling not in ("auto", "simplex", "duplex"):
        raise TopofinderError(f"cabling {cabling!r}: accepted are auto, simplex, duplex")
    if cabling == "duplex" or (cabling == "auto" and topo.bidirectional):
        src, sport, dst, dport, kind = _duplex_connections(topo)
    else:
        port = _simplex_ports(topo)
        src, sport, dst, dport = topo.src, port, topo.dst, port
        kind = np.where(src == dst, LOOPBACK, SIMPLEX).astype(np.int8)
    conn = np.column_stack([src, sport, dst, dport])
    rows, kinds = _place(conn, kind, panel_size)
    return PatchPlan(topo.n, rows, kinds, panel_size, topo.labels)


# ---- reading ---------------------------------------------------------------------------------
def read_plan(path, n: int | None = None) -> PatchPlan:
    """Read a plan CSV file. ``n``: node count (default: largest node id + 1)."""
    return parse_plan(read_input(path, "patch-panel plan"), n)


def parse_plan(text: str, n: int | None = None) -> PatchPlan:
    """Parse plan CSV text (header :data:`HEADER`); see :func:`read_plan`."""
    reader = csv_rows(text, "patch-panel plan")
    header = next(reader, None)
    header = None if header is None else [h.strip() for h in header]
    if header not in (HEADER, HEADER + LABEL_COLUMNS):
        raise TopofinderError(f"patch-panel plan: the header must be {','.join(HEADER)} "
                              f"(optionally followed by {','.join(LABEL_COLUMNS)})")
    rows, kinds, names = [], [], {}
    for line, rec in enumerate(reader, start=2):
        if not rec:
            continue
        if len(rec) != len(header):
            raise TopofinderError(f"patch-panel plan line {line}: expected {len(header)} "
                                  f"fields, got {len(rec)}")
        try:
            vals = [int(x) for x in rec[:6]]
            if max(vals) >= MAX_NODES:
                raise ValueError
        except ValueError:
            raise TopofinderError(f"patch-panel plan line {line}: panel, ports and nodes must "
                                  f"be non-negative integers below {MAX_NODES}") from None
        kind = rec[6].strip()
        if kind not in KINDS or min(vals) < 0:
            raise TopofinderError(f"patch-panel plan line {line}: kind must be one of "
                                  f"{', '.join(KINDS)} and numbers non-negative")
        if kind == "loopback" and vals[2] != vals[4]:
            raise TopofinderError(f"patch-panel plan line {line}: a loopback joins a node to "
                                  "itself")
        for node, name in zip((vals[2], vals[4]), rec[7:9]):
            name = check_name(name.strip(), f"patch-panel plan line {line}")
            if names.setdefault(node, name) != name:
                raise TopofinderError(f"patch-panel plan line {line}: node {node} is named "
                                      f"{name!r} here but {names[node]!r} before")
        rows.append(vals)
        kinds.append(KINDS.index(kind))
    arr = np.array(rows, np.int64).reshape(-1, 6)
    nodes = int(arr[:, [2, 4]].max()) + 1 if arr.size else 0
    n = max(n or 0, nodes, 2)
    labels = None
    if names:
        labels = [names.get(i, str(i)) for i in range(n)]
        if len(set(labels)) != n:
            raise TopofinderError("patch-panel plan: two nodes have the same label")
    return PatchPlan(n, arr, np.array(kinds, np.int8), labels=None if labels is None
                     else tuple(labels))


# ---- diff ------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PlanDiff:
    """Moving from ``old`` to a plan for a new topology. ``physical[x]`` is the node of the
    old plan that plays node x of the new topology; ``new`` is the new plan in the old plan's
    node names, reusing old ports and panel positions for every connection it keeps;
    ``removed``/``added`` are the rows to unplug and to plug. ``isomorphic``: the new topology
    is the old cabling renamed (True), provably is not (False), or undecided (None);
    ``method``: how ``physical`` was found; ``topology``: the new topology."""

    old: PatchPlan
    new: PatchPlan
    physical: np.ndarray
    removed: np.ndarray
    removed_kinds: np.ndarray
    added: np.ndarray
    added_kinds: np.ndarray
    isomorphic: bool | None = None
    method: str = "heuristic"
    topology: Topology | None = None

    @property
    def moves(self) -> int:
        """Fibres to move: each unplugged fibre is re-plugged; extra new ones are laid."""
        return max(int(self.removed.shape[0]), int(self.added.shape[0]))

    def write_csv(self, out) -> None:
        """CSV ``action,`` + :data:`HEADER` with one row per unplug (remove) or plug (add)."""
        if _to_path(out, self.write_csv):
            return
        w = CsvWriter(out)
        named = self.old.labels is not None
        w.writerow(["action"] + HEADER + (LABEL_COLUMNS if named else []))
        for action, rows, kinds in (("remove", self.removed, self.removed_kinds),
                                    ("add", self.added, self.added_kinds)):
            for row, k in zip(rows.tolist(), kinds.tolist()):
                names = [self.old.label(row[2]), self.old.label(row[4])] if named else []
                w.writerow([action] + row + [KINDS[k]] + names)

    def write_mapping(self, out) -> None:
        """The relabelling as CSV ``node,node_label,physical_node,physical_label``: node x of
        the new topology (its own numbering and name) is cabled as node ``physical_node`` of
        the old plan (its host). Feed it to ``export --relabel`` to get the new topology's
        schedule in the numbering of the cables after the diff."""
        if _to_path(out, self.write_mapping):
            return
        w = CsvWriter(out)
        w.writerow(MAPPING_HEADER)
        for x, u in enumerate(self.physical.tolist()):
            name = str(x) if self.topology is None else self.topology.label(x)
            w.writerow([x, name, u, self.old.label(u)])


MAPPING_HEADER = ["node", "node_label", "physical_node", "physical_label"]


def _adjacency(n: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))


def _kept_arcs(a_old: sp.csr_matrix, a_new: sp.csr_matrix, phys: np.ndarray) -> float:
    """Arcs (with multiplicity) shared by the old plan and the new topology under ``phys``."""
    p = sp.csr_matrix((np.ones(phys.size), (np.arange(phys.size), phys)),
                      shape=(phys.size, a_old.shape[0]))
    mapped = p @ a_old @ p.T           # old arcs seen in new names
    return float(mapped.minimum(a_new).sum())


def match_nodes(old: Topology, new: Topology, rounds: int = 8) -> np.ndarray:
    """A node relabelling that keeps many arcs: ``physical[x]`` = old node for new node x.
    Iterates linear assignments (scipy) on the overlap matrix — the number of arcs u→·
    and ·→u of the old plan that land on arcs of x when neighbours are mapped by the current
    relabelling — starting from the identity, and keeps the best (a heuristic for the NP-hard
    quadratic assignment problem; exact when the topologies are equal up to relabelling
    reachable from the start)."""
    if old.n < new.n:
        raise TopofinderError(f"the old plan has {old.n} nodes but the topology {new.n}; a diff "
                              "needs at least as many old nodes")
    a_old = _adjacency(old.n, old.src, old.dst)
    from scipy.optimize import linear_sum_assignment   # heavy; only diffs need it

    a_new = _adjacency(new.n, new.src, new.dst)
    best = np.arange(new.n)
    best_kept = _kept_arcs(a_old, a_new, best)
    phys = best
    for _ in range(rounds):
        q = sp.csr_matrix((np.ones(new.n), (phys, np.arange(new.n))), shape=(old.n, new.n))
        overlap = (a_old @ q @ a_new.T + a_old.T @ q @ a_new).toarray()   # old u × new x
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        nxt = np.empty(new.n, np.int64)
        nxt[cols] = rows
        kept = _kept_arcs(a_old, a_new, nxt)
        if kept <= best_kept:
            break
        best, best_kept, phys = nxt, kept, nxt
    return best


def _row_keys(rows: np.ndarray, kinds: np.ndarray) -> list[tuple]:
    return [tuple(r) + (k,) for r, k in zip(rows[:, 2:].tolist(), kinds.tolist())]


def diff_plans(old: PatchPlan, topo: Topology, cabling: str = "auto",
               panel_size: int | None = DEFAULT_PANEL_SIZE, method: str = "exact") -> PlanDiff:
    """Plan ``topo`` on the hardware cabled by ``old`` with few fibre moves: relabel nodes,
    keep every old connection that the relabelled topology still has (same ports, same panel
    position), and cable the rest on free ports and positions. ``method``: ``exact`` (an
    isomorphism when there is one — 0 moves — else QAP search seeded with the heuristic;
    :mod:`topofinder.cabling.node_matching`; never more moves than the heuristic) or
    ``heuristic`` (:func:`match_nodes` alone). ``cabling`` ``auto`` follows the old plan:
    duplex when it has duplex cables and ``topo`` is bidirectional, else simplex."""
    _check_panel_size(panel_size)
    if method not in ("exact", "heuristic"):
        raise TopofinderError(f"diff method {method!r}: accepted are exact, heuristic")
    if cabling == "auto" and old.num_rows:
        cabling = "duplex" if topo.bidirectional and np.any(old.kinds == DUPLEX) else "simplex"
    old_topo = old.to_topology()
    decided = False
    if method == "exact":
        phys, decided = find_isomorphism(old_topo, topo)
        if phys is not None:
            return _diff_with(old, topo, phys, cabling, panel_size, True, "isomorphism")
    heuristic = match_nodes(old_topo, topo)
    best = _diff_with(old, topo, heuristic, cabling, panel_size)
    if method == "heuristic":
        return best
    found = best_relabelling(old_topo, topo, seeds=(heuristic,), exact=False)
    diff = _diff_with(old, topo, found.physical, cabling, panel_size,
                      False if decided else None, found.method)
    if diff.moves <= best.moves:
        return diff
    return PlanDiff(best.old, best.new, best.physical, best.removed, best.removed_kinds,
                    best.added, best.added_kinds, False if decided else None, "heuristic",
                    topo)


def _diff_with(old: PatchPlan, topo: Topology, phys: np.ndarray, cabling: str,
               panel_size: int | None, isomorphic: bool | None = None,
               method: str = "heuristic") -> PlanDiff:
    """The diff for a given relabelling ``phys`` (new node x → old node phys[x])."""
    target = plan_patch_panel(Topology(old.n, phys[topo.src], phys[topo.dst],
                                       expr=topo.expr), cabling, None)
    # connections wanted, as (src, dst, kind) with multiplicity; keep matching old rows
    want: dict[tuple, int] = {}
    for s, t, k in zip(target.rows[:, 2].tolist(), target.rows[:, 4].tolist(),
                       target.kinds.tolist()):
        key = (min(s, t), max(s, t), k) if k == DUPLEX else (s, t, k)
        want[key] = want.get(key, 0) + 1
    keep = np.zeros(old.num_rows, bool)
    for i, (s, t, k) in enumerate(zip(old.rows[:, 2].tolist(), old.rows[:, 4].tolist(),
                                      old.kinds.tolist())):
        key = (min(s, t), max(s, t), k) if k == DUPLEX else (s, t, k)
        if want.get(key, 0) > 0:
            want[key] -= 1
            keep[i] = True
    kept_rows, kept_kinds = old.rows[keep], old.kinds[keep]
    tx_used = {(s, p) for s, p in kept_rows[:, 2:4].tolist()}
    rx_used = {(t, p) for t, p in kept_rows[:, 4:6].tolist()}
    for r in kept_rows[kept_kinds == DUPLEX].tolist():
        tx_used.add((r[4], r[5]))
        rx_used.add((r[2], r[3]))
    d = max(topo.degree, int(old.rows[:, [3, 5]].max()) + 1 if old.num_rows else 0)
    per = None if panel_size is None else panel_size // 2
    taken = {(p, q) for p, q in kept_rows[:, :2].tolist()}
    positions = _free_positions(taken, per)
    added = []
    for (s, t, k), count in want.items():
        for _ in range(count):
            if k == DUPLEX:
                ps = _free_port(s, d, tx_used, rx_used)
                tx_used.add((s, ps)); rx_used.add((s, ps))
                pt = _free_port(t, d, tx_used, rx_used)
                tx_used.add((t, pt)); rx_used.add((t, pt))
            else:                                   # simplex or loopback fibre
                ps = _free_port(s, d, tx_used, None)
                pt = _free_port(t, d, None, rx_used)
                tx_used.add((s, ps)); rx_used.add((t, pt))
            panel, pos = next(positions)
            added.append(([panel, pos, s, ps, t, pt], k))
    add_rows = np.array([a for a, _ in added], np.int64).reshape(-1, 6)
    add_kinds = np.array([k for _, k in added], np.int8)
    new = PatchPlan(old.n, np.concatenate([kept_rows, add_rows]),
                    np.concatenate([kept_kinds, add_kinds]), panel_size, old.labels)
    return PlanDiff(old, new, phys, old.rows[~keep], old.kinds[~keep], add_rows, add_kinds,
                    isomorphic, method, topo)


def _free_port(u: int, d: int, tx_used, rx_used) -> int:
    for p in range(d):
        if (tx_used is None or (u, p) not in tx_used) and (rx_used is None or
                                                           (u, p) not in rx_used):
            return p
    raise TopofinderError(f"node {u} has no free port left among 0..{d - 1}; the old plan and "
                          "the topology disagree on the port count")


def _free_positions(taken: set, per: int | None):
    panel = 0
    while True:
        slots = range(per) if per else range(10**9)
        for s in slots:
            if (panel, 2 * s) not in taken:
                yield panel, 2 * s
        panel += 1
