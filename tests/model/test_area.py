"""Tests of dse.model.area and its fit (dse.model.area_fit): leave-one-out against published die areas,
the parts, reticle fields, shoreline, interposer, errors.

Published figures: A100 826 mm^2, H100 814 mm^2 (seed 004 §4.1.3); V100 815, GA102 628.4,
AD102 608.5, GB202 750 mm^2 (NVIDIA whitepapers); TPU v1 <= 331 mm^2 (Jouppi 2017); Groq TSP
725 mm^2 (Abts et al. 2020); Cerebras WSE-3 46,225 mm^2 in 84 reticle fields (seed 001); MI300X
XCD ~115 mm^2 (seed 001), MI355X XCD 110 mm^2 (AMD, ISSCC 2026); reticle 26 x 33 mm = 858 mm^2;
"3 stacks per 33 mm edge, 2 per 26 mm edge" (shared/reference/technology.md). Hand computations
below use the technology tables' figures (dse.technology: area_model.yaml, processes.yaml), not the area
module.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from dse import registry, technology
from dse.errors import SpecError
from dse.hardware import Chips, catalog, load_chip, with_overrides
from dse.model import area, area_fit
from dse.model.area import die_outline, package_area, stacks_per_edge, units_physical

MiB = 2**20


def one(name, **kw):
    spec = load_chip(name)
    return spec, package_area(Chips.from_specs([spec]), **kw)


# ------------------------------------------------------------------ the fit and its labels


def coef(name):
    return getattr(technology.area_model().parameters, name).value


def scales(node):
    """(L, S) of a node from the tables (logic density and bitcell against the reference node N7)."""
    ref, p = technology.process("n7"), technology.process(node)
    return ref.logic_density / p.logic_density, p.sram_bitcell / ref.sram_bitcell


def phy(memory, node):
    """mm^2 of one memory interface at a node: the analog PHY as at N7, its controller share scaled by L."""
    mem = technology.memory(memory)
    f = mem.controller_fraction or 0.0
    return mem.phy_area * ((1 - f) + f * scales(node)[0])


def test_leave_one_die_out_errors():
    # issue 16 goal: leave-one-out median |error| <= 10%, max <= 25% over the catalog's published dies
    # (README "Die area": median 7.1%, max 24.3%, the max being WSE-3)
    rep = area_fit.report()
    assert len(rep.rows) == 11
    assert rep.worst <= 0.25, area_fit.table(rep)
    assert rep.median <= 0.10, area_fit.table(rep)


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_table():
    """The README's leave-one-out table ("### Die area from its parts (issue 16)"): die -> (published, fitted, LOO, error)."""
    text = README.read_text().split("### Die area from its parts (issue 16)", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for m in re.finditer(r"^\| ([a-z0-9 /-]+) \| ([\d.]+) mm\^2 \| ([\d.]+) mm\^2 \| ([\d.]+) mm\^2 \| ([+-][\d.]+)% \|$",
                         text, re.M):
        rows[m.group(1)] = tuple(float(m.group(k)) for k in (2, 3, 4, 5))
    summary = re.search(r"Leave-one-out \|error\|: median ([\d.]+)%, max ([\d.]+)%", text)
    return rows, (float(summary.group(1)), float(summary.group(2)))


def test_leave_one_out_table_is_reproduced():
    # issue 16 "How it is checked": the leave-one-chip-out table of the README and of area_model.yaml's fit section
    # is what `python -m dse.model.area_fit` computes now, die by die (the values are the model's; the published
    # column is each chip file's reference.die_area, cited there), within the goals (median <= 10%, max <= 25%)
    rep = area_fit.report()
    rows, (median, worst) = _readme_table()
    assert set(rows) == {r.name for r in rep.rows}
    for r, e_in, e_loo in zip(rep.rows, rep.in_sample, rep.leave_one_out):
        pub, fitted, loo, err = rows[r.name]
        assert pub == pytest.approx(r.published, abs=0.05), r.name
        assert fitted == pytest.approx(r.published * (1 + e_in), abs=0.051), r.name
        assert loo == pytest.approx(r.published * (1 + e_loo), abs=0.051), r.name
        assert err == pytest.approx(100 * e_loo, abs=0.051), r.name
    assert median == pytest.approx(100 * rep.median, abs=0.051) and median <= 10.0
    assert worst == pytest.approx(100 * rep.worst, abs=0.051) and worst <= 25.0
    fit = yaml.safe_load(area_fit.AREA_FILE.read_text())["fit"]  # the section area_fit --write left there
    assert fit["leave_one_out_median"] == pytest.approx(rep.median, abs=1e-4)
    assert fit["leave_one_out_max"] == pytest.approx(rep.worst, abs=1e-4)
    assert [d["error"] for d in fit["dies"]] == pytest.approx(list(rep.leave_one_out), abs=5e-4)


def test_shipped_coefficients_are_the_fit():
    # area_model.yaml holds what `python -m dse.model.area_fit --write` computes (4 significant digits)
    rep = area_fit.report()
    for name, value in zip(area.COEFFICIENTS, rep.theta):
        assert coef(name) == pytest.approx(value, rel=1e-3), name


def test_one_label_per_die():
    # H100 and H200 are one GH100 die, RTX 5090 and RTX PRO 6000 one GB202: each counts once, so no die is
    # predicted from its twin in the leave-one-out
    names = [r.chips for r in area_fit.labels()]
    assert ("h100-sxm", "h200-sxm") in names and ("rtx-5090", "rtx-pro-6000") in names
    published = {n for n, _ in PUBLISHED}
    assert {c for r in names for c in r} == published


def test_a_label_is_never_an_input_of_its_own_prediction():
    # changing a die's published area changes the fit on all dies, not the fit without it
    rows = area_fit.labels()
    i = next(k for k, r in enumerate(rows) if r.chips == ("tpu-v1",))
    others = rows[:i] + rows[i + 1:]
    moved = rows[i].__class__(rows[i].chips, 2 * rows[i].published, rows[i].features, rows[i].fixed)
    assert np.array_equal(area_fit.fit(others), area_fit.fit(others))
    assert not np.allclose(area_fit.fit(others + [moved]), area_fit.fit(others + [rows[i]]))


def test_nnls_against_an_unconstrained_solution():
    # where the unconstrained least squares is positive, NNLS is that solution; a negative one is clipped to 0
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 1.5, (12, 3))
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(area_fit.nnls(a, a @ x), x, rtol=1e-9)
    b = a @ np.array([1.0, -2.0, 3.0])
    got = area_fit.nnls(a, b)
    assert got[1] == 0 and np.all(got >= 0)
    # the clipped problem: the best over x1 = 0 (least squares on the two remaining columns)
    want = np.linalg.lstsq(a[:, [0, 2]], b, rcond=None)[0]
    np.testing.assert_allclose(got[[0, 2]], want, rtol=1e-9)


