"""The calibration problem of one chip: knob values -> predicted times of its measurements, through the evaluator.

Predictions always come from the one evaluator (dse.evaluate.evaluate_each), so a written chip evaluates
to exactly the fitted predictions. Coordinates, the search box and the coarse grid the solver
(dse.calibrate.solve) and the identifiability checks (dse.calibrate.identify) share live here.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from dse.calibrate.knobs import FRACTIONS, IDEAL, KNOBS, OVERHEADS
from dse.calibrate.measurements import Measurement, parse_measured_workload
from dse.evaluate import evaluate_each
from dse.hardware import Chips
from dse.model.evaluator import BOUND_NAMES, op_table

_FRACTION_FLOOR = 1e-4     # numerical floor of a fraction (log coordinates)
_FRACTION_CEIL_FREE = 1e4  # the unconstrained fit may go this far above 1
_COARSE_POINTS = {1: 161, 2: 81, 3: 27, 4: 13}  # coarse grid points per dimension, by number of grid dimensions


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
        # (the chip's package and values once for every workload: dse.evaluate.evaluate_each)
        out = np.stack([np.asarray(m.columns["time_s"]) for m in evaluate_each(chips, self.workloads)], axis=1)
        return out[:, self.idx]

    def states(self, theta: np.ndarray) -> list[str]:
        """What bounds each row at the knob values ``theta`` (4,): 'launch-bound' (the host's launches outlast the
        device work), else the device's bound resource ('matrix-bound', 'vector-bound', 'memory-bound', 'l2-bound',
        'local-bound'). For messages only; from dse.model.evaluator's own columns."""
        arrays = {k: np.full(1, v, dtype=float) for k, v in self.view.items()}
        for j, k in enumerate(KNOBS):
            arrays[f"calibration.{k}"] = np.array([theta[j]], dtype=float)
        chips = Chips(arrays, self.formats, base=self.base)
        # (every bound the evaluator names, dse.model.evaluator.BOUND_NAMES: the L2 and the local buffer too)
        names = tuple(("matrix" if b == "compute" else str(b)) + "-bound" for b in BOUND_NAMES)
        per = []
        for m in evaluate_each(chips, self.workloads):
            out = m.columns
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
                r = self.overhead_range(k)
                lo.append(-r if k in unbounded else 0.0)
                hi.append(r)
        return np.array(lo), np.array(hi)

    def overhead_range(self, k: str) -> float:
        """The largest value (in units of ``scale``) the grid tries for non-linear overhead ``k``: 1.5 x the
        largest measured time per launch (kernel_overhead) or per step."""
        per = self.launches if k == "kernel_overhead" else np.ones_like(self.meas)
        return 1.5 * float(np.max(self.meas / per)) / self.scale

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
