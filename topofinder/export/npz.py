"""Compact NumPy .npz export of schedules for large N (docs/formats.md), with exact round trip.

A step schedule is stored as its send table, column-major (6 × S: the columns t, v, lo, hi, u,
w each contiguous, which deflate compresses far better than rows), in the narrowest integer
type that holds it, plus the topology's arcs, so a file re-imports without parsing expressions:
keys ``kind`` ("steps"), ``collective``, ``topology`` (expression), ``method``,
``shard_chunks``, ``reduce_steps``, ``n``, ``src``, ``dst``, ``capacity`` (empty: all ones),
``labels`` (host name of every rank; empty: none), ``sends``. A tree schedule (kind "trees") stores ``roots``, ``weight_num``/``weight_den``
(exact Fractions), ``edge_start`` (offsets into) ``edges`` (E × 2). A step schedule in orbit form
(kind "orbit", :class:`topofinder.model.symmetric.OrbitSchedule`: N = 10^5 and beyond, where the
N²·d rows of the whole schedule do not fit) stores ``collective``, ``shard_chunks``,
``reduce_steps``, the representatives' ``sends`` (as a step schedule's) and ``generators``
(g × N node permutations); the schedule is their equivariant extension, replayed by
:func:`topofinder.model.symmetric.replay_by_symmetry`.
"""

from __future__ import annotations

import zipfile
from fractions import Fraction

import numpy as np

from topofinder.compute.output import atomic_output, note_input
from topofinder.errors import TopofinderError
from topofinder.model.documents import check_npz
from topofinder.model.schedule import StepSchedule
from topofinder.model.symmetric import OrbitSchedule
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import Tree, TreeSchedule
from topofinder.model.collectives import Collective


def _narrow(a: np.ndarray) -> np.ndarray:
    """The smallest signed integer dtype holding ``a``."""
    a = np.asarray(a, np.int64)
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(dt)
    return a


def _topology_arrays(topo: Topology) -> dict:
    return {"topology": np.array(topo.expr), "n": np.array(topo.n),
            "src": _narrow(topo.src), "dst": _narrow(topo.dst),
            "capacity": _narrow(topo.capacity if topo.capacity is not None else []),
            "labels": np.array(topo.labels if topo.labels is not None else [], dtype=str)}


def save_npz(schedule: StepSchedule | TreeSchedule | OrbitSchedule, path) -> None:
    """Write ``schedule`` to ``path`` (.npz, compressed)."""
    arrays = _topology_arrays(schedule.topology)
    arrays["method"] = np.array(schedule.method)
    if isinstance(schedule, StepSchedule):
        arrays.update(kind=np.array("steps"), collective=np.array(schedule.collective),
                      shard_chunks=np.array(schedule.shard_chunks),
                      reduce_steps=np.array(schedule.reduce_steps),
                      sends=np.ascontiguousarray(_narrow(schedule.sends).T))
    elif isinstance(schedule, TreeSchedule):
        trees = schedule.trees
        sizes = [len(t.edges) for t in trees]
        edges = np.array([e for t in trees for e in t.edges], np.int64).reshape(-1, 2)
        arrays.update(kind=np.array("trees"), collective=np.array(Collective.ALLGATHER),
                      roots=_narrow([t.root for t in trees]),
                      weight_num=np.array([t.weight.numerator for t in trees], np.int64),
                      weight_den=np.array([t.weight.denominator for t in trees], np.int64),
                      edge_start=_narrow(np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])),
                      edges=_narrow(edges))
    elif isinstance(schedule, OrbitSchedule):
        arrays.update(kind=np.array("orbit"), collective=np.array(schedule.collective),
                      shard_chunks=np.array(schedule.shard_chunks),
                      reduce_steps=np.array(schedule.reduce_steps),
                      sends=np.ascontiguousarray(_narrow(schedule.sends).T),
                      generators=_narrow(np.array(schedule.generators, np.int64)
                                         .reshape(-1, schedule.topology.n)))
    else:
        raise TopofinderError(f"cannot write a {type(schedule).__name__} as .npz")
    with atomic_output(path, "wb") as f:
        np.savez_compressed(f, **arrays)


#: Largest total size of the arrays of a schedule .npz read back (bytes, uncompressed): the
#: array headers are checked against it before anything is decompressed (a zip bomb stops here).
MAX_NPZ_BYTES = 1 << 31
_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _array_sizes(path) -> None:
    """TopofinderError unless every member of the .npz at ``path`` is a .npy array whose
    declared size fits its zip entry and all together stay within MAX_NPZ_BYTES."""
    total = 0
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version not in _HEADERS:
                    raise ValueError(f"array {info.filename}: .npy version {version}")
                shape, _, dtype = _HEADERS[version](fh)
            if dtype.hasobject:
                raise ValueError(f"array {info.filename} holds Python objects")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes > info.file_size:
                raise ValueError(f"array {info.filename} declares more data than it holds")
            total += info.file_size
    if total > MAX_NPZ_BYTES:
        raise ValueError(f"its arrays hold {total} bytes uncompressed; at most "
                         f"{MAX_NPZ_BYTES} are read")


def read_arrays(path, what: str) -> dict:
    """The arrays of the .npz at ``path``, sizes checked before decompressing (MAX_NPZ_BYTES)
    and nothing unpickled; a TopofinderError naming ``what`` when it cannot be read."""
    try:
        _array_sizes(path)
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TopofinderError(f"cannot read {what} {path}: {exc}") from None


def load_npz(path) -> StepSchedule | TreeSchedule | OrbitSchedule:
    """Read a schedule written by :func:`save_npz` (validate it separately); sizes are checked
    before decompressing (MAX_NPZ_BYTES), objects are never unpickled."""
    note_input(path)
    a = read_arrays(path, "schedule .npz")
    try:
        check_npz(a, f"schedule .npz {path}")
        cap = a["capacity"].astype(np.int64)
        topo = Topology(int(a["n"]), a["src"].astype(np.int64), a["dst"].astype(np.int64),
                        expr=str(a["topology"]), capacity=cap if cap.size else None,
                        labels=[str(x) for x in a["labels"]] if a.get("labels") is not None
                        and a["labels"].size else None)
        kind = str(a["kind"])
        if kind == "steps":
            return StepSchedule(topo, int(a["shard_chunks"]), a["sends"].T.astype(np.int64),
                                collective=str(a["collective"]), method=str(a["method"]),
                                reduce_steps=int(a["reduce_steps"]))
        if kind == "orbit":
            return OrbitSchedule(topo, int(a["shard_chunks"]), a["sends"].T.astype(np.int64),
                                 tuple(a["generators"].astype(np.int64)),
                                 method=str(a["method"]), collective=str(a["collective"]),
                                 reduce_steps=int(a["reduce_steps"]))
        if kind == "trees":
            start, edges = a["edge_start"].astype(np.int64), a["edges"].astype(np.int64)
            trees = [Tree(int(r), Fraction(int(p), int(q)),
                          [tuple(e) for e in edges[start[i]:start[i + 1]].tolist()])
                     for i, (r, p, q) in enumerate(zip(a["roots"], a["weight_num"],
                                                       a["weight_den"]))]
            return TreeSchedule(topo, trees, method=str(a["method"]))
    except KeyError as exc:
        raise TopofinderError(f"schedule .npz {path} lacks the array {exc}") from None
    except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        if isinstance(exc, TopofinderError):
            raise
        raise TopofinderError(f"schedule .npz {path}: malformed arrays ({exc})") from None
    raise TopofinderError(f"schedule .npz {path}: kind {kind!r} is not steps, orbit or trees")
