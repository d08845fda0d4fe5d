"""The data step of the CP-SAT tile model: one operator's constants on one chip, and the evaluator hooks.

:func:`tile_data` reads every constant of an operator's tile problem off the evaluator's op table and chip
arrays and computes the tile-level quantities with the rules of :mod:`dse.model.tiling` (L2 panels and
re-reads, split-K partial sums, working sets), :mod:`dse.model.links` (the Little's-law bandwidth cap)
and :mod:`dse.model.power` (memory power, the clock floor): the same functions the evaluator runs, so the
CP-SAT model (:mod:`dse.solvers.tile_model`) takes its integer coefficients from them.
:func:`evaluate_tiles` is the evaluator on a batch of candidate tilings (the check of every CP-SAT answer,
and the brute-force oracle of :mod:`dse.solvers.tile_candidates`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from dse.errors import InfeasibleError, SpecError
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model import hierarchy, links, power, tiling
from dse.model.evaluator import evaluate_workload, matrix_rate, op_table, power_inputs, register_bytes_per_flop
from dse.workload import Op, Workload

__all__ = ["SLOTS", "TIME_RTOL", "BYTES_RTOL", "MAX_SOLVES", "RHO_FLOOR", "TileChoice", "TileData", "tile_data", "evaluate_tiles",
           "as_chips", "working_set", "accumulator_bytes", "fits", "canonical_tk", "class_min",
           "infeasible_message"]

#: Input slots the model may choose (see dse.solvers.cpsat_tiles, "Slots").
SLOTS = (2, 3, 4)
#: Relative time difference below which two tilings count as equally fast (the traffic tie-break applies).
TIME_RTOL = 1e-6
#: Relative difference below which two tilings' off-chip bytes count as equal (the energy tie-break applies).
BYTES_RTOL = 1e-9
#: Solves of one operator's tiles at most. Where the clock throttles, tilings whose energies differ by parts
#: per thousand have times that differ as little, and proving each of them apart took hundreds of solves (tens
#: of seconds: 550 for a 256x4096x4096 BF16 GEMM on H100, whose answer after 13 solves was within 0.01% of the
#: final one). Past this count the evaluator enumerates the tile domain (dse.solvers.tile_candidates, vectorized:
#: 0.05-0.2 s there) and the better of the two answers stands; ``info['truncated']`` says so.
MAX_SOLVES = 16
#: 1 / clock ratio at the lowest clock the evaluator models (dse.model.power.MIN_CLOCK_RATIO).
RHO_FLOOR = 1.0 / power.MIN_CLOCK_RATIO


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
    machine does not inflate). ``energy_j``: the evaluator's energy of one count on these tiles.
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
    energy_j: float = math.nan
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
    ra_cap: int                  # r_A = min(ceil(c_N / b), ra_cap) for a block of b tile columns; 1: A fits L2
    rb_cap: int
    block_span: float            # tiling.block_span: the most tile rows (columns) a concurrent block spans
    beyond_model: str            # why the tile model cannot answer ('': it can): cache levels it does not have
    partial_bytes: float         # 8 M N batch per extra split
    partial_split: int           # partials go to memory from this split on
    bandwidth: float
    # power ceiling (per operator, seed 004 §4.1.3)
    power_budget: float          # W: TDP - the fixed power at the design clock; inf: no TDP
    band_budget: float           # W: TDP - the fixed power at the lowest clock (the most any clock leaves)
    e_mem: float                 # J per off-chip byte
    power_exponent: int          # 3: voltage scales with clock, 1: fixed voltage (band-splitting tolerance only)
    e_fixed: float               # J of FLOPs, vector work and the C write through L2 (tile-independent)
    e_local: float               # J per unit of (T_M + T_N) c_M c_N
    e_a: float                   # J per c_N (A requests)
    e_b: float                   # J per c_M (B requests)
    e_split: float               # J per extra split (partial sums requested through L2)
    # on-chip levels (dse.model.hierarchy; 0 rate: the level is not there or not limited)
    l2_rate: float = 0.0         # B/s the L2 delivers at the peak clock (all dies)
    loc_rate: float = 0.0        # B/s one unit's local buffer delivers at the peak clock
    rm: int = 0                  # register tile rows (0: a systolic array, which reads its weights once per tile)
    rn: int = 1                  # register tile columns
    mcast: int = 1               # units that share an L2 request by multicast
    a_l2: float = 0.0            # A bytes requested from L2 per request count (0: A stays on chip)
    a_once: bool = False         # A requested once (a fused attention kernel's query tile)
    b_l2: float = 0.0            # B bytes per request count (x the visible share of causal tiles)
    c_l2: float = 0.0            # C bytes written through L2
    ea_loc: float = 0.0          # A bytes per element the matrix unit reads from the local buffer (0: in registers)
    visible: float = 1.0         # share of the tiles computed (causal attention)
    e_reads_max: float = 0.0     # J: an upper bound of the local buffer's read energy over the domain
    e_loc_byte: float = 0.0      # J per local-buffer byte (0 without the level)
    reads_lb: float = 0.0        # B: a lower bound of the local reads over the domain (its energy is in e_fixed)
    reads_max: float = 0.0       # B: an upper bound of the local reads over the domain
    t_upper: float = math.inf    # s: the evaluator's time of a known feasible tiling (bounds the optimum)
    law: object = None           # the chip's dse.model.power.ClockLaw (scalars): dynamic power vs clock

    def rho_of_u(self, u: float) -> float:
        """1 / clock ratio of compute power u x the room (u >= 1): the power ceiling's rule (seed 004 §4.1.3,
        dse.model.power.sustained_clock_ratio) at a room that the memory's power does not shrink."""
        return 1.0 / float(power.sustained_clock_ratio(1.0, u, self.law))

    def u_of_rho(self, rho: float) -> float:
        """The proxy power ratio whose clock is 1 / rho: 1 / g(1 / rho) (the inverse of :meth:`rho_of_u`)."""
        return 1.0 / float(self.law.power_ratio(1.0 / rho))

    @property
    def t_compute(self) -> float:
        """K = max(t_c1, t_vector) at the peak clock: the least compute-busy time of any tiling (perfect waves)."""
        return max(self.padded_flops / (self.unit_rate * self.units), self.t_vector)

    @property
    def p_mem_max(self) -> float:
        """W: the most memory power an operator draws (its traffic at the full effective bandwidth)."""
        return float(power.memory_power(self.bandwidth, self.e_mem))

    @property
    def throttle(self) -> str:
        """'never' (no TDP, or no tiling can exceed it) or 'maybe'.

        At the peak clock the compute units draw p_comp = E_compute / busy_c <= e_max / K (busy_c >= K) and the
        memory p_mem = E_mem / t_busy1 <= bandwidth x e_mem (t_busy1 >= t_memory): below the budget together,
        no tiling throttles.
        """
        if not math.isfinite(self.power_budget) or self.e_max <= 0:
            return "never"
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
                + self.e_split * (self.split_max - 1) + self.e_reads_max)

    # ---- the on-chip levels of a class's tiles, by the evaluator's rules (dse.model.hierarchy)
    def l2_requests(self, cm, cn) -> tuple[float, float]:
        """(r_A, r_B): panel requests of the class from L2 (multicast within a cluster; A once when a_once)."""
        ra, rb = hierarchy.cluster_requests(self.a_l2, self.b_l2, cm, cn, self.mcast)
        return (1.0 if self.a_once else float(ra)), float(rb)

    def l2_bytes(self, cm, cn, split) -> float:
        """Bytes the local buffers read from L2 (the evaluator's bytes_l2 of one count)."""
        ra, rb = self.l2_requests(cm, cn)
        return (self.a_l2 * ra + self.b_l2 * rb + self.c_l2
                + float(tiling.partial_sum_bytes(self.m, self.n, self.batch, float(split))))

    def reads_per_k(self, tm, tn) -> float:
        """Bytes the matrix unit reads from the local buffer per tile and K element:
        T_M ceil(T_N / R_N) e_A + T_N ceil(T_M / R_M) e_B (:func:`dse.model.hierarchy.local_read_bytes`)."""
        rm = tm if self.rm == 0 else self.rm
        return float(hierarchy.local_read_bytes(1.0, 1.0, tm, tn, rm, self.rn, self.ea_loc, self.eb))

    def local_time(self, tm, tn, split) -> float:
        """s: the local buffer's time of a tiling at the peak clock, wave by wave (0 without the level)."""
        if self.loc_rate <= 0:
            return 0.0
        work = tiling.ceil_div_core(self.m, tm) * tiling.ceil_div_core(self.n, tn) * self.batch * split
        waves = tiling.waves(work, self.units)
        return float(self.visible * self.k * self.reads_per_k(tm, tn) * waves / (split * self.loc_rate))

    def tile_energy(self, cm, cn, split) -> float:
        """J of the tile-dependent energy of a class's cheapest tile: local-buffer fills and reads beyond the
        constant lower bound in e_fixed, L2 panel requests, partial sums (at the design clock's voltage)."""
        tm, tn = class_min(self, cm, cn)
        ra, rb = self.l2_requests(cm, cn)
        reads = self.batch * self.visible * self.k * cm * cn * self.reads_per_k(tm, tn)
        return (self.e_local * (tm + tn) * cm * cn + self.e_loc_byte * (reads - self.reads_lb)
                + self.e_a * ra + self.e_b * rb + self.e_split * (split - 1))


    @property
    def rho_max(self) -> float:
        """Upper bound of 1 / clock ratio over the domain (the evaluator holds the clock at >= MIN_CLOCK_RATIO)."""
        t = self.throttle
        if t == "never":
            return 1.0
        room = self.power_budget - self.p_mem_max
        if room <= 0:
            return RHO_FLOOR
        u = self.e_max / (self.t_compute * room)
        return min(RHO_FLOOR, self.rho_of_u(max(1.0, u)))


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
    fpc, e_flop, dequant, value_bytes = (float(v[0]) for v in matrix_rate(chips, t.rate_keys[0]))
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
    vf, ex = float(t.vector_flops[0] + dequant * t.dequant_flops[0]), float(t.exps[0])
    if not math.isfinite(tv):
        raise SpecError(f"op {op.name}: vector work on a chip without a vector unit")
    # memory (seed 004 §4.3.2, §4.4.1): L2 panels, partial sums, Little's-law bandwidth cap -- the evaluator's
    # rules (dse.model.tiling, dse.model.links) at this operator's constants
    l2 = g("l2") * g("dies", 1.0)
    ea, eb = float(t.ea[0]), float(t.eb[0])
    t2 = float(tiling.l2_panel(l2, float(k), ea, eb))
    a_bytes, b_bytes, c_bytes = float(t.a_bytes[0]), float(t.b_bytes[0]), float(t.c_bytes[0])
    a_mem = 0.0 if bool(t.on_chip_a[0]) else a_bytes
    c_mem = 0.0 if bool(t.on_chip_c[0]) else c_bytes
    # r_A = ceil(N / max(T_N, t_2)) = min(c_N, ceil(N / t_2)) where A does not fit L2; the cap is 1 where it does
    ra_cap = int(tiling.operand_reads(a_bytes, float(n), 1.0, t2, l2))
    rb_cap = int(tiling.operand_reads(b_bytes, float(m), 1.0, t2, l2))
    pbytes = float(tiling.partial_sum_bytes(float(m), float(n), float(batch), 2.0))  # per extra split
    s0 = int(tiling.partial_sum_splits(l2, float(m), float(n), float(batch))) + 1  # the first split that spills

    def spills(s: int) -> bool:  # the evaluator's float test: partial sums beyond the L2
        return bool(tiling.partial_sum_bytes(float(m), float(n), float(batch), float(s)) > l2)

    while s0 > 2 and spills(s0 - 1):
        s0 -= 1
    while not spills(s0):
        s0 += 1
    bw = float(links.effective_bandwidth(g("memory.bandwidth") * g("calibration.bandwidth_efficiency", 1.0),
                                         g("memory_system.outstanding"), g("memory_system.transaction", 128.0),
                                         g("memory_system.latency")))
    # power ceiling (seed 004 §4.1.3), per operator: TDP - the fixed power (leakage and clock) is shared by compute
    # and memory; the evaluator's own chip power inputs (dse.model.evaluator.power_inputs) and voltage law
    pin = power_inputs(chips, most=False)
    tdp = float(pin["tdp_limit"][0])
    p_budget = tdp - float(pin["fixed1"][0]) if math.isfinite(tdp) else math.inf
    law = power.ClockLaw(float(pin["d"][0]), float(pin["v_min"][0]), float(pin["v_nom"][0]), float(pin["v_th"][0]),
                         g("power.voltage_scaling", 1.0) > 0.5)
    floor_w = float(power.fixed_power(float(pin["leak"][0]), float(pin["clk"][0]), law, power.MIN_CLOCK_RATIO))
    band_budget = tdp - floor_w if math.isfinite(tdp) else math.inf
    if band_budget <= 0:
        raise InfeasibleError(f"op {op.name}: the chip's leakage and clock power, {floor_w:.1f} W even at its lowest "
                              f"clock, leave nothing of its TDP {tdp:.1f} W (raise the TDP or lower the leakage)")
    s1 = float(power.dynamic_energy_scale(law.v1, float(pin["v_nom"][0])))  # energies at the design voltage
    # the on-chip levels (dse.model.hierarchy): a level exists where it has capacity; the evaluator's rules
    has_l2, has_loc = l2 > 0, g("local_buffer") > 0
    e_loc = g("energy.local") * s1 if has_loc else 0.0
    e_l2 = g("energy.l2") * s1 if has_l2 else 0.0
    e_flop, e_vec = e_flop * s1, g("energy.vector_flop") * s1
    e_reg = g("energy.register_file") * s1 * float(register_bytes_per_flop(chips, value_bytes)[0])  # J/FLOP
    vis = float(ref.operators.visible[0, 0])
    a_once = bool(t.on_chip_c[0])  # a fused QK keeps its query tile over the key loop (the evaluator's rule)
    a_l2, b_l2 = a_mem, b_bytes * vis
    ea_loc = 0.0 if bool(t.on_chip_a[0]) else ea
    systolic = g("matrix.systolic") > 0.5
    rm = 0 if systolic else max(int(g("matrix.register_tile.m", im)), im)
    rn = max(int(g("matrix.register_tile.n", inn)), inn)
    # local reads: c_M c_N T_M ceil(T_N / R_N) >= M N / R_N (c_M T_M >= M, c_N ceil(T_N / R_N) >= N / R_N), the B
    # term alike (a systolic array: >= N); an upper bound from c_M T_M < 2 pad(M), c_N ceil(T_N / R_N) <= 2 pad(N)
    # / R_N + c_N
    pm, pn = float(tiling.pad_core(m, im)), float(tiling.pad_core(n, inn))
    reads_lb = batch * vis * k * (ea_loc * m * n / rn + eb * n * (m / rm if rm else 1.0))
    qm_max_, qn_max_ = tiling.ceil_div_core(m, im), tiling.ceil_div_core(n, inn)
    reads_max = batch * vis * k * (ea_loc * 2 * pm * (2 * pn / rn + qn_max_)
                                   + eb * 2 * pn * ((2 * pm / rm if rm else 1.0) + qm_max_))
    emax = max(ea, eb)
    qk_max = tiling.ceil_div_core(k, ik)
    data = TileData(
        op=op, m=m, n=n, k=k, batch=batch, im=im, inn=inn, ik=ik, units=units,
        qm_max=tiling.ceil_div_core(m, im), qn_max=tiling.ceil_div_core(n, inn), qk_max=qk_max,
        split_max=max(1, min(units, qk_max)),
        ea=ea, eb=eb, emax=emax,
        local_buffer=g("local_buffer"), accumulator=g("accumulator"), register_file=g("register_file"),
        padded_flops=fpad, unit_rate=fpc * clock * ceff, t_vector=tv,
        a_mem=a_mem, b_mem=b_bytes, c_mem=c_mem, ra_cap=ra_cap, rb_cap=rb_cap,
        block_span=float(tiling.block_span(l2, g("local_buffer"))), beyond_model=_beyond_model(g),
        partial_bytes=pbytes, partial_split=s0, bandwidth=bw,
        power_budget=p_budget, band_budget=band_budget, e_mem=g("energy.memory"),
        power_exponent=1,  # the band tolerance: g(r) grows at least as fast as r, so u-bands of (1 + rtol) are tight
        # FLOPs and their register-file traffic, vector work, C written through L2 (A too, requested once), and
        # the local reads' lower bound
        e_fixed=fpad * (e_flop + e_reg) + (vf + ex) * e_vec + e_l2 * (c_mem + (a_l2 if a_once else 0.0))
        + e_loc * reads_lb, law=law,
        # local-buffer fill bytes per unit of (T_M + T_N) c_M c_N: tiles = c_M c_N batch (dse.model.tiling)
        e_local=e_loc * vis * float(tiling.local_buffer_bytes(float(batch), float(k), 1.0, 0.0, emax)),
        # L2 requests: A once per request of its panels, B alike (dse.model.hierarchy.cluster_requests), partial
        # sums per extra split
        e_a=0.0 if a_once else e_l2 * a_l2, e_b=e_l2 * b_l2, e_split=e_l2 * pbytes,
        l2_rate=g("l2_bytes_per_cycle") * g("dies", 1.0) * clock if has_l2 else 0.0,
        loc_rate=g("local_bytes_per_cycle") * clock if has_loc else 0.0,
        rm=rm, rn=rn, mcast=max(1, int(round(g("l2_multicast", 1.0)))), a_l2=a_l2, a_once=a_once, b_l2=b_l2,
        c_l2=c_mem, ea_loc=ea_loc, visible=vis, e_reads_max=e_loc * reads_max, e_loc_byte=e_loc, reads_lb=reads_lb,
        reads_max=reads_max,
    )
    ok = fits(data, probe_m, probe_n, ik, SLOTS[0])
    t_upper = float(np.min(ref.operators.t_op[ok, 0])) if ok.any() else math.inf
    return replace(data, t_upper=t_upper)


