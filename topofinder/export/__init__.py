"""Writers for topologies, schedules and patch-panel plans (DESIGN §10)."""
