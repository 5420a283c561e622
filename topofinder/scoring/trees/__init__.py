"""Tree collectives (paper 002): ForestColl's throughput optimum and spanning-tree packing,
switch removal by edge splitting, trees from step schedules, line graphs and greedy packing,
and the reduce-scatter/allreduce trees with LP (5). The tree-schedule model itself is
topofinder.model.tree_schedule."""
