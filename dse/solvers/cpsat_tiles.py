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
    t_op     = max(t_matrix, t_vector, t_memory)
    rho      = 1 / clock ratio, the operator's own power ceiling (seed 004 §4.1.3): at the peak clock the
               compute units draw p_comp = E_compute / busy_c, busy_c = max(t_c1, t_vector, t_memory) with
               t_c1 = F_pad / (rate x compute efficiency) (no wave loss), and memory p_mem = E_mem / t_busy1,
               t_busy1 = max(t_matrix, t_vector, t_memory) at the peak clock; with u = p_comp / (TDP -
               static - p_mem), rho = min(max(1, u)^(1/3), 1 / MIN_CLOCK_RATIO) (u^1 at fixed voltage; no
               power left: the floor). E_compute counts FLOPs, vector work, local-buffer bytes (grow as tiles
               shrink) and L2 requests (grow with re-reads and split-K partial sums); E_mem the off-chip bytes.
               The operator's clock depends on its own tiles only, so the optimum per operator is the
               workload's optimum (:func:`solve_workload_tiles`).

Formulation (CP-SAT; data -> model -> variables -> constraints -> objective -> solve -> extract):

* data: :func:`tile_data` reads every constant off the evaluator's op table and chip arrays (padded FLOPs
  and vector time from one evaluator call, so padding rules stay the evaluator's);
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
* lexicographic objective by two phases on one model: minimize time; then cap time at the fastest
  x (1 + TIME_RTOL) and minimize bytes (a solution the evaluator finds throttled above the cap splits its
  band the same way). 1 worker, a time limit; each solve tries CP search without probing and without the
  LP relaxation first, then with probing, then with the LP (:data:`SOLVE_PLAN`). OPTIMAL and FEASIBLE are
  accepted; any other status is reported by name in a SolverError. ``status`` 'OPTIMAL' means every solve
  was proven.

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

import functools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from ortools.sat.python import cp_model

from dse.errors import InfeasibleError, SolverError, SpecError
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model.evaluator import MIN_CLOCK_RATIO, _format_rate, evaluate_workload, op_table
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
    "to_int",
    "status_name",
    "SLOTS",
    "TIME_RTOL",
]

#: Input slots the model may choose (see the module doc, "Slots").
SLOTS = (2, 3, 4)
#: Relative time difference below which two tilings count as equally fast (the traffic tie-break applies).
TIME_RTOL = 1e-6
#: The time unit is the op's lower-bound time / 2^TIME_BITS (model time within ~1e-7 of the evaluator's).
TIME_BITS = 24
#: Bytes in the memory constraint are scaled so that bandwidth x time-unit is >= 2^BW_BITS.
BW_BITS = 22
#: Smallest byte scale: element sizes are multiples of 1/32 byte (MX / NV block scales), so bytes x 32 are integers.
MIN_BYTE_SCALE = 32
#: CP-SAT attempts per solve: (linearization level, probing level, deterministic s, wall s); a slice ends at
#: its deterministic-time budget (load-independent, so the search path does not depend on the machine's load)
#: or its wall budget, whichever is first; the last gets the rest of the time limit. Level 0 without probing
#: proves most instances in a few ms; the power bands' infeasibility proofs need probing (level 0) or the LP
#: bound (level 1) on some, and each alone has seconds-long tails on others (measured on the 200 catalog GEMMs
#: of the tests and on 150 GEMMs on chips whose TDP throttles most tilings: CPU p95 ~17 ms and ~130 ms, max
#: ~60 ms and ~400 ms; linearization 0 with probing first: p95 ~215 ms, max 1.7 s on the latter).
SOLVE_PLAN = ((0, 0, 0.01, None), (0, 2, 0.02, None), (1, 2, None, None))
#: 1 / clock ratio at the lowest clock the evaluator models (dse.model.evaluator.MIN_CLOCK_RATIO).
RHO_FLOOR = 1.0 / MIN_CLOCK_RATIO
#: Bits of the compute-power variable at the power budget: p_comp = 2^P_BITS at TDP - static (see _TileModel).
P_BITS = 24
#: Fixed-point bits of the band edges: a band edge kappa is the ratio p_comp / room x 2^F_BITS.
F_BITS = 20
#: The band of tilings with no power left beside the memory's (room 0): the clock at its floor.
NO_ROOM = (-1, -1)
#: A power band is split at its geometric middle while its clock-ratio bounds differ by more than this.
BAND_RTOL = 1e-3
_INT_LIMIT = 2**62


# ------------------------------------------------------------------ helpers


def to_int(x: float, unit: float = 1.0, rounding: str = "nearest") -> int:
    """``x / unit`` as a Python int: the one float -> integer conversion of the CP-SAT models.

    ``rounding``: 'nearest', 'down' (floor) or 'up' (ceil). A value a hair from an integer
    (relative 1e-12) is taken as that integer, so exact quantities stay exact whichever way is asked.
    """
    if rounding not in ("nearest", "down", "up"):
        raise SpecError(f"to_int: rounding must be 'nearest', 'down' or 'up', got {rounding!r}")
    v = float(x) / float(unit)
    if not math.isfinite(v):
        raise SolverError(f"cannot scale {x!r} / {unit!r} to an integer (not finite)")
    r = round(v)
    if abs(v - r) <= 1e-12 * max(1.0, abs(v)):
        out = int(r)
    elif rounding == "nearest":
        out = int(r)
    elif rounding == "down":
        out = math.floor(v)
    else:
        out = math.ceil(v)
    if abs(out) > _INT_LIMIT:
        raise SolverError(f"cannot scale {x!r} / {unit!r} to a CP-SAT integer: {out:.3e} is beyond 2^62")
    return out


def status_name(status) -> str:
    """CP-SAT status by name: OPTIMAL, FEASIBLE, INFEASIBLE, MODEL_INVALID or UNKNOWN."""
    return getattr(status, "name", None) or str(status)


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def _pad(a: int, q: int) -> int:
    return _ceil_div(a, q) * q


def as_chips(chip) -> Chips:
    """One design point as Chips, from a catalog name, a ChipSpec or a one-point Chips."""
    if isinstance(chip, Chips):
        if chip.n != 1:
            raise SpecError(f"the tile solver takes one chip, got {chip.n} design points; use chips.take([i])")
        return chip
    if isinstance(chip, str):
        chip = load_chip(chip)
    if isinstance(chip, ChipSpec):
        return Chips.from_specs([chip])
    raise SpecError(f"expected a chip name, a ChipSpec or a one-point Chips, got {type(chip).__name__}")


