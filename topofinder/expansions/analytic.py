"""Analytical allgather schedules of the small generative bases (paper 001 Table 9, App. D.3,
F.1): K(m), K(d,d), H(n,q), DC(d+2,{1..d}), BiRing(d,m), UniRing(d,m), at the degrees the finder
uses, and the command that writes them into the catalog. T_L in steps, τ in M/B."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from topofinder.expansions.schedules import power_schedule
from topofinder.families import (
    bi_ring, complete, complete_bipartite, directed_circulant, hamming, uni_ring,
)
from topofinder.families.catalog import write_entry
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology

STATIC_COMMAND = "python3 -c 'from topofinder.expansions.analytic import build_static_entries; " \
                 "build_static_entries()'"


def _step_schedule(topo: Topology, chunks: int, rows, method: str = "bfb") -> StepSchedule:
    return StepSchedule(topo, chunks, np.asarray(rows, np.int64).reshape(-1, 6), method=method)


def complete_schedule(m: int) -> StepSchedule:
    """K(m): one step, every node sends its shard to all m−1 others; τ = (m−1)/m."""
    g = complete(m)
    one = np.ones(g.num_arcs, np.int64)
    return _step_schedule(g, 1, np.stack([one, g.src, 0 * one, one, g.src, g.dst], 1))


def bipartite_schedule(d: int) -> StepSchedule:
    """K(d,d) BFB: step 1 own shard to the d neighbours; step 2 the d in-neighbours of u send
    1/d each of every other shard of u's side. T_L = 2, τ = (2d−1)/(2d)."""
    g = complete_bipartite(d)
    first = np.stack([np.ones(g.num_arcs, np.int64), g.src, 0 * g.src, d + 0 * g.src, g.src,
                      g.dst], 1)
    u, v, a = np.meshgrid(np.arange(2 * d), np.arange(d), np.arange(d), indexing="ij")
    v = (u // d) * d + v                                   # same side as u
    w = (1 - u // d) * d + a                               # a-th in-neighbour of u
    keep = (v != u).reshape(-1)
    second = np.stack([2 + 0 * u, v, a, a + 1, w, u], -1).reshape(-1, 6)[keep]
    return _step_schedule(g, d, np.concatenate([first, second]))


def hamming_schedule(n: int, q: int) -> StepSchedule:
    """H(n,q) = K_q^□n: the Cartesian-power schedule (Def 14) of K(q)'s one-step schedule;
    T_L = n, τ = (q^n−1)/q^n (Thm 12, Cor 12.1)."""
    if n == 1:
        a = complete_schedule(q)
        return _step_schedule(hamming(1, q), a.shard_chunks, a.sends)
    a = power_schedule(complete_schedule(q), n)
    return _step_schedule(hamming(n, q), a.shard_chunks, a.sends, a.method)


def circulant_schedule(d: int) -> StepSchedule:
    """DC(d+2,{1..d}) BFB: step 1 own shard to the d out-neighbours; step 2 node u receives the
    shard of u+1 (its one node at distance 2), chunk a−1 from in-neighbour u−a. T_L = 2,
    τ = (d+1)/(d+2)."""
    m = d + 2
    g = directed_circulant(m, range(1, d + 1))
    first = np.stack([np.ones(g.num_arcs, np.int64), g.src, 0 * g.src, d + 0 * g.src, g.src,
                      g.dst], 1)
    u, a = np.meshgrid(np.arange(m), np.arange(1, d + 1), indexing="ij")
    second = np.stack([2 + 0 * u, (u + 1) % m, a - 1, a, (u - a) % m, u], -1).reshape(-1, 6)
    return _step_schedule(g, d, np.concatenate([first, second]))


def bi_ring_schedule(d: int, m: int) -> StepSchedule:
    """BiRing(d,m) BFB (App. F.1): shards travel both ways on the d/2-fold links; for even m
    the antipode's shard arrives half from each side (P = 2). T_L = ⌊m/2⌋, τ = (m−1)/m."""
    g = bi_ring(d, m)
    t, u = np.meshgrid(np.arange(1, m // 2 + 1), np.arange(m), indexing="ij")
    t, u = t.reshape(-1), u.reshape(-1)
    split = (m % 2 == 0) & (t == m // 2)
    right = np.stack([t, (u - t + 1) % m, 0 * t, np.where(split, 1, 2), u, (u + 1) % m], 1)
    left = np.stack([t, (u + t - 1) % m, np.where(split, 1, 0), 2 + 0 * t, u, (u - 1) % m], 1)
    return _step_schedule(g, 2, np.concatenate([right, left]))


def uni_ring_schedule(d: int, m: int) -> StepSchedule:
    """UniRing(d,m): at step t node u forwards the shard of u−t+1 over its d-fold link;
    T_L = m−1, τ = (m−1)/m."""
    t, u = np.meshgrid(np.arange(1, m), np.arange(m), indexing="ij")
    t, u = t.reshape(-1), u.reshape(-1)
    return _step_schedule(uni_ring(d, m), 1,
                          np.stack([t, (u - t + 1) % m, 0 * t, 1 + 0 * t, u, (u + 1) % m], 1))


STATIC_BASES = (
    [(complete_schedule, (m,)) for m in (3, 4, 5, 9, 17)]
    + [(bipartite_schedule, (d,)) for d in (2, 3, 4, 8)]
    + [(hamming_schedule, nq) for nq in ((2, 3), (2, 5), (3, 3), (4, 2), (2, 9))]
    + [(circulant_schedule, (d,)) for d in (2, 3, 4, 8)]
    + [(bi_ring_schedule, dm) for dm in ((2, 4), (2, 6), (2, 8), (4, 8))]
    + [(uni_ring_schedule, dm) for dm in ((1, 4), (1, 8), (2, 4))]
)
"""The small generative bases of Table 9 with their analytical (BFB) schedules, at the degrees
the finder uses: K(m), K(d,d), H(n,q), DC(d+2,{1..d}), BiRing(d,m), UniRing(d,m)."""


def build_static_entries(directory: Path | None = None) -> list[Path]:
    """(Re)write the entries of :data:`STATIC_BASES`, each schedule validated first."""
    paths = []
    for build, args in STATIC_BASES:
        start = time.perf_counter()
        schedule = build(*args)
        seconds = round(time.perf_counter() - start, 4)
        paths.append(write_entry(schedule.topology, schedule, {
            "command": STATIC_COMMAND,
            "method": f"analytical {build.__name__}{args} ({schedule.method})",
            "source": "paper 001 Table 9 (generative base), App. D.3, F.1",
            "seconds": seconds}, directory))
    return paths
