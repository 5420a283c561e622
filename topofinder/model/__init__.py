"""The model: the Topology, the step-schedule format with its independent replay validator, the
graph operators, topology files and the Moore bound (units: T_L in steps of α, τ in M/B;
docs/model.md). Imports nothing above it."""
