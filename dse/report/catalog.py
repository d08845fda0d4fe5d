"""Tables of chips for people: `dse catalog` and `dse show`."""

from __future__ import annotations

import math

import pandas as pd

from dse.hardware import ChipSpec, catalog, load_chip
from dse.model.tiling import ACCUMULATOR_BYTES
from dse.units import format_quantity


def _peak(spec: ChipSpec, fmt: str) -> float:
    return spec.peak_flops(fmt) if fmt in spec.matrix.flops_per_cycle else float("nan")


def catalog_frame() -> pd.DataFrame:
    """One row per catalog chip, SI units in the column names."""
    rows = []
    for s in catalog():
        fp8 = max((_peak(s, f) for f in ("fp8_e4m3", "int8") if f in s.matrix.flops_per_cycle), default=float("nan"))
        bf16 = _peak(s, "bf16") if "bf16" in s.matrix.flops_per_cycle else _peak(s, "fp16")
        rows.append({
            "chip": s.name,
            "title": s.title or "",
            "process": s.process,
            "dies": s.dies,
            "units": s.total_units,
            "clock_hz": s.clock,
            "bf16_flop_per_s": bf16,
            "fp8_flop_per_s": fp8,
            "memory": s.memory_kind + (f" {s.hbm.generation} x{s.hbm.stacks}" if s.hbm else ""),
            "bandwidth_bytes_per_s": s.memory_bandwidth,
            "capacity_bytes": s.memory_capacity,
            "tdp_w": s.tdp if s.tdp else float("nan"),
            "balance_flop_per_byte": bf16 / s.memory_bandwidth,
        })
    return pd.DataFrame(rows)


_HUMAN = {
    "clock_hz": "frequency", "bf16_flop_per_s": "flop_rate", "fp8_flop_per_s": "flop_rate",
    "bandwidth_bytes_per_s": "bandwidth", "capacity_bytes": "bytes", "tdp_w": "power",
}


def render(df: pd.DataFrame, fmt: str = "text") -> str:
    if fmt == "csv":
        return df.to_csv(index=False)
    shown = df.copy()
    for col, dim in _HUMAN.items():
        if col in shown:
            shown[col] = [format_quantity(v, dim, 4) if v == v else "-" for v in shown[col]]
    shown["balance_flop_per_byte"] = [f"{v:.0f}" if v == v else "-" for v in shown["balance_flop_per_byte"]]
    shown = shown.rename(columns={
        "clock_hz": "clock", "bf16_flop_per_s": "BF16 peak", "fp8_flop_per_s": "FP8/INT8 peak",
        "bandwidth_bytes_per_s": "bandwidth", "capacity_bytes": "capacity", "tdp_w": "TDP",
        "balance_flop_per_byte": "FLOP/B",
    }).drop(columns=["title"])
    if fmt == "markdown":
        head = "| " + " | ".join(shown.columns) + " |\n|" + "---|" * len(shown.columns) + "\n"
        return head + "\n".join("| " + " | ".join(str(v) for v in r) + " |" for r in shown.itertuples(index=False))
    return shown.to_string(index=False)


