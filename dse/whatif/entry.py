"""``dse.whatif(...)``: the checked Python entry point of the what-if (the package itself is callable)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dse.errors import SpecError


def _what(x) -> str:
    return f"{type(x).__name__} {x!r}"[:200]


def _texts(value, name: str) -> list[str]:
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(x, str) for x in items):
        raise SpecError(f"{name}: expected a string or a list of strings, got {_what(value)}")
    return items


def _parse_sets(sets: list[str]) -> dict:
    """['hbm.stacks=6', 'clock=2.0 GHz'] -> {'hbm.stacks': 6, 'clock': '2.0 GHz'} (values read as YAML scalars,
    as `dse whatif --set` reads them)."""
    import yaml

    out: dict = {}
    for item in sets:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise SpecError(f"whatif: changes: '{item}': expected KEY=VALUE, e.g. 'hbm.stacks=6' or 'clock=2.0 GHz'")
        if key in out:
            raise SpecError(f"whatif: changes: '{key}' given twice")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        out[key] = parsed if isinstance(parsed, (int, float, bool, str)) else value
    return out


def whatif(baseline, changes=None, *, workloads=None, chips=(), proposals=None, name: str | None = None):
    """Compare a baseline chip with proposed changes on workloads (as `dse whatif` does) -> WhatIfResult.

    Three forms:

    * ``whatif("studies/whatif-h100-upgrades.yaml")``: a what-if file (its keys: `dse schema whatif`);
      ``workloads`` replaces its workloads;
    * ``whatif("h100-sxm", {"hbm.stacks": 6}, workloads=[...], chips=["h200-sxm"])``: a baseline chip (a
      catalog name or a chip file), one proposal of dotted chip changes (values with units: ``"2.0 GHz"``; ``"x2"``
      scales; or a list of ``"KEY=VALUE"`` strings, as ``--set``) named after them, and another chip per entry of
      ``chips``; ``proposals`` adds named proposals ``{name: {key: value, ...}}``;
    * ``whatif({...})``: a what-if mapping (the file's keys).

    ``workloads``: short forms (``"qwen3-8b:decode:batch=1:context=8192"``) or workload mappings. The result
    (:class:`dse.whatif.WhatIfResult`) has ``metrics`` (one row per workload x design), ``value(design,
    metric)``, ``ratio(design, metric)``, ``change(design, metric)`` (in %), ``to_markdown()`` and
    ``write(folder)``. A proposal that breaks a constraint is a result; a mistake in the question is a
    :class:`~dse.errors.SpecError`.

    A sixth HBM3 stack gives the H100 6/5 of the bandwidth; its decode step is memory-bound, so it takes
    5/6 = 0.83 of the time::

        >>> import dse
        >>> r = dse.whatif("h100-sxm", {"hbm.stacks": 6}, workloads="qwen3-8b:decode:batch=1:context=8192")
        >>> round(r.ratio("hbm.stacks=6", "time_s"), 2)
        0.83
        >>> dse.whatif("h100-sxm", {"hbm.stack": 6}, workloads="qwen3-8b:decode:batch=1:context=8192")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        dse.errors.SpecError: whatif: changes hbm.stack: unknown chip parameter 'hbm.stack' (did you mean...
    """
    from dse.whatif.run import run_whatif
    from dse.whatif.spec import load_proposals, spec_from_dict

    if name is not None and not isinstance(name, str):
        raise SpecError(f"whatif: name must be a string, got {_what(name)}")
    wl = None if workloads is None else workloads if isinstance(workloads, list) else [workloads]
    if wl is not None and (not wl or not all(isinstance(w, (str, Mapping)) for w in wl)):
        raise SpecError(f"whatif: workloads must be 'model:phase:key=value...' strings or workload mappings, "
                        f"got {_what(workloads)}")
    chip_list = _texts(chips, "whatif: chips") if chips else []
    quick = changes is not None or chip_list or proposals is not None
    if isinstance(baseline, Mapping):
        if quick:
            raise SpecError("whatif: a what-if mapping holds its proposals; give changes, chips or proposals "
                            "with a baseline chip name instead")
        data = dict(baseline)
        if wl is not None:
            data["workloads"] = wl
        return run_whatif(spec_from_dict(data))
    if not isinstance(baseline, (str, Path)):
        raise SpecError(f"whatif: baseline must be a catalog chip name, a chip file or a what-if file (a str or "
                        f"a Path), or a what-if mapping, got {_what(baseline)}")
    if not quick:
        if not str(baseline).endswith((".yaml", ".yml")):
            raise SpecError(f"whatif: '{baseline}' is a chip, not a what-if file: give the changes to compare, e.g. "
                            f"whatif('{baseline}', {{'hbm.stacks': 6}}, workloads=[...])")
        spec = load_proposals(baseline)
        if wl is not None:
            import dataclasses

            from dse.workload import build, parse_workload

            spec = dataclasses.replace(spec, workloads=tuple(
                build(parse_workload(w)) if isinstance(w, str) else build(dict(w)) for w in wl))
        return run_whatif(spec)
    if wl is None:
        raise SpecError("whatif: give workloads, e.g. workloads=['qwen3-8b:decode:batch=1:context=8192']")
    if isinstance(changes, str):
        changes = [changes]
    if isinstance(changes, (list, tuple)):
        changes = _parse_sets(_texts(changes, "whatif: changes"))
    named: dict = {}
    if changes is not None:
        if not isinstance(changes, Mapping):
            raise SpecError(f"whatif: changes must be a mapping of chip parameter: value (e.g. {{'hbm.stacks': 6}}) "
                            f"or a list of 'KEY=VALUE' strings, got {_what(changes)}")
        named[", ".join(f"{k}={v}" for k, v in changes.items())] = dict(changes)
    if proposals is not None:
        if not isinstance(proposals, Mapping) or not all(isinstance(v, Mapping) for v in proposals.values()):
            raise SpecError(f"whatif: proposals must map a name to its changes, e.g. {{'6 stacks': "
                            f"{{'hbm.stacks': 6}}}}, got {_what(proposals)}")
        named.update({str(k): dict(v) for k, v in proposals.items()})
    for c in chip_list:
        named[c if c not in named else f"{c} (chip)"] = {"chip": c}
    data = {"name": name or f"whatif-{baseline}", "baseline": str(baseline), "proposals": named, "workloads": wl}
    try:
        spec = spec_from_dict(data)
    except SpecError as e:  # the mapping was built here: say which argument, not where in a file that is not there
        raise SpecError([_argument(m, named) for m in e.problems]) from None
    return run_whatif(spec)


def _argument(message: str, named: dict) -> str:
    import re

    from dse.spec.problems import strip_location

    m = re.sub(r"^<input>:\d+:\d+:? ", "", strip_location(message))
    for label in sorted(named, key=len, reverse=True):
        if m.startswith(f"proposals.{label}."):
            key = m[len(f"proposals.{label}."):]
            if named[label].keys() == {"chip"}:
                return f"whatif: chips: {key.removeprefix('chip: ')}"
            return f"whatif: changes {key}"
    m = re.sub(r"^baseline: ", "whatif: baseline: ", m)
    return re.sub(r"^workloads(\.\d+)?: ", "whatif: workloads: ", m)
