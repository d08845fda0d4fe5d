"""Power and clock: memory power, the sustained clock under the power ceiling, average power, energy.

Seed 004 §4.1.3 ("Power ceiling"): the module power (TDP) is shared by static
power, memory and compute. The energy budget per FLOP at peak rate is
    b = (TDP - P_static - P_mem) / F_peak
and when the actual energy per FLOP e exceeds b the power controller lowers
the clock: to b/e of peak at fixed voltage (P ~ f), to (b/e)^(1/3) when the
voltage falls with the frequency (P ~ f V^2 ~ f^3). b/e is the ratio of the
power left for compute, TDP - P_static - P_mem, to the power compute draws at
the peak clock, e F_peak: :func:`sustained_clock_ratio` takes those two powers.

Each rule lives here once; the evaluator (dse/model/evaluator.py) and the CP-SAT data steps call these
functions. Pure, unchecked, numpy-vectorized (scalars or arrays, broadcasting).
"""

from __future__ import annotations

import numpy as np

from dse.model import jit

__all__ = ["MIN_CLOCK_RATIO", "ACCUMULATOR_BYTES", "memory_power", "sustained_clock_ratio", "average_power",
           "average_power_core", "energy_at_power", "power_density", "voltage_at", "dynamic_energy_scale",
           "leakage_scale", "matrix_energy_per_flop", "leakage_power", "clock_power", "ClockLaw",
           "fixed_power", "operator_power", "sustained_operating_point", "BISECTION_STEPS"]

#: Bytes of one accumulator value (FP32) a matrix instruction reads and writes.
ACCUMULATOR_BYTES = 4.0
#: Leakage power ~ V^2 (the leakage current rises about linearly with V through DIBL, times V): est.
LEAKAGE_EXPONENT = 2.0

#: Lowest sustained clock modelled (fraction of peak); below it the design breaks its TDP (peak power > TDP).
MIN_CLOCK_RATIO = 0.05


# ---------------------------------------------------------------- voltage and frequency (seed 004 §4.1.3)
#
#   V(f)      = max(V_min, V_th + (V_nom - V_th) f / f_rated)     the alpha-power law at alpha = 1 (Sakurai &
#               Newton, IEEE JSSC 25(2) 1990): near nominal the clock grows with the overdrive V - V_th; at
#               V_min (retention) only the clock falls. A chip's rated clock is reached at V_nom.
#   E_op(V)   = E_op(V_nom) (V / V_nom)^2                         switching energy ~ C V^2 (seed 004 §4.1.3)
#   P_leak(V) = P_leak(V_nom) (V / V_nom)^LEAKAGE_EXPONENT
#   P_clock   = P_clock(f_rated, V_nom) (f / f_rated) (V / V_nom)^2


@jit.rule
def voltage_at(ratio_to_rated, v_min, v_nominal, v_threshold):
    """Supply voltage (V) for a clock of ``ratio_to_rated`` x the rated clock: max(V_min, V_th + (V_nom - V_th) r)."""
    return jit.maximum(v_min, v_threshold + (v_nominal - v_threshold) * ratio_to_rated)


@jit.rule
def clock_voltage(r, d, v_min, v_nominal, v_threshold, v1, scaling):
    """Supply voltage at r x the design clock of a :class:`ClockLaw` with these fields: :func:`voltage_at` of r d
    where the voltage scales (``scaling`` true / 1), the design's V1 where it does not."""
    return jit.where(scaling > 0.5, voltage_at(r * d, v_min, v_nominal, v_threshold), v1)


@jit.rule
def dynamic_energy_scale(v, v_nominal):
    """E(V) / E(V_nom) = (V / V_nom)^2 for switching energy."""
    x = v / v_nominal
    return x * x


@jit.rule
def leakage_scale(v, v_nominal):
    """P_leak(V) / P_leak(V_nom) = (V / V_nom)^LEAKAGE_EXPONENT (est.)."""
    x = v / v_nominal
    return x * x


def matrix_energy_per_flop(arithmetic, overhead):
    """J/FLOP of the matrix datapath at V_nom: arithmetic x (1 + instruction overhead) (seed 004 §4.1.3: HMMA
    110 pJ with 22% overhead). The register files the instruction reads and writes are their own level
    (dse.model.hierarchy.register_bytes_per_flop x energy.register_file, charged by the evaluator)."""
    return arithmetic * (1.0 + overhead)


