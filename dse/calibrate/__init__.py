"""Calibration: fit a chip's four time knobs to measured times (seed 004 §4.8.3).

The evaluator predicts the *bound*: every resource at its ideal rate. Real
software adds kernel launches, submission, synchronization and runs below the
peak rate (seed 004 §4.8.3: vLLM eager decode on an RTX PRO 6000 takes 25.83 ms
where the read bound is 9.12 ms). :class:`dse.hardware.Calibration` carries four
knobs the evaluator applies (dse.model.evaluator, seed 004 §4.8.1: independent resources take the max)::

    per operator  t_matrix / compute_efficiency                compute_efficiency   in (0, 1]
                  bytes / (bandwidth x bandwidth_efficiency)   bandwidth_efficiency in (0, 1]
    per step      max(sum over operators of count x device time,
                      sum over operators of count x kernel_overhead)   kernel_overhead >= 0
                  + step_overhead                                      step_overhead   >= 0

(the host launches kernels while the device works: the step takes the longer
of the two, plus a fixed per-step cost). This module fits them to measurements.

Measurements (CSV, one row per measured case; ``#`` lines are comments)::

    chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source

``chip``: a catalog name (``dse catalog``). ``workload``: the CLI short form
(``qwen3-8b:decode:batch=1:context=8192``) or one GEMM call
``gemm:m=1:k=4096:n=4096[:batch=B][:count=C][:b=weights|kv|activations][:ROLE=FORMAT...]``
(ROLE one of weights, activations, output, accumulator, compute). ``variant``:
a free label of how it was measured (``reuse``/``rotate``), optional.
``measured_time_s``: the median time of one step (one call for a GEMM), in
seconds (a bare number) or with a unit (``25.83 ms``). ``measured_energy_j``
(optional, not fitted: the knobs act on time), ``n_samples`` (optional: how
many samples the median is over), ``source`` (required: where the number comes
from). Loading reports every problem at once, each as ``file:line: column
'name': expected ..., got ...``.

Fit: least squares on *relative* residuals ``r = (predicted - measured) /
measured`` (each measurement weighs the same whatever its size), with bounds
that keep the knobs physical. Predictions always come from
:func:`dse.model.evaluator.evaluate_arrays` (the one evaluator), so a written chip
evaluates to exactly the fitted predictions. Solver (numpy only): variable
projection. An overhead the time is exactly linear in (checked numerically, not
assumed: today step_overhead) follows, for any setting of the other knobs, from
a bounded linear least squares; the other knobs (the fractions, and
kernel_overhead, which enters through max(device, launches)) are searched on a
coarse grid (log grid over [1e-4, 1e4] for the fractions), then by zooming
around the best points down to steps of 1e-6. The grid is indifferent to the
kinks the max()es put in the cost. Every grid point of every refit is one column
of a vectorized evaluator call.

Honesty rules:

* A knob the bounded fit leaves on a physical bound (a fraction at 1, an
  overhead at 0) is refitted freed of that bound (fractions up to 1e4,
  overheads of any sign). If it then leaves the physical range and the fit
  improves, the bound is *active*: it is reported with the value the knob
  wants (">= x" where every value past x fits the same), never silently
  clipped; ``strict=True`` refuses with a DseError naming the knob and value.
  The fully unconstrained optimum is kept too (``CalibrationFit.unconstrained``).
* Fewer measurements than free knobs, or measurements that do not determine
  them, are refused with the knobs named and a ``--fix knob=value``
  suggestion. Because of the max()es a knob can be felt on one side of a kink
  and not on the other, so this is checked with one-sided differences and
  confirmed by evaluating the move: a knob whose own move changes no measured
  time (e.g. compute_efficiency when every step is launch- or memory-bound) is
  refused with the range of values that fit the same; knobs whose joint move
  changes none (e.g. kernel and step overhead when every step launches the same
  number of kernels: on each row kernel_overhead has no effect or adds exactly
  as step_overhead does) are refused as entangled.
* Leave-one-out: each measurement is predicted by a refit without it, so the
  residuals (a fit) are shown next to errors of predictions. Where the refit
  without a row cannot identify a knob (the row was the only one that felt
  it), the knob is held at the full fit's value and the row's note says so:
  that number is partly a fit, and the summary gives the leave-one-out figures
  over the other rows as well.
"""

from __future__ import annotations

import csv
import functools
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dse.errors import DseError, SpecError, did_you_mean, unknown_name
from dse.evaluate import evaluate_design
from dse.fileio import atomic_write
from dse.hardware import ChipSpec, Chips, catalog_names, load_chip, resolve_name, with_overrides
from dse.model.evaluator import op_table
from dse.units import format_quantity, parse_quantity
from dse.workload import build, key_values, parse_workload

__all__ = [
    "KNOBS",
    "IDEAL",
    "COLUMNS",
    "Measurement",
    "RowFit",
    "BoundNote",
    "CalibrationFit",
    "parse_measured_workload",
    "load_measurements",
    "parse_fix",
    "calibrate",
    "canonical_workload",
    "format_knob",
    "predict",
    "calibrated_yaml",
    "write_calibrated_chip",
]

KNOBS = ("compute_efficiency", "bandwidth_efficiency", "kernel_overhead", "step_overhead")
FRACTIONS = KNOBS[:2]
OVERHEADS = KNOBS[2:]
IDEAL = {"compute_efficiency": 1.0, "bandwidth_efficiency": 1.0, "kernel_overhead": 0.0, "step_overhead": 0.0}
RESIDUAL_KIND = "relative residuals, (predicted - measured) / measured"

REQUIRED = ("chip", "workload", "measured_time_s", "source")
OPTIONAL = ("variant", "measured_energy_j", "n_samples")
COLUMNS = ("chip", "workload", "variant", "measured_time_s", "measured_energy_j", "n_samples", "source")

_FRACTION_FLOOR = 1e-4     # numerical floor of a fraction (log coordinates)
_FRACTION_CEIL_FREE = 1e4  # the unconstrained fit may go this far above 1
_COARSE_POINTS = {1: 161, 2: 81, 3: 27, 4: 13}  # coarse grid points per dimension, by number of grid dimensions


# ---------------------------------------------------------------- workloads


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


# ---------------------------------------------------------------- measurements


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


