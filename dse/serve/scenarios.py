"""Scenarios kept apart from design variables: every design evaluated on every scenario, fronts per scenario.

A *scenario* is how a chip is used (a request mix and an SLO for serving, or a fixed-batch workload of the
join); a *design* is what is built (a chip, a system of chips). Mixing the two in one Pareto front lets a
scenario knob win the front (the batch-32 rows of a latency x energy front dominate every batch-1 row on
energy and on step time / batch), so the front never answers a question about batch 1. Here each scenario
gets its own front over the designs, and the weighted mix of scenarios (weighted means per design; a design
that cannot serve one scenario cannot serve the mix) gets one more.

    table = evaluate_scenarios(designs, scenarios)         # one row per design x scenario
    fronts(table, {"tpot": "minimize", "energy_per_token": "minimize", "chip_cost": "minimize"})

Objective columns are the catalog's objectives (objectives/), computed on each row's metrics, so a study
and this module rank by the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dse import registry
from dse.errors import DseError, SpecError
from dse.evaluate import evaluate_design
from dse.hardware import ChipSpec, Chips, load_chip, with_overrides
from dse.pareto import pareto_mask
from dse.serve.model import serve
from dse.workload import Workload


@dataclass(frozen=True)
class Scenario:
    """One way of using a design: a fixed-batch ``workload`` of the join, or serving ``isl``/``osl``.

    ``serve``: further :func:`dse.serve.serve` options of a serving scenario (tpot_slo, weights, kv, tp...);
    ``weight``: its share of the mix.
    """

    name: str
    workload: Workload | None = None
    model: object = None
    isl: int | None = None
    osl: int | None = None
    weight: float = 1.0
    serve: dict = field(default_factory=dict)

    def __post_init__(self):
        serving = self.isl is not None or self.osl is not None
        if (self.workload is None) == (not serving) or (serving and (self.model is None or None in (self.isl,
                                                                                                     self.osl))):
            raise SpecError(f"scenario {self.name}: expected a workload, or a model with isl and osl; found "
                            f"workload={self.workload!r}, model={self.model!r}, isl={self.isl!r}, osl={self.osl!r}")
        if not self.weight > 0:
            raise SpecError(f"scenario {self.name} weight: expected a number > 0, found {self.weight!r}")


def _design(d) -> tuple[str, ChipSpec]:
    if isinstance(d, ChipSpec):
        return d.name, d
    if isinstance(d, str):
        return d, load_chip(d)
    if isinstance(d, tuple) and len(d) == 2:
        label, spec = d
        spec = spec if isinstance(spec, ChipSpec) else load_chip(spec)
        return str(label), spec
    raise SpecError(f"design: expected a chip name, a ChipSpec or (label, chip), found {d!r}")


def system_design(chip, chips: int = 1, pipeline: bool = False, label: str | None = None) -> tuple[str, ChipSpec]:
    """A design that is a system of ``chips`` chips (tensor parallel, or pipeline with ``pipeline``)."""
    spec = chip if isinstance(chip, ChipSpec) else load_chip(chip)
    if chips > 1:
        spec = with_overrides(spec, {"system.chips": chips, "system.pipeline": bool(pipeline)})
    return label or f"{spec.name} x{chips}{' pipeline' if pipeline and chips > 1 else ''}", spec


def evaluate_scenarios(designs: Sequence, scenarios: Sequence[Scenario],
                       objectives: Mapping[str, object] | Sequence[str] = ()) -> pd.DataFrame:
    """One row per design and scenario: design, scenario, weight, feasible, the metrics, ``obj.<name>``.

    Workload scenarios run through the join once for all designs (vectorized); serving scenarios through
    :func:`dse.serve.serve` per design (a design that cannot serve it is infeasible, metrics NaN).
    ``objectives``: catalog objective names (or name -> parameters) to add as ``obj.*`` columns.
    """
    ds = [_design(d) for d in designs]
    if not ds or not scenarios:
        raise SpecError("evaluate_scenarios: expected at least one design and one scenario")
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise SpecError(f"evaluate_scenarios: two scenarios share a name: {names}")
    terms = [registry.bind_objective(n, p) for n, p in
             (objectives.items() if isinstance(objectives, Mapping) else ((n, None) for n in objectives))]
    frames = []
    for sc in scenarios:
        if sc.workload is not None:
            m = evaluate_design(Chips.from_specs([s for _, s in ds]), sc.workload)
            cols = {k: np.asarray(v, dtype=float) for k, v in m.items() if np.asarray(v).dtype.kind in "fiub"}
            cols["feasible"] = np.asarray(m["fits"], dtype=bool)
        else:
            rows = []
            for _, spec in ds:
                opts = dict(sc.serve)
                try:
                    rows.append({**serve(spec, sc.model, sc.isl, sc.osl, **opts).metrics(), "feasible": True})
                except DseError:
                    rows.append({"feasible": False})
            df = pd.DataFrame(rows)
            cols = {k: df[k].to_numpy() for k in df.columns}
            cols["feasible"] = df["feasible"].fillna(False).to_numpy(dtype=bool) & df.get(
                "slo_met", pd.Series(1.0, index=df.index)).fillna(0).to_numpy(dtype=bool)
        frame = pd.DataFrame(cols)
        for t in terms:
            frame[f"obj.{t.name}"] = t(frame) if len(frame) else []
        frame.insert(0, "design", [label for label, _ in ds])
        frame.insert(1, "scenario", sc.name)
        frame.insert(2, "weight", sc.weight)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def fronts(table: pd.DataFrame, objectives: Mapping[str, str], mix: bool = True) -> dict[str, pd.DataFrame]:
    """The Pareto front of each scenario over the designs (``objectives``: column -> direction), and of the
    weighted mix of scenarios (key ``'mix'``: weighted means per design, feasible only where every scenario
    is). Columns may be given as ``obj.name`` or ``name``."""
    cols = {(c if c in table.columns else f"obj.{c}"): d for c, d in objectives.items()}
    missing = [c for c in cols if c not in table.columns]
    if missing:
        raise SpecError(f"fronts: no column {missing[0]!r}; the table has: {', '.join(map(str, table.columns))}")
    out = {}
    for name, g in table.groupby("scenario", sort=False):
        F = g[list(cols)].to_numpy(dtype=float)
        ok = g["feasible"].to_numpy(dtype=bool) & np.all(np.isfinite(F), axis=1)
        out[str(name)] = g[pareto_mask(F, list(cols.values()), ok)]
    if mix and table["scenario"].nunique() > 1:
        w = table["weight"] / table.groupby("design", sort=False)["weight"].transform("sum")
        weighted = table[list(cols)].mul(w, axis=0).assign(design=table["design"])
        m = weighted.groupby("design", sort=False).sum(min_count=1)
        feas = table.groupby("design", sort=False)["feasible"].all()
        F = m.to_numpy(dtype=float)
        ok = feas.reindex(m.index).to_numpy(dtype=bool) & np.all(np.isfinite(F), axis=1)
        mixed = m.reset_index().assign(feasible=ok)
        out["mix"] = mixed[pareto_mask(F, list(cols.values()), ok)]
    return out
