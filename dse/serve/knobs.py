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
import math
from pathlib import Path

from dse.errors import SpecError, unknown_name
from dse.serve.scenario import IDEAL, KNOB_NAMES, Knobs
from dse.spec import load_yaml, locate
from dse.spec.problems import Problems, strip_location
from dse.units import parse_quantity

KNOBS_FILE = Path(__file__).resolve().parents[1] / "data" / "serving" / "knobs.yaml"
_FRACTIONS = ("compute_efficiency", "bandwidth_efficiency")


def _knob_value(key: str, value) -> float:
    """One knob's value (a fraction, or a time with its unit); ValueError says what was expected."""
    if key in _FRACTIONS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ValueError(f"expected a fraction in (0, 1], found {value!r}")
        return float(value)
    if value == 0 and not isinstance(value, bool):
        return 0.0
    try:
        v = parse_quantity(value, "time")
    except SpecError as e:
        raise ValueError(strip_location(str(e))) from None
    if not 0 <= v < math.inf:
        raise ValueError(f"expected a finite time >= 0 such as '2 ms', found {value!r}")
    return v


#: Keys of a profile besides the knobs: what the profile is, and the rows it was fitted on (both informational).
_PROFILE_KEYS = ("source", "description", "fitted_on")


def read_knobs_file(path) -> tuple[dict[str, Knobs], str, dict]:
    """Profiles by name, the default profile's name and the raw mapping of a knob file.

    Every problem at once, each located ``file:line:col key.path: ...`` (SpecError).
    """
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no such knob file (expected a YAML file with 'profiles', or 'none')")
    data = load_yaml(path)
    if not isinstance(data, dict):
        file, (line, col) = locate(data, ())
        raise SpecError(f"{file}:{line}:{col}: expected a knob file, a mapping with 'profiles: {{name: {{knob: "
                        f"value}}}}', found {type(data).__name__}")
    if "profiles" not in data:  # another kind of file (a chip, a study): one message, not one per key
        file, (line, col) = locate(data, ())
        keys = ", ".join(map(str, list(data)[:6])) + (", ..." if len(data) > 6 else "")
        raise SpecError(f"{file}:{line}:{col}: expected a knob file, a mapping with 'profiles: {{name: {{knob: "
                        f"value}}}}', found a mapping of {keys or 'nothing'} (`dse validate {path}` says what it is)")
    p = Problems(data, str(path))
    p.check_keys(("default", "profiles"))
    profiles = data.get("profiles")
    if "profiles" in data and (not isinstance(profiles, dict) or not profiles):
        p.at(("profiles",), f"expected a mapping of profiles {{name: {{knob: value}}}}, found {profiles!r:.80}")
    out = {}
    for name, body in (profiles.items() if isinstance(profiles, dict) else ()):
        where = ("profiles", name)
        if not isinstance(name, str) or not name.strip():
            p.at(where, f"a profile name must be a non-empty string, found {name!r}", key=True)
            continue
        if not isinstance(body, dict):
            p.at(where, f"expected a mapping of knobs, found {body!r:.80}")
            continue
        bad = len(p.items)
        for k in body:
            if k not in KNOB_NAMES and k not in _PROFILE_KEYS:
                p.at((*where, k), unknown_name("key", str(k), (*KNOB_NAMES, *_PROFILE_KEYS)), key=True)
        values = {}
        for k in KNOB_NAMES:
            if k in body:
                try:
                    values[k] = _knob_value(k, body[k])
                except ValueError as e:
                    p.at((*where, k), str(e))
        for k in ("source", "description"):
            if k in body and not isinstance(body[k], str):
                p.at((*where, k), f"expected a text, found {body[k]!r:.80}")
        fitted = body.get("fitted_on")
        fitted = [] if fitted is None else fitted
        if not isinstance(fitted, list):
            p.at((*where, "fitted_on"), f"expected a list of the rows' labels, found {fitted!r:.80}")
        else:
            for i, x in enumerate(fitted):
                if not isinstance(x, str):
                    p.at((*where, "fitted_on", i), f"expected a row's label (a text), found {x!r:.80}")
        if len(p.items) == bad:
            out[name] = Knobs(name=name, source=str(body.get("source", path)), fitted_on=tuple(fitted), **values)
    default = data.get("default", next(iter(out), None))
    if "default" in data and (not isinstance(default, str) or
                              (isinstance(profiles, dict) and profiles and default not in profiles)):
        p.at(("default",), unknown_name("profile", str(default), [str(k) for k in profiles or ()]))
    p.raise_if_any()
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
    if name not in profiles:  # a --stack (profile) the file does not have: a flag's problem, not the file's
        raise SpecError(f"--stack {name}: " + unknown_name("knob profile", name, profiles) + f" (in {where})")
    return profiles[name]
