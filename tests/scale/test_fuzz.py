"""Fuzz the study files: random and mutated YAML must end in a located DseError or a valid run.

Examples start from the shipped studies (studies/*.yaml) and mutate them:
wrong types, missing and extra keys, odd units, huge, negative and
non-finite numbers, deep nesting, non-UTF-8 bytes, byte-level damage, and
wholly random YAML. Each is written to a file and checked with ``dse
validate`` (:func:`dse.cli.validate.validate_file`) and ``load_study``. The
outcome must be a :class:`DseError` each of whose problems names where it is
(``file:line:col``, in the study or in a YAML file it points to; never a
phantom ``<input>:1:1``), never another exception. Validation equals run:
every file that validates as a study is run (2 trials for a search, its own
budget for a grid, in one process, nothing written but the journal, in a temp
folder) and must not end in a SpecError; it ends in a table, or in an
InfeasibleError / SolverError (no feasible design; a solver's own limit).
"""

from __future__ import annotations

import copy
import math
import os
import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from dse import registry
from dse.errors import DseError, InfeasibleError, SolverError, SpecError
from dse.hardware import param_dimension, parameter_names
from dse.spec.study import WORKLOAD_PARAMS
from dse.study import design_space, run_study
from dse.spec.study import load_study
from dse.cli.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]
BASES = {p.name: p.read_text() for p in sorted((ROOT / "studies").glob("*.yaml"))}
PARSED = {k: yaml.safe_load(v) for k, v in BASES.items()}
MAX_RUN_GRID = 2000  # a grid study that validates is run with its own budget when its grid is at most this big
DEEP = 400  # nesting depth of the deep-nesting mutation

# ------------------------------------------------------------ values

ODD_UNITS = ["3.35 TB/s", "80 GiB", "80 Gb", "80", "GB", "", "  ", "-5 W", "0 W", "1e400 GHz", "nan GHz",
             "inf W", "-inf s", "5 furlongs", "1.5 GHz GHz", "1,5 GHz", "1_000 MB", "0x10 MB", "1e-400 s",
             "∞ W", "２ GHz", "1.2.3 GHz", "  1.4  GHz ", "1.4GHz", "1.4 ghz", "1.4 Hz/s", "700 mW", "3 TB/s/s",
             "1e308 TB", "-0 GB", "+2 GHz", "12 mm^2", "12 mm2", "800 mm²", "9" * 400 + " GB", "1 GiB/s",
             "bf16", "fp8", "h100-sxm", "null", "~", "yes", "no", "on", ".nan", "!!binary", "%", "{", "[]"]
NUMBERS = [0, 1, -1, 2, 3, 7, 1000, -1000, 2**31, 2**63, -(2**63), 2**64 + 1, 10**400 // 10**100,
           0.0, -0.0, 0.5, -0.5, 1e-300, 1e300, 1e308, -1e308, math.inf, -math.inf, math.nan]

scalars = st.one_of(
    st.sampled_from(NUMBERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(ODD_UNITS),
    st.text(max_size=30),
    st.text(alphabet=string.ascii_letters + string.digits + " ._-/", max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=12), st.integers(), st.booleans()),
                                            inner, max_size=4)),
    max_leaves=12,
)


