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

#: Everything :mod:`topofinder.api` exports besides the two names above (its ``__all__``).
API_NAMES = ("Source", "load", "score", "schedule", "load_schedule", "relabel", "mapping", "search",
             "export_topology", "export_ranks", "export_schedule", "export_schedule_of",
             "msccl_price", "mscclpp_price", "schedule_price", "collective_prices", "export_chakra",
             "broadcast_price", "broadcast_program",
             "export_patch_panel", "diff_patch_panel", "wave_plan", "ocs_tables", "cross_connects",
             "export_cross_connects",
             "check_schedule", "catalog_list", "catalog_build", "catalog_affine", "sweep", "bench",
             "run_schedule", "add_run_arguments", "plot", "records", "network_workload",
             "stop_workers", "is_quiet_rank", "install_interrupt_handlers", "keep_freed_memory",
             "was_interrupted", "command_scope",
             "distinct_outputs", "check_output", "note_input", "read_json_document",
             "topology_of_document",
             "SearchResult", "Hierarchy", "CrossConnects",
             "SweepResult", "Workload", "MoEWorkload", "load_moe", "StepSchedule", "TreeSchedule",
             "AllToAllSchedule", "FC_TIME_LIMIT", "DEFAULT_INTRA", "SCHEDULE_FORMATS",
             "CATALOG_PRESETS", "AFFINE_TRIES", "AFFINE_SEED", "MAX_BENCH_REPEAT",
             "RUN_DESCRIPTION", "failed", "fail", "bypass", "spare", "PAIR_BUDGET",
             "Collective", "export_rank_schedule", "check_rank_schedules", "is_rank_document",
             "rank_block")

__all__ = ["Topology", "TopofinderError", "__version__", *API_NAMES]


def __getattr__(name: str):
    """PEP 562: the API functions come from topofinder.api on first access."""
    if name in API_NAMES or name == "Topology":
        value = getattr(import_module("topofinder.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topofinder' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API_NAMES) | {"Topology"})
