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


def test_the_chip_sketch_validates_and_evaluates(tmp_path, capsys):
    """The README's first sketch of a chip is a file every command takes (its defaults from the technology
    tables): it validates, and a decode step on it takes a finite time."""
    import math

    import dse
    from dse.cli import main

    block = re.search(r"```yaml\n(name: my-chip\n.*?)```", README, re.S)
    assert block, "the README's chip sketch"
    path = tmp_path / "my-chip.yaml"
    path.write_text(block.group(1))
    assert main(["validate", str(path)]) == 0
    m = dse.evaluate_design(str(path), "qwen3-8b:decode:batch=8:context=8192")
    assert 0 < float(m["time_s"][0]) < math.inf
