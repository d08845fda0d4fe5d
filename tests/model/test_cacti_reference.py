"""dse's SRAM area, energy and leakage against CACTI 7.0 (``dse/data/technology/cacti_sram.yaml``).

Source of every reference number here: ``cacti_sram.yaml``, CACTI 7.0's output (hwcomponents-cacti 1.0.40's
sources, rebuilt; ``tools/cacti_sram.py`` wrote the file and documents the runs). CACTI is not needed to run
this test. dse's numbers come from dse's own functions, never re-typed: scratchpad area = the marginal die area
per MiB of local buffer (``package_area`` on TPU v1 moved to the node), cache area = per MiB of physical L2
(``package_area`` on H100 moved to the node), both scaled between nodes by dse itself (``node_scales``:
sram_bitcell(node) / sram_bitcell(N7)); energy per byte = ``ProcessNode.sram_energy_per_byte(size)`` (what
``chip_energy`` gives the l2 and local levels); leakage = ``power.leakage_power`` of that area at the node's
``leakage.sram``. Nodes: dse's n45 against CACTI's 45 nm, dse's n28 against CACTI's 28 nm (CACTI's own
interpolation of its 32 and 22 nm tables). CACTI's 32 and 22 nm have no dse node: they enter the node-free checks
(area per bit in bitcells) and the structural facts. CACTI covers nothing under 22 nm, so N16-N2 go unchecked.

Tolerances (docs/technology.md, "SRAM against CACTI"; observed ratio -> asserted band, dse / CACTI):

* scratchpad area, 64 KiB-32 MiB, n45 and n28: observed 1.23-2.20 -> [1.0, 2.5]. CACTI's area is the array
  alone (cells, decoders, sense amps, H-trees, ECC bits); dse's figure is fitted on die areas, so it also carries
  what sits around macros on a floorplan (power grid, redundancy and BIST, channels between macros). 1.0: dse's
  figure cannot be denser than the bare array; 2.5: SRAM in products takes 1.8-3.0 bitcells of area per data bit
  (technology.md "SRAM in real products": AMD V-Cache, N7, 0.56-0.64 mm^2/MB over 0.027 um^2 cells -> 2.6-3.0;
  the N5/N3 scratchpad default 0.45 mm^2/MiB over 0.25 raw -> 1.8), CACTI's scratchpad arrays 1.5-2.2, so a
  die-level figure up to 3.0 / 1.5 = 2x CACTI's array is what products show, 2.5 with margin. Node-free, in
  bitcells per data bit: [1.0, 2.5] as well.
* cache area, 1-64 MiB: observed 5.3-9.1 -> [1.0, 10]: **dse's cache figure is 5-9x CACTI's cache array with
  its tags.** The fitted L2 coefficient carries what GPU die shots put in the "L2" region (the crossbar, L2
  controllers, compression and atomics) and whatever else of a GPU scales with its L2; CACTI says tags and
  way selection add only 2-30% to a plain array of the same size. The band documents the gap, it does not endorse it.
* read energy per byte, 64 B per access (a cache line; a local buffer feeding a matrix unit reads at least
  that), hp and lstp configurations:
  - at 1 MiB (dse's MB-scale anchor): observed 0.81-2.24 -> [0.5, 2.5];
  - 8 B per access at 45 nm (Horowitz ISSCC 2014's word, where dse's n45 anchors come from), 8 KiB-1 MiB:
    observed 0.94-1.65 -> [0.5, 2.0];
  - 64 KiB: observed 2.6-4.6 -> [1.0, 6.0]: dse prices a wide local-buffer read at the per-word cost (its
    anchors are per-word figures), **2.6-4.6x CACTI's 64 B read**;
  - 16 MiB and above (monolithic and 16-bank): observed 0.16-0.49 -> [0.1, 1.0]: dse keeps MB-scale energy flat
    above 1 MiB ("banked arrays"); CACTI's grows ~ size^0.35-0.55 (the H-tree wire to the far bank), and banking
    does not remove it. **dse is 2-6x under CACTI for 16-64 MiB caches.**
* node step n45 -> n28 of the read energy (hp): CACTI 2.11-2.13x, dse 2.08-2.10x -> within 20%.
* leakage per MiB: dse lies between CACTI's ITRS-LSTP and ITRS-HP figures (observed: 2.5-38x under HP at 360 K,
  108-600x over LSTP), at every size and kind at n45 and n28: a bracket, since real SRAM mixes both flavours.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import yaml

from dse import technology, units
from dse.hardware import Chips, load_chip
from dse.model import power
from dse.model.area import package_area

MiB = 2**20
YAML = Path(__file__).resolve().parents[2] / "dse" / "data" / "technology" / "cacti_sram.yaml"
DSE_NODE = {45: "n45", 28: "n28"}  # CACTI node (nm) -> the dse node of that name


@functools.lru_cache(maxsize=1)
def _runs() -> list[dict]:
    """The CACTI runs of cacti_sram.yaml with their quantities in SI (dse.units)."""
    doc = yaml.safe_load(YAML.read_text())
    dims = {"area": "area", "data_area": "area", "tag_area": "area", "bitcell": "area", "read_energy": "energy",
            "write_energy": "energy", "leakage": "power", "access_time": "time", "cycle_time": "time",
            "area_per_MiB": "area_per_byte", "read_per_byte": "energy_per_byte", "write_per_byte":
            "energy_per_byte", "size": "bytes", "access": "bytes", "node": "length"}
    out = []
    for r in doc["runs"]:
        q = dict(r)
        for k, dim in dims.items():
            if r.get(k) is not None:
                q[k] = units.parse_quantity(r[k], dim)
        q["nm"] = round(q["node"] * 1e6)  # mm -> nm
        out.append(q)
    return out


def runs(**match) -> list[dict]:
    return [r for r in _runs() if all(r[k] == v for k, v in match.items())]


def series(kind: str, config: str, nm: int) -> list[dict]:
    """One main-set series (kind, configuration, node), by size."""
    return sorted(runs(set="main", kind=kind, config=config, nm=nm), key=lambda r: r["size"])


# ------------------------------------------------------------------ dse's side (its own functions)


@functools.lru_cache(maxsize=None)
def dse_area_per_byte(kind: str, node: str) -> float:
    """mm^2 per byte of a scratchpad (kind "ram") or a cache at ``node``: the die-area model's marginal cost."""
    sizes = np.array([1.0, 2.0]) * MiB
    if kind == "ram":  # one local buffer more per unit: TPU v1 (1 unit) with its Unified Buffer resized
        chips = Chips.from_base(load_chip("tpu-v1"), 2, {"local_buffer": sizes})
        a = package_area(chips, process=node)
        return float(np.diff(a.parts["local"])[0] / a.units_physical[0] / MiB)
    chips = Chips.from_base(load_chip("h100-sxm"), 2, {"l2": sizes, "l2_physical": sizes})
    a = package_area(chips, process=node, memory="hbm3")
    return float(np.diff(a.parts["l2"])[0] / MiB)


