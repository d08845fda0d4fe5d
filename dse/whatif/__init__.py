"""What-if: a baseline chip, a few proposals that change it, every workload on each.

A proposals file (YAML; `dse whatif FILE`, :func:`run_whatif`)::

    name: h100-upgrades
    question: What does each single change to an H100 buy for Qwen3-8B decode?
    baseline: h100-sxm              # catalog name, chip file, inline chip, or {chip: NAME, <overrides>}
    proposals:                      # name -> dotted chip overrides (the names of `dse show`, as in studies)
      hbm3e-6: {hbm.generation: hbm3e, hbm.stacks: 6}
      clock-2ghz: {clock: 2.0 GHz}
      fp8-2x: {matrix.flops_per_cycle.fp8_e4m3: x2}      # "xN" scales the current value
      h200: {chip: h200-sxm}                               # another chip: a device comparison
      rom: {evaluation: {weights_in_rom: true}}            # an evaluator option (seed 004 §4.7.3)
      h200-vs-h100: {chip: h200-sxm, compare_to: hbm3e-6}  # compare with another proposal
    evaluation: {fused_attention: true}                    # options for every design (optional)
    constraints: {tdp: {max: 1000 W}}                      # default: reticle, hbm_shoreline, tdp,
                                                           # power_density, fits_memory
    attention_block: {rows: 128, cols: 128, head_dim: 128, smem_bytes_per_cycle: 128}   # optional
    workloads:
      - qwen3-8b:decode:batch=1:context=8192               # the CLI short form, or a workload mapping
      - {model: qwen3-8b, phase: prefill, tokens: 4096}
    output: results/h100-upgrades                          # optional; `--out` overrides

A proposal's keys are dotted chip parameters plus the reserved ``chip``
(start from another chip instead of the baseline), ``compare_to`` (the design
its changes are measured against; default the baseline), ``evaluation``
(evaluator options merged over the file's), ``attention_block`` (per-design
``smem_bytes_per_cycle``, a value or "xN") and ``note``.

Per workload the result holds, for the baseline and each proposal: the joined
metrics of :func:`dse.evaluate.evaluate_design` (evaluator + area + cost; the same
join the searches use), every constraint's value (<= 0 feasible, the
magnitude is the violation in the constraint's unit), the change in % against
the reference design, the bound resource of every operator (which operators
changed bound), and an Amdahl decomposition of the time: the operators are
grouped by the resource that bounds them on the reference design (matrix,
vector, memory; "overhead" is the step overhead outside operators), and for
each group the reference time, its share ``f``, the proposal's time of the
same operators, their speed-up ``s`` and the share of the total change, so
that ``T_ref / T_new = 1 / sum(f / s)`` exactly (seed 004 §4.8.1: work on
one resource adds, overlapped resources take the max).

Example 4-1's attention pipeline (seed 004 §4.2.3) is the optional
``attention_block`` analysis: per design, one block's matrix, exponential
and shared-memory cycles on one compute unit from the design's own rates
(matrix FLOPs/cycle of ``format``, ``vector.exp_per_cycle``) and the
interval max(matrix, exp, smem) via :func:`dse.model.pipeline.attention_block_cycles`.
The chip schema has no shared-memory bandwidth, so it is a parameter of the
analysis (128 B/cycle per SM, seed 004 §4.2.3).

A proposal that breaks a constraint is a result, not an error; only a file
that cannot be read as a what-if is (all its problems at once, each located
``file:line:col key: message``).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse import registry
from dse.errors import DseError, SpecError, UnitError, did_you_mean, unknown_name
from dse.evaluate import evaluate_design
from dse.fileio import atomic_write
from dse.hardware import Chips, chip_from_dict, load_chip, param_dimension, with_overrides
from dse.model.evaluator import evaluate_workload
from dse.model.pipeline import attention_block_cycles
from dse.precision import get_format
from dse.spec.yamlio import load_yaml, locate
from dse.study.results import format_value
from dse.units import format_quantity, parse_quantity
from dse.workload import build, parse_workload
from dse.spec.problems import Problems as _Problems, strip_location as _strip_location  # noqa: F401

TOP_KEYS = ("name", "question", "baseline", "proposals", "workloads", "evaluation", "constraints",
            "attention_block", "output")
PROPOSAL_KEYS = ("chip", "compare_to", "evaluation", "attention_block", "note")
BASELINE = "baseline"

#: the constraints every what-if reports unless the file names its own
DEFAULT_CONSTRAINTS = ("reticle", "hbm_shoreline", "tdp", "power_density", "fits_memory")

#: evaluator options a what-if may set: name -> dimension ("bool" for flags)
EVALUATION_OPTIONS = {
    "weights_in_rom": "bool",
    "rom_bandwidth": "bandwidth",
    "rom_energy_per_byte": "energy_per_byte",
    "fused_attention": "bool",
}

#: Example 4-1 analysis: key -> (kind, default); the defaults are seed 004 §4.2.3's B200 SM block
ATTENTION_KEYS = {
    "rows": ("count", 128),
    "cols": ("count", 128),
    "head_dim": ("count", 128),
    "format": ("format", "bf16"),
    "smem_bytes_per_cycle": ("number", 128.0),
    "operand_bytes": ("number", 2.0),
}

#: resource classes of the time decomposition (the evaluator's bound index 0, 1, 2), then the rest
RESOURCES = ("matrix", "vector", "memory")
CLASSES = RESOURCES + ("overhead",)

#: rows of the side-by-side table: (metric, label, unit)
METRICS = (
    ("time_s", "step time", "s"),
    ("time_per_token_s", "time per token", "s"),
    ("tokens_per_s", "throughput", "tokens/s"),
    ("ttft_s", "time to first token", "s"),
    ("energy_per_token_j", "energy per token", "J"),
    ("power_w", "average power", "W"),
    ("peak_power_w", "peak power", "W"),
    ("sustained_clock_hz", "sustained clock", "Hz"),
    ("clock_ratio", "sustained / peak clock", ""),
    ("t_matrix_s", "matrix time", "s"),
    ("t_matrix_ideal_s", "matrix time, ideal (FLOPs / peak)", "s"),
    ("t_memory_s", "memory time", "s"),
    ("t_read_s", "read lower bound (weights + KV)", "s"),
    ("t_vector_s", "vector time", "s"),
    ("bytes_memory", "main-memory traffic", "bytes"),
    ("resident_bytes", "resident bytes", "bytes"),
    ("capacity_bytes", "memory capacity", "bytes"),
    ("max_batch", "max requests at this context", ""),
    ("die_area_mm2", "die area", "mm^2"),
    ("total_silicon_area_mm2", "total silicon area", "mm^2"),
    ("chip_cost_usd", "chip cost", "$"),
)


# ===================================================================== the spec


@dataclass(frozen=True)
class Design:
    """The baseline or one proposal: a validated chip plus how it was made."""

    name: str
    chip: Any  # ChipSpec
    source: str  # the chip the design starts from (catalog name, file, or "inline")
    overrides: Mapping[str, Any] = field(default_factory=dict)
    compare_to: str | None = None  # None for the baseline
    evaluation: Mapping[str, Any] = field(default_factory=dict)  # evaluator options, merged
    attention: Mapping[str, Any] = field(default_factory=dict)  # per-design attention-block settings
    note: str = ""


@dataclass(frozen=True)
class WhatIfSpec:
    path: Path | None
    name: str
    question: str
    designs: tuple[Design, ...]  # the baseline first
    workloads: tuple  # of dse.workload.Workload
    constraints: tuple  # of registry Terms
    attention_block: Mapping[str, Any] | None = None
    output: Path | None = None

    @property
    def baseline(self) -> Design:
        return self.designs[0]

    @property
    def proposals(self) -> tuple[Design, ...]:
        return self.designs[1:]

    def design(self, name: str) -> Design:
        for d in self.designs:
            if d.name == name:
                return d
        raise SpecError(unknown_name("design", name, [d.name for d in self.designs]))


def _supported_options() -> set[str]:
    return set(inspect.signature(evaluate_workload).parameters) - {"chips", "workload", "tiles", "breakdown"}


def _evaluation(section, path: tuple, P: _Problems) -> dict:
    out: dict[str, Any] = {}
    if section is None:
        return out
    if not isinstance(section, Mapping):
        P.at(path, f"expected a mapping of evaluator options ({', '.join(EVALUATION_OPTIONS)}), got {section!r}")
        return out
    supported = _supported_options()
    for k, v in section.items():
        p = path + (k,)
        if k not in EVALUATION_OPTIONS:
            P.at(p, unknown_name("evaluation option", str(k), EVALUATION_OPTIONS), key=True)
            continue
        if k not in supported:
            P.at(p, f"this evaluator does not support the option '{k}'", key=True)
            continue
        kind = EVALUATION_OPTIONS[k]
        if kind == "bool":
            if not isinstance(v, bool):
                P.at(p, f"expected true or false, got {v!r}")
                continue
            out[k] = v
        else:
            try:
                out[k] = parse_quantity(v, kind)
            except UnitError as e:
                P.at(p, str(e))
    return out


def _attention_section(section, path: tuple, P: _Problems) -> dict | None:
    if section is None:
        return None
    if not isinstance(section, Mapping):
        P.at(path, f"expected a mapping ({', '.join(ATTENTION_KEYS)}), got {section!r}")
        return None
    out = {k: d for k, (_, d) in ATTENTION_KEYS.items()}
    for k, v in section.items():
        p = path + (k,)
        if k not in ATTENTION_KEYS:
            P.at(p, unknown_name("attention_block key", str(k), ATTENTION_KEYS), key=True)
            continue
        kind = ATTENTION_KEYS[k][0]
        if kind == "format":
            try:
                out[k] = get_format(str(v)).name
            except SpecError as e:
                P.extend(p, e)
        elif kind == "count":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                P.at(p, f"expected an integer >= 1, got {v!r}")
            else:
                out[k] = v
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                P.at(p, f"expected a number > 0, got {v!r}")
            else:
                out[k] = float(v)
    return out


def _design_attention(section, path: tuple, P: _Problems) -> dict:
    """A proposal's ``attention_block``: ``smem_bytes_per_cycle`` as a number or "xN"."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        P.at(path, f"expected {{smem_bytes_per_cycle: value or 'xN'}}, got {section!r}")
        return {}
    out = {}
    for k, v in section.items():
        p = path + (k,)
        if k != "smem_bytes_per_cycle":
            P.at(p, unknown_name("proposal attention_block key", str(k), ("smem_bytes_per_cycle",)), key=True)
            continue
        factor = _multiplier(v)
        if factor is not None:
            out[k] = ("x", factor)
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            P.at(p, f"expected a number > 0 or a multiplier like 'x2', got {v!r}")
        else:
            out[k] = ("=", float(v))
    return out


