"""Issue 15 items 1 and 4: L2s private to each die (``l2_scope: die``) and a memory-side cache shared by the dies
(``memory_side_cache``: the AMD Infinity Cache of MI300X / MI355X), through the production evaluator.

Numbers come from hand counts in the tests (tensor sizes), from structural equalities that the rule claims (a
package of dies with private L2s reads what one die would for the whole grid; the cache's traffic is what the L2s
miss without it), and from shared/reference/technology.md (SRAM energy per byte).
"""

from __future__ import annotations

import numpy as np
import pytest

import dse
from dse.hardware import load_chip, with_overrides
from dse.solvers.cpsat_tiles import brute_force_tiles, solve_tiles
from dse.solvers.tile_data import as_chips, evaluate_tiles
from dse.workload import gemm

MIB = 2**20


@pytest.fixture(scope="module")
def mi355x():
    return load_chip("mi355x")


@pytest.fixture(scope="module")
def no_msc(mi355x):
    """MI355X without its Infinity Cache: eight XCDs whose 4 MiB L2s serve their own CUs only."""
    return mi355x.model_copy(update={"memory_side_cache": None})


def _one(chip, workload):
    return dse.evaluate_design(chip, workload).row(0)


def test_catalog_describes_the_mi300x_and_mi355x_hierarchy():
    """seed 000 "Memory hierarchy": L2 4 MiB per XCD (eight separate slices), Infinity Cache 256 MiB per OAM shared
    across the eight XCDs; AMD CDNA 3 whitepaper: MI300X the same, 256 MB."""
    for name, cap in (("mi355x", 256 * MIB), ("mi300x", 256e6)):
        s = load_chip(name)
        assert s.dies == 8 and s.l2 in (4 * MIB, 4e6) and s.l2_scope == "die"
        assert s.memory_side_cache is not None and s.memory_side_cache.capacity == cap
    for name in ("h100-sxm", "b200", "rtx-4090"):  # one pool, or each die's L2 in front of its own memory
        assert load_chip(name).l2_scope == "package" and load_chip(name).memory_side_cache is None


def test_the_cache_holds_operands_that_fit(mi355x, no_msc):
    """8192^3 BF16 on MI355X: A and B are 8192 x 8192 x 2 B = 128 MiB each, both within the 256 MiB cache, so
    main memory moves each tensor once: 3 x 128 MiB = 402,653,184 B (hand count). Without the cache the 4 MiB
    L2 of each XCD re-reads them, and those L2 misses are exactly what the cache serves."""
    w = "gemm:m=8192:k=8192:n=8192"
    with_c, without = _one(mi355x, w), _one(no_msc, w)
    assert with_c["bytes_memory"] == 3 * 8192 * 8192 * 2
    assert with_c["bytes_memory"] == with_c["bytes_compulsory"]
    assert without["bytes_memory"] > 4 * with_c["bytes_memory"]
    assert with_c["bytes_msc"] == pytest.approx(without["bytes_memory"], rel=1e-12)
    assert without["bytes_msc"] == 0.0 and without["energy_msc_j"] == 0.0
    assert with_c["time_s"] <= without["time_s"]


def test_private_l2s_read_what_one_die_reads_for_the_whole_grid(no_msc):
    """With l2_scope: die each die runs its blocks of output tiles through its own L2; the dies' blocks tile the grid
    as one die's blocks would, so the package reads from memory what a one-die MI355X (32 CUs, one 4 MiB L2)
    reads for the same GEMM and tiles -- and at least what one shared 32 MiB L2 over all 256 CUs reads."""
    one_die = no_msc.model_copy(update={"dies": 1, "name": "one-xcd"})
    pooled = no_msc.model_copy(update={"l2_scope": "package", "name": "pooled"})
    op = gemm("g", 4096, 12288, 4096)
    rng = np.random.default_rng(7)
    for _ in range(6):
        tm, tn = (int(16 * rng.integers(1, 17)) for _ in range(2))
        per_die = evaluate_tiles(op, as_chips(no_msc), tm, tn, 32, 1)["traffic_bytes"][0]
        alone = evaluate_tiles(op, as_chips(one_die), tm, tn, 32, 1)["traffic_bytes"][0]
        pool = evaluate_tiles(op, as_chips(pooled), tm, tn, 32, 1)["traffic_bytes"][0]
        assert per_die == pytest.approx(alone, rel=1e-12), (tm, tn)
        assert per_die >= pool * (1 - 1e-12) and pool >= (4096 * 4096 * 2 + 4096 * 12288 * 2 * 2), (tm, tn)


def test_l2_scope_is_moot_on_one_die():
    """A die's own L2 is the package's when there is one die: H100 with l2_scope: die is H100."""
    h = load_chip("h100-sxm")
    a = _one(h, "qwen3-8b:prefill:batch=1:tokens=4096")
    b = _one(with_overrides(h, {"l2_scope": "die"}), "qwen3-8b:prefill:batch=1:tokens=4096")
    for key in ("time_s", "bytes_memory", "energy_j"):
        assert a[key] == b[key], key


