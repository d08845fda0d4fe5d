"""Command-line output (issue 19 items 4, 7): every subcommand's --help says what it does, `dse eval --breakdown`
shows units and whether a figure is per call or per step, `dse tiles` shows one GEMM's tiles.

Expected figures come from the chips' published numbers (the chip files' headers: H100 SXM 5 HBM3 stacks x
1024 pins x 5.24 Gb/s / 8 = 3.3536 TB/s; RTX 4090 128 SMs, 165.2 TFLOP/s dense BF16 with FP32 accumulate and
1008 GB/s, NVIDIA Ada whitepaper), the models' Hugging Face configs (Qwen3-8B: hidden 4096, 36 layers) and the
wave arithmetic of seed 004 §4.2.1, never from the code that prints them.
"""

from __future__ import annotations

import argparse
import math
import re

import pytest

from dse.cli import _load_extra_commands, build_parser, main
from dse.units import format_quantity, parse_quantity

RAW_FLOAT = re.compile(r"\d\.\d+e[-+]\d+")  # 4.885496e-09


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    _load_extra_commands()
    p = build_parser()
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_subcommand_has_a_description_and_every_argument_a_help():
    subs = _subparsers()
    assert {"catalog", "show", "validate", "eval", "tiles", "run", "report", "pareto", "whatif", "calibrate",
            "serve", "schema"} <= set(subs)
    for name, sp in subs.items():
        assert sp.description and len(sp.description) > 40, name
        for a in sp._actions:
            if not isinstance(a, argparse._HelpAction):
                assert a.help, (name, a.dest)


