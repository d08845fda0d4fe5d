"""The command line as a property (issue 21 item 6): mutated flags of every `dse` command.

A hypothesis strategy builds a command line of one sub-command (run, report, pareto, eval, tiles, whatif,
calibrate, serve, validate, show, catalog, schema): each flag present or not, its value drawn from good values and
from what a hurried user types (0, -1, 2**32, NaN, a bare number for a quantity, a unit of the wrong kind, an
unknown name, an empty string, a folder, a missing file, a file of another kind), then damaged (a flag typed
wrong, given twice, taken from another command, dropped, a stray word). Each is run in this process through
``dse.cli.main`` in a sandbox folder that is also the current folder. Asserted:

* the exit code is 0, 2 (a spec error, an infeasible question, a solver's limit, or argparse's refusal of a
  flag) or 3 (a storage error); never another exception (a traceback), and no traceback text in the output;
* an exit code of 2 comes with a message (``dse: error: ...`` or argparse's ``dse COMMAND: error: ...``), one
  whose problems in a file name it at ``file:line:col`` (or the file, for a file unreadable as a whole);
* nothing is written outside the output folder the command line names (``--out``, the results folder of
  `dse report`) and the study's own output folder: the sandbox holds the same files before and after.

The budgets stay tiny (``--trials`` at most 3, one worker), so the run is fast and the same each time: derandomized,
EXAMPLES examples, no example database, no shrinking. A few cases run as a subprocess (``python -m dse.cli``, what
the `dse` script runs), where a traceback and the exit code are what a user sees.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

from dse import cli
from tests.spec.test_fuzz_cli import _tree, pngs_stubbed
from tests.spec.test_fuzz_files import CALIBRATED_CHIP, KNOBS, MODEL_CONFIGS, SEED_CSV

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 300

STUDY = """\
name: flags
workloads: [{model: qwen3-8b, phase: decode, batch: 8, context: 8192}]
base: h100-sxm
space:
  units: {int: [64, 132]}