def _multiplier(v) -> float | None:
    if isinstance(v, str) and v.strip().lower().startswith("x"):
        try:
            f = float(v.strip()[1:])
        except ValueError:
            return None
        return f if f > 0 else None
    return None


def _load_chip_ref(ref, base_dir: Path | None):
    """A catalog name, a chip file (relative to the what-if file) or an inline chip mapping -> (ChipSpec, label)."""

    if isinstance(ref, Mapping):
        spec = chip_from_dict(ref)
        return spec, "inline"
    if isinstance(ref, str) and ref.strip():
        if ref.endswith((".yaml", ".yml")):
            p = Path(ref)
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            return load_chip(p), ref
        spec = load_chip(ref)
        return spec, spec.name
    raise SpecError(f"expected a catalog chip name, a chip file or an inline chip mapping, got {ref!r}")


def _chip_and_overrides(body, path: tuple, P: _Problems, base_chip, base_dir, *, allow_reserved: bool):
    """A proposal-style mapping -> (chip, source, overrides, reserved values); None on any problem."""

    ok = True
    reserved, overrides = {}, {}
    for k, v in body.items():
        if k in PROPOSAL_KEYS:
            if not allow_reserved and k != "chip":
                P.at(path + (k,), f"'{k}' is only for proposals", key=True)
                ok = False
                continue
            reserved[k] = v
            continue
        try:
            param_dimension(str(k))
        except SpecError as e:
            hint = did_you_mean(str(k), PROPOSAL_KEYS)
            if hint:
                P.at(path + (k,), f"unknown key{hint}", key=True)
            else:
                P.extend(path + (k,), e, key=True)
            ok = False
            continue
        overrides[str(k)] = v
    chip, source = base_chip, BASELINE
    if "chip" in reserved:
        try:
            chip, source = _load_chip_ref(reserved["chip"], base_dir)
        except SpecError as e:
            P.extend(path + ("chip",), e)
            return None
    if chip is None or not ok:
        return None
    if overrides:
        try:
            chip = with_overrides(chip, overrides)
        except SpecError as e:
            P.extend(path, e)
            return None
    return chip, source, overrides, reserved


