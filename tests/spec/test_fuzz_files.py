"""Validate equals run for the other files a user gives dse (issue 21 item 6): workloads, model configs, calibration.

tests/spec/test_fuzz_cli.py mutates the shipped study, what-if and chip files; this module does the same for

* **workload files** (``dse validate workload.yaml``): every workload written in a shipped study, one per shipped
  model (dse/data/models), and an explicit operator list of each kind (gemm, attention, vector);
* **model configs** (a Hugging Face ``config.json``, ``dse serve --model FILE``, ``dse validate FILE``): the test
  configs of tests/data/hf_configs and every shipped model (dse/data/models/*.yaml) written as its config.json;
* **calibration files**: the measurements CSV (dse/data/measurements/seed004.csv: ``dse validate``, ``dse
  calibrate``, ``dse eval --calibrated``), a calibrated chip (the ``calibration:`` section ``dse calibrate --out``
  writes, on rtx-pro-6000: ``dse eval --calibrated``) and the serving knob file (dse/data/serving/knobs.yaml:
  ``dse serve --calibration``).

Each mutant (values replaced, numbers NaN/inf/0/huge/negative, odd units, keys deleted, renamed, added, lists cut,
CSV cells, columns and rows, and byte-level damage) is written into the sandbox (the current folder) and given to
``dse.cli.main`` in this process. Asserted, as in test_fuzz_cli.py: `dse validate` exits 0 or 2 without a
traceback, every problem at ``file:line:col``; what it accepts runs (a workload in a 2-trial study, a model config
through `dse serve`, a CSV through `dse calibrate` or `dse eval --calibrated`, a calibrated chip through `dse eval
--calibrated`, a knob file through `dse serve --calibration`) and ends in exit 0, or 2 for a legitimate outcome that
is not a problem of the file (no feasible design; a fit the measurements cannot identify, named by its knobs, not
by a line of the file); nothing is written outside the output folder.

Derandomized, no example database, no shrinking, a fixed count (VALIDATE_EXAMPLES + RUN_EXAMPLES; about 20 s on a
loaded 2-core machine).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

from dse.errors import InfeasibleError, SolverError, SpecError, StorageError
from tests.scale.test_fuzz import NUMBERS, ODD_UNITS, _dump
from tests.spec.test_fuzz_cli import (
    ALL_OPS,
    MILD_OPS,
    _check_validate,
    _cli,
    _mutate,
    _tree,
    damaged,
    pngs_stubbed,
    sandbox,  # noqa: F401 - the module's sandbox fixture (the current folder while the tests run)
)

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------ the files

TINY_STUDY = """\
name: wl
base: h100-sxm
space: {units: {int: [64, 132]}}
objectives: [die_area]
constraints: {fits_memory: null}
solver: {method: random, trials: 2, batch: 2, seed: 0}
workloads:
  -
"""


def _study_workloads() -> list[dict]:
    """Every workload mapping written in a shipped study or what-if (less the study's own ``weight``)."""
    from dse.workload.spec import _FORMAT_KEYS

    out, seen = [], set()
    for p in sorted((ROOT / "studies").glob("*.yaml")):
        for w in yaml.safe_load(p.read_text()).get("workloads") or []:
            if isinstance(w, str):  # the short form model:phase:key=value -> its mapping
                model, phase, *parts = w.split(":")
                w = {"model": model, "phase": phase}
                for part in parts:
                    k, v = part.split("=", 1)
                    if k in _FORMAT_KEYS:
                        w.setdefault("formats", {})[k] = v
                    else:
                        w[k] = int(v) if v.isdigit() else v
            w = {k: v for k, v in w.items() if k != "weight"}
            key = json.dumps(w, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(w)
    return out


def _model_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "dse/data/models").glob("*.yaml"))


