"""Formats: the number format of each tensor role, and the compute format of a matrix op.

Compute format (the format the matrix unit executes, ``Op.fmt``): the
*narrower* of the two operand formats by bits per value (the wider operand is
converted on the fly, e.g. activations quantized to FP8 for FP8 weights), unless
``Formats.compute`` names one explicitly (e.g. ``compute: bf16`` for
weight-only quantization that dequantizes 4-bit weights to BF16). Linear
GEMMs pair activations with weights; attention pairs activations with KV.
Formats with shared scales (MX, NVFP4) count their scales (dse.precision).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from dse.errors import SpecError, unknown_name
from dse.precision import NumberFormat, get_format, storage_bytes
from dse.spec import validate
from dse.spec.types import Record


def _format_ref(value):
    """A format name (canonicalized) or a NumberFormat object (Python API only)."""
    if isinstance(value, NumberFormat):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a number format name such as 'bf16' or 'fp8', got {value!r}")
    try:
        return get_format(value).name
    except SpecError as e:
        raise ValueError(str(e)) from None


FormatRef = Annotated[Any, BeforeValidator(_format_ref)]


class Formats(Record):
    """Number format of each tensor role (seed 004 §4.1.1, §4.2.4, §4.3.1).

    ``weights``: linear, expert and shared-expert weight matrices.
    ``activations``: GEMM inputs between operators. ``kv``: the KV cache.
    ``accumulator``: partial sums and attention scores (FP32 by default, seed
    004 §4.1.1, §4.6.2). ``output``: what GEMMs write. ``embedding``: the
    embedding table and the LM head (None: same as ``weights``). ``router``:
    MoE router weights (None: same as ``weights``). ``norms``: norm gammas.
    ``compute``: force the matrix format (None: the narrower operand, see the
    module docstring). A format is a name (``fp8`` -> ``fp8_e4m3``) or, from
    Python, a :class:`dse.precision.NumberFormat` for a storage scheme the
    catalog lacks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              arbitrary_types_allowed=True)

    weights: FormatRef = Field("bf16", description="linear, expert and shared-expert weight matrices")
    activations: FormatRef = Field("bf16", description="GEMM inputs between operators")
    kv: FormatRef = Field("bf16", description="the KV cache")
    accumulator: FormatRef = Field("fp32", description="partial sums and attention scores")
    output: FormatRef = Field("bf16", description="what GEMMs write")
    embedding: FormatRef | None = Field(None, description="the embedding table and the LM head (default: as weights)")
    router: FormatRef | None = Field(None, description="MoE router weights (default: as weights)")
    norms: FormatRef = Field("bf16", description="norm gammas")
    compute: FormatRef | None = Field(None, description="force the matrix format (default: the narrower operand)")

    def fmt(self, role: str) -> NumberFormat:
        """The NumberFormat of tensor role ``role`` (defaults resolved)."""
        if role not in type(self).model_fields:
            raise SpecError(unknown_name("tensor role", role, type(self).model_fields))
        value = getattr(self, role)
        if value is None:
            value = self.weights if role in ("embedding", "router") else None
        if value is None:
            raise SpecError(f"formats.{role} is not set")
        return get_format(value)

    def bpv(self, role: str) -> float:
        """Bytes per value of role ``role``, shared scales included."""
        return self.fmt(role).bytes_per_value

    def matrix_format(self, x_role: str, y_role: str) -> str:
        """Compute format of a matrix op whose operands have roles ``x_role``, ``y_role``.

        ``compute`` if set, else the narrower operand (fewer bits per value;
        a tie keeps ``x_role``), seed 004 §4.2.4 / §4.6.1.
        """
        if self.compute is not None:
            return get_format(self.compute).name
        x, y = self.fmt(x_role), self.fmt(y_role)
        return (y if y.bits_per_value < x.bits_per_value else x).name


def _as_formats(formats) -> Formats:
    if formats is None:
        return Formats()
    if isinstance(formats, Formats):
        return formats
    if isinstance(formats, dict):
        return validate(Formats, formats, prefix=("formats",))
    raise SpecError(f"formats must be a mapping of tensor role to format name, got {formats!r}")


def _matrix_bytes(k: int, n: int, fmt) -> float:
    """Storage of one k x n weight matrix, scales included (seed 004 §4.2.4)."""
    return float(storage_bytes(k * n, fmt))
