"""Schedules and pipelines: how the times of several resources and stages combine.

Each rule lives here once, and production calls it:

    shared_core, overlapped_core, stages_core   the evaluator's operator time (dse/model/evaluator.py:
        work on one unit adds, independent resources overlap, dependent stages add; seed 004 §4.8.1);
        combine_shared / combine_overlapped / combine_stages are the checked wrappers
    flow_core, flow_time                        n identical items through dependent stages on distinct
        resources: the evaluator's pipeline-parallel step (micro-batches through the chips and the links
        between them, GPipe's bubble; Huang et al. 2019) and double_buffer_time's two stages
    amdahl, amdahl_speedup, amdahl_ceiling      the what-if's Amdahl table (dse.whatif; seed 004 §4.1,
        §4.1.3; seed 000 "The rest of a training kernel")
    serial_time, double_buffer_time, input_slot_schedule, min_slots_for_gapless
        the k-loop of one output tile in `dse tiles` (dse.solvers.gemm_tiles; seed 004 §4.4.2)
    attention_block_cycles                      the what-if's attention table (seed 004 §4.2.3, Example 4-1)
    attention_handoff_schedule                  the what-if's handoff table beside it (seed 004 §4.4.3)

The closed forms take numpy arrays and broadcast; the tick schedules (input slots, the QK -> softmax ->
PV handoff) are small scalar event simulations that return frozen records. Time units are whatever the
caller uses (seconds in the model, ticks or cycles in the seeds' examples) unless a name says so. The
``*_core`` functions are unchecked (the evaluator's inner loop calls them); every other function checks
its arguments as people's input (SpecError, dse.model.args.checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError
from dse.model import jit
from dse.model.args import checked as _arr, scalar_or_array as _out
from dse.model.tiling import ceil_div_core as _ceil_div

__all__ = [
    "shared_core",
    "overlapped_core",
    "stages_core",
    "combine_shared",
    "combine_overlapped",
    "combine_stages",
    "flow_core",
    "flow_time",
    "amdahl",
    "amdahl_speedup",
    "amdahl_ceiling",
    "serial_time",
    "double_buffer_time",
    "InputSlotSchedule",
    "input_slot_schedule",
    "min_slots_for_gapless",
    "AttentionBlockCycles",
    "attention_block_cycles",
    "ScheduledStep",
    "HandoffSchedule",
    "attention_handoff_schedule",
]


def _int(name: str, value, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SpecError(f"{name}: expected an integer, got {value!r}")
    if value < minimum:
        raise SpecError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


# --------------------------------------------------------------- combining times (seed 004 §4.8.1)


@jit.rule(loops=True)
def shared_core(*times):
    """Work on one shared resource adds: T_r = sum_i w_ri / p_ri (seed 004 §4.8.1); unchecked, broadcasts (numbers
    in compiled kernels)."""
    total = times[0]
    for t in times[1:]:
        total = total + t
    return total


@jit.rule(loops=True)
def overlapped_core(*times):
    """Independent resources overlap, the slowest sets the time: T = max_r T_r (seed 004 §4.8.1); unchecked."""
    slowest = times[0]
    for t in times[1:]:
        slowest = jit.maximum(slowest, t)
    return slowest


@jit.rule(loops=True)
def stages_core(*times):
    """Dependent stages run one after another and add (seed 004 §4.8.1); unchecked, broadcasts."""
    return shared_core(*times)


def _checked_times(rule: str, times) -> list[np.ndarray]:
    if not times:
        raise SpecError(f"{rule}: give at least one time")
    return [_arr(f"{rule}: times[{i}]", t) for i, t in enumerate(times)]


def combine_shared(*times):
    """Checked :func:`shared_core`: 1 G ops at 100 and 200 Gops/s on one matrix unit take 10 + 5 = 15 ms
    (seed 004 §4.8.1)."""
    return _out(shared_core(*_checked_times("combine_shared", times)))


def combine_overlapped(*times):
    """Checked :func:`overlapped_core`: T = max_r T_r over independent resources (seed 004 §4.8.1)."""
    return _out(overlapped_core(*_checked_times("combine_overlapped", times)))


def combine_stages(*times):
    """Checked :func:`stages_core` (seed 004 §4.8.1). A roofline is one stage over two overlapped resources,
    ``combine_overlapped(flops / peak, bytes / bandwidth)``; stages of 10/1 us then 1/10 us (matrix/memory)
    take 10 + 10 = 20 us, not max(11, 11) = 11 us."""
    return _out(stages_core(*_checked_times("combine_stages", times)))


# --------------------------------------------------------------- pipelines of identical items


def flow_core(total, slowest, items):
    """``items`` identical items through stages in a row, each stage its own resource, one item per stage at a
    time: the first item takes every stage (``total``, their sum), each later one comes out one ``slowest``
    stage time after the one before: T = total + (n - 1) max_j t_j (a flow shop of identical jobs; the seed's
    double buffer, seed 004 §4.4.2, is its two-stage case). With p equal stages of t and nothing between them,
    (n + p - 1) t: GPipe's bubble (p - 1) / (n + p - 1) of the time (Huang et al. 2019). Unchecked, broadcasts."""
    with np.errstate(invalid="ignore"):  # (one item: the slowest stage never repeats, even when infinite)
        return total + np.where(np.asarray(items) > 1, (items - 1.0) * slowest, 0.0)


