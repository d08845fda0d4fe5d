"""What-if files: the proposals file (or the CLI's quick question) -> a validated :class:`WhatIfSpec`.

The file format is described in :mod:`dse.whatif`. Every problem of a file is
reported at once, located ``file:line:col key: message``. A proposal's chip
is its base chip with the proposal's dotted overrides applied by
:func:`dse.hardware.with_overrides`: the same override rules
(:func:`dse.hardware.override_rules`) as chip files, study spaces and CP-SAT.
"""

from __future__ import annotations

import math

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse import registry
from dse.errors import SpecError, UnitError, did_you_mean, unknown_name
from dse.hardware import Chips, chip_from_dict, load_chip, param_dimension, with_overrides
from dse.hardware.overrides import bare_number_problems
from dse.model.area import package_area_for
from dse.model.evaluator import evaluate_workload
from dse.precision import get_format
from dse.spec.problems import Problems as _Problems, strip_location as _strip_location
from dse.spec.yamlio import load_yaml, locate
from dse.units import format_quantity, parse_quantity
from dse.workload import anchored, build, parse_workload

TOP_KEYS = ("name", "question", "baseline", "proposals", "workloads", "evaluation", "constraints",
            "attention_block", "output")
PROPOSAL_KEYS = ("chip", "compare_to", "evaluation", "attention_block", "die_area", "fill", "note")
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
    die_area: float | None = None  # mm^2 the proposal states for its die (``die_area``), None if it states none
    fill: tuple[str, float] | None = None  # the parameter solved for that die area and its value (SI)


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
        return f if math.isfinite(f) and f > 0 else None
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
        bare = bare_number_problems({str(k): v})
        if bare:
            P.at(path + (k,), bare[0].split(": ", 1)[1])
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


#: the default parameter a stated die area is filled with: the last-level cache (the what-if's "a bigger die")
DEFAULT_FILL = "l2"


def die_area_mm2(chip) -> float:
    """The modelled die area of a chip, as the what-if's evaluation computes it (dse.model.area)."""
    return float(package_area_for(Chips.from_specs([chip])).die_area_mm2[0])


def fill_to_die_area(chip, target_mm2: float, fill: str = DEFAULT_FILL):
    """``chip`` with ``fill`` (an on-chip memory figure in bytes: ``l2``, ``local_buffer``, ...) set so that the
    area model gives a die of ``target_mm2``: (chip, value). The proposal states its die; the area model says how
    much of what it fills the die with fits (issue 16: a 900 mm^2 die is a die of 900 mm^2 however the model's
    coefficients are refitted). The die area is affine in a memory's bytes, so Newton's step with the slope of
    the model itself converges at once; the result is checked to 1e-9 relative. SpecError where the area does
    not grow with ``fill`` or the target is smaller than the design with none of it."""
    if param_dimension(fill) != "bytes":
        raise SpecError(f"'{fill}' is not an on-chip memory size (the die area is filled with bytes of "
                        f"SRAM: l2, local_buffer, register_file, accumulator, sram.capacity)")
    current = chip.flat().get(fill)
    v0 = float(current) if isinstance(current, (int, float)) and math.isfinite(current) and current > 0 \
        else float(2**20)  # unset (or 0): start from 1 MiB

    def area(v: float):
        c = with_overrides(chip, {fill: float(v)})
        return c, die_area_mm2(c)

    _, a0 = area(v0)
    _, a1 = area(2 * v0)
    slope = (a1 - a0) / v0  # mm^2 per byte
    if not slope > 0:
        raise SpecError(f"the modelled die area does not depend on {fill}, so it cannot make a "
                        f"{target_mm2:g} mm^2 die")
    v = v0 + (target_mm2 - a0) / slope
    for _ in range(8):
        if v < 0:
            raise SpecError(f"{target_mm2:g} mm^2 is smaller than this design with no {fill} "
                            f"({a0 - v0 * slope:.1f} mm^2 by the area model)")
        c, a = area(v)
        if abs(a - target_mm2) <= 1e-9 * target_mm2:
            return c, v
        v += (target_mm2 - a) / slope
    raise SpecError(f"the area model does not reach {target_mm2:g} mm^2 by changing {fill}")


def _die_area(reserved, overrides, chip, path: tuple, P: _Problems):
    """A proposal's ``die_area`` (with ``fill``): (chip, die_area, (fill, value)), or the chip as it is."""
    if "die_area" not in reserved:
        if "fill" in reserved:
            P.at(path + ("fill",), "'fill' names what fills a stated die_area; give die_area too", key=True)
        return chip, None, None
    try:
        target = parse_quantity(reserved["die_area"], "area")
    except UnitError as e:
        P.at(path + ("die_area",), str(e))
        return chip, None, None
    if not (math.isfinite(target) and target > 0):
        P.at(path + ("die_area",), f"expected a die area > 0 (e.g. 900 mm^2), got {reserved['die_area']!r}")
        return chip, None, None
    fill = reserved.get("fill", DEFAULT_FILL)
    if not isinstance(fill, str):
        P.at(path + ("fill",), f"expected a chip parameter name such as 'l2', got {fill!r}")
        return chip, None, None
    if fill in overrides:
        P.at(path + ("fill",), f"'{fill}' is given a value in this proposal and is also what fills its die_area: "
                               f"give one or the other")
        return chip, None, None
    try:
        filled, value = fill_to_die_area(chip, target, fill)
    except SpecError as e:
        P.extend(path + ("fill",) if "fill" in reserved else path + ("die_area",), e)
        return chip, None, None
    return filled, target, (fill, value)


