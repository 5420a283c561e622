"""Fabrics that survive failures: degraded-mode scores by automorphism orbits, degraded
cabling plans, bypass re-patching, robustness of frontier points (docs/algorithms.md
"Failures")."""
