"""Studies: a study file as an optimization problem, run end to end, its results on disk.

    problem.py      design space + the evaluation of a batch of design points (the join)
    run.py          spec -> space -> solver -> results files and reports (:func:`run_study`)
    cpsat.py        the CP-SAT studies (tile shapes, die split)
    distributed.py  many workers, one shared Optuna storage
    results.py      the results folder: write atomically, read back, the front, tables

``from dse.study import run_study`` (and the other names below) load their
module on first use, so importing one part (``dse.study.results``, which the
reports read) does not import the whole study runner.
"""

from __future__ import annotations

import importlib

_LAZY = {"run_study": "run", "OutputLock": "run", "make_problem": "problem", "evaluate_points": "problem",
         "design_space": "problem", "group_workloads": "problem", "results_table": "problem",
         "catalog_points": "problem", "MetricsLog": "problem"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"dse.study.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'dse.study' has no attribute {name!r}")