objectives: [tpot, die_area]
solver: {method: random, trials: 2, batch: 2, seed: 0}
output: out-default
"""
WORKLOAD = "qwen3-8b:decode:batch=1:context=1024"


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """The sandbox (the current folder while the module runs), with one file of each kind and a results folder."""
    folder = tmp_path_factory.mktemp("fuzz-flags")
    files = {
        "study.yaml": STUDY, "chip.yaml": (ROOT / "dse/data/chips/h100-sxm.yaml").read_text(),
        "calibrated.yaml": CALIBRATED_CHIP, "measurements.csv": SEED_CSV, "knobs.yaml": KNOBS,
        "config.json": MODEL_CONFIGS["configs/qwen3-8b.json"], "notes.txt": "my notes\nline two\n",
        "whatif.yaml": (ROOT / "studies/whatif-h100-upgrades.yaml").read_text().replace(
            "output: results/whatif-h100-upgrades", "output: out-default"),
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "empty").mkdir()
    before = os.getcwd()
    os.chdir(folder)
    try:
        with _quiet():
            assert cli.main(["run", "study.yaml", "--trials", "3", "--out", "results", "--quiet"]) == 0
        yield folder
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _quiet():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        yield out


# ------------------------------------------------------------ values a user might type

INTS = ["0", "-1", "x", "", "1.5", "1e3", "2**32", " 2", "nan", "99999999999999999999999", "٣"]
NAMES_OF_FILES = ["missing.yaml", "empty", "notes.txt", "/dev/null", "study.yaml", "chip.yaml", "measurements.csv",
                  "config.json", "knobs.yaml", "calibrated.yaml", "results"]
CHIPS = ["h100-sxm", "H100-SXM", "h100", "mi355x", "rtx-4090", "", "nope", "chip.yaml", "calibrated.yaml", "empty",
         "missing.yaml", "notes.txt", "study.yaml", "/dev/null"]
WORKLOADS = [WORKLOAD, "qwen3-8b:prefill:tokens=128", "gemm:m=1:k=4096:n=4096", "qwen3-8b:decode",
             "qwen3-8b:decode:batch=0:context=1", "qwen3-8b:decode:batch=1:context=1024:weights=fp9",
             "qwen3-8b:decode:batch=1:context=1024:batch=2", "qwen3-8b:decode:batch=1:context=1024:workspace=1",
             "qwen3-8b:decode:batch=1:context=1024:workspace=1 GiB", "llama:decode:batch=1:context=1", "", ":",
             "qwen3-30b-a3b:decode:batch=2:context=512:routing=concentrated", "gemm:m=1:k=4096",
             "qwen3-8b:decode:batch=9007199254740992:context=9007199254740992",
             "qwen3-8b:prefill:batch=1:tokens=9007199254740992", "gemm:m=9007199254740992:k=1:n=1",
             "qwen3-8b:decode:batch=1:context=1024:routing=uniform"]
SETS = ["hbm.stacks=6", "clock=2 GHz", "clock=2.0", "clock=2", "l2=50 MB", "l2=50.0", "units=0", "units=-1",
        "units=132.5", "bogus=1", "=1", "clock=", "tdp=700 W", "tdp=700", "matrix.flops_per_cycle.fp8_e4m3=x2",
        "matrix.flops_per_cycle.fp8_e4m3=xnan", "hbm.generation=hbm9", "hbm.generation=hbm3e", "clock=nan GHz",
        "clock=1e400 GHz", "clock=-1 GHz", "process=n1", "units", "hbm.pin_rate=8 Gb/s", "units=x0.5",
        "calibration.compute_efficiency=0.5", "calibration.compute_efficiency=2", "clock=80 GB"]
FIXES = ["compute_efficiency=1", "kernel_overhead=0", "step_overhead=0", "step_overhead=0 s", "x=1",
         "compute_efficiency=2", "compute_efficiency=nan", "kernel_overhead=-1 us", "kernel_overhead=1 us",
         "bandwidth_efficiency=0", "=", "compute_efficiency", "kernel_overhead=1e400 s"]
FORMATS = ["bf16", "fp8", "fp8_e4m3", "int4_g128", "mxfp4", "fp9", "", "BF16", "int8"]
TIMES = ["50ms", "50 ms", "0 s", "-1 ms", "x", "nan s", "1e400 s", "50", "1 ns", "50 GB", ""]
FRACTIONS = ["1", "0.5", "0", "2", "50%", "nan", "x", "-0.5", "1e-9", "inf", "", "100%", "101%"]
BYTES = ["2 GiB", "0", "2", "-1 GB", "x", "1e400 GB", "0 B", "1000 GB", "", "nan GB"]
OBJECTIVES = ["tpot", "die_area", "bogus", "", "latency_per_token", "chip_cost", "trial"]


def v(good, bad=()) -> tuple[list[str], list[str]]:
    """A flag's values: good ones (drawn 5 times in 6) and ones a hurried user types."""
    return [str(g) for g in good], [str(b) for b in bad]


def n(*good) -> tuple[list[str], list[str]]:
    """An integer flag's values: ``good`` and the usual wrong integers."""
    return v(good, INTS)


