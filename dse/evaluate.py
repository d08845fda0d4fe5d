"""The one public join: N design points x workloads -> every metric.

:func:`evaluate_design` is what studies, the what-if, `dse eval`, the catalog
comparisons, calibration and both CP-SAT data steps call (ARCHITECTURE rule
1). It runs the evaluator (:mod:`dse.model.evaluator`: time, energy, power,
clock, capacity, per operator) on each workload, combines the workloads with
their weights, and adds the area and cost of the package
(:mod:`dse.model.area`, :mod:`dse.model.cost`), each design evaluated once.

Workload mix: each workload's metrics are combined with the weights
(normalized): weighted means for times, energies, throughputs and powers; the
worst case for what must hold for every workload (resident bytes, peak
power, quantization error, fits, and the smallest max batch).

Example (Qwen3-8B decode on the H100, one design point)::

    >>> from dse.evaluate import evaluate_design
    >>> from dse.hardware import Chips, load_chip
    >>> from dse.workload import decode
    >>> m = evaluate_design(Chips.from_specs([load_chip("h100-sxm")]), decode("qwen3-8b", batch=1, context=8192))
    >>> bool(m["time_s"][0] > 0), bool(m["die_area_mm2"][0] > 700)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.hardware import Chips
from dse.model import area as area_mod, cost as cost_mod
from dse.model.evaluator import BOUND_NAMES, OperatorBreakdown, WorkloadMetrics, chip_values, evaluate_workload

__all__ = ["DesignMetrics", "evaluate_design", "evaluate_each", "evaluate", "WORST", "BOUND_NAMES"]

#: How a metric combines over a workload mix where the mean would not do: the worst workload decides.
WORST = {"resident_bytes": np.max, "peak_power_w": np.max, "quant_error": np.max, "max_batch": np.min,
         "fits": np.min, "capacity_bytes": np.min, "tdp": np.min}


@dataclass(frozen=True)
class DesignMetrics(Mapping):
    """Every metric of N design points: a read-only mapping of name -> (N,) array (the workload mix).

    ``per_workload`` holds each workload's own metrics (name, weight, metrics);
    ``operators`` the per-operator breakdown of each workload when asked for.
    """

    columns: dict[str, np.ndarray]
    per_workload: tuple[tuple[str, float, WorkloadMetrics], ...]
    chip_names: Sequence[str]  # (a tuple, or the points' numbered names made when read: Chips.name_sequence)
    package_columns: tuple[str, ...] = ()  # area, cost and density: the same for every workload

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def n(self) -> int:
        return len(self.chip_names)

    @property
    def operators(self) -> tuple[OperatorBreakdown, ...]:
        """The per-operator breakdown of each workload (empty unless ``breakdown=True``)."""
        return tuple(wm.operators for _, _, wm in self.per_workload if wm.operators is not None)

    def row(self, i: int = 0) -> dict[str, float]:
        """One design's metrics as plain Python values (``bound`` as a name)."""
        out: dict = {}
        for k, v in self.columns.items():
            a = np.asarray(v).reshape(-1)
            out[k] = a[i].item() if a.size else float("nan")
        out["bound"] = str(BOUND_NAMES[int(out.pop("bound_code", 0))])
        return out

    def frame(self) -> pd.DataFrame:
        """One row per design point and workload (the per-workload metrics, not the mix), plus area and cost."""
        frames = []
        extra = {k: self.columns[k] for k in self.package_columns}
        for name, _w, wm in self.per_workload:
            df = pd.DataFrame({k: np.asarray(v) for k, v in wm.columns.items()})
            for k, v in extra.items():
                df[k] = v
            df.insert(0, "point", np.arange(self.n))
            df.insert(1, "chip", list(self.chip_names))
            df.insert(2, "workload", name)
            df.insert(3, "phase", wm.phase)
            df["bound"] = BOUND_NAMES[np.asarray(wm.columns["bound_code"], dtype=int)]
            frames.append(df)
        out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        ops = self.operators
        if ops:
            out.attrs["operators"] = pd.concat([b.frame(self.chip_names) for b in ops], ignore_index=True)
        return out


def _as_pairs(workloads) -> list[tuple[object, float]]:
    if not isinstance(workloads, (list, tuple)):
        workloads = [workloads]
    out = []
    for w in workloads:
        if isinstance(w, tuple) and len(w) == 2:
            out.append((w[0], float(w[1])))
        else:
            out.append((w, 1.0))
    return out


