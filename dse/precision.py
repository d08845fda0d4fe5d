"""Number formats: storage per value (scales included) and numpy quantizers.

Two questions about a number format matter to the design-space model:

* **How many bytes does a tensor take?** ``n`` values of ``b`` bits with one
  ``s``-byte scale per group of ``g`` values occupy ``V = n b / 8 + (n / g) s``
  bytes (seed 004 §4.2.4; seed 004 §4.6.1 for MXFP8/MXFP4 of a 4096x4096
  weight; seed 000 "Microscaling formats" for 8.25 / 6.25 / 4.25 bits per
  value). :func:`storage_bytes` and :attr:`NumberFormat.bits_per_value` give it.
* **How much accuracy does it cost?** :func:`quantize` rounds a float array
  through the format; :func:`quant_error` measures the relative L2 error on
  seeded synthetic data, the metric of seed 004 §4.2.4 (L2 norm of the error
  over the L2 norm of the reference).

Formats (canonical names; see :data:`ALIASES` for the few accepted aliases):

========== ===== ================= ===== ======== ==========
name       kind  element           group scale    bits/value
========== ===== ================= ===== ======== ==========
fp32       float E8M23             --    --       32
tf32       float E8M10 in 32 bits  --    --       32
bf16       float E8M7              --    --       16
fp16       float E5M10             --    --       16
fp8_e4m3   float E4M3 (OCP E4M3FN) --    --       8
fp8_e5m2   float E5M2 (OCP)        --    --       8
int8       int   symmetric int     --    --       8
int4       int   symmetric int     --    --       4
mxfp8      float E4M3              32    E8M0     8.25
mxfp8_e5m2 float E5M2              32    E8M0     8.25
mxfp6      float E2M3              32    E8M0     6.25
mxfp6_e3m2 float E3M2              32    E8M0     6.25
mxfp4      float E2M1              32    E8M0     4.25
nvfp4      float E2M1              16    FP8 E4M3 4.5
========== ===== ================= ===== ======== ==========

Sources: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 for E4M3/E5M2;
OCP Microscaling Formats (MX) Specification v1.0 (2023) for the MX block
formats, their element encodings and the E8M0 scale; seed 000 "OCP FP8" and
"Microscaling formats"; seed 004 §4.2.4 and §4.6.1; NVIDIA Blackwell
documentation for NVFP4 (E2M1 elements, one FP8 E4M3 scale per 16 values,
plus one FP32 scale per tensor that is *not* counted here).

Rounding rules used by every quantizer (documented once, here):

* Floats round to nearest, ties to even (RNE), with gradual underflow
  (subnormals) in every format.
* Overflow: IEEE-like formats with infinities (fp16, bf16, tf32) overflow to
  ``+-inf`` exactly as an RNE conversion does (fp16 agrees bit for bit with
  numpy's float16 cast). The 8-, 6- and 4-bit element types **saturate** to
  their largest finite value (OCP "saturating" conversion; E4M3FN, E2M3, E3M2
  and E2M1 have no infinity; E5M2 has one but saturates too) and map
  ``+-inf`` to ``+-max``. NaN stays NaN.
* fp32 rounds to the nearest float32 (the identity on float32 input).
* Integers (int8, int4) use one symmetric scale per tensor,
  ``s = absmax / qmax`` with ``qmax = 2**(bits-1) - 1`` (127, 7); the most
  negative code (-128, -8) is unused so that zero is exact and the grid is
  symmetric. Values round half to even. An all-zero tensor stays zero.
* MX formats (OCP MX v1.0 §6.3): blocks of ``group_size`` consecutive values
  along the **last axis** (the tail block is zero-padded, which does not change
  its absmax); shared scale ``X = 2**(floor(log2(absmax)) - emax_elem)``
  clamped to the E8M0 range ``2**-127 .. 2**127``; elements ``V/X`` are
  quantized to the element format with saturation. A block holding NaN or
  inf gets a NaN scale, i.e. the whole block is NaN (the E8M0 NaN code).
* NVFP4: blocks of 16 along the last axis; scale ``absmax / 6`` rounded (RNE,
  saturating) to FP8 E4M3; elements ``V/scale`` quantized to E2M1. A block
  whose scale rounds to zero quantizes to zero. NVIDIA's second-level FP32
  per-tensor scale, which keeps block scales inside E4M3's range, is not
  modelled; it costs 4 bytes per tensor and is ignored in the bit count.

All quantizers work in float64 and return float64 arrays of the input's
shape. This module imports only numpy (and dse.errors).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError, unknown_name

__all__ = [
    "NumberFormat",
    "FORMATS",
    "ALIASES",
    "DISTRIBUTIONS",
    "get_format",
    "format_names",
    "bytes_per_value",
    "storage_bytes",
    "quantize",
    "quant_error",
]


@dataclass(frozen=True)
class NumberFormat:
    """One number format and how it is stored.

    ``element_bits`` is the width of one stored value; ``exponent_bits`` and
    ``mantissa_bits`` describe the element encoding of float formats (0 for
    integers); ``group_size`` values share one scale of ``scale_bits`` bits
    whose encoding is ``scale_kind`` ('e8m0', 'fp8_e4m3' or None); 0 / None
    for formats without a shared scale. ``bias`` is the exponent bias,
    ``max_finite`` the largest finite element magnitude (``qmax`` for ints),
    ``saturating`` tells whether overflow clamps to ``max_finite`` (True) or
    goes to infinity (False). ``source`` names where the definition comes from.
    """

    name: str
    kind: str  # 'float' | 'int'
    element_bits: int
    exponent_bits: int = 0
    mantissa_bits: int = 0
    group_size: int = 0
    scale_bits: int = 0
    scale_kind: str | None = None
    bias: int = 0
    max_finite: float = 0.0
    saturating: bool = True
    source: str = ""

    @property
    def bits_per_value(self) -> float:
        """element_bits + scale_bits / group_size (seed 000 "Microscaling formats")."""
        if self.group_size:
            return self.element_bits + self.scale_bits / self.group_size
        return float(self.element_bits)

    @property
    def bytes_per_value(self) -> float:
        """bits_per_value / 8, scales included (seed 004 §4.2.4)."""
        return self.bits_per_value / 8.0

    @property
    def is_block_scaled(self) -> bool:
        """True when groups of values share a scale (MX, NVFP4)."""
        return self.group_size > 0

    @property
    def emax(self) -> int:
        """Exponent of the largest power of two in the element format (floats only).

        OCP MX v1.0 §6.3 calls this ``emax_elem``: 8 for E4M3, 15 for E5M2,
        2 for E2M3, 4 for E3M2, 2 for E2M1.
        """
        return math.floor(math.log2(self.max_finite)) if self.kind == "float" else 0

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number, ``1 - bias`` (floats only)."""
        return 1 - self.bias


