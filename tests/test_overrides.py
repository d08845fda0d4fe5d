"""One chip-override rule set (issue 13 item 3): a design evaluates alike however it was made.

The three ways a changed chip is built, each the product's own path:

* chip file: ``with_overrides`` -> ``chip_yaml`` written to disk -> ``load_chip`` -> ``Chips.from_specs``
  (what-if proposals, study bases and categorical values use ``with_overrides`` too);
* study point: ``Chips.from_base(base, n, {dotted: array})`` (dse.study.problem, dse.solvers.cpsat_split);
* what-if proposal: ``dse.whatif.quick_spec`` (``dse whatif --base --set``) -> ``design_chips``, the design
  point ``run_whatif`` evaluates.

The rule set lives in dse.hardware (``override_rules``: RESETS and KEEPS; ``derive``: every derived
figure). Expected values are the other path's value, the technology tables' own functions, or a
chip that states the rule's outcome explicitly; no formula is re-typed here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse import technology, workload as W
from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.hardware import (
    Chips,
    catalog,
    chip_yaml,
    load_chip,
    override_rules,
    with_overrides,
    yaml_value,
)
from dse.spec.study import load_study
from dse.study import run_study
from dse.study.problem import group_workloads
from dse.whatif import design_chips, quick_spec, run_whatif
from dse.workload import build, parse_workload

DECODE = "qwen3-8b:decode:batch=8:context=8192"
WL = build(parse_workload(DECODE))
STUDIES = Path(__file__).resolve().parents[1] / "studies"
DEFAULT_STUDY = STUDIES / "qwen3-8b-decode-chip.yaml"
KiB = 1024.0


# ------------------------------------------------------------------ the three paths


def as_chip_file(base, overrides: dict, folder: Path) -> Chips:
    """(i) the design as a chip file: with_overrides, written as YAML, read back."""
    spec = with_overrides(base, overrides)
    path = folder / f"{spec.name}.yaml"
    path.write_text(chip_yaml(spec))
    return Chips.from_specs([load_chip(path)])


def as_study_point(base, overrides: dict) -> Chips:
    """(ii) the design as a study's design point (numeric parameters as arrays)."""
    return Chips.from_base(base, 1, {k: np.array([float(v)]) for k, v in overrides.items()})


def as_whatif_proposal(base_name: str, overrides: dict) -> Chips:
    """(iii) the design as `dse whatif --base NAME --set KEY=VALUE ...`."""
    sets = [f"{k}={yaml_value(k, v)}" for k, v in overrides.items()]
    spec = quick_spec(base_name, sets, [DECODE])
    (proposal,) = spec.proposals
    return design_chips(proposal)


def assert_same_metrics(a, b, rtol=1e-12):
    assert set(a) == set(b)
    for k in a:
        x, y = np.asarray(a[k], dtype=float), np.asarray(b[k], dtype=float)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=0, equal_nan=True, err_msg=k)


def metrics(chips: Chips):
    return evaluate_design(chips, WL)


# ------------------------------------------------------------------ reproducer 1: stack sites


def test_h100_with_four_stacks_has_four_stack_sites_on_every_path():
    """Before: the what-if path gave 814.3 mm^2 with 6 PHY sites (the H100's), the study path 784.3 with 4.

    The rule: a design that asks for n stacks has n stack sites unless it says otherwise; so the
    what-if and the study point are the chip file that says ``stack_sites: 4`` explicitly.
    """
    h100 = load_chip("h100-sxm")
    whatif = metrics(as_whatif_proposal("h100-sxm", {"hbm.stacks": 4}))
    study = metrics(as_study_point(h100, {"hbm.stacks": 4}))
    explicit = metrics(Chips.from_specs([with_overrides(h100, {"hbm.stacks": 4, "hbm.stack_sites": 4})]))
    assert whatif["hbm_stacks"][0] == study["hbm_stacks"][0] == 4
    assert_same_metrics(whatif, study)
    assert_same_metrics(whatif, explicit)
    # ... and fewer PHYs than the catalog H100 (5 stacks on 6 sites) carries
    assert whatif["die_area_mm2"][0] < metrics(Chips.from_specs([h100]))["die_area_mm2"][0]


def test_stack_sites_given_with_the_stacks_win():
    h100 = load_chip("h100-sxm")
    over = {"hbm.stacks": 4, "hbm.stack_sites": 6}
    study, file = metrics(as_study_point(h100, over)), metrics(Chips.from_specs([with_overrides(h100, over)]))
    assert study["hbm_stacks"][0] == file["hbm_stacks"][0] == 6
    assert_same_metrics(study, file)


