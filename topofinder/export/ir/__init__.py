"""The rank-program IR: the runtime-independent lowering of a step schedule (or of trees, via
:func:`~topofinder.export.ir.steps.trees_as_steps`) to per-rank programs — ordered sends,
receives, receive-reduces and copies over chunk runs, their threadblock/lane placement and
their dependencies — built once, that each runtime's package emits (MSCCL XML:
:mod:`topofinder.export.msccl`; MSCCL++ plans: :mod:`topofinder.export.mscclpp`).

Modules, in pass order: :mod:`.layout` (where pieces sit) and :mod:`.bounds` (lower bounds
on ops per threadblock; the allreduce layout choice), :mod:`.lowering`
(:func:`~topofinder.export.ir.lowering.lower`: the passes, recording every rank's
:class:`~topofinder.export.ir.program.RankProgram`), :mod:`.lanes`
(:func:`~topofinder.export.ir.lanes.assign_lanes`: a link's slots spread over further
threadblocks), :mod:`.deps` (:func:`~topofinder.export.ir.deps.resolve`: placement and the
vector-clock dependencies), :mod:`.pairing` (for one-sided runtimes: each send's receive,
the rounds of a step's local ops, in-place overwrites of what was sent). A runtime package
supplies its limits as parameters: most pieces per op and ops per rank to ``lower``, budgets
and a per-op cost to ``assign_lanes``."""
