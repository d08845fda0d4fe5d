"""Exact tile shapes of one GEMM-like operator on one chip (OR-Tools CP-SAT), and the brute force that checks them.

The question (seed 004 §4.2.1, §4.3.2, §4.4.2): which output tile T_M x T_N,
reduction step T_K, number of input slots S and split-K s minimize the
operator's time, and among the fastest, its off-chip traffic?

Domain (every quantity an integer):

    T_M = m_i q_m, T_N = n_i q_n, T_K = k_i q_k   multiples of the matrix instruction m_i x n_i x k_i,
                                                  q_m <= ceil(M / m_i), q_n <= ceil(N / n_i), q_k <= ceil(K / k_i)
    S in {2, 3, 4}                                input slots (see "Slots" below)
    1 <= s <= min(units, ceil(K / T_K))           split-K: every slice gets a T_K step; more slices than
                                                  units never shortens a wave (below) and only adds partials
    buffer    S (T_M T_K e_a + T_K T_N e_b) + 4 T_M T_N <= local_buffer            (seed 004 §4.3.2)
              or, on a chip with a separate accumulator store (TPU, TMEM, PSUM, L0C):
              S (T_M T_K e_a + T_K T_N e_b) <= local_buffer and 4 T_M T_N <= accumulator
    registers 4 T_M T_N <= register_file when the chip states one and has no accumulator store
              (the FP32 accumulator tile is register-resident on GPUs: wgmma / MFMA)

Time: exactly the evaluator's per-operator device time for these tiles (dse.model.evaluator.evaluate_arrays, one
count; kernel launches overlap device time at the step level, independently of the tiles, so they are not
part of it):

    c_M = ceil(M / T_M), c_N = ceil(N / T_N)           (integer division constraints)
    work = c_M c_N batch s, waves = ceil(work / U)      (U = dies x units; wave quantization)
    t_matrix = F_pad waves / (r_unit work) x rho        (= F_pad / (rate x wave efficiency) / clock ratio)
    t_vector = t_vector(peak clock) x rho
    t_memory = (A r_A + B r_B + C + [partials > L2] P (s - 1)) / bandwidth
               r_A = min(c_N, ceil(N / t_2)) when A does not fit L2, else 1 (L2-panel re-reads; same for B)
    t_l2     = (A ceil(c_N / b) + B ceil(c_M / a) + C + P (s - 1)) / L2 bandwidth x rho, for the multicast
               cluster shape a x b (a b <= multicast) with the fewest bytes (dse.model.hierarchy)
    t_local  = waves (K / s) (T_M ceil(T_N / R_N) e_A + T_N ceil(T_M / R_M) e_B) / a unit's local bandwidth x rho
               (the matrix unit's reads per register tile R_M x R_N, wave by wave)
    t_op     = max(t_matrix, t_vector, t_memory, t_l2, t_local)
    rho      = 1 / clock ratio, the operator's own power ceiling (seed 004 §4.1.3): at the peak clock the
               compute units draw p_comp = E_compute / busy_c, busy_c = max(t_c1, t_vector, t_memory) with
               t_c1 = F_pad / (rate x compute efficiency) (no wave loss), and memory p_mem = E_mem / t_busy1,
               t_busy1 = max(t_matrix, t_vector, t_memory) at the peak clock; with u = p_comp / (TDP -
               static - p_mem), rho = min(max(1, u)^(1/3), 1 / MIN_CLOCK_RATIO) (u^1 at fixed voltage; no
               power left: the floor). E_compute counts FLOPs, vector work, local-buffer bytes (grow as tiles
               shrink) and L2 requests (grow with re-reads and split-K partial sums); E_mem the off-chip bytes.
               The operator's clock depends on its own tiles only, so the optimum per operator is the
               workload's optimum (:func:`solve_workload_tiles`).

Formulation (CP-SAT; data -> model -> variables -> constraints -> objective -> solve -> extract), one step
per module: data :mod:`dse.solvers.tile_data`, model :mod:`dse.solvers.tile_model`, search and extract
here, the brute-force oracle :mod:`dse.solvers.tile_candidates`:

* data: :func:`tile_data` reads every constant off the evaluator's op table and chip arrays (padded FLOPs
  and vector time from one evaluator call, so padding rules stay the evaluator's) and computes the
  tile-level ones (L2 panels, re-read caps, split-K partial sums, the Little's-law bandwidth, working sets)
  with the evaluator's own functions (dse.model.tiling, dse.model.links, dse.model.power);
* ceilings by ``add_division_equality`` (ceil(x / y) = (x + y - 1) // y), backed by the redundant products
  x <= c y <= x + y - 1; products by ``add_multiplication_equality`` (c_M c_N, tiles x s, time x work,
  slots x slot bytes, T_M T_K, ...); the L2 re-read counts by ``add_min_equality``; the partial-sum switch
  by a reified literal;
* t_op >= each resource term with products kept on the left, so no quotient is rounded:
  ``time x work >= C waves`` (matrix), ``time >= TV`` (vector), ``BW_q time >= bytes`` (memory);
* integer units: time in q = (the op's lower-bound time) / 2^24, bytes x 2^j (exact: element sizes are
  multiples of 1/32 byte), power in 2^-24 of TDP - static; :func:`to_int` does every float -> int
  conversion, rounding each constant the way that keeps the model's time a lower bound of the true time
  (exact to ~1e-7 otherwise);
* the power ceiling (non-linear: a cube root of a ratio of ratios) is handled by relaxation, verification and
  bands, not by a product formulation (measured: seconds per solve). The model built in is the relaxation
  rho = 1: a lower bound of every tiling's time, exact where the clock does not throttle. Phase 1 solves it
  and evaluates its optimum; unthrottled, that is the optimum (one solve: the catalog chips, almost always).
  Otherwise (only where the power data say a tiling can throttle) the model gets the integer p_comp =
  floor(energy / busy) and room = max(0, P - floor(P_mem,max t_memory / t_busy)) (divisions and maxima of
  the model's own variables, each rounded so that u = p_comp / room is a lower bound of the evaluator's
  ratio), and the tilings are searched in power bands lo room <= 2^F p_comp <= hi room: under an
  enforcement literal switched on by an assumption, a band carries time >= rho(lo) x the matrix and vector
  times at the peak clock. A band's solution is evaluated with the evaluator, its class recorded and
  forbidden (``add_forbidden_assignments``), and the band split at its u (and bisected in u while its bound
  is looser than BAND_RTOL), until every band is infeasible or its solution meets the band's bound; bands
  above the u at which even perfect waves could not beat the best time are left out. Every class is
  evaluated or proven no faster, so the answer is the evaluator's optimum (verified, not modelled);
* the cheapest tile of a class (c_M, c_N, s) (smallest T_M, T_N with those counts) is never slower and
  never moves more bytes than the others (same waves, bytes and memory power, the least local-buffer energy
  and so the highest clock), so candidates are evaluated at it;
* lexicographic objective by three phases on one model: minimize time; then cap time at the fastest
  x (1 + TIME_RTOL) and minimize bytes (a solution the evaluator finds throttled above the cap splits its
  band the same way); then, with bytes capped at the least too, minimize the tile-dependent energy
  (local-buffer bytes, L2 requests, partial sums: a linear lower bound in the model, each answer checked
  with the evaluator, :func:`_least_energy`). Without it, memory-bound (decode)
  operators, on which many tilings tie on time and bytes, got an arbitrary tie, up to ~20% more energy
  than the least (a Qwen3-8B decode study, issue 18). 1 worker and a fixed seed, limited in deterministic time (load-independent: the
  same answer on an idle or a loaded machine; a wall-clock limit is only an outer safety net whose hit is
  an error, never another answer, dse.solvers.cpsat_common); each solve tries CP search without probing and without the LP relaxation
  first, then with probing, then with the LP (:data:`SOLVE_PLAN`). OPTIMAL and FEASIBLE are accepted; any
  other status is reported by name in a SolverError. ``status`` 'OPTIMAL' means every solve was proven.

A chip with a memory-side cache (``memory_side_cache``: the MI300X / MI355X Infinity Cache) or with L2s private to
each of several dies (``l2_scope: die``) is answered by the brute force below (``info['method']`` 'enumeration',
``info['reason']``): the model has neither level (dse.solvers.tile_data.TileData.beyond_model), and enumerating the
classes through the evaluator is exact (~10-70 ms per GEMM on MI355X).

Slots: the evaluator's ``max(t_matrix, t_vector, t_memory)`` assumes loads overlap compute, which needs at
least a second input slot (double buffering, seed 004 §4.4.2: with one slot, load and compute run in series,
320 vs 192 + 4 x 128 ticks). The evaluator has no tile-level latency, so slots are a buffer-feasibility
decision: S >= 2 is required; more slots only cost buffer, and the answer reports the fewest (2).
Likewise T_K changes neither time nor traffic in the evaluator; the answer reports the largest T_K that
fits the buffer and keeps s <= ceil(K / T_K) (fewest k-steps).

:func:`brute_force_tiles` enumerates the same domain with numpy and calls ``evaluate_arrays`` on the whole
candidate set as a batch of identical chips: it is the test oracle.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from dse.errors import InfeasibleError, SolverError
from dse.hardware import Chips
from dse.model.evaluator import default_tiles, evaluate_workload, op_table
from dse.solvers.cpsat_common import (DETERMINISTIC_LIMIT, WALL_LIMIT_S, new_solver, status_name, to_int,
                                      wall_limit_error)
from dse.solvers.tile_candidates import brute_force_tiles, tile_candidates
from dse.solvers.tile_data import (BYTES_RTOL, MAX_SOLVES, RHO_FLOOR, SLOTS, TIME_RTOL, TileChoice, TileData, as_chips, canonical_tk,
                                   class_min, evaluate_tiles, infeasible_message, tile_data, working_set)
from dse.solvers.tile_model import NO_ROOM, TileModel
from dse.workload import Op, Workload

__all__ = [
    "TileChoice",
    "TileData",
    "tile_data",
    "solve_tiles",
    "solve_workload_tiles",
    "WorkloadTiles",
    "brute_force_tiles",
    "tile_candidates",
    "evaluate_tiles",
    "as_chips",
    "to_int",
    "status_name",
    "SLOTS",
    "TIME_RTOL",
    "SOLVE_PLAN",
]

#: CP-SAT attempts per solve: (linearization level, probing level, deterministic s); an attempt ends at its
#: deterministic-time budget (load-independent, so the search path does not depend on the machine's load),
#: the last gets what is left of the search's deterministic limit. Level 0 without probing proves most
#: instances in a few ms; the power bands' infeasibility proofs need probing (level 0) or the LP bound
#: (level 1) on some, and each alone has seconds-long tails on others (measured on the 200 catalog GEMMs of
#: the tests and on 150 GEMMs on chips whose TDP throttles most tilings: CPU p95 ~17 ms and ~130 ms, max
#: ~60 ms and ~400 ms; linearization 0 with probing first: p95 ~215 ms, max 1.7 s on the latter).
SOLVE_PLAN = ((0, 0, 0.01), (0, 2, 0.02), (1, 2, None))
#: The attempts of a phase-3 solve (minimum energy): its objective is linear, and the LP bound with probing
#: proves it fastest (measured on the 200 GEMMs of the tests: 29 s CPU in all against 41 s with SOLVE_PLAN,
#: one solve 1.7 s -> 0.05 s).
ENERGY_PLAN = ((1, 2, None),)


# ------------------------------------------------------------------ the search


class _LimitReached(SolverError):
    """A solve ran out of its limit before CP-SAT found a solution (status UNKNOWN)."""


class _Search:
    """Solves one operator's model and checks candidates with the evaluator (see :func:`solve_tiles`)."""

    def __init__(self, tmod: TileModel, op: Op, chips: Chips, deterministic_limit: float, time_limit_s: float,
                 seed: int, start: float):
        self.t, self.op, self.chips = tmod, op, chips
        self.det_limit, self.limit, self.seed, self.start = deterministic_limit, time_limit_s, seed, start
        self.det_used = 0.0  # deterministic seconds of every attempt so far (the same on any machine)
        self.solves = 0
        self.truncated = False  # MAX_SOLVES ended the search
        self.statuses: list[str] = []
        self.times: list[float] = []
        self.cap = None  # literal of the current time cap (assumed while it is set)
        self.bytes_cap = None  # literal of the current bytes cap (assumed while it is set)
        self.energy_cap = None  # literal of the current energy cap (phase 3; assumed while it is set)
        self.cap_units = None
        # class (c_M, c_N, split) -> the evaluator on its cheapest tile: (time, traffic, record)
        self.cost: dict[tuple[int, int, int], tuple[float, float, dict]] = {}

    def set_cap(self, units: int | None):
        """Search only tilings of model time <= ``units`` (None: no cap) from now on, until changed."""
        if units is None:
            self.cap, self.cap_units = None, None
            return
        model, v = self.t.model, self.t.v
        self.cap = model.new_bool_var(f"time_cap_{self.solves}[{self.op.name}]")
        model.add(v["time"] <= units).only_enforce_if(self.cap)
        self.cap_units = units

    def solve(self, band: tuple[int, int | None] | None = None, plan=SOLVE_PLAN):
        """Solve the model (with one power band on); the solver on OPTIMAL / FEASIBLE, None on INFEASIBLE.

        Tries :data:`SOLVE_PLAN` in order: CP search without the LP relaxation first (fast on almost every
        instance), then with it (which some instances need to bound the objective), each later attempt
        hinted with the best solution so far; the last attempt gets what is left of the deterministic limit
        (and of the wall-clock safety net).
        """
        model, v = self.t.model, self.t.v
        model.clear_assumptions()
        lits = [x for x in (self.cap, self.bytes_cap, self.energy_cap) if x is not None]
        if band is not None:
            lits.append(self.t.band(*band)[0])
        if lits:
            model.add_assumptions(lits)
        model.clear_hints()
        name, solver, wall = "UNKNOWN", None, 0.0
        for i, (level, probing, det_s) in enumerate(plan):
            det_left = self.det_limit - self.det_used
            wall_left = self.limit - (time.perf_counter() - self.start)
            if det_left <= 0:
                break
            if wall_left <= 0:
                raise self.wall_error()
            last = i == len(plan) - 1
            budget = det_left if last or det_s is None else min(det_left, det_s)
            attempt = new_solver(deterministic_s=budget, wall_s=wall_left, seed=self.seed)
            attempt.parameters.linearization_level = level
            attempt.parameters.cp_model_probing_level = probing
            status = status_name(attempt.solve(model))
            wall += attempt.wall_time
            self.det_used += attempt.deterministic_time
            if status not in ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID") and self.wall_out():
                raise self.wall_error()  # cut short by the wall clock: not an answer (cpsat_common)
            if status in ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID"):
                name, solver = status, attempt
                break
            if status == "FEASIBLE" and (solver is None or attempt.objective_value < solver.objective_value):
                name, solver = status, attempt
                model.clear_hints()  # the next attempt starts from the best solution so far
                for var in (v["q_m"], v["q_n"], v["q_k"], v["slots"], v["split"]):
                    model.add_hint(var, solver.value(var))
        self.times.append(wall)
        self.solves += 1
        self.statuses.append(name)
        if name in ("OPTIMAL", "FEASIBLE"):
            return solver
        if name == "INFEASIBLE":
            return None
        if name == "UNKNOWN":
            raise _LimitReached(f"tiles of {self.op.name}: the deterministic time limit of {self.det_limit} (CP-SAT "
                                f"deterministic seconds) ran out after {self.solves} solves, before CP-SAT found a "
                                f"solution (status UNKNOWN)")
        detail = f": {model.validate()}" if name == "MODEL_INVALID" else ""
        raise SolverError(f"tiles of {self.op.name}: CP-SAT returned {name}{detail}")

    def wall_out(self) -> bool:
        return time.perf_counter() - self.start >= self.limit

    def wall_error(self) -> SolverError:
        """Not a _LimitReached: the search must not go on with the best found so far (cpsat_common)."""
        return wall_limit_error(f"tiles of {self.op.name} (after {self.solves} solves)", self.limit, self.det_limit)

    def cls(self, solver) -> tuple[int, int, int]:
        v = self.t.v
        return (int(solver.value(v["c_m"])), int(solver.value(v["c_n"])), int(solver.value(v["split"])))

    def record(self, cls) -> tuple[float, float]:
        """Evaluate a class's cheapest tile (canonical T_K, 2 slots) once; forbid the class from now on.

        Every later solve looks for something else: the class's best is known, and no member of a class is
        faster or moves fewer bytes than its cheapest tile (same waves, bytes and memory power; the least
        local-buffer energy, hence the highest clock).
        """
        if cls not in self.cost:
            d = self.t.d
            tm, tn = class_min(d, cls[0], cls[1])
            tk = canonical_tk(d, tm, tn, cls[2], SLOTS[0])
            r = evaluate_tiles(self.op, self.chips, tm, tn, tk, cls[2])
            rec = {"tm": tm, "tn": tn, "tk": tk, "time_s": float(r["time_s"][0]),
                   "traffic_bytes": float(r["traffic_bytes"][0]), "energy_j": float(r["energy_j"][0]),
                   "clock_ratio": float(r["clock_ratio"][0])}
            self.cost[cls] = (rec["time_s"], rec["traffic_bytes"], rec)
            v = self.t.v
            self.t.model.add_forbidden_assignments([v["c_m"], v["c_n"], v["split"]], [cls])
        return self.cost[cls][:2]

    def check(self, cls, exact: bool):
        """The evaluator against the model for a class just solved: never below the relaxation's time (clock
        ratio 1), and equal to it where the model is exact (``exact``: a solve without a band, and the evaluator
        reports no throttling). A failure means a formula of dse.model.evaluator changed under the tile model.

        (A band's tighter bound holds for the solver's tile, not necessarily for the class's cheapest tile,
        which draws less power; so the relaxation is the bound checked.)
        """
        t_c, _, rec = self.cost[cls]
        units = self.t.time_units(*cls)
        q = self.t.q
        low = t_c < (units - 1) * q * (1 - 1e-9)
        high = exact and rec["clock_ratio"] == 1.0 and t_c > (units + 1) * q * (1 + TIME_RTOL)
        if low or high:
            raise SolverError(f"tiles of {self.op.name}: the evaluator's time {t_c:.9g} s for class {cls} (c_M, c_N, "
                              f"split) disagrees with the tile model's {units * q:.9g} s at the peak clock; did a "
                              f"formula of dse.model.evaluator change?")

    def meets(self, solver, t_c: float) -> bool:
        """The solution's evaluated time is within TIME_RTOL of the solve's proven bound: nothing the solve
        searched is faster."""
        return t_c <= (solver.best_objective_bound - 1) * self.t.q * (1 + TIME_RTOL)

    def budget(self, start: int = 0):
        """End a phase (the best tiling so far stands, status FEASIBLE) after MAX_SOLVES solves from ``start``."""
        if self.solves - start >= MAX_SOLVES:
            self.truncated = True
            raise _LimitReached(f"tiles of {self.op.name}: {MAX_SOLVES} solves")


