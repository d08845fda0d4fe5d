"""Measurements: the measured cases a calibration fits, read from a CSV and validated.

Measurements (CSV, one row per measured case; ``#`` lines are comments)::

    chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source

``chip``: a catalog name (``dse catalog``), or a chip file (``.yaml``, from the CSV's folder: its ``name``
is the chip's, as ``dse calibrate --chip FILE`` selects it). ``workload``: the CLI short form
(``qwen3-8b:decode:batch=1:context=8192``) or one GEMM call
``gemm:m=1:k=4096:n=4096[:batch=B][:count=C][:b=weights|kv|activations][:ROLE=FORMAT...]``
(ROLE one of weights, activations, output, accumulator, compute). ``variant``:
a free label of how it was measured (``reuse``/``rotate``), optional.
``measured_time_s``: the median time of one step (one call for a GEMM), in
seconds (a bare number) or with a unit (``25.83 ms``). ``measured_energy_j``
(optional, not fitted: the knobs act on time), ``n_samples`` (optional: how
many samples the median is over), ``source`` (required: where the number comes
from). Loading reports every problem at once, each as ``file:line:col column
'name': expected ..., got ...`` (col: where the cell starts in its line).
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from dse.errors import SpecError, unknown_name
from dse.fileio import INPUT_MAX_BYTES, read_input_text
from dse.hardware import catalog_names, load_chip, resolve_name
from dse.units import parse_quantity
from dse.workload import build, key_values, parse_workload

REQUIRED = ("chip", "workload", "measured_time_s", "source")
OPTIONAL = ("variant", "measured_energy_j", "n_samples")
COLUMNS = ("chip", "workload", "variant", "measured_time_s", "measured_energy_j", "n_samples", "source")


_GEMM_INT_KEYS = ("m", "k", "n", "batch", "count")
_GEMM_FORMAT_KEYS = ("weights", "activations", "output", "accumulator", "compute")
_GEMM_KEYS = (*_GEMM_INT_KEYS, "b", *_GEMM_FORMAT_KEYS)


def _parse_gemm(text: str):
    """``gemm:m=1:k=4096:n=4096[:...]`` -> a one-operator Workload named canonically."""

    where = f"workload '{text}'"
    parts = text.strip().split(":")[1:]

    got = key_values(parts, where, _GEMM_KEYS, _GEMM_INT_KEYS, "GEMM key", "gemm:m=1:k=4096:n=4096")
    for key in _GEMM_INT_KEYS:
        if key in got and got[key] < 1:
            part = next(p for p in parts if p.strip().startswith(f"{key}="))
            raise SpecError(f"{where}: part '{part}': {key} must be >= 1, got {got[key]}")
    missing = [k for k in ("m", "k", "n") if k not in got]
    if missing:
        raise SpecError(f"{where}: missing {', '.join(missing)} (a GEMM needs m, k and n: gemm:m=1:k=4096:n=4096)")
    name = "gemm:" + ":".join(f"{k}={got[k]}" for k in _GEMM_KEYS if k in got)
    spec = {k: got[k] for k in _GEMM_INT_KEYS if k in got}
    if "b" in got:
        spec["b"] = got["b"]
    formats = {k: got[k] for k in _GEMM_FORMAT_KEYS if k in got}
    if formats:
        spec["formats"] = formats
    try:
        return build({"name": name, "ops": [{"gemm": {"name": "gemm", **spec}}]})
    except SpecError as e:
        raise SpecError([f"{where}: {p.split(': ', 1)[-1] if p.startswith('<') else p}" for p in e.problems]) from None


_MODEL_KEY_ORDER = ("batch", "context", "tokens", "cached", "workspace", "routing", "weights", "activations", "kv",
                    "accumulator", "output", "embedding", "router", "norms", "compute")


def canonical_workload(text: str) -> str:
    """The measured case's workload text in one spelling (validated): keys in a fixed order, so
    ``qwen3-8b:decode:context=8192:batch=1`` and ``qwen3-8b:decode:batch=1:context=8192`` are one workload.
    (A built Workload's name leaves out number formats; this text keeps them.)"""
    w = parse_measured_workload(text)
    if w.name.startswith("gemm:"):
        return w.name
    model, phase, *parts = [p.strip() for p in text.strip().split(":")]
    kv = dict(p.split("=", 1) for p in parts)
    kv = {k.strip(): v.strip() for k, v in kv.items()}
    return ":".join([model.lower(), phase] + [f"{k}={kv[k]}" for k in _MODEL_KEY_ORDER if k in kv])


@functools.lru_cache(maxsize=256)
def parse_measured_workload(text: str):
    """A measured case's workload: the CLI short form or ``gemm:m=..:k=..:n=..`` -> Workload.

    Model phases as dse.workload.parse_workload reads them; a GEMM is one
    operator named ``gemm:m=M:k=K:n=N[...]`` with its keys in that order.
    """

    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"workload: expected 'model:phase:key=value...' or 'gemm:m=..:k=..:n=..', got {text!r}")
    if text.strip().split(":", 1)[0].strip().lower() == "gemm":
        return _parse_gemm(text)
    return build(parse_workload(text))


@dataclass(frozen=True)
class Measurement:
    """One measured case (a row of a measurements CSV); ``chip`` is the catalog name."""

    chip: str
    workload: str
    variant: str
    time_s: float
    energy_j: float | None
    n_samples: int | None
    source: str
    file: str = "<memory>"
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def label(self) -> str:
        return self.workload + (f" [{self.variant}]" if self.variant else "")


#: Plausible measured values (s for times, J for energies): outside them a cell is a typo or an attack
#: (one 1e308 cell used to make the fit overflow and hang, 1e-320 to underflow and crash it).
_RANGE = {"time": (1e-9, 86400.0), "energy": (1e-12, 1e9)}


