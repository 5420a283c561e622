"""Re-import of MSCCL XML: the step schedule an XML from
:func:`~topofinder.export.msccl.writer.to_msccl_xml` carries, recovered by executing it in
the model (:mod:`topofinder.export.msccl.execution`) and reading which pieces cross which
connection at which schedule step ``t``."""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.layout import PieceLayout, shard_layout
from topofinder.export.msccl.execution import execute
from topofinder.export.msccl.parser import parse
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology


def parse_msccl_xml(text: str) -> dict:
    """Recover the step schedule an XML from
    :func:`~topofinder.export.msccl.writer.to_msccl_xml` carries, by executing it
    (unbounded buffers) and reading which pieces cross which connection at which step ``t``;
    checks that the program computes its collective and that every channel carries the same
    sends. Returns {"collective", "topology", "num_nodes", "shard_chunks", "channels",
    "protocol", "reduce_scatter_steps", "sends": (S, 6) array (t, v, lo, hi, u, w), sorted,
    consecutive chunks of one (t, v, u, w) merged into one row, "labels" (the gpus' ``label``
    attributes or None), "physical" (the ``physical`` attribute of an `export --relabel` file,
    or None)}."""
    algo = parse(text)
    a = algo.attrs
    try:
        n, p = algo.ngpus, int(a["shard_chunks"])
        layout = a.get("layout", "shard")
        k = algo.nchunksperloop // (n * p)          # instances; each on nchannels/k lanes
        lanes = algo.nchannels // k
    except (KeyError, ValueError, ZeroDivisionError):
        raise TopofinderError("MSCCL XML lacks topofinder's shard_chunks attribute") from None
    run = execute(algo, capacity=1 << 40, inplace=algo.inplace and not algo.outofplace,
                  record=True)
    gpus = sorted(algo.gpus, key=lambda g: g.id)        # (attributes kept by the stream parse)
    sends = _sent_rows(run["transfers"], n, p, k, lanes,
                       _piece_at(gpus, n, p) if layout == "channel" else None)
    names = {g.id: g.attrs.get("label") for g in gpus}
    labels = tuple(names.get(i) or str(i) for i in range(n)) if any(names.values()) else None
    try:
        physical = [int(x) for x in a["physical"].split()] if a.get("physical") else None
    except ValueError:
        raise TopofinderError("MSCCL XML: the physical attribute is not a list of node ids") \
            from None
    return {"collective": algo.collective, "topology": a.get("topology"), "num_nodes": n,
            "shard_chunks": p, "channels": k, "protocol": algo.proto,
            "reduce_scatter_steps": int(a.get("reduce_scatter_steps", 0)), "sends": sends,
            "labels": labels, "physical": physical}


def _sent_rows(tr: np.ndarray, n: int, p: int, k: int, lanes: int, piece_at) -> np.ndarray:
    """The send rows (t, v, lo, hi, u, w), sorted, of recorded transfers (rows src, dst,
    chan, t, element; ``piece_at``: the allreduce layout's inverse, None for the shard
    layout), chunks c of one (t, v, u, w) merged where consecutive; TopofinderError unless
    every channel carries its own instance's pieces and all instances the same sends."""
    u, w, chan, t, elem = (tr[:, i] for i in range(5))
    if piece_at is not None:
        j, rest = np.divmod(elem, n * p)
        v, c = np.divmod(piece_at[rest], p)
    else:
        v, rest = np.divmod(elem, k * p)
        j, c = np.divmod(rest, p)
    bad = np.flatnonzero(j != chan // lanes)
    if bad.size:
        raise TopofinderError(f"MSCCL XML: channel {chan[bad[0]]} carries a piece of instance "
                              f"{j[bad[0]]}")
    rows = np.unique(np.column_stack([j, t, v, u, w, c]), axis=0)
    per = [rows[rows[:, 0] == x, 1:] for x in range(k)]
    if any(x.shape != per[0].shape or (x != per[0]).any() for x in per[1:]):
        raise TopofinderError("MSCCL XML: the channels do not carry the same schedule")
    r = per[0]                                  # (t, v, u, w, c), sorted
    if not r.shape[0]:
        return np.zeros((0, 6), np.int64)
    brk = np.r_[True, (r[1:, :4] != r[:-1, :4]).any(axis=1) | (r[1:, 4] != r[:-1, 4] + 1)]
    start = np.flatnonzero(brk)
    end = np.r_[start[1:], r.shape[0]] - 1
    sends = np.column_stack([r[start, 0], r[start, 1], r[start, 4], r[end, 4] + 1,
                             r[start, 2], r[start, 3]]).astype(np.int64)
    return sends[np.lexsort(sends.T[::-1])]


def _piece_at(gpus: list, n: int, p: int) -> np.ndarray:
    """For each offset of an allreduce instance, v·P + c of the piece there, from the gpus'
    (in id order) ``base`` and ``stride`` attributes (identity order when none has them);
    TopofinderError unless they place the N·P pieces on distinct offsets of [0, N·P)."""
    try:
        if all("base" not in g.attrs and "stride" not in g.attrs for g in gpus):
            layout = shard_layout(n, p, 1)
        else:
            layout = PieceLayout(np.array([int(g.attrs["base"]) for g in gpus], np.int64),
                                 np.array([int(g.attrs["stride"]) for g in gpus], np.int64),
                                 p, "xml")
        table = layout.table()
    except (KeyError, ValueError):
        table = None
    if table is None or table.shape[0] != n or table.min(initial=0) < 0 or \
            table.max(initial=0) >= n * p or np.unique(table).size != n * p:
        raise TopofinderError("MSCCL XML: the gpus' base and stride attributes do not place "
                              "every piece once")
    return layout.inverse(n * p)


def schedule_from_xml(text: str, topology: Topology) -> StepSchedule:
    """The step schedule an XML from :func:`~topofinder.export.msccl.writer.to_msccl_xml`
    encodes, on ``topology``."""
    doc = parse_msccl_xml(text)
    if doc["num_nodes"] != topology.n:
        raise TopofinderError(f"the XML is for {doc['num_nodes']} ranks, {topology.expr} has "
                              f"{topology.n} nodes")
    return StepSchedule(topology, doc["shard_chunks"], doc["sends"],
                        collective=doc["collective"],
                        reduce_steps=doc["reduce_scatter_steps"]
                        if doc["collective"] == Collective.ALLREDUCE else 0)
