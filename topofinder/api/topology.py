"""Topologies: load one, score it, write it (topology file or rank file).

>>> g = load("C(16,{1,6})")
>>> g.n, g.degree
(16, 4)
>>> s = score(g)
>>> s["T_L"], s["tau_bfb_exact"], s["bw_optimal"]
(3, '15/16', True)
"""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Union

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.cabling.ranks import ranks_text
from topofinder.cabling.relabel import Mapping, read_mapping, relabel_topology
from topofinder.families.build import document_topology, load_topology
from topofinder.finder.describe import FC_TIME_LIMIT, describe
from topofinder.finder.recipe import from_expression
from topofinder.model.failures import split_expression
from topofinder.model.files import topology_text
from topofinder.model.documents import check_search_document
from topofinder.model.inputs import read_input, read_json
from topofinder.model.needs import Need
from topofinder.model.topology import Topology

if TYPE_CHECKING:
    import networkx as nx

#: What :func:`load` takes (a networkx graph without importing networkx: a graph object can
#: only exist once networkx is loaded, so a command that has none never loads it).
Source = Union[str, os.PathLike, Topology, "nx.Graph"]


#: The topology a document's ``topology`` field names (a search result's point, a schedule):
#: an expression, or a file only if it reads as a topology; errors never quote the file.
topology_of_document = document_topology


def read_json_document(path: str | os.PathLike, what: str):
    """The JSON value in the input file ``path`` (a ``what``, e.g. "search result"), read with
    the input limits of docs/formats.md "Inputs"; TopofinderError (one line) otherwise."""
    return read_json(read_input(path, what), os.fspath(path))

def search_frontier(path: str | os.PathLike, where: str) -> list[dict]:
    """The frontier of a `search --json` result file, checked by its validator
    (topofinder.model.documents.check_search_document; ``where`` names it in errors)."""
    return check_search_document(read_json_document(path, "search result"), where)


def load(source: Source, undirected: bool | None = None, *, collective: str | None = None,
         root: int = 0) -> Topology:
    """A topology from an expression (``"Pi(4,1024)"``), a topology file (edge list,
    node-link JSON, GraphML; ``undirected=True`` reads every edge as one cable, i.e. two
    arcs), a networkx graph (undirected edges become arc pairs; a ``capacity`` edge attribute
    is honoured; node names kept as labels) or a Topology (returned as it is). A file is
    checked for what ``collective`` from ``root`` needs (broadcast/scatter: every node reached
    from the root; reduce/gather: every node reaching it; else, and by default, strong
    connectivity; topofinder.model.needs).

    >>> load("Torus(4,4)").n
    16
    >>> import networkx as nx
    >>> load(nx.cycle_graph(5)).degree
    2
    """
    if isinstance(source, Topology):
        return source
    nx = sys.modules.get("networkx")
    if nx is not None and isinstance(source, nx.Graph):
        if source.number_of_nodes() == 0:
            raise TopofinderError("load: the networkx graph has no nodes")
        return Topology.from_networkx(source)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TopofinderError(f"load: expected an expression, a file path, a networkx graph "
                              f"or a Topology, got {type(source).__name__}")
    return load_topology(source, undirected, Need(collective, root))


def recipe(source: Source):
    """The construction an expression names (None for files, graphs, Topology objects and
    degraded fabrics ``Fail(...)``, which BFB schedules as a whole)."""
    if isinstance(source, str) and not os.path.exists(source) \
            and split_expression(source) is None:
        return from_expression(source)
    return None


def score(source: Source, *, alltoall: str = "bracket", alltoall_gap: float = 0.01,
          progress=None, stages=None, fc_time_limit: float | None = FC_TIME_LIMIT) -> dict:
    """Every score of one topology, as `topofinder score --json` prints it: N, d, diameter,
    BFB T_L and τ (exact as "p/q"), the bandwidth and Moore bounds, ForestColl's τ_fc, the
    all-to-all concurrent flow, and the schedule the expression names when it is not BFB.
    ``alltoall``: bracket (relative gap ≤ ``alltoall_gap``, in (0, 1)), exact or bound.
    ``fc_time_limit`` (s, finite ≥ 0; None or 0: no limit) bounds ForestColl's max-flows;
    past it τ_fc is a certified bracket (``tau_fc_optimal`` False).
    ``progress(iteration, lower, upper)`` follows the all-to-all bracket,
    ``stages(stage, done, total)`` long scoring stages.

    >>> score("Diamond")["schedule_tau_exact"]
    '7/8'
    """
    if not 0 < alltoall_gap < 1:
        raise TopofinderError(f"score: --alltoall-gap must lie in (0, 1), got {alltoall_gap}")
    if fc_time_limit is not None and not (0 <= fc_time_limit and math.isfinite(fc_time_limit)):
        raise TopofinderError(f"score: --fc-time-limit must be a finite number of seconds "
                              f">= 0, got {fc_time_limit}")
    return describe(load(source), recipe(source), alltoall=alltoall,
                    alltoall_gap=alltoall_gap, progress=progress, stages=stages,
                    fc_time_limit=fc_time_limit or None)


def mapping(source: str | os.PathLike | Mapping) -> Mapping:
    """A patch-panel diff's relabelling: the CSV ``export --what patch-panel --diff OLD
    --mapping MAP.csv`` writes (node x becomes the old plan's node φ(x)), read."""
    return source if isinstance(source, Mapping) else read_mapping(source)


def _renamed(source: Source, undirected: bool | None, relabel) -> Topology:
    topo = load(source, undirected)
    return topo if relabel is None else relabel_topology(topo, mapping(relabel))


def export_topology(source: Source, fmt: str = "edgelist",
                    path: str | os.PathLike | None = None, *, undirected: bool | None = None,
                    relabel: str | os.PathLike | Mapping | None = None) -> str:
    """The topology file text (``fmt``: edgelist, json (node-link), graphml); also written to
    ``path`` when given. ``relabel``: a diff's mapping, so nodes carry the numbering of the
    cables after the diff.

    >>> print(export_topology("UniRing(1,3)"))  # doctest: +NORMALIZE_WHITESPACE
    # topofinder topology UniRing(1,3): N = 3, 3 arcs
    # one line per arc: u v
    0 1
    1 2
    2 0
    """
    return emit(topology_text(_renamed(source, undirected, relabel), fmt), path)


def export_ranks(source: Source, fmt: str = "csv", path: str | os.PathLike | None = None, *,
                 undirected: bool | None = None,
                 relabel: str | os.PathLike | Mapping | None = None) -> str:
    """Which host runs which rank (node names from the topology file): ``fmt`` csv,
    hostfile, rankfile (Open MPI) or torchrun; also written to ``path`` when given.

    >>> export_ranks("K(3)").splitlines()[:2]
    ['rank,label', '0,node0']
    """
    return emit(ranks_text(_renamed(source, undirected, relabel), fmt), path)


def emit(text: str, path: str | os.PathLike | None) -> str:
    """``text``, written to ``path`` first when given (whole or not at all; "-": standard
    output)."""
    if path is not None:
        write_text(path, text)
    return text
