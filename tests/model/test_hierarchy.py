"""The on-chip levels (issue 15 item 1, dse.model.hierarchy): register files, local buffer, L2.

Every number is a hand count from the chips' published figures (their files cite them) or from ISA shapes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dse import workload as W
from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip
from dse.model import hierarchy
from dse.model.evaluator import evaluate_workload
from dse.solvers.cpsat_tiles import brute_force_tiles, solve_tiles


def gemm(m, n, k, fmt="bf16"):
    return W.build({"name": f"gemm-{m}x{n}x{k}", "ops": [{"gemm": {"m": m, "n": n, "k": k,
                                                                   "formats": {"weights": fmt, "activations": fmt}}}]})


def test_register_bytes_per_flop():
    # H100 wgmma m64n8k16 BF16: A 64 x 16 x 2 + B 16 x 8 x 2 + accumulators 2 x 64 x 8 x 4 over 2 x 64 x 8 x 16 FLOPs
    assert hierarchy.register_bytes_per_flop(64, 8, 16, 2.0) == (2048 + 256 + 4096) / 16384
    # a 32 x 32 weight-stationary array (one 1 x 32 input row through 32 x 32 INT8 weights): (32 + 1024 + 256) / 2048
    assert hierarchy.register_bytes_per_flop(1, 32, 32, 1.0) == 0.640625


def test_instruction_k_follows_the_operand_size():
    """PTX ISA wgmma.mma_async shapes: m64nNk16 for BF16/FP16, m64nNk32 for E4M3/E5M2, m64nNk8 for TF32; tcgen05.mma
    K = 16 (kind::f16), 32 (kind::f8f6f4), 64 (kind::mxf4); a weight-stationary array's K is its rows (TPU v1's 256
    at INT8). H100's FP8 wgmma m64n8k32: A 64 x 32 x 1 + B 32 x 8 x 1 + accumulators 2 x 64 x 8 x 4 over
    2 x 64 x 8 x 32 FLOPs = (2048 + 256 + 4096) / 32768 B/FLOP, half the BF16 instruction's 0.39."""
    assert [float(hierarchy.instruction_k(16.0, e, 0.0)) for e in (2.0, 1.0, 4.0, 0.5)] == [16.0, 32.0, 8.0, 64.0]
    assert float(hierarchy.instruction_k(256.0, 1.0, 1.0)) == 256.0
    k = hierarchy.instruction_k(16.0, 1.0, 0.0)
    assert hierarchy.register_bytes_per_flop(64, 8, k, 1.0) == (2048 + 256 + 4096) / 32768


def test_local_read_bytes_by_register_tile():
    # H100: a 128 x 256 tile, register tile 64 x 256 (wgmma m64n256k16), BF16, one K element: A's 128 rows once
    # (256 columns = one register tile), B's 256 columns twice (128 rows = two register tiles): 1280 B for
    # 2 x 128 x 256 FLOPs = 0.0195 B/FLOP, 80 B per cycle of the SM's 4096 BF16 FLOPs (of its 128 B/clk)
    b = hierarchy.local_read_bytes(1, 1, 128, 256, 64, 256, 2.0, 2.0)
    assert b == 128 * 2 + 256 * 2 * 2
    assert b / (2 * 128 * 256) * 4096 == pytest.approx(80.0)
    # a tile no wider than the register tile is read once: what its fill wrote
    assert hierarchy.local_read_bytes(3, 64, 32, 32, 64, 256, 2.0, 2.0) == 3 * 64 * (32 + 32) * 2.0
    # an A operand in registers (fused attention's probabilities) is not read from the buffer
    assert hierarchy.local_read_bytes(1, 1, 128, 128, 64, 256, 0.0, 2.0) == 128 * 2 * 2.0