WORKLOADS = {
    **{f"workloads/study-{i}.yaml": _dump(w) for i, w in enumerate(_study_workloads())},
    **{f"workloads/{m}.yaml": _dump({"model": m, "phase": "decode", "batch": 4, "context": 2048,
                                     "formats": {"weights": "fp8_e4m3"}}) for m in _model_names()},
    "workloads/moe-routing.yaml": _dump({"model": "qwen3-30b-a3b", "phase": "prefill", "batch": 2, "tokens": 512,
                                         "cached": 128, "workspace": "1 GiB", "routing": "concentrated"}),
    "workloads/ops.yaml": _dump({"name": "ops", "tokens_per_step": 8, "ops": [
        {"gemm": {"name": "q", "m": 8, "k": 4096, "n": 4096, "count": 36, "formats": {"weights": "fp8_e4m3"}}},
        {"attention": {"heads": 32, "kv_heads": 8, "head_dim": 128, "queries": 1, "context": 4096, "batch": 8,
                       "count": 36}},
        {"vector": {"name": "norm", "kind": "norm", "elements": 32768, "flops_per_element": 4,
                    "exps_per_element": 0.5, "count": 72}}]}),
}


def _hf_config(model: dict) -> dict:
    """A shipped model (dse/data/models/NAME.yaml) written as the Hugging Face config.json it was read from."""
    moe = model.get("moe")
    family = ("qwen3_moe" if model["qk_norm"] else "mixtral") if moe else ("qwen3" if model["qk_norm"] else "llama")
    cfg = {"_name_or_path": model["name"], "model_type": family, "hidden_act": "silu",
           "num_hidden_layers": model["layers"], "hidden_size": model["hidden"],
           "num_attention_heads": model["heads"], "num_key_value_heads": model["kv_heads"],
           "head_dim": model["head_dim"], "intermediate_size": model["intermediate"], "vocab_size": model["vocab"],
           "tie_word_embeddings": model["tie_embeddings"],
           "max_position_embeddings": model["max_position_embeddings"], "sliding_window": None}
    if family == "qwen3_moe":
        cfg |= {"num_experts": moe["experts"], "num_experts_per_tok": moe["top_k"],
                "moe_intermediate_size": moe["intermediate"], "decoder_sparse_step": 1, "mlp_only_layers": []}
    elif family == "mixtral":
        cfg |= {"num_local_experts": moe["experts"], "num_experts_per_tok": moe["top_k"]}
    return cfg


MODEL_CONFIGS = {
    **{f"configs/{p.name}": p.read_text() for p in sorted((ROOT / "tests/data/hf_configs").glob("*.json"))},
    **{f"configs/{m}.json": json.dumps(_hf_config(yaml.safe_load((ROOT / f"dse/data/models/{m}.yaml").read_text())),
                                       indent=2) for m in _model_names()},
}

SEED_CSV = (ROOT / "dse/data/measurements/seed004.csv").read_text()
KNOBS = (ROOT / "dse/data/serving/knobs.yaml").read_text()
#: rtx-pro-6000 with the calibration section `dse calibrate ... --fix compute_efficiency=1 --out` writes
#: (dse/calibrate/write.py: the chip file, then the fitted knobs with units; values as fitted on seed004.csv).
CALIBRATED_CHIP = (ROOT / "dse/data/chips/rtx-pro-6000.yaml").read_text().rstrip("\n") + """

# calibration: fitted by `dse calibrate` to dse/data/measurements/seed004.csv
calibration:
  compute_efficiency: 1.0
  bandwidth_efficiency: 0.6666126025540131
  kernel_overhead: 3.8291234822273256e-05 s   # 38.29 us
  step_overhead: 0.0 s   # 0 s
  source: "fitted by `dse calibrate` to dse/data/measurements/seed004.csv (7 measurements of rtx-pro-6000)"
"""

YAML_FILES = {**WORKLOADS, "calibration/knobs.yaml": _dump(yaml.safe_load(KNOBS)),
              "calibration/rtx-pro-6000-calibrated.yaml": CALIBRATED_CHIP.encode()}
PARSED = {k: yaml.safe_load(v) for k, v in YAML_FILES.items()}
PARSED_JSON = {k: json.loads(v) for k, v in MODEL_CONFIGS.items()}
TEXT = {**{k: v if isinstance(v, bytes) else v.encode() for k, v in YAML_FILES.items()},
        **{k: v.encode() for k, v in MODEL_CONFIGS.items()},
        "calibration/seed004.csv": SEED_CSV.encode()}