def dse_read_per_byte(node: str, size: float) -> float:
    return float(technology.process(node).sram_energy_per_byte(size))


def dse_leakage_per_byte(kind: str, node: str) -> float:
    area = dse_area_per_byte(kind, node)
    return float(power.leakage_power(0.0, area, 0.0, technology.process(node).leakage.sram))


def compared(**match):
    """(CACTI run, its dse node) for the runs at a node dse has."""
    return [(r, DSE_NODE[r["nm"]]) for r in runs(**match) if r["nm"] in DSE_NODE]


def _ids(pairs):
    return [r["id"] for r, _ in pairs]


# ------------------------------------------------------------------ the reference file itself


def test_reference_covers_the_sizes_and_nodes_dse_uses():
    main = runs(set="main")
    assert {r["nm"] for r in main} == {45, 32, 28, 22}
    assert {r["config"] for r in main} == {"hp", "lstp"}
    ram = {r["size"] for r in main if r["kind"] == "ram"}
    cache = {r["size"] for r in main if r["kind"] == "cache"}
    assert min(ram) == 64 * 1024 and max(ram) == 32 * MiB
    assert min(cache) <= 4 * MiB and max(cache) == 64 * MiB
    assert len(main) == 2 * 4 * (len(ram) + len(cache))  # every size at every node in both configurations


