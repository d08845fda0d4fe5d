"""Serving: what a system of chips delivers to users -- TPOT, TTFT, tokens/s per chip, per watt, per dollar.

``serve(chip, model, isl, osl, ...)`` gives the steady-state operating point of continuous batching at
maximum load (or at a fraction of it), with chunked prefill, the batch limited by the KV cache, the
engine's limits and a TPOT SLO; ``disaggregated(...)`` the same with prefill and decode on separate
instances. Every time and energy comes from the one join, :func:`dse.evaluate.evaluate_design`, on engine
iterations (:func:`dse.serve.step.mixed_step`), with the efficiency knobs fitted on measured serving
(dse/data/serving/knobs.yaml, :mod:`dse.serve.calibration`) applied as the chip's calibration. The
formulas and their sources are in :mod:`dse.serve.model`.

One concept per module:

=============== ==============================================================
scenario.py     :class:`RequestMix`, :class:`Engine`, :class:`Parallelism`, :class:`Knobs`
step.py         :func:`mixed_step`: one iteration (decodes + a prompt chunk) as a Workload
model.py        :func:`serve`, :func:`disaggregated`, :class:`ServingPoint`
knobs.py        the shipped knob file and knob files: :func:`resolve_knobs`, :func:`default_knobs`
calibration.py  the fit on measured serving (rows, fit, leave-one-out, the knob file)
scenarios.py    :func:`evaluate_scenarios`, :func:`fronts`: every design on every scenario,
                a front per scenario and one over the weighted mix
=============== ==============================================================

Example (the shipped fit; TensorRT-LLM measured 15,220 output tokens/s for this row)::

    >>> from dse.serve import serve
    >>> p = serve("h100-sxm", "llama-3.1-8b", isl=1000, osl=1000, weights="fp8", kv="fp8")
    >>> 0.75 < p.output_tokens_per_s / 15220 < 1.25
    True
"""

from __future__ import annotations

import sys as _sys
import types as _types

from dse.serve.entry import serve as _entry
from dse.serve.knobs import KNOBS_FILE, default_knobs, read_knobs_file, resolve_knobs
from dse.serve.model import LIMITS, DisaggregatedPoint, ServingPoint, disaggregated, serve, system_chip
from dse.serve.scenarios import Scenario, evaluate_scenarios, fronts, system_design
from dse.serve.scenario import IDEAL, KNOB_NAMES, Engine, Knobs, Parallelism, RequestMix
from dse.serve.step import mixed_step

__all__ = [
    "serve",
    "disaggregated",
    "ServingPoint",
    "DisaggregatedPoint",
    "RequestMix",
    "Engine",
    "Parallelism",
    "Knobs",
    "IDEAL",
    "KNOB_NAMES",
    "LIMITS",
    "mixed_step",
    "system_chip",
    "resolve_knobs",
    "default_knobs",
    "read_knobs_file",
    "KNOBS_FILE",
    "Scenario",
    "evaluate_scenarios",
    "fronts",
    "system_design",
]


class _CallablePackage(_types.ModuleType):
    """This package, callable: ``dse.serve(...)`` is :func:`dse.serve.entry.serve` (the checked entry point)."""

    def __call__(self, *args, **kwargs):
        return _entry(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
