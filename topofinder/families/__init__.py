"""Topology families (paper 001 Table 9, Appendix F; docs/algorithms.md), one function per
family; the family registry (topofinder.families.registry, docs/extending.md) ties each to the
expression grammar, the builder and the finder."""

from topofinder.families.basic import (
    affine, bi_ring, circulant, complete, complete_bipartite, de_bruijn, directed_circulant,
    generalized_kautz, hamming, hypercube, kautz, torus, uni_ring,
)
from topofinder.families.circulant_opt import best_circulant, optimal_circulant
from topofinder.families.twisted_torus import twisted_torus
from topofinder.families.distance_regular import (
    CATALOG_NAMES, ag2_minus_parallel_class, crown, distance_regular, distance_regular_by_size,
    doubled_odd_graph, gh_incidence, gq_incidence, heawood_distance3, intersection_array,
    johnson, odd_graph, paley, pg2_incidence, undirected_line_graph,
)

__all__ = [
    "affine", "bi_ring", "circulant", "complete", "complete_bipartite", "de_bruijn",
    "directed_circulant", "generalized_kautz", "hamming", "hypercube", "kautz", "torus",
    "uni_ring", "best_circulant", "optimal_circulant", "twisted_torus",
    "CATALOG_NAMES", "ag2_minus_parallel_class", "crown", "distance_regular",
    "distance_regular_by_size", "doubled_odd_graph", "gh_incidence", "gq_incidence",
    "heawood_distance3", "intersection_array", "johnson", "odd_graph", "paley", "pg2_incidence",
    "undirected_line_graph",
]