@pytest.mark.parametrize("r", _runs(), ids=lambda r: r["id"])
def test_derived_figures_are_the_raw_ones(r):
    # cacti_sram.yaml: area_per_MiB = area / data MiB, read_per_byte = read energy per access / access bytes
    assert r["area_per_MiB"] == pytest.approx(r["area"] / r["size"], rel=2e-3)
    assert r["read_per_byte"] == pytest.approx(r["read_energy"] / r["access"], rel=2e-3)
    assert r["write_per_byte"] == pytest.approx(r["write_energy"] / r["access"], rel=2e-3)
    # CACTI's SRAM cell is 146 F^2 at every node (tech_params/*.dat)
    assert r["bitcell"] == pytest.approx(146 * (r["nm"] * 1e-6) ** 2, rel=2e-3)


# ------------------------------------------------------------------ area


@pytest.mark.parametrize("r,node", compared(set="main", kind="ram"), ids=_ids(compared(set="main", kind="ram")))
def test_scratchpad_area_within_the_band(r, node):
    # observed 1.23-2.20 (docs/technology.md); band [1.0, 2.5] justified in the module docstring
    ratio = dse_area_per_byte("ram", node) / r["area_per_MiB"]
    assert 1.0 <= ratio <= 2.5, f"{r['id']}: dse / CACTI = {ratio:.2f}"


@pytest.mark.parametrize("r,node", compared(set="main", kind="cache"), ids=_ids(compared(set="main", kind="cache")))
def test_cache_area_is_several_times_cacti(r, node):
    # observed 5.3-9.1: the known gap (module docstring); dse is never denser than CACTI's array with tags
    ratio = dse_area_per_byte("cache", node) / r["area_per_MiB"]
    assert 1.0 <= ratio <= 10.0, f"{r['id']}: dse / CACTI = {ratio:.2f}"


@pytest.mark.parametrize("kind", ["ram", "cache"])
def test_area_per_bit_in_bitcells(kind):
    # node-free: area per data bit over the node's bitcell (dse: its own sram_bitcell; CACTI: 146 F^2), at every
    # CACTI node (32 and 22 nm included). CACTI: 1.48-2.17 bitcells per bit for a scratchpad, 1.64-2.36 for a
    # cache (ECC, periphery, tags); dse: 2.95 and 13.5
    for node in ("n45", "n28", "n7"):  # dse's figure is node-free by construction (node_scales): check it
        per_bit = dse_area_per_byte(kind, node) / 8 / technology.process(node).sram_bitcell
        assert per_bit == pytest.approx(dse_area_per_byte(kind, "n7") / 8 / technology.process("n7").sram_bitcell)
    dse_cells = dse_area_per_byte(kind, "n7") / 8 / technology.process("n7").sram_bitcell
    cacti = [r["area_per_MiB"] / 8 / r["bitcell"] for r in runs(set="main", kind=kind)]
    assert 1.3 <= min(cacti) and max(cacti) <= 2.4  # CACTI's own overhead, all nodes and sizes
    lo, hi = (1.0, 2.5) if kind == "ram" else (1.0, 10.0)
    assert lo * max(cacti) <= dse_cells <= hi * min(cacti), (dse_cells, min(cacti), max(cacti))


