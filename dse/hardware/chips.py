"""Design points as numpy arrays (:class:`Chips`): the evaluator's input, built from specs or a base chip."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dse import technology
from dse.errors import SpecError, unknown_name
from dse.hardware.records import ChipSpec, _canonical_format
from dse.hardware.rules import KEEPS, MEMORY_CODE, OPTIONAL_INPUTS, derive, override_rules
from dse.model import jit
from dse.model.links import TOPOLOGIES
from dse.precision import get_format


class PointNames(Sequence):
    """The names "point<i>" of points numbered 0 .. n - 1 (``numbers`` an int), or ``numbers`` (an array of each
    point's number), each made when read."""

    def __init__(self, numbers):
        self._numbers = numbers

    def __len__(self) -> int:
        return self._numbers if isinstance(self._numbers, int) else len(self._numbers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        return f"point{i if isinstance(self._numbers, int) else int(self._numbers[i])}"

    def __iter__(self):
        numbers = range(self._numbers) if isinstance(self._numbers, int) else self._numbers.tolist()
        return (f"point{i}" for i in numbers)


class Chips:
    """N design points as a struct of numpy arrays (the evaluator's input).

    ``arrays`` maps dotted names to float64 arrays of length N. Built from
    specs (:meth:`from_specs`) or from one base spec broadcast over N points
    with some names overridden by arrays (:meth:`from_base`) — the path every
    search takes. Both build the raw inputs (``inputs``; NaN where a point
    does not give a value) and derive the rest with :func:`derive`, so a
    chip file and a design point of the same design are the same arrays.

    A figure every point shares because nothing it derives from varies (the base chip's own values in a search)
    is derived once and held as a read-only view of that one value over the N points (stride 0:
    :func:`same_at_every_point`), not N copies: the evaluator computes with it once (issue 20), and a million
    points do not hold a million copies of each of the chip's ~100 figures.
    """

    def __init__(self, arrays: dict[str, np.ndarray], formats: list[str], names: list[str] | None = None,
                 specs: list[ChipSpec] | None = None, base: ChipSpec | None = None,
                 inputs: dict[str, np.ndarray] | None = None):
        self.arrays = arrays
        self.formats = formats
        n = {len(a) for a in arrays.values()}
        if len(n) != 1:
            raise ValueError(f"arrays of different lengths: {n}")
        self.n = n.pop()
        self._names = names or None  # (None: "point<i>", made when first read: _numbered)
        self._numbered = None  # (the points' numbers in the Chips they were taken from; None: 0 .. N - 1)
        self.specs = specs
        self.base = base  # the chip the points were built on (from_base): its node and memory technology
        self.inputs = inputs  # the raw inputs ``arrays`` was derived from (NaN: not given); None if built directly

    @property
    def names(self) -> list[str]:
        """The points' names: the specs', else "point<i>" (i: the point's number in the points it was taken from)."""
        if self._names is None:
            self._names = list(self.name_sequence())
        return self._names

    def name_sequence(self) -> Sequence[str]:
        """:attr:`names` as an immutable sequence, each "point<i>" made when read (:class:`PointNames`) where the
        points have no names of their own: 65,536 names took ~10 ms to make, ~8% of a batch of the default study's
        evaluation that reads none of them (issue 20)."""
        if self._names is not None:
            return tuple(self._names)
        return PointNames(self.n if self._numbered is None else self._numbered)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    # ------------------------------------------------------------ building
    @staticmethod
    def inputs_view(spec: ChipSpec) -> dict[str, float]:
        """The raw numeric inputs of one spec by dotted name, plus what cannot be vectorized.

        Every number the spec gives (a value it leaves out is absent: :func:`derive`
        supplies its default), ``memory.kind`` (0 HBM, 1 DRAM, 2 SRAM), ``links.scale_up.topology``
        where given (its index in dse.model.links.TOPOLOGIES: 0 switch, 1 mesh, 2 ring, 3 torus), and the
        look-ups by name, resolved here once per spec: ``tech.*`` (the process
        node's SRAM read-energy anchors and static fraction, the memory
        technology's J/B), ``energy.flop.<fmt>`` (the spec's own figure, else the
        node's), ``energy.vector_flop`` and ``energy.link``.
        """
        out: dict[str, float] = {}
        for k, v in spec.flat().items():
            if isinstance(v, (int, float)):  # bools too
                out[k] = float(v)
        out["memory.kind"] = float(MEMORY_CODE[spec.memory_kind])
        out["l2_scope"] = float(spec.l2_scope == "die")  # 1: each die's L2 serves its own units only
        if spec.links.scale_up is not None and spec.links.scale_up.topology is not None:
            out["links.scale_up.topology"] = float(TOPOLOGIES.index(spec.links.scale_up.topology))
        # the area model's organisation of the matrix datapath and the width of the vector lanes (dse.model.area)
        inst = spec.matrix.instruction
        array = spec.matrix.array or ("systolic" if inst.m == 1 and inst.n >= 64 and inst.k >= 64 else "tensor_core")
        out["matrix.systolic"] = float(array == "systolic")
        fa = technology.area_model().format_area
        out["tech.vector_lane_area"] = fa[spec.vector.format] / fa["fp32"] if spec.vector is not None else 1.0
        node = technology.process(spec.process)
        e = node.sram_read_energy
        out.update({"tech.sram_small": e.small, "tech.sram_small_size": e.small_size, "tech.sram_large": e.large,
                    "tech.sram_large_size": e.large_size})
        v = node.voltage
        out.update({"tech.v_min": v.min, "tech.v_nominal": v.nominal, "tech.v_max": v.max,
                    "tech.v_threshold": v.threshold, "tech.leak_logic": node.leakage.logic,
                    "tech.leak_sram": node.leakage.sram, "tech.clock_energy": node.clock_energy,
                    "tech.operand_energy": node.operand_energy,
                    "tech.overhead_matrix": node.instruction_overhead.matrix,
                    "tech.overhead_vector": node.instruction_overhead.vector})
        oc = technology.on_chip_defaults()  # the on-chip levels' default bandwidth rules (dse.model.hierarchy)
        out.update({"tech.local_bytes_per_cycle": oc.local_bytes_per_cycle,
                    "tech.l2_bytes_per_cycle_per_unit": oc.l2_bytes_per_cycle_per_unit,
                    "tech.systolic_rows_per_cycle": oc.systolic_rows_per_cycle,
                    # one input row per cycle of the array at its fastest format: max over formats of
                    # FLOPs/cycle x bytes per value / (2 n) (TPU v1: 131,072 x 1 B / 512 = 256 B)
                    "tech.systolic_row_bytes": max(r * get_format(f).bits_per_value / 8.0
                                                   for f, r in spec.matrix.flops_per_cycle.items())
                    / (2.0 * spec.matrix.instruction.n)})
        if spec.hbm is not None or spec.dram is not None:
            out["tech.memory_energy"] = technology.memory(spec.hbm.generation if spec.hbm is not None
                                                          else spec.dram.kind).energy_per_byte
        tech = technology.chip_energy(spec)
        out["energy.link"] = tech["link"]
        # matrix arithmetic per format from the node (derive adds overheads and operands), a chip's own all-in figure
        for fmt in spec.matrix.flops_per_cycle:
            out[f"tech.flop.{_canonical_format(fmt)}"] = node.energy_per_flop(_canonical_format(fmt))
        for fmt, val in (spec.energy.flop or {}).items():
            out[f"energy.flop.{_canonical_format(fmt)}"] = val
        # the vector unit computes in FP32 (softmax, norms): its arithmetic energy per FLOP from the process node
        out["tech.vector_flop"] = node.energy_per_flop("fp32")
        return out

    @staticmethod
    def numeric_view(spec: ChipSpec) -> dict[str, float]:
        """The model's numbers of one spec, inputs and derived figures (:func:`derive`), by dotted name."""
        return {k: float(v[0]) for k, v in Chips.from_specs([spec]).arrays.items()}

    @classmethod
    def from_specs(cls, specs: list[ChipSpec]) -> "Chips":
        views = [cls.inputs_view(s) for s in specs]
        formats = sorted({f for s in specs for f in s.matrix.flops_per_cycle})
        keys = sorted({k for v in views for k in v})
        inputs = {k: np.array([v.get(k, np.nan) for v in views], dtype=float) for k in keys}
        for k, a in inputs.items():  # a format a chip lacks: rate 0 (the evaluator falls back to a wider one)
            if k.startswith(("matrix.flops_per_cycle.", "tech.flop.")):
                a[np.isnan(a)] = 0.0
        return cls(_over_points(derive(inputs), len(specs)), formats, [s.name for s in specs], list(specs),
                   inputs=inputs)

    @classmethod
    def from_base(cls, base: ChipSpec, n: int, overrides: dict[str, np.ndarray] | None = None) -> "Chips":
        """Broadcast ``base`` over ``n`` points, replacing named inputs by arrays.

        The same rules as a chip file made with :func:`with_overrides`
        (:func:`override_rules`), then the same derivation (:func:`derive`): a
        design point and the chip file of the same design evaluate alike. A
        derived name (``memory.bandwidth``, ``energy.l2``, ``power.static``...)
        may be overridden too: the value given wins over the derivation.
        """
        view, known = _base_view(base)
        overrides = overrides or {}
        unknown = [k for k in overrides if k not in known
                   and not k.startswith(("matrix.flops_per_cycle.", "matrix.flops_per_cycle_physical."))]
        if unknown:
            known = sorted(k for k in known if not k.startswith("tech."))
            raise SpecError([unknown_name("chip parameter", k, known) for k in unknown])
        reset, keep = override_rules(overrides)
        # (a value every point shares is one value, and so is what derives from such values alone: _over_points)
        inputs = {k: np.array([v], dtype=float) for k, v in view.items() if k not in reset}
        for k, v in overrides.items():
            a = np.asarray(v, dtype=float)
            inputs[k] = a.reshape(1) if a.size == 1 else np.broadcast_to(a, (n,)).copy()
        if keep:  # the kept figures of the design with every other change (as with_overrides)
            before = {k: v for k, v in inputs.items() if k not in KEEPS or k not in overrides}
            before.update({k: np.array([view[k]], dtype=float) for k in KEEPS if k in overrides and k in view})
            pre = derive(before)
            inputs.update({k: pre[k] for k in keep})
        formats = sorted(set(base.matrix.flops_per_cycle) | {
            k.rsplit(".", 1)[1] for k in overrides if k.startswith("matrix.flops_per_cycle.")})
        return cls(_over_points(derive(inputs), n), formats, None, None, base, inputs=_over_points(inputs, n))

    # ------------------------------------------------------------ derived, vectorized
    @property
    def total_units(self) -> np.ndarray:
        return self["dies"] * self["units"]

    def flops_per_cycle(self, fmt: str) -> np.ndarray:
        key = f"matrix.flops_per_cycle.{_canonical_format(fmt)}"
        return self.get(key, 0.0)

    def peak_flops(self, fmt: str) -> np.ndarray:
        """dies x units x FLOPs/cycle x clock (seed 000 "Dense and sparse peaks")."""
        return self.total_units * self.flops_per_cycle(fmt) * self["clock"]

    @property
    def memory_bandwidth(self) -> np.ndarray:
        return self["memory.bandwidth"]

    @property
    def memory_capacity(self) -> np.ndarray:
        return self["memory.capacity"]

    def machine_balance(self, fmt: str = "bf16") -> np.ndarray:
        return self.peak_flops(fmt) / self.memory_bandwidth

    def get(self, key: str, default: float = 0.0) -> np.ndarray:
        """The array of ``key``, else ``default`` at every point (a read-only view of the one value)."""
        a = self.arrays.get(key)
        return a if a is not None else over_points(default, self.n)

    def compact(self, key: str, default: float = 0.0) -> np.ndarray:
        """:meth:`get`, as one value where every point shares it (:func:`same_at_every_point`), else the N values:
        numpy computes with it once and broadcasts (:func:`over_points` lays a result back over the points)."""
        a = self.arrays.get(key)
        if a is None:
            return np.full(1, default, dtype=float)
        return a if a.shape[0] == 1 else a[:1] if a.strides[0] == 0 else a

    def take(self, index) -> "Chips":
        """The points at ``index``; a figure every point shares stays one value over them
        (:func:`same_at_every_point`)."""
        idx = np.atleast_1d(np.asarray(index))
        m = idx.size

        def taken(v):  # (a read-only view of one value over n >= m points: its first m, a slice, not broadcast_to)
            if v.strides[0] == 0 and v.shape[0] >= m:
                return v[:m]
            return over_points(v[:1], m) if same_at_every_point(v) else v[idx]

        arrays = {k: taken(v) for k, v in self.arrays.items()}
        specs = [self.specs[i] for i in idx] if self.specs else None
        inputs = {k: taken(v) for k, v in self.inputs.items()} if self.inputs is not None else None
        if self._names is not None:
            return Chips(arrays, self.formats, [self._names[i] for i in idx], specs, self.base, inputs)
        out = Chips(arrays, self.formats, None, specs, self.base, inputs)
        out._numbered = idx if self._numbered is None else self._numbered[idx]
        return out


#: :func:`_base_view`'s answers by the base chip (its id; the chip kept, so that the id is not another's)
_BASE_VIEWS: dict[int, tuple] = {}


def _base_view(base: ChipSpec) -> tuple[dict[str, float], set[str]]:
    """:meth:`Chips.inputs_view` of a base chip and the names :meth:`Chips.from_base` accepts as overrides (its
    inputs, what derives from them, the optional inputs), found once per chip (a spec is immutable): a search builds
    its points on the same base batch after batch (~0.25 ms of the ~0.66 ms Chips.from_base took at 50 points; issue
    20). The view is shared: read, not changed."""
    got = _BASE_VIEWS.get(id(base))
    if got is not None and got[0] is base:
        return got[1], got[2]
    view = Chips.inputs_view(base)
    known = set(view) | set(derive({k: np.array([v]) for k, v in view.items()})) | {
        k for k in OPTIONAL_INPUTS if not k.startswith("hbm.") or base.hbm is not None}
    if len(_BASE_VIEWS) >= 64:
        _BASE_VIEWS.clear()
    _BASE_VIEWS[id(base)] = (base, view, known)
    return view, known


def _over_points(arrays: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """:func:`over_points` of each array (the name in the error of one of the wrong length). Float arrays of n values
    or of one value, nearly all of them, are taken here without the call (Chips.from_base lays ~200 over the points:
    ~0.1 ms of its ~0.45 at 50 points; issue 20)."""
    out = {}
    one = (1,)
    for k, a in arrays.items():
        if type(a) is np.ndarray and a.dtype is jit.FLOAT and a.ndim == 1:  # (over_points' answer, as it gives it)
            if a.shape[0] == n:
                out[k] = a
                continue
            if a.shape == one:
                out[k] = a if n == 1 else jit.one_over(a, n)
                continue
        try:
            out[k] = over_points(a, n)
        except ValueError as e:
            raise ValueError(f"{k}: {e}") from None
    return out


def over_points(a, n: int) -> np.ndarray:
    """``a`` (a number, one value or ``n`` values) as ``n`` float values: one value as a read-only view of it over
    the points (stride 0, as :class:`Chips` holds such figures)."""
    if type(a) is not np.ndarray or a.dtype != np.float64:
        a = np.asarray(a, dtype=float)
    if a.shape == (n,):
        return a
    if a.size != 1:
        raise ValueError(f"{a.shape[0] if a.ndim else 1} values for {n} design points")
    a = a.reshape(1)
    return a if n == 1 else jit.one_over(a, n)


def same_at_every_point(a: np.ndarray) -> bool:
    """``a`` (an array of the points) holds one value laid over every point (:class:`Chips`: a figure no point
    changes), known without reading it: one point, or a stride of 0."""
    return a.shape[0] == 1 or a.strides[0] == 0
