"""Command-line flags a user can get wrong (issue 19 item 7, issue 21 item 3): refused, not ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dse import __version__
from dse.cli import main
from dse.errors import SpecError
from dse.study import run_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"dse {__version__}"


@pytest.mark.parametrize("flag, value", [("--trials", "0"), ("--workers", "0"), ("--workers", "-1"),
                                         ("--trials", "x")])
def test_non_positive_budgets_are_refused(flag, value, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["run", str(STUDIES / "clock-voltage-energy.yaml"), flag, value, "--out", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: expected an integer >= 1" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("kw", [{"trials": 0}, {"workers": 0}, {"trials": -5}])
def test_run_study_refuses_them_too(kw, tmp_path):
    with pytest.raises(SpecError, match="must be an integer >= 1"):
        run_study(STUDIES / "clock-voltage-energy.yaml", out=tmp_path, write=False, **kw)


def _rerun(tmp_path, capsys, first: int, second: int) -> str:
    """The default study run twice into one folder with the two budgets: the second run's stderr."""
    study = tmp_path / "s.yaml"
    shutil.copy(STUDIES / "qwen3-8b-decode-chip.yaml", study)
    out = tmp_path / "out"
    assert main(["run", str(study), "--trials", str(first), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", str(study), "--trials", str(second), "--out", str(out), "--quiet"]) == 0
    return capsys.readouterr().err


def test_a_rerun_says_it_resumes(tmp_path, capsys):
    """issue 19 item 5: a rerun on the same folder resumed without saying so."""
    err = _rerun(tmp_path, capsys, 20, 30)
    assert "resuming the study stored in" in err and "study.journal" in err


@pytest.mark.parametrize("setting, unit", [("clock=2.0", "frequency"), ("l2=50.0", "bytes"),
                                           ("hbm.pin_rate=5.0", "bandwidth"), ("tdp=700", "power")])
def test_a_bare_number_for_a_quantity_is_refused_in_set(setting, unit, capsys):
    """issue 21 item 3: `--set clock=2.0` was read as 2 Hz (1.46e5 s per token), `l2=50.0` as 50 bytes."""
    code = main(["whatif", "--base", "h100-sxm", "--set", setting, "--workload", "qwen3-8b:decode:batch=1:context=1024"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"expected a {unit} quantity with a unit" in err and "bare number" in err and "Traceback" not in err


def test_a_bare_number_in_study_overrides_is_refused_at_its_line(tmp_path):
    import yaml as _yaml

    from dse.spec.study import load_study

    data = _yaml.safe_load((STUDIES / "clock-voltage-energy.yaml").read_text())
    data["overrides"] = {"tdp": 700.0, "hbm.stacks": 4}
    data["output"] = str(tmp_path / "out")
    f = tmp_path / "s.yaml"
    f.write_text(_yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError) as e:
        load_study(f)
    (msg,) = [m for m in e.value.problems if "tdp" in m]
    assert msg.startswith(f"{f}:") and "overrides.tdp" in msg and "bare number 700.0" in msg
    data["overrides"] = {"tdp": "700 W", "hbm.stacks": 4}  # counts stay bare; quantities with units load
    f.write_text(_yaml.safe_dump(data, sort_keys=False))
    assert load_study(f).base.tdp == 700.0


def test_a_seed_out_of_range_is_refused(capsys, tmp_path):
    """issue 21 item 6: seeds >= 2**32 crashed in numpy's seeding with a traceback."""
    with pytest.raises(SystemExit) as e:
        main(["run", str(STUDIES / "clock-voltage-energy.yaml"), "--seed", str(2**32), "--out", str(tmp_path)])
    assert e.value.code == 2 and "expected an integer in [0, 2**32)" in capsys.readouterr().err
    with pytest.raises(SpecError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        run_study(STUDIES / "clock-voltage-energy.yaml", seed=-1, out=tmp_path, write=False)


@pytest.mark.parametrize("where", ["a-file", "/proc/self/x/y"])
def test_an_unusable_output_folder_is_one_line(where, tmp_path, capsys):
    """issue 21 item 6: an existing file or an impossible path as the output folder ended in a traceback."""
    target = tmp_path / where if not where.startswith("/") else Path(where)
    if where == "a-file":
        target.write_text("not a folder")
    code = main(["run", str(STUDIES / "clock-voltage-energy.yaml"), "--out", str(target), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert str(target) in err and "--out" in err and "Traceback" not in err


def test_a_storage_holding_more_than_the_budget_is_reported(tmp_path, capsys):
    """issue 21 item 5: a journal holding more trials than the budget (a duplicated tail: 5,399 of 5,000) was
    used silently."""
    assert "the storage holds 30 trials, more than the budget of 10" in _rerun(tmp_path, capsys, 30, 10)


def test_progress_outside_a_terminal_is_plain_lines(tmp_path, capsys):
    """issue 19 item 5: outside a terminal the progress bar wrote one 8 KB line of carriage returns. Now: one
    plain line per tenth of the budget, with the best value of each objective so far."""
    study = tmp_path / "s.yaml"
    shutil.copy(STUDIES / "qwen3-8b-decode-chip.yaml", study)
    assert main(["run", str(study), "--trials", "40", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("dse: ")]
    assert "\r" not in err and 1 <= len(lines) <= 11
    assert lines[-1].startswith("dse: 40 of 40 designs evaluated") and "best so far:" in lines[-1]


def test_petabytes_per_second_are_shown_as_such():
    """issue 19 item 4: Cerebras WSE-3's 21 PB/s of SRAM bandwidth showed as `2.1e+04 TB/s`."""
    from dse.units import format_quantity

    assert format_quantity(21e15, "bandwidth") == "21 PB/s"
    assert format_quantity(44e15, "bytes") == "44 PB"


@pytest.mark.parametrize("factor", ["xnan", "xinf", "x-2", "x0"])
def test_a_multiplier_must_be_finite_and_positive(factor, capsys):
    """issue 21 item 3: `--set ...=xnan` passed and silently changed nothing."""
    code = main(["whatif", "--base", "h100-sxm", "--set", f"matrix.flops_per_cycle.fp8_e4m3={factor}",
                 "--workload", "qwen3-8b:decode:batch=1:context=1024"])
    err = capsys.readouterr().err
    assert code == 2 and "a multiplier must be a finite number > 0" in err and "Traceback" not in err, err