def test_the_description_is_in_the_help_text(capsys):
    with pytest.raises(SystemExit) as e:
        main(["pareto", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "no other design beats" in " ".join(out.split())


# ------------------------------------------------------------------ dse eval --breakdown


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_eval_takes_several_workloads_one_table_each(capsys):
    """`--workload` given twice kept the last one alone (argparse's store), silently. Each is a table now, in the
    order given; the H100's figures: a 4096^3 BF16 GEMM is 2 x 4096^3 = 137.4 GFLOP, a Qwen3-8B decode step at
    batch 1 reads its ~16.4 GB of BF16 weights (8.19 B parameters x 2 B)."""
    assert main(["eval", "--chip", "h100-sxm", "--workload", "gemm:m=4096:k=4096:n=4096",
                 "--workload", "qwen3-8b:decode:batch=1:context=8192"]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line.startswith("workload: ")]
    assert heads == ["workload: gemm:m=4096:k=4096:n=4096", "workload: qwen3-8b:decode:batch=1:context=8192"]
    flops = [parse_quantity(_cells(line)[1], "flops") for line in out.splitlines() if line.startswith("useful FLOPs")]
    assert flops[0] == pytest.approx(2 * 4096**3, rel=1e-3)
    traffic = [parse_quantity(_cells(line)[1], "bytes") for line in out.splitlines()
               if line.startswith("memory traffic")]
    assert 16e9 < traffic[1] < 18e9
    # a mistake in any of them stops before the first table
    assert main(["eval", "--chip", "h100-sxm", "--workload", "gemm:m=1:k=4096:n=4096",
                 "--workload", "qwen3-8b:decod"]) == 2
    assert "workload:" not in capsys.readouterr().out


def test_eval_prints_large_rates_without_an_exponent(capsys):
    """Counts and ratios had no unit and printed with %.4g: the WSE-3's bound of over 1e5 tokens/s read
    "1.257e+05". (Any rate above 10,000 would; 15.84 PFLOP/s of FP16 on an 8B model's ~16 GFLOP decode step.)"""
    assert main(["eval", "--chip", "cerebras-wse-3", "--workload", "llama-3.1-8b:decode:batch=1:context=1024"]) == 0
    out = capsys.readouterr().out
    assert not RAW_FLOAT.search(out), RAW_FLOAT.search(out)
    rate = _cells(next(line for line in out.splitlines() if line.startswith("tokens/s")))[1]
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", rate), rate


def test_eval_breakdown_has_units_and_says_per_call_and_per_step(capsys):
    assert main(["eval", "--chip", "h100-sxm", "--workload", "qwen3-8b:decode:batch=1:context=8192",
                 "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert not RAW_FLOAT.search(out), RAW_FLOAT.search(out)
    assert "/call is one instance of the operator" in out and "/step all `count` instances" in out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("chip") and "time/call" in line)
    cols = _cells(lines[head])
    assert cols[:6] == ["chip", "operator", "count", "time/call", "time/step", "share"]
    rows = {c[1]: dict(zip(cols, c)) for c in map(_cells, lines[head + 1:]) if len(c) == len(cols)}
    q = rows["q_proj"]
    assert q["count"] == "36"  # one Q projection per layer, 36 layers (Qwen3-8B config)
    # batch 1: read the 4096 x 4096 BF16 weights and the 4096-wide BF16 input and output once, at 3.3536 TB/s
    bytes_q = 4096 * 4096 * 2 + 2 * 4096 * 2
    assert parse_quantity(q["traffic/call"], "bytes") == pytest.approx(bytes_q, rel=1e-3)
    t_call = bytes_q / (5 * 1024 * 5.24e9 / 8)
    assert parse_quantity(q["time/call"], "time") == pytest.approx(t_call, rel=1e-3)
    assert parse_quantity(q["time/step"], "time") == pytest.approx(36 * t_call, rel=1e-3)
    assert q["bound"] == "memory"
    for r in rows.values():  # every time and energy cell carries a unit
        for c in ("time/call", "time/step", "matrix/call", "memory/call", "vector/call"):
            assert re.fullmatch(r"[\d.]+ (s|ms|us|ns|ps)", r[c]), (r["operator"], c, r[c])
        for c in ("energy/call", "energy/step"):
            assert re.fullmatch(r"[\d.]+ (J|mJ|uJ|nJ|pJ)", r[c]), (r["operator"], c, r[c])
    shares = [float(r["share"].rstrip("%")) for r in rows.values()]
    assert sum(shares) == pytest.approx(100, abs=0.05 * len(shares))  # the shares of one step add up


# ------------------------------------------------------------------ dse tiles


def _tiles_table(out: str) -> dict[str, dict[str, str]]:
    lines = out.splitlines()
    names = _cells(lines[1])
    table: dict[str, dict[str, str]] = {n: {} for n in names}
    for line in lines[2:]:
        if not line.strip():
            break
        label, rest = line[:30].strip(), line[30:]
        width = len(rest) // len(names)
        for i, n in enumerate(names):
            table[n][label] = rest[i * width:(i + 1) * width].strip()
    return table


def test_tiles_of_the_q_projection_on_the_rtx_4090(capsys):
    assert main(["tiles", "--chip", "rtx-4090", "--m", "256", "--n", "4096", "--k", "4096", "--format", "bf16"]) == 0
    out = capsys.readouterr().out
    assert not RAW_FLOAT.search(out)
    assert "8.59 GFLOP" in out and "one call of the GEMM" in out  # 2 x 256 x 4096 x 4096
    t = _tiles_table(out)
    assert set(t) == {"heuristic", "CP-SAT"}
    ideal = 2 * 256 * 4096 * 4096 / 165.2e12  # the dense BF16 peak: 52.0 us
    for name, col in t.items():
        tm, tn, tk = (int(x) for x in col["tile T_M x T_N x T_K"].split(" x "))
        split = int(col["split-K"])
        work = math.ceil(256 / tm) * math.ceil(4096 / tn) * split  # output tiles x split-K (seed 004 §4.2.1)
        waves = math.ceil(work / 128)  # 128 SMs
        efficiency = work / (waves * 128)
        assert col["output tiles x split-K"].endswith(f"= {work}") and col["waves over the units"] == str(waves)
        assert float(col["wave efficiency (units busy)"].rstrip("%")) == pytest.approx(100 * efficiency, abs=0.05)
        assert col["sustained clock / peak"] == "100.0%"  # at 450 W this GEMM does not throttle
        # compute-bound: the peak's time over the busy fraction of the units (no padding: 256 and 4096 are
        # multiples of the 16 x 8 x 16 instruction)
        assert parse_quantity(col["time"], "time") == pytest.approx(ideal / efficiency, rel=2e-3), name
        # memory: A, B and C in BF16 (36 MiB) once at 1008 GB/s, below the matrix time
        assert col["off-chip traffic"] == "36 MiB"
        memory = col["matrix / memory / vector"].split(" / ")[1]
        assert parse_quantity(memory, "time") == pytest.approx(36 * 2**20 / 1008e9, rel=1e-3)
        assert re.fullmatch(r"[\d.]+ (mJ|uJ|J)", col["energy"])
    assert t["CP-SAT"]["status"] == "OPTIMAL"
    h, c = (parse_quantity(t[n]["time"], "time") for n in ("heuristic", "CP-SAT"))
    assert c <= h  # the optimum of the evaluator's time is never slower than the heuristic's tiles
    assert c == pytest.approx(ideal, rel=2e-3)  # 16 x 8 instruction tiles: 8192 work items = 64 full waves
    assert f"CP-SAT vs heuristic: {h / c:.3g}x the speed" in out


@pytest.mark.parametrize("solver, shown", [("heuristic", "heuristic"), ("cpsat", "CP-SAT")])
def test_tiles_one_solver(solver, shown, capsys):
    assert main(["tiles", "--chip", "h100-sxm", "--m", "1", "--n", "4096", "--k", "4096", "--format", "fp8",
                 "--solver", solver]) == 0
    out = capsys.readouterr().out
    assert _cells(out.splitlines()[1]) == [shown] and "CP-SAT vs" not in out
    t = _tiles_table(out)[shown]
    assert t["bound"] == "memory"
    # M = 1: the 4096 x 4096 FP8 weights (16.8 MB) dominate the traffic, read once at 3.3536 TB/s
    assert parse_quantity(t["off-chip traffic"], "bytes") == pytest.approx(4096 * 4096 + 2 * 4096 * 2, rel=1e-3)
    assert parse_quantity(t["time"], "time") == pytest.approx((4096 * 4096 + 2 * 4096 * 2) / 3.3536e12, rel=1e-3)


def test_tiles_both_shows_the_heuristic_where_cp_sat_finds_no_tile(capsys):
    """Groq's TSP has no local buffer (its chip file: the SRAM is the main memory), so no tile passes CP-SAT's
    buffer_fit; `dse tiles` (both solvers, the default) failed as a whole. It shows the evaluator's heuristic
    tiles and CP-SAT's reason; asked for CP-SAT alone it still refuses (exit 2)."""
    args = ["tiles", "--chip", "groq-tsp", "--m", "64", "--n", "4096", "--k", "4096", "--format", "int8"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "heuristic" in out.splitlines()[1] and "CP-SAT" not in out.splitlines()[1]
    assert "CP-SAT: " in out and "no tile fits" in out and "local buffer 0 B" in out
    assert main(args + ["--solver", "cpsat"]) == 2
    assert "no tile fits" in capsys.readouterr().err


def test_tiles_report_layout_kloop_and_occupancy(capsys):
    """`dse tiles` shows the tiles' address spans (seed 004 §4.4.1), the k-loop with 1 and 2 input slots and by
    slots (§4.4.2) and, given the kernel's waves and VGPRs, the occupancy (seed 000), from dse.model's functions."""
    from dse.model import pipeline, tiling

    assert main(["tiles", "--chip", "mi355x", "--m", "256", "--n", "4096", "--k", "4096", "--solver", "heuristic",
                 "--waves-per-tile", "4", "--vgprs-per-lane", "128"]) == 0
    out = capsys.readouterr().out
    assert not RAW_FLOAT.search(out)
    t = _tiles_table(out)["heuristic"]
    tm, tn, tk = (int(x) for x in t["tile T_M x T_N x T_K"].split(" x "))
    a = tiling.strided_tile_span(tm, tk, 4096, 2)
    shown_bytes, shown_span = t["A tile bytes / address span"].split(" / ")
    assert parse_quantity(shown_bytes, "bytes") == pytest.approx(a.effective_bytes, rel=5e-4)
    assert parse_quantity(shown_span, "bytes") == pytest.approx(a.span_bytes, rel=5e-4)
    # one convention down the column: binary prefixes, round or not (the span printed "1.565 MB" beside "632.5 KiB")
    for part in (*t["A tile bytes / address span"].split(" / "), *t["B tile bytes / address span"].split(" / "),
                 t["tile working set"]):
        assert re.fullmatch(r"[0-9.]+ (KiB|MiB|GiB|B)", part), part
    ws = parse_quantity(t["tile working set"], "bytes")
    occ = tiling.occupancy(ws, 160 * 1024, 4, 128, **tiling.GFX950_OCCUPANCY)
    assert t["tiles resident per unit"] == f"{occ.workgroups_by_lds:g}"
    assert t["occupancy (waves / SIMD)"] == f"{occ.occupancy:.0%} ({occ.waves_per_simd:g})"
    n_steps, per_step = t["k-loop: k-steps x load/compute"].split(" x ")
    assert int(n_steps) == math.ceil(4096 / int(t["split-K"]) / tk)  # (each split's share of K)
    t_l, t_c = (parse_quantity(x, "time") for x in per_step.split(" / "))
    one, two = (parse_quantity(x, "time") for x in t["k-loop, 1 / 2 input slots"].split(" / "))
    assert one == pytest.approx(pipeline.serial_time(int(n_steps), t_l, t_c), rel=2e-3)
    assert two == pytest.approx(pipeline.double_buffer_time(int(n_steps), t_l, t_c), rel=2e-3)
    assert two <= one  # (the evaluator's time is its own: here L2-bound by split-K's partial sums, over the k-loop's)
    by_slots = t["k-loop by 1/2/3/4 slots"]
    assert by_slots.startswith("(wait 0 s) ")  # the catalog states no memory latency: no wait beyond the transfer
    assert [parse_quantity(x, "time") for x in by_slots.split(") ")[1].split(" / ")][:2] == pytest.approx([one, two],
                                                                                                         rel=1e-3)


def test_tiles_resident_per_unit_counts_the_accumulator_store(capsys):
    """B200 (228 KiB shared memory, 256 KiB TMEM): the default 256 x 256 x 64 FP8 tile's operands take 64 KiB of
    shared memory (2 slots x (256 x 64 + 64 x 256) x 1 B), three at once by shared memory, but its FP32
    accumulators take 256 x 256 x 4 B = 256 KiB, all of TMEM: one tile resident per SM (the report said 3)."""
    assert main(["tiles", "--chip", "b200", "--m", "8192", "--n", "8192", "--k", "8192", "--format", "fp8_e4m3",
                 "--solver", "heuristic"]) == 0
    t = _tiles_table(capsys.readouterr().out)["heuristic"]
    assert t["tile T_M x T_N x T_K"] == "256 x 256 x 64"
    assert parse_quantity(t["tile working set"], "bytes") == 64 * 1024
    assert t["tiles resident per unit"] == "1"


def test_tiles_occupancy_needs_both_register_options(capsys):
    assert main(["tiles", "--chip", "mi355x", "--m", "256", "--n", "4096", "--k", "4096", "--solver", "heuristic",
                 "--waves-per-tile", "4"]) == 2
    assert "vgprs_per_lane" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["--format", "fp4"], "did you mean 'nvfp4'"),
    (["--chip", "h10"], "unknown chip 'h10'"),
])
def test_tiles_bad_input_is_one_message(argv, words, capsys):
    base = {"--chip": "rtx-4090", "--m": "256", "--n": "4096", "--k": "4096", "--format": "bf16"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    assert main(["tiles", *[x for kv in base.items() for x in kv]]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and err.count("\n") == 1


def test_tiles_refuses_a_zero_dimension(capsys):
    with pytest.raises(SystemExit) as e:
        main(["tiles", "--chip", "rtx-4090", "--m", "0", "--n", "4096", "--k", "4096"])
    assert e.value.code == 2
    assert "argument --m: expected an integer >= 1" in capsys.readouterr().err


def test_a_fresh_kernel_cache_is_announced_before_compiling(tmp_path):
    """The first run after an install or a change of dse/model compiles the kernels for about a minute before any
    progress (the default study: 72 s instead of ~9 on this project's 2-core machine): on a terminal the CLI says
    so first, where the kernels' cache holds none; it says nothing with a kernel's index there (numba writes one
    per compiled kernel), nor outside a terminal (a log, CI: as the progress bar's plain lines), nor through the
    Python API unless its caller shows INFO records of the "dse" logger. Each a fresh interpreter that loads
    numba and compiles nothing, its standard error a pseudo-terminal or a pipe."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pty = pytest.importorskip("pty")
    root = Path(__file__).resolve().parents[1]
    cli = "from dse.cli import _show_notes; _show_notes(); "
    load = "from dse.model import jit; jit.compiler()"
    env = {**os.environ, "DSE_NUMBA_CACHE": str(tmp_path / "cache")}

    def on_terminal(code):
        leader, follower = pty.openpty()
        try:
            r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, stdout=subprocess.DEVNULL,
                               stderr=follower, timeout=120)
        finally:
            os.close(follower)
        text = b""
        try:
            while chunk := os.read(leader, 4096):
                text += chunk
        except OSError:  # (EIO: the terminal's other end closed, all read)
            pass
        os.close(leader)
        assert r.returncode == 0, text[-2000:]
        return text.decode(errors="replace")

    def in_a_pipe(code):
        r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stderr

    first = on_terminal(cli + load)
    assert "dse: compiling the model's kernels for this machine: about a minute" in first
    (folder,) = (tmp_path / "cache").iterdir()  # (numba-<digest of dse/model>)
    assert str(folder) in first
    assert "compiling" not in in_a_pipe(cli + load)  # (outside a terminal)
    assert "compiling" not in on_terminal(load)  # (the API: an INFO record, not shown by default)
    (folder / "model_x").mkdir()
    (folder / "model_x" / "evaluator._rate_kernel-1.py311.nbi").write_bytes(b"")
    assert "compiling" not in on_terminal(cli + load)
