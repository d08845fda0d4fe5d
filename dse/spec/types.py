"""Field types shared by every spec: quantities with units, counts, names.

A quantity field accepts a string with a unit ("3.35 TB/s") and holds the
canonical SI float (dse.units). A bare number is refused: a capacity written
without a unit is an error, not a guess.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from dse.errors import UnitError
from dse.units import parse_quantity


class Record(BaseModel):
    """Base of every spec record: immutable, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _quantity(dimension: str):
    def parse(value):
        if isinstance(value, float) and getattr(parse, "_trusted", False):
            return value
        try:
            return parse_quantity(value, dimension)
        except UnitError as e:
            raise ValueError(str(e)) from None

    parse.dimension = dimension  # lets design spaces parse a parameter's values in the field's unit
    return parse


def _positive(v: float) -> float:
    if not v > 0:
        raise ValueError(f"must be > 0, got {v!r}")
    return v


def _non_negative(v: float) -> float:
    if not v >= 0:
        raise ValueError(f"must be >= 0, got {v!r}")
    return v


def Q(dimension: str, positive: bool = True):  # noqa: N802 - type factory
    """Annotated float that is parsed from a quantity string of ``dimension``."""
    check = _positive if positive else _non_negative
    return Annotated[float, BeforeValidator(_quantity(dimension)), AfterValidator(check)]


Bytes = Q("bytes")
BytesOrZero = Q("bytes", positive=False)
Bandwidth = Q("bandwidth")
Time = Q("time")
TimeOrZero = Q("time", positive=False)
Frequency = Q("frequency")
Power = Q("power")
PowerOrZero = Q("power", positive=False)
Area = Q("area")
AreaOrZero = Q("area", positive=False)
Length = Q("length")
EnergyPerByte = Q("energy_per_byte")
EnergyPerFlop = Q("energy_per_flop")
Money = Q("money", positive=False)

#: Counts stay below 2**53 (exact in float64, which the vectorized model computes in).
MAX_COUNT = 2**53
Count = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT)]
CountOrZero = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)]
Fraction = Annotated[float, Field(gt=0, le=1)]
PositiveFloat = Annotated[float, Field(gt=0)]
