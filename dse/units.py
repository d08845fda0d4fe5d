"""Quantities with units at the boundary: "3.35 TB/s" -> 3.35e12 (bytes/s).

dse keeps every number in one canonical unit per dimension inside the program
and accepts units only where people write them (YAML, the command line).

Canonical units (the "SI inside" of the architecture; area and length in mm
because every chip figure is quoted that way):

    information  byte         (1 bit = 1/8 byte; GB = 1e9 B, GiB = 2**30 B)
    time         second
    energy       joule        (W = J/s)
    length       millimetre   (area: mm^2)
    work         FLOP         (a multiply-add counts 2; "op" is the same unit)
    money        US dollar
    voltage      volt

Why not pint: dse needs ~25 units, strict dimension checks and two prefix
families (SI and IEC). A 150-line table is exact about GB vs GiB and Gb vs GB,
imports in microseconds (pint's registry costs ~0.3 s on every CLI call) and
gives error messages in the user's own words.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dse.errors import UnitError

# Dimension: exponents over (byte, second, joule, mm, flop, usd, volt)
_BASES = ("byte", "s", "J", "mm", "flop", "usd", "V")
Dim = tuple[int, int, int, int, int, int, int]

DIMENSIONLESS: Dim = (0, 0, 0, 0, 0, 0, 0)


def _d(byte=0, s=0, J=0, mm=0, flop=0, usd=0, V=0) -> Dim:  # noqa: N803 - unit symbols
    return (byte, s, J, mm, flop, usd, V)


# Named dimensions used by specs (the names appear in error messages).
DIMENSIONS: dict[str, Dim] = {
    "dimensionless": DIMENSIONLESS,
    "bytes": _d(byte=1),
    "bandwidth": _d(byte=1, s=-1),
    "time": _d(s=1),
    "frequency": _d(s=-1),
    "power": _d(J=1, s=-1),
    "energy": _d(J=1),
    "energy_per_byte": _d(J=1, byte=-1),
    "energy_per_flop": _d(J=1, flop=-1),
    "length": _d(mm=1),
    "area": _d(mm=2),
    "flops": _d(flop=1),
    "flop_rate": _d(flop=1, s=-1),
    "power_density": _d(J=1, s=-1, mm=-2),
    "bytes_per_area": _d(byte=1, mm=-2),
    "area_per_byte": _d(mm=2, byte=-1),
    "money": _d(usd=1),
    "money_per_area": _d(usd=1, mm=-2),
    "money_per_byte": _d(usd=1, byte=-1),
    "defect_density": _d(mm=-2),
    "energy_per_flop_area": _d(J=1, flop=-1),
    "money_per_energy": _d(usd=1, J=-1),
    "voltage": _d(V=1),
    "energy_per_area": _d(J=1, mm=-2),  # e.g. clock-tree energy per cycle per mm^2 of logic
    "throughput": _d(s=-1),  # tokens (or requests) per second: "10000 tokens/s"
}

# unit symbol -> (factor to canonical, dimension, accepts prefixes)
_UNITS: dict[str, tuple[float, Dim, bool]] = {
    "B": (1.0, _d(byte=1), True),
    "byte": (1.0, _d(byte=1), True),
    "bytes": (1.0, _d(byte=1), True),
    "b": (0.125, _d(byte=1), True),
    "bit": (0.125, _d(byte=1), True),
    "bits": (0.125, _d(byte=1), True),
    "s": (1.0, _d(s=1), True),
    "sec": (1.0, _d(s=1), False),
    "min": (60.0, _d(s=1), False),
    "h": (3600.0, _d(s=1), False),
    "hour": (3600.0, _d(s=1), False),
    "hours": (3600.0, _d(s=1), False),
    "day": (86400.0, _d(s=1), False),
    "days": (86400.0, _d(s=1), False),
    "year": (365.0 * 86400.0, _d(s=1), False),
    "years": (365.0 * 86400.0, _d(s=1), False),
    "Hz": (1.0, _d(s=-1), True),
    "J": (1.0, _d(J=1), True),
    "W": (1.0, _d(J=1, s=-1), True),
    "Wh": (3600.0, _d(J=1), True),
    "V": (1.0, _d(V=1), True),
    "m": (1000.0, _d(mm=1), True),
    "FLOP": (1.0, _d(flop=1), True),
    "FLOPs": (1.0, _d(flop=1), True),
    "flop": (1.0, _d(flop=1), True),
    "op": (1.0, _d(flop=1), True),
    "ops": (1.0, _d(flop=1), True),
    "OP": (1.0, _d(flop=1), True),
    "OPs": (1.0, _d(flop=1), True),
    "FLOPS": (1.0, _d(flop=1, s=-1), True),
    "TOPS": (1e12, _d(flop=1, s=-1), False),
    "$": (1.0, _d(usd=1), True),
    "USD": (1.0, _d(usd=1), True),
    "usd": (1.0, _d(usd=1), True),
    "%": (0.01, DIMENSIONLESS, False),
    "x": (1.0, DIMENSIONLESS, False),
    "token": (1.0, DIMENSIONLESS, False),
    "tokens": (1.0, DIMENSIONLESS, False),
}

_SI_PREFIX = {
    "y": 1e-24, "z": 1e-21, "a": 1e-18, "f": 1e-15, "p": 1e-12, "n": 1e-9,
    "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "m": 1e-3, "c": 1e-2,
    "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
}
_IEC_PREFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_IEC_OK = {"B", "byte", "bytes", "b", "bit", "bits"}

_NUMBER = r"[-+]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*(.*?)\s*$")


@dataclass(frozen=True)
class Quantity:
    value: float  # in canonical units
    dim: Dim


def _parse_symbol(sym: str) -> tuple[float, Dim]:
    """One unit symbol with an optional prefix and power: 'mm^2', 'GiB', 'ns'."""
    power = 1
    m = re.fullmatch(r"(.+?)(?:\^|\*\*)?([-+]?\d+|²|³)", sym)
    if m and m.group(1) and not sym[-1:].isalpha() and sym not in _UNITS:
        base_sym, p = m.group(1), m.group(2)
        power = {"²": 2, "³": 3}.get(p) or int(p)
        sym = base_sym
    if sym in _UNITS:
        f, d, _ = _UNITS[sym]
    else:
        for pre, pf in _IEC_PREFIX.items():
            rest = sym[len(pre):]
            if sym.startswith(pre) and rest in _IEC_OK:
                f0, d, _ = _UNITS[rest]
                f = f0 * pf
                break
        else:
            for pre, pf in _SI_PREFIX.items():
                rest = sym[len(pre):]
                if sym.startswith(pre) and rest in _UNITS and _UNITS[rest][2]:
                    f0, d, _ = _UNITS[rest]
                    f = f0 * pf
                    break
            else:
                raise UnitError(f"unknown unit '{sym}'")
    return f**power, tuple(e * power for e in d)  # type: ignore[return-value]


def parse_unit(text: str) -> tuple[float, Dim]:
    """'TB/s' -> (1e12, bytes/s). Products with '*' or '·' or ' ', one or more '/'."""
    text = text.strip()
    if not text:
        return 1.0, DIMENSIONLESS
    factor, dim = 1.0, [0] * len(_BASES)
    parts = re.split(r"(/)", text)
    sign = 1
    for part in parts:
        if part == "/":
            sign = -1
            continue
        for sym in re.split(r"[*·\s]+", part.strip()):
            if not sym:
                continue
            f, d = _parse_symbol(sym)
            factor *= f if sign > 0 else 1.0 / f
            for i, e in enumerate(d):
                dim[i] += sign * e
        # after the first '/', each further '/' also divides (a/b/c = a/(b*c))
    return factor, tuple(dim)  # type: ignore[return-value]


def dim_name(dim: Dim) -> str:
    for name, d in DIMENSIONS.items():
        if d == dim:
            return name
    num = [f"{b}^{e}" if e != 1 else b for b, e in zip(_BASES, dim) if e > 0]
    den = [f"{b}^{-e}" if e != -1 else b for b, e in zip(_BASES, dim) if e < 0]
    return (" ".join(num) or "1") + ("/" + " ".join(den) if den else "")


def parse_quantity(value, expected: str, *, allow_bare: bool = False) -> float:
    """Parse a quantity of the named dimension into its canonical unit.

    ``value`` is a string like "3.35 TB/s". A bare number is accepted only for
    dimensionless quantities or when ``allow_bare`` (then it is taken as
    canonical). Raises UnitError with what was expected and what was found.
    """
    want = DIMENSIONS[expected]
    if isinstance(value, bool):
        raise UnitError(f"expected a {expected} quantity with a unit, got {value!r}")
    if isinstance(value, (int, float)):
        if want == DIMENSIONLESS or allow_bare:
            return float(value)
        raise UnitError(
            f"expected a {expected} quantity with a unit (e.g. {example(expected)}), got bare number {value!r}"
        )
    if not isinstance(value, str):
        raise UnitError(f"expected a {expected} quantity like {example(expected)}, got {type(value).__name__} {value!r}")
    m = _QUANTITY.match(value)
    if not m:
        raise UnitError(f"expected a {expected} quantity like {example(expected)}, got {value!r}")
    number = float(m.group(1).replace("_", ""))
    unit_text = m.group(2)
    if not unit_text and want != DIMENSIONLESS and not allow_bare:
        raise UnitError(f"expected a {expected} quantity with a unit (e.g. {example(expected)}), got {value!r}")
    try:
        factor, dim = parse_unit(unit_text)
    except UnitError as e:
        raise UnitError(f"{e} in {value!r}; expected a {expected} quantity like {example(expected)}") from None
    if dim != want:
        raise UnitError(
            f"expected a {expected} quantity like {example(expected)}, got {value!r} ({dim_name(dim)})"
        )
    inv = 1.0 / factor
    out = number / round(inv) if factor < 1 and abs(inv - round(inv)) < 1e-6 * inv else number * factor
    if not math.isfinite(out):
        raise UnitError(f"expected a finite {expected} quantity, got {value!r}")
    return out


_EXAMPLES = {
    "bytes": "'80 GB' or '36 GiB'", "bandwidth": "'3.35 TB/s'", "time": "'2 us'",
    "frequency": "'1.83 GHz'", "power": "'700 W'", "energy": "'0.5 J'",
    "energy_per_byte": "'3.9 pJ/bit'", "energy_per_flop": "'0.5 pJ/FLOP'", "length": "'26 mm'",
    "area": "'814 mm^2'", "flops": "'33.5 MFLOP'", "flop_rate": "'989 TFLOP/s'",
    "power_density": "'0.8 W/mm^2'", "money": "'16000 $'", "money_per_area": "'0.2 $/mm^2'",
    "money_per_byte": "'10 $/GB'", "defect_density": "'0.1 /cm^2'", "area_per_byte": "'0.45 mm^2/MiB'",
    "money_per_energy": "'0.10 $/kWh'", "throughput": "'10000 tokens/s'",
    "dimensionless": "'0.5'",
}


def example(expected: str) -> str:
    return _EXAMPLES.get(expected, expected)


_DISPLAY = {
    "bytes": [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")],
    "bandwidth": [(1e15, "PB/s"), (1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1, "B/s")],
    "time": [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps")],
    "frequency": [(1e9, "GHz"), (1e6, "MHz"), (1, "Hz")],
    "power": [(1e3, "kW"), (1, "W"), (1e-3, "mW")],
    "energy": [(1, "J"), (1e-3, "mJ"), (1e-6, "uJ"), (1e-9, "nJ"), (1e-12, "pJ")],
    "flop_rate": [(1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1, "FLOP/s")],
    "flops": [(1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"), (1, "FLOP")],
    "area": [(1, "mm^2")],
    "money": [(1, "$")],
    "voltage": [(1, "V"), (1e-3, "mV")],
}


#: Binary prefixes for a size that is a round number of them (228 KiB of shared memory, a 64 MiB L2).
_BINARY = [(2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB")]


def _binary_bytes(value: float, digits: int) -> str | None:
    """'228 KiB' where ``value`` is a round number (at most 2 decimals) of its largest binary prefix, else None:
    binary sizes show binary prefixes, decimal ones (80 GB of HBM, 50 MB of L2) SI (ARCHITECTURE: units)."""
    for f, sym in _BINARY:
        if abs(value) >= f:
            x = value / f
            if round(x, 2) * f == value:
                return f"{x:.{digits}g} {sym}"
            return None
    return None


def format_memory_size(value: float, digits: int = 4) -> str:
    """Bytes of a region of memory in binary prefixes, round or not ('1.492 MiB'): a tile's bytes and address
    span are rows of power-of-two strides, and a column of them reads in one unit (format_quantity would write
    '1.565 MB' beside '632.5 KiB' by the numbers' roundness)."""
    if value is None or not math.isfinite(value):
        return str(value)
    for f, sym in _BINARY:
        if abs(value) >= f:
            return f"{value / f:.{digits}g} {sym}"
    return f"{value:.{digits}g} B"


def format_quantity(value: float, dimension: str, digits: int = 4, *, binary: bool = True) -> str:
    """3.35e12, 'bandwidth' -> '3.35 TB/s' (for tables and reports); bytes in binary prefixes where they are
    a round number of them (233472, 'bytes' -> '228 KiB'; 80e9 -> '80 GB'), unless ``binary`` is False."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return str(value)
    if dimension == "bytes" and value and binary:
        b = _binary_bytes(float(value), digits)
        if b is not None:
            return b
    scales = _DISPLAY.get(dimension)
    if not scales:
        return f"{value:.{digits}g}"
    for f, sym in scales:
        if abs(value) >= f:
            return f"{value / f:.{digits}g} {sym}"
    f, sym = scales[-1]
    return f"{value / f:.{digits}g} {sym}"


#: Units a user writes per dimension, largest first (:func:`format_input` takes the first that reads well).
_INPUT_UNITS = {
    "bytes": ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "kB", "B"),
    "bandwidth": ("TB/s", "GB/s", "MB/s", "B/s"),
    "time": ("years", "days", "h", "s", "ms", "us", "ns"),
    "frequency": ("GHz", "MHz", "Hz"),
    "power": ("kW", "W", "mW"),
    "energy": ("J", "mJ", "uJ", "nJ", "pJ"),
    "energy_per_byte": ("pJ/B", "pJ/bit", "fJ/B"),
    "energy_per_flop": ("pJ/FLOP", "fJ/FLOP"),
    "length": ("mm", "um"),
    "area": ("mm^2",),
    "flops": ("TFLOP", "GFLOP", "MFLOP", "FLOP"),
    "flop_rate": ("PFLOP/s", "TFLOP/s", "GFLOP/s", "FLOP/s"),
    "power_density": ("W/mm^2",),
    "money": ("$",),
    "money_per_area": ("$/mm^2",),
    "money_per_byte": ("$/GB",),
    "money_per_energy": ("$/kWh",),
    "voltage": ("V", "mV"),
    "throughput": ("tokens/s",),
    "area_per_byte": ("mm^2/MiB",),
    "bytes_per_area": ("MB/mm^2",),
    "defect_density": ("/cm^2",),
    "energy_per_area": ("pJ/mm^2",),
}
_SYMBOL = {"byte": "B", "s": "s", "J": "J", "mm": "mm", "flop": "FLOP", "usd": "$", "V": "V"}


def _canonical_unit(dim: Dim) -> str:
    """The canonical unit of a dimension as text that :func:`parse_unit` reads: 'mm^2/B', 'J/FLOP', '/mm^2'."""
    num = [_SYMBOL[b] + (f"^{e}" if e != 1 else "") for b, e in zip(_BASES, dim) if e > 0]
    den = [_SYMBOL[b] + (f"^{-e}" if e != -1 else "") for b, e in zip(_BASES, dim) if e < 0]
    return "*".join(num) + ("/" + "/".join(den) if den else "")


def format_input(value: float, dimension: str) -> str:
    """A quantity as a user writes it in a YAML file or on the command line, e.g. 126144000.0, 'time' ->
    '4 years'; 0.1 / 3.6e6, 'money_per_energy' -> '0.1 $/kWh'.

    The first (largest) unit of the dimension in which the value is a short number (at most 6 significant
    digits) of 1 or more that :func:`parse_quantity` reads back as ``value``; else the first unit with a short
    number below 1; else every digit in the canonical unit. Used by
    the schema reference for defaults (what the reader may paste into a file).
    """
    v = float(value)
    if dimension not in DIMENSIONS or DIMENSIONS[dimension] == DIMENSIONLESS:
        return f"{v:.6g}" if math.isclose(float(f"{v:.6g}"), v, rel_tol=1e-9) else repr(v)
    canonical = _canonical_unit(DIMENSIONS[dimension])
    units = tuple(u for u in _INPUT_UNITS.get(dimension, ()) if u != canonical) + (canonical,)
    if v == 0 or not math.isfinite(v):
        return f"{v:g} {units[-1]}"
    fits = []  # (text, |number|) of every unit the value reads back exactly in, with a short number
    for unit in units:
        x = v / parse_unit(unit)[0]
        text = f"{x:.6g} {unit}"
        if "e" not in text.split()[0] and math.isclose(parse_quantity(text, dimension), v, rel_tol=1e-9):
            fits.append((text, abs(x)))
    for text, x in fits:  # the largest unit with a number of 1 or more, else the first that fits
        if x >= 1:
            return text
    if fits:
        return fits[0][0]
    return f"{v!r} {canonical}"


def format_percent(fraction: float, digits: int = 0) -> str:
    """A share as a percentage: 0.983, 0 -> '98%'; 0.0062, 1 -> '0.6%' (plots' shares of time and of designs)."""
    if fraction is None or not math.isfinite(float(fraction)):
        return "-"
    return f"{float(fraction) * 100:.{digits}f}%"


def format_ticks(values, dimension: str, digits: int = 4) -> list[str]:
    """The tick labels of one axis: each value as :func:`format_quantity` writes it, in one prefix family, so
    that an axis of sizes does not mix '156.2 KiB' with '400 kB' (binary only if every tick is a round binary
    size: 128 KiB, 256 KiB, 512 KiB)."""
    vals = [float(v) for v in values]
    binary = dimension == "bytes" and all(v == 0 or _binary_bytes(v, digits) is not None for v in vals)
    return ["0" if v == 0 else format_quantity(v, dimension, digits, binary=binary) for v in vals]