def _least_energy(S: _Search, final, limit: float, run: bool):
    """Phase 3: among the classes within TIME_RTOL of the fastest and with the least off-chip bytes, the one of
    least energy (the evaluator's); ``(class, info)``.

    Decode-like operators are memory-bound: many tilings take the same time and move the same bytes, but
    smaller tiles cost local-buffer bytes ((T_M + T_N) c_M c_N) and L2 requests (A once per c_N, B once per
    c_M, partial sums per extra split), which the evaluator charges as energy. The model gets a linear lower
    bound of that tile-dependent energy, ``proxy = k_loc (L_M + L_N) + k_a c_N + k_b c_M + k_s (s - 1)`` with
    L_M >= M c_N, L_M >= m_i c_M c_N (c_M T_M >= max(M, m_i c_M); L_N alike; coefficients rounded down), and is asked, with time and bytes capped, for a class whose
    proxy is below the best class's exact tile-dependent energy; each answer is evaluated and forbidden, until
    none is left (INFEASIBLE: no class can have less energy) or MAX_SOLVES (``info['truncated']``). The cap
    is exact: an unthrottled tiling's energy is a constant C (within TIME_RTOL's static energy) plus exactly
    that tile-dependent part; a throttled one draws the TDP over its time, so at a tied time it has the
    energy of every other throttled tie, and an unthrottled X has less energy than a throttled best F only
    if C + var_X < TDP t < C + var_F (F draws more than the TDP at the peak clock): var_X < var_F again.
    Skipped (``run`` False) after a truncated search, whose answer the brute force gave.
    """
    info = {"phase": "skipped (a truncated search)" if not run else "searched", "solves": 0, "truncated": False}
    # the ties of the fastest class evaluated (the brute force after a truncated search may have found one
    # faster than phase 1's best, to which ``limit`` was set)
    limit = min(limit, min(t_c for t_c, _, _ in S.cost.values()) * (1 + TIME_RTOL))
    b_lim = S.cost[final][1] * (1 + BYTES_RTOL)
    same = [final] + [c for c, (t_c, b_c, _) in S.cost.items() if t_c <= limit and b_c <= b_lim and c != final]
    final = min(same, key=lambda c: (S.cost[c][2]["energy_j"], S.cost[c][1], S.cost[c][0]))
    d, tm_ = S.t.d, S.t
    e_hi = (d.e_local * (d.m * d.qn_max + d.n * d.qm_max) + d.e_a * d.qn_max + d.e_b * d.qm_max
            + d.e_split * (d.split_max - 1))
    if not run or not e_hi > 0:
        return final, info
    model, v = tm_.model, tm_.v
    # local-buffer bytes ~ (T_M + T_N) c_M c_N = c_N (c_M T_M) + c_M (c_N T_N), with c_M T_M >= max(M, m_i c_M)
    # (a tile is at least one instruction): linear in c_N, c_M and the model's tiles = c_M c_N
    hi_m, hi_n = max(d.m, d.im * d.qm_max) * d.qn_max, max(d.n, d.inn * d.qn_max) * d.qm_max
    loc_m = model.new_int_var(0, hi_m, f"local_m[{S.op.name}]")
    loc_n = model.new_int_var(0, hi_n, f"local_n[{S.op.name}]")
    model.add(loc_m >= d.m * v["c_n"])
    model.add(loc_m >= d.im * v["tiles"])
    model.add(loc_n >= d.n * v["c_m"])
    model.add(loc_n >= d.inn * v["tiles"])
    e_hi = d.e_local * (hi_m + hi_n) + d.e_a * d.qn_max + d.e_b * d.qm_max + d.e_split * (d.split_max - 1)
    unit = e_hi / 2.0**40
    # (L2 requests: at least ceil(c / multicast) panels of each operand whatever the cluster's shape)
    k_loc, k_a, k_b, k_s = (to_int(x, unit, "down") for x in (d.e_local, d.e_a / d.mcast, d.e_b / d.mcast,
                                                              d.e_split))
    proxy = model.new_int_var(0, 2**41, f"energy_proxy[{S.op.name}]")
    model.add(proxy == k_loc * (loc_m + loc_n) + k_a * v["c_n"] + k_b * v["c_m"] + k_s * (v["split"] - 1))
    S.bytes_cap = model.new_bool_var(f"bytes_best[{S.op.name}]")
    model.add(v["bytes"] <= tm_.bytes_of(*final)).only_enforce_if(S.bytes_cap)
    model.minimize(proxy)

    def tile_energy(c) -> float:  # the exact tile-dependent energy of a class's cheapest tile (J)
        return d.tile_energy(*c)

    start = S.solves
    try:
        while True:
            if S.solves - start >= MAX_SOLVES:
                info["truncated"] = True
                break
            S.energy_cap = model.new_bool_var(f"energy_cap_{S.solves}[{S.op.name}]")
            model.add(proxy <= to_int(tile_energy(final), unit, "up") - 1).only_enforce_if(S.energy_cap)
            solver = S.solve(plan=ENERGY_PLAN)
            if solver is None:  # no class left whose energy can be lower
                break
            cls = S.cls(solver)
            t_c, b_c = S.record(cls)
            S.check(cls, exact=True)
            if t_c <= limit and b_c <= b_lim and S.cost[cls][2]["energy_j"] < S.cost[final][2]["energy_j"]:
                final = cls
    except _LimitReached:
        info["truncated"] = True
    finally:
        S.energy_cap = S.bytes_cap = None
    info["solves"] = S.solves - start
    return final, info


