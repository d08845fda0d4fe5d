"""dse against ZigZag 3.9.1 on its `tpu_like` accelerator (issue 15 item 8).

ZigZag's figures come from tests/data/zigzag_tpu_like.yaml (its outputs, with the command and files that made
them); the accelerator is restated as a dse chip in tests/data/zigzag_tpu_like_chip.yaml, entry by entry of
ZigZag's hardware file. The checks of the issue: cycles and DRAM bytes within 10%, energy within 20%.

What is achieved: both GEMMs' cycles, DRAM bytes and energy. At M = 256 ZigZag keeps the whole 1 MiB input in the
2 MiB SRAM while the 16 MiB of weights stream once (18.9 MB); so does dse since issue 15 item 2 (an operand
panel that fits a unit's local buffer stays there, dse.model.tiling.resident_panels / resident_reads). Before,
dse re-read the input once per 256-column tile (34.6 MB, energy 4.02 mJ) and these two checks were strict xfails.
What is left: dse's local-buffer fills still count the input once per tile (the residency is applied to the
main-memory traffic; the SRAM energy is +9.7%, within the 20%).
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
    131,072); dse 4,194,368 (compute-bound: 256 x 4096 x 4096 MACs on 1,024 MACs per cycle = 4,194,304, + 64 for
    the array's fill; the 18.9 MB at 8 B/cycle take 2,359,296), -8.8%.
    M = 1: both DRAM-bound, 16.8 MB at 8 B/cycle: 2,097,759 vs 2,098,176, +0.02%."""
    z = ZZ["gemms"][key]
    assert _rel(runs[key]["time_s"] * CLOCK, z["latency_cycles"]) <= 0.10


def test_m1_dram_bytes_and_energy(runs):
    """M = 1: the weights (16 MiB) and the 4 KiB input are read once by both (the input stays in the SRAM):
    ZigZag 16,785,408 B, dse the same. Energy 1.474 mJ (DRAM 1.469) vs 1.611 (+9.3%: dse charges the under-filled
    array's padded FLOPs and their operands, ZigZag only the MACs done)."""
    z, r = ZZ["gemms"]["m1"], runs["m1"]
    assert _rel(r["bytes_memory"], z["dram_bytes"]) <= 0.10
    assert _rel(r["energy_j"], z["energy_pj"] * PJ) <= 0.20


def test_m256_dram_bytes_within_10_percent(runs):
    """ZigZag 18,874,368 B: the 16 MiB of weights once, the 1 MiB input once (kept in the 2 MiB SRAM), the 1 MiB
    output once; dse's resident input gives the same count, 16,777,216 + 1,048,576 + 1,048,576."""
    z, r = ZZ["gemms"]["m256"], runs["m256"]
    assert _rel(r["bytes_memory"], z["dram_bytes"]) <= 0.10
    assert r["bytes_memory"] == 16_777_216 + 1_048_576 + 1_048_576


def test_m256_energy_within_20_percent(runs):
    """ZigZag 2.70 mJ; dse 2.646 mJ (-2.2%): the datapath and DRAM as ZigZag, register files -13%, SRAM +9.7%
    (the per-level checks below)."""
    z, r = ZZ["gemms"]["m256"], runs["m256"]
    assert _rel(r["energy_j"], z["energy_pj"] * PJ) <= 0.20


def test_m256_what_dse_reads_and_the_energy_per_level(runs):
    """The parts of the M = 256 comparison that hold, each by its hand count.

    DRAM: see test_m256_dram_bytes_within_10_percent (the input kept in the SRAM).
    Datapath: 256 x 4096 x 4096 MACs x 0.04 pJ = 171.8 uJ, ZigZag's operational energy exactly.
    Register files: each 1 x 32 x 32 instruction reads its input row, its 32 x 32 weights and reads and writes
    its 32 accumulators, (32 + 1024 + 2 x 32 x 4) / 2048 = 0.640625 B/FLOP at rf_128B's 0.095 pJ/B: 523 uJ
    against ZigZag's 601 uJ (weight RF 410 + partial-sum registers 192), -13%: ZigZag charges each MAC's
    16-bit partial-sum register, dse the accumulators once per 32-deep pass at 4 B.
    SRAM: dse's local buffer is written by the tiles' fills (16 tiles x 4096 x 512 B = 33.6 MB) and read by
    the array (the input once per 32 columns, the weights once per tile: 16 x 4096 x (256 x 8 + 256) B =
    151.0 MB), 184.5 MB x 1.6256 pJ/B = 300 uJ against ZigZag's 274 uJ (input reads 220 + partial sums 54),
    +9.7%.
    DRAM at 87.5 pJ/B, ZigZag's read cost.
    """
    z, r = ZZ["gemms"]["m256"], runs["m256"]
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
