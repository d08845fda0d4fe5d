"""The cache of a study's CP-SAT tiles (``solver.tiles: cpsat``): per operator and design point, solved once
per distinct tile problem. What determines an answer, and so the two cache levels, is in :mod:`dse.study.tiles`
(the decision, the budget check and the report of what the tiles changed); the evaluation of a batch
(:func:`dse.study.problem.evaluate_points`) asks :func:`study_cache` for each workload's tiles.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from dse.errors import InfeasibleError, SpecError
from dse.model import area as area_mod
from dse.model.evaluator import default_tiles, op_table
from dse.model.power import ClockLaw
from dse.solvers.cpsat_common import DETERMINISTIC_LIMIT
from dse.solvers.cpsat_tiles import solve_tiles
from dse.solvers.tile_data import tile_data
from dse.spec.study import system_problem

__all__ = ["TileCache", "study_cache", "evaluation_tag", "op_key", "data_key"]


def op_key(op):
    """The operator as the tile problem sees it: its shape, batch and formats, not its name or count."""
    return dataclasses.replace(op, name="", count=1)


def _value(v):
    if isinstance(v, ClockLaw):
        return ("law",) + tuple(float(np.asarray(x, dtype=float)) for x in (v.d, v.v_min, v.v_nom, v.v_th,
                                                                             v.scaling))
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    return v


def data_key(d) -> tuple:
    """The tile data (:class:`dse.solvers.tile_data.TileData`) as a hashable tuple, without the operator."""
    return tuple((f.name, _value(getattr(d, f.name))) for f in dataclasses.fields(d) if f.name != "op")


def _row_keys(chips) -> list[bytes]:
    """One key per design point: every chip array's value (bytes, so NaN equals NaN), formats, node, memory."""
    names = sorted(chips.arrays)
    M = np.column_stack([np.asarray(chips.arrays[k], dtype=float) for k in names])
    head = repr((tuple(names), tuple(chips.formats), area_mod.process_and_memory(chips),
                 tuple(s.name for s in chips.specs) if chips.specs else None)).encode()
    if chips.specs:  # points built from specs: each its own node and memory
        return [head + M[i].tobytes() + repr((chips.specs[i].process,)).encode() for i in range(chips.n)]
    return [head + M[i].tobytes() for i in range(chips.n)]


@dataclass
class TileCache:
    """CP-SAT tiles per (operator, design point), solved once per distinct tile problem (module doc).

    ``stats``: lookups, ``row_hits`` (level 1), ``data_hits`` (level 2), ``solves``, ``no_fit`` (operators
    left on the default tiles because no tile fits), ``proven`` / ``not_proven`` (solve statuses),
    ``solve_cpu_s``, ``data_s``, ``deterministic_s`` (CP-SAT's load-independent work).
    """

    seed: int = 0
    deterministic_limit: float = DETERMINISTIC_LIMIT
    stats: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self._rows: dict = {}
        self._data: dict = {}

    def choice(self, op, chip1, row: bytes):
        """The :class:`~dse.solvers.tile_data.TileChoice` of ``op`` on the one-point ``chip1`` (None: no tile
        fits); ``row`` its level-1 key."""
        self.stats["lookups"] += 1
        k1 = (op_key(op), row)
        if k1 in self._rows:
            self.stats["row_hits"] += 1
            return self._rows[k1]
        t0 = time.process_time()
        try:
            d = tile_data(op_key(op), chip1)
        except InfeasibleError:
            d = None
        self.stats["data_s"] += time.process_time() - t0
        k2 = (op_key(op), data_key(d)) if d is not None else None
        if k2 is not None and k2 in self._data:
            self.stats["data_hits"] += 1
            c = self._data[k2]
        else:
            try:
                c = solve_tiles(op_key(op), chip1, deterministic_limit=self.deterministic_limit, seed=self.seed)
                self.stats["solves"] += 1
                self.stats["proven" if c.status == "OPTIMAL" else "not_proven"] += 1
                self.stats["solve_cpu_s"] += c.cpu_time_s
                self.stats["deterministic_s"] += float(c.info.get("deterministic_time", 0.0))
            except InfeasibleError:
                c = None
            if k2 is not None:
                self._data[k2] = c
        if c is None:
            self.stats["no_fit"] += 1
        self._rows[k1] = c
        return c

    def workload_tiles(self, chips, workload):
        """(T_M, T_N, T_K, split-K) arrays (N, O) for ``evaluate_design(..., tiles_for=...)``: the CP-SAT tiles of
        every GEMM-like operator of every point, the evaluator's default tiles elsewhere; None without GEMMs."""
        cols = [j for j, op in enumerate(workload.ops) if op.m > 0 and op.n > 0 and op.k > 0]
        if not cols:
            return None
        if np.any(chips.get("system.chips", 1.0) != 1):
            raise SpecError(system_problem())
        out = [np.array(x, dtype=float) for x in default_tiles(chips, op_table(workload))]
        rows = _row_keys(chips)
        for i in range(chips.n):
            one = None
            for j in cols:
                k1 = (op_key(workload.ops[j]), rows[i])
                if k1 not in self._rows and one is None:
                    one = chips.take([i])
                c = self.choice(workload.ops[j], one, rows[i])
                if c is not None:
                    for arr, v in zip(out, c.tiles):
                        arr[i, j] = v
        return tuple(out)

    def snapshot(self) -> dict:
        return dict(self.stats)


def evaluation_tag(settings) -> dict:
    """What a study's stored values depend on beyond its names, for the storage to compare on resume
    (dse.solvers.optuna_search EVALUATION_KEY): ``{'tiles': 'cpsat'}`` on CP-SAT tiles, else nothing (the
    evaluator's default tiles, as every study had before solver.tiles was read)."""
    return {"tiles": "cpsat"} if getattr(settings, "tiles", "heuristic") == "cpsat" else {}


_CACHES: dict = {}


def study_cache(spec) -> TileCache:
    """The process's cache for the study's seed (shared by every batch and by the results table)."""
    key = int(spec.solver.seed)
    if key not in _CACHES:
        _CACHES[key] = TileCache(seed=key)
    return _CACHES[key]


