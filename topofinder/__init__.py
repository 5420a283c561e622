"""topofinder: topology/schedule co-design search for direct-connect fabrics.

The public API (docs/api.md) is :mod:`topofinder.api`, re-exported here and loaded on first
use so that ``import topofinder`` stays cheap (and `python -m topofinder` installs its
Ctrl-C handler before any heavy module loads)::

    import topofinder as tf
    g = tf.load("L^3(C(16,{3,4}))")        # expression, file, networkx graph or Topology
    tf.score(g)["tau_bfb_exact"]           # exact BFB τ in M/B
    r = tf.search(1024, 4)                 # verified Pareto frontier, ranked for a Workload
    r.best.expr, r.records()               # the recommendation; rows for pandas
"""

from __future__ import annotations

from importlib import import_module

from topofinder.errors import TopofinderError

__version__ = "0.2.0"

_API = ("load", "score", "schedule", "load_schedule", "relabel", "search", "export_topology",
        "export_schedule",
        "export_patch_panel", "records", "SearchResult", "Workload", "StepSchedule",
        "TreeSchedule", "AllToAllSchedule")

__all__ = ["Topology", "TopofinderError", "__version__", *_API]


def __getattr__(name: str):
    """PEP 562: the API functions come from topofinder.api on first access."""
    if name in _API or name == "Topology":
        value = getattr(import_module("topofinder.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topofinder' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