@jit.rule
def leakage_power(logic_mm2, sram_mm2, leak_logic, leak_sram):
    """Leakage at the nominal voltage (W): logic and SRAM area x the node's densities (processes.yaml)."""
    return logic_mm2 * leak_logic + sram_mm2 * leak_sram


@jit.rule
def clock_power(unit_logic_mm2, clock_energy, rated_clock):
    """Clock tree and control power at the rated clock and V_nom (W): J per cycle per mm^2 x area x clock."""
    return unit_logic_mm2 * clock_energy * rated_clock


class ClockLaw:
    """Power ratio vs clock ratio of one or many design points, relative to their design clock.

    ``design_ratio`` = f_design / f_rated; with voltage scaling, g(r) = r (V(r) / V(1))^2 is the dynamic
    power at r x the design clock over that at the design clock (P ~ f V^2; fixed voltage: g(r) = r).
    :meth:`ratio_for_power` is its inverse: the clock ratio at which dynamic power is x of the design's.
    """

    def __init__(self, design_ratio, v_min, v_nominal, v_threshold, scaling=True, v1=None):
        self.d, self.v_min, self.v_nom, self.v_th = design_ratio, v_min, v_nominal, v_threshold
        self.scaling = scaling
        # (``v1``: the design clock's voltage, voltage_at of these, where the caller has it)
        self.v1 = voltage_at(design_ratio, v_min, v_nominal, v_threshold) if v1 is None else v1
        self._scales = bool(np.all(scaling))  # every point scales its voltage (voltage() needs no select)

    def take(self, shape, mask) -> "ClockLaw":
        """The law of the entries ``mask`` of its arrays broadcast to ``shape`` (1-D, one per entry)."""
        def pick(a):
            return np.broadcast_to(np.asarray(a, dtype=float), shape)[mask]
        return ClockLaw(pick(self.d), pick(self.v_min), pick(self.v_nom), pick(self.v_th),
                        np.broadcast_to(self.scaling, shape)[mask])

    def voltage(self, r):
        """Supply voltage at r x the design clock (the design's voltage where it does not scale)."""
        if self._scales:
            v = voltage_at(r * self.d, self.v_min, self.v_nom, self.v_th)
            if np.broadcast_shapes(np.shape(v), np.shape(self.scaling)) == np.shape(v):
                return v  # (the same values as clock_voltage's select)
        return clock_voltage(r, self.d, self.v_min, self.v_nom, self.v_th, self.v1, self.scaling)

    def power_ratio(self, r):
        """g(r): dynamic power at r x the design clock over the design's."""
        x = self.voltage(r) / self.v1
        return r * x * x

    def ratio_for_power(self, x):
        """The clock ratio r in [0, 1] with g(r) = x (x clipped to [0, 1]): the inverse of :meth:`power_ratio`."""
        x = np.clip(x, 0.0, 1.0)
        a = (self.v_nom - self.v_th) * self.d  # V = V_th + a r above V_min
        v1sq = self.v1 * self.v1
        with np.errstate(divide="ignore", invalid="ignore"):
            lin = x * v1sq / (self.v_min * self.v_min)  # where V = V_min: g = r (V_min / V1)^2
            r_b = np.where(a > 0, (self.v_min - self.v_th) / a, np.inf)  # where V leaves V_min
            # above r_b: a^2 r^3 + 2 a V_th r^2 + V_th^2 r = x V1^2, increasing and convex: Newton from r = 1
            r = np.ones(np.broadcast(x, a).shape)
            vt = self.v_th
            for _ in range(40):
                v = vt + a * r
                f = r * v * v - x * v1sq
                fp = v * v + 2.0 * a * r * v
                r = r - f / fp
        out = np.where(lin <= r_b, lin, r)
        return np.where(self.scaling, np.clip(out, 0.0, 1.0), x)


#: Bisection steps of the sustained clock (sustained_operating_point): 2^-20 of the clock range (1e-6 of the
#: clock), far below any other error of the model; the lower end is kept, so the power stays within TDP.
#: (Regula falsi, Illinois variant, needed 24 steps to beat that on random designs: the max()es of the
#: operator's times put kinks in the power, and a floor far below the root slows it.)
BISECTION_STEPS = 20
#: entries of the power ceiling's bisection taken at a time (their inputs in the L1 cache through the steps)
BISECTION_CHUNK = 256


