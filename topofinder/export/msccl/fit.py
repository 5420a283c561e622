"""Whether a schedule's MSCCL XML fits a runtime, and the lowering to the IR that fits.

:func:`check_fits` refuses, from the schedule arrays alone (before any lowering), what no
program can fit: ranks, threadblocks, int16 offsets, and the IR's lower bounds on ops per
threadblock (:mod:`topofinder.export.ir.bounds`) against MSCCL_MAX_NUM_STEPS over the
runtime's channels and against the XML elements one rank's parser holds (MAX_NODES).
:func:`lower_to_fit` then lowers the schedule to the rank-program IR with the runtime's
limits as parameters (``cnt`` < MSCCL_MAX_COUNT, the elements a rank loads), resolves it on
one lane per link, and when a threadblock holds more than the step limit resolves the same
lowering on lanes (:func:`~topofinder.export.ir.lanes.assign_lanes`, budgets in XML steps:
MSCCL allows one dependency per step, so an op with d > 1 dependencies takes d steps,
:func:`xml_steps`). The first problem met is refused in one line with its figure."""

from __future__ import annotations

from itertools import chain

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.export.ir.bounds import instruction_bounds, least_layout, rank_need
from topofinder.export.ir.deps import resolve
from topofinder.export.ir.lanes import assign_lanes
from topofinder.export.ir.layout import PieceLayout, channel_shift, shard_layout
from topofinder.export.ir.lowering import ProgramTooLarge, lower, peers
from topofinder.export.ir.program import RankProgram
from topofinder.export.ir.steps import allreduce_phases
from topofinder.export.msccl.limits import INT8_MAX, INT16_MAX, RUNTIMES, get_runtime
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule

RUNTIME_NAMES = tuple(RUNTIMES)


def xml_steps(prog: RankProgram) -> np.ndarray:
    """Per op of a resolved program, the XML steps it takes: itself, plus a ``nop`` before it
    for each dependency beyond the first (a step carries one ``depid``)."""
    return np.maximum(1, prog.dep_count)


def steps_per_tb(prog: RankProgram) -> list[int]:
    """XML steps (nops included) of each threadblock the writer emits, in id order."""
    return prog.per_tb(xml_steps(prog))


