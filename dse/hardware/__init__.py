"""Chips: the hardware spec (YAML -> frozen record) and its vectorized form.

A chip is written once as a nested YAML record (:class:`ChipSpec`) and used
inside dse as :class:`Chips`: N design points held as numpy arrays keyed by
the same dotted names the YAML uses ("hbm.stacks", "clock",
"matrix.flops_per_cycle.bf16"). Design spaces, what-if overrides and the
evaluator all speak those names, so a parameter a user can write is a
parameter a search can vary.

Model (seed 004 §4.1.3, §4.2; seed 000 "Dense and sparse peaks"):
    peak FLOP/s per format  = dies x units x FLOPs/cycle/unit x clock
    HBM stack bandwidth     = pins x pin rate / 8   (the /8 happens when "Gb/s" is parsed to bytes/s)
    HBM stack capacity      = layers x capacity per layer
    machine balance         = peak FLOP/s / memory bandwidth

One rule set for a changed chip, whichever way it is built (chip file or
what-if proposal: :func:`with_overrides`; study point or CP-SAT design:
:meth:`Chips.from_base`): :func:`override_rules` says which of the base
chip's inputs stop being true when another changes (RESETS: other units drop
the base's spare count, other stacks its stack sites and enabled capacity...)
and which derived figures stay (KEEPS: another TDP keeps the static power);
:func:`derive` computes every derived figure (memory bandwidth and capacity,
SRAM and memory energies, static power, TDP, link rates) from the inputs,
vectorized, for :meth:`Chips.from_specs` and :meth:`Chips.from_base` alike. A
value a chip or a design gives wins over its derivation. :func:`chip_yaml`
writes any spec as a chip file that reads back equal.
"""

from dse.hardware.catalog import (
    CHIP_DIR,
    DATA,
    catalog,
    catalog_names,
    chip_from_dict,
    load_chip,
    load_chip_dict,
    resolve_name,
)
from dse.hardware.chips import Chips
from dse.hardware.overrides import chip_yaml, with_overrides
from dse.hardware.records import (
    MEMORY_KINDS,
    AreaSpec,
    Calibration,
    ChipSpec,
    Dram,
    Energy,
    Hbm,
    InstructionTile,
    Link,
    Links,
    MatrixUnit,
    MemorySystem,
    PowerSpec,
    Reference,
    SramMemory,
    SystemSpec,
    VectorUnit,
    flatten,
    param_dimension,
    parameter_names,
    unflatten,
    yaml_value,
)
from dse.hardware.rules import KEEPS, LINK_KEYS, OPTIONAL_INPUTS, RESETS, derive, override_rules

__all__ = [
    "CHIP_DIR", "DATA", "MEMORY_KINDS", "catalog", "catalog_names", "chip_from_dict", "load_chip", "load_chip_dict",
    "resolve_name", "Chips", "chip_yaml", "with_overrides", "AreaSpec", "Calibration", "ChipSpec", "Dram", "Energy",
    "Hbm", "InstructionTile", "Link", "Links", "MatrixUnit", "MemorySystem", "PowerSpec", "Reference", "SramMemory",
    "SystemSpec", "VectorUnit", "flatten", "param_dimension", "parameter_names", "unflatten", "yaml_value", "KEEPS",
    "LINK_KEYS", "OPTIONAL_INPUTS", "RESETS", "derive", "override_rules",
]
