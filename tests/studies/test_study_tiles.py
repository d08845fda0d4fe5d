"""`solver.tiles` in studies (issue 18 item 1): every design's GEMMs on CP-SAT-optimal tiles, cached.

Where the numbers come from:

* the RTX 4090 Q projection (M = 256, N = K = 4096, BF16): issue 18 reported 103.2 us on the evaluator's
  default 96 x 96 tiles and 52.01 us on CP-SAT's. Independently: 2 M N K = 8.590 GFLOP; the RTX 4090 has
  128 SMs x 512 dense BF16 FLOP/cycle x 2.52 GHz = 165.2 TFLOP/s (NVIDIA Ada GPU Architecture whitepaper,
  RTX 4090 column), so one full wave takes 8.590e9 / 165.2e12 = 52.01 us. The default tiles now include a
  wide 64 x 128 tile: ceil(256 / 64) x ceil(4096 / 128) = 4 x 32 = 128 tiles, one wave on the 128 SMs,
  52.01 us. On 120 SMs (a cut-down die) both 128 wide tiles and ceil(256 / 96) x ceil(4096 / 96) = 3 x 43 =
  129 square 96 x 96 tiles take two waves; the square ones' 129 tiles each do 1/129 of the work at an SM's
  rate: 2 x 8.590e9 / 129 / (512 x 2.52e9) = 52.01 us x 256 / 129 = 103.2 us. No tiling on 120 SMs beats
  the work spread evenly over them, 52.01 us x 128 / 120 = 55.48 us.
* the brute force (dse.solvers.tile_candidates.brute_force_tiles) is the tile solver's test oracle: every
  tiling of the domain through the evaluator, the least time, then traffic, then energy.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip
from dse.solvers.cpsat_tiles import brute_force_tiles
from dse.spec.study import load_study
from dse.study import run_study
from dse.study import tiles as study_tiles
from dse.study.problem import group_workloads

STUDIES = Path(__file__).resolve().parents[2] / "studies"
FLOPS = 2 * 256 * 4096 * 4096  # the Q projection's useful FLOPs
PEAK = 128 * 512 * 2.52e9  # RTX 4090 dense BF16, FLOP/s (Ada whitepaper)
ONE_WAVE = FLOPS / PEAK  # 52.01 us

QPROJ = """\
name: qproj-4090
workloads:
  - {name: qproj, ops: [{gemm: {name: q_proj, m: 256, n: 4096, k: 4096, formats: {weights: bf16, activations: bf16}}}]}
base: rtx-4090
space:
  units: {choice: [120, 128]}
constraints:
  max_latency: {max: 60 us}
objectives: [die_area]
solver: {method: grid, trials: 10, tiles: TILES}
"""


def _study(tmp_path, text: str, name: str = "study.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _run(tmp_path, text: str, tag: str):
    p = _study(tmp_path, text, f"{tag}.yaml")
    out = tmp_path / f"out-{tag}"
    table = run_study(p, out=out)
    return table, json.loads((out / "meta.json").read_text()), out


def test_the_independent_arithmetic():
    assert ONE_WAVE == pytest.approx(52.01e-6, rel=1e-3)
    assert ONE_WAVE * 256 / 129 == pytest.approx(103.2e-6, rel=1e-3)
    assert -(-256 // 96) * -(-4096 // 96) == 129


def test_cpsat_tiles_change_the_answer_where_the_heuristic_loses(tmp_path):
    """With the default tiles the 120-SM chip misses a 60 us limit (two waves): the answer is the bigger
    128-SM die. With CP-SAT tiles the 120-SM chip comes within its even share of the work and, being smaller,
    is the answer."""
    heur, meta_h, _ = _run(tmp_path, QPROJ.replace("TILES", "heuristic"), "heuristic")
    cpsat, meta_c, out = _run(tmp_path, QPROJ.replace("TILES", "cpsat"), "cpsat")
    h = heur.set_index("p.units")
    c = cpsat.set_index("p.units")
    assert h.loc[120, "m.time_s"] == pytest.approx(ONE_WAVE * 256 / 129, rel=1e-6)  # 103.2 us
    assert h.loc[128, "m.time_s"] == pytest.approx(ONE_WAVE, rel=1e-6)  # 52.01 us
    assert ONE_WAVE * 128 / 120 * (1 - 1e-9) <= c.loc[120, "m.time_s"] < 60e-6  # 55.48 us at best
    assert c.loc[128, "m.time_s"] <= h.loc[128, "m.time_s"] * (1 + 1e-9)
    best = lambda t: int(t[t.feasible].nsmallest(1, "obj.die_area")["p.units"].iloc[0])  # noqa: E731
    assert best(heur) == 128 and best(cpsat) == 120
    assert meta_h["tiles"]["used"] == "heuristic" and meta_c["tiles"]["used"] == "cpsat"
    assert meta_c["solver"]["tiles"] == "cpsat"
    effect = meta_c["tiles"]["effect"]
    assert (effect["feasible_heuristic"], effect["feasible_cpsat"]) == (1, 2)
    assert effect["front_both"] == 0  # the front moved from the 128-SM to the 120-SM design
    # (over the designs feasible with both tilings, the 128-SM one: both take one wave)
    assert effect["time_ratio"]["max"] == pytest.approx(1.0, rel=1e-9)
    report = (out / "report.md").read_text()
    assert "tiles: CP-SAT-optimal tiles per design" in report and "what the tiles changed" in report


SMALL = """\
name: small-gemms
workloads:
  - {name: two, ops: [{gemm: {name: a, m: 48, n: 80, k: 96}}, {gemm: {name: b, m: 8, n: 200, k: 64, batch: 3}},
                      {gemm: {name: c, m: 48, n: 80, k: 96}}]}
