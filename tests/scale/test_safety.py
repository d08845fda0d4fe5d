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
