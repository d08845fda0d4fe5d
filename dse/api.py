"""The Python API: checked entry points that take what a user has at hand (names, files, mappings).

``import dse`` gives four entry points (this module holds the first two; ``dse.whatif`` and ``dse.serve`` are
their packages, callable):

=================== ===============================================================================
dse.evaluate_design chips x workloads -> every metric (time, energy, power, area, cost, ...)
dse.run_study       a study file -> the results table (and the results folder)
dse.whatif          a baseline chip and proposed changes (or a what-if file) -> the comparison
dse.serve           a chip, a model and a request mix -> the serving operating point
=================== ===============================================================================

Each takes names and files as the command line does (``"h100-sxm"``,
``"qwen3-8b:decode:batch=1:context=8192"``, ``"studies/x.yaml"``) as well as dse's own objects, calls the code
the command line calls, and reports a mistake (an unknown name, a wrong type, a value out of range) as a
:class:`dse.errors.SpecError` naming the argument, never as a traceback from deep inside. The lower layers
(``dse.evaluate.evaluate_design`` on :class:`dse.hardware.Chips`, ``dse.study.run_study``,
``dse.whatif.run_whatif``, ``dse.serve.serve``) stay available for code that builds those objects itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dse.errors import SpecError, unknown_name

__all__ = ["evaluate_design", "run_study", "as_chips", "as_workloads"]

#: The evaluator options :func:`evaluate_design` passes on (see :func:`dse.evaluate.evaluate_design`).
EVALUATE_OPTIONS = ("fused_attention", "weights_in_rom", "rom_bandwidth", "rom_energy_per_byte")
_QUANTITY_OPTIONS = {"rom_bandwidth": "bandwidth", "rom_energy_per_byte": "energy_per_byte"}


def _what(x) -> str:
    return f"{type(x).__name__} {x!r}"[:200]


def _one_chip(x, where: str):
    from dse.hardware import ChipSpec, chip_from_dict, load_chip

    if isinstance(x, ChipSpec):
        return x
    if isinstance(x, (str, Path)):
        return load_chip(str(x))
    if isinstance(x, Mapping):
        return chip_from_dict(dict(x))
    raise SpecError(f"{where}: expected a catalog chip name (e.g. 'h100-sxm'), a chip YAML file, a ChipSpec or a "
                    f"chip mapping, got {_what(x)}")


def as_chips(chips, where: str = "chips"):
    """``chips`` (a name, a chip file, a ChipSpec, a chip mapping, a list of them, or a Chips) -> Chips."""
    from dse.hardware import Chips

    if isinstance(chips, Chips):
        return chips
    items = list(chips) if isinstance(chips, (list, tuple)) else [chips]
    if not items:
        raise SpecError(f"{where}: expected at least one chip, got an empty list")
    return Chips.from_specs([_one_chip(c, f"{where}[{i}]" if len(items) > 1 else where) for i, c in enumerate(items)])


def _one_workload(x, where: str):
    from dse.calibrate.measurements import parse_measured_workload
    from dse.workload import Workload, build
    from dse.workload.spec import WorkloadSpec

    if isinstance(x, Workload):
        return x
    if isinstance(x, str):
        return parse_measured_workload(x)
    if isinstance(x, (WorkloadSpec, Mapping)):
        return build(x if isinstance(x, WorkloadSpec) else dict(x))
    raise SpecError(f"{where}: expected a workload: 'model:phase:key=value...' (e.g. "
                    f"'qwen3-8b:decode:batch=1:context=8192'), 'gemm:m=..:k=..:n=..', a workload mapping, a "
                    f"WorkloadSpec or a Workload, got {_what(x)}")


def as_workloads(workloads, where: str = "workloads") -> list:
    """``workloads`` (one workload or a list; each may be a ``(workload, weight)`` pair) -> [(Workload, weight)]."""
    items = list(workloads) if isinstance(workloads, list) else [workloads]
    if not items:
        raise SpecError(f"{where}: expected at least one workload, got an empty list")
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]" if len(items) > 1 else where
        weight = 1.0
        if isinstance(item, tuple):
            if len(item) != 2:
                raise SpecError(f"{w}: a weighted workload is a pair (workload, weight), got {_what(item)}")
            item, weight = item
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < float("inf"):
                raise SpecError(f"{w}: the weight must be a finite number > 0, got {_what(weight)}")
        out.append((_one_workload(item, w), float(weight)))
    return out


def evaluate_design(chips, workloads, *, breakdown: bool = False, **options):
    """Every metric of each chip on ``workloads`` (a weighted mix when there are several): the one join.

    ``chips``: a catalog name, a chip YAML file, a :class:`~dse.hardware.ChipSpec`, a chip mapping, a list of
    these (one design point each) or a :class:`~dse.hardware.Chips`. ``workloads``: the command line's short
    form (``"qwen3-8b:decode:batch=1:context=8192"``, ``"gemm:m=256:k=4096:n=4096"``), a workload mapping, a
    WorkloadSpec or a Workload, or a list of them, each optionally a ``(workload, weight)`` pair.
    ``breakdown``: keep the per-operator figures (``.operators``; ``.frame().attrs['operators']``).
    ``options``: the evaluator's (``fused_attention``, ``weights_in_rom``, ``rom_bandwidth``,
    ``rom_energy_per_byte``; quantities as numbers in SI units or strings with units, "8 TB/s").

    Returns a :class:`dse.evaluate.DesignMetrics`: a mapping of metric name -> array (one entry per chip;
    ``time_s``, ``energy_per_token_j``, ``power_w``, ``die_area_mm2``, ``chip_cost_usd``, ...), with
    ``.row(i)`` (one chip's metrics as plain numbers) and ``.frame()`` (a DataFrame, one row per chip and
    workload). Every mistake is a :class:`~dse.errors.SpecError`.

    Qwen3-8B decode at an 8K context on the H100 reads its BF16 weights (7.57 G parameters without the
    embedding table: 15.14 GB) and its KV cache (8192 x 36 layers x 2 x 8 heads x 128 x 2 B = 1.21 GB) once per
    step at 3.354 TB/s (5 HBM3 stacks x 1024 pins x 5.24 Gb/s): 16.34 GB / 3.354 TB/s = 4.87 ms::

        >>> import dse
        >>> m = dse.evaluate_design("h100-sxm", "qwen3-8b:decode:batch=1:context=8192")
        >>> round(float(m["time_s"][0]) * 1e3, 1)
        4.9
        >>> m.row(0)["bound"], round(m.row(0)["die_area_mm2"] / 814, 1)   # 814 mm^2: the published die
        ('memory', 1.0)
        >>> dse.evaluate_design("h100", "qwen3-8b:decode:batch=1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        dse.errors.SpecError: workload 'qwen3-8b:decode:batch=1': a decode workload needs context=N ...
    """
    from dse.evaluate import evaluate_design as join
    from dse.units import parse_quantity

    if not isinstance(breakdown, bool):
        raise SpecError(f"breakdown: expected True or False, got {_what(breakdown)}")
    opts = {}
    for key, value in options.items():
        if key not in EVALUATE_OPTIONS:
            raise SpecError(unknown_name("evaluate_design option", key, EVALUATE_OPTIONS))
        if key in _QUANTITY_OPTIONS:
            value = parse_quantity(value, _QUANTITY_OPTIONS[key], allow_bare=True)
        elif not isinstance(value, bool):
            raise SpecError(f"{key}: expected True or False, got {_what(value)}")
        opts[key] = value
    pairs = as_workloads(workloads)
    return join(as_chips(chips), pairs, breakdown=breakdown, **opts)


def run_study(path, *, trials: int | None = None, workers: int | None = None, storage: str | None = None,
              seed: int | None = None, out=None, progress: bool = False, write: bool = True):
    """Run a study file (as `dse run` does) and return its results table (a DataFrame, one row per design).

    ``path``: the study YAML (its keys: `dse schema study`). ``trials`` / ``workers`` / ``storage`` / ``seed``
    replace the file's solver settings; ``out`` its output folder; ``write=False`` writes nothing (no results
    folder, no reports). The table has a column per parameter (``p.*``), objective (``obj.*``), constraint
    value (``con.*``, <= 0 feasible) and metric (``m.*``), and ``feasible`` and ``pareto_rank`` (0: on the
    front). Every mistake in the file or the arguments is a :class:`~dse.errors.SpecError`.

    The shipped precision study is a grid: 6 weight x 3 KV-cache x 2 activation formats x 5 HBM stack counts (4 to
    8), 180 designs (its `space:`)::

        >>> import dse
        >>> t = dse.run_study("studies/precision-vs-error.yaml", write=False)
        >>> len(t)
        180
        >>> int(t["feasible"].sum()) < 180   # 4-bit weights break the 5% error limit
        True
        >>> dse.run_study("studies/precision-vs-error.yaml", trials=0)
        Traceback (most recent call last):
        dse.errors.SpecError: run_study: trials must be an integer >= 1 (or None for the study's own), got 0
    """
    from dse.study import run_study as run

    if not isinstance(path, (str, Path)):
        raise SpecError(f"run_study: path must be a study YAML file (a str or a Path), got {_what(path)}")
    if out is not None and not isinstance(out, (str, Path)):
        raise SpecError(f"run_study: out must be a folder (a str or a Path), got {_what(out)}")
    if storage is not None and not isinstance(storage, str):
        raise SpecError(f"run_study: storage must be an Optuna storage URL or a file (a str), got {_what(storage)}")
    for name, flag in (("progress", progress), ("write", write)):
        if not isinstance(flag, bool):
            raise SpecError(f"run_study: {name} must be True or False, got {_what(flag)}")
    return run(path, trials=trials, workers=workers, storage=storage, seed=seed, out=out, progress=progress,
               write=write)