def test_one_side_of_the_register_tile_on_a_chip_without_one():
    """A study varying `matrix.register_tile.m` alone on a base chip without a register tile was refused at load
    ("matrix.register_tile.m cannot be 16 on twodie: missing required key 'n'"), while the derivation (dse.hardware
    derive) and the schema take a side left out as the instruction's. Every path takes it now, alike; the other
    side is the M2 Max file's instruction n (8: Metal's simdgroup_matrix 8 x 8)."""
    m2 = load_chip("apple-m2-max")
    assert m2.matrix.register_tile is None
    over = {"matrix.register_tile.m": 32}
    file = Chips.from_specs([with_overrides(m2, over)])
    assert file["matrix.register_tile.m"][0] == 32
    assert file["matrix.register_tile.n"][0] == m2.matrix.instruction.n == 8
    study, whatif = metrics(as_study_point(m2, over)), metrics(as_whatif_proposal("apple-m2-max", over))
    assert_same_metrics(study, metrics(file))
    assert_same_metrics(whatif, study)


# ------------------------------------------------------------------ reproducer 2: SRAM energies follow sizes


def test_sram_energies_follow_the_sizes_on_every_path():
    """Before: from_base kept the H100's energy per byte of its 50 MB L2 and 228 KiB buffer for any size.

    (Sizes between the node's small and large anchors, where the energy per byte depends on the size.)
    """
    h100 = load_chip("h100-sxm")
    over = {"l2": 512 * KiB, "local_buffer": 128 * KiB}
    node = technology.process(h100.process)
    assert node.sram_energy_per_byte(128 * KiB) < Chips.from_specs([h100])["energy.local"][0]
    for chips in (as_study_point(h100, over), as_chip_file(h100, over, Path(tempfile.mkdtemp()))):
        assert chips["energy.l2"][0] == pytest.approx(node.sram_energy_per_byte(512 * KiB), rel=1e-12, abs=0)
        assert chips["energy.local"][0] == pytest.approx(node.sram_energy_per_byte(128 * KiB), rel=1e-12, abs=0)
    assert_same_metrics(metrics(as_study_point(h100, over)), metrics(as_whatif_proposal("h100-sxm", over)))


def test_an_energy_the_chip_gives_wins_over_the_size():
    """A chip's own energy.l2 (a measured or published figure) stays when a design changes its L2 size."""
    own = with_overrides(load_chip("h100-sxm"), {"energy.l2": "3 pJ/B"})
    study = as_study_point(own, {"l2": 8e6})
    file = Chips.from_specs([with_overrides(own, {"l2": 8e6})])
    assert study["energy.l2"][0] == file["energy.l2"][0] == pytest.approx(3e-12, rel=1e-12, abs=0)
    assert_same_metrics(metrics(study), metrics(file))


def test_default_front_reevaluated_as_chip_files_is_unchanged(tmp_path):
    """Before: 53 of the 135 designs of the default study's front were dominated once rebuilt as chip files."""
    table = run_study(DEFAULT_STUDY, trials=200, out=tmp_path, write=False)
    spec = load_study(DEFAULT_STUDY)
    front = table[table.pareto_rank == 0]
    assert len(front) > 5
    counts = {"units", "hbm.stacks"}
    for _, row in front.iterrows():
        over = {c[2:]: (int(row[c]) if c[2:] in counts else float(row[c])) for c in table.columns
                if c.startswith("p.")}
        m = evaluate_design(Chips.from_specs([with_overrides(spec.base, over)]), group_workloads(spec, {}))
        for t in spec.objectives:
            assert float(t(m)[0]) == pytest.approx(row[f"obj.{t.name}"], rel=1e-12, abs=0), (t.name, over)


# ------------------------------------------------------------------ the other rules, on both paths


def test_a_new_tdp_keeps_the_static_power():
    """Leakage belongs to the silicon: a what-if TDP of 1000 W keeps the H100's static power."""
    h100 = load_chip("h100-sxm")
    before = metrics(Chips.from_specs([h100]))["static_power_w"][0]
    file = Chips.from_specs([with_overrides(h100, {"tdp": 1000.0})])
    study = as_study_point(h100, {"tdp": 1000.0})
    assert metrics(file)["static_power_w"][0] == metrics(study)["static_power_w"][0] == before
    assert_same_metrics(metrics(file), metrics(study))