@functools.lru_cache(maxsize=4096)
def _alone(op: Op) -> Workload:
    """The operator as a one-op workload, one count (the evaluator's per-op time is what the solver matches)."""
    return Workload(name=f"tile:{op.name}", phase="ops", ops=(replace(op, count=1),))


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class TileChoice:
    """The tiles of one operator and what they cost (one count of the operator).

    ``time_s`` and ``traffic_bytes`` are the evaluator's t_op (device time, at the operator's sustained
    clock) and off-chip bytes for exactly these tiles; ``model_time_s`` is the relaxation's time for them
    (the peak clock: equal to ``time_s`` within ~1e-7 where the clock does not throttle, a lower bound where
    it does); ``clock_ratio`` is the evaluator's sustained / peak clock of the operator. ``status``
    is the CP-SAT status by name ('OPTIMAL': proven; 'FEASIBLE': the time limit stopped a solve) or
    'BRUTE_FORCE' for the oracle. ``solve_time_s`` is the whole wall-clock time (data, model, every solve,
    the evaluator checks) and ``cpu_time_s`` the process CPU time over the same span (what a loaded
    machine does not inflate).
    """

    op: str
    tm: int
    tn: int
    tk: int
    slots: int
    split_k: int
    time_s: float
    traffic_bytes: float
    status: str
    solve_time_s: float
    model_time_s: float = math.nan
    cpu_time_s: float = math.nan
    clock_ratio: float = 1.0
    working_set_bytes: float = 0.0
    solves: int = 0
    info: dict = field(default_factory=dict, compare=False)

    @property
    def tiles(self) -> tuple[int, int, int, int]:
        """(T_M, T_N, T_K, split-K), the order ``evaluate_arrays(..., tiles=...)`` takes."""
        return (self.tm, self.tn, self.tk, self.split_k)


# ------------------------------------------------------------------ data


@dataclass(frozen=True)
class TileData:
    """Every constant of one operator on one chip, taken from the evaluator's own tables (SI units)."""

    op: Op
    m: int
    n: int
    k: int
    batch: int
    im: int
    inn: int
    ik: int
    units: int
    qm_max: int
    qn_max: int
    qk_max: int
    split_max: int
    ea: float
    eb: float
    emax: float
    local_buffer: float
    accumulator: float
    register_file: float
    # time
    padded_flops: float
    unit_rate: float             # FLOP/s of one unit at peak clock x compute efficiency
    t_vector: float              # s at peak clock
    # memory
    a_mem: float
    b_mem: float
    c_mem: float
    ra_cap: int | None           # r_A = min(c_N, ra_cap); None: A fits L2, r_A = 1
    rb_cap: int | None
    partial_bytes: float         # 8 M N batch per extra split
    partial_split: int           # partials go to memory from this split on
    bandwidth: float
    # power ceiling (per operator, seed 004 §4.1.3)
    power_budget: float          # W: TDP - static power; inf: no TDP
    e_mem: float                 # J per off-chip byte
    power_exponent: int          # 3: voltage scales with clock, 1: fixed voltage
    e_fixed: float               # J of FLOPs, vector work and the C write through L2 (tile-independent)
    e_local: float               # J per unit of (T_M + T_N) c_M c_N
    e_a: float                   # J per c_N (A requests)
    e_b: float                   # J per c_M (B requests)
    e_split: float               # J per extra split (partial sums requested through L2)
    t_upper: float = math.inf    # s: the evaluator's time of a known feasible tiling (bounds the optimum)

    @property
    def t_compute(self) -> float:
        """K = max(t_c1, t_vector) at the peak clock: the least compute-busy time of any tiling (perfect waves)."""
        return max(self.padded_flops / (self.unit_rate * self.units), self.t_vector)

    @property
    def p_mem_max(self) -> float:
        """W: the most memory power an operator draws (its traffic at the full effective bandwidth)."""
        return self.bandwidth * self.e_mem

    @property
    def throttle(self) -> str:
        """'never' (no TDP, or no tiling can exceed it), 'always' (no power left above static), or 'maybe'.

        At the peak clock the compute units draw p_comp = E_compute / busy_c <= e_max / K (busy_c >= K) and the
        memory p_mem = E_mem / t_busy1 <= bandwidth x e_mem (t_busy1 >= t_memory): below the budget together,
        no tiling throttles.
        """
        if not math.isfinite(self.power_budget) or self.e_max <= 0:
            return "never"
        if self.power_budget <= 0 and self.all_draw:
            return "always"  # every tiling draws compute power, and none is left
        if (self.e_max / self.t_compute + self.p_mem_max) * (1 + 1e-9) <= self.power_budget:
            return "never"
        return "maybe"

    @property
    def all_draw(self) -> bool:
        """Every tiling draws compute power (so one without power left runs at the clock floor)."""
        return self.e_fixed + self.e_local + self.e_a + self.e_b > 0

    @property
    def p_max(self) -> int:
        """Upper bound of (T_M + T_N) c_M c_N over the domain (c_M T_M < M + T_M)."""
        return self.qn_max * (self.m + self.im * self.qm_max) + self.qm_max * (self.n + self.inn * self.qn_max)

    @property
    def e_max(self) -> float:
        return (self.e_fixed + self.e_local * self.p_max + self.e_a * self.qn_max + self.e_b * self.qm_max
                + self.e_split * (self.split_max - 1))

    @property
    def rho_max(self) -> float:
        """Upper bound of 1 / clock ratio over the domain (the evaluator holds the clock at >= MIN_CLOCK_RATIO)."""
        t = self.throttle
        if t == "never":
            return 1.0
        room = self.power_budget - self.p_mem_max
        if t == "always" or room <= 0:
            return RHO_FLOOR
        u = self.e_max / (self.t_compute * room)
        return min(RHO_FLOOR, max(1.0, u ** (1.0 / self.power_exponent)))