def _beyond_model(g) -> str:
    """Cache levels the tile model does not have (dse.model.tiling.cache_reads): a memory-side cache (its traffic
    and bandwidth beside main memory's), or L2s private to each of several dies (each die's blocks and re-read
    caps; measured: CP-SAT ran into its deterministic limit on large GEMMs of MI355X's XCDs, where the evaluator's
    enumeration takes ~50 ms). '' where the model is the evaluator's."""
    if g("memory_side_cache.capacity") > 0:
        return "a memory-side cache"
    if g("l2_scope") > 0.5 and g("dies", 1.0) / g("system.partitions", 1.0) > 1:
        return "L2s private to each die"
    return ""


def _powers(q: int, x: int) -> np.ndarray:
    """q, 2q, 4q, ... up to the padded extent pad(x, q) (included): probe tile sizes."""
    top = tiling.pad_core(x, q)
    return np.unique(np.minimum([q << i for i in range(0, 16) if (q << i) < 2 * top], top))


# ------------------------------------------------------------------ the evaluator on candidate tiles


def evaluate_tiles(op: Op, chip, tm, tn, tk, split, *, full: bool = False):
    """The evaluator on a batch of candidate tiles: per candidate t_op (s), off-chip bytes, clock ratio.

    One call to the evaluator (:func:`~dse.model.evaluator.evaluate_workload`) with the chip repeated once
    per candidate and the operator alone (one count). The tile solver checks its answers with this; the brute force is this over the domain.
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
    return {"time_s": ops.t_op[:, 0], "traffic_bytes": ops.bytes_memory[:, 0], "energy_j": ops.energy[:, 0],
            "clock_ratio": out.columns["clock_ratio"]}


def buffer_accumulator_bytes(d: TileData) -> float:
    """Accumulator bytes per output element in the local buffer: 0 with a separate accumulator store."""
    return 0.0 if d.accumulator > 0 else tiling.ACCUMULATOR_BYTES


def working_set(d: TileData, tm, tn, tk, slots):
    """Local-buffer bytes of a tiling: :func:`dse.model.tiling.tile_working_set` and the accumulators an accumulator
    store does not hold (:func:`~dse.model.tiling.accumulator_spill`; 0 for a tile :func:`fits` admits): the
    evaluator's metric."""
    return tiling.tile_working_set(tm, tn, tk, d.ea, buffer_accumulator_bytes(d), slots=slots, b_bytes=d.eb) \
        + tiling.accumulator_spill(tm, tn, d.accumulator)


