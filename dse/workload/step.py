"""Workload: one step of work (a tuple of :class:`Op`) and the state it needs resident."""

from __future__ import annotations

from dataclasses import dataclass, field

from dse.errors import SpecError, unknown_name
from dse.model.capacity import resident_bytes
from dse.workload.capacity import max_requests
from dse.workload.formats import Formats
from dse.workload.models import ModelConfig
from dse.workload.ops import Op


@dataclass(frozen=True)
class Workload:
    """One step of work and the state it needs resident (seed 004 §4.3.1, §4.8.2).

    ``batch`` requests, each with ``tokens`` new positions this step and
    ``context`` positions attended at its end (decode: tokens = 1; prefill:
    tokens = context = prompt length). ``tokens_per_step``: tokens produced
    (decode: batch) or processed (prefill: batch x tokens). Resident state:
    ``weight_resident_bytes`` (every parameter), KV (batch x context x
    ``kv_bytes_per_token``), ``workspace_bytes``. ``micro_batches``: the step
    runs as that many micro-batches of batch / micro_batches requests; the
    operators are one micro-batch's, their counts include every micro-batch.
    """

    name: str
    phase: str
    ops: tuple[Op, ...]
    batch: int = 1
    tokens: int = 0
    context: int = 0
    tokens_per_step: int = 1
    weight_resident_bytes: float = 0.0
    kv_bytes_per_token: float = 0.0
    workspace_bytes: float = 0.0
    model: ModelConfig | None = field(default=None, repr=False)
    formats: Formats | None = field(default=None, repr=False)
    routing: str | tuple[int, ...] | None = None
    micro_batches: int = 1  # the step as this many equal micro-batches (each operator's count includes them)

    def __hash__(self) -> int:
        """The hash of the scalar fields and the operator count: equal workloads hash alike, and the evaluator's
        caches (op_table, _quant_error) look a workload up at every call without hashing its operators and model
        (~25 us a call; issue 20's N = 1)."""
        return hash((self.name, self.phase, len(self.ops), self.batch, self.tokens, self.context,
                     self.tokens_per_step, self.weight_resident_bytes, self.kv_bytes_per_token, self.workspace_bytes,
                     self.routing, self.micro_batches))

    def __post_init__(self):
        if self.phase not in ("prefill", "decode", "ops"):
            raise SpecError(unknown_name("phase", self.phase, ("prefill", "decode", "ops")))
        names = [o.name for o in self.ops]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SpecError(f"workload {self.name}: two operators are called '{dup}'")

    def op(self, name: str) -> Op:
        """The operator called ``name`` (did-you-mean if absent)."""
        for o in self.ops:
            if o.name == name:
                return o
        raise SpecError(unknown_name("operator", name, [o.name for o in self.ops]))

    def _sum(self, attr: str, pred=lambda o: True) -> float:
        return float(sum(getattr(o, attr) * o.count for o in self.ops if pred(o)))

    # -- FLOPs (seed 004 §4.8.2)
    @property
    def total_flops(self) -> float:
        """Useful matrix FLOPs of the step (linear + attention + LM head); vector work is separate."""
        return self._sum("flops", lambda o: o.is_matrix)

    @property
    def linear_flops(self) -> float:
        """Projections, FFN, experts and router (every GEMM except the LM head)."""
        return self._sum("flops", lambda o: o.kind == "gemm" and o.role != "lm_head")

    @property
    def attention_flops(self) -> float:
        """QK and PV."""
        return self._sum("flops", lambda o: o.kind in ("attention_qk", "attention_pv"))

    @property
    def lm_head_flops(self) -> float:
        return self._sum("flops", lambda o: o.role == "lm_head")

    @property
    def vector_flops(self) -> float:
        return self._sum("vector_flops")

    @property
    def exps(self) -> float:
        return self._sum("exps")

    def padded_flops(self, im, in_, ik):
        """Executed matrix FLOPs with every GEMM padded to the ``im x in_ x ik`` shape (vectorized)."""
        total = 0.0
        for o in self.ops:
            if o.is_matrix:
                total = total + o.padded_flops(im, in_, ik) * o.count
        return total

    # -- bytes (seed 004 §4.8.2: the dominant weight- and KV-interface payload)
    @property
    def weight_bytes_read(self) -> float:
        """Weights read per step (seed 004 §4.8.2, §4.3.3).

        Each linear weight once (shared by the batch), the embedding rows of
        the step's tokens, the full LM head, the norms, the active experts.
        """
        return self._sum("weight_bytes")

    @property
    def kv_bytes_read(self) -> float:
        return self._sum("kv_bytes")

    @property
    def bytes_read(self) -> float:
        """weight_bytes_read + kv_bytes_read (activations excluded; see activation_bytes)."""
        return self.weight_bytes_read + self.kv_bytes_read

    @property
    def activation_bytes(self) -> float:
        """Every other tensor read or written once (unfused upper bound)."""
        return self._sum("bytes") - self.bytes_read

    # -- resident state (seed 004 §4.3.1)
    @property
    def kv_resident_bytes(self) -> float:
        return float(self.batch * self.context * self.kv_bytes_per_token)

    @property
    def resident_bytes(self) -> float:
        """W + B S m_KV + workspace (seed 004 §4.3.1, §4.8.2)."""
        return resident_bytes(self.weight_resident_bytes, self.workspace_bytes, self.batch, self.context,
                              self.kv_bytes_per_token)

    def max_requests(self, capacity, context=None):
        """floor((C - W - workspace) / (S m_KV)) at ``context`` (default: this workload's), seed 004 §4.3.1."""
        s = self.context if context is None else context
        if not self.kv_bytes_per_token:
            raise SpecError(f"workload {self.name} has no KV cache; max_requests is undefined")
        return max_requests(capacity, self.weight_resident_bytes, self.workspace_bytes, s, self.kv_bytes_per_token)

    def summary(self) -> dict[str, float]:
        """The headline numbers, for reports and tests."""
        return {
            "total_flops": self.total_flops,
            "linear_flops": self.linear_flops,
            "attention_flops": self.attention_flops,
            "lm_head_flops": self.lm_head_flops,
            "vector_flops": self.vector_flops,
            "exps": self.exps,
            "weight_bytes_read": self.weight_bytes_read,
            "kv_bytes_read": self.kv_bytes_read,
            "bytes_read": self.bytes_read,
            "activation_bytes": self.activation_bytes,
            "weight_resident_bytes": self.weight_resident_bytes,
            "kv_resident_bytes": self.kv_resident_bytes,
            "resident_bytes": self.resident_bytes,
        }