def _workloads(section, P: _Problems, file: str) -> list:
    items = section if isinstance(section, list) else [section]
    out, names = [], {}
    for i, item in enumerate(items):
        p = ("workloads", i) if isinstance(section, list) else ("workloads",)
        try:
            if isinstance(item, str):
                wl = build(parse_workload(item))
            elif isinstance(item, Mapping):
                wl = build(item)
            else:
                P.at(p, f"expected 'model:phase:key=value...' or a workload mapping, got {item!r}")
                continue
        except SpecError as e:
            for m in e.problems:
                if m.startswith(file):
                    P.items.append(m)
                else:
                    P.at(p, _strip_location(m))
            continue
        if wl.name in names:
            P.at(p, f"the same workload as workloads[{names[wl.name]}] ('{wl.name}')")
            continue
        names[wl.name] = i
        out.append(wl)
    return out


def spec_from_dict(data, path: str | Path | None = None) -> WhatIfSpec:
    """Validate a what-if mapping (as loaded by :func:`dse.spec.load_yaml`); every problem at once."""

    file = str(path) if path is not None else getattr(data, "file", "<input>")
    base_dir = Path(path).parent if path is not None else None
    if not isinstance(data, Mapping):
        f, (line, col) = locate(data, ())
        raise SpecError(f"{f}:{line}:{col}: a what-if file is a YAML mapping (baseline, proposals, workloads), "
                        f"got {type(data).__name__}")
    P = _Problems(data, file)
    P.check_keys(TOP_KEYS, ("baseline", "proposals", "workloads"))
    name = str(data.get("name") or (Path(path).stem if path is not None else "whatif"))
    question = str(data.get("question") or "").strip()

    evaluation = _evaluation(data.get("evaluation"), ("evaluation",), P)
    attention = _attention_section(data.get("attention_block"), ("attention_block",), P)

    # the baseline: a chip reference, or {chip: ..., <overrides>}
    designs: list[Design] = []
    base_chip = None
    if "baseline" in data:
        b = data["baseline"]
        if isinstance(b, Mapping) and "chip" in b:
            r = _chip_and_overrides(b, ("baseline",), P, None, base_dir, allow_reserved=False)
            if r is not None:
                base_chip, source, overrides, _ = r
                designs.append(Design(BASELINE, base_chip, source, overrides, None, dict(evaluation)))
        else:
            try:
                base_chip, source = _load_chip_ref(b, base_dir)
                designs.append(Design(BASELINE, base_chip, source, {}, None, dict(evaluation)))
            except SpecError as e:
                for m in e.problems:
                    P.items.append(m if m.startswith(file) else
                                   "{}:{}:{} baseline: {}".format(*_flat_loc(locate(data, ("baseline",))),
                                                                  _strip_location(m)))

    # proposals
    props = data.get("proposals")
    compare: dict[str, tuple] = {}
    if "proposals" in data:
        if not isinstance(props, Mapping) or not props:
            P.at(("proposals",), f"expected a mapping of proposal name: {{chip parameter: value, ...}}, got {props!r}")
        else:
            for pname, body in props.items():
                p = ("proposals", pname)
                if str(pname) == BASELINE:
                    P.at(p, "'baseline' is the name of the baseline; call the proposal something else", key=True)
                    continue
                if body is None or not isinstance(body, Mapping) or not body:
                    P.at(p, "expected a mapping of chip parameter: value (e.g. {hbm.stacks: 6}) or {chip: NAME}")
                    continue
                r = _chip_and_overrides(body, p, P, base_chip, base_dir, allow_reserved=True)
                reserved = {k: body[k] for k in PROPOSAL_KEYS if k in body}
                opts = dict(evaluation)
                n_before = len(P.items)
                opts.update(_evaluation(reserved.get("evaluation"), p + ("evaluation",), P))
                att = _design_attention(reserved.get("attention_block"), p + ("attention_block",), P)
                ref = reserved.get("compare_to", BASELINE)
                if not isinstance(ref, str):
                    P.at(p + ("compare_to",), f"expected the name of the baseline or of another proposal, got {ref!r}")
                    continue
                compare[str(pname)] = (ref, p + ("compare_to",))
                note = reserved.get("note", "")
                if r is None or len(P.items) > n_before:
                    continue
                chip, source, overrides, _ = r
                designs.append(Design(str(pname), chip, source, overrides, ref, opts, att, str(note or "")))
            known = [BASELINE] + [str(k) for k in props]
            for pname, (ref, p) in compare.items():
                if ref == pname:
                    P.at(p, "a proposal cannot be compared with itself")
                elif ref not in known:
                    P.at(p, unknown_name("design", ref, known))

    workloads = _workloads(data["workloads"], P, file) if "workloads" in data else []
    if "workloads" in data and not workloads and not P.items:
        P.at(("workloads",), "at least one workload is needed")

    section = data.get("constraints")
    constraints = []
    try:
        if section is None:
            constraints = [registry.bind_constraint(n) for n in DEFAULT_CONSTRAINTS]
        else:
            constraints = registry.constraints_from_yaml(section, "constraints")
    except SpecError as e:
        for m in e.problems:
            head = m.split(":", 1)[0].replace("[", ".").replace("]", "").split(".")
            loc_path = tuple(int(x) if x.isdigit() else x for x in head if x)
            f, (line, col) = locate(data, loc_path)
            P.items.append(f"{f}:{line}:{col} {m}")

    out = data.get("output")
    output = None
    if out is not None:
        if not isinstance(out, str):
            P.at(("output",), f"expected a folder path, got {out!r}")
        else:
            output = Path(out)
            if not output.is_absolute() and path is not None:
                pp = Path(path).parent
                output = (pp.parent / output) if pp.name == "studies" else (pp / output)

    if P.items:
        raise SpecError(P.items)
    return WhatIfSpec(Path(path) if path is not None else None, name, question, tuple(designs), tuple(workloads),
                      tuple(constraints), attention, output)


