"""Worked examples from the seeds (tests/data/seed_cases.yaml), for the tests.

``case(id)`` returns one case as a dict; ``approx(id, key, actual)`` asserts
that ``actual`` matches ``case(id)["expected"][key]`` within the case's
``rel_tol``. A tolerance of 0.0 means "exact as the documents state it": it is
widened only by 1e-12 relative, so float noise such as 2.4000000000000004e-05
for 24e-6 passes while any real difference fails.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import yaml

CASES_FILE = Path(__file__).parent / "data" / "seed_cases.yaml"
_FLOAT_NOISE = 1e-12


@functools.lru_cache(maxsize=1)
def _cases() -> dict[str, dict]:
    with CASES_FILE.open() as fh:
        data = yaml.safe_load(fh)
    return {c["id"]: c for c in data["cases"]}


def case(case_id: str) -> dict:
    """The case named ``case_id`` (KeyError listing the known ids if absent)."""
    cases = _cases()
    if case_id not in cases:
        raise KeyError(f"no seed case {case_id!r}; known: {', '.join(sorted(cases))}")
    return cases[case_id]


def expected(case_id: str, key: str):
    """The expected value ``key`` of case ``case_id``.

    YAML 1.1 (PyYAML) reads a number like ``15e-3`` (no dot) as a string;
    such strings come back as floats.
    """
    exp = case(case_id)["expected"]
    if key not in exp:
        raise KeyError(f"case {case_id!r} has no expected {key!r}; it has: {', '.join(exp)}")
    value = exp[key]
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def approx(case_id: str, key: str, actual) -> None:
    """Assert ``actual`` equals the case's expected ``key`` within the case's rel_tol."""
    want = expected(case_id, key)
    if isinstance(want, str):
        assert actual == want, f"{case_id}.{key}: expected {want!r}, got {actual!r}"
        return
    tol = max(float(case(case_id).get("rel_tol", 0.0)), _FLOAT_NOISE)
    got = float(actual)
    assert math.isclose(got, float(want), rel_tol=tol, abs_tol=0.0), (
        f"{case_id}.{key}: expected {want} (rel_tol {tol}), got {got} "
        f"(off by {abs(got - float(want)) / abs(float(want)) if want else abs(got):.3g} relative)"
    )