@pytest.mark.parametrize("kind", ["ram", "cache"])
@pytest.mark.parametrize("config", ["hp", "lstp"])
@pytest.mark.parametrize("nm", [45, 32, 28, 22])
def test_area_per_mib_roughly_constant_with_size(kind, config, nm):
    # CACTI: area per MiB varies by at most 1.42x over 64 KiB-32 MiB (1-64 MiB for caches) and grows by <= 6%
    # from the smallest to the largest size; dse prices SRAM linearly in its bytes (the same figure at any size)
    s = series(kind, config, nm)
    per = [r["area_per_MiB"] for r in s]
    assert max(per) / min(per) <= 1.5
    assert per[-1] <= per[0] * 1.1
    if nm in DSE_NODE:
        node = DSE_NODE[nm]
        base = load_chip("tpu-v1") if kind == "ram" else load_chip("h100-sxm")
        field = "local_buffer" if kind == "ram" else "l2"
        sizes = np.array([s[0]["size"], s[0]["size"] * 2, s[-1]["size"], s[-1]["size"] * 2])
        extra = {field: sizes} if kind == "ram" else {"l2": sizes, "l2_physical": sizes}
        part = "local" if kind == "ram" else "l2"
        a = package_area(Chips.from_base(base, 4, extra), process=node,
                         memory=None if kind == "ram" else "hbm3")
        small = (a.parts[part][1] - a.parts[part][0]) / (sizes[1] - sizes[0])
        large = (a.parts[part][3] - a.parts[part][2]) / (sizes[3] - sizes[2])
        assert small == pytest.approx(large)


def test_a_cache_costs_more_area_than_a_scratchpad():
    # CACTI, same node, size and configuration: a 16-way cache is 1.02-1.30x a plain array per MiB (tags, way
    # muxes); dse's cache figure is above its scratchpad figure (the direction; the size of the gap is the
    # documented cache-area discrepancy)
    for c in runs(set="main", kind="cache"):
        same = runs(set="main", kind="ram", config=c["config"], nm=c["nm"], size=c["size"])
        for r in same:
            assert 0.95 <= c["area_per_MiB"] / r["area_per_MiB"] <= 1.45, c["id"]
    for node in DSE_NODE.values():
        assert dse_area_per_byte("cache", node) > dse_area_per_byte("ram", node)


# ------------------------------------------------------------------ energy


@pytest.mark.parametrize("r,node", compared(set="main", size=MiB), ids=_ids(compared(set="main", size=MiB)))
def test_read_energy_at_the_mb_scale_anchor(r, node):
    # dse's "large" anchor is 1 MiB; observed dse / CACTI 0.81-2.24 -> [0.5, 2.5]
    ratio = dse_read_per_byte(node, r["size"]) / r["read_per_byte"]
    assert 0.5 <= ratio <= 2.5, f"{r['id']}: dse / CACTI = {ratio:.2f}"


@pytest.mark.parametrize("r,node", compared(set="narrow"), ids=_ids(compared(set="narrow")))
def test_read_energy_of_word_accesses_at_45nm(r, node):
    # 8 B per access at 8 KiB, 32 KiB and 1 MiB: the access width and sizes of dse's n45 anchors (Horowitz ISSCC
    # 2014, processes.yaml n45); observed 0.94-1.65 -> [0.5, 2.0]
    ratio = dse_read_per_byte(node, r["size"]) / r["read_per_byte"]
    assert 0.5 <= ratio <= 2.0, f"{r['id']}: dse / CACTI = {ratio:.2f}"


SMALL = compared(set="main", kind="ram", size=64 * 1024)


@pytest.mark.parametrize("r,node", SMALL, ids=_ids(SMALL))
def test_small_buffers_read_wide_are_overpriced(r, node):
    # 64 KiB read 64 B at a time: observed 2.6-4.6 (dse prices per-word reads) -> [1.0, 6.0]
    ratio = dse_read_per_byte(node, r["size"]) / r["read_per_byte"]
    assert 1.0 <= ratio <= 6.0, f"{r['id']}: dse / CACTI = {ratio:.2f}"


