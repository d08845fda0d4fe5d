"""Safety: YAML only through safe loaders, Python only from paths a study names, output confined to its folder."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from dse.cli import main
from dse.errors import SpecError
from dse.study.results import atomic_write, confined_path
from dse.study import run_study
from dse.spec.study import load_study
from dse.cli.validate import validate_file
from tests.scale.helpers import ROOT, small_study

SOURCES = [p for d in ("dse", "objectives", "constraints", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")]
UNSAFE_YAML = re.compile(r"yaml\.(load|load_all|unsafe_load|unsafe_load_all|full_load|full_load_all)\s*\("
                         r"|\b(Unsafe|Full)?Loader\b(?!\s*=)|yaml\.C(Unsafe|Full)?Loader|yaml\.Loader")


def test_no_unsafe_yaml_loader_anywhere():
    """Every YAML read goes through a safe loader (yaml.safe_load or dse.spec.yamlio's SafeLoader subclass)."""
    offenders = []
    for path in SOURCES:
        if path == Path(__file__):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if UNSAFE_YAML.search(code) and "SafeLoader" not in code and "_Loader" not in code:
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "unsafe YAML loading:\n" + "\n".join(offenders)


def test_yamlio_loader_is_a_safe_loader():
    import yaml

    from dse.spec import yamlio

    assert issubclass(yamlio._Loader, yaml.SafeLoader)


PAYLOADS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/apply:subprocess.check_output [['touch', '{marker}']]",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/name:os.system",
    "!!python/module:os",
]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("where", ["study", "base chip file"])
def test_python_tags_in_yaml_are_refused_not_run(tmp_path, payload, where):
    marker = tmp_path / "pwned"
    evil = payload.format(marker=marker)
    study = small_study(tmp_path, trials=10)
    text = study.read_text()
    if where == "study":
        study.write_text(text.replace("name: qwen3-8b-decode-chip", f"name: {evil}"))
    else:
        (tmp_path / "chip.yaml").write_text(f"name: evil\nunits: {evil}\n")
        study.write_text(text.replace("base: h100-sxm", "base: chip.yaml"))
    with pytest.raises(SpecError) as e:
        load_study(study)
    assert "yaml" in str(e.value).lower()
    assert ":" in str(e.value).split(" ")[0]  # file:line:col
    assert main(["validate", str(study)]) == 2
    assert not marker.exists()


