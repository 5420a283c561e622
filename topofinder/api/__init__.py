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
:mod:`~topofinder.api.batch` (sweeps, bench, MPI runs) and :mod:`~topofinder.api.resilience`
(failures: degraded scores, repaired fabrics, bypass re-patching, spares).

>>> import topofinder as tf
>>> tf.score("C(16,{1,6})")["tau_bfb_exact"]
'15/16'
"""

from __future__ import annotations

from topofinder.api.batch import (
    MAX_BENCH_REPEAT, RUN_DESCRIPTION, SweepResult, add_run_arguments, bench, check_output,
    command_scope, distinct_outputs, install_interrupt_handlers, is_quiet_rank,
    keep_freed_memory, note_input, run_schedule, stop_workers, sweep, was_interrupted,
)
from topofinder.api.cabling import (
    CrossConnects, check_schedule, cross_connects, diff_patch_panel, export_cross_connects,
    export_patch_panel, ocs_tables, wave_plan,
)
from topofinder.api.catalog import (
    AFFINE_SEED, AFFINE_TRIES, CATALOG_PRESETS, catalog_affine, catalog_build, catalog_list,
)
from topofinder.api.prices import (broadcast_price, collective_prices, export_chakra,
                                   schedule_price)
from topofinder.api.oneroot import schedule_oneroot, score_oneroot
from topofinder.api.plans import broadcast_program, mscclpp_price
from topofinder.api.resilience import PAIR_BUDGET, bypass, fail, failed, spare
from topofinder.api.schedules import (
    SCHEDULE_FORMATS, export_schedule, export_schedule_of, load_schedule, msccl_price, relabel,
    schedule,
)
from topofinder.api.rank_schedules import (
    check_rank_schedules, export_rank_schedule, is_rank_document, rank_block,
)
from topofinder.api.search import (
    DEFAULT_INTRA, Hierarchy, SearchResult, network_workload, plot, records, search,
)
from topofinder.api.topology import (
    Source, export_ranks, export_topology, load, mapping, read_json_document, score,
    search_frontier, topology_of_document,
)
from topofinder import API_NAMES
from topofinder.errors import TopofinderError
from topofinder.finder.describe import FC_TIME_LIMIT
from topofinder.model.alltoall_schedule import AllToAllSchedule
from topofinder.model.collectives import Collective
from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.model.schedule import StepSchedule
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import TreeSchedule
from topofinder.workload.cost import Workload
from topofinder.workload.moe import MoEWorkload, load_moe

__all__ = ["Topology", "TopofinderError", *API_NAMES]