def _parse_time(value: str, dimension: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = parse_quantity(value, dimension)
    if not math.isfinite(x) or x <= 0:
        raise ValueError("must be > 0")
    return x


def load_measurements(path: str | Path) -> list[Measurement]:
    """Read and validate a measurements CSV (see the module docstring); every problem at once.

    Raises SpecError whose problems read ``file:line: column 'name': expected ..., got ...``;
    an unknown chip gets a did-you-mean.
    """

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such measurements file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: cannot read the measurements file ({e})") from None
    problems: list[str] = []
    header: list[str] | None = None
    rows: list[Measurement] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = next(csv.reader([line]))
        if header is None:
            header = [f.strip() for f in fields]
            for c in header:
                if c not in COLUMNS:
                    problems.append(f"{path}:{lineno}: column '{c}': " + unknown_name("column", c, COLUMNS))
            dups = sorted({c for c in header if header.count(c) > 1})
            for c in dups:
                problems.append(f"{path}:{lineno}: column '{c}' appears twice in the header")
            for c in REQUIRED:
                if c not in header:
                    problems.append(f"{path}:{lineno}: header: missing required column '{c}' "
                                    f"(expected columns: {', '.join(COLUMNS)})")
            if problems:
                raise SpecError(problems)
            continue
        if len(fields) != len(header):
            problems.append(f"{path}:{lineno}: expected {len(header)} fields ({', '.join(header)}), "
                            f"got {len(fields)}")
            continue
        cell = {c: v.strip() for c, v in zip(header, fields)}
        bad = len(problems)

        def err(col: str, expected: str, got: str) -> None:
            problems.append(f"{path}:{lineno}: column '{col}': expected {expected}, got {got!r}")

        chip = cell["chip"]
        if not chip:
            err("chip", "a catalog chip name (see `dse catalog`)", chip)
        else:
            try:
                chip = resolve_name(chip).stem
            except SpecError:
                problems.append(f"{path}:{lineno}: column 'chip': " + unknown_name("chip", chip, catalog_names()))
        wtext = cell["workload"]
        try:
            parse_measured_workload(wtext)
        except SpecError as e:
            for p in e.problems:
                problems.append(f"{path}:{lineno}: column 'workload': {p}")
        time_s = math.nan
        try:
            time_s = _parse_time(cell["measured_time_s"], "time")
        except (ValueError, SpecError):
            err("measured_time_s", "a time > 0 in seconds (0.02583) or with a unit ('25.83 ms')",
                cell["measured_time_s"])
        energy = None
        if cell.get("measured_energy_j"):
            try:
                energy = _parse_time(cell["measured_energy_j"], "energy")
            except (ValueError, SpecError):
                err("measured_energy_j", "an energy > 0 in joules (0.0258) or with a unit ('25.8 mJ'), or empty",
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
        problems.append(f"{path}:1: empty file: expected a header line ({', '.join(COLUMNS)}) and rows")
    elif not rows and not problems:
        problems.append(f"{path}: no measurements after the header")
    if problems:
        raise SpecError(problems)
    return rows


def parse_fix(items) -> dict[str, float]:
    """``['step_overhead=0', 'kernel_overhead=5 us', 'compute_efficiency=0.8']`` -> knob values (SI).

    Fractions are numbers in (0, 1]; overheads are times with a unit ('5 us') or 0.
    """

    out: dict[str, float] = {}
    problems = []
    for item in items or ():
        key, eq, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            problems.append(f"--fix {item!r}: expected knob=value, e.g. --fix step_overhead=0")
            continue
        if key not in KNOBS:
            problems.append(f"--fix {item!r}: " + unknown_name("calibration knob", key, KNOBS))
            continue
        if key in out:
            problems.append(f"--fix {item!r}: '{key}' fixed twice")
            continue
        try:
            if key in FRACTIONS:
                v = float(value)
                if not 0 < v <= 1:
                    raise ValueError
            else:
                v = 0.0 if value in ("0", "0.0") else parse_quantity(value, "time")
                if v < 0:
                    raise ValueError
        except (ValueError, SpecError):
            want = "a number in (0, 1]" if key in FRACTIONS else "a time >= 0 with a unit ('5 us') or 0"
            problems.append(f"--fix {item!r}: {key} must be {want}, got {value!r}")
            continue
        out[key] = v
    if problems:
        raise SpecError(problems)
    return out


# ---------------------------------------------------------------- the fit


@dataclass(frozen=True)
class RowFit:
    """One measurement against the ideal bound, the fit, and the leave-one-out prediction."""

    measurement: Measurement
    bound_s: float
    predicted_s: float
    residual: float
    loo_predicted_s: float | None
    loo_error: float | None
    loo_note: str = ""
    loo_held: tuple = ()  # knobs the leave-one-out refit could not identify and held at the full fit's value


@dataclass(frozen=True)
class BoundNote:
    """A physical bound the data pushes against: the knob sits on ``bound``; freed alone (the other knobs
    refitted within their bounds) it would go to ``wanted``. ``edge``: where the cost stops improving, when
    every value from there to ``wanted`` (and beyond) fits the same (the fit only says "at least this")."""

    knob: str
    bound: float
    wanted: float
    edge: float | None = None

    def wants(self) -> str:
        if self.edge is not None:
            return f"{'>=' if self.knob in FRACTIONS else '<='} {format_knob(self.knob, self.edge)}"
        return f"= {format_knob(self.knob, self.wanted)}"

    def text(self) -> str:
        return (f"{self.knob} sits on its physical bound {format_knob(self.knob, self.bound)}; freed, the fit wants "
                f"{self.knob} {self.wants()}")


@dataclass(frozen=True)
class CalibrationFit:
    """The result of :func:`calibrate`. ``chip`` is the calibrated ChipSpec (its ``calibration`` filled)."""

    chip: object
    values: dict
    free: tuple
    fixed: dict
    rows: tuple
    active: tuple
    unconstrained: dict | None
    measurements_file: str | None
    chip_path: str | None
    residual_kind: str = RESIDUAL_KIND

    @property
    def residuals(self) -> np.ndarray:
        return np.array([r.residual for r in self.rows])

    @property
    def loo_errors(self) -> np.ndarray:
        return np.array([np.nan if r.loo_error is None else r.loo_error for r in self.rows])

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.residuals ** 2)))

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(self.residuals)))

    @property
    def loo_rms(self) -> float:
        e = self.loo_errors
        e = e[np.isfinite(e)]
        return float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan

    @property
    def loo_max(self) -> float:
        e = self.loo_errors
        e = e[np.isfinite(e)]
        return float(np.max(np.abs(e))) if e.size else math.nan

    @property
    def loo_held_count(self) -> int:
        """Rows whose leave-one-out refit held a knob at the full fit's value (their LOO numbers are partly fits)."""
        return sum(1 for r in self.rows if r.loo_held)

    def _loo_independent(self) -> np.ndarray:
        e = np.array([np.nan if (r.loo_error is None or r.loo_held) else r.loo_error for r in self.rows])
        return e[np.isfinite(e)]

    @property
    def loo_rms_independent(self) -> float:
        """Leave-one-out RMS over the rows whose refit held no knob (independent predictions only)."""
        e = self._loo_independent()
        return float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan

    @property
    def loo_max_independent(self) -> float:
        e = self._loo_independent()
        return float(np.max(np.abs(e))) if e.size else math.nan

    def loo_text(self) -> str:
        """'RMS x%, max y%', with the independent-only figures where some refits held a knob."""
        text = f"RMS {self.loo_rms:.1%}, max {self.loo_max:.1%}"
        k = self.loo_held_count
        if k:
            rest = len(self.rows) - k
            text += (f" ({k} of {len(self.rows)} refits held a knob at the full fit's value; over the other "
                     f"{rest}: " + (f"RMS {self.loo_rms_independent:.1%}, max {self.loo_max_independent:.1%})"
                                    if rest else "none)"))
        return text

    def summary(self) -> str:
        """One line for a chip file's ``calibration.source``."""
        where = self.measurements_file or "measurements"
        fixed = (", fixed " + ", ".join(f"{k}={format_knob(k, v)}" for k, v in self.fixed.items())
                 if self.fixed else "")
        act = ("; bound active: " + ", ".join(f"{b.knob} (wants {b.wants()})" for b in self.active)
               if self.active else "")
        return (f"fitted by `dse calibrate` to {where} ({len(self.rows)} measurements of {self.chip.name}; "
                f"least squares on relative residuals, fractions in (0, 1], overheads >= 0{fixed}); "
                f"RMS residual {self.rms:.1%}, max {self.max_abs:.1%}; leave-one-out {self.loo_text()}{act}")