def _flat_loc(loc) -> tuple:
    f, (line, col) = loc
    return f, line, col


def load_proposals(path) -> WhatIfSpec:
    """Read and validate a what-if file; every problem is reported at once, located (SpecError)."""
    data = load_yaml(path)
    return spec_from_dict(data, path)


def quick_spec(base: str, sets: list[str] | None = None, workloads: list[str] | None = None,
               chips: list[str] | None = None, name: str | None = None) -> WhatIfSpec:
    """The spec of `dse whatif --base CHIP --set KEY=VALUE ... --chip OTHER ... --workload W ...`.

    All ``--set`` pairs form one proposal (named after them); each ``--chip``
    is a proposal of its own (a device comparison). Values are YAML scalars
    with units ("2.0 GHz", "6", "x2", "hbm3e").
    """
    import yaml


    problems = []
    overrides: dict[str, Any] = {}
    for item in sets or []:
        key, eq, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            problems.append(f"--set {item}: expected KEY=VALUE, e.g. --set hbm.stacks=6 or --set clock=2.0GHz")
            continue
        try:
            param_dimension(key)
        except SpecError as e:
            problems.extend(f"--set {item}: {m}" for m in e.problems)
            continue
        if key in overrides:
            problems.append(f"--set {item}: '{key}' given twice")
            continue
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        overrides[key] = parsed if isinstance(parsed, (int, float, bool, str)) else value
    if not workloads:
        problems.append("give at least one --workload, e.g. --workload qwen3-8b:decode:batch=1:context=8192")
    if not sets and not chips:
        problems.append("nothing to compare: give --set KEY=VALUE (a change to the base chip) or --chip OTHER")
    if problems:
        raise SpecError(problems)
    proposals: dict[str, Any] = {}
    set_name = ", ".join(f"{k}={v}" for k, v in overrides.items())
    if overrides:
        proposals[set_name] = overrides
    for c in chips or []:
        proposals[c if c not in proposals else f"{c} (chip)"] = {"chip": c}
    data = {"name": name or f"whatif-{base}", "baseline": base, "proposals": proposals,
            "workloads": list(workloads)}
    try:
        return spec_from_dict(data)
    except SpecError as e:
        msgs = []
        for m in e.problems:
            m = re.sub(r"^<input>:\d+:\d+:? ", "", _strip_location(m))
            m = m.replace(f"proposals.{set_name}: ", f"--set {' --set '.join(sets or [])}: ", 1)
            m = re.sub(r"^proposals\.([^:]+?)\.chip: ", r"--chip \1: ", m)
            m = re.sub(r"^baseline: ", f"--base {base}: ", m)
            m = re.sub(r"^workloads(\.\d+)?: ", "--workload: ", m)
            msgs.append(m)
        raise SpecError(msgs) from None


# ===================================================================== evaluation


