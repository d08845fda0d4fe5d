"""The tiles of one GEMM on one chip: the evaluator's heuristic, the CP-SAT optimum, or both side by side.

What `dse tiles` prints. Nothing here models anything: the tiles come from the evaluator's default-tile
heuristic (:func:`dse.model.evaluator.default_tiles`) or the CP-SAT tile solver
(:func:`dse.solvers.cpsat_tiles.solve_tiles`); every figure of a tiling (time, energy, off-chip bytes,
sustained clock, working set, MFU) is the evaluator's own for exactly those tiles
(:func:`dse.solvers.tile_data.evaluate_tiles`), and the wave arithmetic is :mod:`dse.model.tiling`'s
(output tiles ceil(M / T_M) ceil(N / T_N) batch, work items = tiles x split-K, waves = ceil(work / units),
wave efficiency = work / (waves x units); seed 004 §4.2.1). Both tilings are therefore measured with one
ruler: the CP-SAT one is never slower (it minimizes that time, then off-chip bytes).

Example (the Q projection at M = 256 on an RTX 4090)::

    >>> from dse.solvers.gemm_tiles import gemm_tiles
    >>> r = gemm_tiles("rtx-4090", 256, 4096, 4096, "bf16", solver="both")
    >>> r["cpsat"].time_s <= r["heuristic"].time_s
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError, unknown_name
from dse.model import tiling
from dse.model.evaluator import BOUND_NAMES, default_tiles, op_table
from dse.precision import get_format
from dse.solvers.tile_data import as_chips, evaluate_tiles

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
    FLOPs / (peak FLOP/s x time); ``status``: 'heuristic', or the CP-SAT status ('OPTIMAL': proven).
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


def _result(solver: str, op, chips, tiles, status: str) -> TilingResult:
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
        mfu=float(col["mfu"][0]), flops=float(op.flops), status=status)


def gemm_tiles(chip, m: int, n: int, k: int, fmt: str = "bf16", *, solver: str = "both", batch: int = 1,
               seed: int = 0) -> dict[str, TilingResult]:
    """The tiling(s) of one GEMM on ``chip`` (a catalog name, a chip file or a ChipSpec):
    ``{'heuristic': ..., 'cpsat': ...}`` (the ones ``solver`` asks for; see :data:`SOLVERS`)."""
    from dse.hardware import load_chip
    from dse.solvers.cpsat_tiles import solve_tiles
    from dse.workload import Workload

    if solver not in SOLVERS:
        raise SpecError(unknown_name("tile solver", str(solver), SOLVERS))
    op = gemm_op(m, n, k, fmt, batch)
    chips = as_chips(load_chip(chip) if isinstance(chip, str) else chip)
    out: dict[str, TilingResult] = {}
    if solver in ("heuristic", "both"):
        t = default_tiles(chips, op_table(Workload(name="gemm", phase="ops", ops=(op,))))
        out["heuristic"] = _result("heuristic", op, chips, [x[0, 0] for x in t], "heuristic")
    if solver in ("cpsat", "both"):
        c = solve_tiles(op, chips, seed=seed)
        out["cpsat"] = _result("cpsat", op, chips, c.tiles, c.status)
    return out
