"""Objective and constraint catalogs: discovery by name, parameters from YAML.

The catalogs are the top-level packages ``constraints/`` and ``objectives/``:
one module per entry, found with :mod:`pkgutil` (modules whose name starts
with ``_`` are helpers, not entries). A module is an entry when it exposes

    constraints:  constraint(metrics, **params) -> np.ndarray   (<= 0 feasible)
    objectives:   objective(metrics, **params) -> np.ndarray
    both:         NAME, UNIT, FORMULA, SOURCE (str); PARAMS (dict)
    objectives:   DIRECTION ('minimize' | 'maximize')

``PARAMS`` maps a parameter name to ``(dimension, default)``: ``dimension``
names a :data:`dse.units.DIMENSIONS` entry (what :func:`dse.units.parse_quantity`
checks), ``default`` is the SI default, ``None`` when the parameter is
required, or :data:`AUTO` when it is optional and the function computes its
default itself (the docstring says how, e.g. the reticle from the technology
tables, the chip's own TDP column).

A study names entries in YAML, with parameters written with units::

    constraints: {reticle: {}, tdp: {max: 1000 W}, max_latency: {max: 20 ms}}
    objectives: [throughput, {cost_per_million_tokens: {lifetime: 3 years}}]

:func:`bind_constraint` / :func:`bind_objective` turn one entry into a
:class:`Term` (module + parsed SI parameters) that is called on a metrics
table. Every problem (unknown name, unknown parameter, missing parameter,
wrong unit) is a :class:`~dse.errors.SpecError` listing what is valid.

A study may add its own modules from a file it names
(:func:`load_module_from_path`): exactly that ``.py`` file is loaded, nothing
is searched for on ``sys.path``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from dse.errors import SpecError, UnitError, did_you_mean, unknown_name
from dse.units import DIMENSIONS, parse_quantity

AUTO = "auto"
"""PARAMS default meaning "optional; the function computes the default (see its docstring)"."""

KINDS = ("constraint", "objective")
_PACKAGE = {"constraint": "constraints", "objective": "objectives"}
_FUNCTION = {"constraint": "constraint", "objective": "objective"}
_REQUIRED_ATTRS = ("NAME", "UNIT", "FORMULA", "SOURCE", "PARAMS")
DIRECTIONS = ("minimize", "maximize")


# ------------------------------------------------------------------ metrics access


def column(metrics: Mapping[str, Any], name: str, who: str = "") -> np.ndarray:
    """``metrics[name]`` as a float array, or a SpecError naming what is missing.

    ``metrics`` is any mapping of column name -> array (a pandas DataFrame, a
    dict of numpy arrays). ``who`` names the constraint/objective asking.
    """
    try:
        values = metrics[name]
    except (KeyError, IndexError):
        have = list(metrics.keys()) if hasattr(metrics, "keys") else []
        by = f"{who} needs" if who else "needs"
        raise SpecError(
            f"{by} the metrics column '{name}'{did_you_mean(name, have)}; the metrics have: "
            f"{', '.join(map(str, have)) or 'no columns'}"
        ) from None
    return np.asarray(values, dtype=float)


def has_column(metrics: Mapping[str, Any], name: str) -> bool:
    try:
        return name in metrics
    except TypeError:
        return False


# ------------------------------------------------------------------ module checks


def check_module(module: ModuleType, kind: str | None = None) -> str:
    """Check that ``module`` is a valid catalog entry; return its kind.

    The kind is read from the function the module exposes (``constraint`` or
    ``objective``) unless given. Raises SpecError listing every problem.
    """
    where = getattr(module, "__file__", None) or module.__name__
    found = [k for k in KINDS if callable(getattr(module, _FUNCTION[k], None))]
    if kind is None:
        if len(found) != 1:
            raise SpecError(f"{where}: a catalog module defines exactly one of constraint(metrics, **params) "
                            f"or objective(metrics, **params); found {found or 'neither'}")
        kind = found[0]
    problems = []
    if kind not in found:
        problems.append(f"{where}: defines no function {_FUNCTION[kind]}(metrics, **params)")
    for attr in _REQUIRED_ATTRS:
        if not hasattr(module, attr):
            problems.append(f"{where}: missing module attribute {attr}")
    for attr in ("NAME", "UNIT", "FORMULA", "SOURCE"):
        if hasattr(module, attr) and not isinstance(getattr(module, attr), str):
            problems.append(f"{where}: {attr} must be a string")
    if kind == "objective":
        direction = getattr(module, "DIRECTION", None)
        if direction not in DIRECTIONS:
            problems.append(f"{where}: DIRECTION must be 'minimize' or 'maximize', got {direction!r}")
    params = getattr(module, "PARAMS", {})
    if not isinstance(params, Mapping):
        problems.append(f"{where}: PARAMS must be a dict name -> (dimension, default)")
    else:
        for pname, decl in params.items():
            if not (isinstance(decl, tuple) and len(decl) == 2):
                problems.append(f"{where}: PARAMS['{pname}'] must be (dimension, default)")
                continue
            dim, default = decl
            if dim not in DIMENSIONS:
                problems.append(f"{where}: PARAMS['{pname}']: {unknown_name('dimension', dim, DIMENSIONS)}")
            if not (default is None or default == AUTO or isinstance(default, (int, float))):
                problems.append(f"{where}: PARAMS['{pname}'] default must be a number, None or AUTO")
    if problems:
        raise SpecError(problems)
    return kind


# ------------------------------------------------------------------ discovery


@functools.lru_cache(maxsize=2)
def _builtin(kind: str) -> dict[str, ModuleType]:
    """Catalog modules of one kind, by NAME (imported once)."""
    pkg = importlib.import_module(_PACKAGE[kind])
    out: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_") or info.ispkg:
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        check_module(mod, kind)
        if mod.NAME in out:
            raise SpecError(f"two {kind} modules are named '{mod.NAME}'")
        out[mod.NAME] = mod
    return out


def constraint_names() -> list[str]:
    return sorted(_builtin("constraint"))


def objective_names() -> list[str]:
    return sorted(_builtin("objective"))


def _get(kind: str, name: str, extra: Mapping[str, ModuleType] | None = None) -> ModuleType:
    table = dict(_builtin(kind))
    if extra:
        table.update({k: m for k, m in extra.items() if check_module(m) == kind})
    if not isinstance(name, str) or name not in table:  # (current names listed; a deprecated one suggests its heir)
        replaced = {k: m.REPLACED_BY for k, m in table.items() if getattr(m, "REPLACED_BY", None)}
        raise SpecError(unknown_name(kind, name, [k for k in table if k not in replaced], replaced))
    return table[name]


def get_constraint(name: str, extra: Mapping[str, ModuleType] | None = None) -> ModuleType:
    """The constraint module called ``name`` (built-in, or in ``extra``); SpecError with did-you-mean."""
    return _get("constraint", name, extra)


def get_objective(name: str, extra: Mapping[str, ModuleType] | None = None) -> ModuleType:
    """The objective module called ``name`` (built-in, or in ``extra``); SpecError with did-you-mean."""
    return _get("objective", name, extra)


# ------------------------------------------------------------------ parameters


def parse_params(module: ModuleType, raw: Mapping[str, Any] | None, where: str = "") -> dict[str, float]:
    """YAML parameters -> SI floats, checked against ``module.PARAMS``.

    ``raw`` maps parameter names to quantities with units ("1000 W", "20 ms";
    bare numbers only for dimensionless parameters). Unknown names, missing
    required ones and unit errors are all reported at once in one SpecError.
    Defaults are filled in; AUTO parameters left out are not passed.
    """
    prefix = f"{where}: " if where else ""
    name = getattr(module, "NAME", module.__name__)
    declared: Mapping[str, tuple[str, Any]] = module.PARAMS
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"{prefix}parameters of '{name}' must be a mapping name: value, got {raw!r}")
    problems: list[str] = []
    out: dict[str, float] = {}
    for key, value in raw.items():
        if key not in declared:
            if declared:
                problems.append(f"{prefix}{unknown_name(f'parameter of {name}', key, declared)}")
            else:
                problems.append(f"{prefix}'{name}' takes no parameters, got '{key}'")
            continue
        dim = declared[key][0]
        try:
            out[key] = parse_quantity(value, dim)
        except UnitError as e:
            problems.append(f"{prefix}{name}.{key}: {e}")
    for key, (dim, default) in declared.items():
        if key in out or key in raw:
            continue
        if default is None:
            problems.append(f"{prefix}'{name}' needs the parameter '{key}' (a {dim} quantity)")
        elif default != AUTO:
            out[key] = float(default)
    if problems:
        raise SpecError(problems)
    return out


# ------------------------------------------------------------------ bound terms


def _rows(metrics: Mapping[str, Any]) -> int | None:
    """How many designs a metrics table holds (its ``time_s`` column), or None when it cannot say."""
    try:
        t = metrics["time_s"]
    except (KeyError, TypeError, IndexError):
        return None
    shape = np.shape(t)
    return int(shape[0]) if len(shape) == 1 else None


@dataclass(frozen=True)
class Term:
    """One constraint or objective with its parsed parameters, callable on a metrics table."""

    kind: str
    name: str
    module: ModuleType = field(repr=False)
    params: Mapping[str, float] = field(default_factory=dict)

    def __call__(self, metrics: Mapping[str, Any]) -> np.ndarray:
        fn = getattr(self.module, _FUNCTION[self.kind])
        value = fn(metrics, **self.params)
        # a study's own module may return anything: one clear error instead of a traceback (issue 21)
        where = f"{self.kind} '{self.name}' ({getattr(self.module, '__file__', None) or self.module.__name__})"
        try:
            out = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as e:
            raise SpecError(f"{where}: returned {type(value).__name__} values that are not numbers ({e}); "
                            f"expected one number per design") from None
        n = _rows(metrics)
        if n is not None and out.shape != (n,):
            got = "a single number" if out.ndim == 0 else f"an array of shape {out.shape}"
            raise SpecError(f"{where}: returned {got}; expected one number per design (an array of {n})")
        return out

    @property
    def unit(self) -> str:
        return self.module.UNIT

    @property
    def formula(self) -> str:
        return self.module.FORMULA

    @property
    def source(self) -> str:
        return self.module.SOURCE

    @property
    def direction(self) -> str | None:
        return getattr(self.module, "DIRECTION", None)


def bind_constraint(name: str, params: Mapping[str, Any] | None = None, where: str = "",
                    extra: Mapping[str, ModuleType] | None = None) -> Term:
    """A constraint by name with its YAML parameters parsed (SpecError on any mistake)."""
    mod = get_constraint(name, extra)
    return Term("constraint", name, mod, parse_params(mod, params, where))


def bind_objective(name: str, params: Mapping[str, Any] | None = None, where: str = "",
                   extra: Mapping[str, ModuleType] | None = None) -> Term:
    """An objective by name with its YAML parameters parsed (SpecError on any mistake)."""
    mod = get_objective(name, extra)
    return Term("objective", name, mod, parse_params(mod, params, where))


def _entries(section: Any, where: str) -> list[tuple[str, Any, str]]:
    """YAML section forms -> [(name, params, where)].

    Accepted: ``{name: params-or-null, ...}`` or a list whose items are
    ``name`` or ``{name: params}``.
    """
    if section is None:
        return []
    if isinstance(section, Mapping):
        return [(k, v, f"{where}.{k}" if where else str(k)) for k, v in section.items()]
    if isinstance(section, (list, tuple)):
        out = []
        for i, item in enumerate(section):
            w = f"{where}[{i}]" if where else f"[{i}]"
            if isinstance(item, str):
                out.append((item, None, w))
            elif isinstance(item, Mapping) and len(item) == 1:
                (k, v), = item.items()
                out.append((k, v, w))
            else:
                raise SpecError(f"{w}: expected a name or {{name: parameters}}, got {item!r}")
        return out
    raise SpecError(f"{where}: expected a mapping or a list of names, got {section!r}")


def _bind_all(kind: str, section: Any, where: str, extra) -> list[Term]:
    bind = bind_constraint if kind == "constraint" else bind_objective
    terms, problems = [], []
    for name, params, w in _entries(section, where):
        try:
            terms.append(bind(name, params, w, extra))
        except SpecError as e:
            problems.extend(p if p.startswith(w) else f"{w}: {p}" for p in e.problems)
    if problems:
        raise SpecError(problems)
    return terms


def constraints_from_yaml(section: Any, where: str = "constraints",
                          extra: Mapping[str, ModuleType] | None = None) -> list[Term]:
    """A study's ``constraints:`` section -> bound terms (all problems reported at once)."""
    return _bind_all("constraint", section, where, extra)


