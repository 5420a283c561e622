"""Layout pass of the rank-program lowering: where each (shard, chunk) piece sits in a buffer.

A layout gives channel 0's chunk c of shard v the piece offset ``base[v] + c·stride[v]``
(instance j adds its own shift, :func:`channel_shift`). allgather and reduce-scatter keep
NCCL's shard order (:func:`shard_layout`: base v·k·P, stride 1). allreduce's element order is
free as long as input and output share it, and it decides how many instructions its two
phases need: a message is one instruction only where its pieces are contiguous at both ends.

On a line graph L^k(G) a node is a walk x0 → … → xk of G. The allgather phase brings over an
arc the shards whose walks *end* alike (one class of the s-th quotient by "same
out-neighbours", a suffix of the walk); the reduce phase (the allgather of Gᵀ, reversed) the
shards whose walks *start* alike (a class by "same in-neighbours", a prefix). No order makes
both kinds of class intervals; ordering first by the coarsest out- and in-classes (xk, x0),
then by chunk, then by the finer classes alternately, keeps the sets both phases send mostly
contiguous (measured on
L^3(C(16,{1,6})): per-rank instruction bounds 997 + 1057 against 1211 + 2774 for the
out-quotient order). :func:`allreduce_layouts` lists such candidates; the lowering keeps the
one whose instruction bound is least (:func:`~topofinder.export.ir.bounds.layout_for`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topofinder.model.collectives import Collective
from topofinder.model.topology import Topology


@dataclass(frozen=True)
class PieceLayout:
    """Piece offsets of one instance: shard v's chunk c at ``base[v] + c·stride[v]``, a
    bijection of the N·P (shard, chunk) pairs onto [0, N·P) (allreduce) or onto the pieces of
    instance 0 (shard layouts). ``name``: how it was built (the order of its keys)."""

    base: np.ndarray
    stride: np.ndarray
    p: int
    name: str

    def table(self) -> np.ndarray:
        """(N, P) offsets."""
        return self.base[:, None] + np.arange(self.p)[None, :] * self.stride[:, None]

    def inverse(self, size: int) -> np.ndarray:
        """For each of ``size`` offsets: v·P + c of the piece there, −1 where none is."""
        inv = np.full(size, -1, np.int64)
        inv[self.table().ravel()] = np.arange(self.base.size * self.p)
        return inv


def shard_layout(n: int, p: int, k: int) -> PieceLayout:
    """NCCL's order for allgather and reduce-scatter: shard v's pieces in [v·kP, (v+1)·kP)."""
    return PieceLayout(np.arange(n, dtype=np.int64) * k * p, np.ones(n, np.int64), p, "shard")


def root_layout(n: int, p: int) -> PieceLayout:
    """A broadcast's buffers: the root's P chunks at [0, P) on every rank (chunk c of any
    shard at c; only the root's shard is sent)."""
    return PieceLayout(np.zeros(n, np.int64), np.ones(n, np.int64), p, "root")


def channel_shift(coll: str, n: int, p: int, j: int) -> int:
    """Offset of instance j's pieces: its own block of N·P (allreduce), else j·P inside each
    shard's k·P."""
    return j * n * p if coll == Collective.ALLREDUCE else j * p


def quotient_chain(src: np.ndarray, dst: np.ndarray, n: int) -> list[np.ndarray]:
    """Per node, its class in the iterated quotients by "same out-neighbours" (arcs src →
    dst), finest first, until no two classes share their out-neighbours. On L^k(G) level s
    groups the walks by their last k − s + 1 nodes."""
    levels, comp = [], None
    while True:
        outs = [set() for _ in range(n)]
        for a, b in zip(src.tolist(), dst.tolist()):
            outs[a].add(b)
        ids: dict = {}
        cls = np.array([ids.setdefault(frozenset(x), len(ids)) for x in outs], np.int64)
        if len(ids) == n:
            return levels
        comp = cls if comp is None else cls[comp]
        levels.append(comp)
        src, dst, n = cls[src], cls[dst], len(ids)


def ordered_layout(n: int, keys: list, chunk_at: int, p: int, name: str) -> PieceLayout:
    """The layout sorting the pieces of N nodes by ``keys`` (per-node arrays, most significant
    first) with the chunk index inserted as key ``chunk_at``, ties by node id. Nodes equal in
    the keys before the chunk form a group of g: its chunk c sits in a block of g, so the
    layout is base + c·g."""
    order = np.lexsort([np.arange(n)] + keys[::-1])
    before = np.stack([k[order] for k in keys[:chunk_at]], axis=1) if chunk_at else \
        np.zeros((n, 0), np.int64)
    new = np.r_[True, (before[1:] != before[:-1]).any(axis=1)]
    gid = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    size = np.diff(np.r_[start, n])
    base, stride = np.empty(n, np.int64), np.empty(n, np.int64)
    base[order] = start[gid] * p + np.arange(n) - start[gid]
    stride[order] = size[gid]
    return PieceLayout(base, stride, p, name)


def allreduce_layouts(topology: Topology, p: int) -> list[PieceLayout]:
    """Candidate allreduce layouts (module doc), the first the out-quotient order shard by
    shard (each shard's chunks together); then the coarsest out- and in-classes, chunk, the
    finer classes alternately (out first, and in first); then chunk-major out-quotient."""
    n = topology.n
    outs = quotient_chain(topology.src, topology.dst, n)[::-1]      # coarsest first
    ins = quotient_chain(topology.dst, topology.src, n)[::-1]
    alt_o = [x for pair in zip(outs, ins) for x in pair] + outs[len(ins):] + ins[len(outs):]
    alt_i = [x for pair in zip(ins, outs) for x in pair] + ins[len(outs):] + outs[len(ins):]
    ident = np.arange(n)
    cands = [ordered_layout(n, outs + [ident], len(outs) + 1, p, "out-quotient, shard-major")]
    if outs and ins:
        cands += [ordered_layout(n, alt_o, 2, p, "out/in classes, chunk, finer classes"),
                  ordered_layout(n, alt_i, 2, p, "in/out classes, chunk, finer classes")]
    cands.append(ordered_layout(n, outs, 0, p, "chunk-major, out-quotient"))
    return cands
