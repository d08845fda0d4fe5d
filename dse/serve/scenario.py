"""What a serving scenario is made of: the request mix, the engine's settings, the parallelism, the knobs.

These are the *scenario* (how a chip is used), kept apart from the chip's design variables: the same
chip serves many scenarios and a study evaluates each scenario for every design (ARCHITECTURE, Serving).

* :class:`RequestMix`: input (ISL) and output (OSL) lengths of the requests, one fixed pair or a weighted
  list of pairs (an empirical distribution), and the averages the steady state needs.
* :class:`Engine`: the serving engine's memory fraction for the KV cache, KV block size, how it reserves KV,
  its batch and token limits, chunked prefill or not (defaults: TensorRT-LLM's documented settings).
* :class:`Parallelism`: tensor (TP), pipeline (PP) and expert (EP) parallel sizes.
* :class:`Knobs`: the fitted efficiencies a software stack reaches on a chip (dse.serve.calibration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dse.errors import SpecError, unknown_name
from dse.units import parse_quantity

KV_POLICIES = ("reserve", "current")


def _int(label: str, v, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < minimum:
        raise SpecError(f"{label}: expected an integer >= {minimum}, found {v!r}")
    return int(v)


@dataclass(frozen=True)
class RequestMix:
    """Requests of ``(isl, osl, weight)``: ISL prompt tokens, OSL output tokens, share of the requests.

    Averages over the steady state of continuous batching (each request holds a decode slot for its OSL
    iterations, so what the running batch sees is weighted by OSL; Little's law, seed 004 §4.3.3):

    =================== ================================================= ===============================
    isl_mean, osl_mean  E[ISL], E[OSL] (per request)
    prefill_per_output  E[ISL] / E[OSL]: prompt tokens per output token   the chunk each iteration
    decode_context      E[OSL (ISL + (OSL + 1) / 2)] / E[OSL]              average context of a decode
    prompt_equivalent   2 E[ISL (ISL + 1) / 2] / E[ISL] - 1                the prompt length whose causal
                                                                          pairs per token are the mix's
    kv_reserved(block)  E[OSL ceil((ISL + OSL) / block) block] / E[OSL]   KV a running request reserves
    kv_current(block)   decode_context + block / 2                         KV it holds on average (paged)
    =================== ================================================= ===============================
    """

    rows: tuple[tuple[int, int, float], ...]

    @classmethod
    def fixed(cls, isl, osl) -> "RequestMix":
        return cls.of([(isl, osl, 1.0)])

    @classmethod
    def of(cls, rows) -> "RequestMix":
        out = []
        rows = list(rows)
        if not rows:
            raise SpecError("request mix: expected at least one (isl, osl[, weight]) row, found none")
        for i, r in enumerate(rows):
            r = tuple(r)
            if len(r) not in (2, 3):
                raise SpecError(f"request mix row {i}: expected (isl, osl) or (isl, osl, weight), found {r!r}")
            isl, osl = _int(f"request mix row {i} isl", r[0]), _int(f"request mix row {i} osl", r[1])
            w = float(r[2]) if len(r) == 3 else 1.0
            if not w > 0 or not math.isfinite(w):
                raise SpecError(f"request mix row {i} weight: expected a number > 0, found {r[2]!r}")
            out.append((isl, osl, w))
        return cls(tuple(out))

    def _mean(self, f) -> float:
        tot = sum(w for _, _, w in self.rows)
        return sum(w * f(i, o) for i, o, w in self.rows) / tot

    @property
    def isl_mean(self) -> float:
        return self._mean(lambda i, o: i)

    @property
    def osl_mean(self) -> float:
        return self._mean(lambda i, o: o)

    @property
    def prefill_per_output(self) -> float:
        return self.isl_mean / self.osl_mean

    @property
    def decode_context(self) -> float:
        return self._mean(lambda i, o: o * (i + (o + 1) / 2)) / self.osl_mean

    @property
    def prompt_equivalent(self) -> int:
        pairs_per_token = self._mean(lambda i, o: i * (i + 1) / 2) / self.isl_mean
        return max(1, int(round(2 * pairs_per_token - 1)))

    def kv_reserved(self, block: int) -> float:
        return self._mean(lambda i, o: o * math.ceil((i + o) / block) * block) / self.osl_mean

    def kv_current(self, block: int) -> float:
        return self.decode_context + block / 2

    def label(self) -> str:
        if len(self.rows) == 1:
            return f"ISL {self.rows[0][0]} / OSL {self.rows[0][1]}"
        return f"{len(self.rows)} request kinds, mean ISL {self.isl_mean:.0f} / OSL {self.osl_mean:.0f}"


@dataclass(frozen=True)
class Engine:
    """The serving engine's settings (not fitted: documented values of the engine).

    ``kv_fraction``: the share of the memory left after weights and workspace that the engine gives the
    paged KV cache (TensorRT-LLM ``kv_cache_free_gpu_mem_fraction`` 0.90 by default, 0.90-0.95 in the measured
    runs; vLLM ``gpu_memory_utilization`` 0.90). ``block_tokens``: tokens per KV page (TensorRT-LLM 32, vLLM 16).
    ``kv_policy``: ``reserve`` admits a request only when the pages of its whole ISL + OSL can be guaranteed
    (TensorRT-LLM's default GUARANTEED_NO_EVICT scheduler); ``current`` counts what requests hold now
    (vLLM's admission with preemption). ``max_batch`` / ``max_num_tokens``: the engine's limits on requests and
    on tokens per iteration (TensorRT-LLM BuildConfig defaults 2048 and 8192). ``chunked_prefill``: prompt
    chunks ride along with the decode batch (True) or prefill runs as its own iterations (False).
    ``workspace``: activation and runtime memory per chip (2 GiB, seed 004 §4.3.1).
    """

    kv_fraction: float = 0.90
    block_tokens: int = 32
    kv_policy: str = "reserve"
    max_batch: int = 2048
    max_num_tokens: int = 8192
    chunked_prefill: bool = True
    workspace_bytes: float = 2.0 * 2**30

    def __post_init__(self):
        if not 0 < self.kv_fraction <= 1:
            raise SpecError(f"engine kv_fraction: expected a fraction in (0, 1], found {self.kv_fraction!r}")
        if self.kv_policy not in KV_POLICIES:
            raise SpecError("engine kv_policy: " + unknown_name("KV policy", self.kv_policy, KV_POLICIES))
        _int("engine block_tokens", self.block_tokens)
        _int("engine max_batch", self.max_batch)
        _int("engine max_num_tokens", self.max_num_tokens)
        if self.workspace_bytes < 0:
            raise SpecError(f"engine workspace: expected bytes >= 0, found {self.workspace_bytes!r}")

    @classmethod
    def with_values(cls, **values) -> "Engine":
        """An engine from user values (``workspace`` may be a quantity such as '2 GiB')."""
        if "workspace" in values:
            ws = values.pop("workspace")
            values["workspace_bytes"] = parse_quantity(ws, "bytes") if isinstance(ws, str) else float(ws)
        known = set(cls.__dataclass_fields__)
        for k in values:
            if k not in known:
                raise SpecError(unknown_name("engine setting", k, known))
        return cls(**values)


@dataclass(frozen=True)
class Parallelism:
    """Tensor (``tp``), pipeline (``pp``) and expert (``ep``) parallel sizes; ``tp x pp`` chips in all.

    TP: every layer split over ``tp`` chips that act as one chip of their summed resources plus a ring
    all-reduce after each row-parallel operator (dse.model.evaluator, seed 004 §4.7.2, §4.5.3). PP: ``pp``
    stages of consecutive layers; a step of one micro-batch takes the layers at one chip's rates plus the
    hops, and ``pp`` micro-batches are in flight at once. EP: the experts of a MoE model spread over all ``tp``
    chips (``ep`` = 1 or ``tp``), whole experts per chip: each MoE layer sends its tokens to their experts and
    back in two all-to-alls over the scale-up links instead of all-reducing the experts' partial sums
    (``system.expert_parallel``, dse.model.evaluator; no routing imbalance yet).
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self):
        for k in ("tp", "pp", "ep"):
            _int(k, getattr(self, k))
        if self.tp > 1 and self.pp > 1:
            raise SpecError(f"parallelism: tp {self.tp} with pp {self.pp} is not expressible yet (the evaluator "
                            "models a system as tensor- or pipeline-parallel); expected tp = 1 or pp = 1")
        if self.ep not in (1, self.tp):
            raise SpecError(f"parallelism ep: expected 1 or tp ({self.tp}): the experts spread over all the "
                            f"tensor-parallel chips or none; found {self.ep}")

    @property
    def chips(self) -> int:
        return self.tp * self.pp

    def label(self) -> str:
        return f"TP{self.tp} PP{self.pp}" + (f" EP{self.ep}" if self.ep > 1 else "")


#: The four knobs of dse.hardware.Calibration, in the evaluator's meaning (dse.calibrate.knobs) ...
CALIBRATION_KNOBS = ("compute_efficiency", "bandwidth_efficiency", "kernel_overhead", "step_overhead")
#: ... and the software latency of one collective step, added to the chip's own link alpha.
KNOB_NAMES = (*CALIBRATION_KNOBS, "collective_overhead")


@dataclass(frozen=True)
class Knobs:
    """What a software stack achieves on a chip, as the evaluator's calibration knobs.

    ``compute_efficiency``: achieved fraction of the matrix peak while a matrix unit works;
    ``bandwidth_efficiency``: achieved fraction of the memory interface's bandwidth; ``kernel_overhead``:
    host time per kernel launch (overlaps device work; ~0 with CUDA graphs); ``step_overhead``: fixed time per
    engine iteration (scheduling, sampling, synchronization); ``collective_overhead``: the software's latency
    per step of a collective (launch and synchronization of the all-reduce kernel), added to the chip's own
    link latency alpha of every ring step (seed 004 §4.5.3, T = alpha + V / R; only a system of several
    chips feels it). Ideal: 1, 1, 0 s, 0 s, 0 s (the bound).
    """

    name: str = "ideal"
    compute_efficiency: float = 1.0
    bandwidth_efficiency: float = 1.0
    kernel_overhead: float = 0.0
    step_overhead: float = 0.0
    collective_overhead: float = 0.0
    source: str = "no calibration: every resource at its peak rate (the bound)"
    fitted_on: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self):
        for k in ("compute_efficiency", "bandwidth_efficiency"):
            v = getattr(self, k)
            if not 0 < v <= 1:
                raise SpecError(f"knobs {self.name} {k}: expected a fraction in (0, 1], found {v!r}")
        for k in ("kernel_overhead", "step_overhead", "collective_overhead"):
            v = getattr(self, k)
            if not v >= 0:
                raise SpecError(f"knobs {self.name} {k}: expected a time >= 0, found {v!r}")

    def overrides(self, link_alpha: float | None = None) -> dict[str, object]:
        """The chip overrides that apply these knobs (dse.hardware.with_overrides).

        ``link_alpha``: the chip's own scale-up link latency (s), for a system of several chips; the
        collective overhead is added to it.
        """
        out: dict[str, object] = {"calibration.compute_efficiency": self.compute_efficiency,
                                  "calibration.bandwidth_efficiency": self.bandwidth_efficiency,
                                  "calibration.kernel_overhead": f"{self.kernel_overhead!r} s",
                                  "calibration.step_overhead": f"{self.step_overhead!r} s"}
        if link_alpha is not None and self.collective_overhead:
            out["links.scale_up.alpha"] = f"{link_alpha + self.collective_overhead!r} s"
        return out

    @property
    def values(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in KNOB_NAMES}


IDEAL = Knobs()