def test_cluster_requests():
    # c_M = c_N = 32 tiles of square 128 x 128 tiles, A = B: a cluster of 2 halves one operand's requests
    ra, rb = hierarchy.cluster_requests(1.0, 1.0, 32, 32, 2)
    assert ra * 1.0 + rb * 1.0 == 48 and sorted((float(ra), float(rb))) == [16.0, 32.0]
    # c_M = 32, c_N = 16 (128 x 256 tiles of a 4096^2 output): halving the B requests (a = 2) is cheaper
    ra, rb = hierarchy.cluster_requests(1.0, 1.0, 32, 16, 2)
    assert (ra, rb) == (16, 16)
    # no multicast: the per-tile rule of tiling.gemm_traffic
    assert tuple(map(float, hierarchy.cluster_requests(1.0, 1.0, 32, 16, 1))) == (16.0, 32.0)
    # the larger operand's requests are the ones shared (a 4 x 1 or 1 x 4 cluster)
    ra, rb = hierarchy.cluster_requests(1.0, 10.0, 8, 8, 4)
    assert (ra, rb) == (8, 2)


def test_level_time():
    assert hierarchy.level_time(1e6, 128.0, 1e9) == pytest.approx(1e6 / 128e9)
    assert hierarchy.level_time(1e6, 0.0, 1e9) == 0.0  # no bandwidth figure: the level does not limit
    assert hierarchy.level_time(0.0, 128.0, 1e9) == 0.0


def test_catalog_figures_and_default_rules():
    c = Chips.from_specs([load_chip(n) for n in ("h100-sxm", "a100-sxm-80gb", "mi355x", "rtx-4090", "tpu-v1",
                                                 "trainium2")])
    # published: A100 5120 B/clk L2 (whitepaper); H100 4950 (H200 measured 9.8 TB/s / 1.98 GHz); MI355X LDS 256
    # B/clk (seed 000); shared memory 128 B/clk per SM (32 banks x 4 B)
    assert list(c["l2_bytes_per_cycle"][:3]) == [4950.0, 5120.0, 2048.0]
    assert list(c["local_bytes_per_cycle"][:4]) == [128.0, 128.0, 256.0, 128.0]
    # default rule (hierarchy.yaml): RTX 4090 publishes no L2 bandwidth: 48 B/clk x 128 SMs
    assert c["l2_bytes_per_cycle"][3] == 48.0 * 128
    # systolic arrays: one input row per cycle at the format that moves the most bytes: TPU v1 256 x 1 B = 256 B
    # (Jouppi 2017); Trainium2 runs TF32 (4 B values) at its BF16 rate, 32,768 x 4 B / (2 x 128) = 512 B
    assert list(c["local_bytes_per_cycle"][4:]) == [256.0, 512.0]
    # register tiles: H100 wgmma 64 x 256; RTX 4090 CUTLASS warp tile 64 x 64
    assert (c["matrix.register_tile.m"][0], c["matrix.register_tile.n"][0]) == (64.0, 256.0)
    assert (c["matrix.register_tile.m"][3], c["matrix.register_tile.n"][3]) == (64.0, 64.0)
    # the register file's J/B is the node's operand energy (processes.yaml rule [P3]); energy.flop the datapath
    assert c["energy.register_file"][0] == pytest.approx(1.16e-12)
    assert c["energy.flop.bf16"][0] == pytest.approx(0.175e-12 * 1.28)


