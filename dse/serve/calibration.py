"""Calibration of the serving model on measured serving systems: fit, leave-one-out, the shipped knob file.

What is fitted: the evaluator's calibration knobs (:class:`dse.serve.scenario.Knobs`) of one *software stack*,
shared by every chip, model and scenario the stack was measured on -- a fraction of the matrix peak, a
fraction of the memory bandwidth, a time per kernel launch and a time per engine iteration. What is not
fitted: the engine's settings (KV memory fraction 0.90, page size, scheduler policy, batch and token limits:
dse.serve.scenario.Engine, from the engine's documentation), every chip figure, every model figure.

Each measured row becomes one engine iteration (dse.serve.model): a throughput row (ISL, OSL, output tokens/s
of a TP/PP system at maximum load) is the iteration of its operating point, whose batch ``B`` follows from
capacity and the engine's limits alone (no SLO: the knobs do not move it), with the measured iteration time
``T_meas = pp B / measured tokens/s``; a step row (the seed's vLLM decode steps, seed 004 §4.8.3) is its
decode step and measured time. The fit is least squares on relative residuals ``T(knobs) / T_meas - 1`` (each
row weighs the same), solved by the calibration module's bounded variable projection
(:func:`dse.calibrate.solve._vp`: the per-iteration overhead exactly, the fractions and the launch time on a
grid refined by zooming) -- the same solver `dse calibrate` uses, on this problem's rows. Leave-one-out: each
row is predicted by the knobs refitted without it. Errors are reported on the measured quantity (tokens/s
for throughput rows: predicted / measured - 1).

Run ``python -m dse.serve.calibration`` to refit and rewrite dse/data/serving/knobs.yaml.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dse.calibrate import load_measurements, parse_measured_workload
from dse.calibrate.problem import _Problem
from dse.calibrate.solve import _vp
from dse.errors import SpecError, unknown_name
from dse.evaluate import evaluate_each
from dse.fileio import atomic_write
from dse.hardware import ChipSpec, Chips
from dse.model.evaluator import op_table
from dse.serve.knobs import KNOBS_FILE
from dse.serve.model import _capacity, _Evaluator, _formats, _limits, _Scenario, system_chip
from dse.serve.scenario import CALIBRATION_KNOBS, IDEAL, KNOB_NAMES, Engine, Knobs, Parallelism, RequestMix
from dse.spec import load_yaml
from dse.units import format_quantity
from dse.workload import kv_bytes_per_token, load_model, resident_weight_bytes

DATA_DIR = KNOBS_FILE.parent
MEASURED_SERVING = DATA_DIR / "measured_serving.yaml"
SEED_MEASUREMENTS = Path(__file__).resolve().parents[1] / "data" / "measurements" / "seed004.csv"
_FRACTIONS = KNOB_NAMES[:2]


@dataclass(frozen=True)
class Row:
    """One measured row as an engine iteration: ``system`` (knobs not applied), ``workload``, measured time.

    ``kind``: 'throughput' (``measured`` is output tokens/s; ``per_time`` = pp B, so tokens/s = per_time / T)
    or 'step' (``measured`` is the step time in s). ``stack``: the software stack that was measured.
    """

    label: str
    stack: str
    kind: str
    system: ChipSpec
    workload: object
    measured: float
    time_s: float
    per_time: float
    batch: int
    limited_by: str
    source: str

    def value(self, time_s: float) -> float:
        """The measured quantity predicted from an iteration time."""
        return self.per_time / time_s if self.kind == "throughput" else time_s


def _req(path, where: str, d: dict, key: str):
    if key not in d:
        raise SpecError(f"{path}: {where}: missing required key '{key}'")
    return d[key]


def throughput_rows(path=MEASURED_SERVING, engine: Engine | None = None, stack: str = "trtllm") -> list[Row]:
    """The rows of a measured-serving file (the format of dse/data/serving/measured_serving.yaml)."""
    data = load_yaml(Path(path))
    engine = engine or Engine()
    systems = _req(path, "top level", data, "systems")
    src = str(data.get("source", path))
    out = []
    for si, s in enumerate(systems):
        where = f"systems[{si}]"
        model = _req(path, where, s, "model")
        fmts = {"weights": _req(path, where, s, "weights"), "activations": s.get("activations", s["weights"]),
                "kv": s.get("kv_cache", s["weights"])}
        par = Parallelism(int(s.get("tp", 1)), int(s.get("pp", 1)))
        system = system_chip(_req(path, where, s, "chip"), par, IDEAL)
        sc = _Scenario(load_model(model), _formats(fmts), RequestMix.fixed(1, 1), engine, par, _Evaluator(system))
        for ri, r in enumerate(_req(path, where, s, "rows")):
            if not (isinstance(r, (list, tuple)) and len(r) == 3):
                raise SpecError(f"{path}: {where}.rows[{ri}]: expected [isl, osl, output tokens/s], found {r!r}")
            isl, osl, tps = int(r[0]), int(r[1]), float(r[2])
            sc_r = _Scenario(sc.model, sc.formats, RequestMix.fixed(isl, osl), engine, par, sc.ev)
            kv_tok = kv_bytes_per_token(sc.model, sc.formats.fmt("kv"))
            _, pool, per_req = _capacity(sc_r, kv_tok, resident_weight_bytes(sc.model, sc.formats))
            limits = _limits(sc_r, pool, kv_tok, per_req)
            b = max(1, min(limits.values()))
            wl, _ = sc_r.iteration(b)
            label = f"{system.name} TP{par.tp}{f' PP{par.pp}' if par.pp > 1 else ''} {model} {isl}/{osl}"
            out.append(Row(label=label, stack=stack, kind="throughput", system=system, workload=wl, measured=tps,
                           time_s=par.pp * b / tps, per_time=par.pp * b, batch=b,
                           limited_by=next(k for k, v in limits.items() if v == b), source=src))
    return out


def seed_step_rows(path=SEED_MEASUREMENTS, stack: str = "vllm-eager") -> list[Row]:
    """The seed's vLLM decode steps (seed 004 §4.8.3, Experiment 8-1) of a measurements CSV, as step rows."""
    out = []
    for m in load_measurements(path):
        if m.variant != "vllm-eager":
            continue
        wl = parse_measured_workload(m.workload)
        system = system_chip(m.chip, Parallelism(), IDEAL)
        out.append(Row(label=f"{m.chip} {m.workload}", stack=stack, kind="step", system=system, workload=wl,
                       measured=m.time_s, time_s=m.time_s, per_time=1.0, batch=wl.batch, limited_by="measured",
                       source=m.source))
    return out


