"""Workloads: operators with shapes and per-tensor formats, and the LLM phase builders.

A :class:`Workload` is what one *step* asks of a chip: a tuple of :class:`Op`
(one operator kind per op, identical layers folded into ``count``), the
resident state (weights, KV cache, workspace) and the step's token counts.
The evaluator only reads these records; every FLOP and byte is counted here,
once (seed 004 §4.1.1, §4.3.1, §4.8.2).

One concept per module; every public name is importable from ``dse.workload``:

=============== ==============================================================
formats.py      :class:`Formats`: number format per tensor role, compute format
models.py       :class:`ModelConfig` / :class:`MoEConfig`, :func:`load_model`,
                parameter counts, resident weight bytes, KV bytes per token
capacity.py     :func:`max_requests`, :func:`chips_to_hold`
routing.py      MoE routing: :func:`moe_rows`, :func:`padded_rows`, :func:`executed_rows`
ops.py          :class:`Op` and the operator kinds (table there), :func:`gemm`,
                :func:`attention`, vector ops
step.py         :class:`Workload`: one step and the state it needs resident
phases.py       :func:`decode`, :func:`prefill` (the operators of a model step)
spec.py         :class:`WorkloadSpec` (YAML), :func:`build`, :func:`parse_workload`, :func:`workload_mapping`
                (CLI short form), :func:`key_values`
=============== ==============================================================
"""

from __future__ import annotations

from dse.workload.capacity import chips_to_hold, max_requests
from dse.workload.formats import Formats
from dse.workload.hf_config import read_hf_config  # noqa: F401 - a config.json by path (load_model reads it)
from dse.workload.models import (
    MODEL_DIR,
    ModelConfig,
    MoEConfig,
    kv_bytes_per_token,
    load_model,
    model_names,
    parameter_counts,
    resident_weight_bytes,
)
from dse.workload.ops import B_KINDS, KINDS, MATRIX_KINDS, ROLES, Op, attention, gemm
from dse.workload.phases import DEFAULT_WORKSPACE, decode, prefill
from dse.workload.routing import ROUTINGS, executed_rows, moe_rows, padded_rows
from dse.workload.spec import (
    AttentionSpec,
    GemmSpec,
    OpSpec,
    VectorSpec,
    WorkloadSpec,
    anchored,
    build,
    key_values,
    parse_workload,
    workload_mapping,
)
from dse.workload.step import Workload

__all__ = [
    "KINDS",
    "ROLES",
    "MATRIX_KINDS",
    "Formats",
    "MoEConfig",
    "ModelConfig",
    "Op",
    "Workload",
    "WorkloadSpec",
    "model_names",
    "load_model",
    "parameter_counts",
    "resident_weight_bytes",
    "kv_bytes_per_token",
    "max_requests",
    "chips_to_hold",
    "moe_rows",
    "padded_rows",
    "executed_rows",
    "gemm",
    "attention",
    "decode",
    "prefill",
    "build",
    "anchored",
    "parse_workload",
    "workload_mapping",
    "key_values",
    "GemmSpec",
    "AttentionSpec",
    "VectorSpec",
    "OpSpec",
    "B_KINDS",
    "ROUTINGS",
    "DEFAULT_WORKSPACE",
    "MODEL_DIR",
]