def _workloads(section, P: _Problems, file: str, folder: Path | None = None) -> list:
    items = section if isinstance(section, list) else [section]
    out, names = [], {}
    for i, item in enumerate(items):
        p = ("workloads", i) if isinstance(section, list) else ("workloads",)
        try:
            if isinstance(item, str):  # (a config.json path is taken from the file's folder, as its chips are)
                wl = build(parse_workload(item, folder))
            elif isinstance(item, Mapping):
                wl = build(anchored(item, folder))
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


def spec_from_dict(data, path: str | Path | None = None, *, out_given: bool = False) -> WhatIfSpec:
    """Validate a what-if mapping (as loaded by :func:`dse.spec.load_yaml`); every problem at once.

    ``out_given``: the command line names the output folder (``dse whatif --out``), so the file's ``output:`` is
    not used and need not stay below the file's folder.
    """

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
                chip, stated, fill = _die_area(reserved, overrides, chip, p, P)
                if len(P.items) > n_before:
                    continue
                changed = dict(overrides, **({fill[0]: fill[1]} if fill else {}))
                implied = _implied_changes(base_chip, chip, changed) if base_chip is not None else ""
                if fill:
                    implied = "; ".join(x for x in (
                        f"{fill[0]} {format_quantity(fill[1], param_dimension(fill[0]))} fills the stated "
                        f"{stated:g} mm^2 die (area model)", implied) if x)
                note = "; ".join(x for x in (str(note or ""), implied) if x)
                designs.append(Design(str(pname), chip, source, overrides, ref, opts, att, note, stated, fill))
            known = [BASELINE] + [str(k) for k in props]
            for pname, (ref, p) in compare.items():
                if ref == pname:
                    P.at(p, "a proposal cannot be compared with itself")
                elif ref not in known:
                    P.at(p, unknown_name("design", ref, known))

    workloads = _workloads(data["workloads"], P, file, base_dir) if "workloads" in data else []
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
            if path is not None:
                pp = Path(path).parent
                home = pp.parent if pp.name == "studies" else pp
                if not output.is_absolute():
                    output = home / output
                # as a study's output (issue 21): a what-if file someone sends writes only below its folder (a
                # project's studies/ folder: the project), elsewhere only with `dse whatif --out`
                where, inside = output.resolve(), home.resolve()
                if not out_given and where != inside and inside not in where.parents:
                    P.at(("output",), f"the output folder {where} is outside the what-if file's folder {inside}; a "
                                      f"what-if file writes only below it: give another folder with `dse whatif --out`")

    if P.items:
        raise SpecError(P.items)
    return WhatIfSpec(Path(path) if path is not None else None, name, question, tuple(designs), tuple(workloads),
                      tuple(constraints), attention, output)


def _flat_loc(loc) -> tuple:
    f, (line, col) = loc
    return f, line, col


def load_proposals(path, *, out_given: bool = False) -> WhatIfSpec:
    """Read and validate a what-if file; every problem is reported at once, located (SpecError).

    ``out_given``: the output folder comes from the command line (see :func:`spec_from_dict`)."""
    data = load_yaml(path)
    return spec_from_dict(data, path, out_given=out_given)


def _implied_changes(base, chip, overrides) -> str:
    """What a change set besides the keys it names (issue 19: `hbm.generation=hbm3e` silently changed the pin
    rate and the stack capacity): the reset figures of dse.hardware.override_rules, as 'also: key old -> new'."""
    from dse.hardware.rules import override_rules
    from dse.units import format_quantity

    reset, _ = override_rules(overrides)
    if not reset:
        return ""
    a, b = base.flat(), chip.flat()
    parts = []
    for k in sorted(reset):
        if k in b and a.get(k) != b.get(k):
            dim = param_dimension(k)
            if k == "hbm.pin_rate":  # per pin, as memory vendors quote it
                show = lambda v: f"{float(v) * 8 / 1e9:.4g} Gb/s"  # noqa: E731
            else:
                show = (lambda v: format_quantity(float(v), dim)) if dim else str  # noqa: E731
            parts.append(f"{k} {show(a[k]) if k in a else '-'} -> {show(b[k])}")
    return "also: " + ", ".join(parts) + " (the defaults of the change, dse/data/technology)" if parts else ""


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
        problems.extend(f"--set {item}: {m.split(': ', 1)[1]}" for m in bare_number_problems({key: overrides[key]}))
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
