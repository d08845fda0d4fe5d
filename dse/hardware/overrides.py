"""Changed chips as chip records: :func:`with_overrides` (dotted overrides, revalidated) and :func:`chip_yaml`."""

from __future__ import annotations

import math

from dse import technology
from dse.errors import SpecError
from dse.hardware.chips import Chips
from dse.hardware.records import ChipSpec, flatten, param_dimension, unflatten, yaml_value
from dse.hardware.rules import KEEPS, override_rules
from dse.spec import validate


def with_overrides(spec: ChipSpec, overrides: dict[str, object]) -> ChipSpec:
    """A copy of ``spec`` with dotted-name overrides applied and revalidated.

    Values are YAML values (strings with units, numbers, or "x2" to scale the
    current value); SI floats are taken in the parameter's canonical unit.
    :func:`override_rules` says what else changes: a changed unit count drops
    the base's ``units_physical``, changed stacks its ``stack_sites`` and
    enabled ``capacity``, a changed TDP keeps its static power, and a changed
    ``hbm.generation`` resets the pin rate and the stack build to that
    generation's defaults unless they are also given
    (dse/data/technology/memories.yaml).
    """

    base = flatten(spec.model_dump(exclude_none=True))
    flat = dict(base)
    for key in overrides:
        param_dimension(key)  # unknown names fail here, with did-you-mean
    reset, keep = override_rules(overrides)
    kept = {}
    if keep:  # the kept figures of the design with every other change (another node leaks otherwise)
        others = {k: v for k, v in overrides.items() if k not in KEEPS}
        view = Chips.numeric_view(with_overrides(spec, others) if others else spec)
        kept = {k: view[k] for k in keep}
    for k in reset:
        flat.pop(k, None)
    for key, value in overrides.items():
        if isinstance(value, str) and value.strip().lower().startswith("x"):
            try:
                factor = float(value.strip()[1:])
            except ValueError:
                raise SpecError(f"{key}: expected a value or a multiplier like 'x2', got {value!r}") from None
            if not math.isfinite(factor) or factor <= 0:  # issue 21: 'xnan' passed and changed nothing
                raise SpecError(f"{key}: a multiplier must be a finite number > 0 (like 'x2' or 'x0.5'), got {value!r}")
            cur = base.get(key)
            if not isinstance(cur, (int, float)) or isinstance(cur, bool):
                raise SpecError(f"{key}: cannot scale {cur!r} by {value!r}")
            value = cur * factor
            if isinstance(cur, int):
                if not float(value).is_integer():
                    raise SpecError(f"{key}: {cur} x {factor:g} = {value:g} is not a whole number of {key}; "
                                    f"give the count itself (e.g. {key}: {round(value)})")
                value = int(value)
            flat[key] = value
            continue
        if key == "hbm.generation":
            mem = technology.memory(str(value))
            flat.setdefault("hbm.pin_rate", mem.pin_rate)
            flat.setdefault("hbm.pins_per_stack", int(mem.pins))
            if "hbm.capacity_per_stack" not in flat:
                flat.setdefault("hbm.layers", int(mem.layers))
                flat.setdefault("hbm.capacity_per_layer", mem.capacity_per_layer)
        flat[key] = value
    flat.update(kept)
    as_given = {k for k in overrides if not isinstance(flat[k], float)}  # "2.0 GHz", counts: validated as written
    return validate(ChipSpec, unflatten(_with_units(flat, skip=as_given)))


def bare_number_problems(overrides: dict[str, object]) -> list[str]:
    """What a user wrote as a bare number for a quantity with a unit (``clock: 2.0`` would be 2 Hz, ``l2:
    50.0`` 50 bytes): one message per key. For values from files and the command line; the Python API's SI
    floats go to :func:`with_overrides` directly (issue 21: a bare number is an error everywhere)."""
    from dse.units import DIMENSIONLESS, DIMENSIONS, example

    out = []
    for key, value in overrides.items():
        try:
            dim = param_dimension(key)
        except Exception:  # noqa: BLE001 - an unknown key: with_overrides reports it with did-you-mean
            continue
        if dim is None or DIMENSIONS.get(dim) == DIMENSIONLESS:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(f"{key}: expected a {dim} quantity with a unit (e.g. {key}: {example(dim)}), got bare "
                       f"number {value!r}")
    return out


def _with_units(flat: dict[str, object], skip=()) -> dict[str, object]:
    """Parsed SI numbers re-expressed as strings with canonical units, so validation re-parses them exactly."""
    return {k: v if k in skip else yaml_value(k, v) for k, v in flat.items()}


def chip_yaml(spec: ChipSpec) -> str:
    """The chip as a chip file (YAML) that :func:`load_chip` reads back to an equal spec.

    Quantities are written in canonical units with every digit (``clock:
    1830000000.0 Hz``), so a design found by a search or a what-if can be kept
    as a chip file and evaluates to the same metrics.
    """
    import yaml

    return yaml.safe_dump(unflatten(_with_units(spec.flat())), sort_keys=False, allow_unicode=True)
