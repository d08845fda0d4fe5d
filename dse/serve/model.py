"""The serving model: the steady state of continuous batching at maximum load, through the one join.

Every time and energy comes from :func:`dse.evaluate.evaluate_design` on one engine iteration
(:func:`dse.serve.step.mixed_step`); this module only decides *which* iteration the engine runs and turns
its time into per-user and per-system figures. So the serving layer follows whatever the evaluator
models (power, clock, memory hierarchy, links) without a formula of its own for a step's time.

Steady state with chunked prefill (Agrawal et al., Sarathi-Serve, OSDI 2024; TensorRT-LLM "in-flight
batching" with chunked context). ``B`` requests decode concurrently; each iteration produces one token for
each of them, so over a request's life it is decoded in OSL iterations, and for the pool of requests to stay
full the prompts of new requests must be prefilled at the same rate: a chunk of ``P = B E[ISL] / E[OSL]``
prompt tokens per iteration (Little's law, seed 004 §4.3.3: throughput x time in system = concurrency).
With ``T`` the time of that iteration (the join, on B decode rows at the mix's average context plus the
chunk)::

    TPOT                 = T                          every running user gets one token per iteration
    output tokens/s      = pp B / T                   (pp micro-batches in flight with pipeline parallelism)
    TTFT (admitted)      = E[ceil(ISL / c) T_c]       c = max_num_tokens - B spare tokens per iteration;
                                                      T_c the iteration with min(ISL, c) prompt tokens
    energy / out. token  = (E_dyn + E_static / pp) / B     E = the iteration's energy from the join
    power                = (pp E_dyn + E_static) / T

The batch ``B`` is the largest that every limit allows (each reported by name):

    kv_capacity    pool = kv_fraction (C - W - chips x workspace)        seed 004 §4.3.1 (B = (C - W - ws)/(S m_KV))
                   slots = floor(pool / (m_KV x KV tokens per request))  paged KV: whole pages of block_tokens
                   B + max(1, B / E[OSL]) <= slots                       requests being prefilled hold pages too
                   KV tokens per request: ceil((ISL + OSL) / block) block (policy 'reserve', TensorRT-LLM's
                   guaranteed-no-evict admission) or the average held, E-context + block / 2 ('current')
    token_budget   B + P <= max_num_tokens  ->  B <= max_num_tokens / (1 + E[ISL] / E[OSL])
    max_batch      B <= max_batch (the engine's limit)
    tpot_slo       T(B) <= TPOT SLO (the largest such B, by bisection; T grows with B)
    request_rate   below maximum load the arrival rate sets B (see below)

Without chunked prefill (``Engine.chunked_prefill = False``) prompts run as their own iterations of
``n = max(1, floor(max_num_tokens / S))`` whole prompts: ``T = T_decode(B) + (B / E[OSL]) T_prefill(n, S) / n``
(the decode stalls while a prefill runs, so the average time between a user's tokens includes them), and
``TTFT = T_prefill(n, S) + T_decode / 2``.

Below maximum load (``load`` < 1 of the maximum request rate ``lambda_max = X / E[OSL]``) the concurrency
``n`` solves ``n = lambda (TTFT(n) + (E[OSL] - 1) T(n))`` (Little's law) and the TTFT adds the wait for a
free slot of an M/M/c queue with c = the maximum batch and the service time at ``n`` (Erlang C; Kleinrock,
Queueing Systems vol. 1, 1975, §3.5). At ``load = 1`` the wait of an offline benchmark grows without bound;
the TTFT reported is then from admission to the first token.

Disaggregated prefill and decode (:func:`disaggregated`; Zhong et al., DistServe, OSDI 2024): prefill
instances run batches of whole prompts, decode instances pure decode batches; the KV of each prompt moves
over the scale-up link (T = alpha + V / R, seed 004 §4.5.3); the split of chips that balances the two pools
gives output tokens/s per chip = 1 / (chips x (1 / (r_p E[OSL]) + 1 / r_d)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dse.errors import InfeasibleError, SpecError
from dse.evaluate import evaluate_design
from dse.hardware import ChipSpec, Chips, load_chip, with_overrides
from dse.model import links
from dse.precision import get_format
from dse.serve.knobs import default_knobs
from dse.serve.scenario import IDEAL, Engine, Knobs, Parallelism, RequestMix
from dse.serve.step import mixed_step
from dse.units import format_quantity, parse_quantity
from dse.workload import Formats, decode, kv_bytes_per_token, load_model, prefill, resident_weight_bytes
from dse.workload.formats import _as_formats

#: The limits on the batch, in the order they are reported.
LIMITS = ("kv_capacity", "token_budget", "max_batch", "tpot_slo", "request_rate")


@dataclass(frozen=True)
class ServingPoint:
    """The operating point of one serving scenario on one system of chips (SI units).

    ``batch``: requests decoding concurrently (per micro-batch with pipeline parallelism: ``batch_total``
    in all); ``limited_by``: the limit that set it (:data:`LIMITS`); ``tpot_s``: time per output token of
    one user; ``ttft_s``: time to first token (see ``ttft_note``); ``output_tokens_per_s``: the whole
    system's output tokens per second; ``step``: the join's metrics of the iteration (one row); ``formats``: the
    format of the weights, the KV cache and the activations, the defaults resolved.
    """

    chip: str
    model: str
    mix: RequestMix
    parallelism: Parallelism
    engine: Engine
    knobs: Knobs
    batch: int
    batch_total: int
    limited_by: str
    limits: dict
    chunk_tokens: int
    iteration_s: float
    tpot_s: float
    ttft_s: float
    ttft_note: str
    output_tokens_per_s: float
    input_tokens_per_s: float
    requests_per_s: float
    energy_per_output_token_j: float
    power_w: float
    chip_cost_usd: float
    kv_pool_bytes: float
    kv_bytes_per_token: float
    kv_tokens_per_request: float
    weight_bytes: float
    capacity_bytes: float
    load: float = 1.0
    slo_met: bool = True
    tpot_slo_s: float | None = None
    mode: str = "chunked"
    step: dict = field(default_factory=dict, repr=False)
    formats: dict = field(default_factory=dict)

    @property
    def chips(self) -> int:
        return self.parallelism.chips

    @property
    def output_tokens_per_s_per_chip(self) -> float:
        return self.output_tokens_per_s / self.chips

    @property
    def output_tokens_per_s_per_w(self) -> float:
        return self.output_tokens_per_s / self.power_w if self.power_w > 0 else float("nan")

    @property
    def output_tokens_per_s_per_usd(self) -> float:
        return self.output_tokens_per_s / self.chip_cost_usd if self.chip_cost_usd > 0 else float("nan")

    def metrics(self) -> dict[str, float]:
        """The point as a metrics row (the column names the objectives and constraints read)."""
        return {
            "tpot_s": self.tpot_s, "ttft_s": self.ttft_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_chip": self.output_tokens_per_s_per_chip,
            "output_tokens_per_s_per_w": self.output_tokens_per_s_per_w,
            "output_tokens_per_s_per_usd": self.output_tokens_per_s_per_usd,
            "tokens_per_s": self.output_tokens_per_s,
            "input_tokens_per_s": self.input_tokens_per_s, "requests_per_s": self.requests_per_s,
            "energy_per_output_token_j": self.energy_per_output_token_j,
            "energy_per_token_j": self.energy_per_output_token_j, "power_w": self.power_w,
            "chip_cost_usd": self.chip_cost_usd, "batch": float(self.batch_total),
            "system_chips": float(self.chips), "slo_met": float(self.slo_met),
        }


def system_chip(chip, parallelism: Parallelism = Parallelism(), knobs: Knobs = IDEAL) -> ChipSpec:
    """The chip (a name, a file or a spec) as a system of ``tp x pp`` chips with the knobs applied.

    A tensor-parallel system is the chip override ``system.chips: tp`` (with ``system.expert_parallel: ep``
    for expert parallelism); a pipeline is ``system.chips: pp`` with ``system.pipeline: true``
    (dse.model.evaluator); the knobs are its ``calibration.*`` overrides.
    """
    spec = chip if isinstance(chip, ChipSpec) else load_chip(chip)
    alpha = None
    if parallelism.chips > 1:
        if spec.links.scale_up is None:
            raise SpecError(f"{spec.name}: a system of {parallelism.chips} chips ({parallelism.label()}) needs a "
                            "scale-up link between them; the chip has no links.scale_up (expected a chip file "
                            "with links.scale_up.bandwidth, or tp = pp = 1)")
        alpha = spec.flat().get("links.scale_up.alpha", 0.0) or 0.0
    over: dict[str, object] = dict(knobs.overrides(alpha))
    if parallelism.chips > 1:
        over["system.chips"] = parallelism.chips
        if parallelism.pp > 1:
            over["system.pipeline"] = True
        if parallelism.ep > 1:
            over["system.expert_parallel"] = parallelism.ep
    return with_overrides(spec, over)


class _Evaluator:
    """The join on one system chip, with each iteration evaluated once."""

    def __init__(self, spec: ChipSpec):
        self.spec = spec
        self.chips = Chips.from_specs([spec])
        self._cache: dict = {}

    def __call__(self, workload) -> dict:
        if workload not in self._cache:
            self._cache[workload] = evaluate_design(self.chips, workload).row(0)
        return self._cache[workload]


def _formats(formats) -> Formats:
    return _as_formats(formats)


@dataclass(frozen=True)
class _Scenario:
    model: object
    formats: Formats
    mix: RequestMix
    engine: Engine
    par: Parallelism
    ev: _Evaluator

    def iteration(self, batch: int) -> tuple[object, int]:
        """The workload of one iteration with ``batch`` decoding requests (per micro-batch), and its chunk."""
        mix, e = self.mix, self.engine
        ctx = max(1, int(round(mix.decode_context)))
        chunk = int(round(batch * mix.prefill_per_output))
        if e.chunked_prefill:
            return mixed_step(self.model, batch=batch, context=ctx, chunk=chunk, prompt=mix.prompt_equivalent,
                              formats=self.formats, workspace=e.workspace_bytes), chunk
        return decode(self.model, batch=batch, context=ctx, formats=self.formats,
                      workspace=e.workspace_bytes), chunk

    def prefill_batch(self) -> tuple[object, int]:
        s = self.mix.prompt_equivalent
        n = max(1, self.engine.max_num_tokens // s)
        return prefill(self.model, batch=n, tokens=s, formats=self.formats,
                       workspace=self.engine.workspace_bytes), n

    def time(self, batch: int) -> float:
        wl, _ = self.iteration(batch)
        t = float(self.ev(wl)["time_s"])
        if not self.engine.chunked_prefill:
            pw, n = self.prefill_batch()
            t += batch / self.mix.osl_mean * float(self.ev(pw)["time_s"]) / n
        return t


def _capacity(sc: _Scenario, kv_tok: float, weights: float) -> tuple[float, float, float]:
    """(system capacity, KV pool bytes, KV tokens a request needs) -- seed 004 §4.3.1 with the engine's fraction."""
    e, mix = sc.engine, sc.mix
    cap = float(sc.ev(decode(sc.model, batch=1, context=1, formats=sc.formats,
                             workspace=e.workspace_bytes))["capacity_bytes"])
    free = cap - weights - sc.par.chips * e.workspace_bytes
    per_req = mix.kv_reserved(e.block_tokens) if e.kv_policy == "reserve" else mix.kv_current(e.block_tokens)
    return cap, max(free, 0.0) * e.kv_fraction, per_req