def test_decode_reads_every_weight_once_through_the_cache(mi355x, no_msc):
    """A batch-1 decode step streams each weight and the KV cache once: main memory moves the compulsory bytes
    with or without the cache (so the step time is the same), and every byte of it passes through the cache."""
    w = "qwen3-8b:decode:batch=1:context=8192"
    with_c, without = _one(mi355x, w), _one(no_msc, w)
    assert with_c["bytes_memory"] == pytest.approx(with_c["bytes_compulsory"], rel=1e-12)
    assert with_c["time_s"] == pytest.approx(without["time_s"], rel=1e-9)
    assert with_c["bytes_msc"] >= with_c["bytes_memory"] * (1 - 1e-12)
    assert with_c["energy_j"] > without["energy_j"]  # the cache's accesses cost energy


def test_the_cache_bandwidth_is_a_resource(mi355x):
    """The cache serves the L2 misses at its own rate: at 1 TB/s the 8192^3 GEMM's 4.56 GB of misses take at least
    4.56 ms (the memory system binds), continuously in the bandwidth, and a very fast cache changes nothing."""
    w = "gemm:m=8192:k=8192:n=8192"
    base = _one(mi355x, w)
    bws = [1e12, 2e12, 4e12, 8e12, 16e12, 1e18]
    rows = [_one(with_overrides(mi355x, {"memory_side_cache.bandwidth": bw}), w) for bw in bws]
    slow = rows[0]
    assert slow["t_memory_s"] >= slow["bytes_msc"] / 1e12 * (1 - 1e-12)
    assert slow["time_s"] >= slow["bytes_msc"] / 1e12 * (1 - 1e-12) and slow["bound"] == "memory"
    times = [r["time_s"] for r in rows]
    assert all(a >= b for a, b in zip(times, times[1:]))  # faster cache, never slower
    assert times[-1] == pytest.approx(base["time_s"], rel=1e-12)  # at 17.2 TB/s the cache does not bind here


def test_cache_energy_per_byte_is_a_large_sram_read(mi355x):
    """The default energy per byte is a read of an SRAM array of the cache's size: shared/reference/technology.md
    gives MB-scale SRAM at 2-3 pJ/B at N7-N4 (est.) and 1.25 pJ/B for Chiplet Cloud's large SRAM."""
    r = _one(mi355x, "gemm:m=8192:k=8192:n=8192")
    per_byte = r["energy_msc_j"] / r["bytes_msc"]
    assert 1.0e-12 <= per_byte <= 3.5e-12


@pytest.mark.parametrize("m, n, k", [(77, 33, 257), (1, 4096, 4096), (4096, 4096, 4096), (3877, 4224, 12288)])
@pytest.mark.parametrize("cache", [True, False])
def test_tiles_beyond_the_tile_model_are_the_evaluators_optimum(mi355x, no_msc, cache, m, n, k):
    """The CP-SAT tile model has neither a memory-side cache nor L2s private to each die: the solver enumerates
    the classes through the evaluator instead, and its answer is the brute force's (and, timed by the
    evaluator, no slower than the default tiles)."""
    chip = mi355x if cache else no_msc
    op = gemm("g", m, n, k)
    c, b = solve_tiles(op, chip), brute_force_tiles(op, chip)
    assert c.status == "OPTIMAL" and c.info["method"] == "enumeration"
    assert c.info["reason"] == ("a memory-side cache" if cache else "L2s private to each die")
    assert (c.time_s, c.traffic_bytes, c.tiles) == (b.time_s, b.traffic_bytes, b.tiles)
    default = dse.evaluate_design(chip, f"gemm:m={m}:k={k}:n={n}")["time_s"][0]
    assert c.time_s <= default * (1 + 1e-12)


def test_the_cache_is_silicon_that_leaks(mi355x):
    """The cache's SRAM (scratchpad density, technology.md "SRAM in real products": AMD V-Cache 0.56-0.64 mm^2/MB
    at N7) sits on MI355X's base dies: it leaks (static power rises with its capacity, continuously), and a cache
    larger than the base dies' footprint (8 x 109.5 mm^2 of XCDs over 62% coverage) grows them, and the cost."""
    from dse.hardware import Chips
    from dse.model.area import package_area
    from dse.model.cost import chip_cost

    caps = np.array([0.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0]) * MIB
    chips = Chips.from_base(mi355x, len(caps), {"memory_side_cache.capacity": caps})
    pa = package_area(chips, process="n3", memory="hbm3e")
    static = dse.evaluate_design(chips, "qwen3-8b:decode:batch=1:context=8192")["static_power_w"]
    assert (np.diff(static) > 0).all()
    per_mib = pa.parts["msc"][1:] * pa.dies[1:] / (caps[1:] / MIB)
    assert np.allclose(per_mib, per_mib[0]) and 0.3 < per_mib[0] < 0.7  # mm^2 per MiB at N3
    footprint = 8 * pa.die_area_mm2[0] / 0.62
    assert pa.base_area_mm2[2] == pytest.approx(footprint)  # the catalog's 256 MiB fits under the XCDs
    assert pa.base_area_mm2[-1] > footprint and pa.base_area_mm2[-1] == pytest.approx(16384 * per_mib[0])
    cost = chip_cost(chips, pa, process="n3", memory="hbm3e").chip_cost_usd
    assert cost[-1] > cost[2] and cost[2] == pytest.approx(cost[0])
    assert (pa.die_area_mm2 == pa.die_area_mm2[0]).all()  # the compute dies do not change