def accumulator_bytes(tm, tn):
    """Bytes of the FP32 accumulator tile T_M x T_N (the accumulator store's or the register file's)."""
    return tiling.tile_working_set(tm, tn, 0, 0.0, tiling.ACCUMULATOR_BYTES)


def fits(d: TileData, tm, tn, tk, slots):
    """Buffer, accumulator and register limits (numpy, broadcasting)."""
    tm, tn, tk, slots = (np.asarray(v, dtype=float) for v in (tm, tn, tk, slots))
    ok = working_set(d, tm, tn, tk, slots) <= d.local_buffer
    if d.accumulator > 0:
        ok &= accumulator_bytes(tm, tn) <= d.accumulator
    elif d.register_file > 0:
        ok &= accumulator_bytes(tm, tn) <= d.register_file
    return ok


def canonical_tk(d: TileData, tm: int, tn: int, split: int, slots: int = SLOTS[0]) -> int:
    """The largest T_K (multiple of k_i) that fits with ``slots`` slots and keeps split <= ceil(K / T_K)."""
    acc = float(working_set(d, tm, tn, 0, slots))  # the working set is linear in T_K: acc + T_K per_k
    per_k = float(working_set(d, tm, tn, 1, slots)) - acc
    q_buf = math.floor((d.local_buffer - acc) / (per_k * d.ik) + 1e-12)
    q_split = d.qk_max if split <= 1 else (d.k - 1) // ((split - 1) * d.ik)  # ceil(K / (ik q)) >= split
    q = max(1, min(d.qk_max, q_buf, q_split))
    return d.ik * q


