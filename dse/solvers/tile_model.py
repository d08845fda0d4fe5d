"""The CP-SAT model of one operator's tiles: variables, constraints and the power bands.

Built from the data step (:mod:`dse.solvers.tile_data`), searched by :mod:`dse.solvers.cpsat_tiles`
(which documents the formulation). Every float -> integer conversion goes through
:func:`dse.solvers.cpsat_common.to_int`; the coefficients come from the data step, which computes them
with the evaluator's rules (dse.model.tiling, dse.model.links, dse.model.power).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dse.errors import SolverError
from dse.model import tiling
from dse.solvers.cpsat_common import INT_LIMIT, cp_sat, to_int
from dse.solvers.tile_data import RHO_FLOOR, SLOTS, TIME_RTOL, TileData, buffer_accumulator_bytes, class_min

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["TileModel", "TIME_BITS", "BW_BITS", "MIN_BYTE_SCALE", "P_BITS", "F_BITS", "NO_ROOM", "BAND_RTOL"]

#: The time unit is the op's lower-bound time / 2^TIME_BITS (model time within ~1e-7 of the evaluator's).
TIME_BITS = 24
#: Bytes in the memory constraint are scaled so that bandwidth x time-unit is >= 2^BW_BITS.
BW_BITS = 22
#: Smallest byte scale: element sizes are multiples of 1/32 byte (MX / NV block scales), so bytes x 32 are integers.
MIN_BYTE_SCALE = 32
#: Bits of the compute-power variable at the power budget: p_comp = 2^P_BITS at TDP - static (see TileModel).
P_BITS = 24
#: Fixed-point bits of the band edges: a band edge kappa is the ratio p_comp / room x 2^F_BITS.
F_BITS = 20
#: The band of tilings with no power left beside the memory's (room 0): the clock at its floor.
NO_ROOM = (-1, -1)
#: A power band is split at its geometric middle while its clock-ratio bounds differ by more than this.
BAND_RTOL = 1e-3


def block_shapes(units: int, split_max: int, qm_max: int, qn_max: int, span: int) -> list[tuple[int, int]]:
    """The concurrent blocks (a, b) of output tiles worth trying (dse.model.tiling.block_reads): for every
    U' = floor(U / s), s <= split_max, the least a of each distinct b = min(floor(U' / a), qn_max, span),
    a <= min(qm_max, span). Any other block reads no less than one of these (a smaller a with the same b, or
    the same a with a wider b)."""
    shapes = set()
    for up in {units // s for s in range(1, max(1, min(split_max, units)) + 1)}:
        last = None
        for a in range(1, min(up, qm_max, span) + 1):
            b = min(up // a, qn_max, span)
            if b != last:
                shapes.add((a, b))
                last = b
    return sorted(shapes)


class TileModel:
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
        self.model = cp_sat().CpModel()
        self.v: dict[str, cp_model.IntVar] = {}
        self.hi: dict[str, int] = {}  # upper bound of each variable
        self._bands: dict[tuple[int, int | None], tuple[cp_model.IntVar, float]] = {}
        self._variables()
        self._constraints()

    # ---- scaling: one time unit, one byte scale (every conversion through to_int; the power units: _power)
    def _scales(self):
        d = self.d
        self.rho_const = 1.0  # the relaxation's clock ratio: the design clock
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
        # the on-chip levels (dse.model.hierarchy): the most L2 bytes (every request, every split) and the most
        # local reads (each unit's reads over its bandwidth bound the wave-quantized time), at the peak clock
        self.l2_max = (d.a_l2 * (1 if d.a_once else d.qn_max) + d.b_l2 * d.qm_max + d.c_l2
                       + d.partial_bytes * (d.split_max - 1))
        t_l2_max = self.l2_max / d.l2_rate if d.l2_rate > 0 else 0.0
        t_loc_max = d.reads_max / d.loc_rate if d.loc_rate > 0 else 0.0
        t_ub = min(max(self.c_float * rho_max, self.tv_float * rho_max, self.bytes_max / d.bandwidth,
                       t_l2_max * rho_max, t_loc_max * rho_max),
                   d.t_upper * (1 + 2 * TIME_RTOL))  # the optimum and its ties are no slower than a known tiling
        self.t_hi = to_int(t_ub, self.q, "up") + 4
        # the least time the model itself allows (perfect waves, each tensor moved once): the objective's
        # floor, exactly, so that CP-SAT proves an optimum that reaches it at once instead of searching the gap
        self.bytes_lo = to_int(bytes_min * sb, rounding="down")
        self.t_lo = max(tiling.ceil_div_core(self.c_matrix(1.0), d.units),
                        tiling.ceil_div_core(self.bytes_lo, self.bw_q),
                        self.c_vector(1.0), 0)

    def c_matrix(self, rho: float) -> int:
        return to_int(self.c_float * rho, self.q, "down")

    def c_vector(self, rho: float) -> int:
        return to_int(self.tv_float * rho, self.q, "down")

    # ---- variables (structured names: q_m[op], time[op], ...)
    def _var(self, name: str, lo: int, hi: int) -> cp_model.IntVar:
        if hi > INT_LIMIT:
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
        self._var("waves", 1, tiling.ceil_div_core(d.batch * tiles_max * d.split_max, d.units))
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
        self._onchip()
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
        acc = to_int(tiling.ACCUMULATOR_BYTES)  # the FP32 accumulator tile: acc x T_M T_N bytes
        # the working set slots (T_M T_K e_a + T_K T_N e_b) + acc T_M T_N (dse.model.tiling.tile_working_set)
        if d.accumulator > 0:
            m.add(inputs <= buf).with_name("buffer_fit")
            m.add(acc * mn <= to_int(d.accumulator, rounding="down")).with_name("accumulator_fit")
        else:
            m.add(inputs + acc * s * mn <= buf).with_name("buffer_fit")
            if d.register_file > 0:
                m.add(acc * mn <= to_int(d.register_file, rounding="down")).with_name("register_fit")

    def _memory(self):
        """bytes = A r_A + B r_B + C + [s >= s_0] P (s - 1), x byte scale; BW_q time >= bytes.

        r_A = min(ceil(c_N / b), cap_A), r_B = min(ceil(c_M / a), cap_B) for a block of a x b output tiles in
        flight (a b s <= U); the minimization chooses the block, as the evaluator's
        :func:`dse.model.tiling.block_reads` does.
        """
        d, m, v = self.d, self.model, self.v
        sb = self.sb
        terms = []
        re_a, re_b = d.a_mem > 0 and d.ra_cap > 1, d.b_mem > 0 and d.rb_cap > 1
        keep = self._resident(re_a, re_b)
        r_blk = {}
        if d.units > 1 and (re_a or re_b):
            # the units' concurrent block of a x b output tiles (dse.model.tiling.block_reads): a b s <= U; A is
            # read ceil(c_N / b), B ceil(c_M / a) times (a block wider than the grid reads once: the ceiling is
            # 1). The blocks worth trying are constants: for each U' = floor(U / s), the least a of every
            # b = floor(U' / a). One literal per block, so every constraint is linear under its literal.
            ra = r_blk["reads_a"] = self._var("reads_a_per_block", 1, d.qn_max) if re_a else None
            rb = r_blk["reads_b"] = self._var("reads_b_per_block", 1, d.qm_max) if re_b else None
            lits = []
            for a, b in block_shapes(d.units, d.split_max, d.qm_max, d.qn_max, int(min(d.block_span, d.units))):
                x = m.new_bool_var(f"block_{a}x{b}[{d.op.name}]")
                lits.append(x)
                if d.units // (a * b) < d.split_max:
                    m.add(v["split"] <= d.units // (a * b)).only_enforce_if(x)
                # (a resident panel: that operand is read once, the other once per block of the kept ones)
                if ra is not None and b < d.qn_max:
                    m.add(b * ra >= v["c_n"]).only_enforce_if([x] + ([~keep["reads_a"]] if "reads_a" in keep else []))
                if rb is not None and a < d.qm_max:
                    m.add(a * rb >= v["c_m"]).only_enforce_if([x] + ([~keep["reads_b"]] if "reads_b" in keep else []))
            m.add_exactly_one(lits)
        for name, size, cap, count in (("reads_a", d.a_mem, d.ra_cap, "c_n"), ("reads_b", d.b_mem, d.rb_cap, "c_m")):
            if size <= 0:
                continue
            if cap <= 1:  # fits L2: read once whatever the tiles
                terms.append(to_int(size * sb))
                continue
            r = self._var(name, 1, min(self.hi[count], cap))
            if name in r_blk:  # r = min(ceil(c / block), cap)
                m.add_min_equality(r, [r_blk[name], cap])
            else:  # one unit: ceil(X / max(T, t_2)) = min(ceil(X / T), ceil(X / t_2)); 1 for a resident panel
                src = v[count]
                if name in keep:
                    src = self._var(f"{name}_unresident", 1, self.hi[count])
                    m.add(src == v[count]).only_enforce_if(~keep[name])
                    m.add(src == 1).only_enforce_if(keep[name])
                m.add_min_equality(r, [src, cap])
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

    def _resident(self, re_a: bool, re_b: bool) -> dict:
        """Literals of an operand panel kept in a unit's local buffer (dse.model.tiling.resident_panels), one per
        re-read operand whose panel fits beside the smallest tile: {"reads_a": keep_a, "reads_b": keep_b}. Each
        enforces its fit (T_M K e_A + 2 k_i T_N e_B + acc T_M T_N <= buffer; B alike); at most one is kept."""
        d, m, v = self.d, self.model, self.v
        if d.local_buffer <= 0:
            return {}
        s = MIN_BYTE_SCALE
        ea, eb = to_int(d.ea, 1 / s, "up"), to_int(d.eb, 1 / s, "up")
        acc = to_int(buffer_accumulator_bytes(d), 1 / s, "up")
        buf = to_int(d.local_buffer, 1 / s, "down")
        keep = {}
        for name, wanted, panel, stream in (("reads_a", re_a, (ea * d.k, "t_m"), (2 * d.ik * eb, "t_n")),
                                            ("reads_b", re_b, (eb * d.k, "t_n"), (2 * d.ik * ea, "t_m"))):
            least = {"t_m": d.im, "t_n": d.inn}  # the smallest tile
            lo = panel[0] * least[panel[1]] + stream[0] * least[stream[1]] + acc * d.im * d.inn
            if not wanted or lo > buf:
                continue
            x = m.new_bool_var(f"resident_{name[-1]}[{d.op.name}]")
            m.add(panel[0] * v[panel[1]] + stream[0] * v[stream[1]] + acc * v["c_tile"] <= buf).only_enforce_if(x)
            keep[name] = x
        if len(keep) == 2:
            m.add_at_most_one(keep.values())
        return keep

    def _onchip(self):
        """The L2 and local-buffer times (dse.model.hierarchy, at the peak clock):

            BW2_q time >= bytes_L2 = A r_A + B r_B + C + P (s - 1)   r_A >= c_N / b, r_B >= c_M / a for one cluster
                                                                     shape a x b (a b <= multicast), or c_N, c_M
            2^j time s >= K_loc waves h                              h = T_M ceil(T_N / R_N) e_A + T_N ceil(T_M / R_M)
                                                                     e_B (x 32: element sizes in 1/32 B)
        K_loc = visible K / (local B/s x q x 32): a unit's reads per work item over its bandwidth, wave by wave.
        """
        d, m, v = self.d, self.model, self.v
        self.l2_on = d.l2_rate > 0
        self.loc_on = d.loc_rate > 0 and (d.ea_loc > 0 or d.eb > 0)
        if self.l2_on:
            sb2 = MIN_BYTE_SCALE
            while d.l2_rate * self.q * sb2 < 2**BW_BITS:
                sb2 *= 2
            self.sb2 = sb2
            self.bw2_q = to_int(d.l2_rate * self.q * sb2, rounding="up")  # up: the model time stays a lower bound
            self.bw2_dn = to_int(d.l2_rate * self.q * sb2, rounding="down")
            terms = [to_int((d.c_l2 + (d.a_l2 if d.a_once else 0.0)) * sb2, rounding="down")]
            ops = [(name, size, count) for name, size, count in (("l2_reads_a", 0.0 if d.a_once else d.a_l2, "c_n"),
                                                                 ("l2_reads_b", d.b_l2, "c_m")) if size > 0]
            if d.mcast > 1 and ops:
                # the cluster's shape a x b (a b <= multicast) that requests the fewest bytes:
                # min over shapes of A ceil(c_N / b) + B ceil(c_M / a) (dse.model.hierarchy.cluster_requests)
                size = {name: to_int(sz, 1 / sb2, "down") for name, sz, _ in ops}
                ceil_of: dict[tuple[str, int], object] = {}

                def ceil_var(count: str, q: int):
                    if q == 1:
                        return v[count]
                    if (count, q) not in ceil_of:
                        c = self._var(f"l2_{count}_per_{q}", 1, tiling.ceil_div_core(self.hi[count], q))
                        m.add_division_equality(c, v[count] + (q - 1), q)
                        ceil_of[(count, q)] = c
                    return ceil_of[(count, q)]

                shapes = sorted({(a, d.mcast // a) for a in range(1, d.mcast + 1)})
                xs, hi = [], 0
                for a, b in shapes:
                    expr = 0
                    h = 0
                    if "l2_reads_a" in size:
                        expr = expr + size["l2_reads_a"] * ceil_var("c_n", b)
                        h += size["l2_reads_a"] * self.hi["c_n"]
                    if "l2_reads_b" in size:
                        expr = expr + size["l2_reads_b"] * ceil_var("c_m", a)
                        h += size["l2_reads_b"] * self.hi["c_m"]
                    x = self._var(f"l2_panels_{a}x{b}", 0, h)
                    m.add(x == expr)
                    xs.append(x)
                    hi = max(hi, h)
                best = self._var("l2_panels", 0, hi)
                m.add_min_equality(best, xs)
                terms.append(best)
            else:
                for name, size, count in ops:
                    terms.append(to_int(size * sb2, rounding="down") * v[count])
            if d.partial_bytes > 0 and d.split_max > 1:
                terms.append(to_int(d.partial_bytes * sb2, rounding="down") * (v["split"] - 1))
            self._var("bytes_l2", 0, to_int(self.l2_max * sb2, rounding="up") + 1)
            m.add(v["bytes_l2"] == sum(terms))
            m.add(self.bw2_q * v["time"] >= v["bytes_l2"])
        if self.loc_on:
            s = MIN_BYTE_SCALE
            ea, eb = to_int(d.ea_loc, 1 / s, "up"), to_int(d.eb, 1 / s, "up")
            gn = self._var("reg_tiles_n", 1, tiling.ceil_div_core(self.hi["t_n"], d.rn))
            m.add_division_equality(gn, v["t_n"] + (d.rn - 1), d.rn)
            pa = self._var("reads_a", 0, self.hi["t_m"] * self.hi["reg_tiles_n"])
            m.add_multiplication_equality(pa, [v["t_m"], gn])
            if d.rm:
                gm = self._var("reg_tiles_m", 1, tiling.ceil_div_core(self.hi["t_m"], d.rm))
                m.add_division_equality(gm, v["t_m"] + (d.rm - 1), d.rm)
                pb = self._var("reads_b", 0, self.hi["t_n"] * self.hi["reg_tiles_m"])
                m.add_multiplication_equality(pb, [v["t_n"], gm])
            else:  # a systolic array reads each weight once per tile
                pb = v["t_n"]
            h = self._var("reads_per_k", 0, ea * self.hi["reads_a"] + eb * (self.hi["reads_b"] if d.rm
                                                                              else self.hi["t_n"]))
            m.add(h == ea * pa + eb * pb)
            kappa = d.visible * d.k / (d.loc_rate * self.q * s)  # q per (h x wave / split)
            ts_hi = self.t_hi * d.split_max
            self.loc_j = max(0, min(24 - math.floor(math.log2(max(kappa, 1e-300))), 61 - ts_hi.bit_length()))
            self.k_loc = to_int(kappa * 2**self.loc_j, rounding="down")
            self.kappa_loc = kappa
            if self.k_loc <= 0:
                self.loc_on = False  # (reads far faster than the time unit: the level never binds)
                return
            wh_hi = min(self.hi["waves"] * self.hi["reads_per_k"], (ts_hi << self.loc_j) // self.k_loc + 1)
            wh = self._var("waves_x_reads", 0, wh_hi)
            m.add_multiplication_equality(wh, [v["waves"], h])
            ts = self._var("time_x_split", 0, ts_hi)
            m.add_multiplication_equality(ts, [v["time"], v["split"]])
            m.add((2**self.loc_j) * ts >= self.k_loc * wh)

    def l2_units(self, cm: int, cn: int, split: int) -> int:
        """The model's least L2 time (time units, peak clock) of a class, by the same terms as the constraint."""
        if not self.l2_on:
            return 0
        d, sb2 = self.d, self.sb2
        ra, rb = d.l2_requests(cm, cn)
        out = to_int((d.c_l2 + (d.a_l2 if d.a_once else 0.0)) * sb2, rounding="down")
        if not d.a_once:
            out += to_int(d.a_l2 * sb2, rounding="down") * int(ra)
        out += to_int(d.b_l2 * sb2, rounding="down") * int(rb)
        if d.partial_bytes > 0 and d.split_max > 1:
            out += to_int(d.partial_bytes * sb2, rounding="down") * (split - 1)
        return tiling.ceil_div_core(out, self.bw2_q)

    def local_units(self, cm: int, cn: int, split: int) -> int:
        """The model's least local-buffer time (time units, peak clock) of a class's cheapest tile."""
        if not self.loc_on:
            return 0
        d = self.d
        tm, tn = class_min(d, cm, cn)
        s = MIN_BYTE_SCALE
        ea, eb = to_int(d.ea_loc, 1 / s, "up"), to_int(d.eb, 1 / s, "up")
        h = ea * tm * tiling.ceil_div_core(tn, d.rn) + eb * tn * (tiling.ceil_div_core(tm, d.rm) if d.rm else 1)
        waves = tiling.waves(cm * cn * d.batch * split, d.units)
        return tiling.ceil_div_core(self.k_loc * waves * h, (2**self.loc_j) * split)

    def bytes_of(self, cm: int, cn: int, split: int) -> int:
        """The model's integer bytes (x byte scale) of a class, by the same terms as the constraint."""
        d, sb = self.d, self.sb
        tm, tn = class_min(d, cm, cn)  # (the class's cheapest tile: the most room for a resident panel)
        keep_a, keep_b = tiling.resident_panels(tm, tn, d.k, d.ik, d.ea, d.eb, buffer_accumulator_bytes(d), d.local_buffer)
        ra, rb = (int(x) for x in tiling.resident_reads(d.a_mem, d.b_mem, cm, cn, d.units, split,
                                                         max(d.ra_cap, 1), max(d.rb_cap, 1),
                                                         d.block_span, keep_a and d.a_mem > 0, keep_b))
        out = to_int(d.a_mem * sb) * ra + to_int(d.b_mem * sb) * rb + to_int(d.c_mem * sb)
        if split >= d.partial_split:
            out += to_int(d.partial_bytes * sb) * (split - 1)
        return out

    def time_units(self, cm: int, cn: int, split: int) -> int:
        """The relaxation's least integer time of a class (the peak clock)."""
        d = self.d
        work = cm * cn * d.batch * split
        waves = tiling.waves(work, d.units)
        return max(tiling.ceil_div_core(self.c_matrix(1.0) * waves, work),
                   tiling.ceil_div_core(self.bytes_of(cm, cn, split), self.bw_q), self.c_vector(1.0), self.t_lo,
                   self.l2_units(cm, cn, split), self.local_units(cm, cn, split))

    def time_of(self, cm: int, cn: int, split: int) -> float:
        """The model's time (s) of a class at the peak clock: its least integer time, scaled back."""
        return self.time_units(cm, cn, split) * self.q

    # ---- the power ceiling (built on first use: only a search that needs bands pays for it)
    def _power(self):
        """p_comp and room: the compute power at the design clock and the most power any clock leaves for it.

        In the units of p_comp (e_unit / q, with e_unit = q P / 2^PB, P = TDP - the fixed power at the lowest
        clock, TileData.band_budget):

            energy = E_compute / e_unit          coefficients rounded down (FLOPs, vector work, L2 requests,
                                                 local-buffer bytes counted at c_M T_M = M, c_N T_N = N)
            busy   = max(K, ceil(t_memory))      >= busy_c = max(t_c1, t_vector, t_memory)
            p_comp = floor(energy / busy)        <= E_compute / busy_c
            room   = 2^PB                        >= TDP - fixed_power(r) - p_mem(r) at any sustained r

        At the evaluator's sustained clock r (dse.model.power.operator_power = TDP where it throttles) the
        compute draws E_compute (V(r)/V1)^2 / max(t_busy / r, t_memory) >= g(r) E_compute / busy_c, so
        g(r) p_comp <= room: u = p_comp / room bounds 1 / r from below by 1 / g^-1(1 / u), up to the rounding
        of the integer units.
        """
        if "p_comp" in self.v:
            return
        d, m, v = self.d, self.model, self.v
        p_ref = d.band_budget
        self.pb = min(P_BITS, math.floor(61 - math.log2(max(d.e_max / (self.q * p_ref), 1.0))))
        self.e_unit = e_unit = self.q * p_ref / 2.0**self.pb
        # local-buffer bytes ~ c_M c_N (T_M + T_N) = c_N (c_M T_M) + c_M (c_N T_N) >= M c_N + N c_M: linear (the
        # product's presolve costs up to 100x the solve), a lower bound short by the tiles' padding beyond M, N
        local = d.m * v["c_n"] + d.n * v["c_m"]
        k_fix, k_loc = to_int(d.e_fixed, e_unit, "down"), to_int(d.e_local, e_unit, "down")
        # L2 requests: at least ceil(c / multicast) of each operand's panels (a lower bound of every cluster shape)
        k_a, k_b = to_int(d.e_a / d.mcast, e_unit, "down"), to_int(d.e_b / d.mcast, e_unit, "down")
        k_s = to_int(d.e_split, e_unit, "down")
        self._k = {"fix": k_fix, "loc": k_loc, "a": k_a, "b": k_b, "s": k_s}
        hi = (k_fix + k_loc * (d.m * d.qn_max + d.n * d.qm_max) + k_a * d.qn_max + k_b * d.qm_max
              + k_s * (d.split_max - 1))
        energy = self._var("energy", 0, hi)
        m.add(energy == k_fix + k_loc * local + k_a * v["c_n"] + k_b * v["c_m"] + k_s * (v["split"] - 1))
        # memory time in time units, rounded up (the busy time); bytes <= bw_q t_hi
        self.k_q = to_int(d.t_compute, self.q, "up")
        self.bw_dn = bw_dn = to_int(d.bandwidth * self.q * self.sb, rounding="down")
        t_up = self._var("t_memory_up", 0, tiling.ceil_div_core(self.bw_q * self.t_hi, bw_dn))
        m.add(t_up * bw_dn >= v["bytes"])
        m.add(t_up * bw_dn <= v["bytes"] + (bw_dn - 1))
        parts, his = [self.k_q, t_up], [self.k_q, self.hi["t_memory_up"]]
        # the on-chip levels at the peak clock lengthen the busy time too (rounded up: busy stays an upper bound)
        if self.l2_on:
            t2 = self._var("t_l2_up", 0, tiling.ceil_div_core(self.hi["bytes_l2"], max(self.bw2_dn, 1)) + 1)
            m.add(t2 * max(self.bw2_dn, 1) >= v["bytes_l2"])
            m.add(t2 * max(self.bw2_dn, 1) <= v["bytes_l2"] + (max(self.bw2_dn, 1) - 1))
            parts.append(t2)
            his.append(self.hi["t_l2_up"])
        if self.loc_on:
            # each unit's reads without wave loss: tiles x h x batch visible K / (units x local B/s), in q
            th = self._var("tiles_x_reads", 0, self.hi["tiles"] * self.hi["reads_per_k"])
            m.add_multiplication_equality(th, [v["tiles"], v["reads_per_k"]])
            k1 = d.batch * self.kappa_loc / d.units  # q per unit of tiles x h
            j1 = max(0, min(24 - math.floor(math.log2(max(k1, 1e-300))), 61 - self.hi["tiles_x_reads"].bit_length()
                            - 2))
            k1_up = to_int(k1 * 2**j1, rounding="up")
            hi1 = tiling.ceil_div_core(k1_up * self.hi["tiles_x_reads"], 2**j1) + 1
            tl = self._var("t_local_up", 0, hi1)
            m.add((2**j1) * tl >= k1_up * th)
            m.add((2**j1) * tl <= k1_up * th + (2**j1 - 1))
            parts.append(tl)
            his.append(self.hi["t_local_up"])
            self._loc1 = (k1_up, j1)
        busy = self._var("busy_compute", self.k_q, max(his))
        m.add_max_equality(busy, parts)
        p_comp = self._var("p_comp", 0, tiling.ceil_div_core(hi, self.k_q))
        m.add_division_equality(p_comp, energy, busy)
        # room: what the compute may draw, TDP - the fixed power at the lowest clock (the most room any sustained
        # clock leaves), the memory's power left out (it falls with the clock): a constant, 2^PB
        room = self._var("room", 2**self.pb, 2**self.pb)
        self.f_bits = min(F_BITS, 61 - self.hi["p_comp"].bit_length(), 61 - (self.pb + 1) - math.ceil(
            math.log2(d.u_of_rho(RHO_FLOOR))))
        self.k_floor = self.kappa_of(d.u_of_rho(RHO_FLOOR), "up")  # from here on, rho is the floor's

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
        return min(RHO_FLOOR, self.d.rho_of_u(max(1.0, self.u_of(kappa)))) * (1 - 1e-12)

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
                # the on-chip levels run on the core clock too (dse.model.hierarchy)
                if self.l2_on:
                    m.add(to_int(self.bw2_q / rho, rounding="up") * v["time"] >= v["bytes_l2"]).only_enforce_if(lit)
                if self.loc_on:
                    m.add((2**self.loc_j) * v["time_x_split"] >= to_int(self.k_loc * rho, rounding="down")
                          * v["waves_x_reads"]).only_enforce_if(lit)
            self._bands[key] = (lit, rho)
        return self._bands[key]

    def kappa_at(self, solver) -> int | None:
        """floor(p_comp 2^F / room) of a solver's solution by the model's integer formulas (the solve may
        predate the power variables): where its band is split. None: no room (band NO_ROOM)."""
        self._power()
        d, v, k = self.d, self.v, self._k
        val = {name: int(solver.value(v[name])) for name in ("c_m", "c_n", "split", "bytes", "t_m", "t_n")}
        energy = (k["fix"] + k["loc"] * (d.m * val["c_n"] + d.n * val["c_m"]) + k["a"] * val["c_n"]
                  + k["b"] * val["c_m"] + k["s"] * (val["split"] - 1))
        t_up = tiling.ceil_div_core(val["bytes"], self.bw_dn)
        busy = max(self.k_q, t_up)
        if self.l2_on:
            busy = max(busy, tiling.ceil_div_core(int(solver.value(v["bytes_l2"])), max(self.bw2_dn, 1)))
        if self.loc_on:
            s = MIN_BYTE_SCALE
            ea, eb = to_int(d.ea_loc, 1 / s, "up"), to_int(d.eb, 1 / s, "up")
            tm, tn = val["t_m"], val["t_n"]
            h = ea * tm * tiling.ceil_div_core(tn, d.rn) + eb * tn * (tiling.ceil_div_core(tm, d.rm) if d.rm else 1)
            k1_up, j1 = self._loc1
            busy = max(busy, tiling.ceil_div_core(k1_up * val["c_m"] * val["c_n"] * h, 2**j1))
        p_comp = energy // busy
        return min(p_comp * 2**self.f_bits // 2**self.pb, self.k_floor)

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
