"""Tests of dse.model.area: calibration against published die areas, overrides, reticle fields,
shoreline, interposer, errors.

Published figures: A100 826 mm^2, H100 814 mm^2 (seed 004 §4.1.3); V100 815, GA102 628.4,
AD102 608.5, GB202 750 mm^2 (NVIDIA whitepapers); TPU v1 <= 331 mm^2 (Jouppi 2017); Groq TSP
725 mm^2 (Abts et al. 2020); Cerebras WSE-3 46,225 mm^2 in 84 reticle fields (seed 001); MI300X
XCD ~115 mm^2 (seed 001), MI355X XCD 110 mm^2 (AMD, ISSCC 2026); reticle 26 x 33 mm = 858 mm^2;
"3 stacks per 33 mm edge, 2 per 26 mm edge" (shared/reference/technology.md). Hand computations
below use the technology tables' figures (dse.technology), not the area module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dse import registry, technology
from dse.errors import SpecError
from dse.hardware import Chips, catalog, load_chip
from dse.model import area
from dse.model.area import die_outline, package_area, stacks_per_edge, units_physical

MiB = 2**20


def one(name, **kw):
    spec = load_chip(name)
    return spec, package_area(Chips.from_specs([spec]), **kw)


# ------------------------------------------------------------------ calibration


@pytest.mark.parametrize("name, published", [("a100-sxm-80gb", 826.0), ("h100-sxm", 814.0)])
def test_published_die_area_within_10_percent(name, published):
    _, a = one(name)
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.10)


@pytest.mark.parametrize("name, physical, published", [("a100-sxm-80gb", 128, 826.0), ("h100-sxm", 144, 814.0)])
def test_published_die_area_with_the_published_physical_units(name, physical, published):
    # A100: 128 SMs on GA100; H100: 144 on GH100 (whitepapers)
    _, a = one(name, units_physical_=physical)
    assert a.units_physical[0] == physical
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.10)


def test_h100_die_area_by_hand():
    # die = 144 x (matrix + (228 KiB smem + 256 KiB RF) x scratchpad + unit logic less its 256 KiB RF)
    #       + 50 MB x cache + 6 x PHY + io + uncore (the n5 uncore + the 10 MB of disabled L2, h100-sxm.yaml)
    n5 = technology.process("n4")
    hbm3 = technology.memory("hbm3")
    matrix = 4096 * n5.flop_area["bf16"]  # = 8192 x fp8 area: the formats share the datapath
    assert matrix == pytest.approx(8192 * n5.flop_area["fp8"])
    scratch = n5.sram_area.scratchpad
    unit = matrix + (228 + 256) * 1024 * scratch + (n5.unit_logic_area - 256 * 1024 * scratch)
    uncore = n5.uncore_area + 10e6 * n5.sram_area.cache
    spec, a = one("h100-sxm")
    assert spec.area.uncore == pytest.approx(uncore, abs=0.05)  # the chip file's figure is this sum
    want = 144 * unit + 50e6 * n5.sram_area.cache + 6 * hbm3.phy_area + n5.io_area + spec.area.uncore
    assert a.units_physical[0] == 144  # units_physical in the catalog (full GH100)
    assert a.die_area_mm2[0] == pytest.approx(want, rel=1e-12)
    assert sum(a.parts[k][0] for k in ("units", "l2", "memory_phy", "io", "uncore", "sram_memory")) == \
        pytest.approx(want, rel=1e-12)


def test_b200_dies_near_the_reticle():
    # two reticle-limited dies (seed 004 §4.1.3; TechInsights: "a near doubling of the GPU die area versus
    # Hopper"): each die within 10% of 858 mm^2 and inside it; 80 physical SMs per die (74 enabled)
    spec, a = one("b200")
    assert a.layout == ("side_by_side",)
    assert a.dies[0] == 2 and a.units_physical[0] == 80
    assert a.die_area_mm2[0] == pytest.approx(858.0, rel=0.10)
    assert a.die_area_mm2[0] <= 858.0
    assert a.total_silicon_area_mm2[0] == pytest.approx(2 * a.die_area_mm2[0])
    assert a.hbm_stacks[0] == 8 and a.hbm_shoreline_stacks[0] == 8  # 2 + 2 stacks on each die's short edges
    # TMEM (256 KB/SM) is counted as the accumulator, at scratchpad density
    n5 = technology.process("n4")
    assert a.parts["local"][0] == pytest.approx(80 * (228 * 1024 + 256 * 1024) * n5.sram_area.scratchpad)
    # B200 is on CoWoS-L (TechInsights teardown): the package fits its 3.5 x reticle, not CoWoS-S's 3.3
    assert a.interposer_area_mm2[0] <= area.interposer_limit_mm2("cowos_l")


@pytest.mark.parametrize("name, published", [("mi300x", 115.0), ("mi355x", 110.0)])
def test_amd_xcds(name, published):
    # 8 XCDs over N6 IODs; the XCD holds no HBM PHY nor I/O (base_dies layout). MI300X's XCD ~115 mm^2 on N5
    # (seed 001) fits the CDNA CU logic; the MI355X XCD on N3P (110 mm^2, AMD ISSCC 2026) is predicted from it.
    spec, a = one(name)
    assert a.layout == ("base_dies",)
    assert a.units_physical[0] == spec.units_physical  # 40 and 36 CUs per XCD
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.10)
    assert a.parts["memory_phy"][0] == 0 and a.parts["io"][0] == 0
    assert a.base_area_mm2[0] == pytest.approx(8 * a.die_area_mm2[0] / area.BASE_COVERAGE)
    assert a.hbm_shoreline_stacks[0] >= 8
    assert registry.bind_constraint("interposer")(a.columns())[0] <= 0  # CoWoS-S


PUBLISHED = [(s.name, s.reference.die_area) for s in catalog() if s.reference.die_area]


@pytest.mark.parametrize("name, published", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_die_area_within_15_percent(name, published):
    # per die (per XCD for MI300X / MI355X); the chip files' area sections say which figures are fits
    _, a = one(name)
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.15), f"{name}: {a.die_area_mm2[0]:.0f} mm^2"


def test_every_chip_with_a_published_area_is_checked():
    names = {n for n, _ in PUBLISHED}
    assert {"a100-sxm-80gb", "h100-sxm", "v100-sxm2", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000",
            "tpu-v1", "groq-tsp", "cerebras-wse-3", "mi300x", "mi355x"} <= names


@pytest.mark.parametrize("name", [s.name for s in catalog()])
def test_every_area_override_says_where_it_comes_from(name):
    spec = load_chip(name)
    a = spec.area
    if a.unit_logic is not None or a.uncore is not None or a.io is not None or a.reticle_fields != 1:
        assert a.notes and a.source, f"{name}: an area override needs notes (its derivation) and a source"


def test_one_die_one_area():
    # the RTX 5090 and the RTX PRO 6000 are the same GB202 die: the 5090's disabled L2 slices sit in its uncore
    a = package_area(Chips.from_specs([load_chip("rtx-5090"), load_chip("rtx-pro-6000")]))
    assert a.die_area_mm2[0] == pytest.approx(a.die_area_mm2[1], rel=1e-3)
    h = package_area(Chips.from_specs([load_chip("h100-sxm"), load_chip("h200-sxm")]))
    assert h.die_area_mm2[0] == pytest.approx(h.die_area_mm2[1])


HBM_CHIPS = [s.name for s in catalog() if s.hbm is not None]


@pytest.mark.parametrize("name", HBM_CHIPS)
def test_catalog_hbm_chips_fit_reticle_and_shoreline(name):
    _, a = one(name)
    m = a.columns()
    assert registry.bind_constraint("reticle")(m)[0] <= 0, f"{name}: die {a.die_area_mm2[0]:.0f} mm^2"
    assert registry.bind_constraint("hbm_shoreline")(m)[0] <= 0, \
        f"{name}: {a.hbm_stacks[0]:.0f} stacks, shoreline {a.hbm_shoreline_stacks[0]:.0f}"


def test_h100_with_a_seventh_stack_fails_shoreline():
    # H100: 6 stack sites, 3 per long edge (technology.md); a 7th stack does not fit: violation 1 stack
    base = load_chip("h100-sxm")
    chips = Chips.from_base(base, 3, {"hbm.stacks": np.array([5, 6, 7]), "hbm.stack_sites": np.array([6, 6, 7])})
    a = package_area(chips, process="n4", memory="hbm3")
    np.testing.assert_array_equal(a.hbm_shoreline_stacks, [6, 6, 6])
    np.testing.assert_array_equal(registry.bind_constraint("hbm_shoreline")(a.columns()), [0.0, 0.0, 1.0])
    # the 7th PHY adds its area
    assert a.die_area_mm2[2] - a.die_area_mm2[1] == pytest.approx(technology.memory("hbm3").phy_area)


def test_reticle_violation_of_a_900_mm2_die():
    assert registry.bind_constraint("reticle")({"die_area_mm2": np.array([900.0])})[0] == pytest.approx(42.0)
    # one field per die unless the metrics say otherwise
    m = {"die_area_mm2": np.array([900.0, 900.0]), "reticle_fields": np.array([1.0, 2.0])}
    np.testing.assert_allclose(registry.bind_constraint("reticle")(m), [42.0, 450.0 - 858.0])


# ------------------------------------------------------------------ a stitched wafer


def test_cerebras_wse3_is_feasible_only_as_a_stitched_wafer():
    # seed 001: one wafer of 84 reticle fields, 46,225 mm^2, ~970,000 cores fabricated (900,000 shipped)
    spec, a = one("cerebras-wse-3")
    assert a.units_physical[0] == 970_000 and a.reticle_fields[0] == 84
    assert a.die_area_mm2[0] == pytest.approx(46225.0, rel=0.05)
    per_field = a.die_area_mm2[0] / 84
    assert per_field == pytest.approx(550.0, rel=0.05)  # "the same ~550 mm^2 die 84 times"
    m = a.columns()
    assert registry.bind_constraint("reticle")(m)[0] == pytest.approx(per_field - 858.0)
    # the same wafer as one ordinary die is ~54 reticles over the limit
    one_field = {k: v for k, v in m.items() if k != "reticle_fields"}
    assert registry.bind_constraint("reticle")(one_field)[0] > 50 * 858
    # the 44 GB of SRAM is the cores' 48 kB each: counted once (no separate SRAM main memory)
    assert a.parts["sram_memory"][0] == 0
    n5 = technology.process("n5")
    assert a.parts["local"][0] == pytest.approx(970_000 * 48_000 * n5.sram_area.scratchpad)


def test_reticle_fields_must_be_at_least_one():
    spec = load_chip("cerebras-wse-3")
    chips = Chips.from_base(spec, 1, {"area.reticle_fields": np.array([0.5])})
    with pytest.raises(SpecError, match="reticle_fields"):
        package_area(chips, process="n5")


# ------------------------------------------------------------------ per-chip overrides


def test_overrides_replace_the_node_figures_where_given():
    # rtx-4090 gives unit_logic and uncore, no io; a100 gives uncore only; tpu-v1 gives none (NaN in the batch)
    specs = [load_chip(n) for n in ("rtx-4090", "a100-sxm-80gb", "tpu-v1")]
    chips = Chips.from_specs(specs)
    assert np.isnan(chips["area.unit_logic"][1]) and np.isnan(chips["area.uncore"][2])
    a = package_area(chips)
    u = area.unit_area(chips)
    n5, n7, n28 = (technology.process(p) for p in ("n5", "n7", "n28"))
    assert u["logic"][0] == pytest.approx(specs[0].area.unit_logic)
    assert u["logic"][1] == pytest.approx(n7.unit_logic_area - 256 * 1024 * n7.sram_area.scratchpad)
    assert u["logic"][2] == pytest.approx(n28.unit_logic_area - 256 * 1024 * n28.sram_area.scratchpad)
    np.testing.assert_allclose(a.parts["uncore"], [specs[0].area.uncore, specs[1].area.uncore, n28.uncore_area])
    np.testing.assert_allclose(a.parts["io"], [n5.io_area, n7.io_area, n28.io_area])
    # each point as computed alone
    for i, s in enumerate(specs):
        assert package_area(Chips.from_specs([s])).die_area_mm2[0] == pytest.approx(a.die_area_mm2[i])


def test_an_io_override():
    # B200: the n5 io (PCIe + NVLink SerDes) plus ~10 mm^2 for NV-HBI (b200.yaml)
    spec, a = one("b200")
    assert a.parts["io"][0] == pytest.approx(spec.area.io)
    assert spec.area.io > technology.process("n4").io_area


def test_register_file_is_counted_once():
    # the node's unit logic holds a 256 KiB register file: a unit with 512 KiB adds 256 KiB at scratchpad density,
    # a unit with none takes 256 KiB off; with a chip's own unit_logic (without RF) the RF is added in full
    base = load_chip("h100-sxm")
    chips = Chips.from_base(base, 3, {"register_file": np.array([0.0, 256 * 1024, 512 * 1024])})
    u = area.unit_area(chips, process="n4")
    step = 256 * 1024 * technology.process("n4").sram_area.scratchpad
    np.testing.assert_allclose(np.diff(u["total"]), [step, step])
    assert u["total"][1] == pytest.approx(u["matrix"][1] + u["local"][1] + technology.process("n4").unit_logic_area)


def test_vector_lane_formats_do_not_size_the_matrix():
    # RTX 4090 lists FP32 at 256 FLOP/cycle: the 128 CUDA-core lanes (= vector.flops_per_cycle), not the tensor
    # cores, so the matrix datapath is sized by its tensor formats (INT4 4096 x 0.2 of BF16's area per FLOP/cycle)
    spec = load_chip("rtx-4090")
    u = area.unit_area(Chips.from_specs([spec]))
    n5 = technology.process("n4")
    assert u["matrix"][0] == pytest.approx(4096 * n5.area_per_flop_cycle("int4"))
    assert u["matrix"][0] < 256 * n5.area_per_flop_cycle("fp32")
    # no matrix unit at all: the Apple GPU's formats all run on its ALUs
    assert area.unit_area(Chips.from_specs([load_chip("apple-m4-max")]))["matrix"][0] == 0


def test_consumer_sm_predicts_gb202_and_ga102():
    # fitted to AD102 (rtx-4090) only; GB202 (750 mm^2) and GA102 (628.4 mm^2) are predictions
    assert one("rtx-4090")[1].die_area_mm2[0] == pytest.approx(608.5, abs=2)
    assert one("rtx-5090")[1].die_area_mm2[0] == pytest.approx(750.0, rel=0.10)
    assert one("rtx-3090")[1].die_area_mm2[0] == pytest.approx(628.4, rel=0.10)
    g = load_chip("rtx-4090").area.unit_logic
    assert load_chip("rtx-5090").area.unit_logic == g == load_chip("rtx-pro-6000").area.unit_logic
    assert load_chip("rtx-3090").area.unit_logic == pytest.approx(g * (76.3 / 608.5) / (28.3 / 628.4), rel=0.01)


def test_a_big_design_point_fails_the_reticle():
    # 220 SMs on N4 cannot fit one exposure
    chips = Chips.from_base(load_chip("h100-sxm"), 2, {"units": np.array([132, 220])})
    a = package_area(chips, process="n4", memory="hbm3")
    v = registry.bind_constraint("reticle")(a.columns())
    assert v[0] < 0 < v[1]
    assert v[1] == pytest.approx(a.die_area_mm2[1] - 858.0)


# ------------------------------------------------------------------ shoreline, outline, interposer


def test_stacks_per_edge_reproduces_the_packaging_rule():
    pkg = technology.packaging()
    w = min(technology.memory("hbm3").footprint.width, technology.memory("hbm3").footprint.height)  # 11 mm
    assert stacks_per_edge(pkg.reticle_height, w) == pkg.hbm_stacks_per_long_edge == 3
    assert stacks_per_edge(pkg.reticle_width, w) == pkg.hbm_stacks_per_short_edge == 2
    # half a stack must line the edge: 16.5 mm holds 2 (1.5 + 1/2), 16.4 holds 1
    np.testing.assert_array_equal(stacks_per_edge(np.array([16.5, 16.4, 0.0]), 11.0), [2, 1, 0])


def test_die_outline():
    long, short = die_outline(858.0)
    assert (long, short) == (pytest.approx(33.0), pytest.approx(26.0))
    long, short = die_outline(400.0, aspect=1.0)
    assert (long, short) == (pytest.approx(20.0), pytest.approx(20.0))
    with pytest.raises(SpecError, match="aspect"):
        die_outline(400.0, aspect=0.5)


def test_rectangular_stacks_turn_when_the_row_fits():
    # HBM2E stacks are 7.75 x 11.87 mm: Ascend 910C's rows of 4 (2 + 2 on two dies' short edges) fit with the
    # long side facing the dies, which halves the depth the rows add; A100's rows of 3 (35.6 mm) do not fit its
    # ~32 mm long edge turned, so they stay with the short side facing the die
    pkg = technology.packaging()
    spec, a = one("ascend-910c")
    long, short = a.die_long_mm[0], a.die_short_mm[0]
    turned = (max(2 * short, 4 * 11.87) + 2 * pkg.interposer_margin) * \
        (long + 2 * (pkg.die_to_stack_gap + 7.75) + 2 * pkg.interposer_margin)
    assert a.interposer_area_mm2[0] == pytest.approx(turned)
    spec, a = one("a100-sxm-80gb")
    plain = (max(a.die_long_mm[0], 3 * 7.75) + 2 * pkg.interposer_margin) * \
        (a.die_short_mm[0] + 2 * (pkg.die_to_stack_gap + 11.87) + 2 * pkg.interposer_margin)
    assert 3 * 11.87 > a.die_long_mm[0]
    assert a.interposer_area_mm2[0] == pytest.approx(plain)


def test_interposer_by_hand_for_h100():
    # die L x S at 33:26; rows of 3 stacks (11 mm) on both long edges, 0.5 mm gap, 1 mm margin
    spec, a = one("h100-sxm")
    pkg = technology.packaging()
    long = math.sqrt(a.die_area_mm2[0] * 33 / 26)
    short = a.die_area_mm2[0] / long
    width = max(long, 3 * 11.0) + 2 * pkg.interposer_margin
    height = short + 2 * (pkg.die_to_stack_gap + 11.0) + 2 * pkg.interposer_margin
    assert a.interposer_area_mm2[0] == pytest.approx(width * height)
    assert registry.bind_constraint("interposer")(a.columns())[0] < 0  # fits CoWoS-S (3.3 x 858)


def test_no_hbm_no_interposer_and_dram_phys():
    # RTX 4090: 1,008 GB/s GDDR6X = 12 x32 devices at 21 Gb/s -> 12 PHYs
    spec, a = one("rtx-4090")
    mem = technology.memory(spec.dram.kind)
    assert a.interposer_area_mm2[0] == 0 and a.hbm_stacks[0] == 0
    assert a.parts["memory_phy"][0] == pytest.approx(math.ceil(1008e9 / mem.interface_bandwidth) * mem.phy_area)


# ------------------------------------------------------------------ model properties


def test_units_physical_rule():
    np.testing.assert_array_equal(units_physical(np.array([132, 108, 32, 1, 4])), [146, 120, 35, 1, 4])
    np.testing.assert_array_equal(units_physical(132, 0.0), 132)
    with pytest.raises(SpecError, match="spare"):
        units_physical(132, 1.0)


def test_vectorized_matches_one_point_at_a_time():
    base = load_chip("h100-sxm")
    units = np.array([66, 132, 160])
    l2 = np.array([25e6, 50e6, 80e6])
    chips = Chips.from_base(base, 3, {"units": units, "l2": l2})
    a = package_area(chips, process="n4", memory="hbm3")
    for i in range(3):
        c1 = Chips.from_base(base, 1, {"units": units[i:i + 1], "l2": l2[i:i + 1]})
        assert package_area(c1, process="n4", memory="hbm3").die_area_mm2[0] == pytest.approx(a.die_area_mm2[i])
    assert np.all(np.diff(a.die_area_mm2) > 0)


def test_matrix_area_is_the_max_over_formats():
    base = load_chip("h100-sxm")
    fp4 = "matrix.flops_per_cycle.mxfp4"
    # FP4 at 4x the BF16 rate costs what BF16 costs (shared datapath); at 8x it doubles the matrix area
    chips = Chips.from_base(base, 3, {fp4: np.array([0.0, 4 * 4096, 8 * 4096])})
    u = area.unit_area(chips, process="n4")
    assert u["matrix"][0] == pytest.approx(u["matrix"][1])
    assert u["matrix"][2] == pytest.approx(2 * u["matrix"][1])


def test_process_node_changes_area():
    a7 = package_area(Chips.from_specs([load_chip("h100-sxm")]), process="n7").die_area_mm2[0]
    a4 = package_area(Chips.from_specs([load_chip("h100-sxm")])).die_area_mm2[0]
    assert a7 > a4


def test_columns_for_the_study_layer():
    _, a = one("h100-sxm")
    assert set(a.columns()) == {"die_area_mm2", "total_silicon_area_mm2", "interposer_area_mm2",
                                "hbm_shoreline_stacks", "hbm_stacks", "reticle_fields"}
    assert a.columns()["reticle_fields"][0] == 1


# ------------------------------------------------------------------ errors


def test_chips_without_specs_need_the_process_and_memory():
    chips = Chips.from_base(load_chip("h100-sxm"), 2)
    with pytest.raises(SpecError, match="process"):
        package_area(chips)
    with pytest.raises(SpecError, match="hbm"):
        package_area(chips, process="n4")
    with pytest.raises(SpecError, match="did you mean"):
        package_area(chips, process="n44", memory="hbm3")


def test_bad_layout_and_units_physical():
    chips = Chips.from_specs([load_chip("h100-sxm")])
    with pytest.raises(SpecError, match="did you mean 'monolithic'"):
        package_area(chips, layout="monolitic")
    with pytest.raises(SpecError, match="units_physical"):
        package_area(chips, units_physical_=100)


def test_a_studys_technology_overrides_are_used():
    # doubling the N5 unit logic area adds 144 x 2.82 mm^2 to H100 (144 physical SMs)
    tech = technology.overridden({"processes": {"n5": {"unit_logic_area": f"{2 * technology.process('n5').unit_logic_area} mm^2"}}})
    chips = Chips.from_specs([load_chip("h100-sxm")])
    base = package_area(chips).die_area_mm2[0]
    more = package_area(chips, tech=tech).die_area_mm2[0]
    assert more - base == pytest.approx(144 * technology.process("n5").unit_logic_area)
    # a chip's own figure is not a node figure: the RTX 4090's SM logic does not move
    chips = Chips.from_specs([load_chip("rtx-4090")])
    assert package_area(chips, tech=tech).die_area_mm2[0] == pytest.approx(package_area(chips).die_area_mm2[0])
    assert area.reticle_area_mm2(tech) == 858.0
