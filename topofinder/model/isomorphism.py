"""Graph isomorphism through python-igraph: the library loaded without its drawing back end,
and the reverse-symmetry test G ≅ G^T of paper 001 (Appendix B, Def 6) by VF2.

igraph rather than networkx: the search loads igraph anyway (bliss automorphism groups,
topofinder.scoring.symmetry), and networkx costs 0.1 s to import in every process that would
only need it for this test (docs/performance.md "Start-up imports").
"""

from __future__ import annotations

import sys

import numpy as np

from topofinder.errors import TopofinderError


def igraph_module():
    """python-igraph, imported without its matplotlib drawing back end when matplotlib is
    not loaded yet: igraph imports matplotlib.pyplot at import time when it is installed
    (0.4–0.65 s of a cold search), and topofinder never draws through igraph (its plots use
    matplotlib's object API, topofinder.export.plot). matplotlib itself stays importable."""
    blocked = "matplotlib" not in sys.modules and "igraph" not in sys.modules
    if blocked:
        sys.modules["matplotlib"] = None         # `import matplotlib` fails inside igraph
    try:
        import igraph
    except ImportError:                                          # pragma: no cover
        raise TopofinderError("exact automorphism groups need python-igraph: "
                              "pip install igraph") from None
    finally:
        if blocked and sys.modules.get("matplotlib", 0) is None:
            del sys.modules["matplotlib"]
    return igraph


def reverse_isomorphic(n: int, src: np.ndarray, dst: np.ndarray, cap: np.ndarray) -> bool:
    """Whether the digraph with arcs (src[e], dst[e]) of capacity cap[e] is isomorphic to its
    transpose, capacities kept: multi-arcs fold into one arc of their summed capacity (the
    arc's colour), self-loops into their node's colour; VF2 then matches colours exactly."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    cap = np.asarray(cap, np.int64)
    loop = src == dst
    node_colour = np.bincount(src[loop], weights=cap[loop], minlength=n).astype(np.int64)
    pairs, inverse = np.unique(src[~loop] * n + dst[~loop], return_inverse=True)
    weight = np.bincount(inverse, weights=cap[~loop]).astype(np.int64)
    u, w = pairs // n, pairs % n
    _, colour = np.unique(weight, return_inverse=True)       # one colour per summed capacity
    _, vertex = np.unique(node_colour, return_inverse=True)
    igraph = igraph_module()
    g = igraph.Graph(n=n, edges=np.stack([u, w], 1).tolist(), directed=True)
    gt = igraph.Graph(n=n, edges=np.stack([w, u], 1).tolist(), directed=True)
    colours = colour.tolist()
    return bool(g.isomorphic_vf2(gt, color1=vertex.tolist(), color2=vertex.tolist(),
                                 edge_color1=colours, edge_color2=colours))
