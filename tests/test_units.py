"""Units at the boundary (dse.units). Expected values are the unit definitions
themselves: SI prefixes (1e3 steps), IEC prefixes (2**10 steps), 1 bit = 1/8 byte."""

import math

import pytest
from hypothesis import given, strategies as st

from dse.errors import UnitError
from dse.units import DIMENSIONS, format_input, format_memory_size, format_quantity, parse_quantity


@pytest.mark.parametrize("text, dim, expected", [
    ("3.35 TB/s", "bandwidth", 3.35e12),
    ("80 GB", "bytes", 80e9),
    ("36 GiB", "bytes", 36 * 2**30),
    ("700 W", "power", 700.0),
    ("1.83 GHz", "frequency", 1.83e9),
    ("814 mm^2", "area", 814.0),
    ("814 mm²", "area", 814.0),
    ("5.24 Gb/s", "bandwidth", 5.24e9 / 8),
    ("3.9 pJ/bit", "energy_per_byte", 3.9e-12 * 8),
    ("2 us", "time", 2e-6),
    ("2 µs", "time", 2e-6),
    ("500 ns", "time", 500e-9),
    ("128 KiB", "bytes", 131072),
    ("989.4 TFLOP/s", "flop_rate", 989.4e12),
    ("0.1 /cm^2", "defect_density", 0.1 / 100),
    ("26 mm", "length", 26.0),
    ("1.2 TB/s", "bandwidth", 1.2e12),
    ("15 %", "dimensionless", 0.15),
    ("1_000 B", "bytes", 1000.0),
])
def test_parse(text, dim, expected):
    assert parse_quantity(text, dim) == pytest.approx(expected, rel=1e-12)


def test_gb_is_not_gib_and_gb_is_not_gbit():
    assert parse_quantity("1 GB", "bytes") == 1e9
    assert parse_quantity("1 GiB", "bytes") == 2**30
    assert parse_quantity("8 Gb", "bytes") == 1e9


@pytest.mark.parametrize("value, dim, words", [
    ("80", "bytes", "with a unit"),
    (80, "bytes", "bare number"),
    ("80 GB", "bandwidth", "bandwidth"),
    ("3 parsecs", "time", "unknown unit 'parsecs'"),
    ("fast", "bandwidth", "expected a bandwidth quantity"),
    (True, "bytes", "expected a bytes quantity"),
    ([1, 2], "bytes", "list"),
    ("1e999 GB", "bytes", "finite"),
])
def test_errors_say_what_was_expected(value, dim, words):
    with pytest.raises(UnitError) as e:
        parse_quantity(value, dim)
    assert words in str(e.value)


def test_dimensionless_accepts_bare_numbers():
    assert parse_quantity(0.5, "dimensionless") == 0.5


@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False), st.sampled_from(["", "k", "M", "G", "T"]))
def test_prefix_scaling_property(x, prefix):
    factor = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[prefix]
    got = parse_quantity(f"{x!r} {prefix}B", "bytes")
    assert math.isclose(got, x * factor, rel_tol=1e-12)


def test_format_quantity_round_trips():
    assert format_quantity(3.35e12, "bandwidth") == "3.35 TB/s"
    assert parse_quantity(format_quantity(80e9, "bytes"), "bytes") == 80e9


def test_binary_sizes_show_binary_prefixes():
    """issue 19 item 4: `local buffer 233.5 kB` for 228 KiB, `L2 67.11 MB` for 64 MiB. GB = 1e9, GiB = 2**30:
    a size that is a round number of binary units is shown in them, a decimal one in SI; both parse back."""
    cases = {228 * 1024: "228 KiB", 64 * 2**20: "64 MiB", 24 * 2**30: "24 GiB", 80e9: "80 GB", 50e6: "50 MB",
             48_000: "48 kB", 1.5 * 2**20: "1.5 MiB"}
    for value, text in cases.items():
        assert format_quantity(value, "bytes") == text
        assert parse_quantity(text, "bytes") == value


def test_small_times_and_flops_have_their_prefix():
    """A 1 x 1 x 1 GEMM's memory time printed "0.006376 ns" and a 64^3 GEMM "5.243e+05 FLOP": picoseconds and
    kFLOP, which parse back."""
    assert format_quantity(6.376e-12, "time") == "6.376 ps"
    assert format_quantity(2 * 64**3, "flops") == "524.3 kFLOP"
    assert parse_quantity("6.376 ps", "time") == pytest.approx(6.376e-12)
    assert parse_quantity("524.3 kFLOP", "flops") == pytest.approx(524_300)


def test_memory_sizes_show_binary_prefixes_round_or_not():
    """A tile's bytes and address span (dse tiles): 1,564,672 B = 1.4922 MiB, not "1.565 MB" beside "632.5 KiB";
    below a KiB, bytes."""
    assert format_memory_size(1_564_672) == "1.492 MiB"
    assert format_memory_size(647_680) == "632.5 KiB"
    assert format_memory_size(24 * 1024) == "24 KiB"
    assert format_memory_size(512) == "512 B"
    assert parse_quantity(format_memory_size(3 * 2**30), "bytes") == 3 * 2**30


@pytest.mark.parametrize("value, dim, text", [
    (4 * 365 * 86400.0, "time", "4 years"),            # a year is 365 days (the unit table)
    (0.10 / 3.6e6, "money_per_energy", "0.1 $/kWh"),  # 1 kWh = 3.6e6 J
    (2 * 2**30, "bytes", "2 GiB"),                     # a round binary size keeps its binary prefix
    (80e9, "bytes", "80 GB"),
    (128.0, "bytes", "128 B"),
    (0.0, "bytes", "0 B"),
    (1.0, "power_density", "1 W/mm^2"),
    (0.5, "dimensionless", "0.5"),
    (1.83e9, "frequency", "1.83 GHz"),
])
def test_format_input_writes_what_a_user_writes(value, dim, text):
    """The schema reference writes defaults this way (issue 19: '126144000 s' told nobody it is 4 years)."""
    assert format_input(value, dim) == text
    assert math.isclose(parse_quantity(text, dim), value, rel_tol=1e-12)


@given(st.floats(min_value=1e-15, max_value=1e15, allow_nan=False, allow_infinity=False),
       st.sampled_from(sorted(DIMENSIONS)))
def test_format_input_parses_back(x, dim):
    text = format_input(x, dim)
    assert math.isclose(parse_quantity(text, dim, allow_bare=True), x, rel_tol=1e-9)
