"""`dse serve --chip NAME|FILE --model NAME|config.json --isl N --osl N ...` (argument parsing and printing only).

Prints the operating point of continuous batching at maximum load (dse.serve.model) with units, one line
per figure; the line that begins ``output tokens/s`` carries the system's output tokens per second.
"""

from __future__ import annotations

import math

from dse.errors import InfeasibleError, SpecError
from dse.serve import Engine, KNOBS_FILE, disaggregated, resolve_knobs, serve
from dse.units import format_quantity, parse_quantity


def _time(v: float) -> str:
    if v == 0:
        return "0 s"
    return format_quantity(v, "time") if math.isfinite(v) else str(v)


def _fraction(text: str, label: str) -> float:
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise SpecError(f"{label}: expected a fraction such as 0.9 or '90%', found {text!r}") from None
    if not 0 < v <= 1:
        raise SpecError(f"{label}: expected a fraction in (0, 1], found {text!r}")
    return v


def _engine(args) -> Engine:
    values = {}
    if args.kv_fraction is not None:
        values["kv_fraction"] = _fraction(args.kv_fraction, "--kv-fraction")
    for key in ("max_batch", "max_num_tokens", "block_tokens", "kv_policy"):
        v = getattr(args, key)
        if v is not None:
            values[key] = v
    if args.no_chunked_prefill:
        values["chunked_prefill"] = False
    if args.workspace is not None:
        try:
            values["workspace_bytes"] = parse_quantity(args.workspace, "bytes")
        except SpecError as e:
            raise SpecError(f"--workspace: {e}") from None
    return Engine(**values)


def _options(args) -> dict:
    for name in ("isl", "osl", "tp", "pp", "ep"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise SpecError(f"--{name}: expected an integer >= 1, found {v}")
    slo = None
    if args.tpot_slo is not None:
        try:
            slo = parse_quantity(args.tpot_slo, "time")
        except SpecError as e:
            raise SpecError(f"--tpot-slo: {e}") from None
    knobs = resolve_knobs(args.calibration, args.stack)
    return dict(tp=args.tp, pp=args.pp, ep=args.ep, weights=args.weights, kv=args.kv,
                activations=args.activations, tpot_slo=slo, knobs=knobs, engine=_engine(args))


def _knob_line(args, k) -> str:
    if k.name == "ideal":
        return "knobs: none (the uncalibrated bound: every resource at its peak rate)"
    where = args.calibration or KNOBS_FILE
    return (f"knobs: {k.name} from {where}: compute efficiency {k.compute_efficiency:.4g}, bandwidth efficiency "
            f"{k.bandwidth_efficiency:.4g}, kernel overhead {_time(k.kernel_overhead)}, step overhead "
            f"{_time(k.step_overhead)}, collective overhead {_time(k.collective_overhead)}")


def _formats(p) -> str:
    """The number formats the point ran with (the defaults resolved: KV and activations as the weights where
    those are 8-bit or wider, else BF16)."""
    return f"weights {p.formats['weights']}, KV {p.formats['kv']}, activations {p.formats['activations']}"


def _rows(rows) -> None:
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}s}{value}")


def _serve(args) -> int:
    opts = _options(args)
    load = _fraction(args.load, "--load") if args.load is not None else 1.0
    if args.disaggregated:
        return _disaggregated(args, opts)
    p = serve(args.chip, args.model, args.isl, args.osl, load=load, **opts)
    if not p.slo_met:
        raise InfeasibleError(f"--tpot-slo {args.tpot_slo}: not met even at batch 1 on {p.chip} x{p.chips} "
                              f"(TPOT {_time(p.tpot_s)}); more chips (--tp) or narrower formats")
    f = p.step
    print(f"dse serve: {p.model} on {p.chip} ({p.parallelism.label()}, {p.chips} chip{'s' if p.chips > 1 else ''}), "
          f"{p.mix.label()}, {_formats(p)}")
    print(_knob_line(args, p.knobs))
    limits = ", ".join(f"{k} {v}" for k, v in p.limits.items())
    mode = "chunked prefill" if p.mode == "chunked" else "separate prefill iterations"
    at = "maximum load" if p.load >= 1 else f"{p.load:.0%} of the maximum request rate"
    rows = [
        ("output tokens/s", f"{p.output_tokens_per_s:.0f}"),
        ("output tokens/s per chip", f"{p.output_tokens_per_s_per_chip:.0f}"),
        ("operating point", f"continuous batching at {at}, {mode}"),
        ("batch (concurrent requests)", f"{p.batch_total}  (limited by {p.limited_by}; limits: {limits})"),
        ("prompt tokens per iteration", f"{p.chunk_tokens}" if p.mode == "chunked" else "0 (prefill runs apart)"),
        ("TPOT (time per output token, per user)", _time(p.tpot_s)),
        ("TTFT (time to first token)", f"{_time(p.ttft_s)}  {p.ttft_note}"),
        ("user tokens/s", f"{1 / p.tpot_s:.4g}"),
        ("input tokens/s", f"{p.input_tokens_per_s:.0f}"),
        ("requests/s", f"{p.requests_per_s:.4g}"),
        ("energy per output token", format_quantity(p.energy_per_output_token_j, "energy")),
        ("average power", format_quantity(p.power_w, "power")),
        ("output tokens/s per W", f"{p.output_tokens_per_s_per_w:.4g}"),
        ("output tokens/s per $ of chips", f"{p.output_tokens_per_s_per_usd:.4g}"
         + (f"  (chips {p.chip_cost_usd:,.0f} $, dse cost model)" if math.isfinite(p.chip_cost_usd) else "")),
        ("KV pool", f"{format_quantity(p.kv_pool_bytes, 'bytes')}  ({p.engine.kv_fraction:.0%} of capacity "
                    f"{format_quantity(p.capacity_bytes, 'bytes')} - weights "
                    f"{format_quantity(p.weight_bytes, 'bytes')} - workspace)"),
        ("KV per request", f"{p.kv_tokens_per_request:.0f} tokens x {format_quantity(p.kv_bytes_per_token, 'bytes')}"
                           f" ({p.engine.kv_policy})"),
        ("iteration: matrix / memory / link time", f"{_time(f['t_matrix_s'])} / {_time(f['t_memory_s'])} / "
                                                   f"{_time(f['t_link_s'])}  (bound: {f['bound']})"),
    ]
    if p.tpot_slo_s is not None:
        rows.insert(6, ("TPOT SLO", f"{_time(p.tpot_slo_s)} (met)"))
    _rows(rows)
    return 0