def flow_time(stage_times, items):
    """Checked :func:`flow_core` over a list of stage times (each a scalar or an array): four stages of 1 ms, 16
    items: 4 + 15 = 19 ms, the four stages busy 16 of the 19."""
    ts = _checked_times("flow_time", stage_times)
    n = _arr("items", items)
    if np.any(n < 1) or np.any(n != np.floor(n)):
        raise SpecError(f"items: expected a whole number >= 1, got {items!r}")
    return _out(flow_core(shared_core(*ts), overlapped_core(*ts), n))


# --------------------------------------------------------------- Amdahl


def amdahl(total, part, speedup):
    """New total when ``part`` of ``total`` runs ``speedup`` times faster: total - part + part / s (seed 004 §4.1).

    100 us with 60 us of matrix work, the matrix 2x faster: 70 us; 4x: 55 us.
    """
    total = _arr("total", total)
    part = _arr("part", part)
    speedup = _arr("speedup", speedup, positive=True)
    if np.any(part > total):
        raise SpecError(f"part: must be <= total, got part={part}, total={total}")
    return _out(total - part + part / speedup)


def _fraction(fraction) -> np.ndarray:
    f = _arr("fraction", fraction)
    if np.any(f > 1):
        raise SpecError(f"fraction: must be in [0, 1], got {fraction!r}")
    return f


def amdahl_speedup(fraction, speedup):
    """Amdahl's law S = 1 / ((1 - p) + p / s) (seed 004 §4.1.3; seed 000 "The rest of a training kernel").

    GEMMs 85 % of a training step, 2x faster: 1.74x for the step. ``speedup`` may be inf (the part takes
    no time any more: :func:`amdahl_ceiling`).
    """
    f = _fraction(fraction)
    s = _arr("speedup", speedup, positive=True)
    return _out(1.0 / ((1.0 - f) + f / s))


def amdahl_ceiling(fraction):
    """Speedup limit as the accelerated part's time goes to zero: 1 / (1 - p); inf for p = 1 (seed 004 §4.1.3)."""
    f = _fraction(fraction)
    with np.errstate(divide="ignore"):
        return _out(np.where(f >= 1, np.inf, 1.0 / np.where(f >= 1, 1.0, 1.0 - f)))


# --------------------------------------------------------------- double buffering (seed 004 §4.4.2)


def serial_time(n, t_load, t_compute):
    """Load then compute each of n blocks, no overlap (one buffer): n (t_l + t_c) (seed 004 §4.4.2)."""
    n = _arr("n", n)
    return _out(n * (_arr("t_load", t_load) + _arr("t_compute", t_compute)))


def double_buffer_time(n, t_load, t_compute):
    """Double-buffered pipeline T = t_l + t_c + (n - 1) max(t_l, t_c); 0 for n = 0 (seed 004 §4.4.2).

    Eight blocks, 2 us load, 1 us compute: 17 us (serial 24 us); compute twice as fast: 16.5 us.
    """
    n = _arr("n", n)
    tl = _arr("t_load", t_load)
    tc = _arr("t_compute", t_compute)
    t = flow_core(tl + tc, np.maximum(tl, tc), n)
    return _out(np.where(n > 0, t, 0.0))


# --------------------------------------------------------------- input slots


