"""One validator per input document kind (docs/formats.md "Validators"), shared by every
reader: `check`, `run`, `export --pick` and :func:`topofinder.api.load_schedule`.

A document parsed by :func:`topofinder.model.inputs.read_json` (no repeated key, no integer
of more than 40 digits) is checked field by field against what topofinder writes — the
shapes of ``topofinder/schemas/*.schema.json`` and more: integers are integers (not bools,
not floats such as 1.5 or 1.0), numbers are finite, nodes are 0..N−1, steps are 1..T with
every step used (a step index of 10^18 in a 12-row schedule is refused), ``labels`` has one
distinct name per node, ``physical`` is a permutation of the nodes, sizes stay within
MAX_NODES and MAX_ROWS. The first problem found is one TopofinderError line naming the
document and the field; nothing is echoed beyond a short ascii() of the offending value.
Unknown top-level fields are ignored (a newer writer may add some).
"""

from __future__ import annotations

import math
import re
from itertools import chain

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective
from topofinder.model.topology import MAX_NODES

FORMAT = "topofinder-schedule"
VERSION = 1
STEP_COLUMNS = ["t", "v", "lo", "hi", "u", "w"]
ALLTOALL_COLUMNS = ["t", "u", "w", "src", "dst", "amount"]
ONEROOT_FORMAT = "topofinder-oneroot-schedule"
ONEROOT_COLUMNS = ["u", "w", "tree", "lo", "hi", "lag"]
#: Most rows (sends, tree edges, links) one document may hold (run's MAX_SEND_ROWS).
MAX_ROWS = 10 ** 7
#: Largest chunks per shard: v·P·e stays far below 2^63 for any element count.
MAX_CHUNKS = 1 << 40
#: Longest string field (a label, a method, an expression) and "p/q" ratio read.
MAX_TEXT = 4096
MAX_RATIO = 100
_RATIO = re.compile(r"-?[0-9]+(/[0-9]+)?\Z")


def _fail(where: str, what: str) -> TopofinderError:
    return TopofinderError(f"{where}: {what} (docs/formats.md)")


def _show(value) -> str:
    return ascii(value)[:40]


