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

Time: exactly the evaluator's per-operator time for these tiles (dse.evaluate.evaluate_arrays, one count):

    c_M = ceil(M / T_M), c_N = ceil(N / T_N)           (integer division constraints)
    work = c_M c_N batch s, waves = ceil(work / U)      (U = dies x units; wave quantization)
    t_matrix = F_pad waves / (r_unit work) x rho        (= F_pad / (rate x wave efficiency) / clock ratio)
    t_vector = t_vector(peak clock) x rho
    t_memory = (A r_A + B r_B + C + [partials > L2] P (s - 1)) / bandwidth
               r_A = min(c_N, ceil(N / t_2)) when A does not fit L2, else 1 (L2-panel re-reads; same for B)
    t_op     = max(t_matrix, t_vector, t_memory) + kernel overhead
    rho      = 1 / clock ratio = max(1, (e / b)^(1/3))  (1/p = 1 at fixed voltage), the power ceiling:
               e = energy per FLOP of the tiling (FLOPs, local-buffer bytes, L2 requests), b = the TDP budget
               per FLOP (seed 004 §4.1.3). Small tiles and deep split-K raise e and can throttle the clock.

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
  multiples of 1/32 byte), energy in 2^-40 of the op's TDP budget; :func:`to_int` does every float -> int
  conversion, rounding each constant the way that keeps the model's time a lower bound of the true time
  (exact to ~1e-7 otherwise);
* the power ceiling: 1 / clock ratio rho(E) is a cube root of the energy E, which a product formulation
  handles badly (measured: seconds per solve). So the energy range is split into regimes: A, E within the
  budget (rho = 1, exact), and B, searched in energy bands (e_lo, e_hi] that carry, under an enforcement
  literal switched on by an assumption, the bound time >= t_matrix rho(e_lo) + (C / U) x chord slope x
  (E - e_lo) (rho is concave, so its chord lies below it). B is capped at the energy where even perfect
  waves could not beat the best time. A band solution is checked with the evaluator, its class recorded and
  forbidden (``add_forbidden_assignments``), and the band split at its energy until every band is
  infeasible or its solution meets the band's bound (see :func:`solve_tiles`). On the catalog chips one or
  two solves per phase; without a TDP (or when no tiling can exceed it) regime A is everything;
* the cheapest tile of a class (c_M, c_N, s) (smallest T_M, T_N with those counts) is never slower and
  never moves more bytes than the others, so candidates are evaluated at it;