# (positional arguments, {flag: values; None: a switch}, required flags) of each sub-command. Budgets stay tiny:
# --trials at most 3, --workers 1 (a worker process per example would cost a second each).
COMMANDS = {
    "run": ([v(["study.yaml"], ["whatif.yaml", "chip.yaml", "missing.yaml", "empty", "notes.txt"])],
            {"--trials": n(1, 2, 3), "--workers": n(1), "--seed": n(0, 7, 4294967295, 4294967296),
             "--storage": v(["journal:{out}/j.log", "sqlite:///{out}/s.db"],
                            ["journal:notes.txt", "bogus", "", "mysql://x", "journal:{out}", "journal:empty",
                             "sqlite:////proc/self/x/y.db"]),
             "--out": v(["{out}"], ["notes.txt", "/proc/self/x", "", "empty"]), "--quiet": None}, ()),
    "report": ([v(["results"], ["empty", "missing", "notes.txt", "study.yaml"])], {}, ()),
    "pareto": ([v(["results"], ["empty", "missing", "notes.txt"])],
               {"--x": v(["tpot", "die_area"], OBJECTIVES), "--y": v(["die_area", "tpot"], OBJECTIVES)}, ()),
    "eval": ([], {"--chip": v(CHIPS[:5] + ["chip.yaml"], CHIPS), "--workload": v(WORKLOADS[:3], WORKLOADS),
                  "--breakdown": None,
                  "--calibrated": v(["measurements.csv", "calibrated.yaml"], ["chip.yaml", "missing.csv", "notes.txt",
                                                                             "config.json", "empty"]),
                  "--fix": v(FIXES[:3], FIXES)}, ("--chip", "--workload")),
    "tiles": ([], {"--chip": v(["h100-sxm", "mi355x", "rtx-4090"], CHIPS), "--m": n(1, 64, 4096),
                   "--n": n(64, 4096), "--k": n(64, 4096), "--batch": n(1, 2), "--format": v(FORMATS[:5], FORMATS),
                   "--solver": v(["heuristic"], ["cpsat", "both", "x"]),
                   "--waves-per-tile": n(1, 4), "--vgprs-per-lane": n(64, 512)},
              ("--chip", "--m", "--n", "--k")),
    "whatif": ([v(["whatif.yaml"], ["study.yaml", "missing.yaml", "chip.yaml", "knobs.yaml"])],
               {"--base": v(["h100-sxm", "chip.yaml"], CHIPS), "--set": v(SETS[:2], SETS),
                "--chip": v(["mi355x", "calibrated.yaml"], CHIPS), "--workload": v(WORKLOADS[:3], WORKLOADS),
                "--out": v(["{out}"], ["notes.txt", "/proc/self/x"])}, ()),
    "calibrate": ([v(["measurements.csv"], ["missing.csv", "notes.txt", "chip.yaml", "empty", "config.json"])],
                  {"--chip": v(["apple-m2-max"], ["h100-sxm", "apple-m2", "", "chip.yaml", "missing.yaml"]),
                   "--fix": v(["kernel_overhead=0", "step_overhead=0"], FIXES),
                   "--variant": v(["reuse", "rotate"], ["rotat", ""]), "--strict": None,
                   "--out": v(["{out}/chip.yaml"], ["notes.txt", "empty", "/proc/self/x/c.yaml"])},
                  ("--chip",)),
    "serve": ([], {"--chip": v(["h100-sxm", "chip.yaml", "calibrated.yaml"], CHIPS),
                   "--model": v(["llama-3.1-8b", "qwen3-30b-a3b", "config.json"],
                                ["missing.json", "nope", "", "chip.yaml", "notes.txt", "empty"]),
                   "--isl": n(1, 128, 2048, 10**6), "--osl": n(1, 128), "--tp": n(1, 2, 8, 1000),
                   "--pp": n(1, 2, 64), "--ep": n(1, 2, 3), "--weights": v(FORMATS[:5], FORMATS),
                   "--kv": v(FORMATS[:5], FORMATS), "--activations": v(FORMATS[:5], FORMATS),
                   "--tpot-slo": v(TIMES[:2], TIMES),
                   "--calibration": v(["none", "knobs.yaml"], ["NONE", "missing.yaml", "chip.yaml", "notes.txt", "",
                                                               "empty"]),
                   "--stack": v(["trtllm", "vllm-eager"], ["sglang", ""]), "--load": v(FRACTIONS[:2], FRACTIONS),
                   "--kv-fraction": v(FRACTIONS[:2], FRACTIONS), "--kv-policy": v(["reserve", "current"], ["x"]),
                   "--block-tokens": n(1, 32), "--max-batch": n(1, 64, 10**9),
                   "--max-num-tokens": n(1, 8192, 10**9), "--workspace": v(BYTES[:1] + BYTES[-3:-2], BYTES),
                   "--no-chunked-prefill": None, "--disaggregated": None},
              ("--chip", "--model", "--isl", "--osl")),
    "validate": ([v(NAMES_OF_FILES), v(NAMES_OF_FILES)], {}, ()),
    "show": ([v(CHIPS[:5] + ["chip.yaml", "calibrated.yaml"], CHIPS)], {}, ()),
    "catalog": ([], {"--format": v(["text", "markdown", "csv"], ["x"])}, ()),
    "schema": ([v(["study", "chip", "workload"], ["x", ""])], {}, ()),
}
FLAGS = sorted({f for _, flags, _ in COMMANDS.values() for f in flags})


