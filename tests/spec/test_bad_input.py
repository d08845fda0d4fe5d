"""Bad input gets a clear, located error and exit code 2 at the CLI, never a traceback.

Each case writes a chip file with one mistake and checks that the message names
the file, the line and the key, and says what was expected.
"""

from pathlib import Path

import pytest

from dse.cli import main
from dse.errors import SpecError
from dse.hardware import chip_from_dict, load_chip
from dse.spec import load_yaml

GOOD = """\
name: test-chip
units: 100
clock: 1.5 GHz
tdp: 500 W
matrix:
  flops_per_cycle: {bf16: 1024}
hbm:
  generation: hbm3
  stacks: 4
  pin_rate: 6.4 Gb/s
  capacity_per_stack: 16 GB
"""


def _write(tmp_path: Path, text: str | bytes, name="chip.yaml") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def _cli_error(capsys, path) -> str:
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert code == 2, out
    assert "Traceback" not in out.err
    return out.err


def test_good_file_validates(tmp_path, capsys):
    p = _write(tmp_path, GOOD)
    assert main(["validate", str(p)]) == 0
    assert "valid chip" in capsys.readouterr().out


CASES = [
    # (description, edit, expected line, words in the message)
    ("typo'd key", lambda t: t.replace("units: 100", "unitz: 100"), 2, ["unitz", "did you mean 'units'"]),
    ("missing unit", lambda t: t.replace("clock: 1.5 GHz", "clock: 1500000000"), 3, ["clock", "with a unit"]),
    ("wrong dimension", lambda t: t.replace("clock: 1.5 GHz", "clock: 80 GB"), 3, ["clock", "frequency", "80 GB"]),
    ("negative count", lambda t: t.replace("stacks: 4", "stacks: -4"), 9, ["hbm.stacks", "greater than or equal to 1", "-4"]),
    ("unknown format", lambda t: t.replace("bf16: 1024", "bf61: 1024"), 6, ["matrix.flops_per_cycle", "bf61", "did you mean"]),
    ("wrong type", lambda t: t.replace("units: 100", "units: many"), 2, ["units", "integer", "many"]),
    ("nested typo", lambda t: t.replace("stacks: 4", "stakcs: 4"), 9, ["hbm.stakcs", "did you mean 'stacks'"]),
    ("missing required key", lambda t: t.replace("clock: 1.5 GHz\n", ""), 1, ["clock", "missing required key"]),
    ("two main memories", lambda t: t + "dram: {kind: gddr7, bandwidth: 1 TB/s, capacity: 32 GB}\n", 1,
     ["exactly one main memory"]),
    ("unknown HBM generation", lambda t: t.replace("generation: hbm3", "generation: hbm9"), 8,
     ["hbm.generation", "hbm9"]),
    ("negative quantity", lambda t: t.replace("tdp: 500 W", "tdp: -500 W"), 4, ["tdp", "> 0"]),
    ("float where an integer count is needed", lambda t: t.replace("units: 100", "units: 100.5"), 2, ["units", "100.5"]),
]


@pytest.mark.parametrize("desc, edit, line, words", CASES, ids=[c[0] for c in CASES])
def test_bad_chip_file(tmp_path, capsys, desc, edit, line, words):
    p = _write(tmp_path, edit(GOOD))
    err = _cli_error(capsys, p)
    assert f"{p}:{line}:" in err, err
    for w in words:
        assert w in err, (w, err)


def test_malformed_yaml(tmp_path, capsys):
    p = _write(tmp_path, GOOD.replace("units: 100", "units: [100"))
    err = _cli_error(capsys, p)
    assert f"{p}:" in err and "malformed YAML" in err


def test_duplicate_key(tmp_path, capsys):
    p = _write(tmp_path, GOOD + "units: 7\n")
    err = _cli_error(capsys, p)
    assert f"{p}:12:1 units: duplicate key (first written at line 2)" in err


def test_empty_file(tmp_path, capsys):
    p = _write(tmp_path, "")
    err = _cli_error(capsys, p)
    assert f"{p}:1:1" in err and "empty" in err


def test_not_utf8(tmp_path, capsys):
    p = _write(tmp_path, GOOD.encode() + b"title: \xff\xfe\n")
    err = _cli_error(capsys, p)
    assert f"{p}:12" in err and "UTF-8" in err


def test_top_level_list(tmp_path, capsys):
    p = _write(tmp_path, "- 1\n- 2\n")
    err = _cli_error(capsys, p)
    assert f"{p}:1:1" in err and "mapping" in err


def test_missing_file(tmp_path, capsys):
    err = _cli_error(capsys, tmp_path / "nope.yaml")
    assert "nope.yaml: no such file" in err


def test_unknown_chip_did_you_mean(capsys):
    code = main(["show", "h1000-sxm"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown chip 'h1000-sxm'" in err and "did you mean 'h100-sxm'" in err


def test_all_problems_reported_at_once(tmp_path):
    text = GOOD.replace("units: 100", "unitz: 100").replace("tdp: 500 W", "tdp: 500").replace("stacks: 4", "stacks: 0")
    with pytest.raises(SpecError) as e:
        chip_from_dict(load_yaml(_write(tmp_path, text)))
    problems = e.value.problems
    assert len(problems) >= 3, problems
    assert any(":2:" in p and "unitz" in p for p in problems)
    assert any(":4:" in p and "tdp" in p for p in problems)
    assert any(":9:" in p and "hbm.stacks" in p for p in problems)


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["catalog", "--format", "pdf"])
    assert e.value.code == 2


def test_catalog_chip_loads():
    assert load_chip("h100-sxm").units == 132


@pytest.mark.parametrize("body, words", [
    ("return 1.0", ["returned a single number", "one number per design"]),
    ("return ['fast'] * len(metrics['time_s'])", ["values that are not numbers", "'fast'"]),
])
def test_a_study_module_returning_the_wrong_thing_is_one_message(tmp_path, capsys, body, words):
    """issue 21 item 6: a `modules:` objective returning a scalar or strings ended in a ValueError traceback."""
    import shutil

    (tmp_path / "odd.py").write_text("NAME = 'odd'\nUNIT = '1'\nFORMULA = '-'\nSOURCE = 'test'\n"
                                     f"DIRECTION = 'minimize'\nPARAMS = {{}}\ndef objective(metrics):\n    {body}\n")
    study = tmp_path / "s.yaml"
    shutil.copy(Path(__file__).resolve().parents[2] / "studies" / "qwen3-8b-decode-chip.yaml", study)
    study.write_text(study.read_text().replace("die_area]", "odd]") + "modules: [odd.py]\n")
    code = main(["run", str(study), "--trials", "4", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert f"{study}:" in err and "objective 'odd'" in err and str(tmp_path / "odd.py") in err, err
    for w in words:
        assert w in err, (w, err)