def _float_max(exponent_bits: int, mantissa_bits: int, bias: int, top_code: str) -> float:
    """Largest finite value of a binary float format.

    ``top_code``: 'ieee' when the all-ones exponent is reserved for inf/NaN
    (fp16, bf16, tf32, E5M2); 'fn' when only the all-ones bit pattern is NaN
    (E4M3FN); 'all' when every code is finite (E2M3, E3M2, E2M1).
    """
    e_top = 2**exponent_bits - 1
    if top_code == "ieee":
        return (2 - 2.0**-mantissa_bits) * 2.0 ** (e_top - 1 - bias)
    if top_code == "fn":
        return (2 - 2.0 ** (1 - mantissa_bits)) * 2.0 ** (e_top - bias)
    return (2 - 2.0**-mantissa_bits) * 2.0 ** (e_top - bias)


def _fp(name, e, m, bias, top, saturating, source, bits=None) -> NumberFormat:
    return NumberFormat(
        name=name,
        kind="float",
        element_bits=bits if bits is not None else 1 + e + m,
        exponent_bits=e,
        mantissa_bits=m,
        bias=bias,
        max_finite=_float_max(e, m, bias, top),
        saturating=saturating,
        source=source,

    )


_OFP8 = "OCP 8-bit Floating Point Specification (OFP8) rev 1.0; seed 000 'OCP FP8'"
_MX = "OCP Microscaling Formats (MX) Specification v1.0; seed 000 'Microscaling formats'; seed 004 §4.2.4, §4.6.1"
_NV = "NVIDIA Blackwell NVFP4 (E2M1, FP8 E4M3 scale per 16; per-tensor FP32 scale not counted); seed 004 §4.2.4"
_E8M0 = dict(scale_bits=8, scale_kind="e8m0")