def _value(draw, values) -> str:
    good, bad = values
    return draw(st.sampled_from(bad if bad and not draw(st.integers(0, 5)) else good))


@st.composite
def command_line(draw):
    name = draw(st.sampled_from(sorted(COMMANDS)))
    positional, flags, required = COMMANDS[name]
    argv = [name]
    for values in positional:
        if draw(st.integers(0, 9)):
            argv.append(_value(draw, values))
    for flag, values in flags.items():
        if draw(st.integers(0, 9)) < (9 if flag in required else 3):
            argv += [flag] if values is None else [flag, _value(draw, values)]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):  # damage
        op = draw(st.sampled_from(["typo", "twice", "foreign", "drop", "stray", "help"]))
        flag_at = [i for i, a in enumerate(argv) if a.startswith("--")]
        if op == "typo" and flag_at:
            i = draw(st.sampled_from(flag_at))
            argv[i] = draw(st.sampled_from([argv[i][:-1], argv[i] + "s", argv[i].upper(), "-" + argv[i][2:]]))
        elif op == "twice" and flag_at:
            i = draw(st.sampled_from(flag_at))
            argv += argv[i:i + 2]
        elif op == "foreign":
            argv += [draw(st.sampled_from(FLAGS)), draw(st.sampled_from(["1", "x", WORKLOAD]))]
        elif op == "drop" and len(argv) > 1:
            del argv[draw(st.integers(1, len(argv) - 1))]
        elif op == "stray":
            argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["x", "-", "--", "study.yaml", "-h"])))
        elif op == "help":
            argv.append("--help")
    return argv


# ------------------------------------------------------------ the property

#: A problem of a whole file (unreadable, missing, a folder, not a regular file, too big, not the kind expected).
_WHOLE_FILE = re.compile(r"not valid UTF-8|malformed YAML|no such|is a directory|cannot read|not a regular file|"
                         r"nested too deeply|bytes;|the file is empty|expected a YAML mapping|cannot tell what")


