"""Validate equals run, as a property of the `dse` command (issue 21 item 6).

A hypothesis fuzzer mutates every shipped study, what-if and chip file (``studies/*.yaml``,
``dse/data/chips/*.yaml``): values replaced by other values, units, numbers (NaN, inf, 0, huge,
negative), keys deleted, renamed, added, lists cut or grown, and byte-level damage (cut, duplicated or
re-indented lines, non-UTF-8 bytes). Each mutant is written into a sandbox folder, which is also the
current folder, and given to the command line (``dse.cli.main``, in this process). Asserted:

* `dse validate FILE` exits 0 or 2 and prints no traceback; each problem it reports names where it is
  (``file:line:col``, in the mutant or in a YAML file it names);
* what validate accepts, runs, without a spec error: a study with `dse run FILE --trials 2 --out OUT`
  (a grid study with its own budget when its grid is small), a what-if with `dse whatif FILE --out OUT`,
  a chip with `dse eval --chip FILE --workload ...`. The run ends in exit 0, or 2 for a legitimate
  outcome that is not a spec error (no feasible design: InfeasibleError; a solver's limit: SolverError),
  or 3 (StorageError); never a traceback;
* nothing is written outside the output folder: the sandbox (the current folder) holds the same files
  before and after, but for OUT.

Cost is bounded and the same on every run: the examples are derandomized (the same every time, no
example database), with a fixed count: VALIDATE_EXAMPLES cheap validate-only examples (most of them), and
RUN_EXAMPLES milder mutants that mostly validate and are then run (measured on a loaded 2-core machine:
~30 s and ~20 s). A failure is reported as generated, not shrunk (shrinking could take minutes); the
mutant's text is in the report. PNG rendering (matplotlib's savefig,
seconds per plot on a loaded machine, and no part of what a study file controls) is replaced by a stub
in the run part; the reports themselves are still written. tests/scale/test_fuzz.py fuzzes the Python
API of the same loaders (load_study, run_study) with random rather than derandomized examples.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

from dse import cli
from dse.errors import DseError, InfeasibleError, SolverError, SpecError, StorageError
from tests.scale.test_fuzz import NUMBERS, ODD_UNITS, _dump, _get, _paths, respaced_study, values

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {**{f"studies/{p.name}": p for p in sorted((ROOT / "studies").glob("*.yaml"))},
           **{f"chips/{p.name}": p for p in sorted((ROOT / "dse/data/chips").glob("*.yaml"))}}
TEXT = {k: p.read_text() for k, p in SHIPPED.items()}
PARSED = {k: yaml.safe_load(v) for k, v in TEXT.items()}
CHIPS = sorted(k for k in SHIPPED if k.startswith("chips/"))
STUDIES = sorted(k for k, v in PARSED.items() if k.startswith("studies/") and "proposals" not in v
                 and "baseline" not in v)
WHATIFS = sorted(k for k in SHIPPED if k.startswith("studies/") and k not in STUDIES)

VALIDATE_EXAMPLES = 1000
RUN_EXAMPLES = 24
MAX_RUN_GRID = 64  # a grid study that validates is run with its own budget when its grid is at most this big
WORKLOAD = "qwen3-8b:decode:batch=1:context=1024"


# ------------------------------------------------------------ mutants


def _mutate(draw, data, ops: list[str], rounds: int):
    """``data`` (a parsed YAML tree) with ``rounds`` mutations drawn from ``ops``."""
    for _ in range(rounds):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(ops))
        old = parent[key]
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "number":
            parent[key] = draw(st.sampled_from(NUMBERS))
        elif op == "unit":
            parent[key] = draw(st.sampled_from(ODD_UNITS))
        elif op == "extra":
            target = old if isinstance(old, (dict, list)) else parent
            if isinstance(target, dict):
                target[draw(st.sampled_from(["x", "typo", "units", "clock", "step", "weight", "max", "min"]))] = \
                    draw(st.one_of(st.sampled_from(NUMBERS), st.sampled_from(ODD_UNITS)))
            else:
                target.append(copy.deepcopy(draw(st.sampled_from(target))) if target else draw(values))
        elif op == "typo" and isinstance(parent, dict) and isinstance(key, str) and key:
            i = draw(st.integers(0, len(key) - 1))
            parent[key[:i] + draw(st.sampled_from(["", "x", key[i] * 2, key[i].upper(), "_"])) + key[i + 1:]] = \
                parent.pop(key)
        elif op == "tweak":  # a neighbouring value of the same kind: what a careful user might write
            parent[key] = _tweak(draw, old)
        elif op == "cut" and isinstance(old, list) and len(old) > 1:
            parent[key] = old[: draw(st.integers(1, len(old) - 1))]
    return data


def _tweak(draw, v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return draw(st.sampled_from([v + 1, max(v - 1, 0), v * 2, 1, 0, -v]))
    if isinstance(v, float):
        return draw(st.sampled_from([v * 2, v / 2, 0.0, -v, v + 0.5]))
    if isinstance(v, str):
        m = re.fullmatch(r"\s*([-+0-9.eE]+)\s*(.*)", v)
        if m:
            try:
                x = float(m.group(1))
            except ValueError:
                return v
            new = draw(st.sampled_from([x * 2, x / 2, 0.0, -x, x * 1000]))
            unit = draw(st.sampled_from([m.group(2), m.group(2), "GHz", "GB", "W", ""]))
            return f"{new:g} {unit}".strip()
        return draw(st.sampled_from([v, v.upper(), v + "x", ""]))
    if isinstance(v, list) and v:
        return v[:-1] if len(v) > 1 and draw(st.booleans()) else v + [copy.deepcopy(v[-1])]
    return v


@st.composite
def tree_mutant(draw, names, ops, max_rounds):
    name = draw(st.sampled_from(names))
    data = _mutate(draw, copy.deepcopy(PARSED[name]), ops, draw(st.integers(1, max_rounds)))
    return name, _dump(data)


def damaged(draw, raw: bytes, ops: list[str], junk: list[bytes]) -> bytes:
    """``raw`` damaged once as a hurried edit or a broken transfer does: cut short, a line repeated, indented,
    deleted or its spaces turned to a tab (where ``ops`` has "tab"), or one of the ``junk`` bytes inserted."""
    lines = raw.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(ops))
    if op == "cut":
        return raw[: draw(st.integers(0, len(raw)))]
    if op == "dup":
        return b"\n".join(lines[:i] + [lines[i]] + lines[i:])
    if op == "indent":
        return b"\n".join(lines[:i] + [b"   " + lines[i]] + lines[i + 1:])
    if op == "delete_line":
        return b"\n".join(lines[:i] + lines[i + 1:])
    if op == "tab":
        return b"\n".join(lines[:i] + [lines[i].replace(b"  ", b"\t")] + lines[i + 1:])
    pos = draw(st.integers(0, len(raw)))
    return raw[:pos] + draw(st.sampled_from(junk)) + raw[pos:]


@st.composite
def byte_mutant(draw, names):
    name = draw(st.sampled_from(names))
    return name, damaged(draw, TEXT[name].encode("utf-8"), ["cut", "dup", "indent", "delete_line", "bytes", "tab"],
                         [b"\xff", b"\x00", b"'", b"&a *a", b": :", b"!!python/name:os.system"])


ALL_OPS = ["replace", "delete", "number", "unit", "extra", "typo", "tweak", "cut"]
MILD_OPS = ["tweak", "tweak", "tweak", "delete", "cut", "number"]

# Validate only: chips are cheap to validate (a pydantic model), studies cost a probe evaluation each, so
# chips and byte-level damage (mostly refused by the YAML reader) take most of the examples.
validate_examples = st.one_of(
    tree_mutant(CHIPS, ALL_OPS, 4), tree_mutant(CHIPS, ALL_OPS, 4), tree_mutant(CHIPS, MILD_OPS, 2),
    byte_mutant(sorted(SHIPPED)), byte_mutant(sorted(SHIPPED)),
    tree_mutant(STUDIES + WHATIFS, ALL_OPS, 3),
)
# Validate and run: mild mutants (most of them still valid) of studies, what-ifs and chips, and studies with
# another space and solver (tests/scale/test_fuzz.py's respaced_study).
run_examples = st.one_of(
    tree_mutant(STUDIES, MILD_OPS, 2), tree_mutant(WHATIFS, MILD_OPS, 2), tree_mutant(CHIPS, MILD_OPS, 2),
    respaced_study().map(lambda d: ("studies/respaced.yaml", _dump(d))),
)

# ------------------------------------------------------------ the command line, in this process

#: One problem, located: ``file:line:col`` (the mutant or a YAML file it names), or a whole-file problem.
LOCATED = re.compile(r"^(?P<file>\S+?):\d+:\d+[ :]")
WHOLE_FILE = re.compile(r"^(?P<file>\S+?):(\d+:)? ?(not valid UTF-8|YAML nested too deeply|malformed YAML|"
                        r"no such file|is a directory|cannot read|the document)")


def _cli(argv: list[str]) -> tuple[int, BaseException | None, str]:
    """``dse ARGV`` as `dse.cli.main` runs it: (exit code, the DseError it ended with, stdout + stderr).

    main's own mapping (DseError -> 2, StorageError -> 3), with the error kept so that the property can tell a
    spec error from a legitimate outcome; an exception that is not a DseError propagates (a bug).
    """
    cli._load_extra_commands()
    args = cli.build_parser().parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code, err = int(args.func(args) or 0), None
        except StorageError as e:
            code, err = 3, e
        except DseError as e:
            code, err = 2, e
    return code, err, out.getvalue()


def _validate(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(["validate", str(path)])  # an exception other than a DseError escapes: a bug
    return code, out.getvalue()


def _located(text: str, path: Path) -> list[str]:
    """The problems of a `dse validate` error that do not say where they are."""
    body = text.split("dse: error: ", 1)[1] if "dse: error: " in text else text
    bad = []
    for problem in body.strip().splitlines():
        if problem.startswith("... and ") and problem.endswith("more problems"):
            continue
        m = LOCATED.match(problem) or WHOLE_FILE.match(problem)
        if m is None or not (m.group("file") == str(path) or re.search(r"\.ya?ml$", m.group("file"))):
            bad.append(problem)
    return bad


def _tree(folder: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` but ``skip``: {relative path: (size, mtime_ns)}."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if d / n != skip]
        for n in filenames:
            st_ = (d / n).lstat()
            found[str((d / n).relative_to(folder))] = (st_.st_size, st_.st_mtime_ns)
    return found


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A folder that is also the current folder while the module's tests run (relative writes land in it)."""
    folder = tmp_path_factory.mktemp("fuzz-cli")
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


