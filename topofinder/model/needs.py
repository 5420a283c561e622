"""What a collective needs of a platform's connectivity (issue 40), checked when a topology
file is read: broadcast and scatter need every node reachable from the root, reduce and gather
every node reaching it (paper 003 §2: a directed platform, nothing more); the all-to-all family
and every other command need strong connectivity (each node reaches each other)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from topofinder.model.collectives import Collective
from topofinder.model.topology import Topology

FROM_ROOT = (Collective.BROADCAST, Collective.SCATTER)
TO_ROOT = (Collective.REDUCE, Collective.GATHER)


@dataclass(frozen=True)
class Need:
    """``collective`` from (or to) ``root``; None collective: strong connectivity."""

    collective: str | None = None
    root: int = 0

    def gap(self, topo: Topology) -> str | None:
        """None when ``topo`` meets the need, else 'node X cannot ... (collective ...)' naming
        one unreachable node by its label. A root outside 0..N−1 is left to the caller."""
        if self.collective in FROM_ROOT + TO_ROOT:
            if not 0 <= self.root < topo.n:
                return None
            adj = topo.link_matrix
            forward = self.collective in FROM_ROOT
            seen = breadth_first_order(adj if forward else adj.T.tocsr(), self.root,
                                       directed=True, return_predecessors=False)
            if seen.size == topo.n:
                return None
            x = topo.label(int(np.setdiff1d(np.arange(topo.n), seen)[0]))
            r = topo.label(self.root)
            if forward:
                return (f"node {x} cannot be reached from root {r}, and {self.collective} "
                        f"needs every node reachable from the root")
            return (f"node {x} cannot reach root {r}, and {self.collective} needs every node "
                    f"to reach the root")
        if topo.strongly_connected:
            return None
        what = self.collective or "this command"
        return f"{topo.unreachable_text()}, and {what} needs every node to reach every other"


def need_for(collective: str | None, root: int = 0) -> Need:
    """The need of ``collective`` (module doc); None: strong connectivity."""
    return Need(collective, root)
