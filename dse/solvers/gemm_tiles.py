"""The tiles of one GEMM on one chip: the evaluator's heuristic, the CP-SAT optimum, or both side by side.

What `dse tiles` prints. Nothing here models anything: the tiles come from the evaluator's default-tile
heuristic (:func:`dse.model.evaluator.default_tiles`) or the CP-SAT tile solver
(:func:`dse.solvers.cpsat_tiles.solve_tiles`); every figure of a tiling (time, energy, off-chip bytes,
sustained clock, working set, MFU) is the evaluator's own for exactly those tiles
(:func:`dse.solvers.tile_data.evaluate_tiles`), and the wave arithmetic is :mod:`dse.model.tiling`'s
(output tiles ceil(M / T_M) ceil(N / T_N) batch, work items = tiles x split-K, waves = ceil(work / units),
wave efficiency = work / (waves x units); seed 004 §4.2.1). Both tilings are therefore measured with one
ruler: the CP-SAT one is never slower (it minimizes that time, then off-chip bytes).

Beside the evaluator's figures the report derives, from the same tiles, with :mod:`dse.model` functions:
the A and B tiles' bytes and address spans in row-major operands (:func:`dse.model.tiling.strided_tile_span`,
seed 004 §4.4.1); the k-loop of one work item, the evaluator's matrix and memory times spread evenly over
its waves x k-steps, with one and two input slots (:func:`dse.model.pipeline.serial_time`,
:func:`~dse.model.pipeline.double_buffer_time`) and by input slots with the chip's memory latency as the
wait (:func:`~dse.model.pipeline.input_slot_schedule`; seed 004 §4.4.2); and the tiles whose working sets
the local buffer holds at once (their accumulator tiles in the accumulator store too, where the chip has one),
with the register limit where the kernel's waves and VGPRs per lane are given (:func:`dse.model.tiling.occupancy`,
seed 000 "Worked occupancy example", gfx950 limits).

Example (the Q projection at M = 256 on an RTX 4090)::

    >>> from dse.solvers.gemm_tiles import gemm_tiles
    >>> r = gemm_tiles("rtx-4090", 256, 4096, 4096, "bf16", solver="both")
    >>> r["cpsat"].time_s <= r["heuristic"].time_s
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError, unknown_name
from dse.model import pipeline, tiling
from dse.model.evaluator import BOUND_NAMES, default_tiles, op_table
from dse.precision import get_format
from dse.solvers.tile_data import accumulator_bytes, as_chips, evaluate_tiles

__all__ = ["SOLVERS", "TilingResult", "gemm_op", "gemm_tiles"]

#: What `dse tiles --solver` takes: one of the two tilings, or both.
SOLVERS = ("cpsat", "heuristic", "both")


@dataclass(frozen=True)
class TilingResult:
    """One tiling of the GEMM and what the evaluator says it costs (one call of the GEMM).

    ``time_s``: the operator's time (t_op, at its sustained clock); ``t_matrix_s`` / ``t_memory_s`` /
    ``t_vector_s`` the resource times whose maximum it is, ``bound`` the largest; ``energy_j`` the operator's
    energy; ``traffic_bytes`` its off-chip bytes; ``output_tiles``, ``work_items`` (tiles x split-K),
    ``waves`` and ``wave_efficiency`` the wave quantization over ``units`` compute units; ``mfu`` useful
    FLOPs / (peak FLOP/s x time); ``status``: 'heuristic', or the CP-SAT status ('OPTIMAL': proven; 'OPTIMAL
    (enumerated: ...)' where the tile solver enumerated the classes through the evaluator, dse.solvers.cpsat_tiles).
    """

    solver: str
    chip: str
    tm: int
    tn: int
    tk: int
    split_k: int
    time_s: float
    t_matrix_s: float
    t_memory_s: float
    t_vector_s: float
    bound: str
    energy_j: float
    traffic_bytes: float
    working_set_bytes: float
    clock_ratio: float
    output_tiles: int
    work_items: int
    waves: int
    wave_efficiency: float
    units: int
    mfu: float
    flops: float
    status: str
    a_tile_bytes: float = 0.0
    a_tile_span_bytes: float = 0.0
    b_tile_bytes: float = 0.0
    b_tile_span_bytes: float = 0.0
    k_steps: int = 0
    t_load_step_s: float = 0.0
    t_compute_step_s: float = 0.0
    t_kloop_1slot_s: float = 0.0
    t_kloop_2slot_s: float = 0.0
    memory_latency_s: float = 0.0
    t_kloop_by_slots_s: tuple[float, ...] = ()
    resident_tiles: float = 0.0
    occupancy: object = None  # dse.model.tiling.Occupancy where waves and VGPRs per lane were given


#: input slots the report's k-loop schedule is shown for (seed 004 §4.4.2's table: 1 to 4)
KLOOP_SLOTS = (1, 2, 3, 4)


def _int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise SpecError(f"{name}: expected an integer >= 1, got {v!r}")
    return int(v)


def gemm_op(m: int, n: int, k: int, fmt: str = "bf16", batch: int = 1):
    """The one GEMM ``[m, k] x [k, n]`` (x batch) with weights and activations in ``fmt`` (the output in BF16,
    the accumulator FP32), as the workload builder makes it; SpecError for a bad size or format."""
    from dse.workload import build

    dims = {"m": _int("m", m), "n": _int("n", n), "k": _int("k", k), "batch": _int("batch", batch)}
    try:
        fmt = get_format(fmt).name
    except SpecError as e:
        raise SpecError(f"format: {e}") from None
    wl = build({"name": "gemm", "ops": [{"gemm": {"name": "gemm", **dims,
                                                  "formats": {"weights": fmt, "activations": fmt}}}]})
    return wl.ops[0]


def _kloop(op, chips, tm, tn, tk, split, t_matrix_s, t_memory_s, n_waves, ws, registers) -> dict:
    """The report's layout, k-loop and residency figures of one tiling (see the module docstring)."""
    ea, eb = float(op.elem_bytes_a), float(op.elem_bytes_b)
    a = tiling.strided_tile_span(min(tm, op.m), min(tk, op.k), op.k, ea)  # A [m, k] row-major
    b = tiling.strided_tile_span(min(tk, op.k), min(tn, op.n), op.n, eb)  # B [k, n] row-major
    n = int(tiling.ceil_div(tiling.ceil_div(op.k, tk), split))  # k-steps of one work item
    steps = max(n_waves, 1) * n
    t_c, t_l = t_matrix_s / steps, t_memory_s / steps
    lat = float(chips.get("memory_system.latency")[0])
    if not (math.isfinite(t_l) and math.isfinite(t_c)):  # a design that cannot run this GEMM: no k-loop to show
        t_l = t_c = math.nan
    k_loop = (lambda f: f()) if math.isfinite(t_l) else (lambda f: math.nan)
    by_slots = tuple(k_loop(lambda: n_waves * pipeline.input_slot_schedule(n, k, t_l, t_l + lat, t_c).completion)
                     for k in KLOOP_SLOTS)
    lds = float(chips.get("local_buffer")[0])
    occ = None
    resident = float(tiling.occupancy(ws, lds).workgroups_by_lds) if lds > 0 else 0.0
    acc = float(chips.get("accumulator", 0.0)[0])
    if resident > 0 and acc > 0:  # (each resident tile's FP32 accumulators in the accumulator store: TMEM, PSUM)
        resident = min(resident, math.floor(acc / float(accumulator_bytes(tm, tn))))
    if registers is not None:
        occ = tiling.occupancy(ws if lds > 0 else 0.0, lds if lds > 0 else 1.0, registers[0], registers[1],
                               **tiling.GFX950_OCCUPANCY)
    return dict(a_tile_bytes=float(a.effective_bytes), a_tile_span_bytes=float(a.span_bytes),
                b_tile_bytes=float(b.effective_bytes), b_tile_span_bytes=float(b.span_bytes), k_steps=n,
                t_load_step_s=t_l, t_compute_step_s=t_c,
                t_kloop_1slot_s=k_loop(lambda: n_waves * float(pipeline.serial_time(n, t_l, t_c))),
                t_kloop_2slot_s=k_loop(lambda: n_waves * float(pipeline.double_buffer_time(n, t_l, t_c))),
                memory_latency_s=lat, t_kloop_by_slots_s=by_slots, resident_tiles=resident, occupancy=occ)


def _result(solver: str, op, chips, tiles, status: str, registers=None) -> TilingResult:
    tm, tn, tk, split = (int(round(float(x))) for x in tiles)
    out = evaluate_tiles(op, chips, tm, tn, tk, split, full=True)
    ops = out.operators
    units = int(chips.total_units[0])
    n_tiles = int(tiling.output_tiles(op.m, op.n, tm, tn, op.batch))
    work = n_tiles * split
    n_waves = int(tiling.waves(work, units))
    col = out.columns
    return TilingResult(
        solver=solver, chip=str(chips.names[0]), tm=tm, tn=tn, tk=tk, split_k=split, time_s=float(ops.t_op[0, 0]),
        t_matrix_s=float(ops.t_matrix[0, 0]), t_memory_s=float(ops.t_memory[0, 0]),
        t_vector_s=float(ops.t_vector[0, 0]), bound=str(BOUND_NAMES[int(ops.bound[0, 0])]),
        energy_j=float(ops.energy[0, 0]), traffic_bytes=float(ops.bytes_memory[0, 0]),
        working_set_bytes=float(col["tile_working_set_bytes"][0]), clock_ratio=float(col["clock_ratio"][0]),
        output_tiles=n_tiles, work_items=work, waves=n_waves,
        wave_efficiency=float(tiling.wave_efficiency(work, units, n_waves)), units=units,
        mfu=float(col["mfu"][0]), flops=float(op.flops), status=status,
        **_kloop(op, chips, tm, tn, tk, split, float(ops.t_matrix[0, 0]),
                 float(ops.t_memory[0, 0]), n_waves, float(col["tile_working_set_bytes"][0]), registers))


def gemm_tiles(chip, m: int, n: int, k: int, fmt: str = "bf16", *, solver: str = "both", batch: int = 1,
               seed: int = 0, waves_per_tile: int | None = None,
               vgprs_per_lane: int | None = None) -> dict[str, TilingResult]:
    """The tiling(s) of one GEMM on ``chip`` (a catalog name, a chip file or a ChipSpec):
    ``{'heuristic': ..., 'cpsat': ...}`` (the ones ``solver`` asks for; see :data:`SOLVERS`).

    ``waves_per_tile`` and ``vgprs_per_lane`` (the kernel's waves per workgroup, one workgroup a tile, and
    its VGPR + AccVGPR entries per lane, both or neither): the occupancy under the gfx950 limits."""
    from dse.hardware import load_chip
    from dse.solvers.cpsat_tiles import solve_tiles
    from dse.workload import Workload

    if solver not in SOLVERS:
        raise SpecError(unknown_name("tile solver", str(solver), SOLVERS))
    op = gemm_op(m, n, k, fmt, batch)
    if (waves_per_tile is None) != (vgprs_per_lane is None):
        raise SpecError("occupancy: give both waves_per_tile and vgprs_per_lane, or neither")
    registers = None if waves_per_tile is None else (_int("waves_per_tile", waves_per_tile),
                                                     _int("vgprs_per_lane", vgprs_per_lane))
    chips = as_chips(load_chip(chip) if isinstance(chip, str) else chip)
    out: dict[str, TilingResult] = {}
    if solver in ("heuristic", "both"):
        t = default_tiles(chips, op_table(Workload(name="gemm", phase="ops", ops=(op,))))
        out["heuristic"] = _result("heuristic", op, chips, [x[0, 0] for x in t], "heuristic", registers)
    if solver in ("cpsat", "both"):
        c = solve_tiles(op, chips, seed=seed)
        how = c.status if c.info.get("method") != "enumeration" else f"{c.status} (enumerated: {c.info['reason']})"
        out["cpsat"] = _result("cpsat", op, chips, c.tiles, how, registers)
    return out
