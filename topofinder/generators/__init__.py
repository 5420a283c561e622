"""Topology families (paper 001 Table 9, Appendix F; DESIGN §4), one function per family."""

from topofinder.generators.basic import (
    bi_ring, circulant, complete, complete_bipartite, de_bruijn, directed_circulant,
    generalized_kautz, hamming, hypercube, kautz, torus, uni_ring,
)

__all__ = [
    "bi_ring", "circulant", "complete", "complete_bipartite", "de_bruijn",
    "directed_circulant", "generalized_kautz", "hamming", "hypercube", "kautz", "torus",
    "uni_ring",
]