# ------------------------------------------------------------ mutants


@st.composite
def yaml_mutant(draw, names, ops, max_rounds):
    name = draw(st.sampled_from(names))
    return name, _dump(_mutate(draw, copy.deepcopy(PARSED[name]), ops, draw(st.integers(1, max_rounds))))


@st.composite
def json_mutant(draw, ops, max_rounds):
    name = draw(st.sampled_from(sorted(PARSED_JSON)))
    data = _mutate(draw, copy.deepcopy(PARSED_JSON[name]), ops, draw(st.integers(1, max_rounds)))
    try:
        raw = json.dumps(data, indent=draw(st.sampled_from([None, 2]))).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):  # a key JSON cannot hold (a list): the repr instead
        raw = repr(data).encode("utf-8", "surrogatepass")
    return name, raw


CELLS = ["", " ", "0", "-1", "1e308", "1e-320", "nan", "inf", "-inf", "25.83 ms", "25.83 GB", "25.83", "fast",
         "1,5", "2**32", "qwen3-8b:decode", "qwen3-8b:decode:batch=1:context=0", "gemm:m=1:k=4096",
         "gemm:m=0:k=1:n=1", "gemm:m=1:k=4096:n=4096:weights=fp9", "h100", "apple-m2-max", "rtx-pro-6000",
         "reuse", "\"", "a\"b", "x" * 300, "1 day", "86401 s", "1 ns", "0.5 ns", "1e9 J", "3.5", "11", "#"]


@st.composite
def csv_mutant(draw):
    """seed004.csv with 1 to 3 cell, row or column mutations (its comment lines kept as they are)."""
    lines = SEED_CSV.splitlines()
    comments = [x for x in lines if x.startswith("#")]
    rows = list(csv.reader([x for x in lines if not x.startswith("#")]))
    for _ in range(draw(st.integers(1, 3))):
        if not rows:
            break
        i = draw(st.integers(0, len(rows) - 1))
        op = draw(st.sampled_from(["cell", "cell", "cell", "number", "unit", "drop_row", "dup_row", "drop_column",
                                   "swap_columns", "extra_field", "cut_fields", "header_typo", "no_comments"]))
        row = rows[i]
        j = draw(st.integers(0, len(row) - 1)) if row else 0
        if op == "cell" and row:
            row[j] = draw(st.one_of(st.sampled_from(CELLS), st.text(max_size=12)))
        elif op == "number" and row:
            row[j] = repr(draw(st.sampled_from(NUMBERS)))
        elif op == "unit" and row:
            row[j] = draw(st.sampled_from(ODD_UNITS))
        elif op == "drop_row":
            del rows[i]
        elif op == "dup_row":
            rows.insert(i, list(row))
        elif op == "drop_column":
            for r in rows:
                if j < len(r):
                    del r[j]
        elif op == "swap_columns" and row:
            k = draw(st.integers(0, len(row) - 1))
            for r in rows:
                if max(j, k) < len(r):
                    r[j], r[k] = r[k], r[j]
        elif op == "extra_field":
            row.append(draw(st.sampled_from(CELLS)))
        elif op == "cut_fields":
            rows[i] = row[: draw(st.integers(0, len(row)))]
        elif op == "header_typo" and rows[0]:
            k = draw(st.integers(0, len(rows[0]) - 1))
            h = rows[0][k]
            rows[0][k] = draw(st.sampled_from([h.upper(), h + "x", h[:-1], "", " " + h]))
        elif op == "no_comments":
            comments = []
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return "calibration/seed004.csv", ("\n".join(comments) + "\n" + out.getvalue()).encode("utf-8", "surrogatepass")


@st.composite
def byte_mutant(draw, names):
    name = draw(st.sampled_from(names))
    return name, damaged(draw, TEXT[name], ["cut", "dup", "indent", "delete_line", "bytes"],
                         [b"\xff", b"\x00", b"'", b'"', b",", b"&a *a", b": :", b"{", b"\r"])