#: Element encodings (no scale) used inside the block formats; not user-facing.
_ELEMENTS: dict[str, NumberFormat] = {
    "fp8_e4m3": _fp("fp8_e4m3", 4, 3, 7, "fn", True, _OFP8),
    "fp8_e5m2": _fp("fp8_e5m2", 5, 2, 15, "ieee", True, _OFP8),
    "fp6_e2m3": _fp("fp6_e2m3", 2, 3, 1, "all", True, _MX),
    "fp6_e3m2": _fp("fp6_e3m2", 3, 2, 3, "all", True, _MX),
    "fp4_e2m1": _fp("fp4_e2m1", 2, 1, 1, "all", True, _MX),
}


def _block(name, element, group, source, **scale) -> NumberFormat:
    el = _ELEMENTS[element]
    return NumberFormat(
        name=name,
        kind="float",
        element_bits=el.element_bits,
        exponent_bits=el.exponent_bits,
        mantissa_bits=el.mantissa_bits,
        group_size=group,
        bias=el.bias,
        max_finite=el.max_finite,
        saturating=True,
        source=source,
        **scale,
    )


#: Canonical formats by name.
FORMATS: dict[str, NumberFormat] = {
    f.name: f
    for f in (
        _fp("fp32", 8, 23, 127, "ieee", False, "IEEE 754 binary32"),
        _fp("tf32", 8, 10, 127, "ieee", False, "NVIDIA TF32 (stored in 32 bits); seed 004 §4.6.1", bits=32),
        _fp("bf16", 8, 7, 127, "ieee", False, "bfloat16; seed 004 §4.2.4"),
        _fp("fp16", 5, 10, 15, "ieee", False, "IEEE 754 binary16"),
        _ELEMENTS["fp8_e4m3"],
        _ELEMENTS["fp8_e5m2"],
        NumberFormat("int8", "int", 8, max_finite=127.0, source="symmetric INT8; seed 004 §4.2.4"),
        NumberFormat("int4", "int", 4, max_finite=7.0, source="symmetric INT4; seed 004 §4.6.1"),
        NumberFormat("int4_g128", "int", 4, max_finite=7.0, group_size=128, scale_bits=16, scale_kind="bf16",
                     source="group-wise INT4 with a BF16 scale per 128 values (GPTQ/AWQ style); 4.125 bits: "
                            "the 4-bit Qwen3-235B-A22B weights of seed 004 §4.3.3 (123.1 GB)"),
        _block("mxfp8", "fp8_e4m3", 32, _MX, **_E8M0),
        _block("mxfp8_e5m2", "fp8_e5m2", 32, _MX, **_E8M0),
        _block("mxfp6", "fp6_e2m3", 32, _MX, **_E8M0),
        _block("mxfp6_e3m2", "fp6_e3m2", 32, _MX, **_E8M0),
        _block("mxfp4", "fp4_e2m1", 32, _MX, **_E8M0),
        _block("nvfp4", "fp4_e2m1", 16, _NV, scale_bits=8, scale_kind="fp8_e4m3"),
    )
}

#: Element encoding of each block-scaled format.
_ELEMENT_OF: dict[str, str] = {
    "mxfp8": "fp8_e4m3",
    "mxfp8_e5m2": "fp8_e5m2",
    "mxfp6": "fp6_e2m3",
    "mxfp6_e3m2": "fp6_e3m2",
    "mxfp4": "fp4_e2m1",
    "nvfp4": "fp4_e2m1",
}

#: The only aliases accepted (lower case). 'fp8' means OCP E4M3: E4M3 and E5M2
#: have the same storage, and E4M3 is the usual weight/activation encoding;
#: seed 000 warns that checkpoints must name the encoding, so use 'fp8_e5m2'
#: explicitly when it matters for error. There is deliberately no 'fp4' or
#: 'fp6' alias: seed 004 §4.2.4 uses "4-bit values" with both a per-32 and a
#: per-16 scale, so a bare 'fp4' is ambiguous (use 'mxfp4' or 'nvfp4').
ALIASES: dict[str, str] = {
    "fp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "mxfp8_e4m3": "mxfp8",
    "mxfp6_e2m3": "mxfp6",
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
}

#: Synthetic data sets for :func:`quant_error`.
DISTRIBUTIONS = ("gaussian", "heavy_tailed")


def format_names() -> list[str]:
    """Canonical format names, sorted (aliases excluded; see :data:`ALIASES`)."""
    return sorted(FORMATS)


