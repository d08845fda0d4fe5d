"""No test decides pass or fail by the machine's speed (issue 21 item 7).

A grep of the suite: no fixed sleeps used as a wait (pausing a child is tests.gate's job), no hypothesis
deadline, and the suite-wide hypothesis profile has none either.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings

TESTS = Path(__file__).resolve().parent
# a sleep in a test is a race: a wait must be on a file, a process or a pipe (tests.gate, tests.scale.helpers)
ALLOWED_SLEEPS = {"gate.py", "scale/helpers.py", "scale/pgserver.py"}


def test_hypothesis_has_no_deadline():
    assert settings().deadline is None


def test_no_test_sleeps_or_sets_a_deadline():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel == "test_no_wall_clock.py":
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"(settings|register_profile)\(.*\bdeadline\s*=\s*(?!None)", code):
                found.append(f"{rel}:{i}: a hypothesis deadline: {line.strip()}")
            if re.search(r"\b(time\.)?sleep\(\s*[0-9.]", code) and rel not in ALLOWED_SLEEPS:
                found.append(f"{rel}:{i}: a fixed sleep: {line.strip()}")
    assert not found, "\n".join(found)
