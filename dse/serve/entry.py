"""``dse.serve(...)``: the checked Python entry point of the serving model (the package itself is callable)."""

from __future__ import annotations

import inspect
from pathlib import Path

from dse.errors import SpecError, unknown_name


def _what(x) -> str:
    return f"{type(x).__name__} {x!r}"[:200]


def serve(chip, model, isl: int | None = None, osl: int | None = None, **options):
    """The serving operating point of ``model`` on ``chip`` (as `dse serve` computes it) -> ServingPoint.

    ``chip``: a catalog name, a chip YAML file or a ChipSpec; ``model``: a shipped model name
    (`dse schema workload` lists them), a Hugging Face ``config.json`` path or a ModelConfig; ``isl`` /
    ``osl``: input and output tokens per request. ``options`` are those of :func:`dse.serve.serve`:
    ``tp``, ``pp``, ``ep`` (parallelism), ``weights``, ``kv``, ``activations`` (format names), ``formats``,
    ``tpot_slo`` (seconds or '50 ms'), ``load`` (fraction of the maximum request rate), ``mix``, ``knobs``,
    ``engine``. The result (:class:`dse.serve.ServingPoint`) holds ``output_tokens_per_s`` (and per chip, per
    W, per $), ``tpot_s``, ``ttft_s``, ``batch_total``, ``limited_by`` and the iteration's figures. Every
    mistake is a :class:`~dse.errors.SpecError` (a chip that cannot hold the model an
    :class:`~dse.errors.InfeasibleError`).

    TensorRT-LLM measured 15,220 output tokens/s for Llama 3.1 8B in FP8 on one H100 at 1000 + 1000 tokens (its
    published max-throughput table, which the shipped knobs are fitted on)::

        >>> import dse
        >>> p = dse.serve("h100-sxm", "llama-3.1-8b", isl=1000, osl=1000, weights="fp8", kv="fp8")
        >>> 0.9 < p.output_tokens_per_s / 15220 < 1.1
        True
        >>> dse.serve("h100-sxm", "llama-3.1-8b", isl=1000, osl=1000, load="50%")
        Traceback (most recent call last):
        dse.errors.SpecError: serve: load must be a number in (0, 1], got str '50%'
    """
    from dse.hardware import ChipSpec
    from dse.serve.model import serve as serve_point
    from dse.workload import ModelConfig

    if not isinstance(chip, (str, Path, ChipSpec)):
        raise SpecError(f"serve: chip must be a catalog name, a chip YAML file or a ChipSpec, got {_what(chip)}")
    if not isinstance(model, (str, Path, ModelConfig)):
        raise SpecError(f"serve: model must be a shipped model name, a config.json path or a ModelConfig, got "
                        f"{_what(model)}")
    known = [p for p in inspect.signature(serve_point).parameters if p not in ("chip", "model", "isl", "osl")]
    for key in options:
        if key not in known:
            raise SpecError(f"serve: {unknown_name('option', key, known)}")
    for key in ("isl", "osl"):
        v = locals()[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise SpecError(f"serve: {key} must be an integer >= 1, got {_what(v)}")
    for key in ("tp", "pp", "ep"):
        v = options.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"serve: {key} must be an integer >= 1, got {_what(v)}")
    load = options.get("load", 1.0)
    if isinstance(load, bool) or not isinstance(load, (int, float)) or not 0 < load <= 1:
        raise SpecError(f"serve: load must be a number in (0, 1], got {_what(load)}")
    from dse.serve.scenario import Engine, Knobs, RequestMix

    for key, cls in (("mix", RequestMix), ("knobs", Knobs), ("engine", Engine)):
        v = options.get(key)
        if v is not None and not isinstance(v, cls):
            raise SpecError(f"serve: {key} must be a dse.serve.{cls.__name__}, got {_what(v)}")
    slo = options.get("tpot_slo")
    if slo is not None and (isinstance(slo, bool) or not isinstance(slo, (int, float, str))):
        raise SpecError(f"serve: tpot_slo must be seconds or a time such as '50 ms', got {_what(slo)}")
    return serve_point(str(chip) if isinstance(chip, Path) else chip, str(model) if isinstance(model, Path) else model,
                       isl, osl, **options)
