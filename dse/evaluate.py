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


@functools.lru_cache(maxsize=128)
def op_table(workload) -> OpTable:
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
    )


def _rate_format(chips: Chips, fmt: str) -> str:
    """The format the matrix unit runs ``fmt`` on: itself, else the next wider one it has."""
    if fmt in chips.formats:
        return fmt
    start = _WIDER.index(fmt) if fmt in _WIDER else 0
    for f in _WIDER[start:]:
        if f in chips.formats:
            return f
    return chips.formats[-1]


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


def evaluate_arrays(chips: Chips, workload, tiles=None, breakdown: bool = False) -> dict[str, np.ndarray]:
    """Metrics as (N,) arrays (the fast path solvers use). See module docstring."""
    ops = op_table(workload)
    N, O = chips.n, len(ops.names)
    clock = chips["clock"][:, None]
    units = chips.total_units[:, None]
    ceff = chips.get("calibration.compute_efficiency", 1.0)[:, None]
    beff = chips.get("calibration.bandwidth_efficiency", 1.0)[:, None]

    # ---- matrix rate per (point, op): format fall-back to what the chip runs
    fpc = np.empty((N, O))
    e_flop = np.empty((N, O))
    for fmt in set(ops.formats):
        cols = [i for i, f in enumerate(ops.formats) if f == fmt]
        run = _rate_format(chips, fmt)
        fpc[:, cols] = chips.flops_per_cycle(run)[:, None]
        e_flop[:, cols] = chips.get(f"energy.flop.{run}", 0.0)[:, None]

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
    tiles_out = np.ceil(ops.m / tm) * np.ceil(ops.n / tn) * ops.batch
    work_items = tiles_out * split
    waves = np.ceil(work_items / units)
    wave_eff = np.where(g, work_items / np.maximum(waves * units, 1), 1.0)
    rate = units * fpc * clock  # FLOP/s at peak clock

    # ---- off-chip traffic from tiles (seed 004 §4.3.2, §4.4.1): re-reads when the re-read operand misses L2
    l2 = (chips.get("l2", 0.0) * chips["dies"])[:, None]
    rA = np.where(g & (ops.a_bytes[None, :] > l2), np.ceil(ops.n / tn), 1.0)
    rB = np.where(g & (ops.b_bytes[None, :] > l2), np.ceil(ops.m / tm), 1.0)
    bytes_mem = ops.a_bytes * rA + ops.b_bytes * rB + ops.c_bytes
    bytes_req = np.where(g, ops.a_bytes * np.ceil(ops.n / tn) + ops.b_bytes * np.ceil(ops.m / tm), ops.a_bytes + ops.b_bytes) + ops.c_bytes
    # split-K adds partial-sum traffic: (split - 1) extra FP32 partial outputs written and read
    bytes_mem = bytes_mem + np.where(g, (split - 1) * ops.m * ops.n * ops.batch * 4.0 * 2, 0.0)

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
    E_compute_op = padded_flops * e_flop + ops.vector_flops * chips.get("energy.flop.fp32", 0.0)[:, None] \
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
