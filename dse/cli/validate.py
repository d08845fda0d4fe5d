"""`dse validate FILE`: recognise what a file is and validate it as `dse run` / `eval` / `whatif` would read it.

YAML files: a chip, a workload, a study or a what-if; CSV files: calibration
measurements (`dse calibrate`). Each is loaded by the same code that runs it
(a workload is built, a study loaded with its registry look-ups), so what
validate accepts, the commands run.
"""

from __future__ import annotations

from dse.calibrate import load_measurements
from dse.errors import SpecError
from dse.hardware import chip_from_dict
from dse.spec import load_yaml, locate
from dse.spec.study import load_study
from dse.whatif import load_proposals
from dse.workload import build


def _kind(data) -> str:
    if not isinstance(data, dict):
        file, (line, col) = locate(data, ())
        raise SpecError(f"{file}:{line}:{col}: expected a YAML mapping, got {type(data).__name__}")
    keys = set(data)
    if "proposals" in keys or "baseline" in keys:
        return "whatif"
    if keys & {"objectives", "space", "solver", "constraints", "overrides"} or {"workloads", "base"} <= keys:
        return "study"
    if "matrix" in keys or "units" in keys:
        return "chip"
    if "model" in keys or "ops" in keys or "phase" in keys:
        return "workload"
    file, (line, col) = locate(data, ())
    raise SpecError(f"{file}:{line}:{col}: cannot tell what this file is: expected a chip (units, matrix, ...), "
                    f"a workload (model or ops), a study (workloads, space, objectives) or a what-if (baseline, proposals)")


def validate_file(path: str) -> str:
    """Validate one file; returns its kind. Raises SpecError listing every problem."""
    if str(path).lower().endswith(".csv"):
        load_measurements(path)
        return "measurements"
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
    return kind