def evaluate_design(chips: Chips, workloads, *, breakdown: bool = False, tiles=None, tiles_for=None,
                    fused_attention: bool = True, weights_in_rom: bool = False, rom_bandwidth=np.inf,
                    rom_energy_per_byte=0.0) -> DesignMetrics:
    """Every metric of the N design points ``chips`` on ``workloads``, each design evaluated once.

    ``workloads``: one Workload, a list of them, or a list of ``(workload, weight)`` pairs (the mix).
    ``breakdown``: keep each workload's per-operator table (:class:`OperatorBreakdown`).
    ``tiles``: (T_M, T_N, T_K, split-K) arrays per operator instead of the default tiles (one workload).
    ``tiles_for``: a function ``(chips, workload) -> tiles or None`` giving each workload of a mix its own tiles
    (a study's CP-SAT tiles, dse.study.tiles); None from it, or no function, means the default tiles.
    ``weights_in_rom`` / ``rom_bandwidth`` / ``rom_energy_per_byte``: seed 004 §4.7.3's what-if.
    """
    pairs = _as_pairs(workloads)
    if not pairs:
        raise ValueError("evaluate_design: no workloads")
    total_w = sum(w for _, w in pairs)
    pa = area_mod.package_area_for(chips)  # once: the power model's leakage and the package columns use it
    each = evaluate_each(chips, [wl for wl, _ in pairs], breakdown=breakdown, tiles=tiles, tiles_for=tiles_for,
                         fused_attention=fused_attention, weights_in_rom=weights_in_rom, rom_bandwidth=rom_bandwidth,
                         rom_energy_per_byte=rom_energy_per_byte, package=pa)
    per = [(wl.name, w / total_w, wm) for (wl, w), wm in zip(pairs, each)]
    m: dict[str, np.ndarray] = {}
    if len(per) == 1:
        m = {k: np.asarray(v) for k, v in per[0][2].columns.items()}
        m["fits"] = np.asarray(m["fits"], dtype=float)
    else:
        for key in per[0][2].columns:
            vals = np.stack([np.asarray(wm.columns[key], dtype=float) for _, _, wm in per])
            if key in WORST:
                m[key] = WORST[key](vals, axis=0)
            elif key in ("bound_code", "allreduce_algorithm"):  # codes: the heaviest workload's
                m[key] = per[int(np.argmax([w for _, w, _ in per]))][2].columns[key]
            else:
                weights = np.array([w for _, w, _ in per])[:, None]
                with np.errstate(invalid="ignore"):
                    m[key] = np.nansum(vals * weights, axis=0) if not np.all(np.isnan(vals)) else vals[0]
    m["fits"] = m["fits"] > 0.5
    for key in ("tdp_estimated", "memory_throttled"):
        m[key] = np.asarray(m[key], dtype=float) > 0.5
    process, memory = area_mod.process_and_memory(chips)
    package = dict(pa.columns())
    package.update(cost_mod.chip_cost(chips, pa, process=process, memory=memory).columns())
    n_sys = chips.get("system.chips", 1.0)
    if np.any(n_sys != 1):  # a system of chips: its silicon and cost add up
        package["total_silicon_area_mm2"] = package["total_silicon_area_mm2"] * n_sys
        package["chip_cost_usd"] = package["chip_cost_usd"] * n_sys
    n_part = chips.get("system.partitions", 1.0)
    if np.any(n_part != 1):  # one logical device of a partitioned package: its share of the cost
        package["chip_cost_usd"] = package["chip_cost_usd"] / n_part
    # (the whole package draws every partition's power)
    package["power_density_w_per_mm2"] = m["peak_power_w"] * n_part / np.maximum(pa.total_silicon_area_mm2, 1e-9)
    package["local_buffer_bytes"] = chips.get("local_buffer", 0.0) + 0.0
    # the memory interface the design has (the system's: bandwidth adds up over chips, seed 004 §4.7.2)
    package["memory_bandwidth_bytes_per_s"] = chips.memory_bandwidth * n_sys
    m.update(package)
    return DesignMetrics(m, tuple(per), chips.name_sequence(), tuple(package))


def evaluate_each(chips: Chips, workloads, *, breakdown: bool = False, tiles=None, tiles_for=None,
                  fused_attention: bool = True, weights_in_rom: bool = False, rom_bandwidth=np.inf,
                  rom_energy_per_byte=0.0, package=None) -> tuple[WorkloadMetrics, ...]:
    """Each workload's own metrics of the N design points ``chips`` (a list of workloads, not a mix), the chip's
    package (``package``, computed when None) and the chip's values every workload reads
    (dse.model.evaluator.chip_values) computed once for all of them; the options as :func:`evaluate_design`'s."""
    if tiles is not None and tiles_for is not None:
        raise ValueError("give tiles or tiles_for, not both")
    pa = area_mod.package_area_for(chips) if package is None else package
    values = chip_values(chips, pa)
    return tuple(evaluate_workload(chips, wl, tiles=tiles if tiles_for is None else tiles_for(chips, wl),
                                   breakdown=breakdown, fused_attention=fused_attention,
                                   weights_in_rom=weights_in_rom, rom_bandwidth=rom_bandwidth,
                                   rom_energy_per_byte=rom_energy_per_byte, package=pa, chip_columns=values)
                 for wl in workloads)


def evaluate(chips: Chips, workloads, *, breakdown: bool = False, **options) -> pd.DataFrame:
    """The metrics table: one row per design point and workload (see :meth:`DesignMetrics.frame`).

    With ``breakdown=True`` the per-operator table is attached as ``df.attrs['operators']``.
    """
    return evaluate_design(chips, workloads, breakdown=breakdown, **options).frame()


def evaluate_specs(specs: Sequence, workloads, **options) -> DesignMetrics:
    """:func:`evaluate_design` of chip specs (catalog chips, chip files) as design points."""
    return evaluate_design(Chips.from_specs(list(specs)), workloads, **options)


