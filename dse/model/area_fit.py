"""The area model's fit: its coefficients fitted jointly on the catalog's published die areas, leave-one-out.

What is fitted: the ten coefficients of ``area_model.yaml`` ``parameters`` (dse.model.area: matrix datapath
per organisation, vector lanes, per-unit control, graphics, die overhead, register file, scratchpad, cache,
SerDes), one value each for every chip and node. What is not: the node scalings (processes.yaml logic
densities and bitcells), the PHY areas (memories.yaml), the die-to-die PHY, the format ratios, and every
chip figure. A chip's published die area is a label, never an input of its own prediction.

The labels: every catalog chip with a published ``reference.die_area``, one label per die (chips that are the
same die -- the same node, published area and physical units, e.g. H100 and H200 -- count once, so a
leave-one-out never predicts a die from itself).

The method: maximum a posteriori under a Gaussian relative error of ``SIGMA_OBSERVATION`` per die and a
Gaussian prior on each coefficient's ratio to its prior value (width ``sigma`` in the YAML; the prior values
come from sources outside the catalog), coefficients >= 0: a non-negative linear least-squares problem
(Lawson-Hanson), since the die area is linear in the coefficients (:func:`dse.model.area.area_terms`).
Leave-one-out: each die predicted by the coefficients fitted on the others.

Run ``python -m dse.model.area_fit`` for the table, ``--write`` to rewrite the coefficients and the table in
dse/data/technology/area_model.yaml.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

import numpy as np

from dse import technology
from dse.fileio import atomic_write
from dse.hardware import Chips, catalog
from dse.model import area as area_mod

AREA_FILE = technology.TECH_DIR / "area_model.yaml"
SIGMA_OBSERVATION = 0.10
"""Relative error of one die's published area against a model of its parts (a die shot's precision, est.)."""


@dataclass(frozen=True)
class Label:
    """One die with a published area: its chips, the published mm^2, its features and fixed parts."""

    chips: tuple[str, ...]
    published: float
    features: np.ndarray  # (K,) mm^2 per unit of each coefficient (COEFFICIENTS order)
    fixed: float          # mm^2 the fit does not touch (memory PHYs, die-to-die PHY)

    @property
    def name(self) -> str:
        return " / ".join(self.chips)

    def predict(self, theta: np.ndarray) -> float:
        return float(self.features @ theta + self.fixed)


def labels(tech=None) -> list[Label]:
    """The catalog's published dies as fit labels (see the module doc), in catalog order."""
    names = area_mod.COEFFICIENTS
    groups: dict[tuple, list] = {}
    for spec in catalog():
        if spec.reference is None or spec.reference.die_area is None:
            continue
        chips = Chips.from_specs([spec])
        terms, fixed = area_mod.design_terms(chips, tech=tech)
        feats = np.zeros(len(names))
        for _, coef, quantity in terms:
            feats[names.index(coef)] += float(quantity[0])
        fixed_mm2 = float(fixed["memory_phy"][0] + fixed["die_to_die"][0])
        uphys = area_mod.package_area_for(chips, tech).units_physical[0]
        key = (technology.process(spec.process).name if tech is None else tech.process(spec.process).name,
               round(spec.reference.die_area, 3), float(uphys))
        groups.setdefault(key, []).append((spec.name, spec.reference.die_area, feats, fixed_mm2))
    out = []
    for members in groups.values():
        name, area, feats, fixed_mm2 = members[0]
        out.append(Label(tuple(m[0] for m in members), area, feats, fixed_mm2))
    return out


