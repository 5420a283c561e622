"""Hop distances without an N×N matrix: bit-parallel breadth-first search over blocks of
shard owners (docs/algorithms.md, "Distances at scale").

Row u of a reach table R_t holds one bit per owner v of a block: bit v is set iff v reaches u
in at most t hops. R_0 = {u}, and R_t(u) = R_{t−1}(u) ∪ ⋃_j R_{t−1}(in_j(u)) over the distinct
in-neighbours in_j(u) of u, so a block of 64·w owners costs N·w words per array whatever N is,
and one level is k row gathers. Every consumer (the distance histogram, the diameter, the BFB
Hall counts of topofinder.scoring.allgather.bfb_bits) streams over the blocks and keeps only
per-row or per-level sums: memory O(N·block), never O(N²).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.sparse.csgraph import shortest_path

#: Words (64 owners each) per reach-table row of a block: N·w·8 bytes stay near this size.
BLOCK_BYTES = 1 << 25


def in_slots(n: int, link_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Distinct in-neighbours per node (self-loops dropped) as an (N, k) table padded with the
    node itself, and the summed link capacity per slot (0 in padding)."""
    lm = link_matrix.tocsc()
    lm.sort_indices()
    cnt = np.diff(lm.indptr)
    k = max(int(cnt.max()) if n else 0, 1)
    slots = np.repeat(np.arange(n, dtype=np.int64)[:, None], k, axis=1)
    caps = np.zeros((n, k), np.int64)
    col = np.repeat(np.arange(n), cnt)
    pos = np.arange(lm.indices.size) - np.repeat(lm.indptr[:-1], cnt)
    slots[col, pos] = lm.indices
    caps[col, pos] = lm.data
    return slots, caps


def popcount_rows(bits: np.ndarray) -> np.ndarray:
    """Set bits per row of a (rows, words) uint64 table, as int64."""
    if hasattr(np, "bitwise_count"):                    # numpy >= 2.0
        return np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
    table = np.array([bin(i).count("1") for i in range(256)], np.uint8)
    return table[bits.view(np.uint8)].sum(axis=1, dtype=np.int64)


def block_words(n: int, budget: int = BLOCK_BYTES) -> int:
    """Words per row of a reach block: all N owners when that fits ``budget`` bytes."""
    return int(min(max(budget // (8 * max(n, 1)), 1), (n + 63) // 64))


def owner_blocks(n: int, words: int | None = None) -> Iterator[tuple[int, int]]:
    """Owner ranges [lo, hi) of 64·words owners covering 0..N−1."""
    words = block_words(n) if words is None else words
    step = 64 * words
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def initial_reach(n: int, lo: int, hi: int) -> np.ndarray:
    """R_0 of owners lo..hi−1: row u has bit u − lo when lo ≤ u < hi."""
    words = (hi - lo + 63) // 64
    reach = np.zeros((n, words), np.uint64)
    owners = np.arange(lo, hi)
    local = owners - lo
    reach[owners, local >> 6] = np.left_shift(np.uint64(1), (local & 63).astype(np.uint64))
    return reach


def full_rows(lo: int, hi: int) -> np.ndarray:
    """The (words,) row in which every owner lo..hi−1 is set (padding bits clear)."""
    width = hi - lo
    row = np.full((width + 63) // 64, np.uint64(0xFFFFFFFFFFFFFFFF))
    if width & 63:
        row[-1] = np.uint64((1 << (width & 63)) - 1)
    return row


def levels(slots: np.ndarray, lo: int, hi: int,
           per_slot: bool = True) -> Iterator[tuple[int, np.ndarray, list, np.ndarray]]:
    """BFS levels of owners lo..hi−1: yields (t, R_{t−1}, [R_{t−1}(in_j(u)) for each slot j],
    R_t) for t = 1, 2, … while some row still grows (the list empty unless ``per_slot``: one
    gather buffer instead of k). The arrays are reused between levels: read them before
    asking for the next one."""
    n, k = slots.shape
    reach = initial_reach(n, lo, hi)
    gathered = [np.empty_like(reach) for _ in range(k if per_slot else 1)]
    grown = np.empty_like(reach)
    t = 0
    while True:
        t += 1
        np.copyto(grown, reach)
        for j in range(k):
            buf = gathered[j if per_slot else 0]
            np.take(reach, slots[:, j], axis=0, out=buf)
            np.bitwise_or(grown, buf, out=grown)
        if np.array_equal(grown, reach):
            return
        yield t, reach, gathered if per_slot else [], grown
        reach, grown = grown, reach


def distance_histogram(n: int, link_matrix, vertex_transitive: bool = False) -> np.ndarray:
    """hist[t] = number of ordered pairs (v, u) with dist(v → u) = t (hist[0] = N); the pairs
    that never connect are missing from the total N². Streams over owner blocks (memory
    O(N·block)); a vertex-transitive topology needs one BFS: N times node 0's histogram."""
    if vertex_transitive:
        d = shortest_path(link_matrix, method="D", unweighted=True, directed=True,
                          indices=[0])[0]
        d = d[np.isfinite(d)].astype(np.int64)
        return n * np.bincount(d)
    slots, _ = in_slots(n, link_matrix)
    hist = [n]
    for lo, hi in owner_blocks(n):
        reached_before = hi - lo                 # owners reach themselves at t = 0
        for t, _, _, grown in levels(slots, lo, hi, per_slot=False):
            now = int(popcount_rows(grown).sum())
            if t == len(hist):
                hist.append(0)
            hist[t] += now - reached_before
            reached_before = now
    return np.asarray(hist, np.int64)


def distances_to(slots: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """dist[i, v] = hops v → nodes[i] (int32; −1 when v never reaches it), from the streamed
    reach tables: k row gathers per level instead of one breadth-first search per node, the
    cheaper way on dense topologies (many in-neighbours, few levels)."""
    n = slots.shape[0]
    nodes = np.asarray(nodes, np.int64)
    dist = np.full((nodes.size, n), -1, np.int32)
    dist[np.arange(nodes.size), nodes] = 0
    for lo, hi in owner_blocks(n):
        for t, prev, _, grown in levels(slots, lo, hi, per_slot=False):
            fresh = np.unpackbits((grown[nodes] & ~prev[nodes]).view(np.uint8), axis=1,
                                  count=hi - lo, bitorder="little").astype(bool)
            dist[:, lo:hi][fresh] = t
    return dist