_YAML_NAMES = sorted(YAML_FILES)
validate_examples = st.one_of(
    yaml_mutant(sorted(WORKLOADS), ALL_OPS, 3), yaml_mutant(["calibration/knobs.yaml"], ALL_OPS, 3),
    yaml_mutant(["calibration/rtx-pro-6000-calibrated.yaml"], ALL_OPS, 3),
    json_mutant(ALL_OPS, 3), csv_mutant(), csv_mutant(), byte_mutant(sorted(TEXT)),
)
run_examples = st.one_of(
    yaml_mutant(sorted(WORKLOADS), MILD_OPS, 2), json_mutant(MILD_OPS, 2), csv_mutant(),
    yaml_mutant(["calibration/knobs.yaml"], MILD_OPS, 2),
    yaml_mutant(["calibration/rtx-pro-6000-calibrated.yaml"], MILD_OPS, 1),
)

VALIDATE_EXAMPLES = 400
RUN_EXAMPLES = 30

# ------------------------------------------------------------ writing and running a mutant

_counter = iter(range(10**9))


def _write(sandbox: Path, name: str, raw: bytes) -> Path:
    suffix = Path(name).suffix
    path = sandbox / f"file{next(_counter)}{suffix}"
    path.write_bytes(raw)
    note(f"{name} mutated -> {path}:\n{raw[:3000]!r}")
    return path


#: What a fit may refuse that is not a problem of the file's text (validate cannot know the chip or the --fix
#: flags): the knobs it cannot identify, a chip or variant without rows. These name knobs and chips, never a line.
FIT_REFUSALS = re.compile(r"cannot be identified|cannot be told apart|no measurements of|every knob is fixed")


def _run_command(path: Path, out: Path, kind: str, variant: int) -> list[str] | None:
    """The command that runs what `dse validate` accepted as ``path`` (of kind ``kind``)."""
    if kind == "workload":
        study = out.parent / f"{path.stem}-study.yaml"
        body = path.read_text()
        study.write_text(TINY_STUDY + "".join(f"    {line}\n" for line in body.splitlines()))
        return ["run", str(study), "--trials", "2", "--workers", "1", "--out", str(out), "--quiet"]
    if kind == "model":
        return ["serve", "--chip", "h100-sxm", "--model", str(path), "--isl", "128", "--osl", "128",
                "--tp", "8" if variant % 2 else "1"]
    if kind == "measurements":
        fix = ["--fix", "kernel_overhead=0", "--fix", "step_overhead=0"]
        if variant % 2:
            return ["eval", "--chip", "apple-m2-max", "--calibrated", str(path), *fix,
                    "--workload", "gemm:m=256:k=4096:n=4096"]
        return ["calibrate", str(path), "--chip", "apple-m2-max", *fix, "--out", str(out / "chip.yaml")]
    if kind == "serving knobs":
        return ["serve", "--chip", "h100-sxm", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "128",
                "--calibration", str(path)]
    if kind == "chip":
        return ["eval", "--chip", "rtx-pro-6000", "--calibrated", str(path),
                "--workload", "qwen3-8b:decode:batch=1:context=1024"]
    return None


# ------------------------------------------------------------ the properties