def class_min(d: TileData, cm: int, cn: int) -> tuple[int, int]:
    """The smallest T_M, T_N with ceil(M / T_M) = cm, ceil(N / T_N) = cn: never slower, never more traffic."""
    return (tiling.pad_core(tiling.ceil_div_core(d.m, cm), d.im),
            tiling.pad_core(tiling.ceil_div_core(d.n, cn), d.inn))


def infeasible_message(d: TileData) -> str:
    """Which limit rejects even the smallest tile (instruction-sized, 2 slots)."""
    tm, tn, tk, s = d.im, d.inn, d.ik, SLOTS[0]
    ws = working_set(d, tm, tn, tk, s)
    where = f"op {d.op.name}: no tile fits"
    if ws > d.local_buffer:
        what = "inputs" if d.accumulator > 0 else "inputs and FP32 accumulator"
        return (f"{where}: buffer_fit: the smallest tile {tm}x{tn}x{tk} with {s} slots needs {ws:,.0f} B "
                f"({what}) > local buffer {d.local_buffer:,.0f} B")
    acc = accumulator_bytes(tm, tn)
    if d.accumulator > 0 and acc > d.accumulator:
        return (f"{where}: accumulator_fit: a {tm}x{tn} FP32 accumulator needs {acc:,.0f} B > accumulator "
                f"{d.accumulator:,.0f} B")
    if d.accumulator <= 0 and 0 < d.register_file < acc:
        return (f"{where}: register_fit: a {tm}x{tn} FP32 accumulator needs {acc:,.0f} B > register file "
                f"{d.register_file:,.0f} B")
    return f"{where} (CP-SAT proved the tile domain empty)"