def tile_data(op: Op, chip) -> TileData:
    """The data step: constants of ``op`` on ``chip`` from the evaluator's op table and chip arrays."""
    if not isinstance(op, Op):
        raise SpecError(f"the tile solver takes an Op, got {type(op).__name__}")
    if not (op.m > 0 and op.n > 0 and op.k > 0):
        raise SpecError(f"op {op.name}: not a GEMM-like operator (m, n, k = {op.m}, {op.n}, {op.k}); "
                        f"only matrix operators have tiles")
    chips = as_chips(chip)
    w = _alone(op)
    t = op_table(w)
    g = lambda key, default=0.0: float(chips.get(key, default)[0])  # noqa: E731
    im, inn, ik = (int(g(f"matrix.instruction.{x}", 16)) for x in "mnk")
    units = int(round(float(chips.total_units[0])))
    m, n, k, batch = int(op.m), int(op.n), int(op.k), int(op.batch)
    clock = g("clock")
    fpc, e_flop = (float(v[0]) for v in _format_rate(chips, t.formats[0]))
    if fpc <= 0:
        raise SpecError(f"op {op.name}: chip has no matrix rate for format {t.formats[0]} or any wider one")
    ceff = g("calibration.compute_efficiency", 1.0)
    # padded FLOPs and vector time are tile-independent: read them off the evaluator itself (instruction
    # padding, orientation, causal tiles), so the model follows any change there. The same call evaluates a
    # few simple tilings (powers of two of the instruction, no split) whose best time bounds the optimum.
    probe_m, probe_n = (a.ravel() for a in np.meshgrid(_powers(im, m), _powers(inn, n), indexing="ij"))
    ref = evaluate_tiles(op, chips, probe_m, probe_n, ik, 1, full=True)
    fpad = float(ref.operators.padded_flops[0, 0])
    tv = float(ref.operators.t_vector[0, 0] * ref.columns["clock_ratio"][0])  # at peak clock
    vf, ex = float(t.vector_flops[0]), float(t.exps[0])
    if not math.isfinite(tv):
        raise SpecError(f"op {op.name}: vector work on a chip without a vector unit")
    # memory (seed 004 §4.3.2, §4.4.1): L2 panels, partial sums, Little's-law bandwidth cap
    l2 = g("l2") * g("dies", 1.0)
    kk = max(k, 1)
    ea, eb = float(t.ea[0]), float(t.eb[0])
    t2 = max(math.floor(l2 / (2.0 * kk * (ea + eb))), 1)
    a_bytes, b_bytes, c_bytes = float(t.a_bytes[0]), float(t.b_bytes[0]), float(t.c_bytes[0])
    a_mem = 0.0 if bool(t.on_chip_a[0]) else a_bytes
    c_mem = 0.0 if bool(t.on_chip_c[0]) else c_bytes
    ra_cap = _ceil_div(n, t2) if a_bytes > l2 else None
    rb_cap = _ceil_div(m, t2) if b_bytes > l2 else None
    pbytes = float(m * n * batch) * 4.0 * 2
    s0 = math.floor(l2 / pbytes) + 2
    while s0 > 2 and (s0 - 2) * pbytes > l2:  # the evaluator's float test: (s - 1) P > L2
        s0 -= 1
    while (s0 - 1) * pbytes <= l2:
        s0 += 1
    bw = g("memory.bandwidth") * g("calibration.bandwidth_efficiency", 1.0)
    lat, inflight = g("memory_system.latency"), g("memory_system.outstanding")
    if lat > 0 and inflight > 0:  # Little's law (seed 004 §4.3.3)
        bw = min(bw, inflight * g("memory_system.transaction", 128.0) / lat)
    # power ceiling (seed 004 §4.1.3), per operator: TDP - static power is shared by compute and memory
    tdp = g("tdp", math.inf)
    p_budget = tdp - g("power.static") if math.isfinite(tdp) else math.inf
    e_loc, e_l2 = g("energy.local"), g("energy.l2")
    emax = max(ea, eb)
    qk_max = _ceil_div(k, ik)
    data = TileData(
        op=op, m=m, n=n, k=k, batch=batch, im=im, inn=inn, ik=ik, units=units,
        qm_max=_ceil_div(m, im), qn_max=_ceil_div(n, inn), qk_max=qk_max, split_max=max(1, min(units, qk_max)),
        ea=ea, eb=eb, emax=emax,
        local_buffer=g("local_buffer"), accumulator=g("accumulator"), register_file=g("register_file"),
        padded_flops=fpad, unit_rate=fpc * clock * ceff, t_vector=tv,
        a_mem=a_mem, b_mem=b_bytes, c_mem=c_mem, ra_cap=ra_cap, rb_cap=rb_cap,
        partial_bytes=pbytes, partial_split=s0, bandwidth=bw,
        power_budget=p_budget, e_mem=g("energy.memory"),
        power_exponent=3 if g("power.voltage_scaling", 1.0) > 0.5 else 1,
        e_fixed=fpad * e_flop + (vf + ex) * g("energy.vector_flop") + e_l2 * c_bytes,
        e_local=e_loc * k * emax * batch,
        e_a=e_l2 * a_bytes, e_b=e_l2 * b_bytes, e_split=e_l2 * pbytes,
    )
    ok = _fits(data, probe_m, probe_n, ik, SLOTS[0])
    t_upper = float(np.min(ref.operators.t_op[ok, 0])) if ok.any() else math.inf
    return replace(data, t_upper=t_upper)


def _powers(q: int, x: int) -> np.ndarray:
    """q, 2q, 4q, ... up to the padded extent pad(x, q) (included): probe tile sizes."""
    top = _pad(x, q)
    return np.unique(np.minimum([q << i for i in range(0, 16) if (q << i) < 2 * top], top))


# ------------------------------------------------------------------ the evaluator on candidate tiles


def evaluate_tiles(op: Op, chip, tm, tn, tk, split, *, full: bool = False):
    """The evaluator on a batch of candidate tiles: per candidate t_op (s), off-chip bytes, clock ratio.

    One call to the evaluator (:func:`~dse.model.evaluator.evaluate_workload`) with the chip repeated once per candidate and the operator alone
    (one count). The tile solver checks its answers with this; the brute force is this over the domain.
    ``full``: return the evaluator's whole answer (a WorkloadMetrics, breakdown included) instead.
    """
    chips = as_chips(chip)
    arrs = [np.atleast_1d(np.asarray(v, dtype=float)) for v in (tm, tn, tk, split)]
    tm, tn, tk, split = np.broadcast_arrays(*arrs)
    n = len(tm)
    batch = chips.take(np.zeros(n, dtype=np.int64))
    out = evaluate_workload(batch, _alone(op), tiles=(tm[:, None], tn[:, None], tk[:, None], split[:, None]),
                            breakdown=True)
    if full:
        return out
    ops = out.operators
    return {"time_s": ops.t_op[:, 0], "traffic_bytes": ops.bytes_memory[:, 0],
            "clock_ratio": out.columns["clock_ratio"]}


def _working_set(d: TileData, tm, tn, tk, slots):
    ws = slots * (tm * tk * d.ea + tk * tn * d.eb)
    return ws if d.accumulator > 0 else ws + 4.0 * tm * tn


def _fits(d: TileData, tm, tn, tk, slots):
    """Buffer, accumulator and register limits (numpy, broadcasting)."""
    tm, tn, tk, slots = (np.asarray(v, dtype=float) for v in (tm, tn, tk, slots))
    ok = _working_set(d, tm, tn, tk, slots) <= d.local_buffer
    if d.accumulator > 0:
        ok &= 4.0 * tm * tn <= d.accumulator
    elif d.register_file > 0:
        ok &= 4.0 * tm * tn <= d.register_file
    return ok


def _canonical_tk(d: TileData, tm: int, tn: int, split: int, slots: int = SLOTS[0]) -> int:
    """The largest T_K (multiple of k_i) that fits with ``slots`` slots and keeps split <= ceil(K / T_K)."""
    acc = 0.0 if d.accumulator > 0 else 4.0 * tm * tn
    per_k = slots * (tm * d.ea + tn * d.eb)
    q_buf = math.floor((d.local_buffer - acc) / (per_k * d.ik) + 1e-12)
    q_split = d.qk_max if split <= 1 else (d.k - 1) // ((split - 1) * d.ik)  # ceil(K / (ik q)) >= split
    q = max(1, min(d.qk_max, q_buf, q_split))
    return d.ik * q


def _class_min(d: TileData, cm: int, cn: int) -> tuple[int, int]:
    """The smallest T_M, T_N with ceil(M / T_M) = cm, ceil(N / T_N) = cn: never slower, never more traffic."""
    return _pad(_ceil_div(d.m, cm), d.im), _pad(_ceil_div(d.n, cn), d.inn)


# ------------------------------------------------------------------ the model