def test_h100_die_area_by_hand():
    # GH100 (whitepaper): 144 SMs of 4,096 BF16 FLOP/cycle, 128 FP32 lanes (256 FLOP/cycle), 256 KiB registers,
    # 228 KiB shared memory; 60 MB L2 on the die; 6 HBM3 PHY sites; PCIe 5 x16 (64 GB/s) + NVLink 4 (450 GB/s);
    # node N4 (= the n5 tables). The sum written out from the tables:
    l, s = scales("n4")
    want = (144 * 4096 * coef("matrix_tensor_core") * l + 144 * 256 * coef("vector_lane") * l
            + 144 * coef("unit_control") * l + 144 * 256 * 1024 * coef("register_file") * s
            + 144 * 228 * 1024 * coef("scratchpad") * s + 60e6 * coef("cache") * s
            + 6 * phy("hbm3", "n4") + (64 + 450) * coef("serdes") + coef("die_overhead") * l)
    spec, a = one("h100-sxm")
    assert a.units_physical[0] == 144
    assert a.die_area_mm2[0] == pytest.approx(want, rel=1e-12)
    assert sum(a.parts[k][0] for k in ("units", "l2", "memory_phy", "io", "uncore", "sram_memory")) == \
        pytest.approx(want, rel=1e-12)
    assert a.die_area_mm2[0] == pytest.approx(814.0, rel=0.05)  # published (seed 004 §4.1.3); in-sample