@dataclass(frozen=True)
class InputSlotSchedule:
    """Result of :func:`input_slot_schedule`; per-block tuples are indexed by block."""

    completion: float
    issue: tuple[float, ...]
    ready: tuple[float, ...]
    start: tuple[float, ...]
    end: tuple[float, ...]

    @property
    def gapless(self) -> bool:
        """True when the matrix unit computes without an idle gap from the first start to the end."""
        return all(s <= e for s, e in zip(self.start[1:], self.end[:-1]))

    @property
    def idle(self) -> float:
        """Total idle time of the compute unit between the first block's start and the completion."""
        return float(sum(s - e for s, e in zip(self.start[1:], self.end[:-1])))


def input_slot_schedule(n_blocks: int, slots: int, issue_interval, latency, compute) -> InputSlotSchedule:
    """Event schedule of input slots: issue when a slot and the interface are free, ready at issue + latency (seed 004 §4.4.2).

    Semantics (seed 004 §4.4.2, Figures 4-18..4-20):

    * one transfer interface, one block at a time: it is busy ``issue_interval``
      after each issue (transfer 64 ticks in the seed's example);
    * a block's data is usable ``latency`` after its request was issued
      (transfer 64 + wait 128 = 192 ticks);
    * one matrix unit computes blocks in order, ``compute`` each;
    * a slot is held from the block's issue until its compute ends, and a slot
      freed at time t can be reissued at t.

    Blocks are issued in order and finish in order, so block b reuses the slot
    of block b - slots and the event simulation reduces to one pass.
    """
    n = _int("n_blocks", n_blocks, minimum=1)
    k = _int("slots", slots, minimum=1)
    ii = float(_arr("issue_interval", issue_interval))
    lat = float(_arr("latency", latency))
    c = float(_arr("compute", compute))
    issue, ready, start, end = [], [], [], []
    interface_free = 0.0
    for b in range(n):
        slot_free = end[b - k] if b >= k else 0.0
        t_issue = max(slot_free, interface_free)
        interface_free = t_issue + ii
        t_ready = t_issue + lat
        t_start = max(t_ready, end[b - 1] if b else 0.0)
        issue.append(t_issue)
        ready.append(t_ready)
        start.append(t_start)
        end.append(t_start + c)
    return InputSlotSchedule(end[-1], tuple(issue), tuple(ready), tuple(start), tuple(end))


def min_slots_for_gapless(n_blocks: int, issue_interval, latency, compute) -> int | None:
    """Fewest input slots whose schedule computes without gaps, i.e. ends at latency + n*compute; None if none can (seed 004 §4.4.2)."""
    n = _int("n_blocks", n_blocks, minimum=1)
    for k in range(1, n + 1):
        if input_slot_schedule(n, k, issue_interval, latency, compute).gapless:
            return k
    return None


# --------------------------------------------------------------- attention block interval


@dataclass(frozen=True)
class AttentionBlockCycles:
    """Per-resource cycles of one attention block and the steady-state interval (floats or arrays)."""

    matrix: object
    exp: object
    smem: object
    interval: object
    matrix_flops: object
    exps: object
    smem_bytes: object


def attention_block_cycles(
    rows=128,
    cols=128,
    head_dim=128,
    *,
    matrix_flops_per_cycle=8192,
    exp_per_cycle=16,
    smem_bytes_per_cycle=128,
    operand_bytes=2,
    matrix_speedup=1.0,
    exp_speedup=1.0,
    smem_speedup=1.0,
) -> AttentionBlockCycles:
    """Attention block on one SM: matrix, exp and shared-memory cycles; interval = their max (seed 004 §4.2.3, Example 4-1).

    Work per block of ``rows`` queries x ``cols`` keys with head dimension d:
    QK and PV FLOPs 2 * (2 rows cols d); ``rows*cols`` exponentials; shared
    memory reads of the Q, K and V operand tiles, (rows + 2 cols) d
    ``operand_bytes`` (96 KiB for 128x128, d = 128, BF16). Each rate is
    multiplied by its ``*_speedup``. Once blocks pipeline across the three
    independent resources, adjacent blocks complete at least
    ``max(matrix, exp, smem)`` apart. Arguments broadcast as numpy arrays.
    """
    rows = _arr("rows", rows, positive=True)
    cols = _arr("cols", cols, positive=True)
    d = _arr("head_dim", head_dim, positive=True)
    flops = 2.0 * 2.0 * rows * cols * d
    exps = rows * cols
    smem_bytes = (rows + 2.0 * cols) * d * _arr("operand_bytes", operand_bytes, positive=True)
    matrix = flops / (_arr("matrix_flops_per_cycle", matrix_flops_per_cycle, positive=True)
                      * _arr("matrix_speedup", matrix_speedup, positive=True))
    exp = exps / (_arr("exp_per_cycle", exp_per_cycle, positive=True)
                  * _arr("exp_speedup", exp_speedup, positive=True))
    smem = smem_bytes / (_arr("smem_bytes_per_cycle", smem_bytes_per_cycle, positive=True)
                         * _arr("smem_speedup", smem_speedup, positive=True))
    interval = np.maximum(np.maximum(matrix, exp), smem)
    return AttentionBlockCycles(
        _out(matrix), _out(exp), _out(smem), _out(interval), _out(flops), _out(exps), _out(smem_bytes)
    )