def show(name: str) -> str:
    """Every derived figure of one chip, with the inputs it comes from."""
    s = load_chip(name)
    lines = [f"{s.name}: {s.title or ''}".rstrip(), f"  source: {s.source or '-'}"]
    lines.append(f"  process {s.process}, {s.dies} die(s) x {s.units} units = {s.total_units} units, "
                 f"clock {format_quantity(s.clock, 'frequency')}, TDP {format_quantity(s.tdp, 'power') if s.tdp else '-'}")
    lines.append("  matrix peak (units x FLOP/cycle x clock):")
    for fmt, fpc in sorted(s.matrix.flops_per_cycle.items()):
        lines.append(f"    {fmt:10s} {fpc:8g} FLOP/cycle/unit -> {format_quantity(s.peak_flops(fmt), 'flop_rate')}")
    it = s.matrix.instruction
    lines.append(f"  instruction tile {it.m} x {it.n} x {it.k}")
    if s.vector:
        lines.append(f"  vector {s.vector.flops_per_cycle:g} FLOP/cycle/unit "
                     f"({format_quantity(s.total_units * s.vector.flops_per_cycle * s.clock, 'flop_rate')}), "
                     f"exp {s.vector.exp_per_cycle:g}/cycle/unit"
                     + (f" ({s.vector.source})" if (s.vector.source or "").startswith("default:") else ""))
    lines.append(f"  local buffer {format_quantity(s.local_buffer, 'bytes')}/unit, registers "
                 f"{format_quantity(s.register_file, 'bytes')}/unit, L2 {format_quantity(s.l2, 'bytes')}/die"
                 + (" (each die's own units only)" if s.l2_scope == "die" and s.dies > 1 else ""))
    if s.accumulator:
        side = math.isqrt(int(s.accumulator // ACCUMULATOR_BYTES))
        lines.append(f"  accumulator store {format_quantity(s.accumulator, 'bytes')}/unit (the tiles' FP32 "
                     f"accumulators: a {side} x {side} tile at most)")
    lines += _on_chip_bandwidths(s)
    if s.memory_side_cache:
        msc = s.memory_side_cache
        lines.append(f"  memory-side cache {format_quantity(msc.capacity, 'bytes')} shared by the dies, "
                     f"{format_quantity(msc.bandwidth, 'bandwidth')}")
    if s.hbm:
        h = s.hbm
        lines.append(f"  HBM {h.generation}: {h.stacks} stacks x {h.pins_per_stack} pins x "
                     f"{h.pin_rate * 8 / 1e9:g} Gb/s / 8 = {format_quantity(h.stack_bandwidth, 'bandwidth')}/stack")
        lines.append(f"    stack capacity {format_quantity(h.stack_capacity, 'bytes')}, raw "
                     f"{format_quantity(s.raw_memory_capacity, 'bytes')}, enabled {format_quantity(s.memory_capacity, 'bytes')}")
    lines.append(f"  memory: {s.memory_kind}, {format_quantity(s.memory_bandwidth, 'bandwidth')}, "
                 f"{format_quantity(s.memory_capacity, 'bytes')}")
    for fmt in ("bf16", "fp8_e4m3"):
        if fmt in s.matrix.flops_per_cycle:
            lines.append(f"  machine balance {fmt}: {s.machine_balance(fmt):.1f} FLOP/byte")
    for lname in ("die_to_die", "host", "scale_up"):
        link = getattr(s.links, lname)
        if link:
            lines.append(f"  link {lname}: {format_quantity(link.rate, 'bandwidth')} per direction x {link.peers} "
                         f"peer(s), alpha {format_quantity(link.alpha, 'time')}")
    if s.dies > 1 and not s.links.die_to_die and not s.memory_side_cache:
        # (dse.model.evaluator: a package without the link acts as one pool; with a memory-side cache the dies
        # reach memory through it, at its bandwidth, as AMD's XCDs through the IODs' Infinity Cache)
        lines.append(f"  no links.die_to_die: the {s.dies} dies share memory as one pool, with no link time, energy "
                     f"or PHY area (give links.die_to_die to charge for one)")
    lines += _modelled(s)
    return "\n".join(lines)


def _on_chip_bandwidths(s) -> list[str]:
    """The local buffer's and the L2's bytes per cycle as the evaluator reads them (dse.hardware.rules: the chip's
    own figure, else the on-chip rule of hierarchy.yaml, marked as such) and the L2's multicast."""
    from dse.hardware import Chips

    chips = Chips.from_specs([s])
    out = []
    for key, what, per in (("local_bytes_per_cycle", "local buffer", "unit"), ("l2_bytes_per_cycle", "L2", "die")):
        if not (s.local_buffer if key == "local_bytes_per_cycle" else s.l2):
            continue
        b = float(chips.get(key, 0.0)[0])
        units = s.units if per == "die" else 1
        rate = format_quantity(b * s.clock * (s.dies if per == "die" else s.total_units), "bandwidth")
        rule = "" if getattr(s, key) is not None else (
            f" (default: {b / units:g} B/cycle per unit, hierarchy.yaml)")
        out.append(f"  {what} bandwidth {b:,.0f} B/cycle/{per}, {rate} in all at the clock{rule}")
    if s.l2 and s.l2_multicast > 1:
        out[-1] += f", multicast over {s.l2_multicast} units"
    return out


def _modelled(s) -> list[str]:
    """The model's die area and its parts, peak power and chip cost (dse.model.area, .power, .cost)."""
    from dse.hardware import Chips
    from dse.model import area as area_mod, cost as cost_mod
    from dse.model.evaluator import power_inputs

    chips = Chips.from_specs([s])
    pa = area_mod.package_area_for(chips)
    die = float(pa.die_area_mm2[0])
    pub = s.reference.die_area
    versus = (f" (published {pub:g} mm^2: {die / pub - 1:+.1%}; a label of the area fit, leave-one-out in "
              f"python -m dse.model.area_fit)" if pub else " (no published figure)")
    out = [f"  modelled die area {die:.1f} mm^2{versus}"]
    names = (("matrix", "matrix"), ("vector", "vector lanes"), ("control", "unit control"),
             ("graphics", "graphics"), ("register_file", "registers"),
             ("local", "local buffers"), ("l2", "L2"), ("memory_phy", "memory PHYs"), ("io", "I/O"),
             ("uncore", "uncore"), ("sram_memory", "SRAM memory"))
    parts = [f"{label} {float(pa.parts[k][0]):.1f}" for k, label in names if float(pa.parts[k][0]) > 0]
    out.append(f"    parts (mm^2 per die): {', '.join(parts)}; {float(pa.dies[0]):g} die(s), total silicon "
               f"{float(pa.total_silicon_area_mm2[0]):.1f} mm^2")
    msc = float(pa.parts["msc"][0] * pa.dies[0])
    if msc > 0:
        on = "the base dies" if float(pa.base_area_mm2[0]) > 0 else "the compute dies"
        out.append(f"    memory-side cache {msc:.1f} mm^2 of SRAM on {on}"
                   + (f" (base dies {float(pa.base_area_mm2[0]):.1f} mm^2)" if on == "the base dies" else ""))
    p = power_inputs(chips, pa)
    out.append(f"  modelled peak power {format_quantity(float(p['most'][0]), 'power')} at the design clock "
               f"(leakage {format_quantity(float(p['leak'][0]), 'power')} and clock tree "
               f"{format_quantity(float(p['clk'][0]), 'power')} at V_nom; TDP "
               + (f"{format_quantity(float(p['tdp'][0]), 'power')} published)" if not p["tdp_est"][0]
                  else f"not published: the model's estimate is the peak power)"))
    process, memory = area_mod.process_and_memory(chips)
    cost = cost_mod.chip_cost(chips, pa, process=process, memory=memory)
    out.append(f"  modelled chip cost {format_quantity(float(cost.chip_cost_usd[0]), 'money')} (die "
               f"{format_quantity(float(cost.die_usd[0]), 'money')}, yield {float(cost.die_yield[0]):.1%})")
    return out