class _ServingProblem(_Problem):
    """The calibration problem over serving rows (:class:`Row`), in the interface of dse.calibrate's solver.

    Only the construction and ``times`` differ from dse.calibrate.problem._Problem: the rows are engine
    iterations on their own systems of chips instead of one chip's measured workloads; coordinates, bounds,
    the linear-overhead check and the coarse grid are the calibration module's own.
    """

    def __init__(self, rows: list[Row], free: tuple, fixed: dict):  # noqa: D107 - see the class
        self.base = rows[0].system
        self.rows = rows
        self.free = tuple(free)
        self.fixed = dict(fixed)
        self.meas = np.array([r.time_s for r in rows])
        self.launches = np.array([float(op_table(r.workload).count.sum()) for r in rows])
        self.scale = float(self.meas.min())
        self.base_theta = np.array([self.fixed.get(k, IDEAL.values[k]) for k in KNOB_NAMES])
        self.cols = [KNOB_NAMES.index(k) for k in self.free]
        self.parent, self.keep = None, None
        self._linear = None
        self._coarse = None
        self._systems: dict[str, ChipSpec] = {}
        for r in rows:
            self._systems.setdefault(_system_key(r.system), r.system)

    def times(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        P = theta.shape[0]
        over = {f"calibration.{k}": np.array(theta[:, j], dtype=float) for j, k in enumerate(CALIBRATION_KNOBS)}
        chips = {}
        for key, spec in self._systems.items():
            o = dict(over)
            if spec.system.chips > 1:  # the collective overhead adds to the chip's own link latency
                alpha = spec.flat().get("links.scale_up.alpha", 0.0) or 0.0
                o["links.scale_up.alpha"] = alpha + np.array(theta[:, KNOB_NAMES.index("collective_overhead")])
            chips[key] = Chips.from_base(spec, P, o)
        out = np.empty((P, len(self.rows)))
        rows_of: dict = {}  # (each system's rows evaluated together: its package and values once, evaluate_each)
        for i, r in enumerate(self.rows):
            rows_of.setdefault(_system_key(r.system), []).append(i)
        for key, rows in rows_of.items():
            for i, m in zip(rows, evaluate_each(chips[key], [self.rows[i].workload for i in rows])):
                out[:, i] = m.columns["time_s"]
        return out

    def overhead_range(self, k: str) -> float:
        """The calibration module's range, with the collective overhead up to 100 us (a collective step's
        software latency is microseconds)."""
        return _COLLECTIVE_MAX / self.scale if k == "collective_overhead" else super().overhead_range(k)


_COLLECTIVE_MAX = 100e-6


def _system_key(spec: ChipSpec) -> str:
    return spec.name + repr(spec.system)


@dataclass(frozen=True)
class Fit:
    """A fitted profile: the knobs, and per row the bound, the fit and the leave-one-out prediction."""

    knobs: Knobs
    rows: tuple[Row, ...]
    bound: np.ndarray      # predicted measured quantity with the ideal knobs
    fitted: np.ndarray     # ... with the fitted knobs
    loo: np.ndarray        # ... with the knobs refitted without the row
    loo_knobs: tuple[dict, ...]
    loo_notes: tuple[str, ...] = ()

    def errors(self, which: str = "fitted") -> np.ndarray:
        pred = getattr(self, which)
        return pred / np.array([r.measured for r in self.rows]) - 1.0

    def summary(self) -> dict:
        out = {}
        for which in ("bound", "fitted", "loo"):
            e = np.abs(self.errors(which))
            out[which] = {"median": float(np.median(e)), "max": float(np.max(e))}
        free = [i for i in range(len(self.rows)) if not (self.loo_notes and self.loo_notes[i])]
        if free and len(free) < len(self.rows):  # the leave-one-out predictions that held no knob
            e = np.abs(self.errors("loo"))[free]
            out["loo_independent"] = {"median": float(np.median(e)), "max": float(np.max(e)), "rows": len(free)}
        return out


def _theta(values: dict) -> np.ndarray:
    return np.array([[values[k] for k in KNOB_NAMES]], dtype=float)


def fit(rows: list[Row], free=("compute_efficiency", "bandwidth_efficiency", "step_overhead",
                                "collective_overhead"), fixed=None,
        name: str = "fitted", source: str = "", loo: bool = True) -> Fit:
    """Fit the ``free`` knobs (the others at ``fixed`` or ideal) to ``rows``; leave-one-out refits too.

    The collective overhead is fitted only when some row is a system of several chips (else held at 0).
    """
    fixed = dict(fixed or {})
    if not any(r.system.system.chips > 1 for r in rows) and "collective_overhead" in free:
        free = tuple(k for k in free if k != "collective_overhead")
        fixed.setdefault("collective_overhead", 0.0)
    for k in (*free, *fixed):
        if k not in KNOB_NAMES:
            raise SpecError(unknown_name("calibration knob", k, KNOB_NAMES))
    if len(rows) <= len(free):
        raise SpecError(f"serving calibration: {len(rows)} rows cannot determine {len(free)} knobs ({', '.join(free)})")
    prob = _ServingProblem(rows, tuple(free), fixed)
    n = len(rows)
    masks = [np.ones(n, dtype=bool)] + ([np.arange(n) != i for i in range(n)] if loo else [])
    sols = _vp(prob, frozenset(), masks, [[]] * len(masks))
    thetas = [prob.theta(z)[0] for z, _ in sols]
    for th in thetas:
        th[:2] = np.minimum(th[:2], 1.0)
    full = dict(zip(KNOB_NAMES, (float(v) for v in thetas[0])))
    notes = [""] * n
    if loo:
        for i in range(n):
            # what the other rows cannot see near the full fit (as dse.calibrate.fit does), or near their refit
            held = _unfelt(prob, thetas[0], masks[1 + i]) or _unfelt(prob, thetas[1 + i], masks[1 + i])
            if held:  # the other rows cannot see these knobs: hold them at the full fit, refit the rest
                sub = [r for r, keep in zip(rows, masks[1 + i]) if keep]
                rest = tuple(k for k in free if k not in held)
                p2 = _ServingProblem(sub, rest, {**fixed, **{k: full[k] for k in held}})
                z2, _ = _vp(p2, frozenset(), [np.ones(len(sub), dtype=bool)], [[]])[0]
                thetas[1 + i] = p2.theta(z2)[0]
                thetas[1 + i][:2] = np.minimum(thetas[1 + i][:2], 1.0)
                notes[i] = (f"without this row {', '.join(held)} cannot be identified: held at the full fit's "
                            "value, so this prediction is partly a fit")
    T = prob.times(np.array(thetas))
    T_bound = prob.times(_theta(IDEAL.values))[0]
    value = np.vectorize(lambda i, t: rows[int(i)].value(t))
    idx = np.arange(n)
    fitted = value(idx, T[0])
    loo_pred = np.array([rows[i].value(T[1 + i, i]) for i in range(n)]) if loo else np.full(n, np.nan)
    knobs = Knobs(name=name, source=source, fitted_on=tuple(r.label for r in rows), **full)
    loo_knobs = tuple(dict(zip(KNOB_NAMES, (float(v) for v in th))) for th in thetas[1:])
    return Fit(knobs, tuple(rows), value(idx, T_bound), fitted, loo_pred, loo_knobs, tuple(notes))


def _unfelt(prob: _ServingProblem, theta: np.ndarray, mask: np.ndarray) -> tuple[str, ...]:
    """Free knobs that no row of ``mask`` feels near ``theta`` (moved by 10% of their value, or of the shortest
    measured time for an overhead, no predicted time changes by more than 1e-9 relative)."""
    out = []
    base = prob.times(theta[None])[0][mask]
    for k in prob.free:
        j = KNOB_NAMES.index(k)
        moved = []
        for sign in (1, -1):
            th = theta.copy()
            step = 0.1 * th[j] if k in _FRACTIONS else 0.1 * prob.scale
            th[j] = min(th[j] + sign * step, 1.0) if k in _FRACTIONS else max(th[j] + sign * step, 0.0)
            moved.append(th)
        T = prob.times(np.array(moved))[:, mask]
        if np.max(np.abs(T / base - 1.0)) < 1e-9:
            out.append(k)
    return tuple(out)


# ------------------------------------------------------------------ the shipped profiles

#: The profiles shipped in dse/data/serving/knobs.yaml: rows, free knobs, fixed knobs, what the stack is.
PROFILES = {
    "trtllm": dict(
        rows=lambda: throughput_rows(MEASURED_SERVING),
        free=("compute_efficiency", "bandwidth_efficiency", "step_overhead", "collective_overhead"),
        fixed={"kernel_overhead": 0.0},
        description=("TensorRT-LLM (PyTorch backend, CUDA graphs, in-flight batching with chunked prefill), "
                     "offline maximum-throughput runs; kernel_overhead 0: a CUDA graph launches the iteration's "
                     "kernels as one.")),
    "vllm-eager": dict(
        rows=lambda: seed_step_rows(SEED_MEASUREMENTS),
        free=("bandwidth_efficiency", "kernel_overhead"),
        fixed={"step_overhead": 0.0, "collective_overhead": 0.0},
        description=("vLLM 0.23.0 in eager mode (kernels launched one at a time), seed 004 §4.8.3 Experiment "
                     "8-1; compute_efficiency taken from the trtllm fit (every measured step is memory- or "
                     "launch-bound, so these rows cannot determine it); step_overhead 0: with launches that "
                     "outlast the device work, a per-step constant is not separable from the launch time.")),
}
DEFAULT_PROFILE = "trtllm"


def fit_profiles() -> dict[str, Fit]:
    """Fit every shipped profile on its own rows (the vLLM one borrows the trtllm compute efficiency)."""
    out = {}
    for name, p in PROFILES.items():
        fixed = dict(p["fixed"])
        if name != DEFAULT_PROFILE and "compute_efficiency" not in p["free"]:
            fixed["compute_efficiency"] = out[DEFAULT_PROFILE].knobs.compute_efficiency
        out[name] = fit(p["rows"](), p["free"], fixed, name=name, source=p["description"])
    return out


def _time_text(v: float) -> str:
    return "0 s" if v == 0 else format_quantity(v, "time", digits=5)


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def report_table(f: Fit) -> str:
    """The per-row table of a fit (markdown): measured, bound, fit and leave-one-out, with errors."""
    unit = "tokens/s" if f.rows[0].kind == "throughput" else "s"
    lines = [f"| row | batch (limit) | measured {unit} | bound | fit | fit error | leave-one-out | LOO error |",
             "|---|---|---|---|---|---|---|---|"]
    eb, ef, el = f.errors("bound"), f.errors("fitted"), f.errors("loo")

    def show(v):
        return f"{v:.0f}" if unit == "tokens/s" else _time_text(v)

    for i, r in enumerate(f.rows):
        lines.append(f"| {r.label} | {r.batch} ({r.limited_by}) | {show(r.measured)} | {show(f.bound[i])} "
                     f"({_pct(eb[i])}) | {show(f.fitted[i])} | {_pct(ef[i])} | {show(f.loo[i])} | {_pct(el[i])}"
                     + (" (partly a fit: a knob held)" if f.loo_notes and f.loo_notes[i] else "") + " |")
    s = f.summary()
    lines.append("")
    lines.append(f"|error| median / max: bound {s['bound']['median']:.1%} / {s['bound']['max']:.1%}; "
                 f"fit {s['fitted']['median']:.1%} / {s['fitted']['max']:.1%}; "
                 f"leave-one-out {s['loo']['median']:.1%} / {s['loo']['max']:.1%}")
    return "\n".join(lines)


def knobs_yaml(fits: dict[str, Fit]) -> str:
    """The knob file (dse/data/serving/knobs.yaml) of fitted profiles, with sources and the fit report."""
    out = [
        "# Serving knobs: what a software stack achieves on the chips it was measured on (dse.serve).",
        "# Written by `python -m dse.serve.calibration` (dse/serve/calibration.py); do not edit by hand.",
        "# Least squares on relative iteration-time residuals, bounded variable projection",
        "# (dse.calibrate.solve). Engine settings are not fitted (dse.serve.scenario.Engine defaults:",
        "# KV fraction 0.90 of the memory left after weights and 2 GiB workspace per chip, 32-token pages,",
        "# guaranteed-no-evict admission of ISL + OSL, max batch 2048, max 8192 tokens per iteration).",
        f"default: {DEFAULT_PROFILE}",
        "profiles:",
    ]
    for name, f in fits.items():
        k = f.knobs
        out += [f"  {name}:",
                f"    compute_efficiency: {k.compute_efficiency:.4f}",
                f"    bandwidth_efficiency: {k.bandwidth_efficiency:.4f}",
                f"    kernel_overhead: {_time_text(k.kernel_overhead)}",
                f"    step_overhead: {_time_text(k.step_overhead)}",
                f"    collective_overhead: {_time_text(k.collective_overhead)}",
                f"    source: >-\n      {k.source} Fitted on {len(f.rows)} rows: "
                f"{_sources(f)}.",
                "    fitted_on:"]
        out += [f"      - \"{r.label}\"" for r in f.rows]
        s = f.summary()
        out += ["    # fit report (|predicted / measured - 1|, on the measured quantity):",
                f"    #   bound (ideal knobs): median {s['bound']['median']:.1%}, max {s['bound']['max']:.1%}",
                f"    #   fit:                 median {s['fitted']['median']:.1%}, max {s['fitted']['max']:.1%}",
                f"    #   leave-one-out:       median {s['loo']['median']:.1%}, max {s['loo']['max']:.1%}"
                + (f" ({s['loo_independent']['rows']} rows that held no knob: median "
                   f"{s['loo_independent']['median']:.1%}, max {s['loo_independent']['max']:.1%})"
                   if "loo_independent" in s else ""),
                "    #   per row: measured, fit error, leave-one-out error"]
        ef, el = f.errors("fitted"), f.errors("loo")
        for i, r in enumerate(f.rows):
            meas = f"{r.measured:.0f} tok/s" if r.kind == "throughput" else _time_text(r.measured)
            note = f" ({f.loo_notes[i]})" if f.loo_notes and f.loo_notes[i] else ""
            out.append(f"    #     {r.label}: {meas}, fit {_pct(ef[i])}, LOO {_pct(el[i])}{note}")
    return "\n".join(out) + "\n"


def _sources(f: Fit) -> str:
    srcs = []
    for r in f.rows:
        s = r.source.split(":")[0] if r.kind == "step" else r.source
        if s not in srcs:
            srcs.append(s)
    return "; ".join(srcs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dse.serve.calibration",
                                description="Refit the shipped serving knobs and print the fit report.")
    p.add_argument("--write", action="store_true", help=f"rewrite {KNOBS_FILE}")
    args = p.parse_args(argv)
    fits = fit_profiles()
    for name, f in fits.items():
        k = f.knobs
        print(f"## {name}: compute_efficiency {k.compute_efficiency:.4f}, bandwidth_efficiency "
              f"{k.bandwidth_efficiency:.4f}, kernel_overhead {_time_text(k.kernel_overhead)}, "
              f"step_overhead {_time_text(k.step_overhead)}, collective_overhead "
              f"{_time_text(k.collective_overhead)}")
        print(report_table(f))
        print()
    if args.write:
        atomic_write(KNOBS_FILE, knobs_yaml(fits))
        print(f"wrote {KNOBS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