def _priors(tech=None) -> tuple[np.ndarray, np.ndarray]:
    params = (technology.area_model() if tech is None else tech.area).parameters
    prior = np.array([getattr(params, k).prior for k in area_mod.COEFFICIENTS])
    sigma = np.array([getattr(params, k).sigma for k in area_mod.COEFFICIENTS])
    return prior, sigma


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 200) -> np.ndarray:
    """min ||a x - b|| subject to x >= 0 (Lawson & Hanson 1974, the active-set method), bounded iterations."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    for _ in range(max_iter):
        if passive.all() or np.max(np.where(passive, -np.inf, w)) <= 1e-12:
            break
        passive[int(np.argmax(np.where(passive, -np.inf, w)))] = True
        for _ in range(max_iter):
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if np.all(z[passive] > 0):
                x = z
                break
            neg = passive & (z <= 0)
            step = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + step * (z - x)
            passive &= x > 1e-15
        w = a.T @ (b - a @ x)
    return x


def fit(rows: list[Label], tech=None) -> np.ndarray:
    """The coefficients (COEFFICIENTS order, SI) fitted on ``rows`` with the priors (module doc)."""
    prior, sigma = _priors(tech)
    if rows:
        x = np.array([r.features for r in rows])
        pub = np.array([r.published for r in rows])
        y = np.array([r.published - r.fixed for r in rows])
        a_obs, b_obs = x / (SIGMA_OBSERVATION * pub[:, None]), y / (SIGMA_OBSERVATION * pub)
    else:
        a_obs, b_obs = np.zeros((0, len(prior))), np.zeros(0)
    a = np.vstack([a_obs, np.diag(1.0 / (sigma * prior))])
    b = np.concatenate([b_obs, 1.0 / sigma])
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    return nnls(a / scale, b) / scale


@dataclass(frozen=True)
class FitReport:
    theta: np.ndarray
    rows: list[Label]
    in_sample: np.ndarray     # relative error of each die, fitted on all
    leave_one_out: np.ndarray  # relative error of each die, fitted without it

    @property
    def median(self) -> float:
        return float(np.median(np.abs(self.leave_one_out)))

    @property
    def worst(self) -> float:
        return float(np.max(np.abs(self.leave_one_out)))


def report(tech=None) -> FitReport:
    """The fit on every label and the leave-one-die-out errors."""
    rows = labels(tech)
    theta = fit(rows, tech)
    ins = np.array([r.predict(theta) / r.published - 1 for r in rows])
    loo = np.array([r.predict(fit(rows[:i] + rows[i + 1:], tech)) / r.published - 1 for i, r in enumerate(rows)])
    return FitReport(theta, rows, ins, loo)


_DIMENSION = {k: ("area_per_byte" if k in ("register_file", "scratchpad", "cache") else "area")
              for k in area_mod.COEFFICIENTS}
_UNIT = {"area": ("um^2", 1e-6), "area_per_byte": ("mm^2/MiB", 1.0 / 2**20)}


def _written(name: str, value: float) -> str:
    unit, scale = _UNIT[_DIMENSION[name]]
    if name in ("unit_control", "graphics", "die_overhead", "serdes"):
        unit, scale = "mm^2", 1.0
    return f"{value / scale:.4g} {unit}"


def table(rep: FitReport) -> str:
    lines = [f"{'die':34s} {'published':>10s} {'fitted':>9s} {'LOO':>9s} {'LOO error':>9s}"]
    for r, e_in, e_loo in zip(rep.rows, rep.in_sample, rep.leave_one_out):
        lines.append(f"{r.name:34s} {r.published:8.1f} mm^2 {r.published * (1 + e_in):7.1f} "
                     f"{r.published * (1 + e_loo):9.1f} {e_loo:+9.1%}")
    lines.append(f"leave-one-out |error|: median {rep.median:.1%}, max {rep.worst:.1%} over {len(rep.rows)} dies")
    return "\n".join(lines)


FIT_MARK = "# ---- fit (written by python -m dse.model.area_fit --write; do not edit below) ----"


def write(rep: FitReport, path=AREA_FILE) -> None:
    """Rewrite the coefficient values and the leave-one-out table in ``path`` (the rest of the file is kept)."""
    text = path.read_text()
    for name, value in zip(area_mod.COEFFICIENTS, rep.theta):
        text, count = re.subn(rf"(?m)^(  {name}: \{{value: )[^,]+,", lambda m: f"{m.group(1)}{_written(name, value)},",
                              text)
        if count != 1:
            raise RuntimeError(f"{path}: no one-line entry for parameter {name}")
    text = text.split(FIT_MARK)[0].rstrip("\n") + "\n"
    rows = "\n".join(f"    - {{die: \"{r.name}\", published: {r.published:g} mm^2, fitted: "
                     f"{r.published * (1 + e_in):.1f} mm^2, leave_one_out: {r.published * (1 + e_loo):.1f} mm^2, "
                     f"error: {e_loo:+.3f}}}" for r, e_in, e_loo in zip(rep.rows, rep.in_sample, rep.leave_one_out))
    text += (f"{FIT_MARK}\nfit:\n  sigma_observation: {SIGMA_OBSERVATION}\n"
             f"  leave_one_out_median: {rep.median:.4f}\n  leave_one_out_max: {rep.worst:.4f}\n  dies:\n{rows}\n")
    atomic_write(path, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dse.model.area_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the coefficients in area_model.yaml")
    args = ap.parse_args(argv)
    rep = report()
    print(table(rep))
    print("coefficients (at the reference node):")
    for name, value in zip(area_mod.COEFFICIENTS, rep.theta):
        print(f"  {name:20s} {_written(name, value)}")
    if args.write:
        write(rep)
        print(f"wrote {AREA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