def _main(argv: list[str]) -> tuple[int, BaseException | None, str]:
    """``dse ARGV`` in this process: (exit code, the exception main let through, everything printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse: 2 for a bad flag, 0 for --help
            code = e.code if isinstance(e.code, int) else 2
    return code, None, out.getvalue()


def _unlocated(text: str) -> list[str]:
    """The problems of an error message that are about a YAML, CSV or JSON file and do not say where in it."""
    body = text.split("dse: error: ", 1)[1] if "dse: error: " in text else ""
    bad = []
    for problem in body.splitlines():
        m = re.match(r"\S+?\.(?:ya?ml|csv|json):(?P<rest>.*)", problem)
        if m is None:  # not a problem of a file's text (a flag, a chip name, a fit's knobs)
            continue
        rest = m.group("rest")
        if not (re.match(r"\d+:\d+[ :]", rest) or _WHOLE_FILE.search(rest[:160])):
            bad.append(problem)
    return bad


@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(argv=command_line(), n=st.integers(0, 10**6))
def test_every_command_line_ends_in_0_2_or_3_without_a_traceback(box, argv, n):

    out = box / f"out-{n}"
    argv = [a.replace("{out}", str(out)) for a in argv]
    note(f"dse {' '.join(argv)}")
    # the output folder (or a journal the command line puts there, with its lock files beside it), the study's
    # own output folder, and for `dse report` the results folder it rewrites
    allowed = {out, Path(f"{out}.flock"), Path(f"{out}.budget.lock"), box / "out-default"} | \
        ({box / "results"} if argv[0] == "report" else set())
    before = {k: v for k, v in _tree(box, skip=out).items() if not any(Path(box / k).is_relative_to(a)
                                                                        for a in allowed)}
    with pngs_stubbed():
        code, _, text = _main(argv)  # an exception other than SystemExit escapes: a bug
    note(f"-> {code}: {text[-3000:]}")
    assert code in (0, 2, 3), (code, text)
    assert "Traceback" not in text, text
    if code == 2:
        assert re.search(r"(^|\n)dse( \w+)?: error: \S", text), f"exit 2 without a message: {text!r}"
        assert not _unlocated(text), _unlocated(text)
    after = {k: v for k, v in _tree(box, skip=out).items() if not any(Path(box / k).is_relative_to(a)
                                                                       for a in allowed)}
    assert after == before, f"written outside the output folder: {sorted(set(after.items()) ^ set(before.items()))}"
    event(f"{argv[0]}: exit {code}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(box / "out-default", ignore_errors=True)


# ------------------------------------------------------------ as a user runs it: a process, its exit code, stderr

SUBPROCESS_CASES = [  # one of each outcome: argparse's refusal, a located spec error, success, a former hang
    (["run", "study.yaml", "--seed", "4294967296"], 2, "expected an integer in [0, 2**32)"),
    (["serve", "--chip", "h100-sxm", "--model", "config.json", "--isl", "1", "--osl", "1", "--calibration",
      "chip.yaml"], 2, "chip.yaml:4:1: expected a knob file"),
    (["validate", "knobs.yaml", "config.json", "measurements.csv"], 0, "config.json: valid model"),
    (["eval", "--chip", "h100-sxm", "--workload", "qwen3-8b:decode:batch=9007199254740992:context=9007199254740992"],
     0, "workload: qwen3-8b"),
]


@pytest.mark.parametrize("argv, code, words", SUBPROCESS_CASES, ids=[" ".join(c[0][:2]) for c in SUBPROCESS_CASES])
def test_as_a_process(box, argv, code, words):
    """`python -m dse.cli ...` as a user runs it: the documented exit code, the message on stderr, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "dse.cli", *argv], cwd=box, capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    assert words in (proc.stderr if code else proc.stdout), proc.stderr[-2000:]


# ------------------------------------------------------------ what this fuzzer found (fixed), kept as examples


@pytest.mark.parametrize("argv, words", [
    # an existing file as the output folder of `dse whatif`: FileExistsError traceback
    (["whatif", "--base", "h100-sxm", "--set", "hbm.stacks=6", "--workload", WORKLOAD, "--out", "notes.txt"],
     ["notes.txt: the output folder exists as a file; give a folder with --out"]),
    # a folder as the calibrated chip file of `dse calibrate --out`
    (["calibrate", "measurements.csv", "--chip", "apple-m2-max", "--fix", "kernel_overhead=0", "--fix",
      "step_overhead=0", "--out", "empty"], ["empty: is a folder; give a file name with --out"]),
    # the same workload twice: "TypeError: float() argument must be ... not 'Series'" in the table
    (["whatif", "whatif.yaml", "--workload", WORKLOAD, "--workload", "qwen3-8b:decode:context=1024:batch=1"],
     ["the same workload as --workload " + WORKLOAD]),
    # a --stack the knob file lacks was reported as a problem of the shipped file, at no line
    (["serve", "--chip", "h100-sxm", "--model", "llama-3.1-8b", "--isl", "1", "--osl", "1", "--stack", "sglang"],
     ["--stack sglang: unknown knob profile 'sglang'"]),
])
def test_fuzz_findings_are_one_message(box, argv, words):
    before = _tree(box, skip=box / "none")
    code, _, text = _main(argv)
    assert code == 2 and "Traceback" not in text, text
    for w in words:
        assert w in text, (w, text)
    assert _tree(box, skip=box / "none") == before