def _limits(sc: _Scenario, pool: float, kv_tok: float, per_req: float) -> dict[str, int]:
    mix, e, pp = sc.mix, sc.engine, sc.par.pp
    slots = math.floor(pool / (kv_tok * per_req)) if kv_tok > 0 else 10**9
    osl = mix.osl_mean
    total = min(slots - 1, math.floor(slots * osl / (osl + 1)))  # B + max(1, B / OSL) <= slots
    out = {"kv_capacity": total // pp}
    budget = e.max_num_tokens / (1 + mix.prefill_per_output) if e.chunked_prefill else e.max_num_tokens
    out["token_budget"] = max(1, math.floor(budget))
    out["max_batch"] = e.max_batch
    return out


def _largest_within(f, lo: int, hi: int, limit: float) -> int:
    """The largest integer b in [lo, hi] with f(b) <= limit, f increasing (lo assumed to satisfy it)."""
    if f(hi) <= limit:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def _erlang_c_wait(servers: int, arrival: float, service_s: float) -> float:
    """Mean wait in queue of an M/M/c queue (Erlang C; Kleinrock 1975 §3.5), inf when saturated."""
    a = arrival * service_s
    if a >= servers:
        return float("inf")
    b = 1.0  # Erlang B by the stable recursion B(k) = a B(k-1) / (k + a B(k-1))
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
    c = servers * b / (servers - a * (1 - b))
    return c * service_s / (servers - a)


def _ttft_admitted(sc: _Scenario, batch: int, t: float) -> float:
    """Admission to first token: the prompt is prefilled with the iteration's spare token budget.

    Chunked: a prompt of ISL tokens takes ceil(ISL / c) iterations with c = max(1, max_num_tokens - B)
    spare tokens each, every one an iteration of the B decodes plus min(ISL, c) prompt tokens (the join);
    the first token comes out of the last one. Separate prefill: the prefill iteration plus half a decode
    iteration (the one running when the prompt arrives). Weighted over the request mix.
    """
    e, mix = sc.engine, sc.mix
    if not e.chunked_prefill:
        pw, _ = sc.prefill_batch()
        wl, _ = sc.iteration(batch)
        return float(sc.ev(pw)["time_s"]) + float(sc.ev(wl)["time_s"]) / 2
    spare = max(1, e.max_num_tokens - batch)
    ctx = max(1, int(round(mix.decode_context)))
    tot = sum(w for _, _, w in mix.rows)
    out = 0.0
    for isl, _, w in mix.rows:
        chunk = min(isl, spare)
        wl = mixed_step(sc.model, batch=batch, context=ctx, chunk=chunk, prompt=isl, formats=sc.formats,
                        workspace=e.workspace_bytes)
        out += w * math.ceil(isl / spare) * float(sc.ev(wl)["time_s"])
    return out / tot


def serve(chip, model, isl: int | None = None, osl: int | None = None, *, mix: RequestMix | None = None,
          tp: int = 1, pp: int = 1, ep: int = 1, weights="bf16", kv=None, activations=None, formats=None,
          tpot_slo: float | str | None = None, knobs: Knobs | None = None, engine: Engine | None = None,
          load: float = 1.0) -> ServingPoint:
    """The operating point of continuous batching at maximum load (``load`` = 1) or below it.

    ``chip``: a catalog name, a chip file or a spec; ``model``: a shipped model name, a Hugging Face
    ``config.json`` path or a :class:`~dse.workload.ModelConfig`; ``isl``/``osl`` or ``mix``: the requests;
    ``weights``/``kv``/``activations`` or ``formats``: number formats (``kv`` and ``activations`` default to
    the weights' format when it is 8 bits or wider, else BF16); ``tpot_slo``: seconds or a quantity
    ('50 ms'); ``knobs``: the stack's efficiencies (default: the shipped fit, dse.serve.calibration);
    ``engine``: the engine's settings. See the module docstring for every formula.
    """
    knobs = knobs if knobs is not None else default_knobs()
    sc, spec, kv_tok, weights_b, slo = _scenario(chip, model, isl, osl, mix, tp, pp, ep, weights, kv, activations,
                                                 formats, tpot_slo, knobs, engine)
    if not 0 < load <= 1:
        raise SpecError(f"load: expected a fraction of the maximum request rate in (0, 1], found {load!r}")
    cap, pool, per_req = _capacity(sc, kv_tok, weights_b)
    if pool <= 0 or pool < kv_tok * per_req * 2:
        raise InfeasibleError(
            f"{spec.name} x{sc.par.chips} cannot serve {sc.model.name}: capacity {_bytes(cap)}, weights "
            f"{_bytes(weights_b)} + workspace {_bytes(sc.par.chips * sc.engine.workspace_bytes)} leave "
            f"{_bytes(max(pool, 0.0))} of KV pool, less than two requests of {per_req:.0f} tokens "
            f"({_bytes(kv_tok * per_req)} each) (more chips: --tp/--pp, or narrower --weights/--kv"
            + (", or a smaller --workspace" if sc.par.chips * sc.engine.workspace_bytes > 0.1 * cap else "") + ")")
    limits = _limits(sc, pool, kv_tok, per_req)
    b_max = max(1, min(limits.values()))
    limited_by = next(k for k in LIMITS if limits.get(k) == b_max) if min(limits.values()) >= 1 else "kv_capacity"
    slo_met = True
    if slo is not None:
        if sc.time(1) > slo:
            slo_met, b_max, limited_by = False, 1, "tpot_slo"
        else:
            b = _largest_within(sc.time, 1, b_max, slo)
            if b < b_max:
                b_max, limited_by = b, "tpot_slo"
            limits["tpot_slo"] = b
    batch = b_max
    note = "from admission; the queue wait at maximum load is excluded"
    if load < 1:  # the arrival rate sets the batch (Little's law), below every limit
        batch, wait = _below_max_load(sc, b_max, load)
        limited_by = "request_rate"
        note = f"at {load:.0%} of the maximum request rate, with the M/M/c queue wait for a slot"
    else:
        wait = 0.0
    return _point(sc, spec, knobs, batch, limited_by, limits, load, slo_met, slo, cap, pool, kv_tok, per_req,
                  weights_b, wait, note)


def _bytes(x: float) -> str:
    return format_quantity(x, "bytes")


def _scenario(chip, model, isl, osl, mix, tp, pp, ep, weights, kv, activations, formats, tpot_slo, knobs, engine):
    m = load_model(model)
    if mix is None:
        if isl is None or osl is None:
            raise SpecError("serve: expected isl and osl (input and output tokens per request) or a request mix")
        mix = RequestMix.fixed(isl, osl)
    par = Parallelism(tp, pp, ep)
    if par.ep > 1 and m.moe is None:
        raise SpecError(f"parallelism ep: {m.name} has no experts; expected ep = 1, found {par.ep}")
    f = _formats(formats) if formats is not None else _formats(_default_formats(weights, kv, activations))
    engine = engine or Engine()
    spec = system_chip(chip, par, knobs)
    slo = None
    if tpot_slo is not None:
        slo = parse_quantity(tpot_slo, "time") if isinstance(tpot_slo, str) else float(tpot_slo)
        if not slo > 0:
            raise SpecError(f"tpot_slo: expected a time > 0 such as '50 ms', found {tpot_slo!r}")
    sc = _Scenario(m, f, mix, engine, par, _Evaluator(spec))
    return sc, spec, kv_bytes_per_token(m, f.fmt("kv")), resident_weight_bytes(m, f), slo


def _default_formats(weights, kv, activations) -> dict:
    w = get_format(weights)
    wide = w.bits_per_value >= 8
    return {"weights": w.name, "kv": kv or (w.name if wide else "bf16"),
            "activations": activations or (w.name if wide else "bf16")}


def _below_max_load(sc: _Scenario, b_max: int, load: float) -> tuple[int, float]:
    """Concurrency and queue wait at ``load`` x the maximum request rate (Little's law + Erlang C)."""
    osl = sc.mix.osl_mean
    t_max = sc.time(b_max)
    lam = load * sc.par.pp * b_max / t_max / osl  # requests per second

    def in_system(b: int) -> float:
        t = sc.time(b)
        return lam * (_ttft_admitted(sc, b, t) + (osl - 1) * t) - b  # Little: concurrency - batch

    lo, hi = 1, b_max
    if in_system(lo) <= 0:
        b = lo
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if in_system(mid) > 0:
                lo = mid
            else:
                hi = mid
        b = hi
    t = sc.time(b)
    service = _ttft_admitted(sc, b, t) + (osl - 1) * t
    return b, _erlang_c_wait(sc.par.pp * b_max, lam, service)


def _point(sc, spec, knobs, batch, limited_by, limits, load, slo_met, slo, cap, pool, kv_tok, per_req, weights_b,
           wait, note) -> ServingPoint:
    wl, chunk = sc.iteration(batch)
    row = sc.ev(wl)
    t = sc.time(batch)
    pp = sc.par.pp
    e_static = float(row["energy_static_j"])
    e_dyn = float(row["energy_j"]) - e_static
    if not sc.engine.chunked_prefill:
        pw, n = sc.prefill_batch()
        prow = sc.ev(pw)
        share = batch / sc.mix.osl_mean / n
        e_dyn += share * (float(prow["energy_j"]) - float(prow["energy_static_j"]))
        e_static += share * float(prow["energy_static_j"])
    out_tps = pp * batch / t
    return ServingPoint(
        chip=spec.name, model=sc.model.name, mix=sc.mix, parallelism=sc.par, engine=sc.engine,
        knobs=knobs, batch=batch, batch_total=pp * batch, limited_by=limited_by, limits=dict(limits),
        chunk_tokens=chunk if sc.engine.chunked_prefill else 0, iteration_s=t, tpot_s=t,
        ttft_s=_ttft_admitted(sc, batch, t) + wait, ttft_note=note, output_tokens_per_s=out_tps,
        input_tokens_per_s=out_tps * sc.mix.prefill_per_output, requests_per_s=out_tps / sc.mix.osl_mean,
        energy_per_output_token_j=(e_dyn + e_static / pp) / batch, power_w=(pp * e_dyn + e_static) / t,
        chip_cost_usd=float(row.get("chip_cost_usd", float("nan"))), kv_pool_bytes=pool,
        kv_bytes_per_token=kv_tok, kv_tokens_per_request=per_req, weight_bytes=weights_b, capacity_bytes=cap,
        load=load, slo_met=slo_met, tpot_slo_s=slo, mode="chunked" if sc.engine.chunked_prefill else "separate",
        step=row, formats={role: sc.formats.fmt(role).name for role in ("weights", "kv", "activations")},
    )


@dataclass(frozen=True)
class DisaggregatedPoint:
    """Prefill and decode on separate instances of the same system (:func:`disaggregated`)."""

    prefill: dict
    decode: ServingPoint
    prefill_share: float
    output_tokens_per_s_per_chip: float
    ttft_s: float
    tpot_s: float
    kv_transfer_s: float


def disaggregated(chip, model, isl: int | None = None, osl: int | None = None, *, mix: RequestMix | None = None,
                  engine: Engine | None = None, knobs: Knobs | None = None, **options) -> DisaggregatedPoint:
    """Disaggregated prefill / decode (DistServe): the balanced split of chips and its throughput per chip.

    Decode instances run pure decode batches (the :func:`serve` limits, with no prompt chunk); prefill
    instances run ``max(1, floor(max_num_tokens / S))`` whole prompts per iteration; each prompt's KV
    (ISL x KV bytes per token) moves to its decode instance over the scale-up link (T = alpha + V / R).
    ``options``: those of :func:`serve` (tp, pp, ep, formats, tpot_slo).
    """
    engine = engine or Engine()
    knobs = knobs if knobs is not None else default_knobs()
    if mix is None:
        if isl is None or osl is None:
            raise SpecError("disaggregated: expected isl and osl (input and output tokens per request) or a mix")
        mix = RequestMix.fixed(isl, osl)
    dec = serve(chip, model, mix=_DecodeOnly(mix.rows), engine=engine, knobs=knobs, **options)
    sc, spec, *_ = _scenario(chip, model, None, None, mix, options.get("tp", 1), options.get("pp", 1),
                             options.get("ep", 1), options.get("weights", "bf16"), options.get("kv"),
                             options.get("activations"), options.get("formats"), None, knobs, engine)
    pw, n = sc.prefill_batch()
    prow = sc.ev(pw)
    t_p = float(prow["time_s"])
    r_p = sc.par.pp * n / t_p  # prompts per second per prefill instance
    r_d = dec.output_tokens_per_s
    kv_bytes = mix.isl_mean * dec.kv_bytes_per_token
    flat = spec.flat()
    link = flat.get("links.scale_up.bandwidth")
    t_kv = float(links.transfer_time(kv_bytes, link, flat.get("links.scale_up.alpha", 0.0) or 0.0)) if link \
        else float("nan")
    per_out_p, per_out_d = 1 / (r_p * mix.osl_mean), 1 / r_d
    return DisaggregatedPoint(
        prefill={"prompts_per_iteration": n, "iteration_s": t_p, "prompts_per_s": r_p, "step": prow},
        decode=dec, prefill_share=per_out_p / (per_out_p + per_out_d),
        output_tokens_per_s_per_chip=1 / (sc.par.chips * (per_out_p + per_out_d)),
        ttft_s=t_p + (t_kv if np.isfinite(t_kv) else 0.0), tpot_s=dec.tpot_s, kv_transfer_s=t_kv)


class _DecodeOnly(RequestMix):
    """A request mix whose prompts are already prefilled elsewhere: decode contexts and KV unchanged."""

    @property
    def prefill_per_output(self) -> float:
        return 0.0