LARGE = [(r, n) for r, n in compared(access=64) if r["size"] >= 16 * MiB and r["set"] in ("main", "banked")]


@pytest.mark.parametrize("r,node", LARGE, ids=_ids(LARGE))
def test_large_arrays_are_underpriced(r, node):
    # 16-64 MiB, one bank or 16: observed 0.16-0.49 (dse flat above 1 MiB, CACTI grows) -> [0.1, 1.0]
    ratio = dse_read_per_byte(node, r["size"]) / r["read_per_byte"]
    assert 0.1 <= ratio <= 1.0, f"{r['id']}: dse / CACTI = {ratio:.2f}"


@pytest.mark.parametrize("kind", ["ram", "cache"])
@pytest.mark.parametrize("config", ["hp", "lstp"])
@pytest.mark.parametrize("nm", [45, 32, 28, 22])
def test_energy_per_access_grows_with_capacity(kind, config, nm):
    # CACTI: read energy per access rises with every size step (64 B per access, one bank);
    # dse: its energy per byte (so per access of a fixed width) never falls with size, and rises from 64 KiB
    # to 1 MiB, where CACTI's per-access energy rises 5.8-8.4x (45 and 28 nm scratchpads)
    s = series(kind, config, nm)
    e = [r["read_energy"] for r in s]
    assert all(b > a for a, b in zip(e, e[1:])), [r["id"] for r in s]
    if nm in DSE_NODE:
        node = DSE_NODE[nm]
        d = [dse_read_per_byte(node, r["size"]) for r in s]
        assert all(b >= a for a, b in zip(d, d[1:]))
        assert dse_read_per_byte(node, MiB) > 2 * dse_read_per_byte(node, 64 * 1024)


def test_banking_does_not_make_large_reads_cheaper():
    # CACTI, 32 MiB in 16 UCA banks vs one (hp): read energy 0.98-1.34x, the premise of dse's flat rule does not
    # hold in CACTI (documented; dse's large-array figures are checked by test_large_arrays_are_underpriced)
    for b in runs(set="banked"):
        (one,) = runs(set="main", kind=b["kind"], config=b["config"], nm=b["nm"], size=b["size"])
        assert b["read_energy"] >= 0.95 * one["read_energy"], b["id"]


@pytest.mark.parametrize("size", [64 * 1024, MiB])
def test_node_step_of_the_read_energy(size):
    # 45 -> 28 nm (hp, scratchpad): CACTI 2.11-2.13x; dse n45 -> n28 2.08-2.10x: within 20%
    (c45,) = runs(set="main", kind="ram", config="hp", nm=45, size=size)
    (c28,) = runs(set="main", kind="ram", config="hp", nm=28, size=size)
    cacti = c45["read_per_byte"] / c28["read_per_byte"]
    dse_step = dse_read_per_byte("n45", size) / dse_read_per_byte("n28", size)
    assert dse_step == pytest.approx(cacti, rel=0.2)


# ------------------------------------------------------------------ leakage


LEAK = compared(set="main", config="hp")


@pytest.mark.parametrize("r,node", LEAK, ids=_ids(LEAK))
def test_leakage_between_lstp_and_hp(r, node):
    # dse's SRAM leakage per byte (its area x leakage.sram) between CACTI's ITRS-LSTP and ITRS-HP arrays of the
    # same kind, size and node (observed 2.5-38x under HP at 360 K, 108-600x over LSTP)
    (lstp,) = runs(set="main", kind=r["kind"], config="lstp", nm=r["nm"], size=r["size"])
    dse = dse_leakage_per_byte(r["kind"], node)
    assert lstp["leakage"] / lstp["size"] < dse < r["leakage"] / r["size"], r["id"]
