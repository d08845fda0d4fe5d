"""The study file: workloads, base chip + overrides, design space, constraints,
objectives, solver, output. Validated all at once, located in the YAML; a
spec error writes nothing.

    name: qwen3-8b-decode-chip
    question: Which single-die chip serves Qwen3-8B decode at 8K fastest ...
    workloads:
      - {model: qwen3-8b, phase: decode, batch: 1, context: 8192, weight: 1}
    base: h100-sxm                 # catalog name, a chip file, or an inline chip mapping
    overrides: {hbm.generation: hbm3e}
    space:
      units: {int: [32, 192], step: 4}
      clock: {float: [1.2 GHz, 2.2 GHz]}
      l2: {log: [8 MB, 256 MB]}
      hbm.stacks: {int: [1, 8]}
      workload.formats.weights: {choice: [bf16, fp8]}
    constraints: {reticle: null, hbm_shoreline: null, tdp: {max: 1000 W}, fits_memory: null}
    objectives: [tpot, energy_per_token, die_area]
    solver: {method: nsga2, trials: 2000, batch: 200, seed: 0}
    output: results/qwen3-8b-decode-chip

Validation equals run: after the file's own checks, :func:`load_study` asks
the code the run calls whether it takes the study (the design space's
parameter records, ``with_overrides`` for every value a chip parameter can
take, ``Chips.from_base`` for every parameter a design varies, the solver's
own limits, the CP-SAT data steps) and evaluates one design point of the
space, on which every constraint and objective is computed once (so a term
that needs a metric nothing produces is refused here). Whatever the run
would refuse is refused here, located at the key or value that causes it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dse import registry
from dse.errors import DseError, SpecError, UnitError, did_you_mean, unknown_name
from dse.evaluate import evaluate_design
from dse.hardware import Chips, chip_from_dict, load_chip, param_dimension, with_overrides
from dse.hardware.overrides import bare_number_problems
from dse.solvers import cpsat_split
from dse.solvers.cpsat_tiles import tile_data
from dse.space import ChoiceParam, DesignSpace, FloatParam, IntParam, LogParam, Param
from dse.spec import load_yaml
from dse.spec.problems import Problems as _Problems, strip_location
from dse.spec.yamlio import LocDict, key_loc, locate
from dse.units import format_quantity, parse_quantity
from dse.workload import anchored, build, workload_mapping

TOP_KEYS = ("name", "question", "workloads", "scenarios", "base", "overrides", "space", "constraints", "objectives",
            "solver", "output", "modules")
SOLVER_KEYS = ("method", "trials", "batch", "seed", "workers", "storage", "population", "resolution", "tiles",
               "prescreen")
#: What ``solver.tiles`` takes (dse.study.tiles): the evaluator's default tiles, CP-SAT tiles per design, or
#: CP-SAT where the budget check says it is affordable (the default).
TILE_MODES = ("auto", "heuristic", "cpsat")
#: Keys a study once accepted and nothing read: refused with what to do instead.
UNREAD_KEYS = {
    "technology": "a study cannot change the technology tables (dse/data/technology/); nothing reads this key: "
                  "remove it (a chip's node is its 'process' and its memory its 'hbm.generation': set them in "
                  "'overrides' or vary them in 'space')",
}
UNREAD_SOLVER_KEYS: dict[str, str] = {}
#: Keys of a what-if file (dse.whatif): such a file given to `dse run` is named for what it is.
WHATIF_KEYS = ("baseline", "proposals")
#: Most combinations of categorical chip values (e.g. hbm.generation x process) built as chips at load time.
MAX_VARIANTS = 64
#: Of those, the chips each numeric value is applied to with with_overrides (its type and bounds).
MAX_VALUE_CHIPS = 8
_LOCATED = re.compile(r"^\S+:\d+(:\d+)?[ :]")
METHODS = ("nsga2", "tpe", "gp", "random", "grid", "cpsat_tiles", "cpsat_split")
WORKLOAD_PARAM_PREFIX = "workload."


@dataclass(frozen=True)
class SpaceEntry:
    name: str
    kind: str  # int | float | log | choice
    low: float | None = None
    high: float | None = None
    step: int = 1
    choices: tuple = ()
    dimension: str | None = None

    def to_param(self) -> Param:
        """The design-space record the run searches (:class:`dse.space.Param`); SpecError if it refuses."""
        if self.kind == "choice":
            return ChoiceParam(self.name, tuple(self.choices))
        if self.kind == "int":
            if self.dimension is None:
                return IntParam(self.name, int(self.low), int(self.high), int(self.step))
            return FloatParam(self.name, float(self.low), float(self.high))
        if self.kind == "float":
            return FloatParam(self.name, float(self.low), float(self.high))
        return LogParam(self.name, float(self.low), float(self.high), integer=self.dimension is None)


@dataclass(frozen=True)
class SolverSettings:
    method: str = "nsga2"
    trials: int = 1000
    batch: int = 100
    seed: int = 0
    workers: int = 1
    storage: str | None = None
    population: int | None = None
    resolution: int = 11
    tiles: str = "auto"
    prescreen: int | None = None  # NSGA-II offspring per evaluation, a surrogate keeping the best (None: 4; 1: off)


@dataclass(frozen=True)
class StudySpec:
    path: Path
    name: str
    question: str
    workloads: tuple  # of (WorkloadSpec dict, weight)
    base: Any  # ChipSpec
    base_name: str
    overrides: dict
    space: tuple[SpaceEntry, ...]
    constraints: tuple  # registry Terms
    objectives: tuple
    solver: SolverSettings
    output: Path
    raw: dict = field(repr=False, default_factory=dict)
    #: (name, weight, workloads) per scenario: every design is evaluated on each (``workloads`` is the first's)
    scenarios: tuple = ()


def _parse_value(name: str, value, dimension: str | None, problems: _Problems, path: tuple):
    if dimension is None:
        if not isinstance(value, (int, float, str)):  # (bool is an int: yes/no parameters)
            problems.at(path, f"expected a number or a name, got {value!r}")
            return None
        return value
    try:
        return parse_quantity(value, dimension)
    except UnitError as e:
        problems.at(path, str(e))
        return None


def _finite(x) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int beyond any float
        return False


def _space(section, problems: _Problems) -> list[SpaceEntry]:
    out = []
    if not isinstance(section, dict):
        problems.at(("space",), f"expected a mapping of parameter: {{int|float|log|choice: ...}}, got {section!r}")
        return out
    for name, body in section.items():
        path = ("space", name)
        dim = None
        if str(name) == "base":  # a choice between catalog chips (or chip files)
            choices = body.get("choice") if isinstance(body, dict) else None
            if not isinstance(choices, list) or not choices or set(body) != {"choice"}:
                problems.at(path, "the base chip can only be a choice: {choice: [h100-sxm, groq-tsp, ...]}")
                continue

            ok = True
            for i, c in enumerate(choices):
                try:
                    load_chip(str(c))
                except SpecError as e:
                    problems.at(path + ("choice", i), str(e))
                    ok = False
            if ok:
                out.append(SpaceEntry("base", "choice", choices=tuple(str(c) for c in choices)))
            continue
        if not str(name).startswith(WORKLOAD_PARAM_PREFIX):
            try:
                dim = param_dimension(str(name))
            except SpecError as e:
                problems.at(path, str(e), key=True)
                continue
        elif str(name)[len(WORKLOAD_PARAM_PREFIX):] not in WORKLOAD_PARAMS:
            problems.at(path, unknown_name("workload parameter", str(name)[len(WORKLOAD_PARAM_PREFIX):],
                                           WORKLOAD_PARAMS), key=True)
            continue
        if not isinstance(body, dict) or not body:
            problems.at(path, f"expected {{int: [low, high]}}, {{float: ...}}, {{log: ...}} or {{choice: [...]}}, got {body!r}")
            continue
        kinds = [k for k in body if k in ("int", "float", "log", "choice")]
        extra = [k for k in body if k not in ("int", "float", "log", "choice", "step")]
        for k in extra:
            problems.at(path + (k,), f"unknown key{did_you_mean(k, ['int', 'float', 'log', 'choice', 'step'])}", key=True)
        if len(kinds) != 1:
            problems.at(path, f"give exactly one of int, float, log, choice; got {kinds or 'none'}")
            continue
        kind = kinds[0]
        val = body[kind]
        if kind == "choice":
            if not isinstance(val, list) or not val:
                problems.at(path + (kind,), f"expected a non-empty list of values, got {val!r}")
                continue
            vals = []
            for i, v in enumerate(val):
                pv = _parse_value(name, v, dim, problems, path + (kind, i))
                vals.append(pv)
            if any(v is None for v in vals):
                continue
            if len(set(map(str, vals))) != len(vals):
                problems.at(path + (kind,), "choices must be distinct")
                continue
            out.append(SpaceEntry(str(name), "choice", choices=tuple(vals), dimension=dim))
            continue
        if not isinstance(val, list) or len(val) != 2:
            problems.at(path + (kind,), f"expected [low, high], got {val!r}")
            continue
        lo = _parse_value(name, val[0], dim, problems, path + (kind, 0))
        hi = _parse_value(name, val[1], dim, problems, path + (kind, 1))
        if lo is None or hi is None:
            continue
        if isinstance(lo, str) or isinstance(hi, str):
            problems.at(path + (kind,), f"expected numbers for {kind}, got {val!r}")
            continue
        if not (_finite(lo) and _finite(hi)):
            problems.at(path + (kind,), f"expected finite numbers, got {val!r}")
            continue
        if dim is None and kind in ("int", "log") and max(abs(lo), abs(hi)) > 2**53:
            problems.at(path + (kind,), f"expected whole numbers of at most 2**53 (9.0e15), got {val!r}")
            continue
        if kind == "int" and dim is None and not (float(lo).is_integer() and float(hi).is_integer()):
            problems.at(path + (kind,), f"expected integers, got {val!r}")
            continue
        if lo > hi:
            problems.at(path + (kind,), f"low must be <= high, got {val!r}")
            continue
        if kind == "log" and lo <= 0:
            problems.at(path + (kind,), f"log range needs low > 0, got {val!r}")
            continue
        if kind in ("int",) and dim is None and lo < 0:
            problems.at(path + (kind,), f"counts cannot be negative, got {val!r}")
            continue
        step = body.get("step", 1)
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            problems.at(path + ("step",), f"expected an integer >= 1, got {step!r}")
            continue
        out.append(SpaceEntry(str(name), kind, float(lo), float(hi), step, dimension=dim))
    return out


WORKLOAD_PARAMS = ("formats.weights", "formats.activations", "formats.kv", "batch", "context")


def _check_workload_space(space, workloads, problems: _Problems) -> None:
    """Every value a workload parameter can take must make valid workloads (else the run fails late).

    Applies each choice (or both ends of a range) to every workload as the
    study's evaluation does (formats by name; batch and context as whole
    numbers >= 1) and builds it.
    """
    for e in space:
        if not e.name.startswith(WORKLOAD_PARAM_PREFIX):
            continue
        sub = e.name[len(WORKLOAD_PARAM_PREFIX):]
        path = ("space", e.name)
        values = list(e.choices) if e.kind == "choice" else [e.low, e.high]
        for v in values:
            if sub in ("batch", "context") and (isinstance(v, bool) or not isinstance(v, (int, float))
                                                or not float(v).is_integer() or v < 1):
                problems.at(path, f"{sub} takes whole numbers >= 1, got {v!r}")
                break
            bad = None
            for body, _ in workloads:
                b = dict(body)
                if sub.startswith("formats."):
                    b["formats"] = {**dict(b.get("formats") or {}), sub.split(".", 1)[1]: v}
                elif "model" in b:
                    b[sub] = int(v)
                else:
                    continue
                try:
                    build(b)
                except SpecError as err:
                    bad = re.sub(r"^\S+:\d+:\d+ ", "", err.problems[0])
                    break
            if bad is not None:
                problems.at(path, f"the value {v!r} makes an invalid workload: {bad}")
                break


def _located(msg: str, file: str, data, path: tuple, what: str) -> str:
    """``msg`` as it is if it already names a file and line (another YAML file, e.g. a chip file), else at ``path``."""
    if _LOCATED.match(msg) and not msg.startswith(("<input>", "<string>")):
        return msg
    f, (line, col) = locate(data, path)
    return f"{f}:{line}:{col} {what}: {strip_location(msg)}"


def _workloads(data, path: tuple, file: str, P: _Problems) -> tuple[list, list]:
    """The workloads at ``path`` of the study (one mapping or a list), each with an optional weight, validated
    by building them: ([(body, weight)], [their paths])."""
    workloads, workload_paths = [], []
    wl = data.get(path[-1])
    if wl is None or wl == []:
        P.at(path, "expected at least one workload, e.g. {model: qwen3-8b, phase: decode, batch: 1, "
                   "context: 8192}")
        return workloads, workload_paths
    items = wl if isinstance(wl, list) else [wl]
    for i, item in enumerate(items):
        p = path + (i,) if isinstance(wl, list) else path
        if isinstance(item, str):  # the short form of `dse eval` and of what-if files, as its mapping
            try:
                item = workload_mapping(item)
            except SpecError as e:
                P.items.extend(_located(m, file, P.data, p, ".".join(map(str, p))) for m in e.problems)
                continue
        if not isinstance(item, dict):
            P.at(p, f"expected a workload mapping like {{model: qwen3-8b, phase: decode, ...}} or its short form "
                    f"'qwen3-8b:decode:batch=1:context=8192', got {item!r}")
            continue
        body = anchored(dict(item), Path(file).parent)  # (a config.json path from the study's folder)
        weight = body.pop("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
            P.at(p + ("weight",), f"expected a finite number > 0, got {weight!r}")
            continue
        body = LocDict(body)
        body.file, body.loc = getattr(item, "file", file), getattr(item, "loc", (1, 1))
        body.key_locs, body.value_locs = getattr(item, "key_locs", {}), getattr(item, "value_locs", {})
        try:
            build(body)
        except SpecError as e:
            P.items.extend(_located(m, file, P.data, p, ".".join(map(str, p))) for m in e.problems)
            continue
        workloads.append((dict(body), float(weight)))
        workload_paths.append(p)
    return workloads, workload_paths


def load_study(path, *, overrides_cli: dict | None = None, out_given: bool = False) -> StudySpec:
    """Read and validate a study file; every problem is reported at once.

    A study that validates runs: see the module docstring (validation equals run). ``out_given``: the
    caller writes elsewhere (``dse run --out``), so the file's ``output`` need not stay below its folder.
    """

    path = Path(path)
    data = load_yaml(path)
    file = str(path)
    if not isinstance(data, dict):
        f, (line, col) = locate(data, ())
        raise SpecError(f"{f}:{line}:{col}: a study is a YAML mapping, got {type(data).__name__}")
    whatif = [k for k in WHATIF_KEYS if k in data]
    if whatif:
        f, (line, col) = key_loc(data, (whatif[0],))
        raise SpecError(f"{f}:{line}:{col} {whatif[0]}: this is a what-if file (it has "
                        f"{' and '.join(repr(k) for k in whatif)}), not a study; run it with `dse whatif {path}`")
    P = _Problems(data, file)
    for k, why in UNREAD_KEYS.items():
        if k in data:
            P.at((k,), why, key=True)
    P.check_keys(TOP_KEYS + tuple(k for k in UNREAD_KEYS if k in data),
                 ("base", "objectives") + (() if "scenarios" in data else ("workloads",)))

    name = str(data.get("name") or path.stem)
    question = str(data.get("question") or "").strip()

    # workloads (one mapping or a list), each with an optional weight; or scenarios, each with its workloads
    workloads, workload_paths = _workloads(data, ("workloads",), file, P) if "workloads" in data else ([], [])
    scenarios = []
    if "scenarios" in data:
        if "workloads" in data:
            P.at(("scenarios",), "a study gives either workloads (one scenario) or scenarios (each with its "
                                 "workloads), not both; move the workloads into a scenario", key=True)
        sc = data["scenarios"]
        if not isinstance(sc, list) or not sc:
            P.at(("scenarios",), "expected a list of scenarios, e.g. [{name: batch 1, workloads: [{model: "
                                 "qwen3-8b, phase: decode, batch: 1, context: 8192}]}]")
            sc = []
        seen = set()
        for i, item in enumerate(sc):
            p = ("scenarios", i)
            if not isinstance(item, dict):
                P.at(p, f"expected a scenario mapping {{name, workloads, weight}}, got {item!r}")
                continue
            for k in item:
                if k not in ("name", "workloads", "weight"):
                    P.at(p + (k,), f"unknown key{did_you_mean(str(k), ('name', 'workloads', 'weight'))}; known "
                                   f"keys: name, workloads, weight", key=True)
            sname = str(item.get("name") or f"scenario {i + 1}")
            if sname in seen:
                P.at(p + ("name",), f"two scenarios are named {sname!r}; names must differ")
            seen.add(sname)
            weight = item.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
                P.at(p + ("weight",), f"expected a finite number > 0, got {weight!r}")
                weight = 1.0
            if "workloads" not in item:
                P.at(p, "missing required key 'workloads'")
                continue
            wls, paths = _workloads(item, p + ("workloads",), file, P)
            scenarios.append((sname, float(weight), tuple(wls)))
            if not workloads:
                workloads, workload_paths = wls, paths

    # base chip + overrides
    base, base_name = None, ""
    if "base" in data:
        b = data["base"]
        try:
            if isinstance(b, dict):
                base = chip_from_dict(b)
                base_name = base.name
            elif isinstance(b, str) and b.strip():
                candidate = (path.parent / b) if b.endswith((".yaml", ".yml")) else b
                base = load_chip(candidate)
                base_name = base.name
            else:
                P.at(("base",), f"expected a catalog chip name, a chip file or an inline chip, got {b!r}")
        except SpecError as e:
            P.items.extend(_located(m, file, data, ("base",), "base") for m in e.problems)
    if isinstance(data.get("overrides") or {}, dict):
        overrides = dict(data.get("overrides") or {})
    else:
        P.at(("overrides",), f"expected a mapping of chip parameter: value, got {data.get('overrides')!r}")
        overrides = {}
    for k, v in overrides.items():
        for msg in bare_number_problems({k: v}):
            P.at(("overrides", k), msg.split(": ", 1)[1])
    overrides.update(overrides_cli or {})
    if base is not None and overrides and not any(bare_number_problems({k: v}) for k, v in overrides.items()):
        try:
            base = with_overrides(base, overrides)
        except SpecError as e:
            P.items.extend(_located(m, file, data, ("overrides",), "overrides") for m in e.problems)
            base = None

    space = _space(data.get("space") or {}, P) if "space" in data else []
    for wls in ([w for _, _, w in scenarios] if scenarios else [workloads]):
        _check_workload_space(space, wls, P)
    params = _space_params(space, P)

    # constraints and objectives via the registry
    extra = {}
    if data.get("modules"):
        try:
            extra = registry.load_modules(data["modules"], base_dir=path.parent)
        except SpecError as e:
            P.items.extend(_located(m, file, data, ("modules",), "modules") for m in e.problems)
    constraints, objectives = [], []
    term_paths = {"constraints": _term_paths(data, "constraints"), "objectives": _term_paths(data, "objectives")}
    for key, fn in (("constraints", registry.constraints_from_yaml), ("objectives", registry.objectives_from_yaml)):
        if key in data:
            try:
                terms = fn(data[key], key, extra)
                (constraints if key == "constraints" else objectives).extend(terms)
            except SpecError as e:
                for m in e.problems:
                    parts = m.split(":", 1)[0].replace("[", ".").replace("]", "").split(".")
                    loc_path = tuple(int(x) if x.isdigit() else x for x in parts if x)
                    f, (line, col) = locate(data, loc_path)
                    P.items.append(f"{f}:{line}:{col} {m}")
    if "objectives" in data and not objectives and not P.items:
        P.at(("objectives",), "at least one objective is needed")
    for key, terms in (("constraints", constraints), ("objectives", objectives)):
        seen = set()
        for t, where in zip(terms, term_paths[key]):
            if t.name in seen:
                P.at(where, f"'{t.name}' is given twice; name each {key[:-1]} once")
            seen.add(t.name)

    # solver
    sv = data.get("solver") or {}
    if not isinstance(sv, dict):
        P.at(("solver",), f"expected a mapping, got {sv!r}")
        sv = {}
    kw = {}
    for k, v in sv.items():
        p = ("solver", k)
        if k in UNREAD_SOLVER_KEYS:
            P.at(p, UNREAD_SOLVER_KEYS[k], key=True)
        elif k not in SOLVER_KEYS:
            P.at(p, f"unknown key{did_you_mean(k, SOLVER_KEYS)}; known: {', '.join(SOLVER_KEYS)}", key=True)
        elif k == "method":
            if v not in METHODS:
                P.at(p, unknown_name("solver method", str(v), METHODS))
            else:
                kw[k] = v
        elif k in ("trials", "batch", "workers", "population", "resolution", "prescreen"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                P.at(p, f"expected an integer >= 1, got {v!r}")
            else:
                kw[k] = v
        elif k == "seed":
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**32:
                P.at(p, f"expected an integer in [0, 2**32), got {v!r}")
            else:
                kw[k] = v
        elif k == "storage":
            if v is not None and not isinstance(v, str):
                P.at(p, f"expected a storage URL string, got {v!r}")
            else:
                kw[k] = v
        elif k == "tiles":
            if v not in TILE_MODES:
                P.at(p, unknown_name("tile mode", str(v), TILE_MODES)
                     + " (heuristic: the evaluator's default tiles; cpsat: CP-SAT tiles for every design; "
                       "auto: cpsat where the budget check allows)")
            else:
                kw[k] = v
    settings = SolverSettings(**kw)
    if settings.method == "nsga2" and settings.population is not None and settings.population < 2:
        P.at(("solver", "population"), f"NSGA-II needs a population of at least 2, got {settings.population}")
    if settings.method != "nsga2" and settings.prescreen is not None and settings.prescreen > 1:
        P.at(("solver", "prescreen"), f"surrogate pre-screening of offspring is for method nsga2, not "
                                      f"{settings.method}; remove the key or set it to 1")

    out = data.get("output") or f"results/{name}"
    if not isinstance(out, str):
        P.at(("output",), f"expected a folder path, got {out!r}")
        out = f"results/{name}"

    # the output stays below the study's folder (a project's studies/ folder: the project), unless --out says
    # otherwise: a study file someone sends cannot write elsewhere (issue 21)
    home = path.parent.parent if path.parent.name == "studies" else path.parent
    output = Path(out)
    if not output.is_absolute():
        output = home / output
    if "output" in data and isinstance(out, str) and not out_given:
        where, inside = output.resolve(), home.resolve()
        if where != inside and inside not in where.parents:
            P.at(("output",), f"the output folder {where} is outside the study's folder {inside}; a study file "
                              f"writes only below it: give another folder with `dse run --out`")
    if P.items:
        raise SpecError(P.items)
    spec = StudySpec(path=path, name=name, question=question, workloads=tuple(workloads), base=base,
                     base_name=base_name, overrides=overrides, space=tuple(space), constraints=tuple(constraints),
                     objectives=tuple(objectives), solver=settings, output=output, raw=dict(data),
                     scenarios=tuple(scenarios))
    _check_runs(spec, params, P, workload_paths, term_paths)
    P.raise_if_any()
    return spec


# ------------------------------------------------------------------ solver.tiles (dse.study.tiles)


def system_problem() -> str:
    return ("solver.tiles: cpsat solves the tiles of one chip; a system of several chips (system.chips > 1, "
            "tensor or pipeline parallel) is one chip with summed resources in the evaluator, which the tile "
            "model does not build: use tiles: heuristic (or auto) for systems")


def has_systems(spec) -> bool:
    """Some design of the study is a system of several chips (its base, or a value of the space)."""
    bases = [spec.base]
    entry = next((e for e in spec.space if e.name == "base"), None)
    if entry is not None:
        bases = [load_chip(str(c)) for c in entry.choices]
    for b in bases:
        system = getattr(b, "system", None)
        if b is not None and system is not None and float(getattr(system, "chips", 1) or 1) != 1:
            return True
    for e in spec.space:
        if e.name == "system.chips":
            values = list(e.choices) if e.kind == "choice" else [e.low, e.high]
            if any(float(v) != 1 for v in values):
                return True
    return False


# ------------------------------------------------------------------ validation equals run


def _space_params(space, P: _Problems) -> list[Param] | None:
    """The design-space records the run builds (dse.space), each refusal located at its parameter."""
    out, ok = [], True
    for e in space:
        try:
            out.append(e.to_param())
        except SpecError as err:
            ok = False
            for m in err.problems:
                P.at(("space", e.name), re.sub(r"^parameter '[^']*': ", "", strip_location(m)))
    return out if ok else None


def _term_paths(data, key: str) -> list[tuple]:
    """Where each entry of a constraints/objectives section is written (the registry's order of terms)."""
    section = data.get(key)
    if isinstance(section, dict):
        return [(key, k) for k in section]
    if isinstance(section, list):
        return [(key, i) for i in range(len(section))]
    return []


def _raw(data, path: tuple):
    node = data
    for p in path:
        node = node[p]
    return node


def _value_paths(e: SpaceEntry) -> list[tuple]:
    """Where each value of an entry the run may apply is written: every choice, both ends of a range."""
    if e.kind == "choice":
        return [("choice", i) for i in range(len(e.choices))]
    return [(e.kind, 0), (e.kind, 1)]


def _bases(spec: StudySpec, P: _Problems) -> list[tuple[Any, tuple]]:
    """(chip, where) for every base chip the run builds: the study's base, or each choice of a base entry
    with the study's overrides applied (dse.study.problem._base_of)."""
    entry = next((e for e in spec.space if e.name == "base"), None)
    if entry is None:
        return [(spec.base, ("base",))]
    out = []
    for i, c in enumerate(entry.choices):
        where = ("space", "base", "choice", i)
        try:
            chip = load_chip(str(c))
            out.append((with_overrides(chip, spec.overrides) if spec.overrides else chip, where))
        except SpecError as err:
            P.items.extend(_located(m, P.file, P.data, where, ".".join(map(str, where))) for m in err.problems)
    return out


def _hint(chip, name: str) -> str:
    if name in ("hbm.layers", "hbm.capacity_per_layer") and chip.hbm is not None and chip.hbm.layers is None:
        per = format_quantity(chip.hbm.stack_capacity, "bytes")
        return (f"{chip.name} gives its HBM stacks as capacity_per_stack = {per}, not as layers x "
                f"capacity_per_layer; vary hbm.capacity_per_stack instead, or use a base chip whose stacks are "
                f"written as layers x capacity_per_layer (e.g. h200-sxm)")
    return ""


def _check_chip_space(spec: StudySpec, P: _Problems):
    """Every value of every chip parameter, applied as the run applies it; returns the run's chips.

    Categorical values (names: an HBM generation, a node) become chips with ``with_overrides`` (the
    run's variants, dse.study.problem._variant); numbers go into ``Chips.from_base`` on each variant,
    which takes only the chip's numeric inputs. Each number is also applied with ``with_overrides``:
    its type (a boolean parameter takes booleans, a count whole numbers) and bounds (units >= 1).
    Returns ``(variants, first)``: the chips the run builds and each numeric parameter's first value,
    or None when a problem was found.
    """
    n0 = len(P.items)
    bases = _bases(spec, P)
    if len(P.items) > n0 or not bases:
        return None
    chip_entries = [e for e in spec.space if e.name != "base" and not e.name.startswith(WORKLOAD_PARAM_PREFIX)]
    categorical = [e for e in chip_entries if e.kind == "choice" and all(isinstance(v, str) for v in e.choices)]
    numeric = [e for e in chip_entries if e not in categorical]

    def values_ok(e: SpaceEntry, chips) -> bool:
        for rel in _value_paths(e):
            raw = _raw(P.data, ("space", e.name) + rel)
            for chip in chips:
                try:
                    with_overrides(chip, {e.name: raw})
                except SpecError as err:
                    why = "; ".join(re.sub(r"^[\w.]+: ", "", strip_location(m), count=1) for m in err.problems)
                    why = _hint(chip, e.name) or why
                    P.at(("space", e.name) + rel, f"{e.name} cannot be {raw!r} on {chip.name}: {why}")
                    return False
        return True

    base_chips = [chip for chip, _ in bases]
    ok = [values_ok(e, base_chips) for e in categorical]
    if not all(ok):
        return None
    combos = list(itertools.islice(itertools.product(*[e.choices for e in categorical]), MAX_VARIANTS))
    variants = []
    for chip in base_chips:
        for combo in combos:
            items = {e.name: str(v) for e, v in zip(categorical, combo)}
            try:
                variants.append(with_overrides(chip, items) if items else chip)
            except SpecError as err:
                P.at(("space", categorical[0].name),
                     f"the values {items} together do not make a valid chip from {chip.name}: "
                     f"{'; '.join(strip_location(m) for m in err.problems)}")
                return None
    first = {}
    for e in numeric:
        value = e.choices[0] if e.kind == "choice" else e.low
        first[e.name] = value
        for chip in variants:  # the run's Chips.from_base takes only the chip's numeric inputs
            try:
                Chips.from_base(chip, 1, {e.name: np.array([float(value) if not isinstance(value, str) else 0.0])})
            except SpecError as err:
                why = _hint(chip, e.name) or "; ".join(strip_location(m) for m in err.problems)
                P.at(("space", e.name), f"a design cannot vary {e.name} on {chip.name}: {why}", key=True)
                break
        else:
            if values_ok(e, variants[:MAX_VALUE_CHIPS]) and any(isinstance(v, str) for v in e.choices):
                P.at(("space", e.name, "choice"), f"the choices of {e.name} mix names and numbers "
                                                  f"({list(e.choices)!r}); a parameter takes one kind of value")
    if len(P.items) > n0:
        return None
    return variants, {k: float(v) for k, v in first.items()}


def _check_terms(spec: StudySpec, variants, first: dict, P: _Problems, workload_paths, term_paths) -> None:
    """One design point of the space, evaluated as the run does; every constraint and objective on it.

    A term that needs a metric nothing produces (registry.column raises) is refused where the study
    names it. The point: the first chip the run builds with every numeric parameter at its first value.
    Only user errors (DseError) are reported; an exception of another kind is a bug, which the run
    reports as the crash it is (a worker's traceback), not as a mistake in the file.
    """
    try:
        chips = Chips.from_base(variants[0], 1, {k: np.array([v]) for k, v in first.items()})
        mix = [(build(body), w) for body, w in spec.workloads]
        with np.errstate(all="ignore"):
            metrics = evaluate_design(chips, mix)
    except DseError as err:
        where = workload_paths[0] if workload_paths else ("workloads",)
        P.at(where, f"the study's first design point ({variants[0].name}) cannot be evaluated: "
                    f"{'; '.join(strip_location(m) for m in getattr(err, 'problems', [str(err)]))}")
        return
    except Exception:  # noqa: BLE001 - a bug, not a user error: left to the run, where it stays a crash
        return
    for key, terms in (("constraints", spec.constraints), ("objectives", spec.objectives)):
        for t, where in zip(terms, term_paths[key]):
            try:
                with np.errstate(all="ignore"):
                    t(metrics)
            except SpecError as err:
                why = "; ".join(re.sub(r"; the metrics have: .*$", " (the evaluator computes no metric of that "
                                       r"name for this study's designs)", m) for m in err.problems)
                P.at(where, f"{t.kind} '{t.name}' cannot be computed: {why}")
            except Exception:  # noqa: BLE001 - a bug in the term's code is no user error: the run's crash
                pass


def _check_runs(spec: StudySpec, params, P: _Problems, workload_paths, term_paths) -> None:
    """What the run would refuse, refused here (each problem at the key or value that causes it)."""
    method = spec.solver.method
    raw_solver = P.data.get("solver") if isinstance(P.data.get("solver"), dict) else {}
    if spec.scenarios and method != "grid":
        P.at(("solver", "method") if "method" in raw_solver else ("scenarios",),
             f"a study with scenarios evaluates every design on each scenario, which the grid does; found "
             f"method {method!r}: use solver: {{method: grid}}")
    if "tiles" in raw_solver and method in ("cpsat_tiles", "cpsat_split"):
        P.at(("solver", "tiles"), f"method {method} does not search designs, so it has no tiles to choose "
                                  f"({'it solves the optimal tiles itself' if method == 'cpsat_tiles' else 'its roofline model has no tiles'}); "
                                  f"remove solver.tiles", key=True)
    elif spec.solver.tiles == "cpsat" and params is not None:
        try:
            systems = has_systems(spec)
        except DseError:
            systems = False
        if systems:
            P.at(("solver", "tiles"), system_problem().split(": ", 1)[1])
    if params is None:
        return
    if method == "cpsat_tiles":
        _check_cpsat_tiles(spec, P, workload_paths)
        return
    if not params:
        f, (line, col) = locate(P.data, ("space",))
        P.items.append(f"{f}:{line}:{col} space: the study has no design space: add a 'space:' section with at "
                       f"least one parameter, e.g. space: {{units: {{int: [64, 192]}}}}")
        return
    if method == "grid":
        ds = DesignSpace(tuple(params))
        size = ds.grid_size(spec.solver.resolution)
        if size > spec.solver.trials:
            axes = " x ".join(f"{p.name} {len(p.grid_values(spec.solver.resolution))}" for p in ds)
            given = "trials" in raw_solver
            P.at(("solver", "trials") if given else ("solver", "method") if "method" in raw_solver else ("solver",),
                 f"the grid has {size:,} points ({axes}), more than the budget of {spec.solver.trials:,} trials"
                 f"{'' if given else ' (the default)'}; raise solver.trials, narrow the space or the resolution, "
                 f"or use a sampling method (random, nsga2)")
            return
    checked = _check_chip_space(spec, P)
    if checked is None:
        return
    variants, first = checked
    if method == "cpsat_split":
        _check_cpsat_split(spec, params, P, term_paths)
        return
    _check_terms(spec, variants, first, P, workload_paths, term_paths)


def _check_cpsat_split(spec: StudySpec, params, P: _Problems, term_paths) -> None:
    """The split's own limits (dse.solvers.cpsat_split): its constraints, its parameters, its data step."""
    n0 = len(P.items)
    for t, where in zip(spec.constraints, term_paths["constraints"]):
        if t.name not in cpsat_split.CONSTRAINTS:
            P.at(where, f"the CP-SAT split (method cpsat_split) models {', '.join(cpsat_split.CONSTRAINTS)}; "
                        f"it cannot take '{t.name}' (use a search method such as nsga2 for it)")
    if [t.name for t in spec.objectives] not in (["latency_per_token"], ["tpot"]):
        P.at(("objectives",), f"the CP-SAT split minimizes the workload mix's time: give objectives [tpot] (or its "
                              f"alias latency_per_token), got {[t.name for t in spec.objectives]}")
    for e in spec.space:
        if e.name not in cpsat_split.SPLIT_PARAMS:
            P.at(("space", e.name), unknown_name("split parameter", e.name, cpsat_split.SPLIT_PARAMS)
                 + " (the CP-SAT split decides only these)", key=True)
    if len(P.items) > n0:
        return
    limits = {t.name: t.params.get("max") for t in spec.constraints}
    try:
        cpsat_split.split_data(spec.base, [(build(b), w) for b, w in spec.workloads], DesignSpace(tuple(params)),
                               tdp=limits.get("tdp"), reticle=limits.get("reticle"))
    except SpecError as err:
        msg = "; ".join(strip_location(m) for m in err.problems)
        where = next((("space", e.name) for e in spec.space if f"'{e.name}'" in msg or f" {e.name} " in msg),
                     ("base",) if "base chip" in msg else ("solver", "method"))
        P.at(where, f"the CP-SAT split cannot take this study: {msg}")
    except DseError:  # a SolverError (the split model's own consistency checks) is the run's to report
        pass


def _check_cpsat_tiles(spec: StudySpec, P: _Problems, workload_paths) -> None:
    """cpsat_tiles solves the tiles of each base chip as it is: its data step on every GEMM-like operator."""
    for e in spec.space:
        if e.name != "base":
            P.at(("space", e.name), f"method cpsat_tiles solves the optimal tiles of each base chip as it is; it "
                                    f"does not vary {e.name}: remove it (or use a search method such as nsga2)",
                 key=True)
    if P.items:
        return
    for chip, _where in _bases(spec, P):
        chips = Chips.from_specs([chip])
        for (body, _w), wpath in zip(spec.workloads, workload_paths):
            seen = set()
            for op in build(body).ops:
                key = dataclasses.replace(op, name="", count=1)  # identical operators: one data step
                if not (op.m > 0 and op.n > 0 and op.k > 0) or key in seen:
                    continue
                seen.add(key)
                try:
                    tile_data(op, chips)
                except SpecError as err:
                    P.at(wpath, f"cpsat_tiles cannot solve the tiles of {op.name} on {chip.name}: "
                                f"{'; '.join(strip_location(m) for m in err.problems)}")
                    break
                except DseError:  # a SolverError is the run's to report
                    pass
