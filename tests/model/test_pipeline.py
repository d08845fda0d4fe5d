"""dse.model.pipeline: seed cases (inputs typed from the seeds, expected values from the case file) and properties.

Each function here is also what production runs: the evaluator's operator and step times (combining
times), the what-if's Amdahl and attention tables (Amdahl, attention_block_cycles, the handoff schedule;
tests/test_whatif.py shows them there) and `dse tiles`' k-loop (double buffering, input slots;
tests/test_cli.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import SpecError
from dse.model.pipeline import (
    amdahl,
    amdahl_ceiling,
    amdahl_speedup,
    attention_block_cycles,
    attention_handoff_schedule,
    combine_overlapped,
    combine_shared,
    combine_stages,
    double_buffer_time,
    input_slot_schedule,
    min_slots_for_gapless,
    overlapped_core,
    serial_time,
    shared_core,
    stages_core,
)
from tests.reference_cases import approx

KiB = 1024

# --------------------------------------------------------------- seed cases


def test_double_buffer_pipeline():
    # seed 004 §4.4.2: eight blocks, 2 us load, 1 us compute; then compute twice as fast
    n, t_l = 8, 2e-6
    approx("double_buffer_pipeline", "serial_s", serial_time(n, t_l, 1e-6))
    approx("double_buffer_pipeline", "pipelined_tc1_s", double_buffer_time(n, t_l, 1e-6))
    approx("double_buffer_pipeline", "pipelined_tc0p5_s", double_buffer_time(n, t_l, 0.5e-6))


def test_input_slots_schedule():
    # seed 004 §4.4.2: 4 blocks of 16 KiB at 256 B/tick -> transfer 64 ticks; +128 wait -> ready 192
    # after issue; compute 1,048,576 FLOPs / 8192 FLOPs/tick = 128 ticks (64 at doubled rate)
    n_blocks = 4
    transfer = 16 * KiB / 256
    latency = transfer + 128
    compute = 2 * 128 * 128 * 32 / 8192
    cid = "input_slots_schedule"
    for slots in (1, 2, 3, 4):
        sched = input_slot_schedule(n_blocks, slots, transfer, latency, compute)
        approx(cid, f"slots{slots}_ticks", sched.completion)
    for slots in (3, 4):
        sched = input_slot_schedule(n_blocks, slots, transfer, latency, compute / 2)
        approx(cid, f"doubled_rate_slots{slots}_ticks", sched.completion)
    approx(cid, "min_slots_for_gapless", min_slots_for_gapless(n_blocks, transfer, latency, compute))
    approx(cid, "min_slots_for_gapless_doubled_rate", min_slots_for_gapless(n_blocks, transfer, latency, compute / 2))


def test_input_slots_timeline_matches_text():
    # seed 004 §4.4.2, two slots: blocks issued at 0 and 64; third ready at 512; 64-tick gap after 448
    s2 = input_slot_schedule(4, 2, 64, 192, 128)
    assert s2.issue[:3] == (0.0, 64.0, 320.0)
    assert s2.ready[2] == 512.0 and s2.end[1] == 448.0
    assert not s2.gapless and s2.idle == 64.0  # only the gap 448 -> 512
    # three slots: issues 0, 64, 128, fourth at 320 ready 512 before its start 576
    s3 = input_slot_schedule(4, 3, 64, 192, 128)
    assert s3.issue == (0.0, 64.0, 128.0, 320.0)
    assert s3.ready[3] == 512.0 and s3.start[3] == 576.0 and s3.gapless
    # doubled rate, three slots: fourth issued at 256, ready 448 > 384
    d3 = input_slot_schedule(4, 3, 64, 192, 64)
    assert d3.issue[3] == 256.0 and d3.ready[3] == 448.0
    # the "Think" question: wait 256 instead of 128 -> three slots are no longer enough
    assert min_slots_for_gapless(4, 64, 64 + 256, 128) == 4


def test_attention_block_pipeline():
    # seed 004 §4.2.3, Example 4-1: 128x128 block, head dim 128, B200 SM:
    # 8192 FLOP/cycle, 16 exp/cycle, 128 B/cycle shared memory, BF16 operands
    cid = "attention_block_pipeline"
    base = attention_block_cycles(128, 128, 128, matrix_flops_per_cycle=8192, exp_per_cycle=16,
                                  smem_bytes_per_cycle=128, operand_bytes=2)
    assert base.smem_bytes == 96 * KiB
    approx(cid, "matrix_cycles", base.matrix)
    approx(cid, "exp_cycles", base.exp)
    approx(cid, "smem_cycles", base.smem)
    approx(cid, "interval_cycles", base.interval)
    approx(cid, "interval_matrix_2x", attention_block_cycles(matrix_speedup=2).interval)
    approx(cid, "interval_matrix_and_exp_2x", attention_block_cycles(matrix_speedup=2, exp_speedup=2).interval)
    approx(cid, "interval_all_2x",
           attention_block_cycles(matrix_speedup=2, exp_speedup=2, smem_speedup=2).interval)
    # vectorized over design points
    many = attention_block_cycles(matrix_speedup=np.array([1, 2, 2, 2]), exp_speedup=np.array([1, 1, 2, 2]),
                                  smem_speedup=np.array([1, 1, 1, 2]))
    np.testing.assert_array_equal(many.interval, [1024, 1024, 768, 512])


HANDOFF_RUNS = [
    # (key, group_rows, slots, direct)
    ("write_read_group128_slots1_ticks", 128, 1, False),
    ("write_read_group32_slots1_ticks", 32, 1, False),
    ("write_read_group32_slots2_ticks", 32, 2, False),
    ("direct_group32_slots2_ticks", 32, 2, True),
    ("direct_group32_slots4_ticks", 32, 4, True),
]


def _handoff(group_rows, slots, direct):
    # seed 004 §4.4.3: 128x128 scores, head dim 128; 8192 FLOPs/tick, 128 B/tick interface,
    # 16 exp (and divisions)/tick, 128 ordinary ops and comparisons/tick; FP32 scores, BF16 probabilities
    return attention_handoff_schedule(
        128, 128, 128, group_rows=group_rows, slots=slots, direct=direct,
        matrix_flops_per_tick=8192, interface_bytes_per_tick=128, exp_per_tick=16,
        vector_ops_per_tick=128, score_bytes=4, prob_bytes=2,
    )


def test_attention_handoff_schedule():
    cid = "attention_handoff_schedule"
    for key, g, k, direct in HANDOFF_RUNS:
        approx(cid, key, _handoff(g, k, direct).completion)
    approx(cid, "vector_start_group128_ticks", _handoff(128, 1, False).vector_start)
    approx(cid, "vector_start_group32_ticks", _handoff(32, 1, False).vector_start)
    approx(cid, "vector_start_direct_ticks", _handoff(32, 2, True).vector_start)


def test_attention_handoff_step_times_match_text():
    # seed 004 §4.4.3: for 32 rows QK and PV 128 ticks; softmax 96 + 32 + 256 + 256 = 640;
    # direct handoff 128 and 64 ticks, write-then-read 256 and 128
    wr, dh = _handoff(32, 1, False).durations, _handoff(32, 2, True).durations
    assert wr["qk"] == wr["pv"] == 128
    assert (wr["ordinary"], wr["compare"], wr["exp"], wr["divide"]) == (96, 32, 256, 256)
    assert (dh["scores"], dh["probs"]) == (128, 64)
    assert (wr["scores"], wr["probs"]) == (256, 128)


def test_attention_handoff_resources_never_overlap():
    for _, g, k, direct in HANDOFF_RUNS:
        sched = _handoff(g, k, direct)
        for res in ("matrix", "vector", "interface"):
            spans = sorted((s.start, s.end) for s in sched.steps if s.resource == res)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        # slots: at most k groups between their qk start and pv end at any time
        spans = [(min(s.start for s in sched.steps if s.group == grp),
                  max(s.end for s in sched.steps if s.group == grp))
                 for grp in {s.group for s in sched.steps}]
        for t in {a for a, _ in spans}:
            assert sum(a <= t < b for a, b in spans) <= k


def test_amdahl():
    # seed 004 §4.1 / §4.1.3: 100 us task, 60 us matrix
    approx("amdahl", "total_2x_s", amdahl(100e-6, 60e-6, 2))
    approx("amdahl", "speedup_2x", amdahl_speedup(0.6, 2))
    approx("amdahl", "total_4x_s", amdahl(100e-6, 60e-6, 4))
    approx("amdahl", "ceiling", amdahl_ceiling(0.6))
    assert amdahl_ceiling(1.0) == np.inf


def test_checked_combinations_are_the_evaluators_cores():
    # the evaluator calls the unchecked cores; the checked wrappers give the same numbers, and broadcast
    a, b, c = np.array([1.0, 5.0]), np.array([[2.0], [3.0]]), 4.0
    np.testing.assert_array_equal(combine_overlapped(a, b, c), overlapped_core(a, b, c))
    np.testing.assert_array_equal(combine_shared(a, b), shared_core(a, b))
    np.testing.assert_array_equal(combine_stages(a, b, c), stages_core(a, b, c))
    assert overlapped_core(a, b, c).shape == (2, 2)


def test_amdahl_training_step():
    # seed 000 "The rest of a training kernel": GEMMs 85% of the step, 2x faster
    approx("amdahl_training_step", "speedup_p085_s2", amdahl_speedup(0.85, 2))


def test_shared_vs_independent_resources():
    # seed 004 §4.8.1: 1 G ops at 100 and 200 Gops/s on one matrix unit
    cid = "shared_vs_independent_resources"
    approx(cid, "shared_unit_s", combine_shared(1e9 / 100e9, 1e9 / 200e9))
    # stage 1: matrix 10 us, memory 1 us; stage 2: matrix 1 us, memory 10 us
    matrix, memory = (10e-6, 1e-6), (1e-6, 10e-6)
    staged = combine_stages(combine_overlapped(matrix[0], memory[0]), combine_overlapped(matrix[1], memory[1]))
    approx(cid, "staged_s", staged)
    approx(cid, "naive_overlap_s", combine_overlapped(combine_shared(*matrix), combine_shared(*memory)))


def test_bad_arguments_raise_spec_error():
    with pytest.raises(SpecError):
        input_slot_schedule(4, 0, 64, 192, 128)
    with pytest.raises(SpecError):
        attention_handoff_schedule(group_rows=0)
    with pytest.raises(SpecError):
        double_buffer_time(8, -1.0, 1.0)
    with pytest.raises(SpecError):
        amdahl_speedup(1.5, 2)
    with pytest.raises(SpecError):
        combine_overlapped()
    with pytest.raises(SpecError):
        combine_shared(1.0, float("nan"))
    with pytest.raises(SpecError):
        amdahl(1.0, 2.0, 2.0)
    with pytest.raises(SpecError):
        attention_block_cycles(rows=0)
    with pytest.raises(SpecError):
        attention_block_cycles(matrix_speedup=-1.0)


# --------------------------------------------------------------- properties

times = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=1000), t_l=times, t_c=times)
def test_double_buffer_bounds(n, t_l, t_c):
    # the slower stage runs n times back to back, so T >= n max(t_l, t_c); overlap never hurts,
    # so T <= n (t_l + t_c); and since t_l + t_c <= 2 max, the saving is at most half: T >= serial / 2
    t = double_buffer_time(n, t_l, t_c)
    serial = serial_time(n, t_l, t_c)
    eps = 1e-9 * max(1.0, serial)
    assert n * max(t_l, t_c) - eps <= t <= serial + eps
    assert t >= serial / 2 - eps


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=12),
    issue=st.integers(min_value=0, max_value=200),
    wait=st.integers(min_value=0, max_value=400),
    compute=st.integers(min_value=0, max_value=300),
)
def test_more_slots_never_slower(n, issue, wait, compute):
    latency = issue + wait
    times_by_slots = [input_slot_schedule(n, k, issue, latency, compute).completion for k in range(1, n + 2)]
    assert all(b <= a for a, b in zip(times_by_slots, times_by_slots[1:]))
    # never better than the lower bound first-ready + all compute, nor the interface bound
    assert times_by_slots[-1] >= latency + n * compute
    assert times_by_slots[-1] >= (n - 1) * issue + latency + compute
    # with one slot every block is fully serial
    assert times_by_slots[0] == n * (latency + compute)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.sampled_from([32, 64, 96, 128]),
    group=st.sampled_from([16, 32, 64, 128]),
    direct=st.booleans(),
)
def test_handoff_schedule_bounds(rows, group, direct):
    # completion is at least the busiest resource and at most the fully serial sum of all steps
    one = attention_handoff_schedule(rows, group_rows=group, slots=1, direct=direct)
    serial = sum(s.end - s.start for s in one.steps)
    assert one.completion == serial  # one slot and one group at a time: nothing overlaps
    many = attention_handoff_schedule(rows, group_rows=group, slots=8, direct=direct)
    assert max(many.busy(r) for r in ("matrix", "vector", "interface")) <= many.completion <= serial


@settings(max_examples=100, deadline=None)
@given(n=st.integers(min_value=1, max_value=64), t_l=times, t_c=times)
def test_slots_without_wait_are_serial_and_double_buffering(n, t_l, t_c):
    # `dse tiles` shows both: with no wait beyond the transfer, one input slot is the serial loop and two
    # slots the double-buffered pipeline (seed 004 §4.4.2)
    one = input_slot_schedule(n, 1, t_l, t_l, t_c).completion
    two = input_slot_schedule(n, 2, t_l, t_l, t_c).completion
    assert one == pytest.approx(serial_time(n, t_l, t_c), rel=1e-12, abs=1e-12)
    assert two == pytest.approx(double_buffer_time(n, t_l, t_c), rel=1e-12, abs=1e-12)


def _flow_shop(stage_times, items):
    """Completion time of ``items`` identical items through stages in a row, each stage one resource that takes
    one item at a time, simulated item by item: an item enters stage j when it has left stage j - 1 and the
    item before it has left stage j."""
    done = [0.0] * len(stage_times)
    for _ in range(items):
        t = 0.0
        for j, d in enumerate(stage_times):
            t = max(t, done[j]) + d
            done[j] = t
    return done[-1]


def test_flow_time_is_the_flow_shop():
    """GPipe (Huang et al. 2019): 4 stages of 1 ms, 16 micro-batches: 19 ms, each stage busy 16 of them, a bubble of
    (p - 1) / (m + p - 1) = 3 / 19; a slow link between the stages sets the pace instead."""
    from dse.model.pipeline import flow_time

    assert flow_time([1e-3] * 4, 16) == pytest.approx(19e-3)
    assert 1 - 16 * 1e-3 / flow_time([1e-3] * 4, 16) == pytest.approx(3 / 19)
    for stages, m in (([1.0, 0.2, 1.0, 0.2, 1.0], 7), ([0.5, 3.0, 0.5], 4), ([2.0], 5), ([1.0, 2.0, 0.5, 0.25], 1)):
        assert flow_time(stages, m) == pytest.approx(_flow_shop(stages, m))
    # the double buffer is the two-stage case (seed 004 §4.4.2: 8 blocks, 2 us load, 1 us compute: 17 us)
    assert flow_time([2e-6, 1e-6], 8) == pytest.approx(17e-6) == pytest.approx(_flow_shop([2e-6, 1e-6], 8))
    with pytest.raises(SpecError, match="items"):
        flow_time([1.0], 0)
    with pytest.raises(SpecError, match="items"):
        flow_time([1.0], 2.5)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(work=st.floats(min_value=1e-9, max_value=1.0), p=st.integers(min_value=1, max_value=16),
       m=st.integers(min_value=1, max_value=64), hop=st.floats(min_value=0.0, max_value=1e-2))
def test_more_micro_batches_of_the_same_work_are_never_slower(work, p, m, hop):
    """A stage's work split into m micro-batches (stage time work / (m p)), with p - 1 hops between the stages
    whose time does not shrink with the micro-batch (the fixed alpha): m + 1 micro-batches never take longer
    than m when the hop stays below the stage time, and the flow never beats the work / p of one stage."""
    from dse.model.pipeline import flow_core

    def t(n):
        ts = work / (n * p)
        return flow_core(p * ts + (p - 1) * hop, max(ts, hop if p > 1 else 0.0), n)

    assert t(m) >= work / p * (1 - 1e-12)
    if hop <= work / ((m + 1) * p):
        assert t(m + 1) <= t(m) * (1 + 1e-12)
