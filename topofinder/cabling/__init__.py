"""The physical side: patch-panel plans, recabling diffs, node matchings, cross-connect layouts, rank files, the relabelling a diff induces, and the schedule-vs-cabling check."""