def fixed_power(leak_w, clock_w, law: ClockLaw, r, v=None):
    """Leakage + clock-tree power (W) at r x the design clock: leakage at V_nom x (V / V_nom)^2, the clock tree's
    power at the rated clock and V_nom x f / f_rated x (V / V_nom)^2 (P ~ C V^2 f). ``v``: ``law.voltage(r)``
    where the caller has it."""
    if v is None:
        v = law.voltage(r)
    return fixed_power_core(leak_w, clock_w, law.d, r, v, law.v_nom)


@jit.rule
def fixed_power_core(leak_w, clock_w, d, r, v, v_nom):
    """:func:`fixed_power` at voltage ``v`` with the law's d = f_design / f_rated and V_nom (numbers or arrays)."""
    return leak_w * leakage_scale(v, v_nom) + clock_w * d * r * dynamic_energy_scale(v, v_nom)


def operator_power(r, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, law: ClockLaw):
    """Power (W) of an operator while it runs at r x the design clock (seed 004 §4.1.3: TDP = static + memory +
    compute, here each at the operating point):

        fixed_power(r)                                       leakage and clock tree
        + E_mem / max(t_clocked / r, t_memory)               memory traffic over the operator's time
        + E_comp (V(r) / V1)^2 / max(t_busy / r, t_memory)   switching energy over the time the units are busy

    ``e_comp_j`` at the design clock's voltage V1; ``t_busy``: matrix (no wave loss: idle units draw no
    switching power) and vector time at the design clock; ``t_clocked``: the same with the wave loss. Every
    term grows with r (a higher voltage, a shorter time), continuously.
    """
    return _operator_power(r, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, law)


def _operator_power(r, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, law: ClockLaw):
    """:func:`operator_power` (arrays broadcast; numbers as numpy's, which divide by 0 as IEEE does)."""
    e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s = (np.asarray(x, dtype=float) for x in (
        e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s))
    with jit.quiet():
        return operator_power_core(r, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, law.d,
                                   law.v_min, law.v_nom, law.v_th, law.v1, law.scaling)


@jit.rule
def operator_power_core(r, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, d, v_min, v_nom,
                        v_th, v1, scaling):
    """:func:`operator_power` with the clock law's fields (d = f_design / f_rated, V_min, V_nom, V_th, V1 = V(d),
    ``scaling`` 1 / 0): numbers in kernels, arrays in Python."""
    v = clock_voltage(r, d, v_min, v_nom, v_th, v1, scaling)
    comp_busy, comp_memory, mem_clocked, mem_memory = operator_power_rates(e_comp_j, e_mem_j, t_busy_s, t_clocked_s,
                                                                           t_memory_s)
    return operator_power_at(r, v, comp_busy, comp_memory, mem_clocked, mem_memory, leak_w, clock_w, d, v_nom, v1)


@jit.rule
def operator_power_rates(e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s):
    """The parts of :func:`operator_power` that do not depend on the clock: E_comp / t_busy, E_comp / t_memory,
    E_mem / t_clocked, E_mem / t_memory (W at the design clock; 0 where the energy is 0). At r x the design
    clock E / max(t / r, t_memory) = min(r E / t, E / t_memory): the power ceiling's bisection divides once per
    operator, not once per step (issue 20)."""
    comp_busy = jit.where(e_comp_j > 0, e_comp_j / t_busy_s, 0.0)
    comp_memory = jit.where(e_comp_j > 0, e_comp_j / t_memory_s, 0.0)
    mem_clocked = jit.where(e_mem_j > 0, e_mem_j / t_clocked_s, 0.0)
    mem_memory = jit.where(e_mem_j > 0, e_mem_j / t_memory_s, 0.0)
    return comp_busy, comp_memory, mem_clocked, mem_memory


@jit.rule
def operator_power_at(r, v, comp_busy, comp_memory, mem_clocked, mem_memory, leak_w, clock_w, d, v_nom, v1):
    """:func:`operator_power` at r x the design clock and its voltage ``v`` from :func:`operator_power_rates`:
    fixed_power(r) + min(r E_mem / t_clocked, E_mem / t_memory) + (V / V1)^2 min(r E_comp / t_busy, E_comp /
    t_memory)."""
    p_mem = jit.minimum(mem_clocked * r, mem_memory)
    p_comp = dynamic_energy_scale(v, v1) * jit.minimum(comp_busy * r, comp_memory)
    return fixed_power_core(leak_w, clock_w, d, r, v, v_nom) + p_mem + p_comp