@dataclass
class WhatIfResult:
    """The what-if's frames (long format; one row per workload x design, or x operator).

    ``metrics``: workload, design, chip, compare_to, the joined metrics, ``con.<name>`` per constraint,
    ``feasible``, ``violations`` and ``error`` (an evaluation that failed for that design).
    ``operators``: workload, design, op, count, t_op_s, t_matrix_s, t_vector_s, t_memory_s, bound.
    ``amdahl``: workload, design, compare_to, resource, base_time_s, fraction, new_time_s, speedup,
    delta_s, share_of_change (resources of the reference design's operators; see the module docstring).
    ``bound_changes``: workload, design, compare_to, op, count, before, after, t_before_s, t_after_s.
    ``attention``: design, matrix/exp/smem cycles, interval_cycles, bottleneck (None when not asked for).
    """

    spec: WhatIfSpec
    metrics: pd.DataFrame
    operators: pd.DataFrame
    amdahl: pd.DataFrame
    bound_changes: pd.DataFrame
    attention: pd.DataFrame | None = None

    # ---------------------------------------------------------------- look-ups
    def _row(self, workload: str | None, design: str) -> pd.Series:
        m = self.metrics
        wl = self._workload(workload)
        sel = m[(m.workload == wl) & (m.design == design)]
        if sel.empty:
            raise SpecError(unknown_name("design", design, list(dict.fromkeys(m.design))))
        return sel.iloc[0]

    def _workload(self, workload: str | None) -> str:
        names = [w.name for w in self.spec.workloads]
        if workload is None:
            return names[0]
        if workload not in names:
            raise SpecError(unknown_name("workload", workload, names))
        return workload

    def value(self, design: str, metric: str, workload: str | None = None):
        """A metric (or ``con.<name>``) of one design on one workload (default: the first workload)."""
        row = self._row(workload, design)
        if metric not in row.index:
            raise SpecError(unknown_name("metric", metric, list(row.index)))
        return row[metric]

    def ratio(self, design: str, metric: str, workload: str | None = None, against: str | None = None) -> float:
        """design's metric / the reference design's (its compare_to, or ``against``)."""
        ref = against or self.spec.design(design).compare_to or BASELINE
        return float(self.value(design, metric, workload)) / float(self.value(ref, metric, workload))

    def change(self, design: str, metric: str, workload: str | None = None, against: str | None = None) -> float:
        """Change of a metric in % against the design's reference (``compare_to``) or ``against``."""
        return _pct(float(self.value(design, metric, workload)),
                    float(self.value(against or self.spec.design(design).compare_to or BASELINE, metric, workload)))

    # ---------------------------------------------------------------- output
    def to_markdown(self) -> str:
        return _markdown(self)

    def to_dict(self) -> dict:
        return _as_dict(self)

    def to_json(self) -> str:
        return json.dumps(_clean(self.to_dict()), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def chart_png(self) -> bytes:
        return _chart(self)

    def write(self, out_dir) -> dict[str, Path]:
        """whatif.md, whatif.json and whatif.png in ``out_dir``, each written atomically."""

        root = Path(out_dir)
        root.mkdir(parents=True, exist_ok=True)
        return {
            "whatif.md": atomic_write("whatif.md", self.to_markdown(), root=root),
            "whatif.json": atomic_write("whatif.json", self.to_json(), root=root),
            "whatif.png": atomic_write("whatif.png", self.chart_png(), root=root),
        }


def _pct(new: float, ref: float) -> float:
    if not (math.isfinite(new) and math.isfinite(ref)) or ref == 0:
        return 0.0 if new == ref and math.isfinite(new) else math.nan
    return (new - ref) / abs(ref) * 100.0


def _evaluate_design(design: Design, workload, constraints) -> tuple[dict, pd.DataFrame | None, str | None]:
    """Joined metrics + constraint values of one design on one workload, and its operator table."""

    opts = dict(design.evaluation)
    try:
        dm = evaluate_design(Chips.from_specs([design.chip]), workload, breakdown=True, **opts)
        m, ops = dm.columns, dm.operators[0]
    except DseError as e:  # a design this workload cannot be evaluated on: a result, not a crash
        return {}, None, str(e)
    row: dict[str, Any] = {}
    for k, v in m.items():
        a = np.asarray(v).reshape(-1)
        row[k] = a[0].item() if a.size else math.nan
    row["bound"] = RESOURCES[int(row.pop("bound_code", 0))]
    violations = []
    for t in constraints:
        try:
            val = float(np.asarray(t(m)).reshape(-1)[0])
        except DseError as e:
            row[f"con.{t.name}"] = math.nan
            violations.append(f"{t.name}: cannot evaluate ({e})")
            continue
        row[f"con.{t.name}"] = val
        if not val <= 0:
            violations.append(f"{t.name}: +{val:.4g} {t.unit} over the limit")
    row["feasible"] = not violations
    row["violations"] = "; ".join(violations)
    frame = pd.DataFrame({
        "op": list(ops.names),
        "count": np.asarray(ops.count, dtype=float),
        "t_op_s": np.asarray(ops.t_op)[0],
        "t_matrix_s": np.asarray(ops.t_matrix)[0],
        "t_vector_s": np.asarray(ops.t_vector)[0],
        "t_memory_s": np.asarray(ops.t_memory)[0],
        "bound": np.array(RESOURCES)[np.asarray(ops.bound)[0].astype(int)],
    })
    return row, frame, None


def _amdahl(ref_ops: pd.DataFrame, new_ops: pd.DataFrame, t_ref: float, t_new: float) -> list[dict]:
    """Time of the operators grouped by the reference design's bound resource, before and after."""
    j = ref_ops.merge(new_ops, on="op", suffixes=("_ref", "_new"))
    w_ref = j["t_op_s_ref"] * j["count_ref"]
    w_new = j["t_op_s_new"] * j["count_new"]
    parts = {r: (float(w_ref[j.bound_ref == r].sum()), float(w_new[j.bound_ref == r].sum())) for r in RESOURCES}
    parts["overhead"] = tuple(x if abs(x) > 1e-9 * t else 0.0
                              for x, t in ((t_ref - float(w_ref.sum()), t_ref), (t_new - float(w_new.sum()), t_new)))
    total_delta = t_new - t_ref
    rows = []
    for r in CLASSES:
        b, n = parts[r]
        if b == 0 and n == 0:
            continue
        rows.append({
            "resource": r,
            "base_time_s": b,
            "fraction": b / t_ref if t_ref > 0 else math.nan,
            "new_time_s": n,
            "speedup": b / n if n > 0 else (math.nan if b == 0 else math.inf),
            "delta_s": n - b,
            "share_of_change": (n - b) / total_delta if total_delta != 0 else math.nan,
        })
    return rows


def _attention_rows(spec: WhatIfSpec) -> pd.DataFrame | None:
    cfg = spec.attention_block
    if cfg is None:
        return None
    rows = []
    for d in spec.designs:
        fpc = d.chip.matrix.flops_per_cycle.get(cfg["format"], math.nan)
        exp = d.chip.vector.exp_per_cycle if d.chip.vector is not None else math.nan
        smem = cfg["smem_bytes_per_cycle"]
        op, v = d.attention.get("smem_bytes_per_cycle", ("=", smem))
        smem = smem * v if op == "x" else v
        row = {"design": d.name, "chip": d.chip.name, "compare_to": d.compare_to,
               "matrix_flops_per_cycle": fpc, "exp_per_cycle": exp, "smem_bytes_per_cycle": smem}
        if not (fpc > 0 and exp > 0):
            missing = cfg["format"] if not fpc > 0 else "vector.exp_per_cycle"
            row.update(matrix_cycles=math.nan, exp_cycles=math.nan, smem_cycles=math.nan, interval_cycles=math.nan,
                       bottleneck=f"- (no {missing})")
            rows.append(row)
            continue
        c = attention_block_cycles(cfg["rows"], cfg["cols"], cfg["head_dim"], matrix_flops_per_cycle=fpc,
                                   exp_per_cycle=exp, smem_bytes_per_cycle=smem, operand_bytes=cfg["operand_bytes"])
        cyc = {"matrix": float(c.matrix), "exp": float(c.exp), "smem": float(c.smem)}
        row.update(matrix_cycles=cyc["matrix"], exp_cycles=cyc["exp"], smem_cycles=cyc["smem"],
                   interval_cycles=float(c.interval),
                   bottleneck=" = ".join(k for k, x in cyc.items() if x == float(c.interval)))
        rows.append(row)
    df = pd.DataFrame(rows)
    ref = {r["design"]: r["interval_cycles"] for r in rows}
    df["speedup"] = [ref.get(r["compare_to"] or BASELINE, math.nan) / r["interval_cycles"]
                     if r["compare_to"] else 1.0 for r in rows]
    return df


def run_whatif(path_or_spec) -> WhatIfResult:
    """Evaluate a what-if (a file path, a mapping, or a :class:`WhatIfSpec`) -> :class:`WhatIfResult`."""
    if isinstance(path_or_spec, WhatIfSpec):
        spec = path_or_spec
    elif isinstance(path_or_spec, Mapping):
        spec = spec_from_dict(path_or_spec)
    else:
        spec = load_proposals(path_or_spec)
    rows, op_frames, amdahl_rows, change_rows = [], [], [], []
    for wl in spec.workloads:
        per: dict[str, tuple[dict, pd.DataFrame | None]] = {}
        for d in spec.designs:
            row, ops, err = _evaluate_design(d, wl, spec.constraints)
            if err is not None:
                row = {"feasible": False, "violations": ""}
            head = {"workload": wl.name, "design": d.name, "chip": d.chip.name, "compare_to": d.compare_to}
            rows.append({**head, **row, "error": err})
            per[d.name] = (row, ops)
            if ops is not None:
                op_frames.append(ops.assign(workload=wl.name, design=d.name))
        for d in spec.proposals:
            (row, ops), (ref_row, ref_ops) = per[d.name], per[d.compare_to]
            if ops is None or ref_ops is None:
                continue
            for a in _amdahl(ref_ops, ops, ref_row["time_s"], row["time_s"]):
                amdahl_rows.append({"workload": wl.name, "design": d.name, "compare_to": d.compare_to, **a})
            j = ref_ops.merge(ops, on="op", suffixes=("_ref", "_new"))
            for _, r in j[j.bound_ref != j.bound_new].iterrows():
                change_rows.append({"workload": wl.name, "design": d.name, "compare_to": d.compare_to,
                                    "op": r.op, "count": r.count_ref, "before": r.bound_ref, "after": r.bound_new,
                                    "t_before_s": r.t_op_s_ref, "t_after_s": r.t_op_s_new})
    metrics = pd.DataFrame(rows)
    operators = pd.concat(op_frames, ignore_index=True) if op_frames else pd.DataFrame()
    if not operators.empty:
        rest = [c for c in operators.columns if c not in ("workload", "design")]
        operators = operators[["workload", "design"] + rest]
    amdahl = pd.DataFrame(amdahl_rows, columns=["workload", "design", "compare_to", "resource", "base_time_s",
                                                "fraction", "new_time_s", "speedup", "delta_s", "share_of_change"])
    changes = pd.DataFrame(change_rows, columns=["workload", "design", "compare_to", "op", "count", "before",
                                                 "after", "t_before_s", "t_after_s"])
    return WhatIfResult(spec, metrics, operators, amdahl, changes, _attention_rows(spec))


# ===================================================================== reports


def _time_by_resource(row) -> dict[str, float]:
    """The design's time split by the resource bounding each of its own operators (plus overhead)."""
    out = {r: float(row.get(f"time_{r}_bound_s", math.nan)) for r in RESOURCES}
    total = float(row.get("time_s", math.nan))
    rest = total - sum(out.values())
    out["overhead"] = (rest if rest > 1e-9 * total else 0.0) if math.isfinite(total) else math.nan
    return out


def _fmt(v, unit: str = "") -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    return format_value(v, unit)


def _fmt_pct(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    if p == 0:
        return "0%"
    if abs(p) < 0.05:
        return f"{p:+.2g}%"
    if p >= 900:  # ten times or more: a factor reads better than a percentage
        return f"{1 + p / 100:.3g}x"
    return f"{p:+.1f}%"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A markdown table; the first ``left`` columns are text (left-aligned), the rest numbers."""
    out = ["| " + " | ".join(_cell(h) for h in header) + " |",
           "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _describe(d: Design) -> str:
    parts = []
    if d.name != BASELINE and d.source != BASELINE:
        parts.append(f"chip {d.source}")
    parts += [f"{k} = {v}" for k, v in d.overrides.items()]
    parts += [f"evaluation.{k} = {_option_text(k, v)}" for k, v in d.evaluation.items()]
    parts += [f"attention_block.{k} = {'x' if op == 'x' else ''}{v:g}" for k, (op, v) in d.attention.items()]
    return ", ".join(parts)


def _option_text(key: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if EVALUATION_OPTIONS.get(key) == "energy_per_byte":
        return f"{float(value) * 1e12:.4g} pJ/B"
    return format_quantity(float(value), EVALUATION_OPTIONS.get(key, ""))


def _markdown(res: WhatIfResult) -> str:
    spec = res.spec
    L = [f"# What-if: {spec.name}", ""]
    if spec.question:
        L += [f"**Question.** {spec.question}", ""]
    L += [f"Baseline: **{spec.baseline.chip.name}**" + (f" ({_describe(spec.baseline)})" if _describe(spec.baseline)
                                                         else ""), ""]
    L += _table(["proposal", "changes", "compared with", "note"],
                [[d.name, _describe(d) or "-", d.compare_to or "-", d.note or ""] for d in spec.proposals], left=4)
    L += ["", "Constraints (value <= 0 is feasible; a positive value is the violation): "
          + ", ".join(f"{t.name} ({t.unit}: {t.formula})" for t in spec.constraints), ""]
    m = res.metrics
    bad = m[~m.feasible.astype(bool) | m.error.notna()]
    if len(bad):
        L += ["**Violations**", ""]
        for _, r in bad.iterrows():
            what = r["error"] if isinstance(r["error"], str) else r["violations"]
            L.append(f"- {r.design} on `{r.workload}`: {what}")
        L.append("")
    units = {t.name: t.unit for t in spec.constraints}
    for wl in spec.workloads:
        L += [f"## `{wl.name}`", ""]
        sub = m[m.workload == wl.name].set_index("design")
        header = ["metric", f"baseline ({spec.baseline.chip.name})"]
        for d in spec.proposals:
            header += [d.name, f"Δ vs {d.compare_to}"]
        rows = []
        for key, label, unit in METRICS:
            if key not in sub.columns or sub[key].isna().all():
                continue
            r = [label, _fmt(sub.at[BASELINE, key], unit)]
            for d in spec.proposals:
                r += [_fmt(sub.at[d.name, key], unit), _fmt_pct(_pct(float(sub.at[d.name, key]),
                                                                     float(sub.at[d.compare_to, key])))]
            rows.append(r)
        r = ["bound", str(sub.at[BASELINE, "bound"])]
        for d in spec.proposals:
            a, b = sub.at[d.compare_to, "bound"], sub.at[d.name, "bound"]
            r += [str(b), "" if a == b else f"was {a}"]
        rows.append(r)
        for t in spec.constraints:
            col = f"con.{t.name}"
            r = [f"constraint {t.name} ({units[t.name]})", _con(sub.at[BASELINE, col], t.unit)]
            for d in spec.proposals:
                r += [_con(sub.at[d.name, col], t.unit), ""]
            rows.append(r)
        r = ["feasible", "yes" if sub.at[BASELINE, "feasible"] else "NO"]
        for d in spec.proposals:
            r += ["yes" if sub.at[d.name, "feasible"] else "NO", ""]
        rows.append(r)
        L += _table(header, rows) + [""]

        # time by resource (each design's own bounds)
        L += ["**Time by resource** (each operator counted under the resource that bounds it on that design)", ""]
        trows = []
        for d in spec.designs:
            tb = _time_by_resource(sub.loc[d.name])
            trows.append([d.name] + [_fmt(tb[c], "s") for c in CLASSES] + [_fmt(sub.at[d.name, "time_s"], "s")])
        L += _table(["design", "matrix-bound", "vector-bound", "memory-bound", "overhead", "total"], trows) + [""]

        # operators that changed bound
        ch = res.bound_changes[res.bound_changes.workload == wl.name]
        L += ["**Operators whose bound changed**", ""]
        if ch.empty:
            L += ["None: every operator is bound by the same resource as on its reference design.", ""]
        else:
            crows = [[r.design, r.op, f"{r['count']:g}", r.before, r.after, _fmt(r.t_before_s, "s"),
                      _fmt(r.t_after_s, "s")] for _, r in ch.iterrows()]
            L += _table(["proposal", "operator", "count", "before", "after", "time before", "time after"], crows,
                        left=2) + [""]

        # Amdahl decomposition
        am = res.amdahl[res.amdahl.workload == wl.name]
        if not am.empty:
            L += ["**Where the time went** (operators grouped by the resource bounding them on the reference "
                  "design; T_ref / T_new = 1 / sum(f / s))", ""]
            arows = []
            for _, r in am.iterrows():
                arows.append([r.design, r.resource, f"{r.fraction * 100:.1f}%" if math.isfinite(r.fraction) else "-",
                              _fmt(r.base_time_s, "s"), _fmt(r.new_time_s, "s"),
                              f"{r.speedup:.3g}x" if math.isfinite(r.speedup) else "-",
                              _fmt(r.delta_s, "s"),
                              _share(r.share_of_change)])
            L += _table(["proposal", "resource (on reference)", "share f of reference time", "reference time",
                         "proposal time", "speed-up s", "Δ time", "share of the change"], arows, left=2) + [""]
    if res.attention is not None:
        cfg = spec.attention_block
        L += ["## Attention block pipeline (seed 004 §4.2.3, Example 4-1)", "",
              f"One {cfg['rows']} x {cfg['cols']} block, head dim {cfg['head_dim']}, {cfg['format']} operands "
              f"on one compute unit; interval = max(matrix, exp, smem) cycles.", ""]
        arows = []
        for _, r in res.attention.iterrows():
            arows.append([r.design, r.chip, f"{r.matrix_flops_per_cycle:g}", f"{r.exp_per_cycle:g}",
                          f"{r.smem_bytes_per_cycle:g}", _fmt(r.matrix_cycles), _fmt(r.exp_cycles),
                          _fmt(r.smem_cycles), _fmt(r.interval_cycles), r.bottleneck,
                          f"{r.speedup:.3g}x vs {r.compare_to}" if isinstance(r.compare_to, str) else "-"])
        L += _table(["design", "chip", "matrix FLOP/cycle", "exp/cycle", "smem B/cycle", "matrix cycles",
                     "exp cycles", "smem cycles", "interval", "bottleneck", "throughput"], arows, left=2) + [""]
    return "\n".join(L).rstrip() + "\n"


def _share(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return "0.0%" if abs(x) < 5e-4 else f"{x * 100:.1f}%"


def _con(v, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"

    text = format_value(float(v), unit)
    return f"+{text} VIOLATED" if v > 0 else f"{text} ok"


def _records(df: pd.DataFrame, drop=()) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in drop} for r in df.to_dict(orient="records")]


def _as_dict(res: WhatIfResult) -> dict:
    spec = res.spec
    out: dict[str, Any] = {
        "name": spec.name,
        "question": spec.question,
        "file": str(spec.path) if spec.path else None,
        "designs": [{"name": d.name, "chip": d.chip.name, "source": d.source,
                     "overrides": {k: str(v) for k, v in d.overrides.items()}, "compare_to": d.compare_to,
                     "evaluation": dict(d.evaluation),
                     "attention_block": {k: f"{'x' if op == 'x' else ''}{v:g}" for k, (op, v) in d.attention.items()},
                     "note": d.note} for d in spec.designs],
        "constraints": [{"name": t.name, "unit": t.unit, "formula": t.formula, "params": dict(t.params)}
                        for t in spec.constraints],
        "workloads": [],
    }
    m = res.metrics
    for wl in spec.workloads:
        sub = m[m.workload == wl.name]
        entry: dict[str, Any] = {"name": wl.name, "phase": wl.phase, "designs": {}, "changes_pct": {},
                                 "bound_changes": {}, "amdahl": {}, "operators": {}}
        for _, r in sub.iterrows():
            metrics = {k: r[k] for k in r.index if k not in ("workload", "design", "chip", "compare_to", "error",
                                                             "violations", "feasible") and not k.startswith("con.")}
            entry["designs"][r.design] = {
                "chip": r.chip, "compare_to": r.compare_to,
                "feasible": bool(r.feasible) and not isinstance(r.error, str),
                "violations": [v for v in str(r.violations or "").split("; ") if v],
                "error": r.error,
                "constraints": {t.name: {"value": r[f"con.{t.name}"], "unit": t.unit,
                                         "ok": bool(r[f"con.{t.name}"] <= 0)} for t in spec.constraints
                                if f"con.{t.name}" in r.index},
                "time_by_resource_s": _time_by_resource(r),
                "metrics": metrics,
            }
        idx = sub.set_index("design")
        for d in spec.proposals:
            if d.name not in idx.index:
                continue
            entry["changes_pct"][d.name] = {
                k: _pct(float(idx.at[d.name, k]), float(idx.at[d.compare_to, k]))
                for k, _, _ in METRICS if k in idx.columns}
            ch = res.bound_changes
            entry["bound_changes"][d.name] = _records(ch[(ch.workload == wl.name) & (ch.design == d.name)],
                                                      drop=("workload", "design"))
            am = res.amdahl
            entry["amdahl"][d.name] = _records(am[(am.workload == wl.name) & (am.design == d.name)],
                                               drop=("workload", "design"))
        if not res.operators.empty:
            ops = res.operators[res.operators.workload == wl.name]
            for name, g in ops.groupby("design", sort=False):
                entry["operators"][name] = _records(g, drop=("workload", "design"))
        out["workloads"].append(entry)
    if res.attention is not None:
        out["attention_block"] = {"config": dict(spec.attention_block),
                                  "designs": {r["design"]: r for r in _records(res.attention)}}
    return out


def _clean(o):
    """JSON-ready: numpy scalars to Python, NaN and infinities to None."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, Path):
        return str(o)
    return o


_COLORS = {"matrix": "#4C72B0", "vector": "#55A868", "memory": "#C44E52", "overhead": "#8C8C8C"}


def _chart(res: WhatIfResult) -> bytes:
    """Grouped bars: per workload, each design's time by resource (matrix-, vector-, memory-bound, overhead)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    spec = res.spec
    n = len(spec.workloads)
    names = [d.name for d in spec.designs]
    width = max(6.0, 1.1 * len(names) + 2.0)
    fig = Figure(figsize=(width, 3.2 * n + 0.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    m = res.metrics
    x = np.arange(len(names))
    classes = [c for c in CLASSES]
    bw = 0.8 / len(classes)
    for ax, wl in zip(axes, spec.workloads):
        sub = m[m.workload == wl.name].set_index("design")
        data = {c: [] for c in classes}
        for d in names:
            tb = (_time_by_resource(sub.loc[d]) if not isinstance(sub.loc[d, "error"], str)
                  else {c: math.nan for c in classes})
            for c in classes:
                data[c].append(tb[c])
        for i, c in enumerate(classes):
            vals = np.nan_to_num(np.array(data[c], dtype=float))
            ax.bar(x + (i - (len(classes) - 1) / 2) * bw, vals, bw, label=f"{c}-bound" if c != "overhead" else c,
                   color=_COLORS[c])
        bad = [not bool(sub.loc[d, "feasible"]) for d in names]
        ax.set_xticks(x)
        labels = ax.set_xticklabels([f"{d} *" if b else d for d, b in zip(names, bad)], rotation=20, ha="right",
                                    fontsize=8)
        for lab, b in zip(labels, bad):
            if b:
                lab.set_color("#C44E52")
        ax.yaxis.set_major_formatter(EngFormatter(unit="s"))
        ax.set_ylabel("time per step")
        ax.set_title(wl.name, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, ncols=4, loc="upper right")
    fig.suptitle(f"What-if {spec.name}: time by resource (* violates a constraint)", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