def test_a_new_clock_keeps_the_rated_clock():
    """Another clock is the same silicon at another operating point: the rated clock (at V_nom) stays the base's."""
    h100 = load_chip("h100-sxm")
    file = Chips.from_specs([with_overrides(h100, {"clock": "2.2 GHz"})])
    study = as_study_point(h100, {"clock": 2.2e9})
    assert file["power.rated_clock"][0] == study["power.rated_clock"][0] == h100.clock
    assert_same_metrics(metrics(file), metrics(study))


def test_other_stacks_drop_the_enabled_capacity():
    """H200 enables 141 of its 6 x 24 GB; 8 stacks have no such figure: raw capacity, as ChipSpec says."""
    h200 = load_chip("h200-sxm")
    spec = with_overrides(h200, {"hbm.stacks": 8})
    assert spec.hbm.capacity is None
    study = as_study_point(h200, {"hbm.stacks": 8})
    assert study["memory.capacity"][0] == Chips.from_specs([spec])["memory.capacity"][0] == spec.memory_capacity
    assert spec.memory_capacity > h200.memory_capacity
    # another pin rate is the same stacks: the enabled capacity stays
    assert as_study_point(h200, {"hbm.pin_rate": 1e9})["memory.capacity"][0] == h200.memory_capacity


def test_other_units_drop_the_physical_units():
    h100 = load_chip("h100-sxm")
    spec = with_overrides(h100, {"units": 100})
    assert spec.units_physical is None
    study = as_study_point(h100, {"units": 100})
    assert "units_physical" not in study
    assert_same_metrics(metrics(study), metrics(Chips.from_specs([spec])))


def test_rules_never_touch_a_name_given_in_the_same_change():
    reset, keep = override_rules({"units", "units_physical", "hbm.stacks", "tdp", "power.static"})
    assert not (reset | keep) & {"units", "units_physical", "hbm.stacks", "tdp", "power.static"}
    assert reset == {"hbm.stack_sites", "hbm.capacity"} and keep == set()
    reset, keep = override_rules({"clock", "power.rated_clock"})
    assert reset == set() and keep == set()


def test_a_derived_figure_given_to_a_study_point_wins():
    h100 = load_chip("h100-sxm")
    chips = Chips.from_base(h100, 2, {"memory.bandwidth": np.array([1e12, 2e12]), "hbm.stacks": np.array([4, 6])})
    np.testing.assert_array_equal(chips["memory.bandwidth"], [1e12, 2e12])


def test_unknown_study_parameter_is_refused():
    with pytest.raises(SpecError, match="hbm.stackz"):
        Chips.from_base(load_chip("h100-sxm"), 1, {"hbm.stackz": np.array([4.0])})


# ------------------------------------------------------------------ the derivation


def test_every_catalog_chip_round_trips_through_its_chip_file(tmp_path):
    for spec in catalog():
        path = tmp_path / f"{spec.name}.yaml"
        path.write_text(chip_yaml(spec))
        back = load_chip(path)
        assert back == spec, spec.name


def test_derivation_is_per_point():
    """A mixed batch of catalog chips derives each row as that chip alone (no cross-row leaks)."""
    specs = catalog()
    joint = Chips.from_specs(specs)
    for i, s in enumerate(specs):
        alone = Chips.from_specs([s])
        for k, v in alone.arrays.items():
            assert joint[k][i] == pytest.approx(v[0], rel=1e-15, abs=0, nan_ok=True), (s.name, k)