def test_a_refused_journal_leaves_no_lock_files(box):
    """`--storage journal:notes.txt` was refused (not a journal) after notes.txt.budget.lock was made beside it."""
    before = _tree(box, skip=box / "none")
    code, _, text = _main(["run", "study.yaml", "--storage", "journal:notes.txt", "--out", str(box / "o-j"),
                           "--quiet"])
    assert code == 2 and "is not an Optuna journal" in text, text
    assert _tree(box, skip=box / "o-j") == before  # notes.txt untouched, nothing beside it
    shutil.rmtree(box / "o-j", ignore_errors=True)


def test_the_largest_seed_runs_with_cpsat_tiles(box):
    """--seed 4294967295 (in the documented [0, 2**32)) crashed in CP-SAT, whose seed is a signed 32-bit integer."""
    with _quiet() as out:
        code = cli.main(["run", "study.yaml", "--trials", "2", "--seed", "4294967295", "--out", str(box / "o-s"),
                         "--quiet"])
    assert code == 0, out.getvalue()
    shutil.rmtree(box / "o-s", ignore_errors=True)


def test_a_whatif_file_writes_only_below_its_folder(box):
    """A what-if file's `output: ../escape` wrote there (a study's output was already confined, issue 21 item 1);
    now it is refused at its line unless --out gives the folder."""
    sub = box / "sub"
    sub.mkdir(exist_ok=True)
    text = (box / "whatif.yaml").read_text().replace("output: out-default", "output: ../escape")
    (sub / "w.yaml").write_text(text)
    code, _, out = _main(["whatif", str(sub / "w.yaml")])
    line = next(i for i, x in enumerate(text.splitlines(), 1) if x.startswith("output:"))
    assert code == 2 and f"w.yaml:{line}:9 output: the output folder {box / 'escape'} is outside" in out, out
    assert not (box / "escape").exists()
    code, _, out = _main(["whatif", str(sub / "w.yaml"), "--out", str(box / "o-w")])
    assert code == 0 and (box / "o-w" / "whatif.md").is_file(), out
    shutil.rmtree(box / "o-w")
    shutil.rmtree(sub)


def test_the_fuzzers_cover_every_kind_with_1000_examples():
    """issue 21 item 6: 1,000+ derandomized examples in CI over study, chip, what-if, workload, model config and
    calibration files and the command line. The counts are the tests' own settings (max_examples)."""
    from tests.spec import test_fuzz_cli, test_fuzz_files

    tests = [test_fuzz_cli.test_validate_exits_0_or_2_with_located_messages,
             test_fuzz_cli.test_what_validate_accepts_runs,
             test_fuzz_files.test_validate_exits_0_or_2_with_located_messages,
             test_fuzz_files.test_what_validate_accepts_runs,
             test_every_command_line_ends_in_0_2_or_3_without_a_traceback]
    counts = [t._hypothesis_internal_use_settings.max_examples for t in tests]
    assert all(t._hypothesis_internal_use_settings.derandomize for t in tests)
    assert sum(counts) >= 1000, counts
    kinds = {k.split("/")[0] for k in test_fuzz_cli.SHIPPED} | {k.split("/")[0] for k in test_fuzz_files.TEXT}
    assert kinds == {"studies", "chips", "workloads", "configs", "calibration"}, kinds
    assert {Path(k).name for k in test_fuzz_files.TEXT if k.startswith("calibration/")} == \
        {"seed004.csv", "knobs.yaml", "rtx-pro-6000-calibrated.yaml"}
    cli._load_extra_commands()
    assert set(COMMANDS) == set(cli.build_parser()._subparsers._group_actions[0].choices)  # every sub-command
