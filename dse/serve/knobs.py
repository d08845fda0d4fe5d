"""The shipped serving knobs (dse/data/serving/knobs.yaml) and knob files: read, check, pick a profile.

A knob file holds one or more *profiles* (a software stack on the chips it was measured on), each with the
four calibration knobs of :class:`dse.serve.scenario.Knobs` written with units, where they come from, and
the fit report (dse.serve.calibration writes it)::

    default: trtllm
    profiles:
      trtllm:
        compute_efficiency: 0.62
        bandwidth_efficiency: 0.81
        kernel_overhead: 0 s
        step_overhead: 2.1 ms
        source: ...
"""

from __future__ import annotations

import functools
from pathlib import Path

from dse.errors import SpecError, unknown_name
from dse.serve.scenario import IDEAL, KNOB_NAMES, Knobs
from dse.spec import load_yaml
from dse.units import parse_quantity

KNOBS_FILE = Path(__file__).resolve().parents[1] / "data" / "serving" / "knobs.yaml"
_FRACTIONS = ("compute_efficiency", "bandwidth_efficiency")


def _knob_value(path, profile: str, key: str, value) -> float:
    where = f"{path}: profiles.{profile}.{key}"
    if key in _FRACTIONS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise SpecError(f"{where}: expected a fraction in (0, 1], found {value!r}")
        return float(value)
    if value == 0:
        return 0.0
    try:
        v = parse_quantity(value, "time")
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None
    if v < 0:
        raise SpecError(f"{where}: expected a time >= 0 such as '2 ms', found {value!r}")
    return v


def read_knobs_file(path) -> tuple[dict[str, Knobs], str, dict]:
    """Profiles by name, the default profile's name and the raw mapping of a knob file."""
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no such knob file (expected a YAML file with 'profiles', or 'none')")
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise SpecError(f"{path}: expected a mapping with 'profiles: {{name: {{knob: value}}}}', "
                        f"found {type(data).__name__}")
    out = {}
    for name, body in data["profiles"].items():
        if not isinstance(body, dict):
            raise SpecError(f"{path}: profiles.{name}: expected a mapping of knobs, found {body!r}")
        allowed = set(KNOB_NAMES) | {"source", "description", "fitted_on", "engine"}
        for k in body:
            if k not in allowed:
                raise SpecError(f"{path}: profiles.{name}: " + unknown_name("key", k, allowed))
        values = {k: _knob_value(path, name, k, body[k]) for k in KNOB_NAMES if k in body}
        out[str(name)] = Knobs(name=str(name), source=str(body.get("source", path)),
                               fitted_on=tuple(str(x) for x in body.get("fitted_on", ()) or ()), **values)
    default = str(data.get("default", next(iter(out))))
    if default not in out:
        raise SpecError(f"{path}: default: " + unknown_name("profile", default, out))
    return out, default, data


@functools.lru_cache(maxsize=1)
def shipped() -> tuple[dict[str, Knobs], str]:
    """The profiles shipped in the package and the default one (the ideal knobs if none are shipped)."""
    if not KNOBS_FILE.exists():
        return {"ideal": IDEAL}, "ideal"
    profiles, default, _ = read_knobs_file(KNOBS_FILE)
    return profiles, default


def default_knobs() -> Knobs:
    """The default profile of the shipped knobs (what `dse serve` uses unless told otherwise)."""
    profiles, default = shipped()
    return profiles[default]


def resolve_knobs(calibration=None, profile: str | None = None) -> Knobs:
    """Knobs from ``calibration``: None (the shipped default), 'none' (the bound), a knob file, or Knobs.

    ``profile`` picks a profile of the file (default: the file's default).
    """
    if isinstance(calibration, Knobs):
        return calibration
    if calibration is not None and str(calibration).strip().lower() == "none":
        return IDEAL
    if calibration is None:
        profiles, default = shipped()
        where = str(KNOBS_FILE)
    else:
        profiles, default, _ = read_knobs_file(calibration)
        where = str(calibration)
    name = profile or default
    if name not in profiles:
        raise SpecError(f"{where}: " + unknown_name("knob profile", name, profiles))
    return profiles[name]