* lexicographic objective by two phases on one model: minimize time; then cap time at the fastest
  x (1 + TIME_RTOL) and minimize bytes. 1 worker, a time limit; each solve tries CP search without the
  LP relaxation first, then with it (:data:`SOLVE_PLAN`). OPTIMAL and FEASIBLE are accepted; any other
  status is reported by name in a SolverError. ``status`` 'OPTIMAL' means every solve was proven.

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
from dse.evaluate import _format_rate, evaluate_arrays, op_table
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model import power as pw
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
#: CP-SAT attempts per solve: (linearization level, deterministic s, wall s); the last gets the rest of the limit.
#: Level 0 (no LP) proves most instances in a few ms; a few need the LP bound (level 1) and would run for
#: seconds without it, while level 1 alone has seconds-long tails on others (measured on 400 GEMMs x 5 chips).
#: A slice ends at its deterministic-time budget (load-independent) or its wall-clock budget, whichever is first.
SOLVE_PLAN = ((0, 0.05, 0.25), (1, None, None))
#: Fixed-point bits of the chord slope of the clock bound in an energy band (see _TileModel.band).
CHORD_BITS = 30
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

    ``time_s`` and ``traffic_bytes`` are the evaluator's t_op and off-chip bytes for exactly these
    tiles; ``model_time_s`` is the CP-SAT model's time for them (its integer objective scaled back; equal
    to ``time_s`` within ~1e-7 where the clock does not throttle, a lower bound where it does). ``status``
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
    kernel_overhead: float
    # memory
    a_mem: float
    b_mem: float
    c_mem: float
    ra_cap: int | None           # r_A = min(c_N, ra_cap); None: A fits L2, r_A = 1
    rb_cap: int | None
    partial_bytes: float         # 8 M N batch per extra split
    partial_split: int           # partials go to memory from this split on
    bandwidth: float
    # power ceiling
    budget: float                # J/FLOP at peak rate; inf: no TDP
    power_exponent: int          # 3: voltage scales with clock, 1: fixed voltage
    e_fixed: float               # J of FLOPs, vector work and the C write through L2 (tile-independent)
    e_local: float               # J per unit of (T_M + T_N) c_M c_N
    e_a: float                   # J per c_N (A requests)
    e_b: float                   # J per c_M (B requests)
    e_split: float               # J per extra split (partial sums requested through L2)
    t_upper: float = math.inf    # s: the evaluator's busy time of a known feasible tiling (bounds the optimum)

    @property
    def throttle(self) -> str:
        """'never' (no TDP or never exceeded on the domain), 'always' (no budget left), or 'maybe'."""
        if not math.isfinite(self.budget):
            return "never"
        if self.budget <= 0:
            return "always"
        return "maybe" if self.e_max > self.budget * self.padded_flops else "never"

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
        t = self.throttle
        if t == "never":
            return 1.0
        if t == "always":
            return 1e6  # the evaluator floors the clock ratio at 1e-6
        return max(1.0, (self.e_max / (self.budget * self.padded_flops)) ** (1.0 / self.power_exponent))


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
    fpad = float(ref["_ops"]["padded_flops"][0, 0])
    tv = float(ref["_ops"]["t_vector"][0, 0] * ref["clock_ratio"][0])  # at peak clock
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
    # power ceiling (seed 004 §4.1.3), one operator: budget b = (TDP - static - P_mem) / peak rate
    tdp = g("tdp", math.inf)
    rate = units * fpc * clock
    bw_raw = g("memory.bandwidth") * g("calibration.bandwidth_efficiency", 1.0)
    p_mem = float(pw.memory_power(bw_raw, g("energy.memory")))
    budget = float(pw.energy_budget_per_flop(tdp, rate, p_mem, g("power.static"))) if math.isfinite(tdp) else math.inf
    e_loc, e_l2 = g("energy.local"), g("energy.l2")
    emax = max(ea, eb)
    qk_max = _ceil_div(k, ik)
    data = TileData(
        op=op, m=m, n=n, k=k, batch=batch, im=im, inn=inn, ik=ik, units=units,
        qm_max=_ceil_div(m, im), qn_max=_ceil_div(n, inn), qk_max=qk_max, split_max=max(1, min(units, qk_max)),
        ea=ea, eb=eb, emax=emax,
        local_buffer=g("local_buffer"), accumulator=g("accumulator"), register_file=g("register_file"),
        padded_flops=fpad, unit_rate=fpc * clock * ceff, t_vector=tv,
        kernel_overhead=g("calibration.kernel_overhead"),
        a_mem=a_mem, b_mem=b_bytes, c_mem=c_mem, ra_cap=ra_cap, rb_cap=rb_cap,
        partial_bytes=pbytes, partial_split=s0, bandwidth=bw,
        budget=budget, power_exponent=3 if g("power.voltage_scaling", 1.0) > 0.5 else 1,
        e_fixed=fpad * e_flop + (vf + ex) * g("energy.vector_flop") + e_l2 * c_bytes,
        e_local=e_loc * k * emax * batch,
        e_a=e_l2 * a_bytes, e_b=e_l2 * b_bytes, e_split=e_l2 * pbytes,
    )
    ok = _fits(data, probe_m, probe_n, ik, SLOTS[0])
    t_upper = float(np.min(ref["_ops"]["t_op"][ok, 0])) - data.kernel_overhead if ok.any() else math.inf
    return replace(data, t_upper=t_upper)