def _write_module(path: Path, marker: Path, name: str = "evil_cost") -> Path:
    path.write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("imported")
        NAME = {name!r}
        UNIT = "1"
        FORMULA = "die_area_mm2"
        SOURCE = "test"
        DIRECTION = "minimize"
        PARAMS = {{}}
        def objective(metrics):
            return metrics["die_area_mm2"]
    """))
    return path


def test_modules_load_only_from_paths_the_study_names(tmp_path):
    """Python next to a study, or named like a catalog entry, is never imported unless the study names its path."""
    marker = tmp_path / "imported"
    study = small_study(tmp_path, trials=10)
    _write_module(tmp_path / "evil_cost.py", marker)
    (tmp_path / "objectives").mkdir()
    _write_module(tmp_path / "objectives" / "evil_cost.py", marker)
    (tmp_path / "objectives" / "__init__.py").write_text("")
    text = study.read_text()
    study.write_text(text.replace("- die_area", "- evil_cost"))
    with pytest.raises(SpecError, match="evil_cost"):
        load_study(study)  # an unknown name, not an import of the file that has it
    assert not marker.exists()
    assert "objectives.evil_cost" not in sys.modules and "evil_cost" not in sys.modules
    # named explicitly: loaded, under a private module name
    study.write_text(study.read_text() + "modules: [evil_cost.py]\n")
    spec = load_study(study)
    assert marker.exists()
    assert "evil_cost" in [t.name for t in spec.objectives]
    assert "evil_cost" not in sys.modules


@pytest.mark.parametrize("entry", ["os.path", "os", "evil_cost", "subdir", "notes.txt", "missing.py"])
def test_modules_must_be_existing_py_files(tmp_path, entry):
    study = small_study(tmp_path, trials=10)
    (tmp_path / "subdir").mkdir()
    (tmp_path / "notes.txt").write_text("x = 1\n")
    study.write_text(study.read_text() + f"modules: [{entry}]\n")
    with pytest.raises(SpecError) as e:
        load_study(study)
    assert f"{study}:" in str(e.value)


@pytest.mark.parametrize("name", ["../escape.csv", "plots/../../escape.png", "/tmp/escape.csv", "..",
                                  "a/../../escape", "..\\escape.csv"])
def test_result_names_cannot_leave_the_output_folder(tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SpecError):
        confined_path(out, name)
    with pytest.raises(SpecError):
        atomic_write(name, b"x", root=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_symlink_out_of_the_output_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (out / "plots").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SpecError, match="outside the output folder"):
        atomic_write("plots/a.png", b"x", root=out)
    assert not list((tmp_path / "elsewhere").iterdir())


def test_objective_names_with_path_parts_stay_in_the_output_folder(tmp_path):
    """A study module whose NAME holds '../' still writes every report file inside the output folder."""
    marker = tmp_path / "imported"
    _write_module(tmp_path / "evil.py", marker, name="../../escape")
    study = small_study(tmp_path, trials=20, batch=20)
    study.write_text(study.read_text().replace("- die_area", "- ../../escape") + "modules: [evil.py]\n")
    before = {p for p in tmp_path.parent.rglob("*")}
    try:
        run_study(study, out=tmp_path / "out")
    except SpecError as e:  # refusing the name is fine too; it must not write outside
        assert "escape" in str(e)
    after = {p for p in tmp_path.parent.rglob("*")}
    outside = [p for p in after - before if tmp_path not in p.parents and p != tmp_path]
    assert not outside, outside
    assert not [p for p in after - before if "escape" in p.name and (tmp_path / "out") not in p.parents]


def test_workers_do_not_import_code_from_the_current_folder(tmp_path):
    """issue 21 item 1: workers started as `python -c ...` put the cwd first on sys.path, so an optuna.py (or
    yaml.py) in the folder where `dse run STUDY --workers 2` was started ran inside every worker."""
    import os
    import subprocess

    from tests.scale.helpers import DSE, finish

    marker = tmp_path / "hijacked"
    for mod in ("optuna", "yaml", "numpy"):
        (tmp_path / f"{mod}.py").write_text(f"open({str(marker)!r}, 'a').write('{mod}')\nraise SystemExit(7)\n")
    study = small_study(tmp_path, trials=40, batch=20)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # (the coordinator as the `dse` console script starts it: `python -m` would put the cwd first itself)
    proc = subprocess.Popen([sys.executable, "-P", *DSE[1:], "run", str(study), "--quiet", "--workers", "2"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env, cwd=tmp_path)
    code, _, err = finish(proc)
    assert not marker.exists(), marker.read_text()
    assert code == 0, err[-2000:]


@pytest.mark.parametrize("name", [".lock", "study.journal.flock", "study.journal"])
def test_lock_files_are_not_written_through_a_symlink(tmp_path, name, capsys):
    """issue 21 item 2: `out/.lock` followed a symlink and truncated its target; a symlinked `.flock` was
    written through. Now a planted link is refused (exit 2, the link named) and its target is untouched."""
    study = small_study(tmp_path, trials=20, batch=10)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "notes.txt"
    victim.write_text("my notes\n")
    (out / name).symlink_to(victim)
    code = main(["run", str(study), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and name in err and "Traceback" not in err
    assert "resuming" not in err  # a link is not a stored study
    assert victim.read_text() == "my notes\n"


def test_study_modules_must_live_below_the_study(tmp_path):
    """issue 21 item 1: `dse validate` ran a study's `modules:` code from `../` and absolute paths, and a module
    calling sys.exit(0) made validate exit 0 silently."""
    import yaml as _yaml

    outside = tmp_path / "elsewhere.py"
    outside.write_text("raise SystemExit('should not run')\n")
    sub = tmp_path / "study"
    sub.mkdir()
    exiting = sub / "quits.py"
    exiting.write_text("import sys\nsys.exit(0)\n")
    data = _yaml.safe_load(small_study(sub, trials=10).read_text())
    for modules, words in (([str(outside)], "inside the study's folder"), (["../elsewhere.py"], "inside the study's"),
                           (["quits.py"], "SystemExit")):
        data["modules"] = modules
        f = sub / "s.yaml"
        f.write_text(_yaml.safe_dump(data, sort_keys=False))
        with pytest.raises(SpecError, match=words):
            load_study(f)
        assert main(["validate", str(f)]) == 2


def test_a_storage_path_that_is_not_a_journal_is_left_alone(tmp_path, capsys):
    """issue 21 item 2: `solver.storage: 'journal:/some/user/notes.txt'` cut the file's last line ("a torn last
    line") and appended Optuna JSON to it. A file that is not a journal dse created is refused, untouched."""
    import yaml as _yaml

    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nthe last line, without a newline")
    data = _yaml.safe_load(small_study(tmp_path, trials=10).read_text())
    data["solver"]["storage"] = f"journal:{notes}"
    f = tmp_path / "s.yaml"
    f.write_text(_yaml.safe_dump(data, sort_keys=False))
    assert main(["run", str(f), "--quiet"]) == 2
    assert "is not an Optuna journal" in capsys.readouterr().err
    assert notes.read_text() == "my notes\nthe last line, without a newline"


def test_a_study_file_cannot_write_outside_its_folder(tmp_path, capsys):
    """issue 21 item 2: `output: ../escape` in a study file wrote outside the study's folder. Refused at the
    key (file:line), unless the user gives the folder on the command line."""
    import yaml as _yaml

    sub = tmp_path / "mine"
    sub.mkdir()
    data = _yaml.safe_load(small_study(sub, trials=10).read_text())
    data["output"] = "../escape"
    f = sub / "s.yaml"
    f.write_text(_yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:" in err and "output" in err and "outside the study's folder" in err and "--out" in err
    assert not (tmp_path / "escape").exists()
    assert main(["run", str(f), "--quiet", "--out", str(tmp_path / "chosen")]) == 0
    assert (tmp_path / "chosen" / "pareto.csv").exists() and not (tmp_path / "escape").exists()


def test_a_damaged_journal_is_named_with_its_line(tmp_path, capsys):
    """issue 21 item 5: a flipped byte in the journal gave a `KeyError: 'op_code'` traceback."""
    study = small_study(tmp_path, trials=20, batch=10)
    assert main(["run", str(study), "--quiet"]) == 0
    journal = tmp_path / "out" / "study.journal"
    lines = journal.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b'"op_code"', b'"op#code"', 1)
    journal.write_bytes(b"\n".join(lines))
    capsys.readouterr()
    assert main(["run", str(study), "--quiet", "--trials", "30"]) == 2
    err = capsys.readouterr().err
    assert f"{journal}:5: the journal is damaged" in err and "Traceback" not in err