_counter = iter(range(10**9))


def _write(sandbox: Path, name: str, raw: bytes) -> Path:
    i = next(_counter)
    path = sandbox / f"case{i}.yaml"
    path.write_bytes(raw)
    note(f"{name} mutated -> {path}:\n{raw[:3000]!r}")
    return path


def _check_validate(path: Path) -> int:
    code, text = _validate(path)
    assert code in (0, 2), (code, text)
    assert "Traceback" not in text, text
    if code == 2:
        unlocated = _located(text, path)
        assert not unlocated, f"problems without file:line:col: {unlocated}"
    return code


def _run_command(path: Path, out: Path) -> list[str] | None:
    """The command that runs what ``dse validate`` accepted as ``path`` (None: not run, with the reason noted)."""
    from dse.cli.validate import validate_file

    kind = validate_file(str(path))
    if kind == "chip":
        return ["eval", "--chip", str(path), "--workload", WORKLOAD]
    if kind == "whatif":
        return ["whatif", str(path), "--out", str(out)]
    if kind != "study":
        return None
    from dse.spec.study import load_study
    from dse.study import design_space

    spec = load_study(path)
    if spec.solver.storage is not None:
        event("valid study, not run (it names a storage)")
        return None
    argv = ["run", str(path), "--out", str(out), "--quiet"]
    if spec.solver.method in ("grid", "cpsat_tiles", "cpsat_split"):
        if spec.solver.method == "grid" and design_space(spec).grid_size(spec.solver.resolution) > MAX_RUN_GRID:
            event("valid study, not run (grid too big for a test)")
            return None
        return argv  # its own budget (exact solvers and grids take no --trials below their size)
    return argv + ["--trials", "2", "--workers", "1"]


