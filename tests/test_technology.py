"""Tests of dse.technology: the shipped tables, their sources, lookups, overrides, chip energies.

Seed figures come from tests/data/seed_cases.yaml (case ``energy_per_byte_levels``,
seed 004 §4.1.3); the A100/H100 die areas are the calibration targets named in
processes.yaml's ``calibration`` note.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from dse import technology as tech
from dse.errors import SpecError
from dse.hardware import Chips, chip_from_dict
from dse.precision import format_names
from tests.reference_cases import approx

KiB, MiB, GB = 2**10, 2**20, 1e9
pJ = 1e-12
TABLES = tech.TECH_DIR

# ----------------------------------------------------------------- the seed's energy table

# Which physical row of the tables reproduces each row of the seed table (seed 004 §4.1.3):
#   kb_sram   KB-scale SRAM, Horowitz 45 nm 8 KB        -> process n45, sram_read_energy.small (8 KiB)
#   mb_sram   MB-scale SRAM, Dally HC 2023 / Horowitz   -> process n45, sram_read_energy.large (1 MiB)
#   nvlink_c2c NVLink-C2C 1.3 pJ/bit                    -> packaging link_energy
#   hbm2      HBM2 3.97 pJ/bit, MICRO 2017              -> memories hbm2 (the same physical row)
#   lpddr     LPDDR 640 pJ / 32-bit word, Horowitz 45 nm -> memories lpddr2 (the 45 nm-era row)
#   fp16_fma_per_flop 1.5 pJ / 2 FLOPs at 45 nm         -> process n45, flop_energy.fp16
SEED_ROWS = {
    "kb_sram": lambda: tech.process("n45").sram_energy_per_byte(8 * KiB),
    "mb_sram": lambda: tech.process("n45").sram_energy_per_byte(1 * MiB),
    "nvlink_c2c": lambda: tech.packaging().link_energy,
    "hbm2": lambda: tech.memory("hbm2").energy_per_byte,
    "lpddr": lambda: tech.memory("lpddr2").energy_per_byte,
    "fp16_fma_per_flop": lambda: tech.process("n45").energy_per_flop("fp16"),
}


@pytest.mark.parametrize("key", sorted(SEED_ROWS))
def test_seed_energy_table(key):
    approx("energy_per_byte_levels", key, SEED_ROWS[key]() / pJ)


def test_horowitz_32kb_falls_on_the_interpolation():
    # Horowitz ISSCC 2014, 45 nm: 32 KB 2.5 pJ/B, between the 8 KB and 1 MB anchors
    assert tech.process("n45").sram_energy_per_byte(32 * KiB) / pJ == pytest.approx(2.5, rel=0.05)


def test_seed_tdp_budget_from_tables():
    # seed 004 §4.1.3 power ceiling: 3.35 TB/s x HBM2 31.76 pJ/B = 106.4 W
    approx("tdp_energy_budget", "memory_power_w", 3.35e12 * tech.memory("hbm2").energy_per_byte)


# ----------------------------------------------------------------- every value has a source


def _raw(name):
    with (TABLES / name).open() as fh:
        return yaml.safe_load(fh)


METADATA = {"title", "aliases", "sources", "kind"}


def _records():
    for name, node in _raw("processes.yaml")["nodes"].items():
        yield f"processes.{name}", node
    for name, mem in _raw("memories.yaml")["memories"].items():
        yield f"memories.{name}", mem
    pack = _raw("packaging.yaml")
    yield "packaging", pack
    for name, ip in pack["interposers"].items():
        yield f"packaging.interposers.{name}", ip


@pytest.mark.parametrize("where,record", list(_records()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_row_has_a_source(where, record):
    sources = record.get("sources")
    assert isinstance(sources, dict) and sources, f"{where}: no sources map"
    fields = [k for k in record if k not in METADATA]
    missing = [k for k in fields if not str(sources.get(k) or "").strip()]
    assert not missing, f"{where}: no source for {missing}"
    stray = [k for k in sources if k not in record]
    assert not stray, f"{where}: sources for absent fields {stray}"


def test_processes_yaml_has_calibration_note():
    note = _raw("processes.yaml")["calibration"]
    for word in ("A100", "H100", "area_model.yaml", "leave-one-out"):
        assert word in note


def test_loader_refuses_an_unsourced_value():
    raw = copy.deepcopy(tech.default().raw)
    raw = tech._plain(raw)
    del raw["processes"]["n7"]["sources"]["wafer_cost"]
    with pytest.raises(SpecError, match=r"processes\.n7.*no source for wafer_cost"):
        tech.Technology(raw)


def test_loader_reports_file_and_line_of_a_bad_value(tmp_path):
    from dse.spec import load_yaml_text

    text = (TABLES / "packaging.yaml").read_text().replace("reticle_width: 26 mm", "reticle_width: 26")
    raw = {**tech.default().raw, "packaging": load_yaml_text(text, "packaging.yaml")}
    with pytest.raises(SpecError, match=r"packaging\.yaml:\d+:\d+ packaging\.reticle_width"):
        tech.Technology(raw)


# ----------------------------------------------------------------- the process tables

NODES_OLD_TO_NEW = ["n45", "n28", "n16", "n7", "n5", "n3", "n2"]
REL_ENERGY = {"fp32": 3.0, "tf32": 2.0, "bf16": 1, "fp16": 1, "fp8": 0.5, "fp6": 0.3, "fp4": 0.25,
              "int8": 0.35, "int4": 0.2}
REL_AREA = {"fp32": 4.0, "tf32": 2.0, "bf16": 1, "fp16": 1, "fp8": 0.5, "fp6": 0.25, "fp4": 0.25,
            "int8": 0.35, "int4": 0.2}


def test_node_list():
    # plus Samsung 8LPP (GA102) and GF 14LPP (Groq TSP), which the area model scales by their own densities
    assert tech.process_names() == sorted(NODES_OLD_TO_NEW + ["n8", "n14"])


@pytest.mark.parametrize("node", NODES_OLD_TO_NEW)
def test_format_tables_follow_the_documented_rules(node):
    p = tech.process(node)
    assert set(p.flop_energy) == set(tech.FORMAT_CLASSES) == set(tech.area_model().format_area)
    for cls in tech.FORMAT_CLASSES:
        assert p.flop_energy[cls] / p.flop_energy["bf16"] == pytest.approx(REL_ENERGY[cls], rel=1e-9), cls
        assert tech.area_model().format_area[cls] == pytest.approx(REL_AREA[cls], rel=1e-9), cls


def test_technology_md_anchors():
    # technology.md: BF16 FMA 0.5 pJ at N7, 0.35 at N5; SRAM bitcells N16 0.074, N7 0.027, N5 0.021,
    # N3E 0.021, N2 0.0175 um^2; WikiChip logic densities N7 91.2, N5 171.3 MTr/mm^2
    assert tech.process("n7").energy_per_flop("bf16") == pytest.approx(0.25 * pJ)
    assert tech.process("n5").energy_per_flop("bf16") == pytest.approx(0.175 * pJ)
    for node, cell in (("n16", 0.074), ("n7", 0.027), ("n5", 0.021), ("n3", 0.021), ("n2", 0.0175)):
        assert tech.process(node).sram_bitcell == pytest.approx(cell * 1e-6), node  # um^2 -> mm^2
    assert tech.process("n7").logic_density == pytest.approx(91.2e6)
    assert tech.process("n5").logic_density == pytest.approx(171.3e6)
    assert tech.process("n5").defect_density == pytest.approx(0.1 / 100)  # /cm^2 -> /mm^2
    assert tech.process("n5").wafer_cost == 16000
    # TPUv4i: 65,536 BF16 MACs in ~11% of ~400 mm^2 at N7 (the systolic prior)
    assert 131072 * tech.area_model().parameters.matrix_systolic.prior == pytest.approx(0.11 * 400, rel=0.01)
    for node in NODES_OLD_TO_NEW:
        p = tech.process(node)
        assert p.voltage.threshold < p.voltage.min <= p.voltage.nominal <= p.voltage.max
        assert p.power_density_limit.air == pytest.approx(0.6) and p.power_density_limit.liquid == pytest.approx(1.0)


@pytest.mark.parametrize("field", ["energy", "logic", "bitcell", "small", "large"])
def test_newer_nodes_are_not_worse(field):
    get = {
        "energy": lambda p: p.energy_per_flop("bf16"),
        "logic": lambda p: 1.0 / p.logic_density,
        "bitcell": lambda p: p.sram_bitcell,
        "small": lambda p: p.sram_energy_per_byte(64 * KiB),
        "large": lambda p: p.sram_energy_per_byte(1 * MiB),
    }[field]
    values = [get(tech.process(n)) for n in NODES_OLD_TO_NEW]
    assert all(a >= b for a, b in zip(values, values[1:])), values


@pytest.mark.parametrize("fmt", format_names())
@pytest.mark.parametrize("node", NODES_OLD_TO_NEW)
def test_every_precision_format_has_an_energy_and_area(node, fmt):
    p = tech.process(node)
    assert p.energy_per_flop(fmt) > 0
    assert tech.area_model().format_area[tech.format_class(fmt)] > 0


@pytest.mark.parametrize("fmt,cls", [
    ("fp32", "fp32"), ("tf32", "tf32"), ("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16"),
    ("fp8_e4m3", "fp8"), ("fp8_e5m2", "fp8"), ("fp8", "fp8"), ("e5m2", "fp8"), ("mxfp8", "fp8"),
    ("mxfp8_e5m2", "fp8"), ("mxfp6", "fp6"), ("mxfp6_e3m2", "fp6"), ("fp6", "fp6"), ("mxfp4", "fp4"),
    ("nvfp4", "fp4"), ("fp4", "fp4"), ("int8", "int8"), ("int4", "int4"), ("INT8", "int8"),
])
def test_format_class(fmt, cls):
    assert tech.format_class(fmt) == cls


def test_fp8_encodings_cost_the_same_and_fp4_is_cheapest_float():
    p = tech.process("n5")
    assert p.energy_per_flop("fp8_e4m3") == p.energy_per_flop("fp8_e5m2") == p.energy_per_flop("mxfp8")
    e = p.energy_per_flop
    assert e("nvfp4") == e("mxfp4") < e("mxfp6") < e("fp8")


def test_unknown_format_is_a_spec_error():
    with pytest.raises(SpecError, match="unknown number format 'fp5'"):
        tech.process("n5").energy_per_flop("fp5")


# ----------------------------------------------------------------- SRAM read energy


def test_sram_energy_anchors_and_interpolation():
    p = tech.process("n7")
    e = p.sram_read_energy
    assert e.small_size == 64 * KiB and e.large_size == 1 * MiB
    assert p.sram_energy_per_byte(64 * KiB) == pytest.approx(e.small)
    assert p.sram_energy_per_byte(1 * MiB) == pytest.approx(e.large)
    # log-log midpoint (256 KiB) is the geometric mean
    assert p.sram_energy_per_byte(256 * KiB) == pytest.approx(np.sqrt(e.small * e.large))
    # flat outside the anchors; 0 bytes reads as a small array
    assert p.sram_energy_per_byte(0) == pytest.approx(e.small)
    assert p.sram_energy_per_byte(1 * KiB) == pytest.approx(e.small)
    assert p.sram_energy_per_byte(50e6) == pytest.approx(e.large)


def test_sram_energy_is_vectorized_and_monotone():
    p = tech.process("n5")
    sizes = np.geomspace(1 * KiB, 1e9, 50)
    out = p.sram_energy_per_byte(sizes)
    assert isinstance(out, np.ndarray) and out.shape == sizes.shape
    assert np.all(np.diff(out) >= 0)
    assert isinstance(p.sram_energy_per_byte(4096), float)


@pytest.mark.parametrize("alias,canonical", [
    ("n4", "n5"), ("n4p", "n5"), ("N4", "n5"), ("4N", "n5"), ("4np", "n5"), ("TSMC N4", "n5"), ("5nm", "n5"),
    ("n6", "n7"), ("7nm", "n7"), ("n14", "n14"), ("gf14", "n14"), ("8lpp", "n8"), ("n12", "n16"), ("12nm", "n16"), ("n3e", "n3"), ("n3p", "n3"),
    ("n3b", "n3"), ("n2", "n2"), ("n28", "n28"), ("28nm", "n28"), ("n40", "n45"),
])
def test_process_aliases(alias, canonical):
    assert tech.process(alias).name == canonical
    assert tech.process(alias) is tech.process(canonical)


def test_unknown_node_says_did_you_mean():
    with pytest.raises(SpecError) as err:
        tech.process("n55")
    msg = str(err.value)
    assert "unknown process node 'n55'" in msg and "did you mean 'n5'" in msg and "n4p" in msg


def test_unknown_memory_says_did_you_mean():
    with pytest.raises(SpecError, match="did you mean 'hbm3e'"):
        tech.memory("hmb3e")


def test_memory_list_covers_the_chip_spec_kinds():
    from typing import get_args

    from dse.hardware import Dram

    kinds = set(get_args(Dram.model_fields["kind"].annotation))
    assert kinds <= set(tech.memory_names())
    assert {"hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4", "ddr3"} <= set(tech.memory_names())
    assert tech.memory("HBM3E") is tech.memory("hbm3e")


# ----------------------------------------------------------------- memories and packaging


def test_hbm_stack_formulas():
    # seed 004 §4.1.3: R = 1024 r / 8; SK hynix HBM3E 9.6 Gb/s -> ~1229 GB/s; C = layers x per-layer
    m = tech.memory("hbm3e")
    assert m.interface_bandwidth == pytest.approx(1228.8 * GB)
    assert m.stack_capacity == pytest.approx(36 * GB)  # technology.md default: 12-high x 24 Gb
    assert tech.memory("hbm3").interface_bandwidth == pytest.approx(819.2 * GB)  # JESD238
    assert tech.memory("hbm4").interface_bandwidth == pytest.approx(2048 * GB)  # 2048 pins x 8 Gb/s
    assert tech.memory("hbm4").pins == 2048
    assert tech.memory("hbm2e").stack_capacity == pytest.approx(16 * GB)  # A100 80GB: 5 x 16 GB
    assert tech.memory("gddr6").stack_capacity is None


def test_hbm_power_per_stack_is_derived():
    # technology.md 'HBM power per stack': HBM3 ~26 W, HBM3E ~37 W at full use
    assert tech.memory("hbm3").power_at_full_bandwidth == pytest.approx(26, rel=0.05)
    assert tech.memory("hbm3e").power_at_full_bandwidth == pytest.approx(37, rel=0.05)


def test_hbm_records():
    for name in ("hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4"):
        m = tech.memory(name)
        assert m.kind == "hbm" and m.footprint is not None and m.layers <= m.max_layers
    assert tech.memory("hbm3").phy_area == 15
    assert 1.5 * 15 <= tech.memory("hbm4").phy_area <= 2 * 15
    assert tech.memory("hbm3e").energy_per_byte == pytest.approx(3.9 * 8 * pJ)
    assert tech.memory("hbm4").energy_per_byte == pytest.approx(2.5 * 8 * pJ)
    assert tech.memory("hbm3").footprint.area == pytest.approx(121)


def test_packaging():
    pk = tech.packaging()
    assert pk.reticle_area == 858
    assert pk.max_interposer_area() == pytest.approx(3.3 * 858)
    assert pk.interposer().yield_alpha == 6 and pk.die_yield_alpha == 10
    assert (pk.hbm_stacks_per_long_edge, pk.hbm_stacks_per_short_edge) == (3, 2)
    assert pk.wafer_diameter == 300
    with pytest.raises(SpecError, match="did you mean 'cowos_l'"):
        pk.interposer("cowos-l")


# ----------------------------------------------------------------- overrides


def test_override_changes_a_copy_only():
    before = tech.process("n5").wafer_cost
    t2 = tech.overridden({"processes": {"n5": {"wafer_cost": "18000 $"}}})
    assert t2.process("n5").wafer_cost == 18000
    assert t2.process("n4").wafer_cost == 18000  # aliases keep working
    assert t2.process("n5").sources["wafer_cost"] == "override"
    assert tech.process("n5").wafer_cost == before == 16000
    assert tech.default().raw["processes"]["n5"]["wafer_cost"] == "16000 $"
    assert t2.process("n7") == tech.process("n7")


def test_override_by_alias_and_partial_table():
    t2 = tech.overridden({"processes": {"n4": {"flop_energy": {"fp8": "0.05 pJ/FLOP"}}}})
    p, p0 = t2.process("n5"), tech.process("n5")
    assert p.energy_per_flop("fp8_e4m3") == pytest.approx(0.05 * pJ)
    assert p.energy_per_flop("bf16") == p0.energy_per_flop("bf16")
    assert "override of fp8" in p.sources["flop_energy"]
    assert p0.energy_per_flop("fp8") == pytest.approx(0.0875 * pJ)


def test_override_memories_packaging_and_chaining():
    hbm = {"energy_per_byte": "3 pJ/bit", "sources": {"energy_per_byte": "study X"}}
    t2 = tech.overridden({"memories": {"HBM3E": hbm},
                          "packaging": {"reticle_width": "20 mm", "interposers": {"cowos_s": {"max_reticles": 4}}}})
    assert t2.memory("hbm3e").energy_per_byte == pytest.approx(24 * pJ)
    assert t2.memory("hbm3e").sources["energy_per_byte"] == "study X"
    assert t2.packaging.reticle_area == 20 * 33
    assert t2.packaging.interposer().max_reticles == 4
    assert t2.packaging.interposer().yield_alpha == 6
    t3 = t2.overridden({"processes": {"n3": {"clock_energy": "20 pJ/mm^2"}}})
    assert t3.process("n3").clock_energy == pytest.approx(20e-12) and t3.packaging.reticle_area == 660
    assert tech.packaging().reticle_area == 858 and tech.memory("hbm3e").energy_per_byte == pytest.approx(31.2 * pJ)
    assert tech.overridden(None) is tech.default() and tech.overridden({}) is tech.default()


@pytest.mark.parametrize("overrides,match", [
    ({"procesess": {}}, "unknown technology table 'procesess' \\(did you mean 'processes'\\?\\)"),
    ({"processes": {"n55": {"wafer_cost": "1 $"}}}, "unknown process node 'n55' \\(did you mean 'n5'\\?\\)"),
    ({"memories": {"hbm5": {"pins": 4096}}}, "unknown memory technology 'hbm5'"),
    ({"processes": {"n5": {"wafer_cost": "18000"}}}, "processes.n5.wafer_cost: expected a money quantity"),
    ({"processes": {"n5": {"wafer_costs": "18000 $"}}}, "processes.n5.wafer_costs: unknown key"),
    ({"processes": {"n5": {"flop_energy": {"fp5": "1 pJ/FLOP"}}}}, "unknown format class 'fp5'"),
    ({"processes": {"n5": "cheap"}}, "expected a mapping of fields"),
])
def test_bad_overrides(overrides, match):
    with pytest.raises(SpecError, match=match):
        tech.overridden(overrides)


def test_default_is_loaded_once():
    assert tech.default() is tech.default()


# ----------------------------------------------------------------- chip energies


def _chip(**extra):
    d = {
        "name": "test-chip",
        "process": "n4",
        "units": 132,
        "clock": "1.83 GHz",
        "tdp": "700 W",
        "matrix": {"flops_per_cycle": {"bf16": 4096, "fp8": 8192, "nvfp4": 16384}},
        "local_buffer": "228 KiB",
        "l2": "50 MB",
        "hbm": {"generation": "hbm3", "stacks": 5, "pin_rate": "5.24 Gb/s", "capacity_per_stack": "16 GB"},
    }
    d.update(extra)
    return chip_from_dict(d)


def test_chip_energy_from_tables():
    spec = _chip()
    e = tech.chip_energy(spec)
    n5 = tech.process("n5")
    assert set(e) == {"memory", "l2", "local", "link", "flop.bf16", "flop.fp8_e4m3", "flop.nvfp4"}
    assert e["memory"] == tech.memory("hbm3").energy_per_byte
    assert e["l2"] == pytest.approx(n5.sram_read_energy.large)
    assert e["local"] == pytest.approx(n5.sram_energy_per_byte(228 * KiB))
    assert n5.sram_read_energy.small < e["local"] < n5.sram_read_energy.large
    assert e["link"] == pytest.approx(10.4 * pJ)
    assert e["flop.bf16"] == pytest.approx(0.175 * pJ)
    assert e["flop.fp8_e4m3"] == pytest.approx(0.0875 * pJ)
    assert e["flop.nvfp4"] == pytest.approx(0.04375 * pJ)


def test_chip_energy_honors_overrides():
    spec = _chip(energy={"memory": "31.76 pJ/B", "l2": "5 pJ/B", "local": "1 pJ/B",
                         "flop": {"bf16": "0.75 pJ/FLOP", "fp8_e4m3": "0.4 pJ/FLOP"}})
    e = tech.chip_energy(spec)
    assert e["memory"] == pytest.approx(31.76 * pJ)
    assert e["l2"] == pytest.approx(5 * pJ) and e["local"] == pytest.approx(1 * pJ)
    assert e["flop.bf16"] == pytest.approx(0.75 * pJ)
    assert e["flop.fp8_e4m3"] == pytest.approx(0.4 * pJ)
    assert e["flop.nvfp4"] == pytest.approx(0.04375 * pJ)  # not overridden: from the table


def test_chip_energy_override_key_aliases_and_partial():
    spec = _chip(energy={"flop": {"fp8": "0.3 pJ/FLOP"}})
    e = tech.chip_energy(spec)
    assert e["flop.fp8_e4m3"] == pytest.approx(0.3 * pJ)
    assert e["memory"] == tech.memory("hbm3").energy_per_byte


def test_chip_energy_with_overridden_tables():
    t2 = tech.overridden({"memories": {"hbm3": {"energy_per_byte": "2 pJ/bit"}},
                          "processes": {"n5": {"flop_energy": {"bf16": "0.2 pJ/FLOP"}}}})
    e = tech.chip_energy(_chip(), tech=t2)
    assert e["memory"] == pytest.approx(16 * pJ)
    assert e["flop.bf16"] == pytest.approx(0.2 * pJ)
    assert tech.chip_energy(_chip())["memory"] == pytest.approx(31.2 * pJ)


def test_chip_energy_dram_and_sram_chips():
    d = _chip(hbm=None, dram={"kind": "lpddr5x", "bandwidth": "273 GB/s", "capacity": "128 GB"})
    assert tech.chip_energy(d)["memory"] == tech.memory("lpddr5x").energy_per_byte
    s = _chip(hbm=None, process="n14", l2="0 B", sram={"capacity": "230 MB", "bandwidth": "80 TB/s"})
    e = tech.chip_energy(s)
    n16 = tech.process("n16")
    assert e["memory"] == pytest.approx(n16.sram_read_energy.large)
    assert e["l2"] == pytest.approx(n16.sram_read_energy.small)  # no L2: no traffic; small-array figure


def test_numeric_view_uses_the_tables():
    view = Chips.numeric_view(_chip())
    assert view["energy.memory"] == tech.memory("hbm3").energy_per_byte
    assert view["energy.flop.bf16"] == pytest.approx(0.175 * pJ)
    assert np.isnan(view["power.static"])  # leakage comes from the die's area, in the evaluator (dse.model.power)


# ----------------------------------------------------------------- area calibration
#
# The area tables are checked through the area model production runs (dse.model.area.package_area) on
# the catalog chips, whose files carry the physical resources (processes.yaml calibration note 3): GA100
# 128 SMs, 48 MB L2 (the disabled slices in its uncore), 6 HBM2E PHYs; GH100 144 SMs, 60 MB L2, 6 HBM3
# PHYs; GV100 84 SMs. Published: A100 826, H100 814, V100 815 mm^2; TPU v1 <= 331 mm^2 (Jouppi 2017).


def _die_area(name: str, technology=None) -> float:
    from dse.hardware import load_chip
    from dse.model.area import package_area

    return float(package_area(Chips.from_specs([load_chip(name)]), tech=technology).die_area_mm2[0])


def test_die_area_follows_overrides():
    # half the N5 logic density doubles every logic part of H100 (matrix, lanes, control, overhead, the HBM
    # controllers); the SRAM, analog PHY and SerDes parts stay
    from dse.hardware import Chips, load_chip
    from dse.model.area import package_area

    t2 = tech.overridden({"processes": {"n5": {"logic_density": f"{tech.process('n5').logic_density / 2} /mm^2"}}})
    parts = package_area(Chips.from_specs([load_chip("h100-sxm")])).parts
    hbm3 = tech.memory("hbm3")
    controllers = 6 * hbm3.phy_area * hbm3.controller_fraction * tech.process("n7").logic_density / tech.process(
        "n5").logic_density
    logic = parts["matrix"][0] + parts["unit_logic"][0] + parts["uncore"][0] + controllers
    assert _die_area("h100-sxm", t2) == pytest.approx(_die_area("h100-sxm") + logic)
