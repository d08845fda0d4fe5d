"""Every worked example of tests/data/seed_cases.yaml is checked by some test.

A case counts as checked when a test module under tests/ that reads the case file (imports
tests.reference_cases, or opens seed_cases.yaml itself as tests/test_precision.py does) holds the case id as a whole string literal (``approx("amdahl", ...)``,
``cid = "amdahl"``); a mention in a comment, in a longer name (``amdahl_training_step``) or in a module
that never reads the cases does not count. An earlier commit deleted the only tests of seven cases and
nothing failed; this test makes that a failure.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.reference_cases import _cases

TESTS = Path(__file__).resolve().parents[1]


def _reads_cases(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "seed_cases.yaml" in node.value:
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "tests.reference_cases":
            return True
        if isinstance(node, ast.Import) and any(a.name == "tests.reference_cases" for a in node.names):
            return True
    return False


def _referenced_ids() -> dict[str, set[str]]:
    """case-id-like string literals -> the test modules holding them (modules that read the case file)."""
    out: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path.resolve() == Path(__file__).resolve():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if not _reads_cases(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.setdefault(node.value, set()).add(str(path.relative_to(TESTS)))
    return out


def test_every_seed_case_is_referenced_by_a_test():
    ids = list(_cases())
    assert ids, "no cases read from tests/data/seed_cases.yaml"
    refs = _referenced_ids()
    missing = [cid for cid in ids if cid not in refs]
    assert not missing, (
        f"seed cases no test checks (no module reading the case file names them): {', '.join(missing)}")


def test_the_scan_does_not_count_longer_names_or_comments(tmp_path):
    # the rule itself: only a whole string literal counts
    tree = ast.parse('from tests.reference_cases import approx\n# "amdahl"\nx = "amdahl_training_step"\n')
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert _reads_cases(tree) and "amdahl" not in consts