def test_b200_dies_under_the_reticle():
    # a B200 die is not a label (no published per-die area): NVIDIA calls both dies reticle-limited and
    # TechInsights finds "a near doubling of the GPU die area versus Hopper" (2 x 814 mm^2). Predicted:
    # within 20% of 814 mm^2 per die and inside the reticle; 80 physical SMs per die (74 enabled)
    spec, a = one("b200")
    assert a.layout == ("side_by_side",)
    assert a.dies[0] == 2 and a.units_physical[0] == 80
    assert a.die_area_mm2[0] == pytest.approx(814.0, rel=0.20)
    assert a.die_area_mm2[0] <= 858.0
    assert a.total_silicon_area_mm2[0] == pytest.approx(2 * a.die_area_mm2[0])
    assert a.hbm_stacks[0] == 8 and a.hbm_shoreline_stacks[0] == 8  # 2 + 2 stacks on each die's short edges
    # TMEM (256 KB/SM) is counted as the accumulator, at the scratchpad figure
    assert a.parts["local"][0] == pytest.approx(80 * (228 + 256) * 1024 * coef("scratchpad") * scales("n4")[1])
    # NV-HBI (10 TB/s) adds its die-to-die PHY to each die's I/O
    assert a.parts["io"][0] == pytest.approx((64 + 900) / 2 * coef("serdes") + 10 * technology.area_model().die_to_die)
    # B200 is on CoWoS-L (TechInsights teardown): the package fits its 3.5 x reticle, not CoWoS-S's 3.3
    assert a.interposer_area_mm2[0] <= area.interposer_limit_mm2("cowos_l")


@pytest.mark.parametrize("name, published", [("mi300x", 115.0), ("mi355x", 110.0)])
def test_amd_xcds(name, published):
    # 8 XCDs over N6 IODs; the XCD holds no HBM PHY nor I/O (base_dies layout). XCD ~115 mm^2 on N5 (seed 001),
    # 110 mm^2 on N3P (AMD, ISSCC 2026)
    spec, a = one(name)
    assert a.layout == ("base_dies",)
    assert a.units_physical[0] == spec.units_physical  # 40 and 36 CUs per XCD
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.15)
    assert a.parts["memory_phy"][0] == 0 and a.parts["io"][0] == 0
    assert a.base_area_mm2[0] == pytest.approx(8 * a.die_area_mm2[0] / area.BASE_COVERAGE)
    assert a.hbm_shoreline_stacks[0] >= 8
    assert registry.bind_constraint("interposer")(a.columns())[0] <= 0  # CoWoS-S


PUBLISHED = [(s.name, s.reference.die_area) for s in catalog() if s.reference.die_area]


