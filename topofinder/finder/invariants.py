"""Structural invariants of an allgather verified by construction, checked on every node
(docs/algorithms.md, "Verified by construction", step 3).

The rule's count map (topofinder.expansions.rows, ``Rule.loads``) gives every link's chunk
count at every step — each rank's sends per out-link and receives per in-link, per step — in
O(N·d·T) without the N²·d rows. On it, for every node and link:

1. every load is on a link of the topology (u ≠ w, capacity > 0);
2. every load is at a step 1..T_L, and some at T_L;
3. every node receives (N − 1)·P chunks in all: its deficit, each other shard once;
4. no link carries more at step t than its sender holds before t, P + Σ_{s<t} received_s(u);
5. Σ_t max over the links of load_t/cap · B/(N·P) equals the claimed τ exactly (Thm 7, 10,
   11, 12's τ, recomputed from every link rather than the sampled receivers' in-links);

and (by `certify`) each sampled receiver's exact rows, counted per step and in-link, equal the
count map's — so the count map is the rows' own, where the sample sees them. A fault that
drops, duplicates or misroutes chunks, or shifts a step, at even one node breaks 1–4 there
(or 5): the sample of k receivers misses a fault confined to a fraction p < 1/k of the nodes
with probability (1 − p)^k, these checks do not. They cannot see a fault that keeps every
count (a chunk relabelled to another of the same size): that is the exact replay's part.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.expansions.rows import aggregate
from topofinder.model.schedule import ScheduleError

#: what `check` verifies, recorded in the certificate (``invariants.checked``)
CHECKED = ("every load on a link of the topology",
           "every load at a step 1..T_L, some at T_L",
           "every node receives (N-1)*P chunks",
           "no link sends more at step t than its sender holds before t",
           "tau recomputed from every link's per-step load equals the claim",
           "each sampled receiver's rows counted per step and in-link equal the count map")


class Loads:
    """A rule's count map: rows (t, u, w, chunks, link) sorted by (t, link); ``into(w)`` the
    rows of receiver w, for the receivers named by `keep` (one pass over the map)."""

    def __init__(self, table: np.ndarray):
        self.table = table
        self._kept = table[:0]

    def keep(self, receivers) -> None:
        mine = self.table[np.isin(self.table[:, 2], receivers)]
        self._kept = mine[np.lexsort((mine[:, 1], mine[:, 0], mine[:, 2]))]

    def into(self, w: int) -> np.ndarray:
        a, b = np.searchsorted(self._kept[:, 2], [w, w + 1])
        return self._kept[a:b]


def check(rule, t_l: int, tau: Fraction) -> tuple[dict, Loads]:
    """Checks 1–5 of the module docstring on ``rule``'s count map against the claimed
    (t_l, tau): (the certificate's ``invariants`` record, the count map); ScheduleError
    naming the first node or link that fails."""
    topo, p, n = rule.topology, rule.shard_chunks, rule.topology.n
    table = rule.loads(np.ones(n, np.int64))         # off-link rows: ScheduleError (check 1)
    t, u, w, c = table[:, :4].T
    cap = topo.link_matrix.data.astype(np.int64)[table[:, 4]]
    bad = (u == w) | (cap <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ScheduleError(f"step {t[i]}: node {u[i]} sends {c[i]} chunks to node {w[i]}, "
                            f"which is no link of {topo.expr}")
    if table.size and (t.min() < 1 or t.max() != t_l):
        raise ScheduleError(f"the loads run over steps {t.min()}..{t.max()}, not 1..{t_l}")
    recv = np.rint(np.bincount(t * n + w, weights=c, minlength=(t_l + 1) * n)
                   ).astype(np.int64).reshape(t_l + 1, n)       # exact: sums < 2^52
    total = recv.sum(axis=0)
    if (total != (n - 1) * p).any():
        i = int(np.argmax(total != (n - 1) * p))
        raise ScheduleError(f"node {i} receives {total[i]} chunks, not (N-1)*P = "
                            f"{(n - 1) * p}")
    held = p + np.cumsum(recv, axis=0)                  # held[s, v]: after step s
    over = c > held[t - 1, u]
    if over.any():
        i = int(np.argmax(over))
        raise ScheduleError(f"step {t[i]}: node {u[i]} sends {c[i]} chunks to node {w[i]} "
                            f"but holds {held[t[i] - 1, u[i]]}")
    common = int(np.lcm.reduce(np.unique(cap))) if cap.size else 1
    scaled = c * (common // cap)
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]]) if t.size else np.zeros(0, int)
    peak = int(np.maximum.reduceat(scaled, starts).sum()) if t.size else 0
    got = Fraction(peak, common) * Fraction(topo.node_bandwidth, n * p)
    if got != Fraction(tau):
        raise ScheduleError(f"tau from every link's per-step loads is {got}, not the "
                            f"claimed {tau}")
    sent = np.bincount(u, weights=c, minlength=n)
    return ({"nodes": int(n), "link_steps": int(table.shape[0]),
             "received_per_node": int((n - 1) * p),
             "sent_per_node": [int(sent.min()), int(sent.max())],
             "checked": list(CHECKED)}, Loads(table))


def match_sample(loads: Loads, rows: np.ndarray, w: int, n: int) -> None:
    """Receiver w's exact rows, counted per (step, sender), equal the count map's."""
    mine = aggregate(rows[:, 0], rows[:, 4], rows[:, 5], rows[:, 3] - rows[:, 2], n)
    if not np.array_equal(mine, loads.into(w)[:, :4]):
        raise ScheduleError(f"node {w}'s rows do not add up to the count map's loads on its "
                            f"in-links")
