"""What-if: a baseline chip, a few proposals that change it, every workload on each.

A proposals file (YAML; `dse whatif FILE`, :func:`run_whatif`)::

    name: h100-upgrades
    question: What does each single change to an H100 buy for Qwen3-8B decode?
    baseline: h100-sxm              # catalog name, chip file, inline chip, or {chip: NAME, <overrides>}
    proposals:                      # name -> dotted chip overrides (the names of `dse show`, as in studies)
      hbm3e-6: {hbm.generation: hbm3e, hbm.stacks: 6}
      clock-2ghz: {clock: 2.0 GHz}
      fp8-2x: {matrix.flops_per_cycle.fp8_e4m3: x2}      # "xN" scales the current value
      h200: {chip: h200-sxm}                               # another chip: a device comparison
      rom: {evaluation: {weights_in_rom: true}}            # an evaluator option (seed 004 §4.7.3)
      h200-vs-h100: {chip: h200-sxm, compare_to: hbm3e-6}  # compare with another proposal
      die-900: {units: 152, die_area: 900 mm^2, fill: l2}  # a stated die: the L2 that makes it 900 mm^2
    evaluation: {fused_attention: true}                    # options for every design (optional)
    constraints: {tdp: {max: 1000 W}}                      # default: reticle, hbm_shoreline, tdp,
                                                           # power_density, fits_memory
    attention_block: {rows: 128, cols: 128, head_dim: 128, smem_bytes_per_cycle: 128}   # optional
    workloads:
      - qwen3-8b:decode:batch=1:context=8192               # the CLI short form, or a workload mapping
      - {model: qwen3-8b, phase: prefill, tokens: 4096}
    output: results/h100-upgrades                          # optional; `--out` overrides

A proposal's keys are dotted chip parameters plus the reserved ``chip``
(start from another chip instead of the baseline), ``compare_to`` (the design
its changes are measured against; default the baseline), ``evaluation``
(evaluator options merged over the file's), ``attention_block`` (per-design
``smem_bytes_per_cycle``, a value or "xN"), ``die_area`` with ``fill`` and
``note``. A proposal that states its die (``die_area: 900 mm^2``) is filled to
that area by the area model: the on-chip memory named by ``fill`` (default
``l2``) is solved so the modelled die is the stated one
(:func:`dse.whatif.spec.fill_to_die_area`); the rest of the design is the
proposal's overrides, and the note says what the fill came to.

Per workload the result holds, for the baseline and each proposal: the joined
metrics of :func:`dse.evaluate.evaluate_design` (evaluator + area + cost; the same
join the searches use), every constraint's value (<= 0 feasible, the
magnitude is the violation in the constraint's unit), the change in % against
the reference design, the bound resource of every operator (which operators
changed bound), and an Amdahl decomposition of the time: the operators are
grouped by the resource that bounds them on the reference design (matrix,
vector, memory; "overhead" is the step overhead outside operators), and for
each group the reference time, its share ``f``, the proposal's time of the
same operators, their speed-up ``s`` and the share of the total change, so
that ``T_ref / T_new = 1 / sum(f / s)`` exactly (seed 004 §4.8.1: work on
one resource adds, overlapped resources take the max).

Example 4-1's attention pipeline (seed 004 §4.2.3) is the optional
``attention_block`` analysis: per design, one block's matrix, exponential
and shared-memory cycles on one compute unit from the design's own rates
(matrix FLOPs/cycle of ``format``, ``vector.exp_per_cycle``) and the
interval max(matrix, exp, smem) via :func:`dse.model.pipeline.attention_block_cycles`.
The chip schema has no shared-memory bandwidth, so it is a parameter of the
analysis (128 B/cycle per SM, seed 004 §4.2.3). Beside it, the handoff table
runs seed 004 §4.4.3's QK -> softmax -> PV schedules (write-then-read or
direct handoff, row groups, slots) on the same rates via
:func:`dse.model.pipeline.attention_handoff_schedule`; the Amdahl table's last
column is each group's step speed-up alone, :func:`dse.model.pipeline.amdahl_speedup`.

A proposal that breaks a constraint is a result, not an error; only a file
that cannot be read as a what-if is (all its problems at once, each located
``file:line:col key: message``).

A proposal's chip is built with :func:`dse.hardware.with_overrides` and
evaluated as a chip file (:func:`design_chips`): the override rules and the
derivation are those of chip files, study points and CP-SAT designs
(:func:`dse.hardware.override_rules`, :func:`dse.hardware.derive`).

Modules: :mod:`dse.whatif.spec` (reading and validating the file or the CLI's
quick question), :mod:`dse.whatif.run` (evaluation and comparisons),
:mod:`dse.whatif.render` (markdown, JSON, PNG).
"""

import sys as _sys
import types as _types

from dse.whatif.entry import whatif as _entry
from dse.whatif.render import CLASSES, METRICS, RESOURCES
from dse.whatif.run import WhatIfResult, design_chips, run_whatif
from dse.whatif.spec import (
    ATTENTION_KEYS,
    BASELINE,
    DEFAULT_CONSTRAINTS,
    EVALUATION_OPTIONS,
    PROPOSAL_KEYS,
    TOP_KEYS,
    Design,
    WhatIfSpec,
    load_proposals,
    quick_spec,
    spec_from_dict,
)

__all__ = ["run_whatif", "load_proposals", "quick_spec", "spec_from_dict", "design_chips", "WhatIfResult",
           "WhatIfSpec", "Design", "TOP_KEYS", "PROPOSAL_KEYS", "BASELINE", "DEFAULT_CONSTRAINTS",
           "EVALUATION_OPTIONS", "ATTENTION_KEYS", "RESOURCES", "CLASSES", "METRICS"]


class _CallablePackage(_types.ModuleType):
    """This package, callable: ``dse.whatif(...)`` is :func:`dse.whatif.entry.whatif` (the checked entry point)."""

    def __call__(self, *args, **kwargs):
        return _entry(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