def solve_tiles(op: Op, chip, *, deterministic_limit: float = DETERMINISTIC_LIMIT, time_limit_s: float = WALL_LIMIT_S,
                seed: int = 0) -> TileChoice:
    """Tiles of ``op`` on ``chip`` that minimize the evaluator's time, then off-chip traffic, then energy (CP-SAT).

    ``chip``: a catalog name, a ChipSpec or a one-point Chips. ``deterministic_limit`` bounds the work of all
    solves together in CP-SAT's deterministic seconds (the limit that applies: the same answer on any
    machine load); ``time_limit_s`` is the wall-clock safety net around them (dse.solvers.cpsat_common).
    Raises InfeasibleError when no tile fits (the message names the limit), and
    SolverError on a CP-SAT status other than OPTIMAL / FEASIBLE / INFEASIBLE, or when the model and the
    evaluator disagree (a formula changed on one side).

    Phase 1 (least time) solves the relaxation (clock ratio 1, a lower bound of every tiling's time) and
    evaluates its optimum; where that tiling does not throttle, it is the optimum (one solve, the common case).
    Otherwise the tilings are searched in power bands (see the module doc), each with its clock-ratio bound,
    for one strictly faster than the best so far: a band's solution is evaluated, recorded and forbidden, and
    the band split at its proxy ratio, until every band is infeasible or its solution meets its bound.

    Phase 2 (least traffic): with the model time capped at the fastest x (1 + TIME_RTOL), minimize off-chip
    bytes (each solve asks for strictly fewer bytes than the best tie so far); a solution that the evaluator
    finds slower than the cap (it throttles) splits its band the same way.

    Phase 3 (least energy, :func:`_least_energy`): with time and bytes capped at the best, minimize a linear
    lower bound of the tile-dependent energy (local-buffer bytes, L2 requests), each answer checked with the
    evaluator, until no class can have less energy (``info['energy']``).

    The deterministic limit reached after the first solution ends the search with the best tiling found
    (status FEASIBLE: the same on any machine); reached before it, it is a SolverError (status UNKNOWN). The
    wall-clock safety net stopping a solve that was not proven is always a SolverError, never another answer.
    """
    start, cpu0 = time.perf_counter(), time.process_time()
    chips = as_chips(chip)
    d = tile_data(op, chips)
    if d.beyond_model:
        # cache levels the tile model does not have (TileData.beyond_model): the evaluator enumerates the
        # domain's classes instead (exhaustive, so as exact as a proof)
        b = brute_force_tiles(op, chips)
        return replace(b, status="OPTIMAL", solve_time_s=time.perf_counter() - start,
                       cpu_time_s=time.process_time() - cpu0,
                       info={"method": "enumeration", "reason": d.beyond_model, "candidates": b.info["candidates"]})
    tm_ = TileModel(d)
    v, q, model = tm_.v, tm_.q, tm_.model
    S = _Search(tm_, op, chips, deterministic_limit, time_limit_s, seed, start)
    maybe = d.throttle == "maybe"

    def top(t_s: float) -> int | None:
        """Band edge above which rho > t_s / K: no tiling there is as fast as t_s (None: no such edge)."""
        r = t_s * (1 + 1e-9) / d.t_compute
        return None if r >= RHO_FLOOR else tm_.kappa_of(d.u_of_rho(r), "up")

    def clip(band, t_s: float):
        """The band without the tilings above :func:`top` of ``t_s``; None if empty."""
        lo, hi = band
        cap = top(t_s)
        if band == NO_ROOM:  # at the clock floor: rho = RHO_FLOOR >= t_s / K unless top is None
            return None if cap is not None and d.all_draw else band
        hi = cap if hi is None else (hi if cap is None else min(hi, cap))
        return None if hi is not None and hi < lo else (lo, hi)

    # ---- phase 1: the least time
    model.minimize(v["time"])
    solver = S.solve()
    if solver is None:
        raise InfeasibleError(infeasible_message(d))
    best_cls = S.cls(solver)
    bound_s = (solver.best_objective_bound - 1) * q  # the relaxation's: a lower bound of every tiling's time
    best_t = S.record(best_cls)[0]
    S.check(best_cls, exact=True)
    # from here on a solve that runs out of its limit ends the search: the best tiling found stands (FEASIBLE)
    try:
        if maybe and not S.meets(solver, best_t):  # the relaxation's optimum throttles: search the power bands
            capped, pending = None, tm_.cuts(0, None, tm_.kappa_at(solver), whole=True)
            while pending:
                S.budget()
                if capped != best_t:  # strictly faster than the best from now on
                    S.set_cap(to_int(best_t * (1 - TIME_RTOL), q, "down") + 1)
                    capped = best_t
                band = clip(pending.pop(), best_t)
                if band is None or (solver := S.solve(band)) is None:
                    continue
                cls = S.cls(solver)
                t_c = S.record(cls)[0]
                S.check(cls, exact=False)
                if t_c < best_t:
                    best_cls, best_t = cls, t_c
                if not S.meets(solver, t_c):  # else nothing in the band is faster than its solution
                    pending.extend(tm_.cuts(*band, tm_.kappa_at(solver)))
    except _LimitReached:
        pass
    S.set_cap(None)

    # ---- phase 2: the least off-chip traffic among tilings within TIME_RTOL of the fastest
    limit = best_t * (1 + TIME_RTOL)
    cap_units = to_int(limit, q, "down") + 1
    model.add(v["time"] <= cap_units)
    model.minimize(v["bytes"])
    ties = [c for c, (t_c, _, _) in S.cost.items() if t_c <= limit]
    best_b = min(S.cost[c][1] for c in ties)

    def fewer_bytes():  # under a literal (the latest cap is the tightest): phase 3 asks for the best bytes again
        S.bytes_cap = model.new_bool_var(f"bytes_cap_{S.solves}[{op.name}]")
        model.add(v["bytes"] <= to_int(best_b * tm_.sb, rounding="up") - 1).only_enforce_if(S.bytes_cap)

    fewer_bytes()
    pending, phase2 = [None], S.solves
    try:
        while pending:
            S.budget(phase2)
            band = pending.pop()
            if band is not None and (band := clip(band, limit)) is None:
                continue
            solver = S.solve(band)
            if solver is None:
                continue
            cls = S.cls(solver)
            t_c, b_c = S.record(cls)
            S.check(cls, exact=band is None)
            if t_c <= limit:  # a tie: ask for fewer bytes still
                ties.append(cls)
                if b_c < best_b:
                    best_b = b_c
                    fewer_bytes()
                pending.append(band)
            elif maybe:  # it throttles: split its band at it
                pending.extend(tm_.cuts(*(band or (0, None)), tm_.kappa_at(solver), whole=band is None))
            else:  # only rounding slack (the model is exact): the class is forbidden, solve again
                pending.append(band)
    except _LimitReached:
        pass
    final = min(ties, key=lambda c: (S.cost[c][1], S.cost[c][0]))
    if S.truncated:  # MAX_SOLVES ended a band search: the evaluator enumerates the domain (exact, vectorized)
        b = brute_force_tiles(op, chips)
        cls = (math.ceil(d.m / b.tm), math.ceil(d.n / b.tn), b.split_k)
        t_b, b_b = S.record(cls)
        t_f, b_f = S.cost[final][:2]
        if t_b < t_f * (1 - TIME_RTOL) or (t_b <= t_f * (1 + TIME_RTOL) and b_b < b_f):
            final = cls

    # ---- phase 3: the least energy among the fastest tilings with the least traffic
    final, energy = _least_energy(S, final, limit, not S.truncated)

    # ---- extract: the class's cheapest tile, as evaluated (2 slots, the largest T_K)
    rec = S.cost[final][2]
    # (a truncated search is finished by enumeration: as exact as a proof)
    status = "OPTIMAL" if all(s in ("OPTIMAL", "INFEASIBLE") for s in S.statuses) else "FEASIBLE"
    return TileChoice(
        op=op.name, tm=int(rec["tm"]), tn=int(rec["tn"]), tk=int(rec["tk"]), slots=SLOTS[0], split_k=int(final[2]),
        time_s=rec["time_s"], traffic_bytes=rec["traffic_bytes"], energy_j=rec["energy_j"], status=status,
        model_time_s=tm_.time_of(*final),
        solve_time_s=time.perf_counter() - start, cpu_time_s=time.process_time() - cpu0, clock_ratio=rec["clock_ratio"],
        working_set_bytes=float(working_set(d, rec["tm"], rec["tn"], rec["tk"], SLOTS[0])), solves=S.solves,
        info={"time_unit_s": q, "bound_s": bound_s, "truncated": S.truncated, "byte_scale": tm_.sb, "statuses": tuple(S.statuses),
              "deterministic_time": S.det_used,
              "classes_checked": len(S.cost), "energy": energy, "power_bands": len(tm_._bands), "solve_wall_s": tuple(S.times)},
    )


