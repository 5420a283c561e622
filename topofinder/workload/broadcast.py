"""The one-root share of a search workload (issue 30; docs/algorithms.md "One-root
collectives in steady state"): each frontier point's steady-state broadcast throughput TP under
the multi-port model from root 0, exact (Edmonds' branching theorem: TP = min over v of
maxflow(0, v), in unit messages per unit time, a unit message taking 1/C on a capacity-C
link). On a vertex-transitive topology every root gives the same TP (an automorphism maps root
0 to any other); on the others root 0 is the stated convention.
"""

from __future__ import annotations

from fractions import Fraction

from topofinder.families.build import load_topology
from topofinder.scoring.oneroot.platform import from_topology
from topofinder.scoring.oneroot.steady import throughput
from topofinder.model.units import exact

#: Largest N whose broadcast TP a search computes (one max-flow per orbit of the root's stabiliser,
#: about 1 s at N = 4096 on a loaded core); beyond it a point has no broadcast price (ranked
#: without it).
BROADCAST_MAX_N = 4096
#: The root and port model a search prices the broadcast share with.
ROOT, PORT_MODEL = 0, "multi"


def broadcast_tp(expr: str) -> Fraction | None:
    """Exact multi-port broadcast TP of ``expr`` from root 0 (None beyond BROADCAST_MAX_N)."""
    topo = load_topology(expr)
    if topo.n > BROADCAST_MAX_N:
        return None
    return throughput(from_topology(topo, ROOT, PORT_MODEL)).value


def broadcast_column(tp: Fraction | None, time_s: float | None) -> dict:
    """A frontier point's ``broadcast`` entry of the search document."""
    return {"root": ROOT, "port_model": PORT_MODEL,
            "TP": None if tp is None else float(tp),
            "TP_exact": None if tp is None else exact(tp), "time_s": time_s}