@pytest.mark.parametrize("name, published", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_die_area_within_15_percent(name, published):
    # in-sample (the fit's own labels); the leave-one-out errors are the test above
    _, a = one(name)
    assert a.die_area_mm2[0] == pytest.approx(published, rel=0.15), f"{name}: {a.die_area_mm2[0]:.0f} mm^2"


def test_every_chip_with_a_published_area_is_checked():
    names = {n for n, _ in PUBLISHED}
    assert {"a100-sxm-80gb", "h100-sxm", "v100-sxm2", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000",
            "tpu-v1", "groq-tsp", "cerebras-wse-3", "mi300x", "mi355x"} <= names


def test_no_per_chip_area_corrections():
    # issue 16: a many-core SRAM chip, a systolic chip and a GPU are expressed without per-chip corrections;
    # a chip's area section holds facts (graphics pipeline, stitched reticle fields) only
    from dse.hardware import AreaSpec
    assert set(AreaSpec.model_fields) == {"graphics", "reticle_fields", "notes", "source"}


def test_one_die_one_area():
    # the RTX 5090 and the RTX PRO 6000 are the same GB202 die (l2_physical: the 5090's disabled L2 slices)
    a = package_area(Chips.from_specs([load_chip("rtx-5090"), load_chip("rtx-pro-6000")]))
    assert a.die_area_mm2[0] == pytest.approx(a.die_area_mm2[1], rel=1e-3)
    h = package_area(Chips.from_specs([load_chip("h100-sxm"), load_chip("h200-sxm")]))
    assert h.die_area_mm2[0] == pytest.approx(h.die_area_mm2[1])


def test_systolic_is_inferred_from_the_instruction_and_cheaper():
    # TPU v1 (256 x 256, m = 1), Groq (320 x 320) and Trainium2 (128 x 128) stream rows through a
    # weight-stationary array; a GPU's 16 x 8 x 16 MMA is a tensor core
    chips = Chips.from_specs([load_chip(n) for n in ("tpu-v1", "groq-tsp", "trainium2", "h100-sxm")])
    np.testing.assert_array_equal(chips["matrix.systolic"], [1, 1, 1, 0])
    assert coef("matrix_systolic") < coef("matrix_tensor_core")
    base = load_chip("h100-sxm")
    sys = Chips.from_base(base, 2, {"matrix.systolic": np.array([0.0, 1.0])})
    m = package_area(sys, process="n4", memory="hbm3").parts["matrix"]
    assert m[1] / m[0] == pytest.approx(coef("matrix_systolic") / coef("matrix_tensor_core"))


# Ascend 910C: its 192 MiB L2 per die (est., CANN platform config) at the fitted cache figure makes a 920 mm^2
# die where die shots measure 665.6 mm^2 for the 910B die (press, Kurnalsalts via Tom's Hardware): a model (or
# data) error the fit cannot see, since the die is not a catalog label. Kept visible as a strict xfail.
HBM_CHIPS = [pytest.param(s.name, marks=pytest.mark.xfail(strict=True, reason="ascend-910c: 192 MiB L2 at cache "
                                                          "density exceeds the reticle (open)"))
             if s.name == "ascend-910c" else s.name for s in catalog() if s.hbm is not None]


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
    assert a.die_area_mm2[2] - a.die_area_mm2[1] == pytest.approx(phy("hbm3", "n4"))


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
    assert a.die_area_mm2[0] == pytest.approx(46225.0, rel=0.10)  # in-sample; leave-one-out in the table
    per_field = a.die_area_mm2[0] / 84
    assert per_field == pytest.approx(550.0, rel=0.10)  # "the same ~550 mm^2 die 84 times"
    m = a.columns()
    assert registry.bind_constraint("reticle")(m)[0] == pytest.approx(per_field - 858.0)
    # the same wafer as one ordinary die is ~50 reticles over the limit
    one_field = {k: v for k, v in m.items() if k != "reticle_fields"}
    assert registry.bind_constraint("reticle")(one_field)[0] > 40 * 858
    # the 44 GB of SRAM is the cores' 48 kB each: counted once (no separate SRAM main memory)
    assert a.parts["sram_memory"][0] == 0
    assert a.parts["local"][0] == pytest.approx(970_000 * 48_000 * coef("scratchpad") * scales("n5")[1])


def test_reticle_fields_must_be_at_least_one():
    spec = load_chip("cerebras-wse-3")
    chips = Chips.from_base(spec, 1, {"area.reticle_fields": np.array([0.5])})
    with pytest.raises(SpecError, match="reticle_fields"):
        package_area(chips, process="n5")


# ------------------------------------------------------------------ parts


def test_register_file_adds_its_bytes():
    # each 256 KiB more register file per SM adds 144 x 256 KiB x the register-file figure x S(N4)
    base = load_chip("h100-sxm")
    chips = Chips.from_base(base, 3, {"register_file": np.array([0.0, 256 * 1024, 512 * 1024])})
    a = package_area(chips, process="n4", memory="hbm3")
    step = 144 * 256 * 1024 * coef("register_file") * scales("n4")[1]
    np.testing.assert_allclose(np.diff(a.die_area_mm2), [step, step])


def test_vector_lane_formats_do_not_size_the_matrix():
    # RTX 4090 lists FP32 at 256 FLOP/cycle: the 128 CUDA-core lanes (= vector.flops_per_cycle), not the tensor
    # cores, so the matrix datapath is sized by its tensor formats: FP16 with FP16 accumulate at 1,024 FLOP/cycle
    # (matrix.flops_per_cycle_physical) beats INT4's 4,096 x 0.2 (rule [A]), BF16's 512 x 1 and INT8's 2,048 x 0.35
    spec = load_chip("rtx-4090")
    a = package_area(Chips.from_specs([spec]))
    assert a.parts["matrix"][0] == pytest.approx(144 * 1024 * coef("matrix_tensor_core") * scales("n4")[0])
    # no matrix unit at all: the Apple GPU's formats all run on its ALUs
    assert package_area(Chips.from_specs([load_chip("apple-m4-max")])).parts["matrix"][0] == 0


def test_an_fp16_lane_is_a_quarter_of_an_fp32_lane():
    # WSE-3's cores fire an 8-wide FP16 FMAC (seed 001): 16 FLOP/cycle of FP16 lanes, area 0.25 of FP32 (rule [A])
    spec, a = one("cerebras-wse-3")
    assert a.parts["vector"][0] == pytest.approx(970_000 * 16 * 0.25 * coef("vector_lane") * scales("n5")[0])


def test_dram_phys_follow_the_bus_width():
    # RTX 4090: a 384-bit GDDR6X bus = 12 x32 devices (Ada whitepaper). A 256-bit bus at 24 Gb/s (768 GB/s) is 8
    # PHYs; without the bus width the default 21 Gb/s pin rate reads 768 GB/s as 293 bits -> 10 PHYs
    spec, a = one("rtx-4090")
    one_phy = phy("gddr6x", "n4")
    assert a.parts["memory_phy"][0] == pytest.approx(12 * one_phy)
    base = load_chip("rtx-4090")
    chips = Chips.from_base(base, 2, {"dram.bandwidth": np.array([768e9, 768e9]),
                                      "dram.bus_width": np.array([256.0, np.nan])})
    phys = package_area(chips, process="n4", memory="gddr6x").parts["memory_phy"]
    np.testing.assert_allclose(phys, [8 * one_phy, 10 * one_phy])


def test_io_grows_with_the_serdes_bandwidth():
    # the I/O is SerDes per GB/s, not a fixed block: NVLink at 900 instead of 450 GB/s adds 450 GB/s of PHY
    base = load_chip("h100-sxm")
    chips = Chips.from_base(base, 2, {"links.scale_up.bandwidth": np.array([450e9, 900e9])})
    io = package_area(chips, process="n4", memory="hbm3").parts["io"]
    assert io[1] - io[0] == pytest.approx(450 * coef("serdes"))


def test_graphics_units_cost_area():
    # area.graphics: texture, RT and raster hardware per SM (consumer GPUs)
    base = load_chip("rtx-4090")
    chips = Chips.from_base(base, 2, {"area.graphics": np.array([0.0, 1.0])})
    a = package_area(chips, process="n4", memory="gddr6x")
    assert a.die_area_mm2[1] - a.die_area_mm2[0] == pytest.approx(144 * coef("graphics") * scales("n4")[0])


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


def test_no_hbm_no_interposer():
    spec, a = one("rtx-4090")
    assert a.interposer_area_mm2[0] == 0 and a.hbm_stacks[0] == 0


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


@pytest.mark.parametrize("base", ["h100-sxm", "mi355x"])
def test_alike_points_computed_once_match_each_point_alone(base):
    """package_area computes each set of alike inputs once (jit.distinct over the inputs some point changes) and
    lays the results over the points: on 240 points drawn from few values of the units, L2, HBM stacks, dies and
    memory-side cache (MI355X), the clock and the TDP apart (they do not enter the package), every field (and the
    power model's sums of parts, area.part_sums) equals the package of that point alone, to the bit."""
    rng = np.random.default_rng(5)
    n = 240
    over = {"units": rng.choice([32.0, 132.0, 256.0], n), "l2": rng.choice([2.5e7, 1e8], n),
            "hbm.stacks": rng.choice([4.0, 6.0], n), "dies": rng.choice([1.0, 2.0, 8.0], n),
            "clock": rng.uniform(1e9, 2e9, n), "tdp": rng.uniform(300.0, 1500.0, n)}
    if base == "mi355x":
        over["memory_side_cache.capacity"] = rng.choice([0.0, 2.56e8], n)
    chips = Chips.from_base(load_chip(base), n, over)
    tech = dict(process="n4", memory="hbm3e")
    calls = []
    real = area.jit.distinct
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(area.jit, "distinct", lambda keys, most=None: calls.append(real(keys)[0].size)
                   or real(keys, most))
        a = package_area(chips, **tech)
    assert calls and calls[0] <= 3 * 2 * 2 * 3 * 2
    fields = ("die_area_mm2", "total_silicon_area_mm2", "base_area_mm2", "units_physical", "die_long_mm",
              "die_short_mm", "hbm_stacks", "hbm_shoreline_stacks", "interposer_area_mm2")
    for i in range(0, n, 7):
        one_point = package_area(chips.take(i), **tech)
        for f in fields:
            assert np.array_equal(np.asarray(getattr(a, f))[i:i + 1], np.asarray(getattr(one_point, f)),
                                  equal_nan=True), (i, f)
        for k, v in a.parts.items():
            assert np.array_equal(np.asarray(v)[i:i + 1], np.asarray(one_point.parts[k]), equal_nan=True), (i, k)
        # the power model's sums of parts (summed once per set of alike points, then laid over): each point's own
        for x, y in zip(area.part_sums(a), area.part_sums(one_point)):
            assert np.array_equal(x[i:i + 1], y, equal_nan=True), i
    assert a.alike is not None and len(a.parts) == len(area.PARTS)


@pytest.mark.parametrize("base,alike", [("h100-sxm", True), ("h100-sxm", False), ("mi355x", False),
                                        ("groq-tsp", False), ("tpu-v1", True)])
def test_part_sets_for_equals_the_packages_parts_summed(base, alike):
    """The evaluator's power model reads the package's sums of parts from part_sets_for, whose kernel computes the
    sums alone (no outline, shoreline, interposer): each must be, to the bit, the package's own parts (package_area)
    added in the order of area.LOGIC_PARTS, SRAM_PARTS and CLOCKED_PARTS, which say which parts leak as logic,
    leak as SRAM and take the clock. Points alike (few values) and all apart (continuous L2, local buffers, memory-
    side caches; HBM, SRAM main memory, a systolic chip)."""
    rng = np.random.default_rng(11)
    n = 300
    if alike:
        over = {"units": rng.choice([8.0, 64.0, 200.0], n), "l2": rng.choice([2.5e7, 1e8], n),
                "clock": rng.uniform(1e9, 2e9, n)}
    else:
        over = {"units": rng.integers(1, 300, n).astype(float), "l2": rng.uniform(1e6, 2e8, n),
                "local_buffer": rng.uniform(1e4, 2e6, n), "dies": rng.choice([1.0, 2.0, 4.0], n)}
        if base == "mi355x":
            over["memory_side_cache.capacity"] = rng.uniform(0.0, 5e8, n)
    chips = Chips.from_base(load_chip(base), n, over)
    *sums, inverse = area.part_sets_for(chips)
    assert (inverse is not None) == alike
    pa = area.package_area_for(chips)
    for names, got in zip((area.LOGIC_PARTS, area.SRAM_PARTS, area.CLOCKED_PARTS), sums):
        want = np.asarray(pa.parts[names[0]], dtype=float)
        for name in names[1:]:
            want = want + np.asarray(pa.parts[name], dtype=float)
        got = got if inverse is None else got[inverse]
        assert np.array_equal(got, np.broadcast_to(want, (n,)), equal_nan=True), names
        assert np.all(got > 0), names



@pytest.mark.parametrize("known", ["learned", "none", "but_l2"])
def test_part_sets_for_computes_once_per_set_of_what_the_package_reads(known, monkeypatch):
    """part_sets_for computes the package on the first point of each set of points alike in the figures a call saw
    it read (area._PACKAGE_READS; the clock and the TDP are not among them), and checks that the call read nothing
    else: where the figures known are all it reads, 200 points of 3 units x 2 L2 x 2 HBM stacks (and so their
    memory bandwidth) with clocks and TDPs of their own are 12 packages; where none is known, or the L2 is not
    (the sets found without it, then the call reads it), every point's package, the figures then noted. Each
    point's sums of parts are, to the bit, those of its package computed for it alone."""
    rng = np.random.default_rng(3)
    n = 200
    over = {"units": rng.choice([16.0, 96.0, 264.0], n), "l2": rng.choice([2.5e7, 1e8], n),
            "hbm.stacks": rng.choice([3.0, 6.0], n), "clock": rng.uniform(1e9, 2e9, n),
            "tdp": rng.uniform(300.0, 1500.0, n)}
    chips = Chips.from_base(load_chip("h100-sxm"), n, over)
    monkeypatch.setattr(area, "_PACKAGE_READS", set())
    area.part_sets_for(chips)  # (the first call: every point's package, the figures it reads noted)
    learned = set(area._PACKAGE_READS)
    assert {"units", "l2", "hbm.stacks", "memory.bandwidth"} <= learned and not {"clock", "tdp"} & learned
    monkeypatch.setattr(area, "_PACKAGE_READS", {"learned": set(learned), "none": set(),
                                                 "but_l2": learned - {"l2"}}[known])
    sizes = []
    real = area._package_results
    monkeypatch.setattr(area, "_package_results", lambda c, *a, **k: sizes.append(len(c)) or real(c, *a, **k))
    *sums, inverse = area.part_sets_for(chips)
    assert sizes == {"learned": [12], "none": [n], "but_l2": [6, n]}[known]
    assert area._PACKAGE_READS == learned
    assert inverse is not None and inverse.shape == (n,) and sums[0].shape == (12,)
    monkeypatch.setattr(area, "_package_results", real)
    for i in range(0, n, 9):
        alone = area.part_sums(area.package_area_for(chips.take([i])))
        for got, want in zip(sums, alone):
            assert np.array_equal(got[inverse[i]:inverse[i] + 1], want), i


def test_matrix_area_is_the_max_over_formats():
    base = load_chip("h100-sxm")
    fp4 = "matrix.flops_per_cycle.mxfp4"
    # FP4 at 4x the BF16 rate costs what BF16 costs (shared datapath); at 8x it doubles the matrix area
    chips = Chips.from_base(base, 3, {fp4: np.array([0.0, 4 * 4096, 8 * 4096])})
    m = package_area(chips, process="n4", memory="hbm3").parts["matrix"]
    assert m[0] == pytest.approx(m[1])
    assert m[2] == pytest.approx(2 * m[1])


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
    # doubling the cache figure adds H100's 60 MB of physical L2 once more; another N5 bitcell scales every SRAM
    c = coef("cache")
    tech = technology.overridden({"area": {"parameters": {"cache": {"value": f"{2 * c * MiB} mm^2/MiB"}}}})
    chips = Chips.from_specs([load_chip("h100-sxm")])
    base = package_area(chips).die_area_mm2[0]
    more = package_area(chips, tech=tech).die_area_mm2[0]
    assert more - base == pytest.approx(60e6 * c * scales("n4")[1])
    assert area.reticle_area_mm2(tech) == 858.0


def test_memory_controllers_scale_with_the_node_and_the_phy_does_not():
    # A100 die shot (technology.md): 9.7 mm^2 PHY + 5.3 mm^2 controller per HBM2E stack at N7. At N4 the controller
    # shrinks by the logic density, the analog PHY keeps its area; at 12 nm the controller is larger
    mem = technology.memory("hbm3")
    assert mem.controller_fraction == pytest.approx(5.3 / 15, abs=0.01)
    assert phy("hbm3", "n7") == pytest.approx(15.0)
    assert phy("hbm3", "n4") < 15.0 < phy("hbm2", "n12")
    _, a = one("h100-sxm")
    assert a.parts["memory_phy"][0] == pytest.approx(6 * phy("hbm3", "n4"))
    _, a = one("v100-sxm2")
    assert a.parts["memory_phy"][0] == pytest.approx(4 * phy("hbm2", "n12"))


def test_geforce_matrix_is_sized_by_its_fp16_accumulate_datapath():
    # GeForce halves FP16/BF16 with FP32 accumulate (RTX 5090: 512 of 1024 FLOP/cycle per SM, the whitepaper's FP16-
    # accumulate 419 TFLOP/s); the RTX PRO 6000 runs the same GB202 at 1024: the same matrix area
    _, g = one("rtx-5090")
    _, w = one("rtx-pro-6000")
    assert g.parts["matrix"][0] == pytest.approx(w.parts["matrix"][0])
    assert g.parts["matrix"][0] == pytest.approx(192 * 1024 * coef("matrix_tensor_core") * scales("n4")[0])
    # a design that changes a format's rate drops the base's physical rate of that format (another datapath)
    base = load_chip("rtx-5090")
    chips = Chips.from_base(base, 2, {"matrix.flops_per_cycle.fp16": np.array([512.0, 256.0])})
    assert "matrix.flops_per_cycle_physical.fp16" not in chips.arrays
    small = with_overrides(base, {"matrix.flops_per_cycle.fp16": 256.0})
    assert "fp16" not in (small.matrix.flops_per_cycle_physical or {})


def test_physical_rates_are_validated_and_size_only_the_area():
    # the datapath as built is at least what the product enables; a rate <= 0, nan or an unknown format is refused
    base = load_chip("rtx-5090")
    for bad, msg in ((256.0, "below the enabled"), (-1.0, "finite number > 0"), (float("nan"), "finite number > 0")):
        with pytest.raises(SpecError, match=msg):
            with_overrides(base, {"matrix.flops_per_cycle_physical.fp16": bad})
    with pytest.raises(SpecError, match="fp17"):
        with_overrides(base, {"matrix.flops_per_cycle_physical.fp17": 2048.0})
    # a study point may set it (a dotted chip parameter): the matrix area follows, the peak does not
    h100 = load_chip("h100-sxm")  # 4096 BF16 FLOP/cycle per SM (H100 whitepaper: 989 TFLOP/s dense)
    chips = Chips.from_base(h100, 2, {"matrix.flops_per_cycle_physical.bf16": np.array([4096.0, 8192.0])})
    a = area.package_area_for(chips)
    assert a.parts["matrix"][1] == pytest.approx(2 * a.parts["matrix"][0])
    np.testing.assert_array_equal(chips.peak_flops("bf16"), [h100.peak_flops("bf16")] * 2)


def test_the_package_kernel_takes_the_points_read_only_whether_they_repeat_or_not():
    """The package's kernel gets its per-point inputs read-only on both of its paths: points evaluated one by one,
    and the first points of sets of alike points (gathered: a fresh array) when at least half repeat. numba compiles
    a writable array apart from a read-only one: the two paths compiled the kernel twice (~3 s each on a fresh
    cache, issue 20's CI)."""
    rng = np.random.default_rng(7)
    n = 400
    repeating = {"units": rng.choice([100.0, 132.0], n)}  # (two sets: the alike path)
    distinct = {"units": rng.choice([100.0, 132.0], n), "l2": rng.uniform(1e7, 1e8, n)}  # (none alike)
    for over in (repeating, distinct):
        chips = Chips.from_base(load_chip("h100-sxm"), n, over)
        a = package_area(chips, **dict(zip(("process", "memory"), area.process_and_memory(chips))))
        assert (a.alike is None) == (over is distinct)
    signatures = area._package_kernel.signatures
    assert signatures
    for sig in signatures:  # (the dies' inputs, then side, memory-side cache, memory face, depth, aspect)
        assert not any(t.mutable for t in sig[0].types) and not any(getattr(t, "mutable", False) for t in sig[1:6])
