"""The package's import graph: every module imports in a fresh interpreter, and no cycle exists.

Edges are every ``import dse...`` / ``from dse... import`` statement of a module,
at any depth (function-level imports count: a cycle hidden in a function is
still a cycle). ``from dse.pkg import name`` is an edge to ``dse.pkg.name`` when
that is a module, else to ``dse.pkg``. Importing ``a.b.c`` also runs the
``__init__`` of ``a.b`` (and ``a``) unless the importer lives inside that package,
so those are edges too: ``dse.report`` importing ``dse.study.results`` runs
``dse/study/__init__.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dse", "objectives", "constraints")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _edges(name: str, source: str, is_pkg: bool, modules=None) -> set[str]:
    """The modules that importing ``name`` (whose text is ``source``) runs directly."""
    modules = MODULES if modules is None else modules
    tree = ast.parse(source)
    out = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                targets.append(sub if sub in modules else mod)
        for t in targets:
            while t and t not in modules and "." in t:
                t = t.rsplit(".", 1)[0]
            if t not in modules or t == name:
                continue
            out.add(t)
            parts = t.split(".")
            for i in range(1, len(parts)):  # the packages above the target, unless the importer is inside them
                pkg = ".".join(parts[:i])
                if pkg in modules and not (name == pkg or name.startswith(pkg + ".")):
                    out.add(pkg)
    return out


GRAPH = {name: _edges(name, path.read_text(), path.name == "__init__.py") for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(GRAPH[u]):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                found = visit(v)
                if found:
                    return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(GRAPH):
        if u not in state:
            found = visit(u)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_checker_sees_function_level_and_package_imports():
    # the checker on a made-up package: a function-level import is an edge, and importing p.q.r runs p.q
    fake = {"p": None, "p.q": None, "p.q.r": None, "p.s": None}
    assert _edges("p.s", "def f():\n    from p.q.r import g\n", False, fake) == {"p.q.r", "p.q"}
    assert _edges("p.q.r", "from p.q import x\n", False, fake) == {"p.q"}
    assert _edges("p.q", "from . import r\n", True, fake) == {"p.q.r"}


@pytest.mark.parametrize("name", sorted(m for m in MODULES if not m.endswith("__main__")))
def test_module_imports_in_a_fresh_interpreter(name):
    r = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_root_is_small():
    """About ten one-concept modules at the root; the rest live in sub-packages (issue 13)."""
    root = sorted(p.stem for p in (ROOT / "dse").glob("*.py") if p.stem != "__init__")
    assert len(root) <= 12, root