base: h100-sxm
space:
  units: {choice: [4, 7, 16]}
  local_buffer: {choice: [16 KiB, 228 KiB]}
objectives: [tpot, energy_per_token]
solver: {method: grid, trials: 100, tiles: cpsat}
"""


def test_study_tiles_equal_brute_force_on_small_cases(tmp_path):
    """Each design's time and energy in the study equal the evaluator's on the brute force's tiles of that
    design, operator by operator (the brute force enumerates every tiling)."""
    table, meta, _ = _run(tmp_path, SMALL, "small")
    spec = load_study(_study(tmp_path, SMALL))
    wl = group_workloads(spec, {})[0][0]
    assert len(table) == 6
    for _, row in table.iterrows():
        chips = Chips.from_base(spec.base, 1, {"units": np.array([float(row["p.units"])]),
                                               "local_buffer": np.array([float(row["p.local_buffer"])])})
        cols = [np.zeros((1, len(wl.ops))) for _ in range(4)]
        for j, op in enumerate(wl.ops):
            b = brute_force_tiles(op, chips)
            for arr, v in zip(cols, b.tiles):
                arr[0, j] = v
        m = evaluate_design(chips, wl, tiles=tuple(cols))
        assert row["m.time_s"] == pytest.approx(float(m["time_s"][0]), rel=2e-6), row.to_dict()
        assert row["m.energy_j"] == pytest.approx(float(m["energy_j"][0]), rel=2e-6), row.to_dict()
    assert meta["tiles"]["cache"]["proven"] == meta["tiles"]["cache"]["solves"]


CACHED = """\
name: cached
workloads:
  - {name: repeated, ops: [{gemm: {name: q, m: 256, n: 4096, k: 4096}}, {gemm: {name: o, m: 256, n: 4096, k: 4096}},
                           {gemm: {name: up, m: 256, n: 1024, k: 4096}}]}
base: h200-sxm
space:
  units: {choice: [64, 132]}
  hbm.capacity_per_layer: {choice: [2 GB, 3 GB]}
