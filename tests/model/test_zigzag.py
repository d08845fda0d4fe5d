"""dse against ZigZag 3.9.1 on its `tpu_like` accelerator (issue 15 item 8).

ZigZag's figures come from tests/data/zigzag_tpu_like.yaml (its outputs, with the command and files that made
them); the accelerator is restated as a dse chip in tests/data/zigzag_tpu_like_chip.yaml, entry by entry of
ZigZag's hardware file. The checks of the issue: cycles and DRAM bytes within 10%, energy within 20%.

What is achieved: both GEMMs' cycles; the M = 1 GEMM's DRAM bytes and energy; at M = 256, the datapath
energy exactly, the register files and the SRAM within 20% each, and the whole energy within 20% once the
DRAM bytes are ZigZag's. What is not: the M = 256 DRAM bytes (and with them the energy), xfail(strict): ZigZag
keeps the whole 1 MiB input in the 2 MiB SRAM while the 16 MiB of weights stream once (18.9 MB); dse's tile
rule re-reads an operand that does not fit the L2 once per output tile of the other (dse.model.tiling.
block_reads), and this chip has no L2 and one unit, so the input is read once per 256-column tile: 16 times
(34.6 MB). Keeping operands that fit the local buffer is issue 15 item 2 ("reuse that is right"); when it
lands these two xfails pass and must be turned into checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dse import workload as W
from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip

DATA = Path(__file__).resolve().parents[1] / "data"
ZZ = yaml.safe_load((DATA / "zigzag_tpu_like.yaml").read_text())
CHIP = load_chip(DATA / "zigzag_tpu_like_chip.yaml")
PJ = 1e-12
CLOCK = 1e9  # the restated chip's clock: one ns per ZigZag cycle


def _run(key: str):
    g = ZZ["gemms"][key]["dse"]
    wl = W.build({"name": f"zigzag-{key}", "ops": [{"gemm": {
        "m": g["m"], "n": g["n"], "k": g["k"],
        "formats": {"weights": "int8", "activations": "int8", "output": "int8"}}}]})
    m = evaluate_design(Chips.from_specs([CHIP]), wl)
    return {k: float(v[0]) for k, v in m.columns.items() if getattr(v, "shape", None) == (1,)
            and not isinstance(v[0], str)}


@pytest.fixture(scope="module")
def runs():
    return {key: _run(key) for key in ZZ["gemms"]}


def _rel(got, want):
    return abs(got - want) / abs(want)


@pytest.mark.parametrize("key", ["m256", "m1"])
def test_cycles_within_10_percent(runs, key):
    """M = 256: ZigZag 4,599,613 cycles (computation 4,460,286 with its stalls, onloading the 1 MiB input
    131,072); dse 4,325,376 (the 34.6 MB it reads at 8 B/cycle; the matrix alone 4,194,304 x 1.00002), -6.0%.
    M = 1: both DRAM-bound, 16.8 MB at 8 B/cycle: 2,097,759 vs 2,105,856, +0.4%."""
    z = ZZ["gemms"][key]
    assert _rel(runs[key]["time_s"] * CLOCK, z["latency_cycles"]) <= 0.10


def test_m1_dram_bytes_and_energy(runs):
    """M = 1: the weights (16 MiB) are read once by both; ZigZag 16,785,408 B, dse 16,846,848 (+0.4%: dse pads
    the 1-row input to the array's 32 x 32 instruction). Energy 1.474 mJ (DRAM 1.469) vs 1.616 (+9.6%: dse
    charges the under-filled array's padded FLOPs and their operands, ZigZag only the MACs done)."""
    z, r = ZZ["gemms"]["m1"], runs["m1"]
    assert _rel(r["bytes_memory"], z["dram_bytes"]) <= 0.10
    assert _rel(r["energy_j"], z["energy_pj"] * PJ) <= 0.20


@pytest.mark.xfail(strict=True, reason="dse re-reads the 1 MiB input once per 256-column tile (no L2, one unit): "
                                       "34.6 MB vs ZigZag's 18.9 MB; operands that fit the local buffer are "
                                       "issue 15 item 2")
def test_m256_dram_bytes_within_10_percent(runs):
    z, r = ZZ["gemms"]["m256"], runs["m256"]
    assert _rel(r["bytes_memory"], z["dram_bytes"]) <= 0.10


@pytest.mark.xfail(strict=True, reason="the DRAM bytes above: 4.02 mJ vs 2.70 (the 15.7 MB of re-reads cost "
                                       "1.37 mJ at 87.5 pJ/B)")
def test_m256_energy_within_20_percent(runs):
    z, r = ZZ["gemms"]["m256"], runs["m256"]
    assert _rel(r["energy_j"], z["energy_pj"] * PJ) <= 0.20


def test_m256_what_dse_reads_and_the_energy_per_level(runs):
    """The parts of the M = 256 comparison that hold, each by its hand count.

    DRAM: the weights once, the input once per tile column (4096 / 256 = 16), the output once:
    16,777,216 + 16 x 1,048,576 + 1,048,576 = 34,603,008 B.
    Datapath: 256 x 4096 x 4096 MACs x 0.04 pJ = 171.8 uJ, ZigZag's operational energy exactly.
    Register files: each 1 x 32 x 32 instruction reads its input row, its 32 x 32 weights and reads and writes
    its 32 accumulators, (32 + 1024 + 2 x 32 x 4) / 2048 = 0.640625 B/FLOP at rf_128B's 0.095 pJ/B: 523 uJ
    against ZigZag's 601 uJ (weight RF 410 + partial-sum registers 192), -13%: ZigZag charges each MAC's
    16-bit partial-sum register, dse the accumulators once per 32-deep pass at 4 B.
    SRAM: dse's local buffer is written by the tiles' fills (16 tiles x 4096 x 512 B = 33.6 MB) and read by
    the array (the input once per 32 columns, the weights once per tile: 16 x 4096 x (256 x 8 + 256) B =
    151.0 MB), 184.5 MB x 1.6256 pJ/B = 300 uJ against ZigZag's 274 uJ (input reads 220 + partial sums 54),
    +9.7%.
    With ZigZag's 18.9 MB of DRAM traffic at the same 87.5 pJ/B the energy would be 2.646 mJ, -2.2%.
    """
    z, r = ZZ["gemms"]["m256"], runs["m256"]
    assert r["bytes_memory"] == 16_777_216 + 16 * 1_048_576 + 1_048_576
    macs = 256 * 4096 * 4096
    datapath = r["energy_compute_j"] - r["energy_register_j"] - r["energy_local_j"] - r["energy_l2_j"]
    assert datapath == pytest.approx(macs * 0.04 * PJ, rel=1e-4)  # (the array's fill: 1 + 1.5e-5)
    assert datapath == pytest.approx(z["mac_energy_pj"] * PJ, rel=1e-4)
    assert r["bytes_register"] == pytest.approx(0.640625 * 2 * macs, rel=1e-4)
    zz_rf = z["memory_energy_pj"]["W"][0] + z["memory_energy_pj"]["O"][0]
    assert _rel(r["energy_register_j"], zz_rf * PJ) <= 0.20
    assert r["bytes_local"] == pytest.approx(16 * 4096 * 512 + 16 * 4096 * (256 * 8 + 256), rel=1e-12)
    zz_sram = z["memory_energy_pj"]["I"][0] + z["memory_energy_pj"]["O"][1]
    assert _rel(r["energy_local_j"], zz_sram * PJ) <= 0.20
    e_dram = r["energy_memory_j"] / r["bytes_memory"]
    assert e_dram == pytest.approx(87.5 * PJ, rel=1e-12)  # ZigZag's dram read cost, 700 pJ per 64 bits
    with_zz_traffic = r["energy_j"] - r["energy_memory_j"] + z["dram_bytes"] * e_dram
    assert _rel(with_zz_traffic, z["energy_pj"] * PJ) <= 0.20