# --------------------------------------------------------------- QK -> softmax -> PV handoff


@dataclass(frozen=True)
class ScheduledStep:
    """One step of the handoff schedule: which group, what, on which resource, when (ticks)."""

    group: int
    name: str
    resource: str
    start: int
    end: int


@dataclass(frozen=True)
class HandoffSchedule:
    """Result of :func:`attention_handoff_schedule` (all times in integer ticks)."""

    completion: int
    vector_start: int
    steps: tuple[ScheduledStep, ...]
    durations: dict  # step name -> ticks, for a full row group

    def busy(self, resource: str) -> int:
        """Ticks the resource is busy over the whole schedule."""
        return sum(s.end - s.start for s in self.steps if s.resource == resource)


_MATRIX, _VECTOR, _INTERFACE = "matrix", "vector", "interface"


def _group_steps(g, cols, d, direct, matrix_rate, iface_rate, exp_rate, ops_rate, score_bytes, prob_bytes):
    """(name, resource, ticks) for one row group of g rows, each step rounded up (seed 004 §4.4.3)."""
    n = g * cols
    passes = 1 if direct else 2  # write-then-read moves the bytes through the interface twice

    def ticks(work, rate):
        return int(_ceil_div(work, rate))

    return [
        ("qk", _MATRIX, ticks(2 * g * cols * d, matrix_rate)),
        ("scores", _INTERFACE, passes * ticks(n * score_bytes, iface_rate)),
        # scale (n) + subtract (n) + row sums (g (cols - 1) adds)
        ("ordinary", _VECTOR, ticks(2 * n + g * (cols - 1), ops_rate)),
        # row maxima: g (cols - 1) comparisons
        ("compare", _VECTOR, ticks(g * (cols - 1), ops_rate)),
        ("exp", _VECTOR, ticks(n, exp_rate)),
        ("divide", _VECTOR, ticks(n, exp_rate)),
        ("probs", _INTERFACE, passes * ticks(n * prob_bytes, iface_rate)),
        ("pv", _MATRIX, ticks(2 * g * cols * d, matrix_rate)),
    ]