def _parse_time(value: str, dimension: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = parse_quantity(value, dimension)
    if not math.isfinite(x) or x <= 0:
        raise ValueError("must be > 0")
    lo, hi = _RANGE[dimension]
    if not lo <= x <= hi:
        unit = "s" if dimension == "time" else "J"
        raise ValueError(f"must be between {lo:g} {unit} and {hi:g} {unit} (a measured step, not {x:g} {unit})")
    return x


#: The largest measurements file read (a CSV of measured cases is a few kB).
MAX_BYTES = INPUT_MAX_BYTES


def _read(path: Path) -> str:
    """The text of a measurements file: a regular file (not a FIFO or a device) of at most MAX_BYTES, UTF-8."""
    return read_input_text(path, "a measurements CSV", "measurements files", missing="measurements file",
                           max_bytes=MAX_BYTES)


def _field_starts(line: str) -> list[int]:
    """0-based offset of each field of one CSV line, as csv.reader splits it (a quote opens a field only at its
    start)."""
    starts, quoted, i = [0], False, 0
    while i < len(line):
        c = line[i]
        if quoted:
            if c == '"':
                if line[i + 1:i + 2] == '"':
                    i += 1
                else:
                    quoted = False
        elif c == '"' and i == starts[-1]:
            quoted = True
        elif c == ",":
            starts.append(i + 1)
        i += 1
    return starts


def load_measurements(path: str | Path) -> list[Measurement]:
    """Read and validate a measurements CSV (see the module docstring); every problem at once.

    Raises SpecError whose problems read ``file:line:col column 'name': expected ..., got ...``;
    an unknown chip gets a did-you-mean.
    """

    path = Path(path)
    text = _read(path)
    problems: list[str] = []
    header: list[str] | None = None
    header_line = 0
    rows: list[Measurement] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = next(csv.reader([line]))
        starts = _field_starts(line)

        def at(i: int | None) -> str:
            """``file:line:col`` of field ``i`` of this line (1 for a problem of the whole line)."""
            col = starts[i] + 1 if i is not None and i < len(starts) else 1
            return f"{path}:{lineno}:{col}"

        if header is None:
            header, header_line = [f.strip() for f in fields], lineno
            for i, c in enumerate(header):
                if c not in COLUMNS:
                    problems.append(f"{at(i)} column '{c}': " + unknown_name("column", c, COLUMNS))
            dups = sorted({c for c in header if header.count(c) > 1})
            for c in dups:
                second = [i for i, h in enumerate(header) if h == c][1]
                problems.append(f"{at(second)} column '{c}' appears twice in the header")
            for c in REQUIRED:
                if c not in header:
                    problems.append(f"{at(None)} header: missing required column '{c}' "
                                    f"(expected columns: {', '.join(COLUMNS)})")
            if problems:
                raise SpecError(problems)
            continue
        if len(fields) != len(header):
            problems.append(f"{at(None)} expected {len(header)} fields ({', '.join(header)}), got {len(fields)}")
            continue
        cell = {c: v.strip() for c, v in zip(header, fields)}
        bad = len(problems)

        def where(col: str) -> str:
            return f"{at(header.index(col))} column '{col}'"

        def err(col: str, expected: str, got: str) -> None:
            problems.append(f"{where(col)}: expected {expected}, got {got!r:.100}")

        chip = cell["chip"]
        if not chip:
            err("chip", "a catalog chip name (see `dse catalog`)", chip)
        elif chip.lower().endswith((".yaml", ".yml")):  # a chip of one's own: the file's name
            try:
                chip = load_chip(path.parent / chip).name
            except SpecError as e:
                problems.extend(f"{where('chip')}: {p}" for p in e.problems)
        else:
            try:
                chip = resolve_name(chip).stem
            except SpecError:
                problems.append(f"{where('chip')}: " + unknown_name("chip", chip, catalog_names()))
        wtext = cell["workload"]
        try:
            parse_measured_workload(wtext)
        except SpecError as e:
            for p in e.problems:
                problems.append(f"{where('workload')}: {p}")
        time_s = math.nan
        try:
            time_s = _parse_time(cell["measured_time_s"], "time")
        except (ValueError, SpecError):
            err("measured_time_s", "a time between 1 ns and 1 day, in seconds (0.02583) or with a unit ('25.83 ms')",
                cell["measured_time_s"])
        energy = None
        if cell.get("measured_energy_j"):
            try:
                energy = _parse_time(cell["measured_energy_j"], "energy")
            except (ValueError, SpecError):
                err("measured_energy_j", "an energy between 1 pJ and 1 GJ, in joules (0.0258) or with a unit "
                    "('25.8 mJ'), or empty",
                    cell["measured_energy_j"])
        n = None
        if cell.get("n_samples"):
            try:
                n = int(cell["n_samples"])
                if n < 1:
                    raise ValueError
            except ValueError:
                err("n_samples", "an integer >= 1, or empty", cell["n_samples"])
        if not cell["source"]:
            err("source", "where the number comes from (e.g. 'seed 004 §4.8.3'), not empty", cell["source"])
        if len(problems) == bad:
            rows.append(Measurement(chip=chip, workload=canonical_workload(wtext),
                                    variant=cell.get("variant", ""), time_s=time_s, energy_j=energy, n_samples=n,
                                    source=cell["source"], file=str(path), line=lineno))
    if header is None:
        problems.append(f"{path}:1:1: empty file: expected a header line ({', '.join(COLUMNS)}) and rows")
    elif not rows and not problems:
        problems.append(f"{path}:{header_line}:1: no measurements after the header")
    if problems:
        raise SpecError(problems)
    return rows
