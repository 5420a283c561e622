"""Bypass re-patching around a dead node (docs/algorithms.md "Failures").

When node x dies, each of its in-neighbours u_1..u_d has a transmit port free (its fibre to x)
and each of its out-neighbours w_1..w_d a receive port free. Patching u_i → w_σ(i) for a
permutation σ keeps every survivor at d ports in and out. The matching chosen minimises the
re-patched fabric's allreduce time under the workload (2 BFB phases, α-β model: T_L·α + τ·M/B,
so it ranks (T_L, τ) pairs), ties broken by (T_L, τ) and then by σ: exactly over all d!
matchings (distinct arc sets) when d ≤ ``EXACT_DEGREE``, else by 2-swap local search from
the identity (a local optimum, stated in the result). τ_fc is computed for the chosen one. A pair u_i = w_σ(i) would be a
self-loop: it is allowed and costs the port, as the scorers count it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.failures import Failure, degrade
from topofinder.model.topology import Topology
from topofinder.resilience.survey import Score, score_fabric
from topofinder.workload.cost import Workload

#: Largest number of free port pairs matched exactly (6! = 720 re-patched fabrics scored).
EXACT_DEGREE = 6


@dataclass(frozen=True)
class Repatch:
    """The chosen bypass for dead ``node``: ``failure`` (node and fibres patched in, intact
    numbers), scores of the re-patched survivors, of the survivors left alone (``nothing``)
    and of the intact fabric; ``method`` says how σ was searched, ``evaluated`` how many
    matchings were scored."""

    node: int
    failure: Failure
    score: Score
    nothing: Score
    intact: Score
    method: str
    evaluated: int

    def as_dict(self) -> dict:
        return {"node": self.node, "failure": str(self.failure),
                "fibres": [f"{u}->{w}" for u, w in self.failure.added],
                "method": self.method, "evaluated": self.evaluated,
                "intact": self.intact.as_dict(), "repatched": self.score.as_dict(),
                "nothing": self.nothing.as_dict()}


def bypass_ends(topo: Topology, node: int) -> tuple[np.ndarray, np.ndarray]:
    """(in-neighbours, out-neighbours) of ``node``, one entry per fibre, self-loops left out."""
    if not 0 <= node < topo.n:
        raise TopofinderError(f"{topo.expr}: node {node} is out of range 0..{topo.n - 1}")
    loop = topo.src == topo.dst
    return (np.sort(topo.src[(topo.dst == node) & ~loop]),
            np.sort(topo.dst[(topo.src == node) & ~loop]))


def _key(score: Score, sigma) -> tuple:
    return (score.allreduce_s, score.T_L if score.T_L is not None else 1 << 62,
            score.tau if score.tau is not None else 0, tuple(sigma))


class _Scorer:
    """Scores σ (memoised by the arc set it patches in)."""

    def __init__(self, topo, node, ins, outs, workload):
        self.topo, self.node, self.ins, self.outs = topo, node, ins, outs
        self.workload, self.seen = workload, {}

    def failure(self, sigma) -> Failure:
        k = min(len(self.ins), len(self.outs))
        return Failure(nodes=(self.node,), added=tuple(
            (int(self.ins[i]), int(self.outs[sigma[i]])) for i in range(k)))

    def __call__(self, sigma) -> tuple:
        f = self.failure(sigma)
        arcs = tuple(sorted(f.added))
        if arcs not in self.seen:
            self.seen[arcs] = score_fabric(degrade(self.topo, f, connected=False),
                                           self.workload, forestcoll=False)
        return _key(self.seen[arcs], sigma)


def _local_search(score, d: int) -> tuple:
    sigma = list(range(d))
    best = score(sigma)
    improved = True
    while improved:
        improved = False
        for i in range(d):
            for j in range(i + 1, d):
                trial = sigma.copy()
                trial[i], trial[j] = trial[j], trial[i]
                key = score(trial)
                if key < best:
                    sigma, best, improved = trial, key, True
    return tuple(sigma)


def repatch(topo: Topology, node: int, workload: Workload | None = None,
            exact_degree: int = EXACT_DEGREE) -> Repatch:
    """The best bypass of dead ``node`` (module docstring)."""
    workload = workload or Workload()
    ins, outs = bypass_ends(topo, node)
    d = max(len(ins), len(outs))
    scorer = _Scorer(topo, node, ins, outs, workload)
    if d <= exact_degree:
        best = min((scorer(s), s) for s in permutations(range(d)))[1]
        method = f"exact: every one of the {d}! matchings"
    else:
        best = _local_search(scorer, d)
        method = f"2-swap local search from the identity (d = {d} > {exact_degree})"
    f = scorer.failure(best)
    return Repatch(node, f, score_fabric(degrade(topo, f, connected=False), workload),
                   score_fabric(degrade(topo, Failure(nodes=(node,)), connected=False),
                                workload),
                   score_fabric(topo, workload), method, len(scorer.seen))