@settings(max_examples=VALIDATE_EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(example=validate_examples)
def test_validate_exits_0_or_2_with_located_messages(sandbox, example):  # noqa: F811 - the fixture
    name, raw = example
    path = _write(sandbox, name, raw)
    before = _tree(sandbox, skip=sandbox / "none")
    code = _check_validate(path)
    assert _tree(sandbox, skip=sandbox / "none") == before, "dse validate wrote a file"
    event(f"{name.split('/')[0]}: {'valid' if code == 0 else 'refused'}")
    path.unlink()


@settings(max_examples=RUN_EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(example=run_examples, variant=st.integers(0, 1))
def test_what_validate_accepts_runs(sandbox, example, variant):  # noqa: F811 - the fixture

    from dse.cli.validate import validate_file

    name, raw = example
    path = _write(sandbox, name, raw)
    if _check_validate(path) != 0:
        event("refused by validate")
        path.unlink()
        return
    out = sandbox / f"out-{path.stem}"
    out.mkdir()
    kind = validate_file(str(path))
    argv = _run_command(path, out, kind, variant)
    assert argv is not None, f"{name}: validated as {kind!r}"
    before = _tree(sandbox, skip=out)
    with pngs_stubbed():
        code, err, text = _cli(argv)
    note(f"dse {' '.join(argv)} -> {code}: {text[-2000:]}")
    assert "Traceback" not in text, text
    if isinstance(err, SpecError):
        assert kind == "measurements" and FIT_REFUSALS.search(str(err)) and str(path) not in str(err), \
            f"validate accepted {path} as a {kind}, `dse {argv[0]}` refused it: {err}"
    else:
        assert code in (0, 2, 3) and (code == 0 or isinstance(err, (InfeasibleError, SolverError, StorageError))), \
            (code, err)
    assert _tree(sandbox, skip=out) == before, "a file was written outside the output folder"
    event(f"{kind} -> {argv[0]}: {'ok' if code == 0 else type(err).__name__}")
    path.unlink()
    shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------ every kind is validated as itself


@pytest.mark.parametrize("name", sorted(TEXT))
def test_each_source_validates_as_its_kind(sandbox, name):  # noqa: F811 - the fixture
    from dse.cli.validate import validate_file

    kind = {"workloads": "workload", "configs": "model"}.get(name.split("/")[0])
    kind = kind or {"knobs.yaml": "serving knobs", "seed004.csv": "measurements"}.get(Path(name).name, "chip")
    path = sandbox / f"source{Path(name).suffix}"
    path.write_bytes(TEXT[name])
    if name == "configs/deepseek-v3-mla.json":  # multi-head latent attention: refused by name, at its key
        with pytest.raises(SpecError, match=rf"^{re.escape(str(path))}:\d+:\d+ kv_lora_rank: expected absent"):
            validate_file(str(path))
    else:
        assert validate_file(str(path)) == kind
    path.unlink()


# ------------------------------------------------------------ what this fuzzer found (fixed), kept as examples


def _refused_at(sandbox, name: str, text: str, needle: str, words: list[str]) -> str:
    """`dse validate` refuses the file ``name`` holding ``text`` at the line of ``needle`` (exit 2, no traceback)."""
    path = sandbox / name
    path.write_text(text)
    from tests.spec.test_fuzz_cli import _validate

    code, out = _validate(path)
    assert code == 2 and "Traceback" not in out, out
    line = next(i for i, x in enumerate(text.splitlines(), 1) if needle in x)
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+ ", out), out
    for w in words:
        assert w in out, (w, out)
    return out


def test_a_deepseek_config_is_served(sandbox):  # noqa: F811 - the fixture
    """A config.json whose MoE layers are a list (DeepSeekMoE: layer 0 dense) made `dse serve` crash with
    "TypeError: unhashable type: 'list'" (the evaluator caches per workload); it is served now."""
    code, err, text = _cli(["serve", "--chip", "h100-sxm", "--model", str(ROOT / "tests/data/hf_configs/"
                                                                          "deepseek-moe-16b.json"),
                            "--isl", "128", "--osl", "128"])
    assert code == 0 and err is None, text
    assert "output tokens/s" in text


@pytest.mark.parametrize("case, change, key, words", [
    # a layer count that would have built a list of a billion MoE layer indices
    ("layers", {"num_hidden_layers": 10**9}, '"num_hidden_layers"', ["expected an integer >= 1 and <= 10,000"]),
    # a sliding window that is not a number ended in "TypeError: '<' not supported"
    ("window", {"sliding_window": "x", "use_sliding_window": True}, '"sliding_window"', ["null or an integer"]),
    # the ModelConfig's own check (top_k <= experts) was "<input>:1:1"-less text; now at the config's key
    ("top_k", {"num_experts_per_tok": 200}, '"num_experts_per_tok"', ["at most the number of experts (128)"]),
    ("kv heads", {"num_key_value_heads": 5}, '"num_key_value_heads"', ["a divisor of num_attention_heads (32)"]),
])
def test_config_json_problems_are_located(sandbox, case, change, key, words):  # noqa: F811 - the fixture
    cfg = {**PARSED_JSON["configs/qwen3-30b-a3b.json"], **change}
    _refused_at(sandbox, "config.json", json.dumps(cfg, indent=2), key, words)


@pytest.mark.parametrize("case, edit, needle, words", [
    ("a fraction out of range", lambda t: re.sub(r"compute_efficiency: [0-9.]+", "compute_efficiency: 1.5", t, count=1),
     "compute_efficiency: 1.5", ["profiles.trtllm.compute_efficiency: expected a fraction in (0, 1], found 1.5"]),
    # engine settings were accepted in a profile and never read
    ("engine", lambda t: t.replace("    source: >-", "    engine: {kv_fraction: 0.5}\n    source: >-", 1),
     "engine:", ["profiles.trtllm.engine: unknown key"]),
    # `fitted_on: 5` crashed with "TypeError: 'int' object is not iterable"
    ("fitted_on", lambda t: re.sub(r"(?s)    fitted_on:\n(      - .*?\n)+", "    fitted_on: 5\n", t, count=1),
     "fitted_on: 5", ["profiles.trtllm.fitted_on: expected a list"]),
    # a top-level typo was ignored (and the first profile used)
    ("a typo of default", lambda t: t.replace("default: trtllm", "defualt: vllm-eager"), "defualt",
     ["defualt: unknown key (did you mean 'default'?)"]),
])
def test_knob_file_problems_are_located(sandbox, case, edit, needle, words):  # noqa: F811 - the fixture
    text = edit(KNOBS)
    assert text != KNOBS
    _refused_at(sandbox, "knobs.yaml", text, needle, words)


@pytest.mark.parametrize("case, body, needle, words", [
    # two operators of one name: "workload ops: two operators are called 'q'", with no line
    ("one name twice",
     "name: ops\nops:\n  - gemm: {name: q, m: 1, k: 8, n: 8}\n  - gemm: {name: q, m: 2, k: 8, n: 8}\n", "m: 2", ["ops.1: two operators are called 'q' (ops.0 and ops.1)"]),
    # an infinite vector cost validated and gave every design an infinite time
    ("infinite flops", "name: v\nops:\n  - vector: {name: n, elements: 8, flops_per_element: .inf}\n", ".inf",
     ["flops_per_element: expected a finite number"]),
])
def test_workload_problems_are_located(sandbox, case, body, needle, words):  # noqa: F811 - the fixture
    _refused_at(sandbox, "workload.yaml", body, needle, words)


def test_measurement_problems_name_line_and_column(sandbox):  # noqa: F811 - the fixture
    """Every problem of a measurements CSV at file:line:col, the column where the cell starts."""
    text = "chip,workload,measured_time_s,source\napple-m2-max,gemm:m=1:k=4096:n=4096,fast,test\n"
    path = sandbox / "m.csv"
    path.write_text(text)
    from tests.spec.test_fuzz_cli import _validate

    code, out = _validate(path)
    # 'fast' starts after "apple-m2-max," (13 characters) and "gemm:m=1:k=4096:n=4096," (23): column 37
    assert code == 2 and f"{path}:2:37 column 'measured_time_s': expected a time" in out, out


@pytest.mark.parametrize("name", ["m.csv", "config.json"])
def test_a_fifo_is_refused_not_read(sandbox, name):  # noqa: F811 - the fixture
    """A FIFO as a measurements file or a config.json hung (read_text waits for a writer), as YAML files once did."""
    path = sandbox / f"fifo-{name}"
    os.mkfifo(path)
    try:
        from tests.spec.test_fuzz_cli import _validate

        code, out = _validate(path)
        assert code == 2 and "not a regular file" in out, out
    finally:
        path.unlink()
