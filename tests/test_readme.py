"""The README needs nothing outside the repository (issue 19 item 10): no paths into the project's shared folder,
the source documents cited by title, and every repository path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_no_paths_outside_the_repository():
    assert "../shared" not in README
    assert "shared/reference" not in README and "shared/seeds" not in README


def test_the_source_documents_are_cited_by_title():
    # the titles as the documents give them (their first lines)
    for title in ("Accelerator Architecture", "MI355X architecture and system topology",
                  "Эпоха специализированных архитектур"):
        assert title in README


def test_repository_paths_it_names_exist():
    named = set(re.findall(r"`((?:docs|tests/data|dse/data|studies|benchmarks)/[^`\s]+)`", README))
    assert named, "the README names no repository paths"
    missing = sorted(p for p in named if not any(ROOT.glob(p.rstrip("/"))))
    assert not missing, missing