def runtime_options(runtime, channels, max_steps):
    """The runtime, its step limit (``max_steps`` or its MSCCL_MAX_NUM_STEPS), after checking
    the options; TopofinderError naming the bad one."""
    if runtime not in RUNTIME_NAMES:
        raise TopofinderError(f"runtime {runtime!r}: accepted are "
                              f"{', '.join(RUNTIME_NAMES)}")
    rt = get_runtime(runtime)
    if not isinstance(channels, int) or not 1 <= channels <= rt.max_channels:
        raise TopofinderError(f"channels = {channels!r}: accepted are integers "
                              f"1..{rt.max_channels}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise TopofinderError(f"max_steps = {max_steps!r}: accepted are positive integers")
    return rt, rt.max_steps if max_steps is None else max_steps


def _step_advice(rt, need: int) -> str:
    other = RUNTIMES["msccl"]
    if rt.name != other.name and need <= other.max_steps:
        return (f"--runtime msccl allows {other.max_steps}, or --max-steps {need} for an "
                f"executor built with MSCCL_MAX_NUM_STEPS ≥ {need}, or export --format json "
                "or npz instead")
    return (f"export --format json or npz instead (or --max-steps {need} for a runtime built "
            "with a larger MSCCL_MAX_NUM_STEPS)")


def check_fits(schedule: StepSchedule, channels: int = 1, runtime: str = "msccl-executor",
               max_steps: int | None = None, collective: str | None = None,
               stage: bool | None = None, interleave: bool | None = False,
               advise: bool = True) -> PieceLayout:
    """Refuse, from the schedule arrays alone (no XML built), a schedule whose MSCCL XML cannot
    fit ``runtime``'s parser: ranks, threadblocks, int16 offsets, and lower bounds on the
    instructions per threadblock (allgather-phase sends at their final places cannot merge
    beyond contiguous piece ranges; every other phase needs one instruction per step and link)
    and on the XML elements one rank loads. One-line TopofinderError naming the limit.
    Returns the piece layout the bounds are least for (allreduce: of
    :func:`~topofinder.export.ir.layout.allreduce_layouts`; else NCCL's shard order), which
    the writer then uses. ``collective``: with an allgather ``schedule``, check it as the
    allgather phase of this collective (a cheaper early check before the full schedule is
    built; bounds stay valid, being least over the same layouts). ``stage``: the writer's
    option (None: direct or staged, whichever fits). ``interleave``: the ``channels`` as
    instances (False), as one interleaved instance (True, the writer's
    :func:`~topofinder.export.msccl.writer.to_msccl_xml`), or either
    (None: the instances' refusal if neither passes). ``advise``: name the allreduce's
    two-program split in an elements refusal when it applies (checking both phases: left
    out where the refusal only chooses the channel mode)."""
    if interleave is None and channels > 1:
        try:
            return check_fits(schedule, channels, runtime, max_steps, collective, stage, False,
                              advise=False)
        except TopofinderError:
            try:
                return check_fits(schedule, channels, runtime, max_steps, collective, stage,
                                  True)
            except TopofinderError:
                return check_fits(schedule, channels, runtime, max_steps, collective, stage,
                                  False, advise)
    rt, limit = runtime_options(runtime, channels, max_steps)
    k, ways = (1, channels) if interleave else (channels, 1)
    coll = collective or schedule.collective
    if collective and schedule.collective != Collective.ALLGATHER:
        raise TopofinderError("check_fits(collective=...) takes an allgather schedule")
    what = f"MSCCL XML ({rt.name}) for {schedule.topology.expr} {coll}"
    tbs = _check_shape(schedule, k, rt, what)
    n, p = schedule.topology.n, schedule.shard_chunks
    if coll != Collective.ALLREDUCE:
        layout = shard_layout(n, p, k)
        if not schedule.sends.shape[0] or collective == Collective.REDUCE_SCATTER:
            return layout           # (an allgather checked as reduce-scatter reads scratch)
        direct, staged = instruction_bounds(schedule, layout.table(), stage)
        per_rank = rank_need(direct, staged, n, stage)
    else:
        layout, direct, staged, per_rank = least_layout(schedule, stage)
    worst = int(direct.argmax())
    need = int(direct[worst]) if staged is None else int(staged.max())
    if stage is None and staged is not None:
        need = min(int(direct[worst]), need)
    lanes = max(-(-need // limit), ways)    # a link's steps spread over lanes of ≤ limit each
    if k * lanes > rt.max_channels:
        a, b = divmod(worst, n)
        where = (f"the link {a}→{b} needs at least {direct[worst]} instructions"
                 if need == direct[worst] else
                 f"a threadblock needs at least {need} instructions even with staged copies")
        raise TopofinderError(f"{what}: {where}, more than {rt.max_channels // k} "
                              f"threadblocks of {limit} (MSCCL_MAX_NUM_STEPS) on "
                              f"{rt.max_channels} channels hold; {_step_advice(rt, need)}")
    nodes = 1 + n + tbs + k * int(per_rank.max())
    if nodes >= rt.max_nodes:
        split = _split_advice(schedule, channels, runtime, max_steps, stage) \
            if advise and coll == Collective.ALLREDUCE and not collective else ""
        raise TopofinderError(f"{what}: a rank would load at least {nodes} XML elements, the "
                              f"parser holds {rt.max_nodes - 1} (MAX_NODES); "
                              f"{_fewer_channels(k)}{split}export --format json or npz "
                              "instead")
    return layout


def _fewer_channels(channels: int) -> str:
    """Advice for a program too large for one rank's parser: with several instances, each
    rank holds every instance's threadblocks, so fewer channels load fewer elements."""
    return f"use --channels {channels - 1} or fewer, or " if channels > 1 else ""


def _split_advice(schedule: StepSchedule, channels: int, runtime: str, max_steps, stage) -> str:
    """The nearest runnable form of an allreduce that does not fit one program, when its two
    phases each pass :func:`check_fits`: as two programs, at the price of a second launch."""
    try:
        for phase in allreduce_phases(schedule):
            check_fits(phase, channels, runtime, max_steps, stage=stage, interleave=None)
    except TopofinderError:
        return ""
    return ("its reduce-scatter and allgather phases each pass this bound: export them with "
            "--collective reduce-scatter and --collective allgather and run the two programs "
            "back to back (the same (T_L, τ) plus one more kernel launch), or ")


def _check_shape(schedule: StepSchedule, k: int, rt, what: str) -> int:
    """Ranks, pieces per buffer (int16 offsets) and threadblocks (one per peer and direction
    plus a local one, per channel) against the runtime; returns threadblocks per GPU."""
    n, p = schedule.topology.n, schedule.shard_chunks
    instead = "export --format json or npz instead"
    if n > rt.max_subs:
        raise TopofinderError(f"{what}: {n} ranks exceed the XML loader's {rt.max_subs} <gpu> "
                              f"elements (MAX_SUBS); {instead}")
    if 1 + n >= rt.max_nodes:
        raise TopofinderError(f"{what}: {n} ranks exceed the {rt.max_nodes - 1} XML elements "
                              f"a rank loads (MAX_NODES); {instead}")
    if n * k * p > INT16_MAX:
        raise TopofinderError(f"{what}: {n * k * p} pieces per buffer exceed int16 offsets "
                              f"({INT16_MAX}); use fewer channels or {instead}")
    out_peers, in_peers = peers(schedule)
    dout = max((len(x) for x in out_peers), default=0)
    din = max((len(x) for x in in_peers), default=0)
    if max(dout, din) > rt.max_tbs_per_channel:
        raise TopofinderError(f"{what}: a rank has {max(dout, din)} peers in one direction, the "
                              f"runtime allows {rt.max_tbs_per_channel} send or receive "
                              f"threadblocks per channel; {instead}")
    tbs = k * (dout + din + 1)
    if tbs > rt.max_tbs or tbs - 1 > INT8_MAX:
        raise TopofinderError(f"{what}: {tbs} threadblocks per GPU ({k} channel(s) × "
                              f"{dout + din + 1}) exceed the runtime's {min(rt.max_tbs, 128)}; "
                              f"use fewer channels")
    return tbs


def lower_to_fit(schedule: StepSchedule, k: int, inplace: bool, rt, limit: int, stage,
                  what: str, layout: PieceLayout, ways: int = 1, quick: bool = False) -> list:
    """Lower directly, then staged (unless ``stage`` fixes one), each resolved first on one
    lane per link; when a threadblock holds more than ``limit`` steps, or the program is
    interleaved over ``ways`` > 1 channels, resolve the same lowering on the lanes of
    :func:`~topofinder.export.ir.lanes.assign_lanes` (aiming 1/8 below the limit since the
    new threadblocks' dependencies add nops, then 1/4; then 1/8, 1/4, 3/8 and 1/2 below
    it, each from the last laned program's own counts). The first that fits, else TopofinderError with the
    first problem met (on one lane: its step figure is what a larger limit needs).
    ``quick``: give up an attempt whose one-lane program loads more XML elements on some
    rank than the parser holds, as the auto channel mode does before it interleaves (lanes
    add threadblocks but may save nops, so this is a policy, said as such, not a proof that
    no lanes fit)."""
    tries = [stage] if stage is not None or schedule.collective == Collective.REDUCE_SCATTER \
        else [False, True]
    n, first = schedule.topology.n, None
    room = (rt.max_nodes - 2 - n) // k              # XML steps one rank's parser can hold
    for attempt in tries:
        try:
            progs = lower(schedule, k, inplace, rt.max_count - 1, stage=attempt,
                          max_ops=room, layout=layout)
        except ProgramTooLarge as exc:
            first = first or (f"rank {exc.rank} would load more than {exc.limit} steps by "
                              f"schedule step {exc.step} of {exc.num_steps}, beyond the "
                              f"{rt.max_nodes - 1} XML elements its parser "
                              f"holds (MAX_NODES); {_fewer_channels(k)}export --format json or "
                              "npz instead")
            continue
        resolve(progs)
        problem = _fit_problem(progs, n, k, rt, limit)
        if problem is None and ways == 1:
            return progs
        crowded = max(_elements(prog, n, k) for prog in progs) if quick else 0
        if crowded >= rt.max_nodes:
            first = first or (f"on one lane per link a rank loads {crowded} XML elements, "
                              f"more than the {rt.max_nodes - 1} its parser holds (MAX_NODES), "
                              "and --channel-mode instances would try further lanes")
            continue
        first = first or problem
        laned = _fit_on_lanes(progs, n, k, rt, limit, ways)
        if laned is None:
            return progs
        first = first or laned
    raise TopofinderError(f"{what}: {first}")


def _fit_on_lanes(progs: list, n: int, k: int, rt, limit: int, ways: int) -> str | None:
    """Resolve one-lane ``progs`` on the lane plans :func:`lower_to_fit` names, in turn, until
    one fits (None), else the first problem met (or, when no plan keeps every slot within
    the limit, that a single slot needs more). The second plan is cut from the one-lane
    counts like the first, so when it exists nothing reads the first plan's resolution: that
    one stops at its first failing batch of ranks (after its channel count is checked from
    the plan); every later plan is cut from the one before and is resolved whole."""
    budgets = (limit * 7 // 8, limit * 3 // 4)
    plans = assign_lanes(progs, budgets, xml_steps, ways)
    first = None
    for i, lanes in enumerate(chain(plans, _recut(progs, budgets + (limit * 5 // 8,
                                                                    limit // 2), ways))):
        if lanes is None:
            continue
        if i == 0 and plans[1] is not None:
            span = 1 + max((int(lane.max()) for _, lane in lanes.values()), default=0)
            problem = _lanes_problem(span, k, rt) or resolve(
                progs, lanes, check=lambda part: _ranks_problem(part, n, k, rt, limit))
        else:
            resolve(progs, lanes)
            problem = _fit_problem(progs, n, k, rt, limit)
        if problem is None:
            return None
        first = first or problem
    return first or (f"one (step, message run) slot of a link needs more than the {limit} "
                     "instructions a threadblock holds (MSCCL_MAX_NUM_STEPS)")


def _recut(progs: list, budgets, ways: int):
    """Lanes for each of ``budgets`` in turn, from the programs' resolution at the time
    (lazy: the last laned program's nops are a closer estimate of the next one's)."""
    for budget in budgets:
        yield assign_lanes(progs, (budget,), xml_steps, ways)[0]


def lane_count(progs) -> int:
    """Lanes (channels per instance) the programs use."""
    return 1 + max((max(prog.lane) for prog in progs), default=0)


def _elements(prog: RankProgram, n: int, k: int) -> int:
    """XML elements rank ``prog.u`` loads from a resolved program of ``k`` instances: the
    algo, every gpu, its threadblocks and their steps (nops included)."""
    counts = steps_per_tb(prog)
    return 1 + n + k * len(counts) + k * sum(counts)


def _fit_problem(progs, n: int, k: int, rt, limit: int) -> str | None:
    """Why the lowered programs do not fit the runtime (one clause), or None."""
    return _lanes_problem(lane_count(progs), k, rt) or _ranks_problem(progs, n, k, rt, limit)


def _lanes_problem(lanes: int, k: int, rt) -> str | None:
    """Why ``lanes`` channel lanes of ``k`` instances exceed the runtime's channels, or None."""
    if k * lanes > rt.max_channels:
        return (f"spreading its links over {lanes} channel lanes × {k} instance(s) needs more "
                f"than the runtime's {rt.max_channels} channels; use fewer channels")
    return None


def _ranks_problem(progs, n: int, k: int, rt, limit: int) -> str | None:
    """Why some resolved rank program exceeds the runtime (the first in ``progs``), or
    None."""
    for prog in progs:
        counts = steps_per_tb(prog)
        ntb = len(counts)
        worst = int(np.argmax(counts))
        if counts[worst] > limit:
            kind, peer = prog.tb_peer[prog.emitted()[worst]]
            role = {"send": f"sending to {peer}", "recv": f"receiving from {peer}",
                    "local": "copying"}[kind]
            return (f"rank {prog.u}'s threadblock {role} has {counts[worst]} instructions, the "
                    f"limit is {limit} (MSCCL_MAX_NUM_STEPS); {_step_advice(rt, counts[worst])}")
        if k * ntb > min(rt.max_tbs, INT8_MAX + 1):
            return (f"rank {prog.u} needs {k * ntb} threadblocks, beyond the runtime's "
                    f"{min(rt.max_tbs, INT8_MAX + 1)} (int8 dependency ids); use fewer channels")
        nodes = _elements(prog, n, k)
        if nodes >= rt.max_nodes:
            return (f"rank {prog.u} would load {nodes} XML elements, the parser holds "
                    f"{rt.max_nodes - 1} (MAX_NODES); use fewer channels or export --format "
                    "json or npz instead")
        if k * max(prog.scratch, 1) > INT16_MAX + 1:
            return (f"rank {prog.u} needs {k * prog.scratch} scratch pieces, beyond int16 "
                    "offsets; use fewer channels")
        _check_ranges(prog, n, k, rt)
    return None


def _check_ranges(prog: RankProgram, n: int, k: int, rt) -> None:
    """The parser's count and offset rules on a resolved program's arrays, for the last
    instance (the largest offsets): 0 < cnt < MSCCL_MAX_COUNT, each instruction's source and
    destination pieces inside their buffer, offsets within int16. A failure is a writer
    bug (TopofinderError naming it); the execution model checks the written XML
    independently."""
    kp, coll, arr = prog.kp, prog.coll, prog.arr
    if not arr.shape[0]:
        return
    shift = channel_shift(coll, n, kp // k, k - 1)
    size = np.array([kp if coll == Collective.ALLGATHER else n * kp,
                     kp if coll == Collective.REDUCE_SCATTER else n * kp, k * prog.scratch])
    base = np.array([shift, shift, (k - 1) * prog.scratch])
    cnt = arr[:, 6].astype(np.int64)
    bad = (cnt < 1) | (cnt >= rt.max_count)
    for bcol, ocol in ((2, 3), (4, 5)):
        buf = arr[:, bcol]
        off = arr[:, ocol].astype(np.int64) + base[buf]
        bad |= (off < 0) | (off + cnt > size[buf]) | (off > INT16_MAX)
    if bad.any():
        j = int(np.argmax(bad))
        raise TopofinderError(f"MSCCL lowering: internal error, rank {prog.u}'s instruction "
                              f"{arr[j, :8].tolist()} breaks the parser's count or offset "
                              "ranges")