class _TileModel:
    """The CP-SAT model of one operator's tiles (data -> variables -> constraints), one per operator.

    The time link built in is the relaxation rho = 1 (clock ratio 1): a lower bound of every tiling's time,
    exact wherever the clock does not throttle. :meth:`band` adds, under an enforcement literal, the tighter
    link of one power band (the tiling's proxy power ratio in an interval, hence a clock-ratio bound); a solve
    turns one band on through an assumption. Constraints that the search adds (time caps, forbidden classes)
    stay valid for the rest of the search, so the model is never rebuilt.
    """

    def __init__(self, d: TileData):
        self.d = d
        self._scales()
        self.model = cp_model.CpModel()
        self.v: dict[str, cp_model.IntVar] = {}
        self.hi: dict[str, int] = {}  # upper bound of each variable
        self._bands: dict[tuple[int, int | None], tuple[cp_model.IntVar, float]] = {}
        self._variables()
        self._constraints()

    # ---- scaling: one time unit, one byte scale (every conversion through to_int; the power units: _power)
    def _scales(self):
        d = self.d
        # 'always': every tiling runs at the lowest clock the evaluator models, so the model is exact with it
        self.rho_const = RHO_FLOOR if d.throttle == "always" else 1.0
        self.c_float = d.padded_flops / d.unit_rate * self.rho_const  # s: t_matrix = c_float x waves / work
        self.tv_float = d.t_vector * self.rho_const
        bytes_min = d.a_mem + d.b_mem + d.c_mem
        t_lb = max(self.c_float / d.units, self.tv_float, bytes_min / d.bandwidth)
        self.q = t_lb / 2**TIME_BITS
        sb = MIN_BYTE_SCALE
        while d.bandwidth * self.q * sb < 2**BW_BITS:
            sb *= 2
        self.sb = sb
        self.bw_q = to_int(d.bandwidth * self.q * sb, rounding="up")  # up: the model time stays a lower bound
        ra_max = min(d.qn_max, d.ra_cap) if d.ra_cap else 1
        rb_max = min(d.qm_max, d.rb_cap) if d.rb_cap else 1
        self.bytes_max = (d.a_mem * ra_max + d.b_mem * rb_max + d.c_mem
                          + (d.partial_bytes * (d.split_max - 1) if d.split_max >= d.partial_split else 0.0))
        rho_max = d.rho_max if d.throttle == "maybe" else 1.0
        t_ub = min(max(self.c_float * rho_max, self.tv_float * rho_max, self.bytes_max / d.bandwidth),
                   d.t_upper * (1 + 2 * TIME_RTOL))  # the optimum and its ties are no slower than a known tiling
        self.t_hi = to_int(t_ub, self.q, "up") + 4
        # the least time the model itself allows (perfect waves, each tensor moved once): the objective's
        # floor, exactly, so that CP-SAT proves an optimum that reaches it at once instead of searching the gap
        self.bytes_lo = to_int(bytes_min * sb, rounding="down")
        self.t_lo = max(_ceil_div(self.c_matrix(1.0), d.units), _ceil_div(self.bytes_lo, self.bw_q),
                        self.c_vector(1.0), 0)

    def c_matrix(self, rho: float) -> int:
        return to_int(self.c_float * rho, self.q, "down")

    def c_vector(self, rho: float) -> int:
        return to_int(self.tv_float * rho, self.q, "down")

    # ---- variables (structured names: q_m[op], time[op], ...)
    def _var(self, name: str, lo: int, hi: int) -> cp_model.IntVar:
        if hi > _INT_LIMIT:
            raise SolverError(f"tiles of {self.d.op.name}: {name} reaches {hi:.3e}, beyond CP-SAT's 64-bit "
                              f"integers (a chip of {self.d.units:,} units); use brute_force_tiles")
        var = self.model.new_int_var(int(lo), int(hi), f"{name}[{self.d.op.name}]")
        self.v[name] = var
        self.hi[name] = int(hi)
        return var

    def _variables(self):
        d = self.d
        self._var("q_m", 1, d.qm_max)
        self._var("q_n", 1, d.qn_max)
        self._var("q_k", 1, d.qk_max)
        self._var("t_m", d.im, d.im * d.qm_max)
        self._var("t_n", d.inn, d.inn * d.qn_max)
        self._var("t_k", d.ik, d.ik * d.qk_max)
        self._var("slots", SLOTS[0], SLOTS[-1])
        self._var("split", 1, d.split_max)
        self._var("c_m", 1, d.qm_max)
        self._var("c_n", 1, d.qn_max)
        self._var("k_steps", 1, d.qk_max)
        tiles_max = d.qm_max * d.qn_max
        self._var("tiles", 1, tiles_max)
        self._var("tiles_split", 1, tiles_max * d.split_max)
        self._var("work", d.batch, d.batch * tiles_max * d.split_max)
        self._var("waves", 1, _ceil_div(d.batch * tiles_max * d.split_max, d.units))
        self._var("time", self.t_lo, self.t_hi)
        self._var("time_x_work", 0, self.t_hi * self.hi["work"])
        self._var("bytes", self.bytes_lo, to_int(self.bytes_max * self.sb, rounding="up"))

    # ---- constraints
    def _constraints(self):
        d, m, v = self.d, self.model, self.v
        # instruction multiples
        m.add(v["t_m"] == d.im * v["q_m"])
        m.add(v["t_n"] == d.inn * v["q_n"])
        m.add(v["t_k"] == d.ik * v["q_k"])
        # ceilings: ceil(X / T) = (X + T - 1) // T
        m.add_division_equality(v["c_m"], v["t_m"] + (d.m - 1), v["t_m"])
        m.add_division_equality(v["c_n"], v["t_n"] + (d.n - 1), v["t_n"])
        m.add_division_equality(v["k_steps"], v["t_k"] + (d.k - 1), v["t_k"])
        m.add(v["split"] <= v["k_steps"])
        # the same ceilings as products, X <= c T <= X + T - 1: redundant, but their propagation bounds c and T
        # where the division alone leaves CP search to enumerate (a 1-row instruction, T_M in 1..M)
        for c, t, x in (("c_m", "t_m", d.m), ("c_n", "t_n", d.n), ("k_steps", "t_k", d.k)):
            ct_ = self._var(f"{c}_x_{t}", x, x - 1 + self.hi[t])
            m.add_multiplication_equality(ct_, [v[c], v[t]])
            m.add(ct_ <= v[t] + (x - 1))
        # work items and waves over the units (wave quantization with split-K)
        m.add_multiplication_equality(v["tiles"], [v["c_m"], v["c_n"]])
        m.add_multiplication_equality(v["tiles_split"], [v["tiles"], v["split"]])
        m.add(v["work"] == d.batch * v["tiles_split"])
        m.add_division_equality(v["waves"], v["work"] + (d.units - 1), d.units)
        self._buffer()
        self._memory()
        # time >= matrix and vector time at the peak clock (rho = 1): the relaxation every band tightens
        m.add_multiplication_equality(v["time_x_work"], [v["time"], v["work"]])
        m.add(v["time_x_work"] >= self.c_matrix(1.0) * v["waves"])
        if self.c_vector(1.0) > 0:
            m.add(v["time"] >= self.c_vector(1.0))

    def _buffer(self):
        d, m, v = self.d, self.model, self.v
        s = MIN_BYTE_SCALE  # bytes x 32: element sizes are multiples of 1/32 B
        mk = self._var("a_tile", d.im * d.ik, d.im * d.qm_max * d.ik * d.qk_max)
        kn = self._var("b_tile", d.inn * d.ik, d.inn * d.qn_max * d.ik * d.qk_max)
        mn = self._var("c_tile", d.im * d.inn, d.im * d.qm_max * d.inn * d.qn_max)
        m.add_multiplication_equality(mk, [v["t_m"], v["t_k"]])
        m.add_multiplication_equality(kn, [v["t_k"], v["t_n"]])
        m.add_multiplication_equality(mn, [v["t_m"], v["t_n"]])
        ea, eb = to_int(d.ea, 1 / s, "up"), to_int(d.eb, 1 / s, "up")
        slot_hi = ea * self.hi["a_tile"] + eb * self.hi["b_tile"]
        slot = self._var("slot_bytes", 0, slot_hi)
        m.add(slot == ea * mk + eb * kn)
        inputs = self._var("input_bytes", 0, SLOTS[-1] * slot_hi)
        m.add_multiplication_equality(inputs, [v["slots"], slot])
        buf = to_int(d.local_buffer, 1 / s, "down")
        if d.accumulator > 0:
            m.add(inputs <= buf).with_name("buffer_fit")
            m.add(4 * mn <= to_int(d.accumulator, rounding="down")).with_name("accumulator_fit")
        else:
            m.add(inputs + 4 * s * mn <= buf).with_name("buffer_fit")
            if d.register_file > 0:
                m.add(4 * mn <= to_int(d.register_file, rounding="down")).with_name("register_fit")

    def _memory(self):
        """bytes = A r_A + B r_B + C + [s >= s_0] P (s - 1), x byte scale; BW_q time >= bytes."""
        d, m, v = self.d, self.model, self.v
        sb = self.sb
        terms = []
        for name, size, cap, count in (("reads_a", d.a_mem, d.ra_cap, "c_n"), ("reads_b", d.b_mem, d.rb_cap, "c_m")):
            if size <= 0:
                continue
            if cap is None:
                terms.append(to_int(size * sb))
            else:
                r = self._var(name, 1, min(self.hi[count], cap))
                m.add_min_equality(r, [v[count], cap])  # ceil(X / max(T, t_2)) = min(ceil(X / T), ceil(X / t_2))
                terms.append(to_int(size * sb) * r)
        terms.append(to_int(d.c_mem * sb))
        if d.split_max >= d.partial_split:
            spill = m.new_bool_var(f"partials_to_memory[{d.op.name}]")
            m.add(v["split"] >= d.partial_split).only_enforce_if(spill)
            m.add(v["split"] <= d.partial_split - 1).only_enforce_if(~spill)
            extra = self._var("spilled_splits", 0, d.split_max - 1)
            m.add(extra == v["split"] - 1).only_enforce_if(spill)
            m.add(extra == 0).only_enforce_if(~spill)
            terms.append(to_int(d.partial_bytes * sb) * extra)
        m.add(v["bytes"] == sum(terms))
        m.add(self.bw_q * v["time"] >= v["bytes"])

    def bytes_of(self, cm: int, cn: int, split: int) -> int:
        """The model's integer bytes (x byte scale) of a class, by the same terms as the constraint."""
        d, sb = self.d, self.sb
        ra = min(cn, d.ra_cap) if d.ra_cap else 1
        rb = min(cm, d.rb_cap) if d.rb_cap else 1
        out = to_int(d.a_mem * sb) * ra + to_int(d.b_mem * sb) * rb + to_int(d.c_mem * sb)
        if split >= d.partial_split:
            out += to_int(d.partial_bytes * sb) * (split - 1)
        return out

    def time_units(self, cm: int, cn: int, split: int) -> int:
        """The relaxation's least integer time of a class (the peak clock)."""
        d = self.d
        work = cm * cn * d.batch * split
        waves = _ceil_div(work, d.units)
        return max(_ceil_div(self.c_matrix(1.0) * waves, work), _ceil_div(self.bytes_of(cm, cn, split), self.bw_q),
                   self.c_vector(1.0), self.t_lo)

    def time_of(self, cm: int, cn: int, split: int) -> float:
        """The model's time (s) of a class at the peak clock: its least integer time, scaled back."""
        return self.time_units(cm, cn, split) * self.q

    # ---- the power ceiling (built on first use: only a search that needs bands pays for it)
    def _power(self):
        """p_comp and room: the evaluator's compute power and the power left beside memory, at the peak clock.

        In the units of p_comp (e_unit / q, with e_unit = q P / 2^PB, so that P = TDP - static is 2^PB):

            energy = E_compute / e_unit          coefficients rounded down (FLOPs, vector work, L2 requests,
                                                 local-buffer bytes counted at c_M T_M = M, c_N T_N = N)
            busy   = max(K, ceil(t_memory))      >= busy_c = max(t_c1, t_vector, t_memory)
            p_comp = floor(energy / busy)        <= E_compute / busy_c
            t_busy = max(ceil(t_matrix), ceil(t_vector), ceil(t_memory))   >= t_busy1 (matrix with wave loss)
            p_mem  = floor(P_mem,max floor(t_memory) / t_busy)             <= E_mem / t_busy1
            room   = max(0, 2^PB - p_mem)        >= TDP - static - p_mem (0: no power left)

        so u = p_comp / room is a lower bound of the evaluator's p_comp / (TDP - static - p_mem), whose
        1 / clock ratio is min(max(u, 1)^(1/p), RHO_FLOOR), up to the rounding of the integer units.
        """
        if "p_comp" in self.v:
            return
        d, m, v = self.d, self.model, self.v
        # (P > 0 wherever a tiling may throttle; were it not, any room >= 0 would still bound TDP - static - p_mem)
        p_ref = d.power_budget if d.power_budget > 0 else d.e_max / d.t_compute
        self.pb = min(P_BITS, math.floor(61 - math.log2(max(d.e_max / (self.q * p_ref), 1.0))))
        self.e_unit = e_unit = self.q * p_ref / 2.0**self.pb
        # local-buffer bytes ~ c_M c_N (T_M + T_N) = c_N (c_M T_M) + c_M (c_N T_N) >= M c_N + N c_M: linear (the
        # product's presolve costs up to 100x the solve), a lower bound short by the tiles' padding beyond M, N
        local = d.m * v["c_n"] + d.n * v["c_m"]
        k_fix, k_loc = to_int(d.e_fixed, e_unit, "down"), to_int(d.e_local, e_unit, "down")
        k_a, k_b = to_int(d.e_a, e_unit, "down"), to_int(d.e_b, e_unit, "down")
        k_s = to_int(d.e_split, e_unit, "down")
        self._k = {"fix": k_fix, "loc": k_loc, "a": k_a, "b": k_b, "s": k_s}
        hi = (k_fix + k_loc * (d.m * d.qn_max + d.n * d.qm_max) + k_a * d.qn_max + k_b * d.qm_max
              + k_s * (d.split_max - 1))
        energy = self._var("energy", 0, hi)
        m.add(energy == k_fix + k_loc * local + k_a * v["c_n"] + k_b * v["c_m"] + k_s * (v["split"] - 1))
        # memory time in time units, rounded up (busy times) and down (memory power); bytes <= bw_q t_hi
        self.k_q = to_int(d.t_compute, self.q, "up")
        self.bw_dn = bw_dn = to_int(d.bandwidth * self.q * self.sb, rounding="down")
        t_up = self._var("t_memory_up", 0, _ceil_div(self.bw_q * self.t_hi, bw_dn))
        m.add(t_up * bw_dn >= v["bytes"])
        m.add(t_up * bw_dn <= v["bytes"] + (bw_dn - 1))
        t_dn = self._var("t_memory_dn", 0, self.t_hi)
        m.add(t_dn * self.bw_q <= v["bytes"])
        m.add(t_dn * self.bw_q >= v["bytes"] - (self.bw_q - 1))
        busy = self._var("busy_compute", self.k_q, max(self.k_q, self.hi["t_memory_up"]))
        m.add_max_equality(busy, [self.k_q, t_up])
        p_comp = self._var("p_comp", 0, _ceil_div(hi, self.k_q))
        m.add_division_equality(p_comp, energy, busy)
        # the busy time of the memory power: matrix time with wave loss at the peak clock, rounded up
        self.c_up = c_up = to_int(self.c_float, self.q, "up")
        self.tv_up = tv_up = to_int(self.tv_float, self.q, "up")
        t_mat = self._var("t_matrix_up", 1, c_up)
        m.add_division_equality(t_mat, c_up * v["waves"] + v["work"] - 1, v["work"])
        t_busy = self._var("t_busy_up", 1, max(c_up, tv_up, self.hi["t_memory_up"]))
        m.add_max_equality(t_busy, [t_mat, tv_up, t_up])
        self.pm_coef = pm = to_int(d.p_mem_max * self.q / e_unit, rounding="down")
        pm_x_t = self._var("p_mem_x_t_busy", 0, pm * self.t_hi)
        m.add(pm_x_t == pm * t_dn)
        p_mem = self._var("p_mem", 0, pm)
        m.add_division_equality(p_mem, pm_x_t, t_busy)
        room = self._var("room", 0, 2**self.pb)
        m.add_max_equality(room, [2**self.pb - p_mem, 0])
        self.f_bits = min(F_BITS, 61 - self.hi["p_comp"].bit_length(), 61 - (self.pb + 1) - math.ceil(
            math.log2(RHO_FLOOR**d.power_exponent)))
        self.k_floor = self.kappa_of(RHO_FLOOR**d.power_exponent, "up")  # from here on, rho is the floor's

    def u_of(self, kappa: int) -> float:
        """The proxy power ratio u = p_comp / room of band edge ``kappa``."""
        return kappa / 2.0**self.f_bits

    def kappa_of(self, u: float, rounding: str = "down") -> int | None:
        """The band edge of proxy ratio ``u`` (None beyond the int64 range of the band constraints)."""
        self._power()
        if not math.isfinite(u) or u >= 2.0 ** (61 - self.f_bits - self.pb - 1):
            return None
        return to_int(u * 2.0**self.f_bits, rounding=rounding)

    def rho_of(self, kappa: int) -> float:
        """The band's lower bound of 1 / clock ratio for every tiling with p_comp >= u(kappa) x room."""
        if kappa <= 0:
            return 1.0
        return min(RHO_FLOOR, max(1.0, self.u_of(kappa)) ** (1.0 / self.d.power_exponent)) * (1 - 1e-12)

    def band(self, lo: int, hi: int | None) -> tuple[cp_model.IntVar, float]:
        """Literal of power band [lo, hi] (lo room <= p_comp 2^F <= hi room, room >= 1) and its bound rho.

        Under the literal, time >= rho x the matrix and vector times at the peak clock, rho = rho_of(lo):
        ``time x work >= C rho x waves``. Every tiling lies in some band -- its u = p_comp / room somewhere, or
        room = 0 (band NO_ROOM: no power left beside the memory's, the clock at its floor) -- and its clock
        ratio is at most 1 / rho (u is a lower bound of the evaluator's p_comp / (TDP - static - p_mem)).
        """
        key = (lo, hi)
        if key not in self._bands:
            self._power()
            m, v, d = self.model, self.v, self.d
            lit = m.new_bool_var(f"band_{lo}_{hi}[{d.op.name}]")
            f = 2**self.f_bits
            if key == NO_ROOM:
                m.add(v["room"] == 0).only_enforce_if(lit)
                rho = RHO_FLOOR * (1 - 1e-12) if d.all_draw else 1.0
            else:
                if lo > 0:
                    m.add(f * v["p_comp"] >= lo * v["room"]).only_enforce_if(lit)
                if hi is not None:
                    m.add(f * v["p_comp"] <= hi * v["room"]).only_enforce_if(lit)
                m.add(v["room"] >= 1).only_enforce_if(lit)
                rho = self.rho_of(lo)
            if rho > 1.0:
                m.add(v["time_x_work"] >= self.c_matrix(rho) * v["waves"]).only_enforce_if(lit)
                if self.c_vector(rho) > 0:
                    m.add(v["time"] >= self.c_vector(rho)).only_enforce_if(lit)
            self._bands[key] = (lit, rho)
        return self._bands[key]

    def kappa_at(self, solver) -> int | None:
        """floor(p_comp 2^F / room) of a solver's solution by the model's integer formulas (the solve may
        predate the power variables): where its band is split. None: no room (band NO_ROOM)."""
        self._power()
        d, v, k = self.d, self.v, self._k
        val = {name: int(solver.value(v[name])) for name in ("c_m", "c_n", "split", "bytes")}
        energy = (k["fix"] + k["loc"] * (d.m * val["c_n"] + d.n * val["c_m"]) + k["a"] * val["c_n"]
                  + k["b"] * val["c_m"] + k["s"] * (val["split"] - 1))
        t_up = _ceil_div(val["bytes"], self.bw_dn)
        p_comp = energy // max(self.k_q, t_up)
        work = val["c_m"] * val["c_n"] * d.batch * val["split"]
        t_busy = max(_ceil_div(self.c_up * _ceil_div(work, d.units), work), self.tv_up, t_up, 1)
        room = 2**self.pb - self.pm_coef * (val["bytes"] // self.bw_q) // t_busy
        if room <= 0:  # no room: band NO_ROOM
            return None
        return min(p_comp * 2**self.f_bits // room, self.k_floor)

    def cuts(self, lo: int, hi: int | None, kx: int | None, whole: bool = False) -> list[tuple[int, int | None]]:
        """Band [lo, hi] split at a solution's kappa ``kx``: [lo, kx], [kx, hi], the lower part further at
        u = 1 and at the geometric middle (in u) while its bound is looser than BAND_RTOL in rho; ``whole``:
        the band is the whole domain, band NO_ROOM included. The lowest band last (it is searched first)."""
        if (lo, hi) == NO_ROOM:
            return [NO_ROOM]
        if kx is None:
            out = [(lo, hi)]
        else:
            d = self.d
            points = {lo, kx} | ({hi} if hi is not None else set())
            one = self.kappa_of(1.0)
            if one is not None and lo < one < kx:
                points.add(one)
            base = max(lo, one or 0)
            if 0 < base < kx and kx / base > (1 + BAND_RTOL) ** d.power_exponent:
                mid = self.kappa_of(math.sqrt(self.u_of(base) * self.u_of(kx)))
                if mid is not None and base < mid < kx:
                    points.add(mid)
            pts = sorted(points)
            out = [(a, b) for a, b in zip(pts, pts[1:])]
            if hi is None:
                out.append((pts[-1], None))
        return ([NO_ROOM] if whole else []) + out[::-1]


class _Search:
    """Solves one operator's model and checks candidates with the evaluator (see :func:`solve_tiles`)."""

    def __init__(self, tmod: _TileModel, op: Op, chips: Chips, time_limit_s: float, seed: int, start: float):
        self.t, self.op, self.chips = tmod, op, chips
        self.limit, self.seed, self.start = time_limit_s, seed, start
        self.solves = 0
        self.statuses: list[str] = []
        self.times: list[float] = []
        self.cap = None  # literal of the current time cap (assumed while it is set)
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

    def solve(self, band: tuple[int, int | None] | None = None):
        """Solve the model (with one power band on); the solver on OPTIMAL / FEASIBLE, None on INFEASIBLE.

        Tries :data:`SOLVE_PLAN` in order: CP search without the LP relaxation first (fast on almost every
        instance), then with it (which some instances need to bound the objective), each later attempt
        hinted with the best solution so far; the last attempt gets what is left of the time limit.
        """
        model, v = self.t.model, self.t.v
        model.clear_assumptions()
        lits = [self.cap] if self.cap is not None else []
        if band is not None:
            lits.append(self.t.band(*band)[0])
        if lits:
            model.add_assumptions(lits)
        model.clear_hints()
        name, solver, wall = "UNKNOWN", None, 0.0
        for i, (level, probing, det_s, wall_s) in enumerate(SOLVE_PLAN):
            left = self.limit - (time.perf_counter() - self.start)
            if left <= 0:
                break
            last = i == len(SOLVE_PLAN) - 1
            attempt = cp_model.CpSolver()
            attempt.parameters.num_workers = 1
            attempt.parameters.max_time_in_seconds = left if last or wall_s is None else min(left, wall_s)
            if not last and det_s is not None:
                attempt.parameters.max_deterministic_time = det_s
            attempt.parameters.random_seed = int(self.seed)
            attempt.parameters.linearization_level = level
            attempt.parameters.cp_model_probing_level = probing
            status = status_name(attempt.solve(model))
            wall += attempt.wall_time
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
            raise SolverError(f"tiles of {self.op.name}: the time limit of {self.limit} s ran out after "
                              f"{self.solves} solves, before CP-SAT found a solution (status UNKNOWN)")
        detail = f": {model.validate()}" if name == "MODEL_INVALID" else ""
        raise SolverError(f"tiles of {self.op.name}: CP-SAT returned {name}{detail}")

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
            tm, tn = _class_min(d, cls[0], cls[1])
            tk = _canonical_tk(d, tm, tn, cls[2], SLOTS[0])
            r = evaluate_tiles(self.op, self.chips, tm, tn, tk, cls[2])
            rec = {"tm": tm, "tn": tn, "tk": tk, "time_s": float(r["time_s"][0]),
                   "traffic_bytes": float(r["traffic_bytes"][0]), "clock_ratio": float(r["clock_ratio"][0])}
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


def solve_tiles(op: Op, chip, *, time_limit_s: float = 10.0, seed: int = 0) -> TileChoice:
    """Tiles of ``op`` on ``chip`` that minimize the evaluator's time, then off-chip traffic (CP-SAT).

    ``chip``: a catalog name, a ChipSpec or a one-point Chips. ``time_limit_s`` bounds the wall-clock time
    of all solves together. Raises InfeasibleError when no tile fits (the message names the limit), and
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
    """
    start, cpu0 = time.perf_counter(), time.process_time()
    chips = as_chips(chip)
    d = tile_data(op, chips)
    tm_ = _TileModel(d)
    v, q, model = tm_.v, tm_.q, tm_.model
    S = _Search(tm_, op, chips, time_limit_s, seed, start)
    maybe = d.throttle == "maybe"

    def top(t_s: float) -> int | None:
        """Band edge above which rho > t_s / K: no tiling there is as fast as t_s (None: no such edge)."""
        r = t_s * (1 + 1e-9) / d.t_compute
        return None if r >= RHO_FLOOR else tm_.kappa_of(r**d.power_exponent, "up")

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
        raise InfeasibleError(_infeasible_message(d))
    best_cls = S.cls(solver)
    best_t = S.record(best_cls)[0]
    S.check(best_cls, exact=True)
    if maybe and not S.meets(solver, best_t):  # the relaxation's optimum throttles: search the power bands
        capped, pending = None, tm_.cuts(0, None, tm_.kappa_at(solver), whole=True)
        while pending:
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
        S.set_cap(None)

    # ---- phase 2: the least off-chip traffic among tilings within TIME_RTOL of the fastest
    limit = best_t * (1 + TIME_RTOL)
    cap_units = to_int(limit, q, "down") + 1
    model.add(v["time"] <= cap_units)
    model.minimize(v["bytes"])
    ties = [c for c, (t_c, _, _) in S.cost.items() if t_c <= limit]
    best_b = min(S.cost[c][1] for c in ties)

    def fewer_bytes():
        model.add(v["bytes"] <= to_int(best_b * tm_.sb, rounding="up") - 1)

    fewer_bytes()
    pending = [None]
    while pending:
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
    final = min(ties, key=lambda c: (S.cost[c][1], S.cost[c][0]))

    # ---- extract: the class's cheapest tile, as evaluated (2 slots, the largest T_K)
    rec = S.cost[final][2]
    status = "OPTIMAL" if all(s in ("OPTIMAL", "INFEASIBLE") for s in S.statuses) else "FEASIBLE"
    return TileChoice(
        op=op.name, tm=int(rec["tm"]), tn=int(rec["tn"]), tk=int(rec["tk"]), slots=SLOTS[0], split_k=int(final[2]),
        time_s=rec["time_s"], traffic_bytes=rec["traffic_bytes"], status=status,
        model_time_s=tm_.time_of(*final),
        solve_time_s=time.perf_counter() - start, cpu_time_s=time.process_time() - cpu0, clock_ratio=rec["clock_ratio"],
        working_set_bytes=float(_working_set(d, rec["tm"], rec["tn"], rec["tk"], SLOTS[0])), solves=S.solves,
        info={"time_unit_s": q, "byte_scale": tm_.sb, "statuses": tuple(S.statuses),
              "classes_checked": len(S.cost), "power_bands": len(tm_._bands), "solve_wall_s": tuple(S.times)},
    )


def _infeasible_message(d: TileData) -> str:
    """Which limit rejects even the smallest tile (instruction-sized, 2 slots)."""
    tm, tn, tk, s = d.im, d.inn, d.ik, SLOTS[0]
    ws = _working_set(d, tm, tn, tk, s)
    where = f"op {d.op.name}: no tile fits"
    if ws > d.local_buffer:
        what = "inputs" if d.accumulator > 0 else "inputs and FP32 accumulator"
        return (f"{where}: buffer_fit: the smallest tile {tm}x{tn}x{tk} with {s} slots needs {ws:,.0f} B "
                f"({what}) > local buffer {d.local_buffer:,.0f} B")
    acc = 4.0 * tm * tn
    if d.accumulator > 0 and acc > d.accumulator:
        return (f"{where}: accumulator_fit: a {tm}x{tn} FP32 accumulator needs {acc:,.0f} B > accumulator "
                f"{d.accumulator:,.0f} B")
    if d.accumulator <= 0 and 0 < d.register_file < acc:
        return (f"{where}: register_fit: a {tm}x{tn} FP32 accumulator needs {acc:,.0f} B > register file "
                f"{d.register_file:,.0f} B")
    return f"{where} (CP-SAT proved the tile domain empty)"


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


def solve_workload_tiles(workload: Workload, chip, *, time_limit_s: float = 10.0, seed: int = 0) -> WorkloadTiles:
    """Solve every GEMM-like operator of ``workload``: tiles for ``evaluate_arrays(chips, workload, tiles=...)``.

    A row of tiles broadcasts over any number of identical design points; vector operators get the
    instruction tile and split 1 (the evaluator does not use tiles for them). Identical operators (same
    shapes and formats) are solved once. The result is the workload's optimum: the evaluator throttles each
    operator's clock by that operator's own power, and a step takes max(sum of device times, sum of kernel
    launches) + step overhead, whose launch side does not depend on the tiles; so the sum of the per-operator
    optima is the least device time, and no other tiles give a shorter step (never slower than the default
    tiles, in particular). Each ``choices[name].time_s`` is that operator's t_op in the workload.
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
            cache[key] = solve_tiles(op, chips, time_limit_s=time_limit_s, seed=seed)
        c = cache[key]
        choices[op.name] = c
        for arr, val in zip(out, c.tiles):
            arr[0, j] = val
    return WorkloadTiles(out, choices)


# ------------------------------------------------------------------ brute force (the oracle)


def tile_candidates(op: Op, chip, *, prune: bool = True) -> dict[str, np.ndarray]:
    """Every feasible tiling of the domain (``prune=False``: all five decisions), or its dominant subset.

    Pruned (exact, the evaluator's time and traffic depend on the tiles only as stated):
      * T_K and S change neither time nor traffic, and T_K = k_i with S = 2 is the smallest working set and
        the loosest split limit: a (T_M, T_N, s) is feasible iff it is feasible there;
      * time and traffic depend on T_M only through c_M = ceil(M / T_M) (and r_B = min(c_M, ceil(M / t_2))),
        except the local-buffer energy, which grows with T_M: the smallest T_M of each c_M dominates (same for T_N);
      * for fixed tiles, memory time, traffic and energy grow with s, and the matrix time follows
        ceil(w s / U) / (w s): only splits that strictly improve that ratio over every smaller split remain --
        where the clock cannot throttle. Where it can, every split stays: a split with more waves per work
        item or more partial-sum traffic lengthens the busy time over which the evaluator spreads the
        operator's memory or compute power, which can raise its sustained clock.
    """
    d = tile_data(op, chip)
    if not prune:
        qm, qn, qk, sl, sp = np.meshgrid(np.arange(1, d.qm_max + 1), np.arange(1, d.qn_max + 1),
                                         np.arange(1, d.qk_max + 1), np.array(SLOTS),
                                         np.arange(1, d.split_max + 1), indexing="ij")
        tm, tn, tk = d.im * qm.ravel(), d.inn * qn.ravel(), d.ik * qk.ravel()
        sl, sp = sl.ravel(), sp.ravel()
        ok = _fits(d, tm, tn, tk, sl) & (sp <= -(-d.k // tk))
        return {"tm": tm[ok], "tn": tn[ok], "tk": tk[ok], "slots": sl[ok], "split": sp[ok]}
    c = np.arange(1, d.qm_max + 1)
    tms = np.unique(-(-(-(-d.m // c)) // d.im) * d.im)
    c = np.arange(1, d.qn_max + 1)
    tns = np.unique(-(-(-(-d.n // c)) // d.inn) * d.inn)
    TM, TN = (a.ravel() for a in np.meshgrid(tms, tns, indexing="ij"))
    ok = _fits(d, TM, TN, d.ik, SLOTS[0])
    TM, TN = TM[ok], TN[ok]
    w = (-(-d.m // TM)) * (-(-d.n // TN)) * d.batch
    S = np.arange(1, d.split_max + 1)
    ws = w[:, None] * S[None, :]
    waves = -(-ws // d.units)
    # keep s where waves/ws < min over smaller splits (integer cross-multiplication); every s where it may throttle
    keep = np.ones(ws.shape, dtype=bool)
    best_w = waves[:, 0].copy()
    best_ws = ws[:, 0].copy()
    for j in range(1, len(S) if d.throttle != "maybe" else 0):
        better = waves[:, j] * best_ws < best_w * ws[:, j]
        keep[:, j] = better
        best_w = np.where(better, waves[:, j], best_w)
        best_ws = np.where(better, ws[:, j], best_ws)
    i, j = np.nonzero(keep)
    n = len(i)
    return {"tm": TM[i], "tn": TN[i], "tk": np.full(n, d.ik), "slots": np.full(n, SLOTS[0]), "split": S[j]}


def brute_force_tiles(op: Op, chip, *, prune: bool = True, chunk: int = 200_000) -> TileChoice:
    """The oracle: every candidate of :func:`tile_candidates` through ``evaluate_arrays`` at once.

    Picks the least time, and among the tilings within TIME_RTOL of it the least off-chip traffic (then
    the smallest T_M + T_N, fewest slots, largest T_K for a canonical answer). ``info`` holds the number
    of candidates and, under 'all', every candidate's time and traffic.
    """
    start = time.perf_counter()
    chip = as_chips(chip)
    d = tile_data(op, chip)
    cand = tile_candidates(op, chip, prune=prune)
    n = len(cand["tm"])
    if n == 0:
        raise InfeasibleError(_infeasible_message(d))
    times, traffic, cr = [], [], []
    for s in range(0, n, chunk):
        r = evaluate_tiles(op, chip, cand["tm"][s:s + chunk], cand["tn"][s:s + chunk], cand["tk"][s:s + chunk],
                           cand["split"][s:s + chunk])
        times.append(r["time_s"])
        traffic.append(r["traffic_bytes"])
        cr.append(r["clock_ratio"])
    T, B, CR = np.concatenate(times), np.concatenate(traffic), np.concatenate(cr)
    tie = T <= T.min() * (1 + TIME_RTOL)
    order = np.lexsort((-cand["tk"], cand["slots"], cand["tm"] + cand["tn"], np.where(tie, B, np.inf)))
    i = int(order[0])
    return TileChoice(
        op=op.name, tm=int(cand["tm"][i]), tn=int(cand["tn"][i]), tk=int(cand["tk"][i]), slots=int(cand["slots"][i]),
        split_k=int(cand["split"][i]), time_s=float(T[i]), traffic_bytes=float(B[i]), status="BRUTE_FORCE",
        solve_time_s=time.perf_counter() - start, model_time_s=float(T[i]), clock_ratio=float(CR[i]),
        working_set_bytes=float(_working_set(d, cand["tm"][i], cand["tn"][i], cand["tk"][i], cand["slots"][i])),
        info={"candidates": n, "all": {"time_s": T, "traffic_bytes": B, **cand}},
    )
