"""Twisted torus, TPU v4 style (paper 001 §6 refs [26], [40]).

Construction of Cámara et al., "Twisted torus topologies for enhanced interconnection
networks" (IEEE TPDS 21(12), 2010): the rectangular twisted torus 2a × a, whose wrap-around
links in the short dimension are shifted by a along the long one, and its 3-D form 2a × a × a
in which every short dimension's wrap-around is shifted the same way — the k × k × 2k twisted
tori that TPU v4's optical circuit switches wire (Jouppi et al., ISCA 2023). Here the long
dimension comes first: TwistedTorus(2a, a, ..., a).

As a lattice graph: nodes are Z^k / L with L spanned by 2a·e_0 and a·e_0 + a·e_i (i ≥ 1), arcs
x → x ± e_i. It is a Cayley graph of an abelian group, hence vertex-transitive.
"""

from __future__ import annotations

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology


def twisted_torus(*dims: int) -> Topology:
    """TwistedTorus(2a, a, ..., a): N = 2a^k nodes (k = len(dims) ≥ 2), degree 2k,
    bidirectional. Node (x_0, ..., x_{k−1}) is numbered row-major (x_0 slowest, as Torus).
    Moving +1 from x_i = a−1 (i ≥ 1) wraps to x_i = 0 and adds a to x_0 (mod 2a).
    Diameter a for the 2-D 2a × a (Cámara et al.), against 3a/2 for the plain torus."""
    if len(dims) < 2:
        raise TopofinderError(f"TwistedTorus needs at least two sizes (2a, a, ...), got "
                              f"{len(dims)}")
    a = dims[1]
    if a < 2 or dims[0] != 2 * a or any(m != a for m in dims[1:]):
        raise TopofinderError(
            f"TwistedTorus({','.join(map(str, dims))}): sizes must be (2a, a, ..., a) with "
            f"a >= 2, e.g. TwistedTorus(8,4) or TwistedTorus(8,4,4)")
    k = len(dims)
    n = 2 * a ** k
    nodes = np.arange(n)
    strides = np.array([a ** (k - 1 - i) for i in range(k)])       # row-major, x_0 slowest
    coords = [(nodes // s) % m for s, m in zip(strides, dims)]
    x0 = coords[0]
    srcs, dsts = [], []
    for sign in (1, -1):                                            # dimension 0: a ring of 2a
        srcs.append(nodes)
        dsts.append(nodes + ((x0 + sign) % (2 * a) - x0) * strides[0])
    for i in range(1, k):
        xi = coords[i]
        for sign in (1, -1):
            wraps = (xi + sign) % a != xi + sign                    # crossing the wrap-around
            new_x0 = np.where(wraps, (x0 + a) % (2 * a), x0)         # ±a are equal mod 2a
            dsts.append(nodes + (new_x0 - x0) * strides[0] + ((xi + sign) % a - xi) * strides[i])
            srcs.append(nodes)
    return Topology(n, np.concatenate(srcs), np.concatenate(dsts),
                    expr=f"TwistedTorus({','.join(map(str, dims))})", bidirectional=True,
                    vertex_transitive=True)