objectives: [tpot, die_area]
solver: {method: grid, trials: 100, tiles: cpsat}
"""


def test_cache_is_hit_on_repeated_shapes_and_equal_tile_data(tmp_path):
    """4 designs x 3 GEMMs = 12 look-ups; 2 shapes x 2 unit counts = 4 solves. The O projection repeats the
    Q projection's shape (4 hits on the same design), and the HBM layer size changes capacity only, which the
    tile model does not read (4 hits on equal tile data)."""
    spec = load_study(_study(tmp_path, CACHED))
    problems, designs, gemms, relevant = study_tiles.estimate(spec)
    assert relevant == ("units",) and gemms == 2 and designs == 2 and problems == 4
    _, meta, _ = _run(tmp_path, CACHED, "cached")
    c = meta["tiles"]["cache"]
    assert (c["lookups"], c["solves"], c["row_hits"], c["data_hits"]) == (12, 4, 4, 4)
    # a second run in the same process meets every problem again: no solve at all
    _, meta2, _ = _run(tmp_path, CACHED, "cached-again")
    assert meta2["tiles"]["cache"]["solves"] == 0 and meta2["tiles"]["cache"]["row_hits"] == 12


def test_auto_solves_small_studies_and_keeps_the_heuristic_for_large_ones(tmp_path):
    small = load_study(_study(tmp_path, CACHED.replace("tiles: cpsat", "tiles: auto"), "a.yaml"))
    d = study_tiles.decide(small)
    assert d.used == "cpsat" and d.estimated_problems == 4 and "affordable" in d.reason
    default = load_study(STUDIES / "qwen3-8b-decode-chip.yaml")
    assert default.solver.tiles == "auto"  # the default
    d = study_tiles.decide(default)
    # a continuous clock: as many distinct designs as trials (2,000, the study file), each with 7 distinct GEMM
    # shapes (Qwen3-8B: q = o, k = v, gate = up, down, lm_head, QK^T, PV; the model's config)
    assert d.used == "heuristic" and (d.designs, d.gemms, d.estimated_problems) == (2000, 7, 14000)
    assert "14,000" in d.reason and "> 64" in d.reason
    assert "clock" in d.relevant and "units" in d.relevant


def test_bad_tiles_values_are_refused_with_exit_code_2(tmp_path, capsys):
    p = _study(tmp_path, QPROJ.replace("TILES", "fast"))
    with pytest.raises(SpecError) as e:
        load_study(p)
    msg = str(e.value)
    assert f"{p}:" in msg and "solver.tiles" in msg and "fast" in msg and "cpsat" in msg, msg
    assert main(["validate", str(p)]) == 2
    assert "solver.tiles" in capsys.readouterr().err


def test_cpsat_tiles_are_refused_for_systems_of_chips(tmp_path):
    p = _study(tmp_path, QPROJ.replace("TILES", "cpsat").replace("units: {choice: [120, 128]}",
                                                                  "system.chips: {choice: [1, 2]}"))
    with pytest.raises(SpecError) as e:
        load_study(p)
    assert "solver.tiles" in str(e.value) and "system" in str(e.value), str(e.value)
    # auto keeps the heuristic there, and says why
    spec = load_study(_study(tmp_path, QPROJ.replace("TILES", "auto").replace(
        "units: {choice: [120, 128]}", "system.chips: {choice: [1, 2]}"), "auto.yaml"))
    d = study_tiles.decide(spec)
    assert d.used == "heuristic" and "systems" in d.reason


def test_tiles_with_a_cpsat_method_is_refused(tmp_path):
    text = QPROJ.replace("method: grid, trials: 10, tiles: TILES", "method: cpsat_tiles, tiles: cpsat").replace(
        "space:\n  units: {choice: [120, 128]}\n", "").replace("constraints:\n  max_latency: {max: 60 us}\n", "")
    with pytest.raises(SpecError) as e:
        load_study(_study(tmp_path, text))
    assert "solver.tiles" in str(e.value) and "cpsat_tiles" in str(e.value), str(e.value)


def test_a_journal_of_other_tiles_is_not_resumed(tmp_path):
    """A rerun into the same journal resumes its trials; trials evaluated on other tiles would mix two
    evaluations in one front, so they are refused (by name) instead."""
    text = CACHED.replace("method: grid, trials: 100", "method: random, trials: 4, batch: 4")
    out = tmp_path / "out"
    run_study(_study(tmp_path, text, "c.yaml"), out=out, write=False)
    run_study(_study(tmp_path, text, "c.yaml"), out=out, write=False)  # the same tiles: resumed
    with pytest.raises(SpecError) as e:
        run_study(_study(tmp_path, text.replace("tiles: cpsat", "tiles: heuristic"), "h.yaml"), out=out, write=False)
    assert "tiles: cpsat" in str(e.value) and "resuming would mix" in str(e.value), str(e.value)