def test_h100_gemm_levels_by_hand():
    """4096^3 BF16 on H100 in 128 x 256 tiles (c_M = 32, c_N = 16, 512 tiles on 132 SMs: 4 waves, 512 / 528).

    L2: the clusters of 2 halve B's requests (a = 2): A x 16 + B x 16 + C = 33 x 4096^2 x 2 B = 1.107 GB, at
    4950 B/clk x 1.83 GHz. Local reads: 512 tiles x 4096 x (128 x 1 + 256 x 2) x 2 B = 2.684 GB, at 128 B/clk x
    132 SMs x 1.83 GHz / (512 / 528); fills 512 x 4096 x 384 x 2 B = 1.611 GB. Registers: 0.390625 B per padded
    FLOP (2 x 4096^3)."""
    chips = Chips.from_specs([load_chip("h100-sxm")])
    wl = gemm(4096, 4096, 4096)
    r = evaluate_workload(chips, wl, tiles=(128, 256, 64, 1), breakdown=True)
    col, o = r.columns, r.operators
    cr = col["clock_ratio"][0]
    l2_bytes = 33 * 4096**2 * 2
    assert col["bytes_l2"][0] == l2_bytes
    assert col["t_l2_s"][0] == pytest.approx(l2_bytes / (4950 * 1.83e9 * cr), rel=1e-12)
    reads = 512 * 4096 * (128 + 256 * 2) * 2
    assert col["bytes_local"][0] == reads + 512 * 4096 * 384 * 2
    assert col["t_local_s"][0] == pytest.approx(reads / (128 * 132 * 1.83e9 * cr * 512 / 528), rel=1e-12)
    assert col["bytes_register"][0] == pytest.approx(0.390625 * 2 * 4096**3, rel=1e-12)
    assert o.t_op[0, 0] == max(o.t_matrix[0, 0], o.t_vector[0, 0], o.t_memory[0, 0], o.t_l2[0, 0], o.t_local[0, 0])
    # every level's energy is its bytes x its J/B at the same voltage: the ratios are the J/B ratios
    e_per = {k: col[f"energy_{k}_j"][0] / col[f"bytes_{b}"][0] for k, b in
             (("register", "register"), ("local", "local"), ("l2", "l2"))}
    assert e_per["register"] / e_per["local"] == pytest.approx(
        chips["energy.register_file"][0] / chips["energy.local"][0], rel=1e-12)
    assert e_per["l2"] / e_per["local"] == pytest.approx(chips["energy.l2"][0] / chips["energy.local"][0], rel=1e-12)


def test_a_level_that_is_not_there_costs_nothing():
    """No L2 (capacity 0): no L2 time or energy; an unlimited local buffer: no local time."""
    wl = gemm(2048, 2048, 2048)
    c = Chips.from_base(load_chip("h100-sxm"), 2, {"l2": np.array([0.0, 50e6]),
                                                    "local_bytes_per_cycle": np.array([128.0, np.inf])})
    m = evaluate_design(c, wl)
    assert m["t_l2_s"][0] == 0.0 and m["energy_l2_j"][0] == 0.0 and m["bytes_l2"][0] == 0.0
    assert m["t_l2_s"][1] > 0 and m["t_local_s"][1] == 0.0 and m["t_local_s"][0] > 0


def test_more_l2_bandwidth_is_never_slower_and_l2_bound_time_follows_it():
    """The H100 4096^3 GEMM in the heuristic's 128 x 256 tiles requests 1.107 GB from the L2 (tests/test_evaluate.py:
    16 + 16 operand panels of 33.55 MB and C), 122 us at H100's 4950 B/clk against 139 us of matrix time: at half
    that bandwidth it is L2-bound, twice as fast at H100's (the L2 then faster than the matrix unit), and past the
    matrix time no faster."""
    wl = gemm(4096, 4096, 4096)
    c = Chips.from_base(load_chip("h100-sxm"), 3, {"l2_bytes_per_cycle": np.array([2475.0, 4950.0, 1e9]),
                                                    "tdp": np.full(3, np.inf)})
    m = evaluate_design(c, wl)
    t = m["time_s"]
    assert m["bound_code"][0] == 3  # l2
    assert t[0] == pytest.approx((16 + 16) * 4096**2 * 2 / (2475 * 1.83e9) + 4096**2 * 2 / (2475 * 1.83e9), rel=1e-9)
    assert t[1] < t[0] and t[2] <= t[1]
    assert m["bound_code"][1] == 0 and m["bound_code"][2] == 0  # compute


def test_cpsat_tiles_are_no_longer_the_instruction_tile():
    """issue 15: with no on-chip bandwidth the CP-SAT optimum of a 4096^3 BF16 GEMM on RTX 4090 was the 16 x 8
    instruction tile. The local buffer's reads (64 x 64 register tiles, 128 B/clk per SM) and the L2's requests
    make small tiles slow: the optimum, equal to the brute force through the evaluator, is 128 x 128."""
    op = gemm(4096, 4096, 4096).ops[0]
    c = solve_tiles(op, "rtx-4090")
    b = brute_force_tiles(op, "rtx-4090")
    assert c.time_s == pytest.approx(b.time_s, rel=1e-6)
    assert (c.tm, c.tn) == (128, 128)
    assert math.isclose(c.time_s, b.time_s, rel_tol=1e-6)