def get_format(name: str | NumberFormat) -> NumberFormat:
    """The :class:`NumberFormat` called ``name`` (case-insensitive; aliases allowed).

    A :class:`NumberFormat` is returned unchanged. Raises :class:`SpecError`
    naming the closest known format for an unknown name.
    """
    if isinstance(name, NumberFormat):
        return name
    if not isinstance(name, str):
        raise SpecError(f"number format must be a name (string), got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    try:
        return FORMATS[key]
    except KeyError:
        raise SpecError(unknown_name("number format", name, [*FORMATS, *ALIASES])) from None


def bytes_per_value(name: str | NumberFormat) -> float:
    """Bytes per stored value, shared scales included (seed 004 §4.2.4)."""
    return get_format(name).bytes_per_value


def storage_bytes(n_values, name: str | NumberFormat):
    """Bytes to store ``n_values`` values in format ``name``.

    ``V = n b / 8 + ceil(n / g) s`` (seed 004 §4.2.4) — exactly
    ``n * bits_per_value / 8`` when ``n`` is a whole number of groups. A
    partial last group is padded to a whole group (elements and scale), as seed
    000 "Microscaling formats" says a short block needs padding: the result is
    ``ceil(n / g) * g * bits_per_value / 8``. Bytes are not rounded up to whole
    bytes (an odd count of int4 values gives x.5). ``n_values`` may be a
    number or a numpy array (vectorized over design points); returns a float
    or a float array.
    """
    fmt = get_format(name)
    n = np.asarray(n_values, dtype=float)
    if np.any(~np.isfinite(n)) or np.any(n < 0):
        raise SpecError(f"storage_bytes: n_values must be finite and >= 0, got {n_values!r}")
    if fmt.group_size:
        g = fmt.group_size
        n = np.ceil(n / g) * g
    out = n * fmt.bits_per_value / 8.0
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------- quantizers


def _round_float(x: np.ndarray, fmt: NumberFormat) -> np.ndarray:
    """Round float64 ``x`` to the float format ``fmt`` (RNE, subnormals).

    The quantum of a value with exponent ``e = max(floor(log2|x|), emin)`` is
    ``2**(e - mantissa_bits)``; dividing by a power of two is exact in float64
    and ``np.rint`` rounds half to even. Overflow saturates or goes to inf
    according to ``fmt.saturating``.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        _, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1, so floor(log2|x|) = e - 1
        e = np.maximum(e - 1, fmt.emin)
        quantum = np.ldexp(1.0, e - fmt.mantissa_bits)
        q = np.rint(x / quantum) * quantum
        too_big = np.abs(q) > fmt.max_finite  # False for NaN
        if fmt.saturating:
            q = np.where(too_big, np.copysign(fmt.max_finite, x), q)
        else:
            q = np.where(too_big, np.copysign(np.inf, x), q)
    return q


def _to_blocks(x: np.ndarray, g: int) -> tuple[np.ndarray, int]:
    """Reshape the last axis into blocks of ``g`` (zero-padded); returns (blocks, pad)."""
    if x.ndim == 0:
        x = x.reshape(1)
    pad = (-x.shape[-1]) % g
    if pad:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (pad,))], axis=-1)
    return x.reshape(x.shape[:-1] + (x.shape[-1] // g, g)), pad


def _from_blocks(b: np.ndarray, pad: int, shape: tuple) -> np.ndarray:
    b = b.reshape(b.shape[:-2] + (b.shape[-2] * b.shape[-1],))
    if pad:
        b = b[..., : b.shape[-1] - pad]
    return b.reshape(shape)


def _quantize_mx(x: np.ndarray, fmt: NumberFormat, g: int) -> np.ndarray:
    """OCP MX v1.0 §6.3: E8M0 scale 2**(floor(log2 absmax) - emax_elem) per block of g."""
    el = _ELEMENTS[_ELEMENT_OF[fmt.name]]
    blocks, pad = _to_blocks(x, g)
    with np.errstate(invalid="ignore", over="ignore"):
        amax = np.max(np.abs(blocks), axis=-1, keepdims=True)  # NaN if any NaN
        _, e = np.frexp(amax)
        shared = np.clip(e - 1 - el.emax, -127, 127)
        scale = np.ldexp(1.0, shared)
        scale = np.where(np.isfinite(amax), scale, np.nan)  # NaN/inf block -> NaN scale
        q = _round_float(blocks / scale, el) * scale
    return _from_blocks(q, pad, x.shape)


def _quantize_nvfp4(x: np.ndarray, fmt: NumberFormat, g: int) -> np.ndarray:
    """NVFP4: scale = absmax / 6 rounded to FP8 E4M3, E2M1 elements, per block of g."""
    el = _ELEMENTS[_ELEMENT_OF[fmt.name]]
    blocks, pad = _to_blocks(x, g)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
        scale = _round_float(amax / el.max_finite, _ELEMENTS["fp8_e4m3"])
        scale = np.where(np.isfinite(amax), scale, np.nan)
        safe = np.where(scale == 0, 1.0, scale)
        q = _round_float(blocks / safe, el) * safe
        q = np.where(scale == 0, 0.0, q)
    return _from_blocks(q, pad, x.shape)


def _quantize_int(x: np.ndarray, fmt: NumberFormat) -> np.ndarray:
    """Symmetric absmax scaling: s = absmax / qmax, q = clip(rint(x / s)); per tensor, or per group of
    ``group_size`` values along the last axis (tail zero-padded) with the scale stored in BF16 (int4_g128)."""
    qmax = fmt.max_finite
    if x.size == 0:
        return x.copy()
    if fmt.group_size:
        g = fmt.group_size
        shape = x.shape
        flat = x.reshape(-1, shape[-1] if x.ndim else 1)
        pad_n = (-flat.shape[1]) % g
        blocks = np.pad(flat, ((0, 0), (0, pad_n))).reshape(flat.shape[0], -1, g)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
            s = quantize(amax / qmax, "bf16")
            q = np.where(s > 0, np.clip(np.rint(blocks / np.where(s > 0, s, 1.0)), -qmax, qmax) * s, 0.0)
        out = q.reshape(flat.shape[0], -1)[:, : flat.shape[1]]
        return out.reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        amax = np.max(np.abs(x))
        if amax == 0:
            return np.zeros_like(x)
        s = amax / qmax
        return np.clip(np.rint(x / s), -qmax, qmax) * s


def quantize(x, name: str | NumberFormat, *, group_size: int | None = None) -> np.ndarray:
    """Round-trip ``x`` through format ``name``: the values the format can represent.

    Returns a float64 array of ``x``'s shape (see the module docstring for the
    rounding, saturation and scaling rules). Block formats group values along
    the last axis; ``group_size`` overrides the format's group (for studying
    the effect of grouping, seed 004 §4.2.4) and is only accepted for
    block-scaled formats.
    """
    fmt = get_format(name)
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise SpecError(f"quantize: expected a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    g = fmt.group_size
    if group_size is not None:
        if not fmt.is_block_scaled:
            raise SpecError(f"quantize: group_size applies only to block-scaled formats, not '{fmt.name}'")
        if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
            raise SpecError(f"quantize: group_size must be a positive integer, got {group_size!r}")
        g = int(group_size)
    if fmt.name == "fp32":
        with np.errstate(over="ignore"):
            return arr.astype(np.float32).astype(np.float64)
    if fmt.kind == "int":
        return _quantize_int(arr, fmt)
    if fmt.scale_kind == "e8m0":
        return _quantize_mx(arr, fmt, g)
    if fmt.scale_kind == "fp8_e4m3":
        return _quantize_nvfp4(arr, fmt, g)
    return _round_float(arr, fmt)


def _synthetic(distribution: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if distribution == "gaussian":
        return rng.standard_normal(n)
    return rng.standard_t(3, n)


@functools.lru_cache(maxsize=256)
def quant_error(name: str, distribution: str = "gaussian", n: int = 65536, seed: int = 0) -> float:
    """Relative L2 error ``||q(x) - x|| / ||x||`` of format ``name`` on synthetic data.

    The metric is seed 004 §4.2.4's (L2 norm of the error over the L2 norm of
    the reference). Data: ``n`` values from ``numpy.random.default_rng(seed)``;
    'gaussian' is the standard normal, 'heavy_tailed' is Student's t with 3
    degrees of freedom (finite variance, heavy tails, outliers that stress
    per-tensor and per-block scales). One 1-D vector, so block formats use
    consecutive runs of values. Deterministic and memoized.
    """
    fmt = get_format(name)
    if distribution not in DISTRIBUTIONS:
        raise SpecError(unknown_name("distribution", distribution, DISTRIBUTIONS))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise SpecError(f"quant_error: n must be a positive integer, got {n!r}")
    x = _synthetic(distribution, int(n), seed)
    err = quantize(x, fmt) - x
    return float(np.linalg.norm(err) / np.linalg.norm(x))