@pytest.mark.parametrize("name", ["h100", "mi355x", "tpu-v1", "cerebras-wse-3"])
def test_a_figure_no_point_changes_is_held_once(name):
    """Chips.from_base holds a figure that nothing a point changes derives from as one value laid over the points
    (stride 0, read-only: dse.hardware.chips.same_at_every_point), and derives every figure as each point alone
    would: N points give, to the bit, the arrays of N one-point Chips."""
    from dse.hardware.chips import over_points, same_at_every_point
    base, n = load_chip(name), 40
    rng = np.random.default_rng(7)
    over = {"units": rng.integers(1, 300, n).astype(float), "clock": rng.uniform(0.5e9, 2.5e9, n),
            "l2": rng.choice([0.0, 4e6, 5e7], n)}
    chips = Chips.from_base(base, n, over)
    for i in range(0, n, 7):
        alone = Chips.from_base(base, 1, {k: v[i:i + 1] for k, v in over.items()})
        assert set(alone.arrays) == set(chips.arrays)
        for k, v in alone.arrays.items():
            a, b = chips[k][i], v[0]
            assert a == b or (np.isnan(a) and np.isnan(b)), (name, k, i)
    shared = [k for k, v in chips.arrays.items() if same_at_every_point(v)]
    varying = set(chips.arrays) - set(shared)
    # the overridden inputs and what derives from them vary; the node's and the memory's figures do not, nor a
    # figure the chip gives where its derivation would vary (the L2's bytes per cycle, units x the rule's; the
    # rated clock, the clock)
    assert {"units", "clock", "l2", "energy.l2"} <= varying, varying
    assert {"tech.v_min", "energy.local", "memory.capacity", "dies"} <= set(shared)
    for k in ("l2_bytes_per_cycle", "power.rated_clock"):
        given = chips.inputs is not None and k in chips.inputs and not np.isnan(chips.inputs[k][0])
        assert (k in shared) == given, (k, given)
    assert len(shared) > len(varying)
    for k in shared:
        assert chips[k].strides == (0,) and not chips[k].flags.writeable
        with pytest.raises(ValueError):
            chips[k][0] = 1.0
    missing = chips.get("no.such.figure", 2.5)
    assert missing.shape == (n,) and (missing == 2.5).all() and same_at_every_point(missing)
    assert chips.compact("tech.v_min").shape == (1,) and chips.compact("units").shape == (n,)
    assert over_points(3.0, 4).tolist() == [3.0] * 4 and over_points(np.arange(4.0), 4).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        over_points(np.arange(3.0), 4)



def test_taking_points_keeps_their_figures_their_names_and_what_they_share():
    """Chips.take gives the points at the indices (repeats too) with their own figures and names ("point<i>": i the
    point's number in the points it was first taken from, through a second take), and a figure every point shares
    stays one read-only value over them (stride 0), as from_base holds it."""
    base, n = load_chip("h100-sxm"), 6
    chips = Chips.from_base(base, n, {"units": np.arange(10.0, 16.0), "clock": np.linspace(1e9, 2e9, n)})
    t = chips.take([4, 1, 1, 5])
    assert t.n == 4 and t.names == ["point4", "point1", "point1", "point5"]
    assert t["units"].tolist() == [14.0, 11.0, 11.0, 15.0]
    assert t["clock"].tolist() == chips["clock"][[4, 1, 1, 5]].tolist()
    assert t.take([3, 0]).names == ["point5", "point4"] and t.take(2).names == ["point1"]
    assert t.inputs["units"].tolist() == [14.0, 11.0, 11.0, 15.0]
    for k in ("tech.v_min", "memory.capacity", "dies"):
        assert t[k].shape == (4,) and t[k].strides == (0,) and not t[k].flags.writeable, k
        assert (t[k] == chips[k][0]).all(), k
    one = Chips.from_base(base, 1, {"units": np.array([20.0])})
    many = one.take(np.zeros(3, dtype=np.int64))  # (one point taken three times: its figures over three points)
    assert many.names == ["point0"] * 3 and many["units"].tolist() == [20.0] * 3 and many["dies"].shape == (3,)
    specs = Chips.from_specs([load_chip("h100-sxm"), load_chip("mi355x")])
    assert specs.take([1, 0]).names == [specs.names[1], specs.names[0]]


def test_name_sequence_is_the_names_made_when_read():
    """Chips.name_sequence (what evaluate_design's DesignMetrics.chip_names holds) reads as Chips.names: the same
    length, items (negative indices and slices too) and order, for points numbered 0 .. n - 1, taken points and
    named specs; an index past the end is an IndexError, as a list's; the points' own names are not made by it."""
    base = load_chip("h100-sxm")
    chips = Chips.from_base(base, 5, {"units": np.arange(10.0, 15.0)})
    seq = chips.name_sequence()
    assert chips._names is None and len(seq) == 5  # (nothing made yet)
    taken = chips.take([4, 1, 1])
    specs = Chips.from_specs([load_chip("h100-sxm"), load_chip("mi355x")])
    for c in (chips, taken, specs):
        seq, names = c.name_sequence(), list(c.names)
        assert len(seq) == len(names) and list(seq) == names and tuple(seq) == tuple(names)
        assert [seq[i] for i in range(-len(names), len(names))] == names + names
        assert list(seq[1:]) == names[1:] and list(seq[::-1]) == names[::-1]
        with pytest.raises(IndexError):
            seq[len(names)]
    assert list(taken.name_sequence()) == ["point4", "point1", "point1"]
    metrics = evaluate_design(chips, W.decode("qwen3-8b", batch=1, context=1024))
    assert metrics.n == 5 and list(metrics.chip_names) == [f"point{i}" for i in range(5)]
    assert metrics.frame()["chip"].tolist() == [f"point{i}" for i in range(5)]


