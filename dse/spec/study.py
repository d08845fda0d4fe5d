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
    objectives: [latency_per_token, energy_per_token, die_area]
    solver: {method: nsga2, trials: 2000, batch: 200, seed: 0}
    output: results/qwen3-8b-decode-chip
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse import registry
from dse.errors import SpecError, UnitError, did_you_mean, unknown_name
from dse.hardware import chip_from_dict, load_chip, param_dimension, with_overrides
from dse.spec import load_yaml
from dse.spec.problems import Problems as _Problems
from dse.spec.yamlio import LocDict, locate
from dse.units import parse_quantity
from dse.workload import build

TOP_KEYS = ("name", "question", "workloads", "base", "overrides", "space", "constraints", "objectives", "solver",
            "output", "modules", "technology")
SOLVER_KEYS = ("method", "trials", "batch", "seed", "workers", "storage", "population", "resolution", "tiles")
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
    tiles: str = "heuristic"


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
    import re


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


def load_study(path, *, overrides_cli: dict | None = None) -> StudySpec:
    """Read and validate a study file; every problem is reported at once."""

    path = Path(path)
    data = load_yaml(path)
    file = str(path)
    if not isinstance(data, dict):
        f, (line, col) = locate(data, ())
        raise SpecError(f"{f}:{line}:{col}: a study is a YAML mapping, got {type(data).__name__}")
    P = _Problems(data, file)
    P.check_keys(TOP_KEYS, ("workloads", "base", "objectives"))

    name = str(data.get("name") or path.stem)
    question = str(data.get("question") or "").strip()

    # workloads (one mapping or a list), each with an optional weight
    workloads = []
    wl = data.get("workloads")
    if "workloads" in data and (wl is None or wl == []):
        P.at(("workloads",), "expected at least one workload, e.g. {model: qwen3-8b, phase: decode, batch: 1, "
                             "context: 8192}")
    if wl is not None:
        items = wl if isinstance(wl, list) else [wl]
        for i, item in enumerate(items):
            p = ("workloads", i) if isinstance(wl, list) else ("workloads",)
            if not isinstance(item, dict):
                P.at(p, f"expected a workload mapping like {{model: qwen3-8b, phase: decode, ...}}, got {item!r}")
                continue
            body = dict(item)
            weight = body.pop("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                P.at(p + ("weight",), f"expected a number > 0, got {weight!r}")
                continue
            body = LocDict(body)
            body.file, body.loc = getattr(item, "file", file), getattr(item, "loc", (1, 1))
            body.key_locs, body.value_locs = getattr(item, "key_locs", {}), getattr(item, "value_locs", {})
            try:
                build(body)
            except SpecError as e:
                for msg in e.problems:
                    P.items.append(msg if msg.startswith(file) else f"{file}:{locate(data, p)[1][0]}:{locate(data, p)[1][1]} {'.'.join(map(str, p))}: {msg}")
                continue
            workloads.append((dict(body), float(weight)))

    # base chip + overrides
    base, base_name = None, ""
    if "base" in data:
        b = data["base"]
        try:
            if isinstance(b, dict):
                base = chip_from_dict(b)
                base_name = base.name
            elif isinstance(b, str):
                candidate = (path.parent / b) if b.endswith((".yaml", ".yml")) else b
                base = load_chip(candidate)
                base_name = base.name
            else:
                P.at(("base",), f"expected a catalog chip name, a chip file or an inline chip, got {b!r}")
        except SpecError as e:
            f, (line, col) = locate(data, ("base",))
            P.items.extend(m if ":" in m.split(" ")[0] else f"{f}:{line}:{col} base: {m}" for m in e.problems)
    if isinstance(data.get("overrides") or {}, dict):
        overrides = dict(data.get("overrides") or {})
    else:
        P.at(("overrides",), f"expected a mapping of chip parameter: value, got {data.get('overrides')!r}")
        overrides = {}
    overrides.update(overrides_cli or {})
    if base is not None and overrides:
        try:
            base = with_overrides(base, overrides)
        except SpecError as e:
            f, (line, col) = locate(data, ("overrides",))
            P.items.extend(f"{f}:{line}:{col} overrides: {m}" for m in e.problems)

    space = _space(data.get("space") or {}, P) if "space" in data else []
    _check_workload_space(space, workloads, P)

    # constraints and objectives via the registry
    extra = {}
    if data.get("modules"):
        try:
            extra = registry.load_modules(data["modules"], base_dir=path.parent)
        except SpecError as e:
            f, (line, col) = locate(data, ("modules",))
            P.items.extend(f"{f}:{line}:{col} modules: {m}" for m in e.problems)
    constraints, objectives = [], []
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

    # solver
    sv = data.get("solver") or {}
    settings = SolverSettings()
    if not isinstance(sv, dict):
        P.at(("solver",), f"expected a mapping, got {sv!r}")
        sv = {}
    kw = {}
    for k, v in sv.items():
        p = ("solver", k)
        if k not in SOLVER_KEYS:
            P.at(p, f"unknown key{did_you_mean(k, SOLVER_KEYS)}; known: {', '.join(SOLVER_KEYS)}", key=True)
        elif k == "method":
            if v not in METHODS:
                P.at(p, unknown_name("solver method", str(v), METHODS))
            else:
                kw[k] = v
        elif k in ("trials", "batch", "workers", "population", "resolution"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                P.at(p, f"expected an integer >= 1, got {v!r}")
            else:
                kw[k] = v
        elif k == "seed":
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                P.at(p, f"expected an integer >= 0, got {v!r}")
            else:
                kw[k] = v
        elif k == "storage":
            if v is not None and not isinstance(v, str):
                P.at(p, f"expected a storage URL string, got {v!r}")
            else:
                kw[k] = v
        elif k == "tiles":
            if v not in ("heuristic", "cpsat"):
                P.at(p, unknown_name("tile method", str(v), ("heuristic", "cpsat")))
            else:
                kw[k] = v
    settings = SolverSettings(**kw)
    if settings.method == "grid":
        pass

    out = data.get("output") or f"results/{name}"
    if not isinstance(out, str):
        P.at(("output",), f"expected a folder path, got {out!r}")
        out = f"results/{name}"

    if P.items:
        raise SpecError(P.items)
    output = Path(out)
    if not output.is_absolute():
        output = (path.parent.parent / output) if path.parent.name == "studies" else (path.parent / output)
    return StudySpec(path=path, name=name, question=question, workloads=tuple(workloads), base=base,
                     base_name=base_name, overrides=overrides, space=tuple(space), constraints=tuple(constraints),
                     objectives=tuple(objectives), solver=settings, output=output, raw=dict(data))