def is_int(x) -> bool:
    """A JSON integer: int, not bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def integer(doc: dict, key: str, lo: int, hi: int, where: str, default=None) -> int:
    """doc[key], an integer in lo..hi (``default`` when absent and not None)."""
    if key not in doc and default is not None:
        return default
    if key not in doc:
        raise _fail(where, f"no {key!r}")
    x = doc[key]
    if not is_int(x) or not lo <= x <= hi:
        raise _fail(where, f"{key!r} must be an integer in {lo}..{hi}, got {_show(x)}")
    return x


def number(x, key: str, where: str, lo: float = 0.0, positive: bool = False,
           null: bool = False) -> float | None:
    """A finite JSON number ≥ lo (> lo with ``positive``); None allowed with ``null``."""
    if x is None and null:
        return None
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    if not ok or x < lo or (positive and x == lo):
        raise _fail(where, f"{key!r} must be a finite number {'>' if positive else '>='} {lo}, "
                           f"got {_show(x)}")
    return float(x)


def text(doc: dict, key: str, where: str, required: bool = False) -> str | None:
    """doc[key], a string of at most MAX_TEXT characters (None when absent, not required)."""
    if key not in doc and not required:
        return None
    x = doc.get(key)
    if not isinstance(x, str) or len(x) > MAX_TEXT or required and not x:
        raise _fail(where, f"{key!r} must be a{' non-empty' if required else ''} string of "
                           f"at most {MAX_TEXT} characters, got {_show(x)}")
    return x


def ratio(x, key: str, where: str, positive: bool = True, null: bool = False):
    """An exact "p/q" (or integer) string with q > 0; ≥ 0 (> 0 with ``positive``)."""
    if x is None and null:
        return None
    if not isinstance(x, str) or len(x) > MAX_RATIO or not _RATIO.match(x):
        raise _fail(where, f"{key!r} must be an exact ratio string \"p/q\", got {_show(x)}")
    num, _, den = x.partition("/")
    if den and int(den) == 0 or int(num) < 0 or positive and int(num) == 0:
        raise _fail(where, f"{key!r} must be a {'positive' if positive else 'non-negative'} "
                           f"ratio with a non-zero denominator, got {_show(x)}")
    return x


def array(doc: dict, key: str, where: str, most: int | None = None, required: bool = True):
    """doc[key], a list of at most ``most`` (default MAX_ROWS) items (None when absent, not
    required)."""
    if key not in doc and not required:
        return None
    most = MAX_ROWS if most is None else most
    x = doc.get(key)
    if not isinstance(x, list) or len(x) > most:
        raise _fail(where, f"{key!r} must be a list of at most {most} items, got "
                           f"{type(x).__name__}" + (f" of {len(x)}" if isinstance(x, list)
                                                     else ""))
    return x


def int_table(rows: list, columns: int, key: str, where: str) -> np.ndarray:
    """A list of rows of ``columns`` JSON integers each as an (S, columns) int64 array:
    no float (1.5, 1.0), bool, string, null, nested list, short or long row, or integer
    beyond int64."""
    if not rows:
        return np.zeros((0, columns), np.int64)
    if set(map(type, rows)) != {list} or set(map(len, rows)) != {columns}:
        i = next(i for i, r in enumerate(rows) if type(r) is not list or len(r) != columns)
        raise _fail(where, f"{key} row {i} must be a list of {columns} integers, got "
                           f"{_show(rows[i])}")
    if set(map(type, chain.from_iterable(rows))) != {int}:     # C-speed: 10^7 rows in ~1 s
        i, x = next((i, x) for i, r in enumerate(rows) for x in r if type(x) is not int)
        raise _fail(where, f"{key} row {i} holds {_show(x)}, not an integer")
    try:
        return np.array(rows, np.int64)
    except OverflowError:
        raise _fail(where, f"{key} holds an integer beyond 64 bits") from None


def in_range(values: np.ndarray, lo: int, hi: int, what: str, where: str) -> None:
    """Every value in lo..hi (TopofinderError naming the first that is not)."""
    if values.size and (values.min() < lo or values.max() > hi):
        bad = values[(values < lo) | (values > hi)][0]
        raise _fail(where, f"{what} {int(bad)} is outside {lo}..{hi}")


def consecutive_steps(t: np.ndarray, where: str, declared: int | None = None) -> int:
    """Step indices 1..T with every step used (a step without a send is no step); T equal to
    ``declared`` (num_steps) when given. Returns T."""
    if not t.size:
        if declared:
            raise _fail(where, f"num_steps is {declared} but there are no sends")
        return 0
    in_range(t, 1, t.size, "step", where)             # T ≤ rows: every step holds a send
    steps = int(t.max())
    used = np.bincount(t, minlength=steps + 1)[1:]
    if not used.all():
        raise _fail(where, f"step {int(np.flatnonzero(used == 0)[0]) + 1} has no send: steps "
                           f"must be 1..{steps}, each used")
    if declared is not None and declared != steps:
        raise _fail(where, f"num_steps is {declared} but the sends use steps 1..{steps}")
    return steps


def header(doc, where: str, n_key: str = "num_nodes") -> int:
    """The fields every schedule document shares: an object, format and version (when
    present), topology, method, labels, physical, tau; returns N (2..MAX_NODES)."""
    if not isinstance(doc, dict):
        raise _fail(where, "a schedule document is a JSON object")
    n = integer(doc, n_key, 2, MAX_NODES, where)
    text(doc, "topology", where)
    text(doc, "method", where)
    labels = array(doc, "labels", where, n, required=False)
    if labels is not None:
        if len(labels) != n or not all(isinstance(x, str) and 0 < len(x) <= 256
                                       for x in labels):
            raise _fail(where, f"'labels' must hold one name (a string of 1..256 characters) "
                               f"per node: {n}")
        if len(set(labels)) != n:
            raise _fail(where, "'labels' names two nodes alike")
    physical = doc.get("physical")
    if physical is not None:
        ints = isinstance(physical, list) and len(physical) == n and all(map(is_int, physical))
        perm = np.array(physical if ints else [], np.int64)
        if perm.size != n or not np.array_equal(np.sort(perm), np.arange(n)):
            raise _fail(where, f"'physical' must be a permutation of the nodes 0..{n - 1}")
    if "tau" in doc:
        number(doc["tau"], "tau", where)
    if "tau_exact" in doc:
        ratio(doc["tau_exact"], "tau_exact", where, positive=False)
    return n


def _format(doc: dict, where: str) -> None:
    if doc.get("format", FORMAT) != FORMAT or doc.get("version", VERSION) != VERSION:
        raise _fail(where, f"format {_show(doc.get('format'))} version "
                           f"{_show(doc.get('version'))} is not {FORMAT} version {VERSION}")


def check_step_document(doc, where: str) -> np.ndarray:
    """A step schedule (allgather, reduce-scatter, allreduce): rows t, v, lo, hi, u, w of
    integers with steps 1..T all used, nodes 0..N−1, 0 ≤ lo < hi ≤ shard_chunks,
    reduce_scatter_steps ≤ T. Returns the (S, 6) send table."""
    n = header(doc, where)
    _format(doc, where)
    if doc.get("kind", "steps") != "steps" or doc.get("collective") not in (
            Collective.ALLGATHER, Collective.REDUCE_SCATTER, Collective.ALLREDUCE):
        raise _fail(where, f"kind {_show(doc.get('kind'))} collective "
                           f"{_show(doc.get('collective'))} is not a step schedule's")
    if doc.get("columns", STEP_COLUMNS) != STEP_COLUMNS:
        raise _fail(where, f"'columns' must be {STEP_COLUMNS}")
    p = integer(doc, "shard_chunks", 1, MAX_CHUNKS, where)
    rows = int_table(array(doc, "sends", where), 6, "'sends'", where)
    steps = send_table(rows, n, p, where, integer(doc, "num_steps", 0, MAX_ROWS, where)
                       if "num_steps" in doc else None)
    reduce = integer(doc, "reduce_scatter_steps", 0, steps, where, default=0)
    if doc["collective"] == Collective.ALLREDUCE and "reduce_scatter_steps" in doc \
            and not 0 < reduce < steps:
        raise _fail(where, f"an allreduce's reduce_scatter_steps must be in 1..{steps - 1}")
    return rows


def send_table(rows: np.ndarray, n: int, p: int, where: str, declared: int | None = None,
               consecutive: bool = True) -> int:
    """An (S, 6) send table t, v, lo, hi, u, w of a step schedule on n nodes with p chunks
    per shard: steps 1..T (each used, unless not ``consecutive``: then 1..MAX_ROWS), nodes
    0..n−1, 0 ≤ lo < hi ≤ p. Returns T. (Every reader of step sends: JSON, .npz, MSCCL
    XML.)"""
    if consecutive:
        steps = consecutive_steps(rows[:, 0], where, declared)
    else:
        in_range(rows[:, 0], 1, MAX_ROWS, "step", where)
        steps = int(rows[:, 0].max()) if rows.size else 0
    for j, name in ((1, "node v"), (4, "sender u"), (5, "receiver w")):
        in_range(rows[:, j], 0, n - 1, name, where)
    in_range(rows[:, 2], 0, p - 1, "chunk lo", where)
    in_range(rows[:, 3], 1, p, "chunk hi", where)
    if rows.size and (rows[:, 2] >= rows[:, 3]).any():
        raise _fail(where, "a send has lo >= hi: chunks are the range [lo, hi)")
    return steps


def check_tree_document(doc, where: str) -> None:
    """A tree schedule: trees of a root 0..N−1, a positive "p/q" weight ≤ 1 and edges [u, w]
    of nodes 0..N−1 (at most N − 1 + routes' switches per tree), optional routes; an
    allreduce of trees holds a reduce_scatter and an allgather tree document."""
    n = header(doc, where)
    _format(doc, where)
    if doc.get("kind") != "trees":
        raise _fail(where, "a tree schedule has \"kind\": \"trees\"")
    if doc.get("collective", Collective.ALLGATHER) == Collective.ALLREDUCE:
        for part in ("reduce_scatter", Collective.ALLGATHER.value):
            sub = doc.get(part)
            check_tree_document(sub, f"{where} {part}")
            if sub.get("num_nodes") != n:
                raise _fail(where, f"its {part} trees are for another num_nodes")
        return
    if doc.get("collective", Collective.ALLGATHER) not in (Collective.ALLGATHER,
                                                            Collective.REDUCE_SCATTER):
        raise _fail(where, f"collective {_show(doc.get('collective'))} of trees is not "
                           f"allgather, reduce-scatter or allreduce")
    trees = array(doc, "trees", where)
    edges = 0
    for i, tree in enumerate(trees):
        at = f"{where} tree {i}"
        if not isinstance(tree, dict):
            raise _fail(at, "a tree is an object {root, weight, edges}")
        integer(tree, "root", 0, n - 1, at)
        ratio(tree.get("weight"), "weight", at)
        num, _, den = tree["weight"].partition("/")
        if den and int(num) > int(den) or not den and int(num) > 1:
            raise _fail(at, "a tree's weight is at most 1 (the root's whole shard)")
        pairs = int_table(array(tree, "edges", at, n * n), 2, "'edges'", at)
        in_range(pairs.ravel(), 0, n - 1, "node", at)
        edges += len(pairs)
        for r, route in enumerate(array(tree, "routes", at, required=False) or ()):
            if not isinstance(route, dict):
                raise _fail(at, f"route {r} is an object {{edge, path, weight}}")
            for key in ("edge", "path"):
                hops = int_table([[x] for x in array(route, key, at, n)], 1, key, at)
                in_range(hops.ravel(), 0, n - 1, "node", at)
            ratio(route.get("weight"), "weight", at)
    if edges > MAX_ROWS:
        raise _fail(where, f"{edges} tree edges; at most {MAX_ROWS}")


def check_alltoall_document(doc, where: str) -> np.ndarray:
    """An all-to-all step schedule: rows t, u, w, src, dst (integers, nodes 0..N−1, steps
    1..num_steps — a step budget may leave some empty — or 1..S without it) and amount (a
    finite fraction of the piece in (0, 1]); step_loads of T finite numbers ≥ 0. Returns
    the rows as (S, 6) t, src, 0, 0, u, w (check's send form)."""
    n = header(doc, where)
    _format(doc, where)
    if doc.get("kind", "steps") != "steps" or doc.get("collective") != Collective.ALLTOALL:
        raise _fail(where, "an all-to-all schedule has kind steps, collective alltoall")
    if doc.get("columns", ALLTOALL_COLUMNS) != ALLTOALL_COLUMNS:
        raise _fail(where, f"'columns' must be {ALLTOALL_COLUMNS}")
    rows = array(doc, "sends", where)
    bad = next((i for i, r in enumerate(rows) if type(r) is not list or len(r) != 6), None)
    if bad is not None:
        raise _fail(where, f"'sends' row {bad} must be [t, u, w, src, dst, amount], got "
                           f"{_show(rows[bad])}")
    ints = int_table([r[:5] for r in rows], 5, "'sends'", where)
    for r in rows:
        number(r[5], "amount", where, positive=True)
        if r[5] > 1 + 1e-9:                               # (an LP's rounding above 1)
            raise _fail(where, f"an amount is a fraction of one piece, at most 1: {_show(r[5])}")
    # a step budget (export --steps) may leave steps empty: steps are 1..num_steps
    declared = integer(doc, "num_steps", 0, MAX_ROWS, where) if "num_steps" in doc else None
    in_range(ints[:, 0], 1, len(rows) if declared is None else declared, "step", where)
    steps = declared if declared is not None else int(ints[:, 0].max(initial=0))
    in_range(ints[:, 1:].ravel(), 0, n - 1, "node", where)
    loads = array(doc, "step_loads", where, required=False)
    if loads is not None:
        if len(loads) != steps:
            raise _fail(where, f"'step_loads' must hold one load per step: {steps}")
        for x in loads:
            number(x, "step_loads", where)
    for key in ("bandwidth_time",):
        if key in doc:
            number(doc[key], key, where)
    if "lp_bound" in doc:
        number(doc["lp_bound"], "lp_bound", where, positive=True, null=True)
    if "gap" in doc:
        number(doc["gap"], "gap", where, lo=-math.inf, null=True)
    out = np.zeros((ints.shape[0], 6), np.int64)
    out[:, 0], out[:, 1], out[:, 4], out[:, 5] = ints[:, 0], ints[:, 3], ints[:, 1], ints[:, 2]
    return out


def check_schedule_document(doc, where: str) -> np.ndarray | None:
    """The validator of the document's kind (step, tree or all-to-all schedule); the send
    table of a step or all-to-all schedule (`check`'s (S, 6) form), None for trees."""
    if not isinstance(doc, dict):
        raise _fail(where, "a schedule document is a JSON object")
    if doc.get("format") == ONEROOT_FORMAT:
        check_oneroot_document(doc, where)
        return None
    if doc.get("kind") == "trees":
        check_tree_document(doc, where)
        return None
    if doc.get("collective") == Collective.ALLTOALL:
        return check_alltoall_document(doc, where)
    return check_step_document(doc, where)


def check_oneroot_document(doc, where: str) -> None:
    """A periodic one-root schedule (paper 003): n, root 0..n−1, links [u, w, capacity ≥ 1],
    a positive exact period, trees of a positive integer weight and n parents (−1 at the
    root, else 0..n−1), slots of a positive exact duration and sends u, w, tree, lo, hi, lag
    (integers: nodes 0..n−1, an existing tree, 0 ≤ lo < hi ≤ the tree's weight, lag ≥ 0)."""
    n = header(doc, where, "n")
    if doc.get("format") != ONEROOT_FORMAT or doc.get("version", 1) != 1:
        raise _fail(where, f"not a {ONEROOT_FORMAT} version 1 document")
    if doc.get("collective", Collective.BROADCAST) not in (Collective.BROADCAST,
                                                           Collective.REDUCE):
        raise _fail(where, "a one-root schedule's collective is broadcast or reduce")
    root = integer(doc, "root", 0, n - 1, where)
    if doc.get("port_model") not in ("one", "multi", "node"):
        raise _fail(where, "'port_model' must be one, multi or node")
    ratio(doc.get("node_bandwidth"), "node_bandwidth", where, null=True)
    ratio(doc.get("period"), "period", where)
    links = int_table(array(doc, "links", where), 3, "'links'", where)
    in_range(links[:, :2].ravel(), 0, n - 1, "node", where)
    in_range(links[:, 2], 1, 1 << 40, "link capacity", where)
    trees = array(doc, "trees", where, MAX_ROWS // n)
    weights = []
    for i, tree in enumerate(trees):
        at = f"{where} tree {i}"
        if not isinstance(tree, dict):
            raise _fail(at, "a tree is an object {weight, parent}")
        weights.append(integer(tree, "weight", 1, MAX_CHUNKS, at))
        parent = int_table([[x] for x in array(tree, "parent", at, n)], 1, "'parent'",
                           at).ravel()
        if parent.size != n or parent[root] != -1:
            raise _fail(at, f"'parent' must list {n} parents, -1 at the root {root}")
        in_range(np.delete(parent, root), 0, n - 1, "parent", at)
    if doc.get("send_columns", ONEROOT_COLUMNS) != ONEROOT_COLUMNS:
        raise _fail(where, f"'send_columns' must be {ONEROOT_COLUMNS}")
    total = 0
    for k, slot in enumerate(array(doc, "slots", where)):
        at = f"{where} slot {k}"
        if not isinstance(slot, dict):
            raise _fail(at, "a slot is an object {duration, sends}")
        ratio(slot.get("duration"), "duration", at)
        sends = int_table(array(slot, "sends", at), 6, "'sends'", at)
        total += len(sends)
        in_range(sends[:, :2].ravel(), 0, n - 1, "node", at)
        in_range(sends[:, 2], 0, len(trees) - 1, "tree", at)
        in_range(sends[:, 5], 0, MAX_ROWS, "lag", at)
        if sends.size:
            cap = np.array(weights, np.int64)[sends[:, 2]]
            if ((sends[:, 3] < 0) | (sends[:, 3] >= sends[:, 4]) | (sends[:, 4] > cap)).any():
                raise _fail(at, "a send's messages [lo, hi) must lie in its tree's weight")
    if total > MAX_ROWS:
        raise _fail(where, f"{total} sends; at most {MAX_ROWS}")


def check_search_document(doc, where: str) -> list[dict]:
    """A `search --json` result as `export --pick` reads it: format topofinder-search (when
    present), N and d integers, a non-empty frontier of objects with an expression string
    (and integer T_L, when present); recommended (when present) an index of it. Returns the
    frontier."""
    if not isinstance(doc, dict):
        raise _fail(where, "not a 'topofinder search --json' result (a JSON object)")
    if doc.get("format", "topofinder-search") != "topofinder-search":
        raise _fail(where, f"format {_show(doc.get('format'))} is not topofinder-search")
    integer(doc, "N", 2, MAX_NODES, where)
    integer(doc, "d", 1, MAX_NODES, where)
    frontier = array(doc, "frontier", where, 100_000)
    if not frontier:
        raise _fail(where, "not a 'topofinder search --json' result (no frontier list)")
    for i, p in enumerate(frontier):
        if not isinstance(p, dict):
            raise _fail(where, f"frontier point {i} is not an object")
        text(p, "expr", f"{where} frontier point {i}", required=True)
        if "T_L" in p:
            integer(p, "T_L", 0, MAX_ROWS, f"{where} frontier point {i}")
    if "recommended" in doc:
        integer(doc, "recommended", 0, len(frontier) - 1, where)
    return frontier


def _npz_int(a: dict, key: str, lo: int, hi: int, where: str) -> int:
    x = a[key]
    if x.ndim != 0 or x.dtype.kind not in "iu" or not lo <= int(x) <= hi:
        raise _fail(where, f"array {key!r} must be an integer in {lo}..{hi}")
    return int(x)


def _npz_ints(a: dict, key: str, shape: tuple, where: str) -> np.ndarray:
    """a[key], an integer array of ``shape`` (None: any length) as int64."""
    x = a[key]
    if x.dtype.kind not in "iu" or x.ndim != len(shape) or any(
            s is not None and s != got for s, got in zip(shape, x.shape)):
        raise _fail(where, f"array {key!r} must be integers of shape "
                           f"{tuple('S' if s is None else s for s in shape)}, got {x.dtype} "
                           f"{x.shape}")
    return x.astype(np.int64)


def check_npz(a: dict, where: str) -> None:
    """The arrays of a schedule .npz (topofinder.export.npz) as the JSON validators check
    fields: integer arrays (no floats, bools) of the right shapes, nodes 0..n−1, labels one
    distinct name per node, steps within 1..T (all used in a step schedule), chunks
    0 ≤ lo < hi ≤ shard_chunks, tree weights positive fractions with their edges in range."""
    n = _npz_int(a, "n", 2, MAX_NODES, where)
    src, dst = (_npz_ints(a, k, (None,), where) for k in ("src", "dst"))
    if src.size != dst.size or src.size > MAX_ROWS:
        raise _fail(where, "arrays 'src' and 'dst' must have one equal length (the arcs)")
    in_range(np.concatenate([src, dst]), 0, n - 1, "node", where)
    cap = _npz_ints(a, "capacity", (None,), where)
    if cap.size not in (0, src.size):
        raise _fail(where, "array 'capacity' must be empty or one per arc")
    in_range(cap, 1, 1 << 40, "capacity", where)
    labels = a.get("labels")
    if labels is not None and labels.size:
        names = [str(x) for x in labels.ravel()]
        if labels.ndim != 1 or labels.dtype.kind != "U" or len(names) != n or len(
                set(names)) != n or not all(0 < len(x) <= 256 for x in names):
            raise _fail(where, f"array 'labels' must hold one distinct name per node: {n}")
    kind = str(a["kind"])
    if kind in ("steps", "orbit"):
        p = _npz_int(a, "shard_chunks", 1, MAX_CHUNKS, where)
        rows = _npz_ints(a, "sends", (6, None), where).T
        if rows.shape[0] > MAX_ROWS:
            raise _fail(where, f"{rows.shape[0]} sends; at most {MAX_ROWS}")
        steps = send_table(rows, n, p, where, consecutive=kind == "steps")
        _npz_int(a, "reduce_steps", 0, steps, where)
        if kind == "orbit":
            gens = _npz_ints(a, "generators", (None, n), where)
            in_range(gens.ravel(), 0, n - 1, "generator image", where)
    elif kind == "trees":
        roots, num, den = (_npz_ints(a, k, (None,), where)
                           for k in ("roots", "weight_num", "weight_den"))
        start = _npz_ints(a, "edge_start", (roots.size + 1,), where)
        edges = _npz_ints(a, "edges", (None, 2), where)
        if num.size != roots.size or den.size != roots.size or edges.shape[0] > MAX_ROWS:
            raise _fail(where, "one weight per tree root, at most MAX_ROWS edges")
        in_range(roots, 0, n - 1, "root", where)
        in_range(num, 1, 1 << 62, "weight numerator", where)
        in_range(den, 1, 1 << 62, "weight denominator", where)
        if (num > den).any():
            raise _fail(where, "a tree's weight is at most 1")
        if start.size and (start[0] != 0 or start[-1] != edges.shape[0]
                           or (np.diff(start) < 0).any()):
            raise _fail(where, "array 'edge_start' must rise from 0 to the number of edges")
        in_range(edges.ravel(), 0, n - 1, "node", where)
