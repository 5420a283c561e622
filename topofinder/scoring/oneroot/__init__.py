"""One-root collectives in steady state (paper 003, Beaumont–Legrand–Marchal–Robert):
broadcast, reduce, scatter and gather from a root under the one-port, multi-port and
node-bandwidth port models, with exact throughputs, certificates and periodic schedules
(docs/algorithms.md, "One-root collectives")."""
