"""`dse validate FILE`: recognise what a file is and validate it as `dse run` / `eval` / `whatif` would read it.

YAML files: a chip, a workload, a study, a what-if or a serving knob file (`dse serve
--calibration`); CSV files: calibration measurements (`dse calibrate`); JSON files: a
Hugging Face model config (`dse serve --model config.json`). Each is loaded by the same
code that runs it (a workload is built, a study loaded with its registry look-ups), so
what validate accepts, the commands run.
"""

from __future__ import annotations

from dse.calibrate import load_measurements
from dse.errors import SpecError
from dse.hardware import chip_from_dict
from dse.spec import load_yaml, locate
from dse.spec.study import load_study
from dse.whatif import load_proposals
from dse.workload import build, load_model
from dse.workload.hf_config import is_config_path


def _kind(data) -> str:
    if not isinstance(data, dict):
        file, (line, col) = locate(data, ())
        raise SpecError(f"{file}:{line}:{col}: expected a YAML mapping, got {type(data).__name__}")
    keys = set(data)
    if "proposals" in keys or "baseline" in keys:
        return "whatif"
    if "profiles" in keys:
        return "serving knobs"
    if keys & {"objectives", "space", "solver", "constraints", "overrides"} or {"workloads", "base"} <= keys:
        return "study"
    if "matrix" in keys or "units" in keys:
        return "chip"
    if "model" in keys or "ops" in keys or "phase" in keys:
        return "workload"
    file, (line, col) = locate(data, ())
    raise SpecError(f"{file}:{line}:{col}: cannot tell what this file is: expected a chip (units, matrix, ...), "
                    f"a workload (model or ops), a study (workloads, space, objectives), a what-if (baseline, "
                    f"proposals) or serving knobs (profiles); a measurements file ends in .csv, a Hugging Face model "
                    f"config in .json")


def validate_file(path: str) -> str:
    """Validate one file; returns its kind. Raises SpecError listing every problem."""
    if str(path).lower().endswith(".csv"):
        load_measurements(path)
        return "measurements"
    if is_config_path(path):
        load_model(str(path))
        return "model"
    data = load_yaml(path)
    kind = _kind(data)
    if kind == "chip":
        chip_from_dict(data)
    elif kind == "workload":
        build(data)
    elif kind == "study":
        load_study(path)
    elif kind == "whatif":
        load_proposals(path)
    elif kind == "serving knobs":
        from dse.serve.knobs import read_knobs_file  # (dse.serve is large: imported when a knob file is given)

        read_knobs_file(path)
    return kind
