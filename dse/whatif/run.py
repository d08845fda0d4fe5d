"""What-if evaluation: every design on every workload through the one join, and the comparisons.

Each design is evaluated by :func:`dse.evaluate.evaluate_design` on
``Chips.from_specs([design.chip])`` (:func:`design_chips`): the chip file of
the design, evaluated as any chip file is. The comparisons (change in %,
bound changes, Amdahl decomposition, Example 4-1's attention block) are
described in :mod:`dse.whatif`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.errors import DseError, SpecError, unknown_name
from dse.evaluate import evaluate_design
from dse.fileio import atomic_write, output_folder
from dse.hardware import Chips
from dse.model.pipeline import amdahl_speedup, attention_block_cycles, attention_handoff_schedule
from dse.study.results import format_value
from dse.whatif.render import CLASSES, RESOURCES, _as_dict, _chart, _clean, _markdown, _pct
from dse.whatif.spec import BASELINE, Design, WhatIfSpec, load_proposals, spec_from_dict

@dataclass
class WhatIfResult:
    """The what-if's frames (long format; one row per workload x design, or x operator).

    ``metrics``: workload, design, chip, compare_to, the joined metrics, ``con.<name>`` per constraint,
    ``feasible``, ``violations`` and ``error`` (an evaluation that failed for that design).
    ``operators``: workload, design, op, count, t_op_s, t_matrix_s, t_vector_s, t_memory_s, bound.
    ``amdahl``: workload, design, compare_to, resource, base_time_s, fraction, new_time_s, speedup,
    delta_s, share_of_change, step_speedup_alone (resources of the reference design's operators; see the module
    docstring; step_speedup_alone: Amdahl's 1 / ((1 - f) + f / s), the step's speed-up had only this group changed).
    ``bound_changes``: workload, design, compare_to, op, count, before, after, t_before_s, t_after_s.
    ``attention``: design, matrix/exp/smem cycles, interval_cycles, bottleneck (None when not asked for).
    ``handoff``: design, chip, mode, group_rows, slots, vector_start_ticks, completion_ticks: the QK -> softmax
    -> PV handoff schedule of seed 004 §4.4.3 for each of :data:`HANDOFF_RUNS` (None when not asked for).
    """

    spec: WhatIfSpec
    metrics: pd.DataFrame
    operators: pd.DataFrame
    amdahl: pd.DataFrame
    bound_changes: pd.DataFrame
    attention: pd.DataFrame | None = None
    handoff: pd.DataFrame | None = None

    # ---------------------------------------------------------------- look-ups
    def _row(self, workload: str | None, design: str) -> pd.Series:
        m = self.metrics
        wl = self._workload(workload)
        sel = m[(m.workload == wl) & (m.design == design)]
        if sel.empty:
            raise SpecError(unknown_name("design", design, list(dict.fromkeys(m.design))))
        return sel.iloc[0]

    def _workload(self, workload: str | None) -> str:
        names = [w.name for w in self.spec.workloads]
        if workload is None:
            return names[0]
        if workload not in names:
            raise SpecError(unknown_name("workload", workload, names))
        return workload

    def value(self, design: str, metric: str, workload: str | None = None):
        """A metric (or ``con.<name>``) of one design on one workload (default: the first workload)."""
        row = self._row(workload, design)
        if metric not in row.index:
            raise SpecError(unknown_name("metric", metric, list(row.index)))
        return row[metric]

    def ratio(self, design: str, metric: str, workload: str | None = None, against: str | None = None) -> float:
        """design's metric / the reference design's (its compare_to, or ``against``)."""
        ref = against or self.spec.design(design).compare_to or BASELINE
        return float(self.value(design, metric, workload)) / float(self.value(ref, metric, workload))

    def change(self, design: str, metric: str, workload: str | None = None, against: str | None = None) -> float:
        """Change of a metric in % against the design's reference (``compare_to``) or ``against``."""
        return _pct(float(self.value(design, metric, workload)),
                    float(self.value(against or self.spec.design(design).compare_to or BASELINE, metric, workload)))

    # ---------------------------------------------------------------- output
    def to_markdown(self) -> str:
        return _markdown(self)

    def to_dict(self) -> dict:
        return _as_dict(self)

    def to_json(self) -> str:
        return json.dumps(_clean(self.to_dict()), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def chart_png(self) -> bytes:
        return _chart(self)

    def write(self, out_dir) -> dict[str, Path]:
        """whatif.md, whatif.json and whatif.png in ``out_dir``, each written atomically."""

        root = output_folder(out_dir)  # one line, not a traceback, if it cannot be made (issue 21)
        return {
            "whatif.md": atomic_write("whatif.md", self.to_markdown(), root=root),
            "whatif.json": atomic_write("whatif.json", self.to_json(), root=root),
            "whatif.png": atomic_write("whatif.png", self.chart_png(), root=root),
        }


def design_chips(design: Design) -> Chips:
    """The design point a what-if design is evaluated as: its chip, as a chip file would be."""
    return Chips.from_specs([design.chip])


def _evaluate_design(design: Design, workload, constraints) -> tuple[dict, pd.DataFrame | None, str | None]:
    """Joined metrics + constraint values of one design on one workload, and its operator table."""

    opts = dict(design.evaluation)
    try:
        dm = evaluate_design(design_chips(design), workload, breakdown=True, **opts)
        m, ops = dm.columns, dm.operators[0]
    except DseError as e:  # a design this workload cannot be evaluated on: a result, not a crash
        return {}, None, str(e)
    row: dict[str, Any] = {}
    for k, v in m.items():
        a = np.asarray(v).reshape(-1)
        row[k] = a[0].item() if a.size else math.nan
    row["bound"] = RESOURCES[int(row.pop("bound_code", 0))]
    violations = []
    for t in constraints:
        try:
            val = float(np.asarray(t(m)).reshape(-1)[0])
        except DseError as e:
            row[f"con.{t.name}"] = math.nan
            violations.append(f"{t.name}: cannot evaluate ({e})")
            continue
        row[f"con.{t.name}"] = val
        if not val <= 0:
            violations.append(f"{t.name}: +{format_value(val, t.unit)} over the limit")
    row["feasible"] = not violations
    row["violations"] = "; ".join(violations)
    frame = pd.DataFrame({
        "op": list(ops.names),
        "count": np.asarray(ops.count, dtype=float),
        "t_op_s": np.asarray(ops.t_op)[0],
        "t_matrix_s": np.asarray(ops.t_matrix)[0],
        "t_vector_s": np.asarray(ops.t_vector)[0],
        "t_memory_s": np.asarray(ops.t_memory)[0],
        "bound": np.array(RESOURCES)[np.asarray(ops.bound)[0].astype(int)],
    })
    return row, frame, None


def _amdahl(ref_ops: pd.DataFrame, new_ops: pd.DataFrame, t_ref: float, t_new: float) -> list[dict]:
    """Time of the operators grouped by the reference design's bound resource, before and after."""
    j = ref_ops.merge(new_ops, on="op", suffixes=("_ref", "_new"))
    w_ref = j["t_op_s_ref"] * j["count_ref"]
    w_new = j["t_op_s_new"] * j["count_new"]
    parts = {r: (float(w_ref[j.bound_ref == r].sum()), float(w_new[j.bound_ref == r].sum())) for r in RESOURCES}
    parts["overhead"] = tuple(x if abs(x) > 1e-9 * t else 0.0
                              for x, t in ((t_ref - float(w_ref.sum()), t_ref), (t_new - float(w_new.sum()), t_new)))
    total_delta = t_new - t_ref
    rows = []
    for r in CLASSES:
        b, n = parts[r]
        if b == 0 and n == 0:
            continue
        rows.append({
            "resource": r,
            "base_time_s": b,
            "fraction": b / t_ref if t_ref > 0 else math.nan,
            "new_time_s": n,
            "speedup": b / n if n > 0 else (math.nan if b == 0 else math.inf),
            "delta_s": n - b,
            "share_of_change": (n - b) / total_delta if total_delta != 0 else math.nan,
        })
        f, s = rows[-1]["fraction"], rows[-1]["speedup"]
        rows[-1]["step_speedup_alone"] = float(amdahl_speedup(f, s)) if 0 < f <= 1 and s > 0 else math.nan
    return rows


def _attention_rows(spec: WhatIfSpec) -> pd.DataFrame | None:
    cfg = spec.attention_block
    if cfg is None:
        return None
    rows = []
    for d in spec.designs:
        fpc = d.chip.matrix.flops_per_cycle.get(cfg["format"], math.nan)
        exp = d.chip.vector.exp_per_cycle if d.chip.vector is not None else math.nan
        smem = cfg["smem_bytes_per_cycle"]
        op, v = d.attention.get("smem_bytes_per_cycle", ("=", smem))
        smem = smem * v if op == "x" else v
        row = {"design": d.name, "chip": d.chip.name, "compare_to": d.compare_to,
               "matrix_flops_per_cycle": fpc, "exp_per_cycle": exp, "smem_bytes_per_cycle": smem}
        if not (fpc > 0 and exp > 0):
            missing = cfg["format"] if not fpc > 0 else "vector.exp_per_cycle"
            row.update(matrix_cycles=math.nan, exp_cycles=math.nan, smem_cycles=math.nan, interval_cycles=math.nan,
                       bottleneck=f"- (no {missing})")
            rows.append(row)
            continue
        c = attention_block_cycles(cfg["rows"], cfg["cols"], cfg["head_dim"], matrix_flops_per_cycle=fpc,
                                   exp_per_cycle=exp, smem_bytes_per_cycle=smem, operand_bytes=cfg["operand_bytes"])
        cyc = {"matrix": float(c.matrix), "exp": float(c.exp), "smem": float(c.smem)}
        row.update(matrix_cycles=cyc["matrix"], exp_cycles=cyc["exp"], smem_cycles=cyc["smem"],
                   interval_cycles=float(c.interval),
                   bottleneck=" = ".join(k for k, x in cyc.items() if x == float(c.interval)))
        rows.append(row)
    df = pd.DataFrame(rows)
    ref = {r["design"]: r["interval_cycles"] for r in rows}
    df["speedup"] = [ref.get(r["compare_to"] or BASELINE, math.nan) / r["interval_cycles"]
                     if r["compare_to"] else 1.0 for r in rows]
    return df


#: the handoff schedules of seed 004 §4.4.3's table: (mode, row-group size, handoff slots)
HANDOFF_RUNS = (("write-read", 128, 1), ("write-read", 32, 1), ("write-read", 32, 2), ("direct", 32, 2),
                ("direct", 32, 4))


def _handoff_rows(spec: WhatIfSpec, attention: pd.DataFrame | None) -> pd.DataFrame | None:
    """Seed 004 §4.4.3's QK -> softmax -> PV schedule per design and :data:`HANDOFF_RUNS` entry, one tick a cycle
    of one compute unit: the matrix unit at the attention table's FLOPs/cycle, the handoff interface at its
    shared-memory bytes/cycle, exponentials and divisions at ``vector.exp_per_cycle``, ordinary vector
    operations and comparisons at ``vector.flops_per_cycle`` / 2 (an FMA lane is 2 FLOPs, an add or compare
    one); FP32 scores, probabilities in the block's ``operand_bytes``
    (:func:`dse.model.pipeline.attention_handoff_schedule`)."""
    if attention is None:
        return None
    cfg = spec.attention_block
    rows = []
    for d, a in zip(spec.designs, attention.to_dict(orient="records")):
        vec = d.chip.vector.flops_per_cycle / 2.0 if d.chip.vector is not None else math.nan
        ok = math.isfinite(a["interval_cycles"]) and vec > 0
        for mode, group, slots in HANDOFF_RUNS:
            row = {"design": d.name, "chip": d.chip.name, "mode": mode, "group_rows": group, "slots": slots,
                   "vector_start_ticks": math.nan, "completion_ticks": math.nan}
            if ok:
                h = attention_handoff_schedule(
                    int(cfg["rows"]), int(cfg["cols"]), int(cfg["head_dim"]), group_rows=group, slots=slots,
                    direct=mode == "direct", matrix_flops_per_tick=a["matrix_flops_per_cycle"],
                    interface_bytes_per_tick=a["smem_bytes_per_cycle"], exp_per_tick=a["exp_per_cycle"],
                    vector_ops_per_tick=vec, score_bytes=4, prob_bytes=max(int(round(cfg["operand_bytes"])), 1))
                row.update(vector_start_ticks=float(h.vector_start), completion_ticks=float(h.completion))
            rows.append(row)
    return pd.DataFrame(rows)


def run_whatif(path_or_spec) -> WhatIfResult:
    """Evaluate a what-if (a file path, a mapping, or a :class:`WhatIfSpec`) -> :class:`WhatIfResult`."""
    if isinstance(path_or_spec, WhatIfSpec):
        spec = path_or_spec
    elif isinstance(path_or_spec, Mapping):
        spec = spec_from_dict(path_or_spec)
    else:
        spec = load_proposals(path_or_spec)
    rows, op_frames, amdahl_rows, change_rows = [], [], [], []
    for wl in spec.workloads:
        per: dict[str, tuple[dict, pd.DataFrame | None]] = {}
        for d in spec.designs:
            row, ops, err = _evaluate_design(d, wl, spec.constraints)
            if err is not None:
                row = {"feasible": False, "violations": ""}
            head = {"workload": wl.name, "design": d.name, "chip": d.chip.name, "compare_to": d.compare_to}
            rows.append({**head, **row, "error": err})
            per[d.name] = (row, ops)
            if ops is not None:
                op_frames.append(ops.assign(workload=wl.name, design=d.name))
        for d in spec.proposals:
            (row, ops), (ref_row, ref_ops) = per[d.name], per[d.compare_to]
            if ops is None or ref_ops is None:
                continue
            for a in _amdahl(ref_ops, ops, ref_row["time_s"], row["time_s"]):
                amdahl_rows.append({"workload": wl.name, "design": d.name, "compare_to": d.compare_to, **a})
            j = ref_ops.merge(ops, on="op", suffixes=("_ref", "_new"))
            for _, r in j[j.bound_ref != j.bound_new].iterrows():
                change_rows.append({"workload": wl.name, "design": d.name, "compare_to": d.compare_to,
                                    "op": r.op, "count": r.count_ref, "before": r.bound_ref, "after": r.bound_new,
                                    "t_before_s": r.t_op_s_ref, "t_after_s": r.t_op_s_new})
    metrics = pd.DataFrame(rows)
    operators = pd.concat(op_frames, ignore_index=True) if op_frames else pd.DataFrame()
    if not operators.empty:
        rest = [c for c in operators.columns if c not in ("workload", "design")]
        operators = operators[["workload", "design"] + rest]
    amdahl = pd.DataFrame(amdahl_rows, columns=["workload", "design", "compare_to", "resource", "base_time_s",
                                                "fraction", "new_time_s", "speedup", "delta_s", "share_of_change",
                                                "step_speedup_alone"])
    changes = pd.DataFrame(change_rows, columns=["workload", "design", "compare_to", "op", "count", "before",
                                                 "after", "t_before_s", "t_after_s"])
    attention = _attention_rows(spec)
    return WhatIfResult(spec, metrics, operators, amdahl, changes, attention, _handoff_rows(spec, attention))
