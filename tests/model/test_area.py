"""Tests of dse.model.area: calibration against published die areas, shoreline, interposer, errors.

Published figures: A100 826 mm^2, H100 814 mm^2 (seed 004 §4.1.3); reticle
26 x 33 mm = 858 mm^2; "3 stacks per 33 mm edge, 2 per 26 mm edge"
(shared/reference/technology.md). Hand computations below use the
technology tables' figures (dse.technology), not the area module.
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
    # die = 146 x (matrix + 228 KiB x scratchpad + unit logic) + 50 MB x cache + 6 x PHY + io + uncore
    n5 = technology.process("n4")
    hbm3 = technology.memory("hbm3")
    matrix = 4096 * n5.flop_area["bf16"]  # = 8192 x fp8 area: the formats share the datapath
    assert matrix == pytest.approx(8192 * n5.flop_area["fp8"])
    unit = matrix + 228 * 1024 * n5.sram_area.scratchpad + n5.unit_logic_area  # 256 KiB RF: inside unit logic
    want = (146 * unit + 50e6 * n5.sram_area.cache + 6 * hbm3.phy_area + n5.io_area + n5.uncore_area)
    spec, a = one("h100-sxm")
    assert a.units_physical[0] == 146  # 132 + floor(132 x 0.1 / 0.9)
    assert a.die_area_mm2[0] == pytest.approx(want, rel=1e-12)
    assert sum(a.parts[k][0] for k in ("units", "l2", "memory_phy", "io", "uncore", "sram_memory")) == \
        pytest.approx(want, rel=1e-12)


def test_b200_dies_within_the_reticle():
    # two reticle-limited dies (seed 004 §4.1.3); the model gives ~573 mm^2 per die (see the report:
    # Blackwell's TMEM/FP4 datapaths, NV-HBI and the rest are not in the per-SM figures)
    spec, a = one("b200")
    assert a.layout == ("side_by_side",)
    assert a.dies[0] == 2
    assert 0.6 * 858 < a.die_area_mm2[0] <= 858
    assert a.total_silicon_area_mm2[0] == pytest.approx(2 * a.die_area_mm2[0])
    assert a.hbm_stacks[0] == 8 and a.hbm_shoreline_stacks[0] == 8  # 2 + 2 stacks on each die's short edges


def test_mi355x_xcd_plausible():
    # 8 XCDs of 36 physical CUs on N3P over two N6 IODs; the XCD holds no HBM PHY nor I/O (base_dies layout).
    # Published MI300X XCD (N5, 40 CUs) is ~115 mm^2; a plausible N3P XCD is 80-200 mm^2.
    spec, a = one("mi355x")
    assert a.layout == ("base_dies",)
    assert a.units_physical[0] == 35  # 32 + floor(32 x 0.1 / 0.9); 36 published
    assert 80 < a.die_area_mm2[0] < 200
    assert a.parts["memory_phy"][0] == 0 and a.parts["io"][0] == 0
    assert a.base_area_mm2[0] == pytest.approx(8 * a.die_area_mm2[0] / area.BASE_COVERAGE)
    assert a.hbm_shoreline_stacks[0] >= 8


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
                                "hbm_shoreline_stacks", "hbm_stacks"}


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
    # doubling the N5 unit logic area adds 146 x 2.67 mm^2 to H100
    tech = technology.overridden({"processes": {"n5": {"unit_logic_area": f"{2 * technology.process('n5').unit_logic_area} mm^2"}}})
    chips = Chips.from_specs([load_chip("h100-sxm")])
    base = package_area(chips).die_area_mm2[0]
    more = package_area(chips, tech=tech).die_area_mm2[0]
    assert more - base == pytest.approx(146 * technology.process("n5").unit_logic_area)
    assert area.reticle_area_mm2(tech) == 858.0