# ------------------------------------------------------------ the properties


@settings(max_examples=VALIDATE_EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(example=validate_examples)
def test_validate_exits_0_or_2_with_located_messages(sandbox, example):
    name, raw = example
    path = _write(sandbox, name, raw)
    before = _tree(sandbox, skip=sandbox / "none")
    code = _check_validate(path)
    assert _tree(sandbox, skip=sandbox / "none") == before, "dse validate wrote a file"
    event(f"{name.split('/')[0]}: {'valid' if code == 0 else 'refused'}")
    path.unlink()


def _stub_png(self, fname, *args, **kwargs):  # matplotlib.figure.Figure.savefig without the drawing
    data = b"\x89PNG\r\n\x1a\n(fuzz stub)"
    if hasattr(fname, "write"):
        fname.write(data)
    else:
        Path(fname).write_bytes(data)


@contextlib.contextmanager
def pngs_stubbed():
    """Figure.savefig writes a stub while the block runs (the fuzzers check files and exit codes, not pixels)."""
    from matplotlib.figure import Figure

    real = Figure.savefig
    Figure.savefig = _stub_png
    try:
        yield
    finally:
        Figure.savefig = real


@settings(max_examples=RUN_EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(example=run_examples)
def test_what_validate_accepts_runs(sandbox, example):

    name, raw = example
    path = _write(sandbox, name, raw)
    if _check_validate(path) != 0:
        event("refused by validate")
        path.unlink()
        return
    out = sandbox / f"out-{path.stem}"
    argv = _run_command(path, out)
    if argv is None:
        path.unlink()
        return
    before = _tree(sandbox, skip=out)
    with pngs_stubbed():
        code, err, text = _cli(argv)
    note(f"dse {' '.join(argv)} -> {code}: {text[-2000:]}")
    assert "Traceback" not in text, text
    assert not isinstance(err, SpecError), f"validate accepted {path}, `dse {argv[0]}` refused it: {err}"
    assert code in (0, 2, 3) and (code == 0 or isinstance(err, (InfeasibleError, SolverError, StorageError))), \
        (code, err)
    assert _tree(sandbox, skip=out) == before, "a file was written outside the output folder"
    event(f"{argv[0]}: {'ok' if code == 0 else type(err).__name__}")
    path.unlink()
    shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------ what this fuzzer (and the issue) found, kept as examples

_H100 = TEXT["chips/h100-sxm.yaml"]


@pytest.mark.parametrize("case, text, where, words", [
    # issue 21 item 3: a chip with an unknown process validated, then `dse eval` failed
    ("unknown process", re.sub(r"(?m)^process: .*$", "process: n1", _H100), "process: n1",
     ["unknown process node 'n1'", "did you mean"]),
    # the fuzzer: more enabled units than the die has validated, then the area model refused it
    ("units over units_physical", re.sub(r"(?m)^units: .*$", "units: 200", _H100), "units_physical:",
     ["units_physical: must be >= units (200)"]),
    # the fuzzer: a NUL byte was a two-line message without a line and column
    ("a NUL byte", _H100.replace("name: h100-sxm", "name: h100\x00-sxm"), "name: h100", ["unacceptable character"]),
])
def test_fuzz_findings_are_refused_at_validate(sandbox, case, text, where, words):
    path = sandbox / "found.yaml"
    path.write_text(text)
    code, out = _validate(path)
    assert code == 2 and "Traceback" not in out, out
    line = next(i for i, x in enumerate(text.splitlines(), 1) if where in x)
    assert f"{path}:{line}:" in out, out
    for w in words:
        assert w in out, (w, out)
    assert not _located(out, path), out


def test_a_key_with_line_breaks_stays_one_located_problem(sandbox):
    """Found by this fuzzer: a workload key holding a vertical tab (YAML "\\v") split its unknown-key problem in two
    lines, the second without file:line:col. Each line-break character inside a problem is shown escaped."""
    raw = (b'name: odd\nworkloads:\n  "a\\vb\\nc\\u2028d": 1\nbase: h100-sxm\nspace: {clock: {choice: [1 GHz]}}\n'
           b'objectives: [energy_per_token]\nsolver: {method: grid}\n')
    path = sandbox / "odd-key.yaml"
    path.write_bytes(raw)
    code, text = _validate(path)
    assert code == 2 and "a\\x0bb\\nc\\u2028d" in text, text
    assert not _located(text, path)
