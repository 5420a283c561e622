"""The Python API: everything the ``topofinder`` command does, as functions (docs/api.md).

Every function takes what the command line takes and returns plain Python data: a
:class:`~topofinder.model.topology.Topology`, a JSON-ready ``dict``, a schedule object, or a
:class:`SearchResult` whose :meth:`~SearchResult.records` feed ``pandas.DataFrame`` directly.
The command line (:mod:`topofinder.cli`) calls nothing else, so both answer alike. Units
follow docs/model.md: T_L in steps of α, τ in M/B (B the node bandwidth), times in seconds.

Submodules: :mod:`~topofinder.api.topology` (load, score, topology and rank files),
:mod:`~topofinder.api.schedules` (build, read, rename, write schedules),
:mod:`~topofinder.api.search` (frontiers), :mod:`~topofinder.api.oneroot` (one-root
collectives), :mod:`~topofinder.api.cabling` (patch panels,
diffs, cross-connects, checks), :mod:`~topofinder.api.catalog` (base catalog) and
:mod:`~topofinder.api.batch` (sweeps, bench), :mod:`~topofinder.api.run` (MPI runs),
:mod:`~topofinder.api.session` (the process helpers every command uses) and
:mod:`~topofinder.api.resilience`
(failures: degraded scores, repaired fabrics, bypass re-patching, spares).

>>> import topofinder as tf
>>> tf.score("C(16,{1,6})")["tau_bfb_exact"]
'15/16'
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType

from topofinder import API_NAMES
from topofinder.errors import TopofinderError

#: The module that defines each public name, imported when the name is first used (PEP 562
#: ``__getattr__``): a command loads what it calls and nothing else (`search` never loads the
#: bench cases, the MSCCL/MSCCL++ writers or the cabling; docs/performance.md "Start-up
#: imports").
#: tests/test_architecture.py reads this table as imports of this package.
_LAZY = {
    "topofinder.api.batch": ("MAX_BENCH_REPEAT", "SweepResult", "bench", "sweep"),
    "topofinder.api.run": ("RUN_DESCRIPTION", "add_run_arguments", "run_schedule"),
    "topofinder.api.cabling": (
        "CrossConnects", "check_schedule", "cross_connects", "diff_patch_panel",
        "export_cross_connects", "export_patch_panel", "ocs_tables", "wave_plan"),
    "topofinder.api.catalog": (
        "AFFINE_SEED", "AFFINE_TRIES", "CATALOG_PRESETS", "catalog_affine", "catalog_build",
        "catalog_list"),
    "topofinder.api.prices": (
        "broadcast_price", "collective_prices", "export_chakra", "schedule_price"),
    "topofinder.api.oneroot": ("schedule_oneroot", "score_oneroot"),
    "topofinder.api.plans": ("broadcast_program", "mscclpp_price"),
    "topofinder.api.resilience": ("bypass", "fail", "failed", "spare"),
    "topofinder.api.schedules": (
        "SCHEDULE_FORMATS", "export_schedule", "export_schedule_of", "load_schedule",
        "msccl_price", "relabel", "schedule"),
    "topofinder.api.rank_schedules": (
        "check_rank_schedules", "export_rank_schedule", "is_rank_document", "rank_block"),
    "topofinder.api.search": (
        "DEFAULT_INTRA", "Hierarchy", "SearchResult", "network_workload", "plot", "records",
        "search"),
    "topofinder.api.topology": (
        "Source", "export_ranks", "export_topology", "load", "mapping", "read_json_document",
        "score", "search_frontier", "topology_of_document"),
    "topofinder.api.session": (
        "check_output", "command_scope", "distinct_outputs", "install_interrupt_handlers",
        "is_quiet_rank", "keep_freed_memory", "note_input", "stop_workers", "was_interrupted"),
    "topofinder.finder.describe": ("FC_TIME_LIMIT",),
    "topofinder.resilience.survey": ("PAIR_BUDGET",),
    "topofinder.model.alltoall_schedule": ("AllToAllSchedule",),
    "topofinder.model.collectives": ("Collective",),
    "topofinder.model.oneroot_schedule": ("PeriodicSchedule",),
    "topofinder.model.schedule": ("StepSchedule",),
    "topofinder.model.topology": ("Topology",),
    "topofinder.model.tree_schedule": ("TreeSchedule",),
    "topofinder.workload.cost": ("Workload",),
    "topofinder.workload.moe": ("MoEWorkload", "load_moe"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

__all__ = ["Topology", "TopofinderError", *API_NAMES]


def __getattr__(name: str):
    """A public name, from its module on first use (then bound here: later uses are plain)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


class _Api(ModuleType):
    """This package as a module whose public names win over its submodules: importing
    ``topofinder.api.search`` (the module) must not rebind ``api.search`` (the function)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _HOME and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Api
