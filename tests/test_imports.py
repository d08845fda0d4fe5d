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
import json
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


#: The third-party packages dse's modules import at their top (never a dse module, never a submodule such as
#: ortools.sat.python.cp_model): loaded once before the forks, as any first import of them would load them.
PRELOAD = ("numpy", "pandas", "pydantic", "yaml", "optuna")

#: Imports every module named on its command line, each in a child forked from an interpreter that has imported
#: only PRELOAD and the standard library: the child starts with no dse, objectives or constraints module loaded,
#: as a fresh `python -c "import NAME"` does, without paying the interpreter's and numpy's start each time.
#: Prints {name: traceback} of the modules that failed.
_FORKED_IMPORTS = r"""
import importlib, json, os, sys, traceback
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # no thread pools across a fork
    os.environ.setdefault(var, "1")
for pkg in sys.argv[1].split(","):
    importlib.import_module(pkg)
assert not any(m.split(".")[0] in ("dse", "objectives", "constraints") for m in sys.modules)
failed = {}
for name in sys.argv[2:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            msg = b""
        except BaseException:
            msg = traceback.format_exc()[-3000:].encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    status = os.waitpid(pid, 0)[1]
    text = b"".join(chunks).decode()
    if text or status:
        failed[name] = text or f"the child exited with status {status}"
print(json.dumps(failed))
"""


def _import_each(names: list[str]) -> dict[str, str]:
    r = subprocess.run([sys.executable, "-c", _FORKED_IMPORTS, ",".join(PRELOAD), *names], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_module_imports_in_a_fresh_interpreter():
    """Each module of dse, objectives and constraints imported first, with nothing of the project loaded (a
    module that works only after another one was imported, e.g. through an import cycle, fails here).

    One child per module, forked from one interpreter (issue 21 item 7: 140 interpreters took about 140 s of the
    suite's CPU, now about 15 s); what it could miss: a module that uses at its import a third-party submodule it
    does not import, which one of PRELOAD's packages happens to load."""
    names = sorted(m for m in MODULES if not m.endswith("__main__"))
    failed = _import_each(names)
    assert not failed, "\n\n".join(f"import {k}:\n{v}" for k, v in failed.items())


def test_the_forked_importer_reports_a_failure():
    """The check above can fail: a missing module and a module that raises are reported with their tracebacks."""
    failed = _import_each(["dse.no_such_module", "dse.units", "tests.no_such_module"])
    assert set(failed) == {"dse.no_such_module", "tests.no_such_module"}
    assert "ModuleNotFoundError" in failed["dse.no_such_module"]


def test_root_is_small():
    """About ten one-concept modules at the root; the rest live in sub-packages (issue 13)."""
    root = sorted(p.stem for p in (ROOT / "dse").glob("*.py") if p.stem != "__init__")
    assert len(root) <= 12, root


def test_a_command_that_builds_no_cp_sat_model_does_not_import_or_tools():
    """OR-Tools takes ~0.2 s to import (``import dse.cli`` 0.83-0.86 s with it, 0.63-0.68 s without, three runs
    each): it is imported where a CP-SAT model is built (dse.solvers.cpsat_common.cp_sat), not by the command line, the
    study runner, its workers, the what-if or the server. Then a CP-SAT solver made: OR-Tools is loaded."""
    code = ("import sys, dse.cli, dse.study.run, dse.study.distributed, dse.whatif, dse.serve\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ortools'))\n"
            "from dse.solvers import cpsat_common\n"
            "cpsat_common.new_solver(deterministic_s=1.0, wall_s=1.0, seed=0)\n"
            "print('ortools.sat.python.cp_model' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    first, second = r.stdout.strip().splitlines()[-2:]
    assert first == "[]", f"imported at start: {first}"
    assert second == "True"
