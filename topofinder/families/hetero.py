"""Random heterogeneous directed platforms (the test and bench instances of one-root
collectives, issue 40): a directed ring 0→1→…→N−1→0 (so every node reaches every other)
plus uniform random arcs, ``arcs_per_node`` out-arcs per node in all, each with a capacity
drawn uniformly from ``capacities`` (units of b; cost c = 1/capacity, paper 003 §2)."""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

#: The capacity set of issue 40's instances.
CAPACITIES = (1, 2, 3, 5, 8)


def random_platform(n: int, arcs_per_node: int = 4, seed: int = 0,
                    capacities=CAPACITIES) -> Topology:
    """Node u's out-arcs: the ring arc u→u+1 and ``arcs_per_node`` − 1 heads drawn without
    replacement from the other nodes (not u, not u+1); capacities i.i.d. uniform on
    ``capacities``. Deterministic in (n, arcs_per_node, seed, capacities)."""
    if n < 3 or not 1 <= arcs_per_node <= n - 1:
        raise TopofinderError(f"random_platform needs N >= 3 and 1 <= arcs per node <= N - 1, "
                              f"got N = {n}, {arcs_per_node}")
    rng = np.random.default_rng([n, arcs_per_node, seed])
    src, dst = [np.arange(n)], [(np.arange(n) + 1) % n]
    extra = arcs_per_node - 1
    if extra:
        # heads from 0..n-3 shifted past u and u+1: uniform over the n-2 other nodes
        heads = np.stack([rng.choice(n - 2, extra, replace=False) for _ in range(n)])
        heads = (np.arange(n)[:, None] + 2 + heads) % n
        src.append(np.repeat(np.arange(n), extra))
        dst.append(heads.reshape(-1))
    src, dst = np.concatenate(src), np.concatenate(dst)
    cap = rng.choice(np.asarray(capacities, np.int64), src.size)
    return Topology(n, src, dst, expr=f"random_platform({n},{arcs_per_node},seed={seed})",
                    capacity=cap)
