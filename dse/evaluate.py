"""The single join point: N design points x a workload -> metrics table.

Every solver, the what-if and `dse eval` call :func:`evaluate` (or its
array twin :func:`evaluate_arrays`); nothing else carries the physics.
Shapes: chips are (N,) arrays, operators (O,) arrays; the work is (N, O)
numpy broadcasting, identical layers evaluated once and multiplied by their
count (ARCHITECTURE rule 2).

Per operator (seed 004 §4.8.1: overlapped resources take the max, work on
one resource adds, dependent stages add):
    t_matrix = padded, wave-quantized FLOPs / (units x FLOP/cycle x sustained clock x eff)
    t_vector = vector FLOPs / vector rate + exps / exp rate
    t_memory = off-chip bytes / min(bandwidth x eff, Little's-law cap)
    t_op     = max(t_matrix, t_vector, t_memory) + kernel overhead
    step     = sum over operators of count x t_op + step overhead + link time
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.hardware import Chips
from dse.model import power as pw
from dse.model.tiling import pad
from dse.precision import get_format

RESOURCES = ("matrix", "vector", "memory")

# fall-back order when a chip lacks a format: run it on the next wider format the chip has
_WIDER = ["int4", "mxfp4", "nvfp4", "mxfp6", "mxfp6_e3m2", "fp8_e4m3", "fp8_e5m2", "mxfp8", "mxfp8_e5m2", "int8",
          "fp16", "bf16", "tf32", "fp32"]


@dataclass(frozen=True)
class OpTable:
    """A workload's operators as (O,) arrays (built once per workload)."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    formats: tuple[str, ...]
    count: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    batch: np.ndarray
    flops: np.ndarray
    a_bytes: np.ndarray
    b_bytes: np.ndarray
    c_bytes: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    vector_flops: np.ndarray
    exps: np.ndarray
    ea: np.ndarray  # bytes per element of A, B, C
    eb: np.ndarray
    ec: np.ndarray
    is_gemm: np.ndarray
    on_chip_a: np.ndarray  # operand A / output C stay on chip (fused attention: scores, probabilities)
    on_chip_c: np.ndarray
    causal_ops: tuple  # (column, Op) of causal attention operators: padded FLOPs skip masked tiles


@functools.lru_cache(maxsize=128)
def op_table(workload, fused: bool = True) -> OpTable:
    """Operator arrays; ``fused``: attention scores and probabilities stay on chip (FlashAttention-style
    kernels, seed 004 §4.4.3 direct handoff), so QK output, softmax and PV input cost no memory traffic."""
    ops = workload.ops

    def arr(attr, default=0.0):
        return np.array([float(getattr(o, attr, default) or 0.0) for o in ops], dtype=float)

    m, n, k = arr("m"), arr("n"), arr("k")
    return OpTable(
        names=tuple(o.name for o in ops),
        kinds=tuple(o.kind for o in ops),
        formats=tuple(get_format(o.fmt).name if getattr(o, "fmt", None) else "bf16" for o in ops),
        count=arr("count", 1.0),
        m=m, n=n, k=k,
        batch=np.maximum(arr("batch", 1.0), 1.0),
        flops=arr("flops"),
        a_bytes=arr("a_bytes"), b_bytes=arr("b_bytes"), c_bytes=arr("c_bytes"),
        weight_bytes=arr("weight_bytes"), kv_bytes=arr("kv_bytes"),
        vector_flops=arr("vector_flops"), exps=arr("exps"),
        ea=arr("elem_bytes_a", 2.0), eb=arr("elem_bytes_b", 2.0), ec=arr("elem_bytes_c", 2.0),
        is_gemm=(m > 0) & (n > 0) & (k > 0),
        on_chip_a=np.array([fused and o.kind in ("attention_pv", "softmax") for o in ops]),
        on_chip_c=np.array([fused and o.kind in ("attention_qk", "softmax") for o in ops]),
        causal_ops=tuple((i, o) for i, o in enumerate(ops) if getattr(o, "causal", None)),
    )


