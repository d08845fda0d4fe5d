"""`dse tiles --chip NAME --m M --n N --k K [--format FMT] [--solver cpsat|heuristic|both]` (parsing and printing
only; the tilings come from dse.solvers.gemm_tiles)."""

from __future__ import annotations

from dse.errors import InfeasibleError
from dse.solvers.gemm_tiles import KLOOP_SLOTS, SOLVERS, gemm_tiles
from dse.units import format_memory_size, format_quantity

_LABELS = {"heuristic": "heuristic", "cpsat": "CP-SAT"}


def _rows(r) -> list[tuple[str, str]]:
    t = lambda v: format_quantity(v, "time") if v else "0 s"  # noqa: E731
    return [
        ("tile T_M x T_N x T_K", f"{r.tm} x {r.tn} x {r.tk}"),
        ("split-K", str(r.split_k)),
        ("time", t(r.time_s)),
        ("  matrix / memory / vector", f"{t(r.t_matrix_s)} / {t(r.t_memory_s)} / {t(r.t_vector_s)}"),
        ("bound", r.bound),
        ("energy", format_quantity(r.energy_j, "energy")),
        ("off-chip traffic", format_quantity(r.traffic_bytes, "bytes")),
        ("tile working set", format_memory_size(r.working_set_bytes)),
        ("A tile bytes / address span", f"{format_memory_size(r.a_tile_bytes)} / "
                                        f"{format_memory_size(r.a_tile_span_bytes)}"),
        ("B tile bytes / address span", f"{format_memory_size(r.b_tile_bytes)} / "
                                        f"{format_memory_size(r.b_tile_span_bytes)}"),
        ("tiles resident per unit", f"{r.resident_tiles:g}" if r.resident_tiles else "-"),
        ("output tiles x split-K", f"{r.output_tiles} x {r.split_k} = {r.work_items}"),
        ("waves over the units", str(r.waves)),
        ("wave efficiency (units busy)", f"{r.wave_efficiency:.1%}"),
        ("MFU (useful FLOP/s / peak)", f"{r.mfu:.1%}"),
        ("sustained clock / peak", f"{r.clock_ratio:.1%}"),
    ] + ([("occupancy (waves / SIMD)", f"{r.occupancy.occupancy:.0%} ({r.occupancy.waves_per_simd:g})")]
         if r.occupancy is not None else []) + [
        ("k-loop: k-steps x load/compute", f"{r.k_steps} x {t(r.t_load_step_s)} / {t(r.t_compute_step_s)}"),
        ("k-loop, 1 / 2 input slots", f"{t(r.t_kloop_1slot_s)} / {t(r.t_kloop_2slot_s)}"),
        (f"k-loop by {'/'.join(map(str, KLOOP_SLOTS))} slots", f"(wait {t(r.memory_latency_s)}) "
                                                               + " / ".join(t(x) for x in r.t_kloop_by_slots_s)),
        ("status", r.status),
    ]


def _change(new: float, old: float) -> str:
    return f"{(new / old - 1):+.1%}" if old else "-"


def _tiles(args) -> int:
    opts = dict(batch=args.batch, waves_per_tile=args.waves_per_tile, vgprs_per_lane=args.vgprs_per_lane)
    refused = None
    try:
        res = gemm_tiles(args.chip, args.m, args.n, args.k, args.format, solver=args.solver, **opts)
    except InfeasibleError as e:
        if args.solver != "both":
            raise
        # (CP-SAT keeps the tile within the local buffer, as a study's buffer_fit does; the heuristic's tiles of
        # a chip without room for any, an SRAM-memory chip with no local buffer, are still the evaluator's)
        refused = str(e)
        res = gemm_tiles(args.chip, args.m, args.n, args.k, args.format, solver="heuristic", **opts)
    first = next(iter(res.values()))
    batch = f" x batch {args.batch}" if args.batch > 1 else ""
    print(f"dse tiles: [{args.m} x {args.k}] x [{args.k} x {args.n}]{batch} GEMM in {args.format} on {first.chip} "
          f"({first.units} units), {format_quantity(first.flops, 'flops')}; figures are for one call of the GEMM, "
          "from the evaluator")
    names = list(res)
    rows = {name: _rows(r) for name, r in res.items()}
    width = max(22, *(len(v) + 2 for rs in rows.values() for _, v in rs))
    print(f"{'':30s}" + "".join(f"{_LABELS[n]:>{width}s}" for n in names))
    for i, (label, _) in enumerate(rows[names[0]]):
        print(f"{label:30s}" + "".join(f"{rows[n][i][1]:>{width}s}" for n in names))
    if refused is not None:
        print(f"\nCP-SAT: {refused}")
    if len(res) == 2:
        h, c = res["heuristic"], res["cpsat"]
        speed = h.time_s / c.time_s if c.time_s else float("inf")
        print(f"\nCP-SAT vs heuristic: {speed:.3g}x the speed (time {_change(c.time_s, h.time_s)}), energy "
              f"{_change(c.energy_j, h.energy_j)}, off-chip traffic {_change(c.traffic_bytes, h.traffic_bytes)}; "
              f"the heuristic takes the fastest of a buffer-filling square, a smaller square and a wide T x 2T "
              f"tile at the design clock, CP-SAT minimizes the evaluator's time, "
              f"then the traffic, then the energy")
    return 0


def _positive(text: str) -> int:
    from dse.cli.study import positive_int

    return positive_int(text)


def register(sub) -> None:
    t = sub.add_parser(
        "tiles",
        help="tile shape of one GEMM on one chip: the evaluator's heuristic, the CP-SAT optimum, or both",
        description="The tile (T_M x T_N x T_K, split-K) of one GEMM [M, K] x [K, N] on a chip, its time, energy, "
                    "off-chip traffic, waves and utilisation as the evaluator computes them: for the evaluator's "
                    "default-tile heuristic, the CP-SAT optimum (least time, then least traffic, then least energy; proven), or both "
                    "side by side. Example: dse tiles --chip rtx-4090 --m 256 --n 4096 --k 4096 --format bf16",
    )
    t.add_argument("--chip", required=True, help="catalog name (dse catalog) or a chip YAML file")
    t.add_argument("--m", type=_positive, required=True, help="rows of A and C (tokens)")
    t.add_argument("--n", type=_positive, required=True, help="columns of B and C (output features)")
    t.add_argument("--k", type=_positive, required=True, help="the reduction dimension (input features)")
    t.add_argument("--batch", type=_positive, default=1, help="independent GEMMs of this shape (default 1)")
    t.add_argument("--format", default="bf16", metavar="FMT",
                   help="number format of weights and activations (default bf16; the output is BF16; "
                        "names: dse schema formats)")
    t.add_argument("--solver", choices=SOLVERS, default="both", help="which tiling to show (default both)")
    t.add_argument("--waves-per-tile", type=_positive, default=None, metavar="W",
                   help="the kernel's waves per workgroup (one workgroup a tile); with --vgprs-per-lane shows the "
                        "occupancy under the gfx950 limits (seed 000 'Worked occupancy example')")
    t.add_argument("--vgprs-per-lane", type=_positive, default=None, metavar="R",
                   help="the kernel's VGPR + AccVGPR entries per lane, after the allocation granule")
    t.set_defaults(func=_tiles)