# ------------------------------------------------------------------ workloads


class WorkloadTiles(tuple):
    """(T_M, T_N, T_K, split), each a (1, O) float array: pass it as ``evaluate_arrays(..., tiles=...)``.

    ``choices`` maps each GEMM-like operator's name to its :class:`TileChoice`.
    """

    choices: dict[str, TileChoice]

    def __new__(cls, arrays, choices: dict[str, TileChoice]):
        obj = super().__new__(cls, tuple(arrays))
        obj.choices = choices
        return obj


def solve_workload_tiles(workload: Workload, chip, *, deterministic_limit: float = DETERMINISTIC_LIMIT,
                         time_limit_s: float = WALL_LIMIT_S, seed: int = 0) -> WorkloadTiles:
    """Solve every GEMM-like operator of ``workload``: tiles for ``evaluate_arrays(chips, workload, tiles=...)``.

    A row of tiles broadcasts over any number of identical design points; vector operators get the
    instruction tile and split 1 (the evaluator does not use tiles for them). Identical operators (same
    shapes and formats) are solved once. The result is the workload's optimum: the evaluator throttles each
    operator's clock by that operator's own power, and a step takes max(sum of device times, sum of kernel
    launches) + step overhead, whose launch side does not depend on the tiles; so the sum of the per-operator
    optima is the least device time, and no other tiles give a shorter step (never slower than the default
    tiles, in particular). Each ``choices[name].time_s`` is that operator's t_op in the workload -- except a fused
    attention block's QK and PV (issue 15 item 6): the block's three operators pipeline across resources with
    one clock (dse.model.evaluator._attention_overlap) and share its time; each of the two is solved alone, for
    its own time, and the block is never slower than the two alone plus the softmax (a joint choice of their
    tiles for the block's overlap is not searched). Where the block as a whole is faster on the evaluator's
    default tiles than on the two optima, it keeps the default tiles (:func:`_default_where_blocks_are_faster`):
    the workload is never slower than on the default tiles, its blocks included.
    """
    chips = as_chips(chip)
    g = lambda key: float(chips.get(key, 16.0)[0])  # noqa: E731
    im, inn, ik = g("matrix.instruction.m"), g("matrix.instruction.n"), g("matrix.instruction.k")
    O = len(workload.ops)
    out = [np.full((1, O), im), np.full((1, O), inn), np.full((1, O), ik), np.ones((1, O))]
    choices: dict[str, TileChoice] = {}
    cache: dict[Op, TileChoice] = {}
    for j, op in enumerate(workload.ops):
        if not (op.m > 0 and op.n > 0 and op.k > 0):
            continue
        key = replace(op, name="", count=1)
        if key not in cache:
            cache[key] = solve_tiles(op, chips, deterministic_limit=deterministic_limit, time_limit_s=time_limit_s,
                                     seed=seed)
        c = cache[key]
        choices[op.name] = c
        for arr, val in zip(out, c.tiles):
            arr[0, j] = val
    _default_where_blocks_are_faster(workload, chips, out, choices)
    return WorkloadTiles(out, choices)


