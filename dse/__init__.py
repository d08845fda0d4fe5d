"""dse: a design-space explorer for AI accelerators.

The Python API (each a checked entry point: names and files as on the command line, mistakes as
:class:`dse.errors.SpecError`; see :mod:`dse.api`)::

    import dse
    m = dse.evaluate_design("h100-sxm", "qwen3-8b:decode:batch=1:context=8192")    # every metric
    t = dse.run_study("studies/qwen3-8b-decode-chip.yaml", trials=200)             # results table
    r = dse.whatif("h100-sxm", {"hbm.stacks": 6}, workloads=["qwen3-8b:decode:batch=1:context=8192"])
    p = dse.serve("h100-sxm", "llama-3.1-8b", isl=1000, osl=1000, weights="fp8")  # serving point

``dse.whatif`` and ``dse.serve`` are also the packages of those parts (callable: calling one runs its
entry point, :func:`dse.whatif.entry.whatif` and :func:`dse.serve.entry.serve`). Names load on first use, so
``import dse`` stays cheap.
"""

import importlib

__version__ = "0.1.0"

#: The entry points defined in dse.api.
_API = ("evaluate_design", "run_study")
#: The entry points that are callable packages.
_PACKAGES = ("whatif", "serve")

__all__ = ["__version__", *_API, *_PACKAGES]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module("dse.api"), name)
    if name in _PACKAGES:
        return importlib.import_module(f"dse.{name}")
    raise AttributeError(f"module 'dse' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