def objectives_from_yaml(section: Any, where: str = "objectives",
                         extra: Mapping[str, ModuleType] | None = None) -> list[Term]:
    """A study's ``objectives:`` section -> bound terms (all problems reported at once)."""
    return _bind_all("objective", section, where, extra)


# ------------------------------------------------------------------ user modules


def load_module_from_path(path: str | Path, base_dir: str | Path | None = None) -> ModuleType:
    """Load one constraint or objective module from the ``.py`` file a study names.

    Only that file is executed: ``path`` (relative to ``base_dir``, the study's
    folder, when relative) must be an existing regular ``.py`` file; a
    directory, another suffix, a dotted module name or a missing file is
    refused. The module gets a private name (nothing on ``sys.path`` is
    searched or shadowed) and must pass :func:`check_module`.
    """
    raw = str(path)
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if p.suffix != ".py":
        raise SpecError(f"{raw}: a study module must be a path to a .py file (got '{raw}')")
    if not p.is_file():
        kind = "a directory" if p.is_dir() else "no such file"
        raise SpecError(f"{raw}: cannot load a study module: {kind} ({p})")
    p = p.resolve()
    if base_dir is not None:
        root = Path(base_dir).resolve()
        if root not in p.parents:
            raise SpecError(f"{raw}: a study module must be inside the study's folder {root} (or below it), found "
                            f"{p}; copy it there (a study file runs no code from elsewhere)")
    digest = hashlib.sha1(str(p).encode()).hexdigest()[:12]
    mod_name = f"_dse_study_module_{p.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise SpecError(f"{raw}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # the user's code failed (or exited): their mistake, with the cause
        sys.modules.pop(mod_name, None)
        raise SpecError(f"{raw}: loading the module failed: {type(e).__name__}: {e}") from e
    try:
        check_module(module)
    except SpecError:
        sys.modules.pop(mod_name, None)
        raise
    return module


def load_modules(paths: Iterable[str | Path], base_dir: str | Path | None = None) -> dict[str, ModuleType]:
    """Several study modules -> {NAME: module}; a name that clashes with a built-in is refused."""
    out: dict[str, ModuleType] = {}
    for path in paths:
        mod = load_module_from_path(path, base_dir)
        kind = check_module(mod)
        builtin = _builtin(kind)
        if mod.NAME in builtin or mod.NAME in out:
            raise SpecError(f"{path}: {kind} name '{mod.NAME}' is already taken")
        out[mod.NAME] = mod
    return out