def sustained_operating_point(tdp_w, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w,
                              law: ClockLaw, floor=MIN_CLOCK_RATIO):
    """The sustained clock r (ratio to the design clock) of an operator and its memory stretch under TDP.

    r = 1 where :func:`operator_power` at the design clock is within TDP; else the highest r in [floor, 1] whose
    power is within it (bisection, the lower end kept: the power after throttling never exceeds TDP). Where
    even ``floor`` is over, the clock stays there and the memory traffic is slowed too: ``stretch`` = (the
    power at the floor - fixed_power(floor)) / (TDP - fixed_power(floor)) > 1 stretches the operator's time
    until its power is TDP (inf: the fixed power alone is over TDP); 1 elsewhere. Arrays of up to two
    dimensions (points x operators) broadcast; compiled (:func:`_operating_points`), the bisection on the
    throttled entries only.
    """
    cols = (tdp_w, e_comp_j, e_mem_j, t_busy_s, t_clocked_s, t_memory_s, leak_w, clock_w, law.d, law.v_min,
            law.v_nom, law.v_th, law.v1, law.scaling)
    shape = np.broadcast_shapes(*(np.shape(x) for x in cols))
    if len(shape) > 2:
        raise ValueError(f"sustained_operating_point takes arrays of up to 2 dimensions, got shape {shape}")
    rows, n_ops = (1,) * (2 - len(shape)) + shape  # (points, operators)

    def laid(x):  # one value per point: (points,); else (points or 1, operators), C-ordered (no copy where it is)
        if type(x) is np.ndarray and x.ndim == 2 and x.shape[1] == 1:  # (a column: the common case, quickly)
            return jit.points(x, rows)
        x = np.asarray(x, dtype=float)
        x = x.reshape((1,) * (2 - x.ndim) + x.shape)
        if x.shape[1] == 1:
            return jit.points(x[:, 0], rows)
        x = np.ascontiguousarray(x).view()
        x.flags.writeable = False  # (read-only as jit.points: one compiled signature)
        return x
    numbers = all(jit.one_valued(cols[i]) for i in _POINT_NUMBERS)  # (the TDP and technology as numbers: one group)
    args = [float(np.asarray(x).item(0)) if numbers and i in _POINT_NUMBERS else laid(x) for i, x in enumerate(cols)]
    r, stretch, stretched = _operating_points(*args, rows, None if n_ops == 1 else n_ops, float(floor),
                                              BISECTION_STEPS)  # (None: one operator per point, jit.of_op)
    if not stretched:  # (no stretch: 1 over the entries, a read-only view: its readers take it as one number)
        stretch = jit.one_over(stretch.reshape(-1)[:1], rows * n_ops)
    return r.reshape(shape), stretch.reshape(shape)


#: :func:`sustained_operating_point`'s inputs that :func:`_operating_points` takes as numbers where every point and
#: operator has the same (a group: one decision, one more signature of the kernel): the TDP and the technology's
#: voltages (V_min, V_nom, V_th) and voltage scaling. Read from arrays they were 5 of the 14 arrays its pass over
#: the points streams (100,000 GEMM points 1.50-1.66 -> 1.38-1.45 ms alone, issue 20)
_POINT_NUMBERS = (0, 9, 10, 11, 13)


def _row(x, p):
    """Point p's values of an input laid out by :func:`sustained_operating_point`: its value, or its row of
    operators (a row of one for a per-operator input); a number itself."""
    if np.ndim(x) == 0:
        return x
    return x[p] if np.ndim(x) == 1 else x[min(p, len(x) - 1)]


#: operator o's value in a :func:`_row`: the point's value itself, or the row's entry o
_of = jit.of_op


@jit.overload_numbers(_row)
def _row_numbers(x, p):
    """:func:`_row` in kernels, by the input's type (a number: itself)."""
    if not jit.is_array(x):
        return lambda x, p: x
    if x.ndim == 1:
        return lambda x, p: x[p]
    return lambda x, p: x[min(p, x.shape[0] - 1)]