def _paths(node, prefix=()):
    """Every path (tuple of keys/indices) into a parsed YAML tree, the root included."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


def _nest(value, depth: int, kind: str):
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


# ------------------------------------------------------------ mutations of a parsed study


@st.composite
def mutated_tree(draw):
    name = draw(st.sampled_from(sorted(PARSED)))
    data = copy.deepcopy(PARSED[name])
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_paths(data))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "delete", "extra", "typo", "unit", "number", "deep",
                                   "wrap", "unwrap"]))
        if not path:
            if op in ("replace", "deep"):
                data = draw(values) if op == "replace" else _nest(data, DEEP, draw(st.sampled_from(["list", "dict"])))
            continue
        parent, key = _get(data, path[:-1]), path[-1]
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "extra":
            target = _get(data, path) if isinstance(_get(data, path), dict) else parent
            if isinstance(target, dict):
                target[draw(st.one_of(st.text(max_size=10), st.integers(), st.booleans()))] = draw(values)
            else:
                target.append(draw(values))
        elif op == "typo" and isinstance(parent, dict) and isinstance(key, str) and key:
            i = draw(st.integers(0, len(key) - 1))
            new = key[:i] + draw(st.sampled_from(["", "x", key[i] * 2, key[i].upper(), "-", "_", " "])) + key[i + 1:]
            parent[new] = parent.pop(key)
        elif op == "unit":
            parent[key] = draw(st.sampled_from(ODD_UNITS))
        elif op == "number":
            parent[key] = draw(st.sampled_from(NUMBERS))
        elif op == "deep":
            parent[key] = _nest(parent[key], DEEP, draw(st.sampled_from(["list", "dict"])))
        elif op == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"value": parent[key]}, str(parent[key])]))
        elif op == "unwrap":
            v = parent[key]
            if isinstance(v, list) and v:
                parent[key] = v[0]
            elif isinstance(v, dict) and v:
                parent[key] = next(iter(v.values()))
    return data


def _dump(data) -> bytes:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100).encode("utf-8")
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):  # not representable: a plain repr instead
        return repr(data).encode("utf-8", "surrogatepass")


@st.composite
def damaged_text(draw):
    """Byte-level damage to a shipped study: non-UTF-8 bytes, cut, duplicated or re-indented lines."""
    raw = BASES[draw(st.sampled_from(sorted(BASES)))].encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["bytes", "cut", "dup", "indent", "delete_line", "swap", "tab", "bom"]))
        lines = raw.split(b"\n")
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "bytes":
            pos = draw(st.integers(0, len(raw)))
            junk = draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\x80\x81", b"\x00", b"\xed\xa0\x80",
                                         b"\xef\xbb\xbf", b"\t", b"\r", b"'", b'"', b"&a *a", b"!!python/object:os.system"]))
            raw = raw[:pos] + junk + raw[pos:]
        elif op == "cut":
            raw = raw[: draw(st.integers(0, len(raw)))]
        elif op == "dup":
            lines.insert(i, lines[i])
            raw = b"\n".join(lines)
        elif op == "indent":
            lines[i] = b" " * draw(st.integers(1, 7)) + lines[i]
            raw = b"\n".join(lines)
        elif op == "delete_line":
            del lines[i]
            raw = b"\n".join(lines)
        elif op == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            raw = b"\n".join(lines)
        elif op == "tab":
            lines[i] = lines[i].replace(b"  ", b"\t")
            raw = b"\n".join(lines)
        elif op == "bom":
            raw = b"\xef\xbb\xbf" + raw
    return raw


random_yaml = st.one_of(
    values.map(_dump),
    st.binary(max_size=200),
    st.text(alphabet=":-[]{}!&*#|>'\"%@`, \n\tabc01", max_size=120).map(lambda t: t.encode("utf-8")),
    st.sampled_from([b"[" * 5000, b"{a: " * 3000, b"- " * 3000 + b"x", b"&a [*a]", b"a: &a [*a, *a]",
                     b"!!python/object/apply:os.system ['echo pwned']", b"!!python/name:os.system",
                     b"a: !!binary AAAA", b"a: !!set {x, y}", b"? [a, b]\n: c", b"<<: {a: 1}", b"---\n---\n",
                     b"a: 1\na: 2", b"\xff\xfe", b"", b"   ", b"# only a comment", b"null", b"[]", b"42"]),
)

# ------------------------------------------------------------ well-formed studies with other spaces and solvers
#
# Files the validator mostly accepts: a shipped study whose space, solver and constraints are replaced by
# well-typed but arbitrary ones (any chip parameter, values of any kind and unit). These hunt studies that
# validate and then fail in the run (validation equals run).

STUDY_BASES = sorted(k for k, v in PARSED.items() if isinstance(v, dict) and "space" in v)
PARAM_NAMES = sorted(parameter_names()) + [f"workload.{w}" for w in WORKLOAD_PARAMS]
#: A unit of each dimension (the values are drawn in the parameter's own dimension 4 times in 5).
UNITS = {"bytes": "MB", "bandwidth": "GB/s", "time": "us", "frequency": "GHz", "power": "W", "area": "mm^2",
         "length": "mm", "energy_per_byte": "pJ/B", "energy_per_flop": "pJ/FLOP", "money": "$"}
NUMBERS_IN_SPACE = [0, 1, 2, 4, 8, 64, 132, -1, 0.5, 1.5, 1e6]
NAMES_IN_SPACE = ["hbm3", "hbm3e", "hbm2e", "n5", "n3", "n7", "bf16", "fp8", "int4", "gddr7", "x2", "yes"]
CATALOG = ["h100-sxm", "h200-sxm", "mi355x", "groq-tsp", "b200", "rtx-4090", "cerebras-wse-3"]
PARAMLESS_CONSTRAINTS = [c for c in registry.constraint_names()
                         if all(d != None for _, d in registry.get_constraint(c).PARAMS.values())]  # noqa: E711


def _dimension(name: str):
    try:
        return param_dimension(name)
    except DseError:
        return None


@st.composite
def space_entry(draw):
    name = draw(st.sampled_from(PARAM_NAMES))
    dim = _dimension(name) if not name.startswith("workload.") else None
    if dim is not None and draw(st.integers(0, 4)):
        unit = UNITS[dim]
        value = st.sampled_from([1, 2, 16, 50, 100, 700]).map(lambda x: f"{x} {unit}")
    else:
        value = st.one_of(st.sampled_from(NUMBERS_IN_SPACE), st.booleans(), st.sampled_from(NAMES_IN_SPACE))
    kind = draw(st.sampled_from(["int", "float", "log", "choice", "choice"]))
    if kind == "choice":
        return name, {"choice": draw(st.lists(value, min_size=1, max_size=3, unique_by=repr))}
    ends = draw(st.lists(value, min_size=2, max_size=2))
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ends):
        ends = sorted(ends)
    return name, {kind: ends}


@st.composite
def respaced_study(draw):
    data = copy.deepcopy(PARSED[draw(st.sampled_from(STUDY_BASES))])
    if draw(st.booleans()):
        data["space"] = {}
    for name, body in draw(st.lists(space_entry(), min_size=1, max_size=3)):
        data["space"][name] = body
    if draw(st.integers(0, 4)) == 0:
        data["space"]["base"] = {"choice": draw(st.lists(st.sampled_from(CATALOG), min_size=1, max_size=3,
                                                        unique=True))}
    solver = dict(data.get("solver") or {})
    if draw(st.booleans()):
        solver["method"] = draw(st.sampled_from(["nsga2", "tpe", "random", "grid", "cpsat_tiles", "cpsat_split"]))
    if draw(st.booleans()):
        solver[draw(st.sampled_from(["population", "batch", "resolution", "trials"]))] = draw(
            st.sampled_from([1, 2, 3, 50]))
    data["solver"] = solver
    if draw(st.booleans()):
        cons = dict(data.get("constraints") or {})
        cons[draw(st.sampled_from(PARAMLESS_CONSTRAINTS))] = None
        data["constraints"] = cons
    if draw(st.integers(0, 3)) == 0:
        data["base"] = draw(st.sampled_from(CATALOG))
    return data


examples = st.one_of(mutated_tree().map(_dump), mutated_tree().map(_dump), damaged_text(), random_yaml,
                     respaced_study().map(_dump))

# ------------------------------------------------------------ the property


#: One problem, located: ``file:line:col`` in the study or another YAML file it names (a chip file).
LOCATED = re.compile(r"^(?P<file>\S+):\d+:\d+[ :]")
#: Problems of a file that cannot be read as YAML at all name the file (and the line where there is one).
WHOLE_FILE = re.compile(r"^(?P<file>\S+?):(\d+:)? ?(not valid UTF-8|YAML nested too deeply|malformed YAML|"
                        r"no such file|is a directory|cannot read)")


def _located(err: DseError, path: Path) -> bool:
    """Every problem of the error names its file and line:col (a YAML file, never '<input>' or '<string>')."""
    for problem in getattr(err, "problems", None) or [str(err)]:
        m = LOCATED.match(problem) or WHOLE_FILE.match(problem)
        if m is None or m.group("file") in ("<input>", "<string>"):
            return False
        if m.group("file") != str(path) and not re.search(r"\.ya?ml$", m.group("file")):
            return False
    return True


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


_counter = iter(range(10**9))


def _check(folder: Path, raw: bytes) -> str:
    i = next(_counter)
    path = folder / f"fuzz{i}.yaml"
    path.write_bytes(raw)
    note(f"file {path}:\n{raw[:3000]!r}")
    kind = None
    for check in (validate_file, load_study):
        try:
            out = check(path)
        except DseError as e:
            msg = str(e)
            assert msg.strip(), f"{check.__name__}: an empty error message"
            assert _located(e, path), f"{check.__name__}: error without a file:line:col location: {msg!r}"
        except Exception as e:  # the bug this test hunts
            raise AssertionError(f"{check.__name__} raised {type(e).__name__}: {e}") from e
        else:
            if check is validate_file:
                kind = out
    if kind != "study":
        return "error" if kind is None else f"valid {kind}"
    spec = load_study(path)  # validate accepted it as a study: load_study must too, and the run must take it
    if spec.solver.storage is not None:  # a storage the file names (maybe relative to the cwd): not here
        return "valid, not run (names a storage)"
    trials = 2
    if spec.solver.method == "grid":
        size = design_space(spec).grid_size(spec.solver.resolution)
        if size > MAX_RUN_GRID:
            return "valid, not run (grid too big for a test)"
        trials = spec.solver.trials
    try:
        run_study(path, trials=trials, workers=1, storage=None, out=folder / f"run{i}", write=False)
    except InfeasibleError:
        return "ran (infeasible)"
    except SolverError as e:
        event(f"solver error: {str(e)[:40]}")
        return "ran (solver error)"
    except SpecError as e:
        raise AssertionError(f"validate accepted the study, the run refused it: {e}") from e
    return "ran"


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=examples)
def test_study_files_fail_cleanly_or_run(folder, raw):
    event(_check(folder, raw))


def test_shipped_files_validate():
    for name in BASES:
        assert validate_file(ROOT / "studies" / name) in ("study", "whatif")


# ------------------------------------------------------------ what the fuzzer found (fixed), kept as examples

_STUDY = """name: t
workloads: [{model: qwen3-8b, phase: decode, batch: 8, context: 8192}]
base: h100-sxm
space: {units: {int: [16, 64]}}
objectives: [latency_per_token]
"""

FOUND = {
    "top-level scalar": ("0\n", ":1:1: expected a YAML mapping"),
    "overrides a string": (_STUDY + "overrides: hbm3e\n", "overrides: expected a mapping"),
    "overrides a number": (_STUDY + "overrides: -1\n", "overrides: expected a mapping"),
    "overrides with a bool key": (_STUDY + "overrides: {true: 1}\n", "chip parameter name"),
    "workload key with '['": (_STUDY.replace("context: 8192}", "context: 8192, 'a[b': 1}"), "a[b: unknown key"),
    "no workloads": (_STUDY.replace("workloads: [{model: qwen3-8b, phase: decode, batch: 8, context: 8192}]",
                                    "workloads: []"), "at least one workload"),
    "null workloads": (_STUDY.replace("workloads: [{model: qwen3-8b, phase: decode, batch: 8, context: 8192}]",
                                      "workloads:"), "at least one workload"),
    "bad format choice": (_STUDY.replace("space: {units: {int: [16, 64]}}",
                                         "space: {units: {int: [16, 64]}, workload.formats.kv: {choice: [bf16, -1]}}"),
                          "makes an invalid workload"),
    "fractional batch": (_STUDY.replace("space: {units: {int: [16, 64]}}",
                                        "space: {units: {int: [16, 64]}, workload.batch: {choice: [1, 2.5]}}"),
                         "whole numbers >= 1"),
    "int range past int64": (_STUDY.replace("[16, 64]", "[16, 18446744073709551617]"), "at most 2**53"),
    "infinite range": (_STUDY.replace("[16, 64]", "[16, .inf]"), "finite numbers"),
    "int beyond any float": (_STUDY.replace("[16, 64]", "[16, 1" + "0" * 400 + "]"), "finite numbers"),
    "base a directory": (_STUDY.replace("base: h100-sxm", "base: ."), "is a directory"),
    "base an empty name": (_STUDY.replace("base: h100-sxm", "base: ''"), "expected a catalog chip name"),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_fuzz_findings_are_located_errors(tmp_path, case):
    text, expected = FOUND[case]
    path = tmp_path / "found.yaml"
    path.write_text(text)
    for check in (validate_file, load_study):
        with pytest.raises(SpecError) as e:
            check(path)
        assert expected in str(e.value)
        assert str(path) in str(e.value)
        assert _located(e.value, path), str(e.value)