def test_scalar_tables_agree_with_the_derivation():
    """dse.technology.chip_energy (the scalar look-up) and ChipSpec's figures give what Chips derive."""
    for s in catalog():
        a = Chips.from_specs([s])
        e = technology.chip_energy(s)
        for level in ("memory", "l2", "local"):
            assert a[f"energy.{level}"][0] == pytest.approx(e[level], rel=1e-12, abs=0), (s.name, level)
        assert a["memory.bandwidth"][0] == pytest.approx(s.memory_bandwidth, rel=1e-15, abs=0), s.name
        assert a["memory.capacity"][0] == pytest.approx(s.memory_capacity, rel=1e-15, abs=0), s.name


def test_whatif_run_evaluates_the_design_point_it_names():
    spec = quick_spec("h100-sxm", ["l2=8 MB", "hbm.stacks=4"], [DECODE])
    res = run_whatif(spec)
    (proposal,) = spec.proposals
    m = evaluate_design(design_chips(proposal), spec.workloads[0])
    assert res.value(proposal.name, "die_area_mm2") == pytest.approx(float(m["die_area_mm2"][0]), rel=1e-15, abs=0)
    assert res.value(proposal.name, "energy_per_token_j") == pytest.approx(float(m["energy_per_token_j"][0]),
                                                                           rel=1e-15, abs=0)


# ------------------------------------------------------------------ property: the three paths agree

#: parameter -> strategy of values (SI floats; counts as ints)
PARAMS = {
    "units": st.integers(8, 256),
    "clock": st.floats(0.8e9, 2.5e9),
    "local_buffer": st.floats(16 * KiB, 1024 * KiB),
    "l2": st.floats(1e6, 2e8),
    "hbm.stacks": st.integers(1, 8),
    "hbm.pin_rate": st.floats(0.5e9, 1.2e9),
    "hbm.layers": st.integers(4, 16),
    "hbm.capacity_per_stack": st.floats(8e9, 48e9),
    "dram.bandwidth": st.floats(2e11, 2e12),
    "dram.capacity": st.floats(8e9, 96e9),
    "tdp": st.floats(150.0, 1500.0),
    "vector.flops_per_cycle": st.floats(64.0, 1024.0),
    "matrix.flops_per_cycle.bf16": st.floats(512.0, 16384.0),
    "dies": st.integers(1, 4),
}
BASES = ("h100-sxm", "h200-sxm", "b200", "mi300x", "rtx-4090")


#: categorical parameters (a study applies them to its base chip with with_overrides, dse.study.problem._variant)
CHOICES = {
    "process": st.sampled_from(["n3", "n5", "n7"]),
    "hbm.generation": st.sampled_from(["hbm3", "hbm3e", "hbm4"]),
}


@st.composite
def designs(draw):
    name = draw(st.sampled_from(BASES))
    base = load_chip(name)
    view = Chips.inputs_view(base)
    applicable = [k for k in PARAMS if k in view]
    keys = draw(st.lists(st.sampled_from(applicable), min_size=1, max_size=6, unique=True))
    choices = [k for k in CHOICES if k != "hbm.generation" or base.hbm is not None]
    cats = draw(st.lists(st.sampled_from(choices), max_size=2, unique=True))
    return name, {k: draw(CHOICES[k]) for k in cats}, {k: draw(PARAMS[k]) for k in keys}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs())
def test_chip_file_study_point_and_whatif_give_identical_metrics(design):
    name, cats, over = design
    base = load_chip(name)
    with tempfile.TemporaryDirectory() as d:
        file = metrics(as_chip_file(base, {**cats, **over}, Path(d)))
    study = metrics(as_study_point(with_overrides(base, cats) if cats else base, over))
    whatif = metrics(as_whatif_proposal(name, {**cats, **over}))
    assert_same_metrics(file, study)
    assert_same_metrics(whatif, study)