def _disaggregated(args, opts) -> int:
    d = disaggregated(args.chip, args.model, args.isl, args.osl, **opts)
    p = d.decode
    print(f"dse serve: {p.model} on {p.chip} ({p.parallelism.label()} per instance), {p.mix.label()}, "
          f"{_formats(p)}, disaggregated prefill / decode")
    print(_knob_line(args, p.knobs))
    _rows([
        ("output tokens/s per chip", f"{d.output_tokens_per_s_per_chip:.0f}"),
        ("output tokens/s", f"{d.output_tokens_per_s_per_chip * p.chips / (1 - d.prefill_share):.0f}  "
                            "(per decode instance, with its share of prefill instances)"),
        ("prefill share of the chips", f"{d.prefill_share:.1%}"),
        ("prefill: prompts per iteration", f"{d.prefill['prompts_per_iteration']}"),
        ("prefill: iteration", _time(d.prefill["iteration_s"])),
        ("decode: batch", f"{p.batch_total}  (limited by {p.limited_by})"),
        ("TPOT (time per output token, per user)", _time(d.tpot_s)),
        ("TTFT (time to first token)", f"{_time(d.ttft_s)}  (prefill iteration + KV transfer "
                                       f"{_time(d.kv_transfer_s)}, queue wait excluded)"),
    ])
    return 0


def register(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="serving operating point: TPOT, TTFT, output tokens/s (per chip, per W, per $) at maximum load",
        description="Steady state of continuous batching at maximum load (chunked prefill, paged KV, the "
                    "engine's limits, an optional TPOT SLO) through the evaluator, with the efficiency knobs "
                    "fitted on measured serving (dse/data/serving/knobs.yaml). Example: dse serve --chip "
                    "h100-sxm --model llama-3.1-8b --weights fp8 --kv fp8 --isl 1000 --osl 1000",
    )
    s.add_argument("--chip", required=True, help="catalog name (dse catalog) or a chip YAML file")
    s.add_argument("--model", required=True, help="shipped model name or a Hugging Face config.json path")
    s.add_argument("--isl", type=int, required=True, help="input (prompt) tokens per request")
    s.add_argument("--osl", type=int, required=True, help="output tokens per request")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel chips (default 1)")
    s.add_argument("--pp", type=int, default=1, help="pipeline-parallel stages (default 1)")
    s.add_argument("--ep", type=int, default=1, help="expert-parallel size: 1, or --tp to spread the experts over "
                                                     "every chip (MoE models: all-to-all dispatch and combine)")
    s.add_argument("--weights", default="bf16", metavar="FMT", help="weight format (default bf16)")
    s.add_argument("--kv", default=None, metavar="FMT", help="KV-cache format (default: as the weights if 8-bit "
                                                             "or wider, else bf16)")
    s.add_argument("--activations", default=None, metavar="FMT", help="activation format (default as --kv)")
    s.add_argument("--tpot-slo", default=None, metavar="TIME", help="time-per-output-token SLO, e.g. 50ms")
    s.add_argument("--calibration", default=None, metavar="FILE|none",
                   help="knob file (default: the shipped fit); 'none': the uncalibrated bound")
    s.add_argument("--stack", default=None, metavar="PROFILE",
                   help="knob profile of the file (shipped: trtllm (default), vllm-eager)")
    s.add_argument("--load", default=None, metavar="FRACTION",
                   help="request rate as a fraction of the maximum (default 1: maximum load)")
    s.add_argument("--kv-fraction", default=None, metavar="FRACTION",
                   help="share of free memory for the KV cache (default 0.90)")
    s.add_argument("--kv-policy", default=None, choices=["reserve", "current"],
                   help="KV admission: reserve ISL+OSL per request (default) or count current use")
    s.add_argument("--block-tokens", type=int, default=None, help="tokens per KV page (default 32)")
    s.add_argument("--max-batch", type=int, default=None, help="engine's max concurrent requests (default 2048)")
    s.add_argument("--max-num-tokens", type=int, default=None, help="engine's max tokens per iteration "
                                                                   "(default 8192)")
    s.add_argument("--workspace", default=None, metavar="BYTES", help="workspace per chip (default 2 GiB)")
    s.add_argument("--no-chunked-prefill", action="store_true", help="prefill in iterations of its own")
    s.add_argument("--disaggregated", action="store_true", help="prefill and decode on separate instances")
    s.set_defaults(func=_serve)