def _default_where_blocks_are_faster(workload: Workload, chips: Chips, out: list, choices: dict) -> None:
    """A fused attention block whose three operators take less time in the workload on the evaluator's default
    tiles than on its QK's and PV's own optima gets the default tiles (``out`` and ``choices`` changed in place;
    each such choice's figures are its operator's alone on those tiles, ``info['attention_block']`` says why)."""
    ops = op_table(workload)
    if not ops.attn_groups:
        return
    solved = evaluate_workload(chips, workload, tiles=tuple(out), breakdown=True).operators.t_op[0]
    default_tiles_ = [np.asarray(x)[:1] for x in default_tiles(chips, ops)]
    default = evaluate_workload(chips, workload, tiles=tuple(default_tiles_), breakdown=True).operators.t_op[0]
    for cols in ops.attn_groups:
        cols = list(cols)
        if not default[cols].sum() < solved[cols].sum():
            continue
        for arr, d in zip(out, default_tiles_):
            arr[0, cols] = d[0, cols]
        for j in cols:
            op = workload.ops[j]
            if op.name not in choices:
                continue
            tm, tn, tk, split = (float(arr[0, j]) for arr in out)
            fig = evaluate_tiles(op, chips, tm, tn, tk, split)
            d = tile_data(op, chips)
            choices[op.name] = replace(
                choices[op.name], tm=int(tm), tn=int(tn), tk=int(tk), split_k=int(split),
                time_s=float(fig["time_s"][0]), traffic_bytes=float(fig["traffic_bytes"][0]),
                energy_j=float(fig["energy_j"][0]), clock_ratio=float(fig["clock_ratio"][0]),
                working_set_bytes=float(working_set(d, tm, tn, tk, SLOTS[0])),
                info={**choices[op.name].info, "attention_block": (
                    f"the default tiles: the fused block takes {default[cols].sum():.6g} s on them, "
                    f"{solved[cols].sum():.6g} s on each operator's optimum")})