@jit.rule(loops=True)
def bisect_chunk(vals, lo, hi, m, floor, steps):
    """The power ceiling's bisection of ``m`` entries at once: ``vals`` (13, >= m) their inputs (TDP, leakage, clock
    power, d, V_min, V_nom, V_th, V1, scaling and :func:`operator_power_rates`' four), ``lo`` / ``hi`` their
    brackets, ``floor`` and 1 on the way in; on the way out ``lo`` holds each entry's clock ratio and ``hi`` its
    memory stretch (:func:`sustained_operating_point`). One branch-free pass per step (to 2^-steps of the range, the
    lower end kept) over the entries, on the vector lanes, the buffers in the L1 cache through the steps."""
    t, lk, ck, dd, vmin, vnom, vth, vv1, sc = (vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6],
                                               vals[7], vals[8])
    cb, cm, mc, mm = vals[9], vals[10], vals[11], vals[12]
    for _ in range(steps):
        for z in range(m):
            mid = (lo[z] + hi[z]) * 0.5
            v = clock_voltage(mid, dd[z], vmin[z], vnom[z], vth[z], vv1[z], sc[z])
            ok = operator_power_at(mid, v, cb[z], cm[z], mc[z], mm[z], lk[z], ck[z], dd[z], vnom[z],
                                   vv1[z]) <= t[z]
            lo[z] = mid if ok else lo[z]
            hi[z] = hi[z] if ok else mid
    for z in range(m):  # (the results in place of lo and hi, then laid out: a loop without scattered stores)
        v = clock_voltage(floor, dd[z], vmin[z], vnom[z], vth[z], vv1[z], sc[z])
        p_floor = operator_power_at(floor, v, cb[z], cm[z], mc[z], mm[z], lk[z], ck[z], dd[z], vnom[z], vv1[z])
        fixed_floor = fixed_power_core(lk[z], ck[z], dd[z], floor, v, vnom[z])
        over = p_floor > t[z]
        st = jit.where(t[z] > fixed_floor, (p_floor - fixed_floor) / (t[z] - fixed_floor), np.inf)
        lo[z], hi[z] = jit.where(over, floor, lo[z]), jit.where(over, jit.maximum(st, 1.0), 1.0)


@jit.kernel
def _operating_points(tdp, e_comp, e_mem, t_busy, t_clocked, t_memory, leak, clock, d, v_min, v_nom, v_th, v1,
                      scaling, rows, n_ops, floor, steps):
    """:func:`sustained_operating_point` on inputs of one value per point ((points,)) or of shape (points or 1,
    operators), or numbers (:data:`_POINT_NUMBERS`): (r, stretch), each (points, operators). One pass over a
    point's operators finds those over TDP at the design clock (a point's values loaded once; its inputs read in
    place, no transposed copies); the entries over are bisected :data:`BISECTION_CHUNK` at a time, their inputs
    gathered (the rates of :func:`operator_power_rates` divided once) into a buffer that stays in the L1 cache
    through the steps, with one branch-free pass per step (to 2^-steps of the range, the lower end kept) on the
    vector lanes (the bisection 9x the numpy steps' speed; chunked, 100,000 GEMM points 1.17 -> 0.81 ms for the
    kernel: issue 20). Returns (r, stretch, the number of entries stretched)."""
    n_ops = jit.op_count(n_ops)
    r_out, s_out = np.ones((rows, n_ops)), np.ones((rows, n_ops))
    hot = np.empty(rows * n_ops, dtype=np.bool_)
    n_hot = 0
    for p in range(rows):
        a, b, c, e, f, g = (_row(tdp, p), _row(e_comp, p), _row(e_mem, p), _row(t_busy, p), _row(t_clocked, p),
                            _row(t_memory, p))
        h, i, j, k, m, q = (_row(leak, p), _row(clock, p), _row(d, p), _row(v_min, p), _row(v_nom, p),
                            _row(v_th, p))
        u, w = _row(v1, p), _row(scaling, p)
        base = p * n_ops
        for o in range(n_ops):
            over = operator_power_core(1.0, _of(b, o), _of(c, o), _of(e, o), _of(f, o), _of(g, o), _of(h, o),
                                       _of(i, o), _of(j, o), _of(k, o), _of(m, o), _of(q, o), _of(u, o),
                                       _of(w, o)) > _of(a, o)
            hot[base + o] = over
            n_hot += over
    if n_hot == 0:
        return r_out, s_out, 0
    at = np.empty(n_hot + 1, dtype=np.int64)
    z = 0
    for x in range(rows * n_ops):  # (the entries over, without a branch: each written, kept where it is over)
        at[z] = x
        z += hot[x]
    r_flat, s_flat = r_out.reshape(-1), s_out.reshape(-1)
    stretched = 0
    vals = np.empty((13, BISECTION_CHUNK))  # (a chunk's inputs, its bracket: in the L1 cache through its steps)
    raw = np.empty((5, BISECTION_CHUNK))  # (its energies and times, of which the rates)
    lo, hi = np.empty(BISECTION_CHUNK), np.empty(BISECTION_CHUNK)
    for c0 in range(0, n_hot, BISECTION_CHUNK):
        m = min(BISECTION_CHUNK, n_hot - c0)
        for z in range(m):  # (gathered; the rates' divisions in a loop of their own, below: on the vector lanes)
            p, o = at[c0 + z] // n_ops, at[c0 + z] % n_ops
            vals[0, z], vals[1, z] = _of(_row(tdp, p), o), _of(_row(leak, p), o)
            vals[2, z], vals[3, z] = _of(_row(clock, p), o), _of(_row(d, p), o)
            vals[4, z], vals[5, z] = _of(_row(v_min, p), o), _of(_row(v_nom, p), o)
            vals[6, z], vals[7, z] = _of(_row(v_th, p), o), _of(_row(v1, p), o)
            vals[8, z] = _of(_row(scaling, p), o)
            raw[0, z], raw[1, z], raw[2, z] = _of(_row(e_comp, p), o), _of(_row(e_mem, p), o), _of(_row(t_busy, p), o)
            raw[3, z], raw[4, z] = _of(_row(t_clocked, p), o), _of(_row(t_memory, p), o)
            lo[z], hi[z] = floor, 1.0
        for z in range(m):
            vals[9, z], vals[10, z], vals[11, z], vals[12, z] = operator_power_rates(raw[0, z], raw[1, z], raw[2, z],
                                                                                     raw[3, z], raw[4, z])
        bisect_chunk(vals, lo, hi, m, floor, steps)
        for z in range(m):
            r_flat[at[c0 + z]], s_flat[at[c0 + z]] = lo[z], hi[z]
            stretched += hi[z] != 1.0
    return r_out, s_out, stretched