def attention_handoff_schedule(
    rows: int = 128,
    cols: int = 128,
    head_dim: int = 128,
    *,
    group_rows: int = 32,
    slots: int = 1,
    direct: bool = False,
    matrix_flops_per_tick=8192,
    interface_bytes_per_tick=128,
    exp_per_tick=16,
    vector_ops_per_tick=128,
    score_bytes: int = 4,
    prob_bytes: int = 2,
) -> HandoffSchedule:
    """Event-driven list schedule of QK -> softmax -> PV over row groups with handoff slots (seed 004 §4.4.3).

    Model (every number derived from the parameters, every step rounded up to
    a whole tick, as the seed states):

    * The ``rows`` query rows are split into groups of ``group_rows`` (the last
      group may be smaller). Each group runs the chain
      qk -> scores -> ordinary -> compare -> exp -> divide -> probs -> pv;
      each step starts when the previous one of its group has ended.
    * Resources, each running one step at a time: the *matrix* unit (qk and pv,
      2 g cols d FLOPs each at ``matrix_flops_per_tick``), the *vector* unit
      (softmax, four serial steps: ordinary ops = scaling n + subtraction n +
      row sums g (cols-1) at ``vector_ops_per_tick``; comparison = row maxima
      g (cols-1) at ``vector_ops_per_tick``; exponentials n and divisions n at
      ``exp_per_tick``; n = g cols), and the shared handoff *interface* (FP32
      scores to the vector unit, BF16 probabilities back). Direct handoff moves
      each tensor through the interface once; write-then-read moves it twice
      (write, then read), as one step of twice the ticks. Matrix operand
      reads are not charged to the interface.
    * A group holds one of ``slots`` handoff buffers from the start of its qk
      until its pv ends; a buffer freed at t can be taken at t.
    * Greedy list scheduling: whenever a resource is free, it starts the ready
      step of the earliest row group ("complete-row-group order"); nothing is
      preempted.

    The reductions count cols-1 operations per row, which is why one group of
    128 rows takes 5118 ticks while four serial groups of 32 take 4 x 1280 =
    5120: for 32 rows the ordinary ops (95.75) and comparisons (31.75) round
    up to 96 and 32 ticks; for 128 rows they are 383 and 127 exactly.
    """
    rows = _int("rows", rows, minimum=1)
    cols = _int("cols", cols, minimum=1)
    d = _int("head_dim", head_dim, minimum=1)
    g = _int("group_rows", group_rows, minimum=1)
    k = _int("slots", slots, minimum=1)
    rates = {
        name: float(_arr(name, v, positive=True))
        for name, v in [
            ("matrix_flops_per_tick", matrix_flops_per_tick),
            ("interface_bytes_per_tick", interface_bytes_per_tick),
            ("exp_per_tick", exp_per_tick),
            ("vector_ops_per_tick", vector_ops_per_tick),
        ]
    }
    score_bytes = _int("score_bytes", score_bytes, minimum=1)
    prob_bytes = _int("prob_bytes", prob_bytes, minimum=1)

    group_sizes = [min(g, rows - i) for i in range(0, rows, g)]
    chains = [
        _group_steps(
            size, cols, d, direct,
            rates["matrix_flops_per_tick"], rates["interface_bytes_per_tick"],
            rates["exp_per_tick"], rates["vector_ops_per_tick"], score_bytes, prob_bytes,
        )
        for size in group_sizes
    ]
    steps = _list_schedule(chains, k)
    vector_start = min(s.start for s in steps if s.resource == _VECTOR)
    durations = {name: ticks for name, _, ticks in chains[0]}
    return HandoffSchedule(max(s.end for s in steps), vector_start, tuple(steps), durations)


def _list_schedule(chains, slots: int) -> list[ScheduledStep]:
    """Non-preemptive greedy list scheduler over per-group step chains, earliest group first (seed 004 §4.4.3)."""
    n_groups = len(chains)
    next_step = [0] * n_groups          # index of each group's next unstarted step
    prev_end = [0] * n_groups           # end of each group's last started step
    running: list[tuple[int, int]] = []  # (end, group) of steps in flight
    busy_until: dict[str, int] = {}
    free_slots = slots
    done: list[ScheduledStep] = []
    t = 0
    while len(done) < sum(len(c) for c in chains):
        # finish steps that ended by t; a group's last step releases its slot
        still = []
        for end, grp in running:
            if end <= t:
                if next_step[grp] == len(chains[grp]):
                    free_slots += 1
            else:
                still.append((end, grp))
        running = still
        # dispatch in group order
        started = False
        for grp in range(n_groups):
            i = next_step[grp]
            if i == len(chains[grp]) or any(r == grp for _, r in running):
                continue
            if prev_end[grp] > t:
                continue
            name, resource, dur = chains[grp][i]
            if busy_until.get(resource, 0) > t:
                continue
            if i == 0:
                if free_slots == 0:
                    continue
                free_slots -= 1
            busy_until[resource] = t + dur
            prev_end[grp] = t + dur
            next_step[grp] = i + 1
            running.append((t + dur, grp))
            done.append(ScheduledStep(grp, name, resource, t, t + dur))
            started = True
        if started and any(end <= t for end, _ in running):
            continue  # a zero-tick step ended at t: settle it before moving on
        if not running:
            raise RuntimeError("handoff schedule stalled")  # cannot happen with slots >= 1
        t = min(end for end, _ in running)
    return sorted(done, key=lambda s: (s.start, s.group))