def format_knob(knob: str, v: float | None) -> str:
    """A knob value for people: a fraction as a number, an overhead as a time ('16.05 us')."""

    if v is None:
        return "?"
    if knob in FRACTIONS:
        return f"{v:.4g}"
    return format_quantity(v, "time") if v != 0 else "0 s"


class _Problem:
    """Measurements of one chip: knob values (P, 4) -> predicted times (P, n) through the evaluator.

    Coordinates ``z`` over the free knobs: log(fraction); overhead / ``scale`` (the shortest measurement).
    A subset (leave-one-out) shares its parent's chip view, coordinates and cached evaluations.
    """

    def __init__(self, base, rows: list[Measurement], free: tuple, fixed: dict, parent: "_Problem | None" = None,
                 keep: np.ndarray | None = None):

        self.base = base
        self.view = parent.view if parent is not None else Chips.numeric_view(base)
        self.formats = sorted(base.matrix.flops_per_cycle)
        self.rows = rows
        self.free = free
        self.fixed = fixed
        names: list[str] = []
        for m in rows:
            if m.workload not in names:
                names.append(m.workload)
        self.workloads = [parse_measured_workload(n) for n in names]
        self.idx = np.array([names.index(m.workload) for m in rows])
        self.meas = np.array([m.time_s for m in rows])
        self.launches = np.array([float(op_table(parse_measured_workload(m.workload)).count.sum()) for m in rows])
        self.scale = parent.scale if parent is not None else float(self.meas.min())
        self.base_theta = np.array([fixed.get(k, IDEAL[k]) for k in KNOBS])
        self.cols = [KNOBS.index(k) for k in free]
        self.parent, self.keep = parent, keep
        self._linear: dict | None = None
        self._coarse: tuple | None = None

    def subset(self, keep: np.ndarray) -> "_Problem":
        return _Problem(self.base, [m for m, k in zip(self.rows, keep) if k], self.free, self.fixed, self, keep)

    def times(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        P = theta.shape[0]
        arrays = {k: np.full(P, v, dtype=float) for k, v in self.view.items()}
        for j, k in enumerate(KNOBS):
            arrays[f"calibration.{k}"] = np.array(theta[:, j], dtype=float)
        chips = Chips(arrays, self.formats, base=self.base)
        out = np.empty((P, len(self.workloads)))
        for i, w in enumerate(self.workloads):
            out[:, i] = evaluate_design(chips, w)["time_s"]
        return out[:, self.idx]

    def states(self, theta: np.ndarray) -> list[str]:
        """What bounds each row at the knob values ``theta`` (4,): 'launch-bound' (the host's launches outlast the
        device work), else the device's bound resource ('matrix-bound', 'vector-bound', 'memory-bound'). For
        messages only; from dse.model.evaluator's own columns."""
        arrays = {k: np.full(1, v, dtype=float) for k, v in self.view.items()}
        for j, k in enumerate(KNOBS):
            arrays[f"calibration.{k}"] = np.array([theta[j]], dtype=float)
        chips = Chips(arrays, self.formats, base=self.base)
        names = ("matrix-bound", "vector-bound", "memory-bound")
        per = []
        for w in self.workloads:
            out = evaluate_design(chips, w)
            launch_wait = float(out["t_overhead_s"][0]) - float(theta[KNOBS.index("step_overhead")])
            per.append("launch-bound" if launch_wait > 1e-12 * float(out["time_s"][0])
                       else names[int(out["bound_code"][0])])
        return [per[i] for i in self.idx]

    def theta(self, z: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(z)
        th = np.repeat(self.base_theta[None, :], z.shape[0], axis=0)
        for j, (k, c) in enumerate(zip(self.free, self.cols)):
            th[:, c] = np.exp(z[:, j]) if k in FRACTIONS else z[:, j] * self.scale
        return th

    def z_of(self, values: dict) -> np.ndarray:
        return np.array([math.log(values[k]) if k in FRACTIONS else values[k] / self.scale for k in self.free])

    def residuals(self, z: np.ndarray) -> np.ndarray:
        return self.times(self.theta(z)) / self.meas - 1.0

    def linear(self) -> dict[str, np.ndarray]:
        """Free overheads the predicted time is exactly linear in, with d time / d overhead per row.

        dse.model.evaluator takes ``max(device, launches x kernel_overhead) + step_overhead``: step_overhead is linear,
        kernel_overhead is not (it joins the grid). This is checked, not assumed (steps of 1x and 2x, jointly, at
        two settings of the other knobs), so another composition (e.g. launches added to device work) is still
        fitted correctly.
        """
        if self.parent is not None:
            return {k: v[self.keep] for k, v in self.parent.linear().items()}
        if self._linear is None:
            s = self.scale
            cand = [k for k in OVERHEADS if k in self.free]
            pts = []
            for f, o in ((1.0, 0.0), (0.3, s)):
                base = self.base_theta.copy()
                base[[0, 1]] = f
                for k in OVERHEADS:
                    if k in self.free:
                        base[KNOBS.index(k)] = o
                for steps in ((0, 0), (1, 0), (2, 0), (0, 1), (0, 2), (1, 1)):
                    t = base.copy()
                    for k, st in zip(OVERHEADS, steps):
                        t[KNOBS.index(k)] += st * s
                    pts.append(t)
            T = self.times(np.array(pts)).reshape(2, 6, -1)
            close = functools.partial(np.allclose, rtol=1e-9, atol=1e-15)
            slope = {"kernel_overhead": (T[:, 1] - T[:, 0]) / s, "step_overhead": (T[:, 3] - T[:, 0]) / s}
            ok = {k: close(T[:, 2 + 2 * i], T[:, 0] + 2 * s * slope[k]) and close(slope[k][0], slope[k][1])
                  for i, k in enumerate(OVERHEADS)}
            lin = {k: slope[k][0] for k in cand if ok[k]}
            if len(lin) == 2 and not close(T[:, 5], T[:, 0] + s * (slope["kernel_overhead"] + slope["step_overhead"])):
                lin.pop("kernel_overhead")
            self._linear = lin
        return self._linear

    def grid_dims(self) -> list[int]:
        """Indices (into ``free``) of the knobs searched on a grid: the fractions and any non-linear overhead."""
        lin = self.linear()
        return [j for j, k in enumerate(self.free) if k not in lin]

    def ranges(self, unbounded=frozenset()) -> tuple[np.ndarray, np.ndarray]:
        """Search box of the grid dimensions in z: fractions in [1e-4, 1] (up to 1e4 if ``unbounded``); a
        non-linear overhead up to 1.5 x the largest measured time per launch (as far below 0 if ``unbounded``)."""
        lo, hi = [], []
        for j in self.grid_dims():
            k = self.free[j]
            if k in FRACTIONS:
                lo.append(math.log(_FRACTION_FLOOR))
                hi.append(math.log(_FRACTION_CEIL_FREE) if k in unbounded else 0.0)
            else:
                per = self.launches if k == "kernel_overhead" else np.ones_like(self.meas)
                r = 1.5 * float(np.max(self.meas / per)) / self.scale
                lo.append(-r if k in unbounded else 0.0)
                hi.append(r)
        return np.array(lo), np.array(hi)

    def coarse(self) -> tuple[np.ndarray, np.ndarray]:
        """A grid over the unconstrained box of the grid dimensions, and its times with the linear overheads
        at 0 (cached; every other box is a part of it)."""
        if self.parent is not None:
            g, T = self.parent.coarse()
            return g, T[:, self.keep]
        if self._coarse is None:
            lo, hi = self.ranges(unbounded=frozenset(self.free))
            count = _COARSE_POINTS.get(len(lo), 11)
            axes = [np.linspace(a, b, count) for a, b in zip(lo, hi)]
            g = np.array(list(itertools.product(*axes)), dtype=float).reshape(-1, len(lo))
            self._coarse = (g, self.times(self.theta(self.z_grid(g))))
        return self._coarse

    def z_grid(self, x: np.ndarray) -> np.ndarray:
        """z with the grid dimensions set to ``x`` (G, d) and the linear overheads at 0."""
        z = np.zeros((x.shape[0], len(self.free)))
        z[:, self.grid_dims()] = x
        return z


_FLAT_REL = 1e-3   # a direction is flat when it moves no residual by more than this share of its knobs' own effects
_FLAT_ABS = 1e-9   # ... or by more than this (relative residual), whichever is larger
_SWEEP = 101       # points per sweep when bracketing the range a knob is flat over


def _one_sided(prob: _Problem, z: np.ndarray) -> dict:
    """Residuals at ``z`` and one-sided difference quotients (the model is only piecewise smooth: max(device,
    launches), max(matrix, vector, memory)): ``Jp[:, j]`` moving knob j up, ``Jm[:, j]`` moving it down, and which
    of the two moves stay within the physical bounds."""
    f = len(z)
    h = 1e-5 * np.maximum(1.0, np.abs(z))
    R = prob.residuals(np.concatenate([z[None], z[None] + np.diag(h), z[None] - np.diag(h)]))
    r0 = R[0]
    up = np.ones(f, dtype=bool)
    down = np.ones(f, dtype=bool)
    for j, k in enumerate(prob.free):
        if k in FRACTIONS:
            up[j] = z[j] < -1e-9  # a fraction on 1 cannot go up
            down[j] = z[j] > math.log(_FRACTION_FLOOR) + 1e-9
        else:
            down[j] = z[j] > 1e-9  # an overhead on 0 cannot go down
    Jp = ((R[1:f + 1] - r0) / h[:, None]).T
    Jm = ((r0 - R[f + 1:]) / h[:, None]).T
    cols = [Jp[:, j] for j in range(f) if up[j]] + [Jm[:, j] for j in range(f) if down[j]]
    scale = max([float(np.linalg.norm(c)) for c in cols] + [1e-300])
    return {"r0": r0, "Jp": Jp, "Jm": Jm, "up": up, "down": down, "scale": scale}


def _flat_directions(prob: _Problem, z: np.ndarray, J: dict, cols: list[int]) -> list[np.ndarray]:
    """Feasible directions in the knobs ``cols`` along which no measured time changes (each a (f,) vector in z).

    Per orthant of the move (each knob up or down) the one-sided columns form a Jacobian; its null vectors that
    point into that orthant are candidates, kept only if moving along them really leaves every residual
    unchanged (evaluated, not assumed: a kink that is not aligned with the axes would fool the linear algebra)."""
    f = len(z)
    Jp, Jm, up, down = J["Jp"], J["Jm"], J["up"], J["down"]
    cands: list[np.ndarray] = []
    for signs in itertools.product((1, -1), repeat=len(cols)):
        if any((s > 0 and not up[c]) or (s < 0 and not down[c]) for s, c in zip(signs, cols)):
            continue
        M = np.stack([Jp[:, c] if s > 0 else Jm[:, c] for s, c in zip(signs, cols)], axis=1)
        norms = np.linalg.norm(M, axis=0)
        zero = norms <= max(1e-7 * J["scale"], 1e-12)
        for i in np.flatnonzero(zero):  # a column without effect: the single-knob move is a candidate
            d = np.zeros(f)
            d[cols[i]] = signs[i]
            cands.append(d)
        nz = np.flatnonzero(~zero)
        if len(nz) < 2:
            continue
        Mn = M[:, nz] / norms[nz]
        _, s, vt = np.linalg.svd(Mn, full_matrices=True)
        s = np.concatenate([s, np.zeros(len(nz) - len(s))])
        for v in vt[s <= 1e-6 * max(s.max(), 1e-300)]:
            dv = v / norms[nz]
            dv = np.where(np.abs(dv) > 1e-6 * np.abs(dv).max(), dv, 0.0)
            sg = np.array([signs[i] for i in nz])
            for cand in (dv, -dv):
                if np.all(cand * sg >= 0):
                    d = np.zeros(f)
                    d[[cols[i] for i in nz]] = cand
                    cands.append(d)
                    break
    if not cands:
        return []
    uniq: list[np.ndarray] = []
    for d in cands:
        d = d / np.abs(d).max()
        if not any(np.allclose(d, u, atol=1e-6) for u in uniq):
            uniq.append(d)
    step = 1e-4
    R = prob.residuals(z[None] + step * np.array(uniq))
    out = []
    for d, r in zip(uniq, R):
        own = sum(abs(d[c]) * step * np.linalg.norm(J["Jp"][:, c] if d[c] > 0 else J["Jm"][:, c])
                  for c in range(f) if d[c] != 0)
        if np.linalg.norm(r - J["r0"]) <= max(_FLAT_REL * own, _FLAT_ABS):
            out.append(d)
    return out


def _flat_range(prob: _Problem, z: np.ndarray, j: int, r0: np.ndarray) -> tuple[float, float]:
    """The values of knob ``j`` (the other knobs at ``z``) that leave every residual as at ``z``: the interval
    around the fitted value, within the physical range (bracketed by a sweep and one refinement)."""
    k = prob.free[j]
    if k in FRACTIONS:
        lo, hi = math.log(_FRACTION_FLOOR), 0.0
    else:
        per = prob.launches if k == "kernel_overhead" else np.ones_like(prob.meas)
        lo, hi = 0.0, float(np.max(prob.meas / per)) / prob.scale
    ends = []
    for edge in (lo, hi):
        a, b = z[j], edge
        for _ in range(2):
            xs = np.linspace(a, b, _SWEEP)[1:]
            zs = np.repeat(z[None], len(xs), axis=0)
            zs[:, j] = xs
            flat = np.max(np.abs(prob.residuals(zs) - r0), axis=1) <= _FLAT_ABS
            first = int(np.argmax(~flat)) if not flat.all() else len(xs)
            if first == len(xs):
                a = b
                break
            a, b = (xs[first - 1] if first else a), xs[first]
        ends.append(a)
    v = prob.theta(np.array([[ends[0] if i == j else z[i] for i in range(len(z))],
                             [ends[1] if i == j else z[i] for i in range(len(z))]]))[:, KNOBS.index(k)]
    return float(v[0]), float(v[1])


def _identify(prob: _Problem, z: np.ndarray) -> dict:
    """Which free knobs the measurements determine at ``z``.

    The step time is a max (device work against host launches, matrix against memory), so a knob can move the
    fit on one side of a kink and nothing on the other. A knob is *unseen* when a feasible move of it alone
    changes no measured time (every value over a range fits the same); knobs are *entangled* when a move of
    several together changes none. ``to_fix``: the unseen knobs, then (keeping knobs in KNOBS order while no
    flat move appears among the kept ones) the entangled knobs that must be fixed.
    """
    J = _one_sided(prob, z)
    f = len(z)
    unseen: dict[str, tuple[float, float]] = {}
    for j in range(f):
        moves = _flat_directions(prob, z, J, [j])
        flat_up = any(d[j] > 0 for d in moves)
        flat_down = any(d[j] < 0 for d in moves)
        if flat_up or flat_down:
            unseen[prob.free[j]] = _flat_range(prob, z, j, J["r0"])
    rest = [j for j in range(f) if prob.free[j] not in unseen]
    keep: list[int] = []
    for j in rest:
        if not _flat_directions(prob, z, J, keep + [j]):
            keep.append(j)
    entangled: list[str] = []
    if len(keep) < len(rest):
        for d in _flat_directions(prob, z, J, rest):
            entangled += [prob.free[j] for j in rest if d[j] != 0 and prob.free[j] not in entangled]
    entangled = [k for k in KNOBS if k in entangled]
    to_fix = [prob.free[j] for j in range(f) if j not in keep]
    return {"rank": len(keep), "unseen": unseen, "entangled": entangled, "to_fix": to_fix,
            "states": prob.states(prob.theta(z)[0])}


def _not_identified_message(prob: _Problem, info: dict, chip: str, n: int, few: bool) -> str:
    distinct = len(prob.workloads)
    where = "with the ideal knobs" if few else "at the fit"
    head = (f"cannot calibrate {chip}: {n} measurement{'s' if n != 1 else ''} ({distinct} distinct "
            f"workload{'s' if distinct != 1 else ''}) for {len(prob.free)} free knobs "
            f"({', '.join(prob.free)})")
    lines = [head + (": fewer measurements than free knobs" if few else
                     f": they determine only {info['rank']} of them")]
    counts: dict[str, int] = {}
    for s in info["states"]:
        counts[s] = counts.get(s, 0) + 1
    launch = (" (launch-bound: the host's kernel launches outlast the device work; the step takes "
              "max(device work, launches x kernel_overhead) + step_overhead)") if "launch-bound" in counts else ""
    lines.append(f"  {where}: " + ", ".join(f"{c} row{'s' if c != 1 else ''} {s}" for s, c in counts.items())
                 + launch)
    suggest: dict[str, float] = {}
    for k, (lo, hi) in info["unseen"].items():
        rng = (f"every value from {format_knob(k, lo)} to {format_knob(k, hi)} fits the same"
               if hi - lo > 1e-12 * max(1.0, abs(hi)) else f"it has no effect at {format_knob(k, lo)}")
        lines.append(f"  {k} cannot be identified: {where}, no measured time depends on it: {rng}")
        suggest[k] = IDEAL[k] if lo - 1e-15 <= IDEAL[k] <= hi + 1e-15 else (lo if k in OVERHEADS else hi)
    ent = info["entangled"]
    both = {"kernel_overhead", "step_overhead"}
    if both <= set(prob.free) and len(set(prob.launches)) == 1 and (both <= set(ent) or both & set(info["unseen"])):
        L = int(prob.launches[0])
        lines.append(f"  kernel and step overhead cannot be told apart: every measured step launches the same number "
                     f"of kernels, {L}, so on every row kernel_overhead either has no effect (device-bound) or adds "
                     "exactly as step_overhead does (launch-bound); only rows on both sides of the max, with device "
                     "times the other knobs pin down, would separate them")
    if ent:
        lines.append(f"  {', '.join(ent)} cannot be identified separately")
    fix = list(info["to_fix"])
    need = len(prob.free) - n if few else 0
    for k in reversed(prob.free):  # fewer rows than knobs: fix at least that many, the last knobs first
        if len(fix) >= need:
            break
        if k not in fix:
            fix.append(k)
    fix = [k for k in KNOBS if k in fix]
    if fix:
        vals = {k: suggest.get(k, IDEAL[k]) for k in fix}
        lines.append("  fix " + ("it" if len(fix) == 1 else "them") + " with --fix knob=value, e.g. "
                     + " ".join(f"--fix {k}={_fix_text(k, vals[k])}" for k in fix)
                     + (" (the ideal value" + ("s" if len(fix) > 1 else "") if all(vals[k] == IDEAL[k] for k in fix)
                        else " (a value these measurements cannot rule out")
                     + "), or add measurements that separate them")
    return "\n".join(lines)


def _fix_text(knob: str, v: float) -> str:
    """A knob value as --fix reads it back: a fraction as a number, an overhead as '0' or with a unit."""
    if knob in FRACTIONS:
        return f"{v:.4g}"
    if v == 0:
        return "0"
    return format_knob(knob, v).replace(" ", "")


def _resolve_chip(chip):
    if isinstance(chip, ChipSpec):
        return chip, None
    p = Path(str(chip))
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_chip(p), str(p)
    spec = load_chip(str(chip))
    return spec, str(resolve_name(str(chip)))


def predict(chip, measurements) -> np.ndarray:
    """Predicted step time (s) of each measurement's workload on ``chip`` (a spec, a name or a file)."""
    spec, _ = _resolve_chip(chip)
    chips = Chips.from_specs([spec])
    return np.array([float(evaluate_design(chips, parse_measured_workload(m.workload))["time_s"][0])
                     for m in measurements])


def _select(measurements, spec, variant) -> list[Measurement]:
    rows = [m for m in measurements if m.chip == spec.name]
    if not rows:
        have: dict[str, int] = {}
        for m in measurements:
            have[m.chip] = have.get(m.chip, 0) + 1
        listed = ", ".join(f"{c} ({k} rows)" for c, k in sorted(have.items()))
        raise SpecError(f"no measurements of chip '{spec.name}'{did_you_mean(spec.name, have)}; "
                        f"the measurements cover: {listed}")
    if variant is not None:
        variants = sorted({m.variant for m in rows})
        rows = [m for m in rows if m.variant == variant]
        if not rows:
            raise SpecError(f"no measurements of {spec.name} with variant '{variant}'"
                            f"{did_you_mean(variant, variants)}; its variants: {', '.join(variants) or '(none)'}")
    return rows


def _vp(prob: _Problem, unbounded: frozenset, masks: list[np.ndarray], extras: list) -> list[tuple[np.ndarray, float]]:
    """Least squares for several row subsets of ``prob`` at once (the fit and its leave-one-out refits).

    Variable projection: the overheads the time is linear in are solved exactly (bounded linear least
    squares: the best feasible face of the box) for each setting of the other knobs; those (the fractions,
    and an overhead the time is not linear in) by a coarse grid, then by zooming around the three best grid
    points and the given extra starts until the step is 1e-6 (in log fraction, or overhead / shortest
    measurement). The grid is indifferent to the kinks max(matrix, vector, memory) puts in the fractions.
    One evaluator call per workload and round serves every subset. Knobs in ``unbounded`` may leave their
    physical range (fractions up to 1e4, overheads below 0).
    """
    lin = prob.linear()
    gd = prob.grid_dims()
    ov = [j for j, k in enumerate(prob.free) if k in lin]
    q, d = len(ov), len(gd)
    A_all = (np.stack([lin[prob.free[j]] for j in ov], axis=1) * prob.scale / prob.meas[:, None] if q
             else np.zeros((len(prob.rows), 0)))
    always = tuple(i for i, j in enumerate(ov) if prob.free[j] in unbounded)
    bounded = [i for i in range(q) if i not in always]
    subsets = [tuple(sorted(always + S)) for r in range(len(bounded) + 1) for S in itertools.combinations(bounded, r)]
    pinvs = [{S: np.linalg.pinv(A_all[m][:, list(S)]) for S in subsets if S} for m in masks]

    def inner(T0: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        m = masks[i]
        A = A_all[m]
        c = T0[:, m] / prob.meas[m] - 1.0
        best = np.full(c.shape[0], np.inf)
        best_o = np.zeros((c.shape[0], q))
        for S in subsets:
            o = np.zeros((c.shape[0], q))
            if S:
                o[:, list(S)] = -(pinvs[i][S] @ c.T).T
            ok = np.all(o[:, bounded] >= 0, axis=1)
            r = c + o @ A.T
            cost = 0.5 * np.einsum("gi,gi->g", r, r)
            take = ok & (cost < best)
            best = np.where(take, cost, best)
            best_o[take] = o[take]
        return best, best_o

    def assemble(x: np.ndarray, o: np.ndarray) -> np.ndarray:
        z = np.zeros(len(prob.free))
        z[gd] = x
        z[ov] = o
        return z

    if d == 0:
        T0 = prob.times(prob.theta(np.zeros((1, len(prob.free)))))
        out = []
        for i in range(len(masks)):
            cost, o = inner(T0, i)
            out.append((assemble(np.zeros(0), o[0]), float(cost[0])))
        return out
    lo, hi = prob.ranges(unbounded)
    g, T0 = prob.coarse()
    inside = np.all((g >= lo - 1e-12) & (g <= hi + 1e-12), axis=1)
    g, T0 = g[inside], T0[inside]
    centers, cur, owner = [], [], []
    for i in range(len(masks)):
        cost, _ = inner(T0, i)
        order = np.argsort(cost, kind="stable")[:3]
        centers += [g[j] for j in order] + [np.clip(np.asarray(e, dtype=float)[gd], lo, hi) for e in extras[i]]
        cur += [cost[j] for j in order] + [np.inf] * len(extras[i])
        owner += [i] * (len(order) + len(extras[i]))
    centers, cur, owner = np.array(centers), np.array(cur), np.array(owner)
    per_dim = 9 if d <= 2 else 5
    offs = np.array(list(itertools.product(np.linspace(-1.0, 1.0, per_dim), repeat=d)))
    lo_u, hi_u = prob.ranges(frozenset(prob.free))
    step = (hi_u - lo_u) / (_COARSE_POINTS.get(d, 11) - 1)
    while step.max() > 1e-6:
        pts = np.clip(centers[:, None, :] + step * offs[None], lo, hi)  # (C, K, d)
        T = prob.times(prob.theta(prob.z_grid(pts.reshape(-1, d)))).reshape(len(centers), len(offs), -1)
        for i in range(len(masks)):
            mine = np.flatnonzero(owner == i)
            c, _ = inner(T[mine].reshape(-1, T.shape[2]), i)
            c = c.reshape(len(mine), -1)
            k = np.argmin(c, axis=1)
            better = c[np.arange(len(mine)), k] < cur[mine]
            centers[mine[better]] = pts[mine[better], k[better]]
            cur[mine[better]] = c[better, k[better]]
        step = step / ((per_dim - 1) / 2)
    best = [int(np.flatnonzero(owner == i)[np.argmin(cur[owner == i])]) for i in range(len(masks))]
    T = prob.times(prob.theta(prob.z_grid(centers[best])))
    out = []
    for i, b in enumerate(best):
        cost, o = inner(T[i:i + 1], i)
        out.append((assemble(centers[b], o[0]), float(cost[0])))
    return out


def _solve(prob: _Problem, unbounded=frozenset(), extra=()) -> tuple[np.ndarray, float]:
    """The least-squares knobs in z coordinates, within the physical bounds except for the knobs in ``unbounded``."""
    return _vp(prob, frozenset(unbounded), [np.ones(len(prob.rows), dtype=bool)], [list(extra)])[0]


def calibrate(measurements, chip, *, fix: dict | None = None, strict: bool = False, variant: str | None = None,
              measurements_file: str | None = None, loo: bool = True) -> CalibrationFit:
    """Fit ``chip``'s calibration knobs to its rows of ``measurements`` (a list or a CSV path).

    ``fix``: knob -> value held fixed (SI). ``variant``: only rows with that
    variant label. ``strict``: refuse (DseError) when a physical bound is
    active instead of reporting it. See the module docstring for the method.
    """

    if isinstance(measurements, (str, Path)):
        measurements_file = measurements_file or str(measurements)
        measurements = load_measurements(measurements)
    fix = dict(fix or {})
    for k in fix:
        if k not in KNOBS:
            raise SpecError(unknown_name("calibration knob", k, KNOBS))
    spec, chip_path = _resolve_chip(chip)
    base = with_overrides(spec, {f"calibration.{k}": (v if k in FRACTIONS else f"{v!r} s")
                                 for k, v in IDEAL.items()})
    rows = _select(measurements, spec, variant)
    free = tuple(k for k in KNOBS if k not in fix)
    if not free:
        raise SpecError("every knob is fixed (--fix): nothing to fit")
    prob = _Problem(base, rows, free, fix)
    n = len(rows)
    if n < len(free):
        info = _identify(prob, prob.z_of({**IDEAL, **fix}))
        raise SpecError(_not_identified_message(prob, info, spec.name, n, few=True))

    z, cost = _solve(prob)
    info = _identify(prob, z)
    if info["to_fix"]:
        raise SpecError(_not_identified_message(prob, info, spec.name, n, few=False))
    theta = prob.theta(z)[0]
    values = {k: float(v) for k, v in zip(KNOBS, theta)}
    for k in FRACTIONS:  # exactly 1 where the search stopped on the bound
        values[k] = min(values[k], 1.0)

    # the unconstrained optimum, and the physical bounds the data pushes against
    zu, _ = _solve(prob, unbounded=free, extra=[z])
    unconstrained = {k: float(v) for k, v in zip(KNOBS, prob.theta(zu)[0]) if k in free}
    active = _active_bounds(prob, z, cost)
    if strict and active:
        b = active[0]
        what = ("above its physical bound 1 (a fraction of the peak rate cannot exceed 1)" if b.knob in FRACTIONS
                else "below its physical bound 0 (an overhead cannot be negative)")
        others = "".join(f"; also {x.knob} {x.wants()}" for x in active[1:])
        raise DseError(
            f"calibration of {spec.name} refused (--strict): the least-squares fit wants {b.knob} {b.wants()}, "
            f"{what}{others}. The model cannot represent these {n} measurements with physical knobs "
            f"(the clipped fit leaves residuals up to {_max_res(prob, values):.1%}). Drop --strict to accept "
            f"the clipped fit with the bound reported, or fix the knob with --fix {b.knob}=VALUE.")

    bound_t = prob.times(np.array([[IDEAL[k] for k in KNOBS]]))[0]
    fit_t = prob.times(np.array([[values[k] for k in KNOBS]]))[0]
    loo_pred, loo_note, loo_held = _leave_one_out(prob, z, values) if loo else ([None] * n, [""] * n, [()] * n)
    rowfits = []
    for i, m in enumerate(rows):
        lp = loo_pred[i]
        rowfits.append(RowFit(m, float(bound_t[i]), float(fit_t[i]), float(fit_t[i] / m.time_s - 1.0),
                              lp, None if lp is None else float(lp / m.time_s - 1.0), loo_note[i], loo_held[i]))
    result = CalibrationFit(chip=spec, values=values, free=free, fixed=fix, rows=tuple(rowfits),
                            active=tuple(active), unconstrained=unconstrained,
                            measurements_file=measurements_file, chip_path=chip_path)
    calibrated = with_overrides(spec, {
        **{f"calibration.{k}": (values[k] if k in FRACTIONS else f"{values[k]!r} s") for k in KNOBS},
        "calibration.source": result.summary(),
    })
    return CalibrationFit(**{**result.__dict__, "chip": calibrated})


def _max_res(prob: _Problem, values: dict) -> float:
    t = prob.times(np.array([[values[k] for k in KNOBS]]))[0]
    return float(np.max(np.abs(t / prob.meas - 1.0)))


def _active_bounds(prob: _Problem, z: np.ndarray, cost: float) -> list[BoundNote]:
    """Knobs on a physical bound (fraction 1, overhead 0) that, freed alone, leave it and lower the cost."""
    out = []
    for j, k in enumerate(prob.free):
        on = (k in FRACTIONS and z[j] >= -1e-12) or (k in OVERHEADS and z[j] <= 1e-12)
        if not on:
            continue
        zk, ck = _solve(prob, unbounded={k}, extra=[z])
        c = KNOBS.index(k)
        v = float(prob.theta(zk)[0][c])
        past = v > 1.0 + 1e-6 if k in FRACTIONS else v < -1e-6 * prob.scale
        if not past or ck >= cost * (1 - 1e-9):
            continue
        # a flat stretch: the first value (from the bound towards v) that reaches the freed cost
        sweep = np.geomspace(1.0, v, 201) if k in FRACTIONS else np.linspace(0.0, v, 201)
        zs = np.repeat(zk[None], len(sweep), axis=0)
        zs[:, j] = np.log(sweep) if k in FRACTIONS else sweep / prob.scale
        r = prob.residuals(zs)
        cs = 0.5 * np.einsum("gi,gi->g", r, r)
        first = int(np.argmax(cs <= ck + 1e-6 * (cost - ck)))
        edge = float(sweep[first])
        flat = (edge < v * (1 - 1e-3)) if k in FRACTIONS else (edge > v * (1 - 1e-3))
        out.append(BoundNote(k, IDEAL[k], v, edge if flat else None))
    return out


def _leave_one_out(prob: _Problem, z: np.ndarray, values: dict) -> tuple[list, list, list]:
    """For each row: refit (physical bounds) without it and predict it.

    Where the refit without a row cannot identify a knob (often: the row was the only one sensitive to it), that
    knob is held at the full fit's value for this refit (the knobs the other rows cannot determine near the full
    fit; then again until the refit is identified) and the note says so: that number is then partly a fit (the
    held value used the row), not an independent prediction.
    Returns the predictions, the notes and the held knobs per row.
    """
    n = len(prob.rows)
    preds: list = [None] * n
    notes: list = [""] * n
    held: list = [()] * n
    if n == 1:
        return preds, ["no other measurement to refit on"], held
    masks = [np.arange(n) != i for i in range(n)]
    fits = _vp(prob, frozenset(), masks, [[z]] * n)
    for i, (m, (zi, _)) in enumerate(zip(masks, fits)):
        sub = prob.subset(m)
        info = _identify(sub, zi)
        if info["to_fix"]:
            # the refit may have stopped anywhere along what it cannot see: hold what the remaining rows cannot
            # determine near the full fit, where that is known
            near = _identify(sub, z)
            info = near if near["to_fix"] else info
        theta = sub.theta(zi)[0]
        hold: dict[str, float] = {}
        while info["to_fix"]:
            hold.update({k: values[k] for k in info["to_fix"]})
            free = tuple(k for k in prob.free if k not in hold)
            fixed = {**prob.fixed, **hold}
            if not free:
                theta = np.array([fixed[k] for k in KNOBS])
                break
            p2 = _Problem(prob.base, sub.rows, free, fixed)
            z2, _ = _solve(p2, extra=[p2.z_of(values)])
            info = _identify(p2, z2)
            theta = p2.theta(z2)[0]
        theta[:2] = np.minimum(theta[:2], 1.0)
        preds[i] = float(prob.times(theta[None])[0][i])
        if hold:
            held[i] = tuple(k for k in KNOBS if k in hold)
            what = ", ".join(f"{k} at {format_knob(k, values[k])}" for k in held[i])
            notes[i] = (f"without it {', '.join(held[i])} cannot be identified: held at the full fit's value ({what}), "
                        "which used this row, so this is partly a fit")
    return preds, notes, held


# ---------------------------------------------------------------- writing the chip


def calibrated_yaml(fit: CalibrationFit) -> str:
    """The chip file the fit started from, with its ``calibration:`` section replaced by the fitted one.

    Comments and every other line are kept; values are written at full
    precision so the file evaluates to exactly the fitted predictions.
    """
    path = fit.chip_path
    if path is None:
        raise DseError("writing a calibrated chip needs the chip's YAML file: calibrate a catalog name or a chip file")
    text = Path(path).read_text(encoding="utf-8")
    text = _drop_top_level_key(text, "calibration")
    c = fit.chip.calibration
    lines = [
        "",
        f"# calibration: fitted by `dse calibrate` to {fit.measurements_file or 'measurements'}",
        f"#   least squares on {RESIDUAL_KIND}; RMS {fit.rms:.1%}, max {fit.max_abs:.1%};"
        f" leave-one-out {fit.loo_text()}",
    ]
    for b in fit.active:
        lines.append(f"#   bound active: {b.text()}")
    lines += [
        "calibration:",
        f"  compute_efficiency: {c.compute_efficiency!r}",
        f"  bandwidth_efficiency: {c.bandwidth_efficiency!r}",
        f"  kernel_overhead: {c.kernel_overhead!r} s   # {format_knob('kernel_overhead', c.kernel_overhead)}",
        f"  step_overhead: {c.step_overhead!r} s   # {format_knob('step_overhead', c.step_overhead)}",
        f"  source: {_yaml_str(c.source)}",
        "",
    ]
    return text.rstrip("\n") + "\n" + "\n".join(lines)


def _yaml_str(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _drop_top_level_key(text: str, key: str) -> str:
    """``text`` without the top-level ``key:`` block (and the comment block a previous calibration wrote above it)."""
    out, skipping = [], False
    for line in text.splitlines():
        top = line[:1] not in (" ", "\t", "#", "") and not line.startswith("-")
        if top:
            skipping = line.split(":", 1)[0].strip() == key
            if skipping:
                while out and (out[-1].startswith(("# calibration:", "#   ")) or not out[-1].strip()):
                    out.pop()
        elif skipping and line[:1] == "#":
            skipping = False  # a comment at column 0 ends the block
        if not skipping:
            out.append(line)
    return "\n".join(out) + "\n"


def write_calibrated_chip(fit: CalibrationFit, path: str | Path) -> Path:
    """Write :func:`calibrated_yaml` atomically; the file loads with dse.hardware.load_chip."""

    return atomic_write(path, calibrated_yaml(fit))
