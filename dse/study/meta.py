"""The results folder's meta.json record of a study run (one place: dse.study.run and dse.study.cpsat)."""

from __future__ import annotations

from dse.spec.study import StudySpec
from dse.storage import mask


def meta_of(spec: StudySpec, problem, result, elapsed: float) -> dict:
    """meta.json of a run: the study's question, objectives, constraints, space, solver (storage masked) and result."""
    info = getattr(result, "info", None) or {}
    return {
        "name": spec.name,
        "question": spec.question,
        "study_file": str(spec.path),
        "objectives": [{"name": t.name, "direction": t.direction, "unit": t.unit} for t in spec.objectives],
        "constraints": [{"name": t.name, "unit": t.unit, "params": dict(t.params)} for t in spec.constraints],
        "space": [{"name": e.name, "kind": e.kind, "low": e.low, "high": e.high,
                   "choices": [str(c) for c in e.choices], "unit": e.dimension} for e in spec.space],
        "solver": {**{k: getattr(spec.solver, k) for k in ("method", "trials", "batch", "seed", "workers", "tiles")},
                   "storage": None if spec.solver.storage is None else mask(spec.solver.storage),  # no password
                   # NSGA-II as run: its population and surrogate pre-screening (offspring per evaluation, and
                   # how many the surrogate kept from the evaluator)
                   **{k: info[k] for k in ("population", "prescreen", "screened_out")
                      if k in info and spec.solver.method == "nsga2"}},
        "workloads": [{**{k: str(v) for k, v in body.items()}, "weight": w} for body, w in spec.workloads],
        "base_chip": spec.base_name,
        "n_trials": int(result.n_evaluated),
        "stored_copies": int(info.get("stored_copies", 0)),
        "n_feasible": int(result.n_feasible),
        "status": result.status,
        "message": result.message,
        "seed": spec.solver.seed,
        "elapsed_s": round(elapsed, 3),
    }
