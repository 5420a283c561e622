"""A set of per-rank schedule files checked together (docs/formats.md, "Per-rank schedule";
`check PLAN R0.json R1.json ...`): each file well formed (every value an integer in range, its
sends leaving its ranks and its receives entering them), the files of one schedule (same
collective, topology, N, P, steps), no rank in two files, and every send from one file's rank
to another file's rank listed as a receive there — and the other way round, row for row. The
union of their rows is then checked against the plan like any schedule (cabling.check)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from topofinder.cabling.check import Sends
from topofinder.errors import TopofinderError
from topofinder.export.npz import read_arrays
from topofinder.families.build import document_topology
from topofinder.finder.per_rank import RANK_COLLECTIVES, RANK_FORMAT, RANK_VERSION
from topofinder.model.inputs import read_input
from topofinder.model.topology import MAX_NODES

#: fields every rank file carries that must agree across the set
_SHARED = ("collective", "topology", "num_nodes", "shard_chunks", "num_steps")


def is_rank_document(path) -> bool:
    """Whether ``path`` looks like a per-rank schedule file, from its head alone (the format
    field `export --rank` writes first, or an .npz member of that name): no file is parsed
    here, so a schedule that is not one goes to its own reader whole."""
    path = Path(path)
    try:
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as z:
                return "kind.npy" in z.namelist() and "ranks.npy" in z.namelist()
        with open(path, "rb") as fh:
            head = fh.read(200)
    except (OSError, zipfile.BadZipFile):
        return False
    return f'"format": "{RANK_FORMAT}"'.encode() in head


def _read(path) -> dict:
    path = Path(path)
    if path.suffix == ".npz":
        raw = read_arrays(path, "rank schedule")
        doc = {k: (v.item() if v.ndim == 0 else v) for k, v in raw.items()}
        for k in ("format", "topology", "collective", "kind", "method", "made"):
            if k in doc:
                doc[k] = str(doc[k])
        return doc
    doc = _json(read_input(path, "rank schedule"), str(path))
    if not isinstance(doc, dict):
        raise TopofinderError(f"rank schedule {path}: not a JSON object")
    return doc


def _json(text, where: str):
    """The JSON value of ``text``, parsed by the C decoder (a rank file holds millions of
    integers: model.inputs.read_json's per-integer length check costs minutes there; Python's
    own limit on integer digits applies, and every value is range-checked after); a repeated
    key in an object is refused."""
    def unique(pairs: list) -> dict:
        doc = dict(pairs)
        if len(doc) != len(pairs):
            raise ValueError("a key appears twice in one object")
        return doc
    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise TopofinderError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise TopofinderError(f"{where}: not a usable JSON document ({exc})") from None


def _int(doc, key, path, lo, hi=None) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo or \
            (hi is not None and v > hi):
        raise TopofinderError(f"rank schedule {path}: '{key}' must be an integer in "
                              f"[{lo}, {hi if hi is not None else 'inf'}], got {v!r}")
    return int(v)


def _rows(doc, key, path) -> np.ndarray:
    v = doc.get(key)
    try:
        a = np.asarray(v)
        if a.size == 0:
            return np.zeros((0, 6), np.int64)
        if a.ndim != 2 or a.shape[1] != 6 or a.dtype.kind not in "iu":
            raise ValueError
    except (ValueError, TypeError):
        raise TopofinderError(f"rank schedule {path}: '{key}' must be a list of rows of six "
                              f"integers (t, v, lo, hi, u, w)") from None
    return a.astype(np.int64)


def read_rank_file(path) -> dict:
    """One per-rank file, checked (module docstring); its rows as arrays."""
    doc = _read(path)
    if doc.get("format") != RANK_FORMAT or doc.get("kind") != "rank-steps":
        raise TopofinderError(f"{path}: not a per-rank schedule ({RANK_FORMAT})")
    _int(doc, "version", path, RANK_VERSION, RANK_VERSION)
    if doc.get("collective") not in RANK_COLLECTIVES:
        raise TopofinderError(f"rank schedule {path}: collective must be one of "
                              f"{', '.join(RANK_COLLECTIVES)}")
    if not isinstance(doc.get("topology"), str):
        raise TopofinderError(f"rank schedule {path}: 'topology' must name the topology")
    n = _int(doc, "num_nodes", path, 2, MAX_NODES)
    p = _int(doc, "shard_chunks", path, 1, 2 ** 40)
    steps = _int(doc, "num_steps", path, 0, 10 ** 6)
    ranks = np.asarray(doc.get("ranks"))
    if ranks.ndim != 1 or ranks.size == 0 or ranks.dtype.kind not in "iu" \
            or ranks.min() < 0 or ranks.max() >= n or np.unique(ranks).size != ranks.size:
        raise TopofinderError(f"rank schedule {path}: 'ranks' must be distinct integers in "
                              f"0..{n - 1}")
    out = {k: doc[k] for k in _SHARED}
    out.update(path=str(path), ranks=ranks.astype(np.int64))
    for key, col in (("sends", 4), ("receives", 5)):
        rows = _rows(doc, key, path)
        t, lo, hi = rows[:, 0], rows[:, 2], rows[:, 3]
        nodes = rows[:, [1, 4, 5]]
        bad = (t < 1) | (t > steps) | (lo < 0) | (hi > p) | (lo >= hi) | \
            (nodes < 0).any(1) | (nodes >= n).any(1) | ~np.isin(rows[:, col], out["ranks"])
        if bad.any():
            r = rows[int(np.argmax(bad))].tolist()
            raise TopofinderError(f"rank schedule {path}: {key} row {r} is out of range or "
                                  f"not {'sent' if col == 4 else 'received'} by its ranks")
        out[key] = rows
    return out


def _canon(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])] if rows.size else rows


def combined_sends(paths) -> Sends:
    """The rows of a set of per-rank files, checked together (module docstring), as the
    Sends cabling.check takes."""
    files = [read_rank_file(p) for p in paths]
    first = files[0]
    for f in files[1:]:
        for k in _SHARED:
            if f[k] != first[k]:
                raise TopofinderError(f"{f['path']}: {k} {f[k]!r} differs from "
                                      f"{first['path']}'s {first[k]!r}")
    owner = np.concatenate([f["ranks"] for f in files])
    if np.unique(owner).size != owner.size:
        raise TopofinderError("a rank appears in two of the per-rank files")
    sends = np.concatenate([f["sends"] for f in files])
    receives = np.concatenate([f["receives"] for f in files])
    out = _canon(sends[np.isin(sends[:, 5], owner)])
    into = _canon(receives[np.isin(receives[:, 4], owner)])
    if not np.array_equal(out, into):
        extra = _first_missing(out, into)
        where = "a send no file receives" if extra is not None else "a receive no file sends"
        row = extra if extra is not None else _first_missing(into, out)
        raise TopofinderError(f"per-rank files disagree: {where}: (t, v, lo, hi, u, w) = "
                              f"{row}")
    topo = document_topology(first["topology"], "rank schedule")
    if topo.n != first["num_nodes"]:
        raise TopofinderError(f"{first['path']}: {first['topology']} has {topo.n} nodes, "
                              f"the file says {first['num_nodes']}")
    rows = np.concatenate([sends, receives])
    return Sends(rows, "steps", int(first["num_nodes"]), topo, None,
                 f"{len(files)} per-rank files, {owner.size} ranks, sends and receives agree")


def _first_missing(a: np.ndarray, b: np.ndarray):
    """A row of ``a`` (with multiplicity) that ``b`` lacks, or None."""
    rows_b: dict = {}
    for r in map(tuple, b.tolist()):
        rows_b[r] = rows_b.get(r, 0) + 1
    for r in map(tuple, a.tolist()):
        if rows_b.get(r, 0) == 0:
            return list(r)
        rows_b[r] -= 1
    return None
