"""`dse validate FILE`: recognise what a YAML file is and validate it fully."""

from __future__ import annotations

from dse.errors import SpecError
from dse.spec import load_yaml, locate


def _kind(data) -> str:
    if not isinstance(data, dict):
        file, (line, col) = locate(data, ())
        raise SpecError(f"{file}:{line}:{col}: expected a YAML mapping, got {type(data).__name__}")
    keys = set(data)
    if "proposals" in keys or "baseline" in keys:
        return "whatif"
    if "objectives" in keys or "space" in keys or "solver" in keys:
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
    data = load_yaml(path)
    kind = _kind(data)
    if kind == "chip":
        from dse.hardware import chip_from_dict

        chip_from_dict(data)
    elif kind == "workload":
        from dse.workload import spec_from_dict

        spec_from_dict(data)
    elif kind == "study":
        from dse.study_spec import load_study

        load_study(path)
    elif kind == "whatif":
        from dse.whatif import load_proposals

        load_proposals(path)
    return kind