def _powers(q: int, x: int) -> np.ndarray:
    """q, 2q, 4q, ... up to the padded extent pad(x, q) (included): probe tile sizes."""
    top = _pad(x, q)
    return np.unique(np.minimum([q << i for i in range(0, 16) if (q << i) < 2 * top], top))


# ------------------------------------------------------------------ the evaluator on candidate tiles


def evaluate_tiles(op: Op, chip, tm, tn, tk, split, *, full: bool = False) -> dict[str, np.ndarray]:
    """The evaluator on a batch of candidate tiles: per candidate t_op (s), off-chip bytes, clock ratio.

    One call to ``evaluate_arrays`` with the chip repeated once per candidate and the operator alone
    (one count). The tile solver checks its answers with this; the brute force is this over the domain.
    ``full``: return the evaluator's whole output (breakdown included) instead.
    """
    chips = as_chips(chip)
    arrs = [np.atleast_1d(np.asarray(v, dtype=float)) for v in (tm, tn, tk, split)]
    tm, tn, tk, split = np.broadcast_arrays(*arrs)
    n = len(tm)
    batch = chips.take(np.zeros(n, dtype=np.int64))
    out = evaluate_arrays(batch, _alone(op), tiles=(tm[:, None], tn[:, None], tk[:, None], split[:, None]),
                          breakdown=True)
    if full:
        return out
    ops = out["_ops"]
    return {"time_s": ops["t_op"][:, 0], "traffic_bytes": ops["bytes_memory"][:, 0],
            "clock_ratio": out["clock_ratio"]}


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

    The time link built in is the relaxation rho = 1 (clock ratio 1), a lower bound everywhere and exact
    wherever the clock does not throttle. :meth:`band` adds, under an enforcement literal, the tighter link of
    one energy band (the tiling's energy per FLOP in an interval, hence a clock-ratio bound); a solve turns
    one band on through an assumption. Constraints that the phases add (time caps, forbidden classes) are
    valid for the rest of the search, so the model is never rebuilt.
    """

    def __init__(self, d: TileData):
        self.d = d
        self._scales()
        self.model = cp_model.CpModel()
        self.v: dict[str, cp_model.IntVar] = {}
        self.hi: dict[str, int] = {}  # upper bound of each variable
        self._bands: dict[tuple[int, int], cp_model.IntVar] = {}
        self._variables()
        self._constraints()

    # ---- scaling: one time unit, one byte scale, one energy unit (every conversion through to_int)
    def _scales(self):
        d = self.d
        self.rho_const = 1e6 if d.throttle == "always" else 1.0  # the evaluator floors the clock ratio at 1e-6
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
        if d.throttle == "maybe":
            ratio_max = d.e_max / (d.budget * d.padded_flops)
            self.e_bits = min(40, 60 - math.ceil(math.log2(ratio_max)))
            self.e_unit = d.budget * d.padded_flops / 2**self.e_bits  # J per energy unit
            self.e_budget = 2**self.e_bits  # the TDP budget of this operator, in energy units

    def rho_at(self, energy_units: int) -> float:
        """1 / clock ratio at ``energy_units`` (a lower bound for every tiling at or above that energy)."""
        if self.d.throttle != "maybe":
            return 1.0
        return max(1.0, energy_units / self.e_budget) ** (1.0 / self.d.power_exponent)

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

    def time_of(self, cm: int, cn: int, split: int) -> float:
        """The model's time (s) of a class at the peak clock: its least integer time, scaled back."""
        d = self.d
        work = cm * cn * d.batch * split
        waves = _ceil_div(work, d.units)
        t = max(_ceil_div(self.c_matrix(1.0) * waves, work), _ceil_div(self.bytes_of(cm, cn, split), self.bw_q),
                self.c_vector(1.0), self.t_lo)
        return t * self.q

    def _energy(self) -> cp_model.IntVar:
        """energy = (FLOPs + local-buffer bytes + L2 requests) J / energy unit, coefficients rounded down.

        Built on first use: only a search that needs energy bands pays for it.
        """
        if "energy" in self.v:
            return self.v["energy"]
        d, m, v = self.d, self.model, self.v
        tmn = self._var("t_m_plus_t_n", d.im + d.inn, d.im * d.qm_max + d.inn * d.qn_max)
        m.add(tmn == v["t_m"] + v["t_n"])
        local = self._var("local_units", 0, d.p_max)
        m.add_multiplication_equality(local, [v["tiles"], tmn])
        u = self.e_unit
        k_fix, k_loc = to_int(d.e_fixed, u, "down"), to_int(d.e_local, u, "down")
        k_a, k_b, k_s = to_int(d.e_a, u, "down"), to_int(d.e_b, u, "down"), to_int(d.e_split, u, "down")
        self._k = {"fix": k_fix, "loc": k_loc, "a": k_a, "b": k_b, "s": k_s}
        hi = k_fix + k_loc * d.p_max + k_a * d.qn_max + k_b * d.qm_max + k_s * (d.split_max - 1)
        energy = self._var("energy", 0, hi)
        m.add(energy == k_fix + k_loc * local + k_a * v["c_n"] + k_b * v["c_m"] + k_s * (v["split"] - 1))
        return energy

    def band(self, lo: int, hi: int) -> cp_model.IntVar:
        """Literal of energy band (lo, hi]: the energy in it, and the band's clock-ratio lower bound on time.

        1 / clock ratio is concave in the energy (a cube root), so on [lo + 1, hi] it lies above its chord:
        rho(E) >= rho_lo + s (E - lo - 1) with rho_lo = rho(lo + 1), s the chord's slope. With t_matrix at
        peak clock >= C / U (perfect waves), time >= t_matrix rho >= t_matrix rho_lo + (C / U) s (E - lo - 1):
        ``(time - chord) x work >= C rho_lo x waves`` with chord = ceil(kappa (E - lo - 1)) - 1, kappa rounded
        down. Without the chord term the band would only know rho_lo, and a band just above the budget
        would know nothing.
        """
        key = (lo, hi)
        if key not in self._bands:
            m, v, d = self.model, self.v, self.d
            energy = self._energy()
            if "chord" not in v:  # shared by every band: time - chord, and its product with work
                self._var("chord", 0, self.t_hi)
                self._var("time_less_chord", 0, self.t_hi)
                self._var("time_less_chord_x_work", 0, self.t_hi * self.hi["work"])
                m.add_multiplication_equality(v["time_less_chord_x_work"], [v["time_less_chord"], v["work"]])
            lit = m.new_bool_var(f"band_{lo}_{hi}[{d.op.name}]")
            rho = self.rho_at(lo + 1)
            m.add(energy >= lo + 1).only_enforce_if(lit)
            m.add(energy <= hi).only_enforce_if(lit)
            slope = (self.rho_at(hi) - rho) / max(hi - lo - 1, 1)  # per energy unit
            bits = min(CHORD_BITS, 61 - self.t_hi.bit_length())  # 2^bits x chord stays below 2^61
            kappa = to_int(self.c_float / d.units / self.q * slope * 2**bits, rounding="down")
            m.add(2**bits * v["chord"] >= kappa * (energy - lo - 1) - 2**bits + 1).only_enforce_if(lit)
            m.add(v["time_less_chord"] == v["time"] - v["chord"]).only_enforce_if(lit)
            m.add(v["time_less_chord_x_work"] >= self.c_matrix(rho) * v["waves"]).only_enforce_if(lit)
            if self.c_vector(rho) > 0:
                m.add(v["time"] >= self.c_vector(rho)).only_enforce_if(lit)
            self._bands[key] = lit
        return self._bands[key]

    @property
    def energy_hi(self) -> int:
        """Upper bound of the energy variable (builds the energy constraints on first use)."""
        self._energy()
        return self.hi["energy"]

    def energy_of(self, solver) -> int:
        """The energy (in energy units) of a solver's solution, by the model's own integer formula."""
        d, v = self.d, self.v
        self._energy()
        val = {k: int(solver.value(v[k])) for k in ("t_m", "t_n", "c_m", "c_n", "split")}
        local = val["c_m"] * val["c_n"] * (val["t_m"] + val["t_n"])
        return (self._k["fix"] + self._k["loc"] * local + self._k["a"] * val["c_n"] + self._k["b"] * val["c_m"]
                + self._k["s"] * (val["split"] - 1))


def _split(lo: int, hi: int, e_x: int) -> list[tuple[int, int]]:
    """Energy band (lo, hi] split at a solution's energy e_x: (lo, e_x - 1] and (e_x - 1, hi], non-empty ones."""
    out = []
    if e_x - 1 > lo:
        out.append((lo, e_x - 1))
    if hi > e_x - 1:
        out.append((max(lo, e_x - 1), hi))
    return out


class _Search:
    """Solves one operator's model and checks candidates with the evaluator (see :func:`solve_tiles`)."""

    def __init__(self, tmod: _TileModel, op: Op, chips: Chips, time_limit_s: float, seed: int, start: float):
        self.t, self.op, self.chips = tmod, op, chips
        self.limit, self.seed, self.start = time_limit_s, seed, start
        self.solves = 0
        self.statuses: list[str] = []
        self.times: list[float] = []
        self.cap = None  # literal of the current time cap (assumed while it is set)
        # class (c_M, c_N, split) -> the evaluator on its cheapest tile: (busy time, traffic, record)
        self.cost: dict[tuple[int, int, int], tuple[float, float, dict]] = {}

    def solve(self, band: tuple[int, int] | None = None):
        """Solve the model (with one energy band on); the solver on OPTIMAL / FEASIBLE, None on INFEASIBLE.

        Tries :data:`SOLVE_PLAN` in order: CP search without the LP relaxation first (fast on almost every
        instance), then with it (which some instances need to bound the objective), each later attempt
        hinted with the best solution so far; the last attempt gets what is left of the time limit.
        """
        model, v = self.t.model, self.t.v
        model.clear_assumptions()
        lits = ([self.cap] if self.cap is not None else []) + ([self.t.band(*band)] if band is not None else [])
        if lits:
            model.add_assumptions(lits)
        model.clear_hints()
        name, solver, wall = "UNKNOWN", None, 0.0
        for i, (level, det_s, wall_s) in enumerate(SOLVE_PLAN):
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
        faster or moves fewer bytes than its cheapest tile.
        """
        if cls not in self.cost:
            d = self.t.d
            tm, tn = _class_min(d, cls[0], cls[1])
            tk = _canonical_tk(d, tm, tn, cls[2], SLOTS[0])
            r = evaluate_tiles(self.op, self.chips, tm, tn, tk, cls[2])
            rec = {"tm": tm, "tn": tn, "tk": tk, "time_s": float(r["time_s"][0]),
                   "traffic_bytes": float(r["traffic_bytes"][0]), "clock_ratio": float(r["clock_ratio"][0])}
            self.cost[cls] = (rec["time_s"] - d.kernel_overhead, rec["traffic_bytes"], rec)
            v = self.t.v
            self.t.model.add_forbidden_assignments([v["c_m"], v["c_n"], v["split"]], [cls])
        return self.cost[cls][:2]


def solve_tiles(op: Op, chip, *, time_limit_s: float = 10.0, seed: int = 0) -> TileChoice:
    """Tiles of ``op`` on ``chip`` that minimize the evaluator's time, then off-chip traffic (CP-SAT).

    ``chip``: a catalog name, a ChipSpec or a one-point Chips. ``time_limit_s`` bounds the wall-clock time
    of all solves together. Raises InfeasibleError when no tile fits (the message names the limit), and
    SolverError on a CP-SAT status other than OPTIMAL / FEASIBLE / INFEASIBLE, or when the model and the
    evaluator disagree where the model is exact (a formula changed on one side).

    Each phase solves regime A (the tiling's energy per FLOP within the TDP budget: the clock does not
    throttle and the model is exact), then proves regime B (the clock throttles) cannot do better: B is
    searched in energy bands (e_lo, e_hi], each with the clock-ratio bound rho(e_lo) and capped at the
    energy above which even a perfect wave could not beat the best time; a band's solution is evaluated,
    recorded and forbidden, and the band split at its energy, until every band is infeasible or meets its
    bound. Without a TDP (or when no tiling can exceed it) there is one regime and one solve per phase.

    Phase 1: minimize time. Phase 2: with time capped at the fastest x (1 + TIME_RTOL), minimize off-chip
    bytes (each solve asks for strictly fewer bytes than the best tie so far).
    """
    start, cpu0 = time.perf_counter(), time.process_time()
    chips = as_chips(chip)
    d = tile_data(op, chips)
    tm_ = _TileModel(d)
    v, q, model = tm_.v, tm_.q, tm_.model
    S = _Search(tm_, op, chips, time_limit_s, seed, start)
    maybe = d.throttle == "maybe"
    regime_a = (-1, tm_.e_budget) if maybe else None

    def e_cap(t_s: float) -> int:
        """Above this energy, rho > t_s / (matrix time with perfect waves): no tiling there is faster than t_s."""
        cap = tm_.e_budget * (t_s * d.units / tm_.c_float) ** d.power_exponent
        return tm_.energy_hi if cap >= tm_.energy_hi else to_int(cap, rounding="up")

    def check_exact(solver, cls, t_c):
        """Where the model is exact, the evaluator must agree with it (a guard against either side changing)."""
        bound = (solver.best_objective_bound - 1) * q
        if t_c < bound * (1 - 1e-9) or t_c > (solver.objective_value + 1) * q * (1 + TIME_RTOL):
            raise SolverError(f"tiles of {op.name}: the evaluator's time {t_c:.9g} s for class {cls} (c_M, c_N, "
                              f"split) disagrees with the tile model's {solver.objective_value * q:.9g} s where the "
                              f"model is exact; did a formula of dse.evaluate change?")

    # ---- phase 1: the least time
    model.minimize(v["time"])
    best_cls, best_t = None, math.inf
    solver = S.solve(regime_a)
    if solver is not None:
        best_cls = S.cls(solver)
        best_t = S.record(best_cls)[0]
        check_exact(solver, best_cls, best_t)
    if maybe:
        stack = [(tm_.e_budget, tm_.energy_hi)]
        while stack:
            lo, hi = stack.pop()
            if math.isfinite(best_t):
                S.cap = model.new_bool_var(f"time_cap_{S.solves}[{op.name}]")  # strictly faster than the best
                model.add(v["time"] <= to_int(best_t * (1 - TIME_RTOL), q, "down") + 1).only_enforce_if(S.cap)
                hi_eff = min(hi, e_cap(best_t))
            else:
                hi_eff = hi
            if hi_eff <= lo:
                continue
            solver = S.solve((lo, hi_eff))
            if solver is None:
                continue
            cls = S.cls(solver)
            t_c = S.record(cls)[0]
            if t_c < best_t:
                best_cls, best_t = cls, t_c
            if t_c <= (solver.best_objective_bound - 1) * q * (1 + TIME_RTOL):
                continue  # the band's optimum meets its lower bound: nothing in it is faster
            stack.extend(_split(lo, hi_eff, tm_.energy_of(solver)))
        S.cap = None
    if best_cls is None:
        raise InfeasibleError(_infeasible_message(d))

    # ---- phase 2: the least off-chip traffic among tilings within TIME_RTOL of the fastest
    limit = best_t * (1 + TIME_RTOL)
    model.add(v["time"] <= to_int(limit, q, "down") + 1)
    model.minimize(v["bytes"])
    ties = [c for c, (t_c, _, _) in S.cost.items() if t_c <= limit]
    best_b = min(S.cost[c][1] for c in ties)

    def fewer_bytes():
        model.add(v["bytes"] <= to_int(best_b * tm_.sb, rounding="up") - 1)

    def tie(solver) -> bool:
        nonlocal best_b
        cls = S.cls(solver)
        t_c, b_c = S.record(cls)
        if t_c > limit:
            return False
        ties.append(cls)
        if b_c < best_b:
            best_b = b_c
            fewer_bytes()
        return True

    fewer_bytes()
    while (solver := S.solve(regime_a)) is not None:  # regime A: a non-tie here is only rounding slack
        tie(solver)
    if maybe:
        stack = [(tm_.e_budget, min(tm_.energy_hi, e_cap(limit)))]
        while stack:
            lo, hi = stack.pop()
            if hi <= lo or (solver := S.solve((lo, hi))) is None:
                continue
            if tie(solver):
                stack.append((lo, hi))  # again, for fewer bytes still
            else:
                stack.extend(_split(lo, hi, tm_.energy_of(solver)))
    final = min(ties, key=lambda c: (S.cost[c][1], S.cost[c][0]))

    # ---- extract: the class's cheapest tile, as evaluated (2 slots, the largest T_K)
    rec = S.cost[final][2]
    status = "OPTIMAL" if all(s in ("OPTIMAL", "INFEASIBLE") for s in S.statuses) else "FEASIBLE"
    return TileChoice(
        op=op.name, tm=int(rec["tm"]), tn=int(rec["tn"]), tk=int(rec["tk"]), slots=SLOTS[0], split_k=int(final[2]),
        time_s=rec["time_s"], traffic_bytes=rec["traffic_bytes"], status=status,
        model_time_s=tm_.time_of(*final) + d.kernel_overhead,
        solve_time_s=time.perf_counter() - start, cpu_time_s=time.process_time() - cpu0, clock_ratio=rec["clock_ratio"],
        working_set_bytes=float(_working_set(d, rec["tm"], rec["tn"], rec["tk"], SLOTS[0])), solves=S.solves,
        info={"time_unit_s": q, "byte_scale": tm_.sb, "statuses": tuple(S.statuses),
              "classes_checked": len(S.cost), "energy_bands": len(tm_._bands), "solve_wall_s": tuple(S.times)},
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
    shapes and formats) are solved once. Each operator's tiles are optimal for that operator run alone;
    in a workload the evaluator derives one sustained clock from all operators' energy, so where the
    power ceiling binds, the workload's clock (and time) can differ from the sum of the per-operator optima.
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
        ceil(w s / U) / (w s): only splits that strictly improve that ratio over every smaller split remain.
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
    # keep s where waves/ws < min over smaller splits (integer cross-multiplication)
    keep = np.ones(ws.shape, dtype=bool)
    best_w = waves[:, 0].copy()
    best_ws = ws[:, 0].copy()
    for j in range(1, len(S)):
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
    busy = T - d.kernel_overhead
    tie = busy <= busy.min() * (1 + TIME_RTOL)
    order = np.lexsort((-cand["tk"], cand["slots"], cand["tm"] + cand["tn"], np.where(tie, B, np.inf)))
    i = int(order[0])
    return TileChoice(
        op=op.name, tm=int(cand["tm"][i]), tn=int(cand["tn"][i]), tk=int(cand["tk"][i]), slots=int(cand["slots"][i]),
        split_k=int(cand["split"][i]), time_s=float(T[i]), traffic_bytes=float(B[i]), status="BRUTE_FORCE",
        solve_time_s=time.perf_counter() - start, model_time_s=float(T[i]), clock_ratio=float(CR[i]),
        working_set_bytes=float(_working_set(d, cand["tm"][i], cand["tn"][i], cand["tk"][i], cand["slots"][i])),
        info={"candidates": n, "all": {"time_s": T, "traffic_bytes": B, **cand}},
    )