def memory_power(bandwidth_bytes_per_s, energy_per_byte_j):
    """Power of memory traffic at a bandwidth: R x e (seed 004 §4.1.3: 3.35 TB/s x 31.76 pJ/B = 106 W)."""
    return bandwidth_bytes_per_s * energy_per_byte_j


def sustained_clock_ratio(room_w, demand_w, law: ClockLaw, floor=MIN_CLOCK_RATIO):
    """Sustained / design clock under the power ceiling (seed 004 §4.1.3): the highest r with g(r) <= room / demand.

    ``room_w``: power left for compute (TDP - leakage - clock power - memory power, all at the design clock;
    inf without a TDP); ``demand_w``: the power compute draws at the design clock; ``law``: g(r), the dynamic
    power ratio (:class:`ClockLaw`; P ~ f V^2 with V following f, or P ~ f at fixed voltage). 1 where demand
    <= room; never below ``floor`` (the caller throttles the memory traffic there). The seed's example, H100
    700 W, 106.4 W of HBM, compute at 1.5x its budget: 0.667 at fixed voltage; with V ~ f (g = r^3) 0.874.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(demand_w > 0, np.clip(room_w, 0.0, None) / demand_w, 1.0)
    x = np.where(np.isfinite(x), x, 1.0)
    throttled = x < 1.0
    if not np.any(throttled):
        return np.ones(np.shape(x))
    out = np.where(throttled, law.ratio_for_power(np.minimum(x, 1.0)), 1.0)
    return np.maximum(out, floor)


def average_power(energy_j, time_s):
    """Average power over an interval: E / T, 0 for an empty interval (seed 004 §4.1.3: 0.534 J over
    4.88 ms ~ 110 W). The evaluator's step power, each operator's power and the power ceiling's inputs."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return average_power_core(energy_j, time_s)


@jit.rule
def average_power_core(energy_j, time_s):
    """:func:`average_power` (numbers in kernels, arrays in Python)."""
    return jit.where(time_s > 0, energy_j / time_s, 0.0)


@jit.rule
def energy_at_power(power_w, time_s):
    """E = P x T for a constant power (seed 004 §4.8.4: 450 W x 16.22 ms = 7.30 J per step); the
    evaluator's static energy."""
    return power_w * time_s


def power_density(power_w, area_mm2):
    """Average power per die area in W/mm^2 (seed 004 §4.1.3: 0.75 power / 0.60 area = 1.25x density)."""
    return np.asarray(power_w, dtype=float) / np.asarray(area_mm2, dtype=float)
