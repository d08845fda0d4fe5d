"""The file-format reference (issue 19 item 3): `dse schema` and docs/schema.md, generated from the code.

The names checked here come from the registries themselves (dse.precision.FORMATS, the objectives/ and
constraints/ modules, the study and what-if key tuples): the reference must name every one of them, with
each parameter's default as the module declares it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from dse import precision, registry
from dse.cli import main
from dse.errors import SpecError
from dse.spec.schema import SECTIONS, reference
from dse.units import parse_quantity

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "schema.md"


@pytest.fixture(scope="module")
def text() -> str:
    return reference()


def test_the_committed_page_is_what_the_generator_writes_now(text):
    """docs/schema.md cannot go stale: regenerate it with `dse schema > docs/schema.md`."""
    assert DOC.read_text() == text, "docs/schema.md is stale: run `dse schema > docs/schema.md`"


def test_dse_schema_prints_the_page_and_its_sections(capsys, text):
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == text
    for section in SECTIONS:
        assert main(["schema", section]) == 0
        out = capsys.readouterr().out
        assert out == reference(section) and out in text
    assert main(["schema", "formats"]) == 0
    out = capsys.readouterr().out
    assert "`nvfp4`" in out and "## Chip files" not in out


def test_an_unknown_section_is_refused_with_the_known_ones(capsys):
    with pytest.raises(SystemExit) as e:
        main(["schema", "studies"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'studies'" in err and "study" in err and "Traceback" not in err
    with pytest.raises(SpecError, match="did you mean 'study'"):
        reference("studie")


def test_every_format_and_alias_is_named(text):
    formats = reference("formats")
    for name, fmt in precision.FORMATS.items():
        row = next((line for line in formats.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, name
        assert f"| {fmt.bits_per_value:g} |" in row  # bits per value, scales included (dse.precision)
    for alias, canonical in precision.ALIASES.items():
        assert f"`{alias}` = `{canonical}`" in formats
    # issue 19: 'fp4' is refused (ambiguous); the reference says which names to use instead
    with pytest.raises(SpecError):
        precision.get_format("fp4")
    assert "There is no `fp4`" in formats and "`mxfp4`" in formats and "`nvfp4`" in formats


def _row(section: str, name: str) -> str:
    rows = [line for line in section.splitlines() if line.startswith(f"| `{name}` |")]
    assert len(rows) == 1, (name, rows)
    return rows[0]


@pytest.mark.parametrize("kind", ["objective", "constraint"])
def test_every_objective_and_constraint_with_its_parameters_and_defaults(kind, text):
    study = reference("study")
    names = registry.objective_names() if kind == "objective" else registry.constraint_names()
    get = registry.get_objective if kind == "objective" else registry.get_constraint
    assert names
    for name in names:
        mod = get(name)
        row = _row(study, name)
        assert mod.UNIT in row and mod.FORMULA in row
        if kind == "objective":
            assert f"| {mod.DIRECTION} |" in row
        if not mod.PARAMS:
            assert "| none |" in row
        for pname, (dim, default) in mod.PARAMS.items():
            m = re.search(rf"`{pname}` \(([^;]+); ([^)]+)\)", row)
            assert m is not None, (name, pname, row)
            assert m.group(1) == dim.replace("_", " ")
            said = m.group(2)
            if default is None:
                assert said == "required"
            elif default == registry.AUTO:
                assert said.startswith("default computed")
            else:  # the default as written parses back to the module's PARAMS default
                assert said.startswith("default ")
                assert math.isclose(parse_quantity(said[len("default "):], dim), default, rel_tol=1e-9), (name, said)


def test_every_study_and_whatif_key(text):
    from dse import whatif
    from dse.spec.study import METHODS, SOLVER_KEYS, TOP_KEYS, WORKLOAD_PARAMS

    study = reference("study")
    for key in TOP_KEYS + SOLVER_KEYS:
        assert f"| `{key}` |" in study, key
    for m in METHODS:
        assert f"- `{m}`:" in study
    for p in WORKLOAD_PARAMS:
        assert f"`workload.{p}`" in study
    w = reference("whatif")
    for key in whatif.TOP_KEYS:
        assert f"| `{key}` |" in w, key
    for key in whatif.PROPOSAL_KEYS:
        assert f"- `{key}`:" in w, key
    for key in (*whatif.EVALUATION_OPTIONS, *whatif.ATTENTION_KEYS):
        assert f"| `{key}` |" in w, key
    for c in whatif.DEFAULT_CONSTRAINTS:
        assert f"`{c}`" in w


def test_every_chip_parameter_and_default(text):
    from dse.hardware import ChipSpec, parameter_names

    chip = reference("chip")
    for p in parameter_names():
        if not p.startswith("matrix.flops_per_cycle."):
            assert f"`{p}`" in chip, p
    # a default written with its unit (MemorySystem: 128-byte transactions; a workload's 2 GiB workspace)
    assert "| `transaction` | bytes quantity > 0 | 128 B |" in chip
    assert "| `workspace` | bytes quantity >= 0 | 2 GiB |" in reference("workload")
    # every field of the chip record is in its table
    top = chip.split("#### the top level (ChipSpec)")[1].split("####")[0]
    for name in ChipSpec.model_fields:
        assert f"| `{name}` |" in top


def test_a_key_without_a_description_is_refused(monkeypatch):
    """A study key added to the code but not to the reference makes the generator fail (the page stays complete)."""
    from dse.spec import study

    monkeypatch.setattr(study, "TOP_KEYS", study.TOP_KEYS + ("new_key",))
    with pytest.raises(SpecError, match="no description of the study key"):
        reference("study")


def _overview_row(kind: str, name: str) -> str:
    """The README's row of one constraint or objective, from what the registry holds (its module's FORMULA,
    UNIT, SOURCE and, for an objective, DIRECTION)."""
    mod = registry.get_constraint(name) if kind == "constraint" else registry.get_objective(name)
    label = "constraint" if kind == "constraint" else f"objective ({mod.DIRECTION})"
    formula = f"`{mod.FORMULA}`" + (" (<= 0 feasible)" if kind == "constraint" else "")
    cells = (label, f"`{name}`", formula, mod.UNIT, mod.SOURCE)
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def test_the_readmes_table_of_constraints_and_objectives_is_the_registrys():
    """The README's overview table ("## Constraints and objectives") lists every registered constraint and
    objective, each as its module describes it, and nothing else: it had kept `latency_per_token` as the step
    time over the batch after the module was changed to the time a user waits, and missed six names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Constraints and objectives\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| constraint |")
            or line.startswith("| objective (")]
    expected = [_overview_row("constraint", n) for n in registry.constraint_names()] + \
        [_overview_row("objective", n) for n in registry.objective_names()]
    missing = [r for r in expected if r not in rows]
    extra = [r for r in rows if r not in expected]
    assert not missing and not extra, ("README rows to add:\n" + "\n".join(missing) + "\nREADME rows to remove:\n"
                                       + "\n".join(extra))
    assert rows == expected, "the README's rows are out of the registry's order"