def _format_rate(chips: Chips, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs/cycle/unit and J/FLOP each point runs ``fmt`` at: its own rate, else the next wider format it has.

    (Weights stored in FP8 on a chip without FP8 matrix instructions are
    up-converted and multiplied in BF16, seed 004 §4.2.4.)
    """
    chain = [fmt] + (_WIDER[_WIDER.index(fmt) + 1:] if fmt in _WIDER else []) + list(reversed(_WIDER))
    rate = np.zeros(chips.n)
    energy = np.zeros(chips.n)
    done = np.zeros(chips.n, dtype=bool)
    for f in chain:
        fp = chips.flops_per_cycle(f)
        ok = ~done & (fp > 0)
        if ok.any():
            rate[ok] = fp[ok]
            energy[ok] = chips.get(f"energy.flop.{f}", 0.0)[ok]
            done |= ok
        if done.all():
            break
    return rate, energy


def default_tiles(chips: Chips, ops: OpTable):
    """Output tile (T_M, T_N), T_K and split-K from a buffer-filling heuristic (seed 004 §4.3.2, §4.4.2).

    The largest square tile, a multiple of the instruction tile, whose
    double-buffered working set 2 (T_M T_K + T_K T_N) e + T_M T_N x 4 B fits
    the local buffer (T_K = 4 k-steps of the instruction), clamped to the
    padded operator; split-K spreads a too-small grid of tiles over the units.
    The CP-SAT tile solver replaces this where the exact optimum matters.
    """
    im, inn, ik = (chips.get("matrix.instruction.m", 16)[:, None], chips.get("matrix.instruction.n", 16)[:, None],
                   chips.get("matrix.instruction.k", 16)[:, None])
    e = np.maximum(ops.ea, ops.eb)[None, :]
    tk = 4 * ik
    buf = np.maximum(chips.get("local_buffer", 0.0), 16 * 1024)[:, None]
    # 4 T tk e + 4 T^2 <= buf  ->  T = (-b + sqrt(b^2 + 16 buf)) / 8 with b = 4 tk e
    b = 4 * tk * e
    t = (-b + np.sqrt(b * b + 16 * buf)) / 8
    q = np.maximum(im, inn)
    t = np.clip(np.floor(t / q) * q, q, 256)
    tm = np.minimum(t, pad(np.maximum(ops.m, 1)[None, :], im))
    tn = np.minimum(t, pad(np.maximum(ops.n, 1)[None, :], inn))
    tiles = np.ceil(ops.m / tm) * np.ceil(ops.n / tn) * ops.batch
    units = chips.total_units[:, None]
    ksteps = np.maximum(np.ceil(ops.k / tk), 1)
    split = np.clip(np.floor(units / np.maximum(tiles, 1)), 1, ksteps)
    return tm, tn, tk, split


def evaluate_arrays(chips: Chips, workload, tiles=None, breakdown: bool = False,
                    fused_attention: bool = True) -> dict[str, np.ndarray]:
    """Metrics as (N,) arrays (the fast path solvers use). See module docstring."""
    ops = op_table(workload, fused_attention)
    N, O = chips.n, len(ops.names)
    clock = chips["clock"][:, None]
    units = chips.total_units[:, None]
    ceff = chips.get("calibration.compute_efficiency", 1.0)[:, None]
    beff = chips.get("calibration.bandwidth_efficiency", 1.0)[:, None]

    # ---- matrix rate per (point, op): a format the chip lacks runs on its next wider format
    fpc = np.zeros((N, O))
    e_flop = np.zeros((N, O))
    for fmt in set(ops.formats):
        cols = [i for i, f in enumerate(ops.formats) if f == fmt]
        r, e = _format_rate(chips, fmt)
        fpc[:, cols] = r[:, None]
        e_flop[:, cols] = e[:, None]

    # ---- tiles, padding and wave quantization (seed 004 §4.2.1; seed 000 "Shape tails")
    if tiles is None:
        tm, tn, tk, split = default_tiles(chips, ops)
    else:
        tm, tn, tk, split = (np.broadcast_to(np.asarray(x, dtype=float), (N, O)) for x in tiles)
    im, inn, ik = (chips.get("matrix.instruction.m", 16)[:, None], chips.get("matrix.instruction.n", 16)[:, None],
                   chips.get("matrix.instruction.k", 16)[:, None])
    g = ops.is_gemm[None, :]
    mp = pad(ops.m[None, :], im)
    np_ = pad(ops.n[None, :], inn)
    kp = pad(ops.k[None, :], ik)
    padded_flops = np.where(g, 2.0 * mp * np_ * kp * ops.batch, ops.flops)
    for col, op in ops.causal_ops:  # causal attention skips tiles above the diagonal (seed 004 §4.8.2)
        padded_flops[:, col] = op.padded_flops(im[:, 0], inn[:, 0], ik[:, 0])
    tiles_out = np.ceil(ops.m / tm) * np.ceil(ops.n / tn) * ops.batch
    work_items = tiles_out * split
    waves = np.ceil(work_items / units)
    wave_eff = np.where(g, work_items / np.maximum(waves * units, 1), 1.0)
    rate = units * fpc * clock  # FLOP/s at peak clock

    # ---- off-chip traffic from tiles (seed 004 §4.3.2, §4.4.1): an operand is re-read from memory once per
    # block of the other operand that L2 can hold beside it; with the whole operand in L2 it is read once.
    l2 = (chips.get("l2", 0.0) * chips["dies"])[:, None]
    kk = np.maximum(ops.k, 1.0)[None, :]
    t2 = np.maximum(np.floor(l2 / (2.0 * kk * (ops.ea + ops.eb))), 1.0)  # rows (cols) of an L2-resident panel
    rA = np.where(g & (ops.a_bytes[None, :] > l2), np.ceil(ops.n / np.maximum(tn, t2)), 1.0)
    rB = np.where(g & (ops.b_bytes[None, :] > l2), np.ceil(ops.m / np.maximum(tm, t2)), 1.0)
    a_mem = np.where(ops.on_chip_a, 0.0, ops.a_bytes)
    c_mem = np.where(ops.on_chip_c, 0.0, ops.c_bytes)
    bytes_mem = a_mem * rA + ops.b_bytes * rB + c_mem
    bytes_req = np.where(g, ops.a_bytes * np.ceil(ops.n / tn) + ops.b_bytes * np.ceil(ops.m / tm), ops.a_bytes + ops.b_bytes) + ops.c_bytes
    # split-K adds partial sums: (split - 1) extra FP32 outputs written and read back, through L2 when they
    # fit there, else through memory
    partial = np.where(g, (split - 1) * ops.m * ops.n * ops.batch * 4.0 * 2, 0.0)
    bytes_mem = bytes_mem + np.where(partial > l2, partial, 0.0)
    bytes_req = bytes_req + partial

    # ---- memory bandwidth: interface x efficiency, capped by Little's law (seed 004 §4.3.3)
    bw = chips.memory_bandwidth * chips.get("calibration.bandwidth_efficiency", 1.0)
    lat = chips.get("memory_system.latency", 0.0)
    inflight = chips.get("memory_system.outstanding", 0.0)
    txn = chips.get("memory_system.transaction", 128.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where((lat > 0) & (inflight > 0), inflight * txn / lat, np.inf)
    bw_eff = np.minimum(bw, cap)[:, None]
    t_memory = bytes_mem / bw_eff

    # ---- vector unit (softmax, norms, activations)
    vrate = units * chips.get("vector.flops_per_cycle", 0.0)[:, None] * clock
    xrate = units * chips.get("vector.exp_per_cycle", 0.0)[:, None] * clock
    with np.errstate(divide="ignore", invalid="ignore"):
        t_vector = np.where(ops.vector_flops > 0, ops.vector_flops / vrate, 0.0) + np.where(ops.exps > 0, ops.exps / xrate, 0.0)
    t_vector = np.where(np.isfinite(t_vector), t_vector, np.where((ops.vector_flops + ops.exps) > 0, np.inf, 0.0))

    # ---- energy per level (seed 004 §4.1.3): bytes x pJ/B + FLOPs x pJ/FLOP
    e_mem = chips.get("energy.memory", 0.0)[:, None]
    e_l2 = chips.get("energy.l2", 0.0)[:, None]
    e_loc = chips.get("energy.local", 0.0)[:, None]
    local_bytes = np.where(g, tiles_out * ops.k * (tm + tn) * np.maximum(ops.ea, ops.eb), 0.0)
    cnt = ops.count[None, :]
    E_compute_op = padded_flops * e_flop + (ops.vector_flops + ops.exps) * chips.get("energy.vector_flop", 0.0)[:, None] \
        + local_bytes * e_loc + bytes_req * e_l2
    E_mem_op = bytes_mem * e_mem

    # ---- power ceiling: sustained clock (seed 004 §4.1.3), for compute-bound work at peak rate
    static = chips.get("power.static", 0.0)
    tdp = chips.get("tdp", np.inf)
    tot_padded = (padded_flops * cnt).sum(axis=1)
    e_per_flop = np.where(tot_padded > 0, (E_compute_op * cnt).sum(axis=1) / np.maximum(tot_padded, 1.0), 0.0)
    peak_main = (rate * (padded_flops * cnt)).sum(axis=1) / np.maximum(tot_padded, 1.0)  # FLOP-weighted peak rate
    p_mem_full = pw.memory_power(bw, chips.get("energy.memory", 0.0))
    budget = pw.energy_budget_per_flop(tdp, peak_main, p_mem_full, static)
    vs = chips.get("power.voltage_scaling", 1.0) > 0.5
    clock_ratio = np.where(np.isfinite(tdp), pw.sustained_clock_ratio(budget, e_per_flop, vs), 1.0)
    cr = clock_ratio[:, None]

    with np.errstate(divide="ignore", invalid="ignore"):
        t_matrix = np.where(padded_flops > 0, padded_flops / (rate * cr * ceff * np.where(g, wave_eff, 1.0)), 0.0)
        t_matrix_ideal = np.where(ops.flops > 0, ops.flops / rate, 0.0)
    t_matrix = np.where(np.isfinite(t_matrix), t_matrix, np.inf)
    t_vector = t_vector / cr

    koh = chips.get("calibration.kernel_overhead", 0.0)[:, None]
    stack = np.stack([t_matrix, t_vector, t_memory])  # (3, N, O)
    t_busy = stack.max(axis=0)
    t_op = t_busy + koh
    bound_idx = stack.argmax(axis=0)

    step_oh = chips.get("calibration.step_overhead", 0.0)
    time_s = (t_op * cnt).sum(axis=1) + step_oh
    E_static = static * time_s
    E_compute = (E_compute_op * cnt).sum(axis=1)
    E_mem = (E_mem_op * cnt).sum(axis=1)
    energy = E_compute + E_mem + E_static

    tokens = float(workload.tokens_per_step)
    flops = float((ops.flops * ops.count).sum())
    bytes_mem_tot = (bytes_mem * cnt).sum(axis=1)
    # where the time went (per resource, summed over operators by their bound)
    tw = t_op * cnt
    out = {
        "time_s": time_s,
        "time_per_token_s": time_s / tokens if workload.phase == "decode" else time_s / tokens,
        "tokens_per_s": tokens / time_s,
        "ttft_s": time_s if workload.phase == "prefill" else np.full(N, np.nan),
        "t_matrix_s": (t_matrix * cnt).sum(axis=1),
        "t_matrix_ideal_s": (t_matrix_ideal * cnt).sum(axis=1),
        "t_vector_s": (t_vector * cnt).sum(axis=1),
        "t_memory_s": (t_memory * cnt).sum(axis=1),
        "t_overhead_s": (koh * cnt).sum(axis=1) + step_oh,
        "time_matrix_bound_s": (tw * (bound_idx == 0)).sum(axis=1),
        "time_vector_bound_s": (tw * (bound_idx == 1)).sum(axis=1),
        "time_memory_bound_s": (tw * (bound_idx == 2)).sum(axis=1),
        "flops": np.full(N, flops),
        "padded_flops": (padded_flops * cnt).sum(axis=1),
        "bytes_memory": bytes_mem_tot,
        "bytes_requested": (bytes_req * cnt).sum(axis=1),
        "energy_j": energy,
        "energy_memory_j": E_mem,
        "energy_compute_j": E_compute,
        "energy_static_j": E_static,
        "energy_per_token_j": energy / tokens,
        "power_w": pw.average_power(energy, time_s),
        "clock_ratio": clock_ratio,
        "sustained_clock_hz": chips["clock"] * clock_ratio,
        "mbu": bytes_mem_tot / time_s / chips.memory_bandwidth,
    }
    # the highest power any operator draws at the sustained clock, and the chip's limit
    with np.errstate(divide="ignore", invalid="ignore"):
        op_power = np.where(t_op > 0, (E_compute_op + E_mem_op) / t_op, 0.0)
    out["peak_power_w"] = static + op_power.max(axis=1)
    out["tdp"] = tdp
    out["quant_error"] = np.full(N, _quant_error(workload))
    peak_fmt = (rate * cnt * padded_flops).sum(axis=1) / np.maximum((cnt * padded_flops).sum(axis=1), 1)
    out["mfu"] = flops / time_s / np.where(peak_fmt > 0, peak_fmt, np.nan)
    bt = np.stack([out["time_matrix_bound_s"], out["time_vector_bound_s"], out["time_memory_bound_s"]])
    out["bound_code"] = bt.argmax(axis=0)
    # capacity (seed 004 §4.3.1)
    cap_bytes = chips.memory_capacity
    resident = float(workload.resident_bytes)
    out["resident_bytes"] = np.full(N, resident)
    out["capacity_bytes"] = cap_bytes
    out["fits"] = resident <= cap_bytes
    out["max_batch"] = _max_batch(workload, cap_bytes)
    if breakdown:
        out["_ops"] = dict(t_op=t_op, t_matrix=t_matrix, t_vector=t_vector, t_memory=t_memory, bound=bound_idx,
                           bytes_memory=bytes_mem, padded_flops=padded_flops, tm=tm, tn=tn, split=split,
                           energy=E_compute_op + E_mem_op, count=ops.count, names=ops.names)
    return out


def _max_batch(workload, capacity):
    """floor((C - W - workspace) / (S x kv per token)) (seed 004 §4.3.1); -1 where the weights alone do not fit."""
    kv = float(getattr(workload, "kv_bytes_per_token", 0.0) or 0.0)
    ctx = float(getattr(workload, "context", 0) or getattr(workload, "tokens", 0) or 0)
    fixed = float(getattr(workload, "weight_resident_bytes", 0.0)) + float(getattr(workload, "workspace_bytes", 0.0))
    if kv <= 0 or ctx <= 0:
        return np.where(capacity >= fixed, np.inf, -1.0)
    free = capacity - fixed
    return np.where(free >= 0, np.floor(free / (ctx * kv)), -1.0)


def _quant_error(workload) -> float:
    """Largest relative L2 round-trip error over the weight, activation and KV formats (Gaussian data)."""
    from dse.precision import quant_error

    f = getattr(workload, "formats", None)
    if f is None:
        return 0.0
    errs = [quant_error(getattr(f, role)) for role in ("weights", "activations", "kv") if getattr(f, role, None)]
    return float(max(errs)) if errs else 0.0


BOUND_NAMES = np.array(["compute", "vector", "memory"])


def evaluate(chips: Chips, workloads, *, tiles=None, breakdown: bool = False) -> pd.DataFrame:
    """Metrics table: one row per design point and workload (phase).

    ``workloads`` is one Workload or a list. With ``breakdown=True`` the
    per-operator table is attached as ``df.attrs['operators']``.
    """
    if not isinstance(workloads, (list, tuple)):
        workloads = [workloads]
    frames, op_frames = [], []
    for w in workloads:
        arrs = evaluate_arrays(chips, w, tiles=tiles, breakdown=breakdown)
        ops = arrs.pop("_ops", None)
        df = pd.DataFrame(arrs)
        df.insert(0, "point", np.arange(chips.n))
        df.insert(1, "chip", chips.names)
        df.insert(2, "workload", w.name)
        df.insert(3, "phase", w.phase)
        df["bound"] = BOUND_NAMES[arrs["bound_code"]]
        frames.append(df)
        if ops is not None:
            op_frames.append(_op_frame(chips, w, ops))
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if op_frames:
        out.attrs["operators"] = pd.concat(op_frames, ignore_index=True)
    return out


def _op_frame(chips: Chips, w, ops: dict) -> pd.DataFrame:
    N, O = ops["t_op"].shape
    rows = {
        "point": np.repeat(np.arange(N), O),
        "chip": np.repeat(np.array(chips.names, dtype=object), O),
        "workload": w.name,
        "op": np.tile(np.array(ops["names"], dtype=object), N),
        "count": np.tile(ops["count"], N),
    }
    for key in ("t_op", "t_matrix", "t_vector", "t_memory", "bytes_memory", "padded_flops", "energy", "tm", "tn", "split"):
        rows[key if key.startswith("t_") is False else key + "_s"] = np.broadcast_to(ops[key], (N, O)).reshape(-1)
    rows["bound"] = BOUND_NAMES[ops["bound"].reshape(-1)]
    return pd.DataFrame(rows)
