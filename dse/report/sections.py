"""The tables both pages show, as rows of text: settings, design space, objectives, constraints, rejections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dse.report.sensitivity import table_rows
from dse.report.view import _Study, _as_number, _pct, _to_float
from dse.study.results import format_value


def _settings_lines(meta: Mapping) -> list[tuple[str, str]]:
    def text(v: Any) -> str:
        if isinstance(v, Mapping):
            return ", ".join(f"{k}={text(x)}" for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return "; ".join(text(x) if not isinstance(x, Mapping) else (str(x.get("name")) if "name" in x
                                                                            else text(x))
                             for x in v)
        return str(v)

    out = []
    if meta.get("base_chip"):
        out.append(("base chip", str(meta["base_chip"])))
    if meta.get("workloads"):
        out.append(("workloads", text(meta["workloads"])))
    if meta.get("solver"):
        out.append(("solver", text(meta["solver"])))
    for key, label in (("n_trials", "trials requested"), ("seed", "seed")):
        if meta.get(key) is not None:
            out.append((label, str(meta[key])))
    if meta.get("elapsed_s") is not None:
        out.append(("elapsed", format_value(_to_float(meta["elapsed_s"]), "s")))
    return out


def _space_rows(meta: Mapping) -> list[list[str]]:
    rows = []
    for s in meta.get("space") or []:
        if not isinstance(s, Mapping):
            continue
        unit = s.get("unit") or ""
        if s.get("choices"):
            rng = "{" + ", ".join(format_value(_as_number(c) if unit else c, unit) for c in s["choices"]) + "}"
        else:
            rng = f"{format_value(s.get('low'), unit)} .. {format_value(s.get('high'), unit)}"
        rows.append([str(s.get("name")), str(s.get("kind") or ""), rng, str(unit)])
    return rows


def _rejection_rows(st: _Study) -> list[list[str]]:
    rows = []
    for _, r in st.rejections.iterrows():
        rows.append([str(r["constraint"]), f"{r['rejected']} ({_pct(r['rejected'], st.n)})", str(r["alone"]),
                     format_value(r["worst"], r["unit"]) if r["rejected"] else "-",
                     format_value(r["closest"], r["unit"]) if r["rejected"] else "-"]
                    + ([str(r["nan"])] if st.rejections["nan"].any() else []))
    return rows


_REJ_HEAD = ["constraint", "rejected", "rejected by it alone", "worst violation", "closest miss"]


def _objective_rows(meta: Mapping) -> list[list[str]]:
    return [[str(o["name"]), str(o.get("direction", "")), str(o.get("unit") or "")] for o in meta["objectives"]]


def _constraint_rows(meta: Mapping) -> list[list[str]]:
    rows = []
    for c in meta.get("constraints") or []:
        params = c.get("params") or {}
        ptxt = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, Mapping) else str(params)
        rows.append([str(c["name"]), str(c.get("unit") or ""), ptxt])
    return rows


def _sensitivity_table(st: _Study) -> tuple[list[str], list[list[str]]]:
    """The front's sensitivity table (dse.report.sensitivity), a parameter's one value on the front in its unit."""
    units = {str(s.get("name")): s.get("unit") or "" for s in st.meta.get("space") or [] if isinstance(s, Mapping)}
    return table_rows(st.sensitivity, st.objectives, lambda p, v: format_value(v, units.get(p)))


def _split_lines(meta: Mapping) -> list[str]:
    """What the CP-SAT split's evaluator search did (meta['split'], dse.study.cpsat): the answer against the split
    model's own optimum."""
    sp = meta.get("split")
    return [f"CP-SAT split: {sp['summary']}"] if isinstance(sp, Mapping) and sp.get("summary") else []


def _tiles_lines(meta: Mapping) -> list[str]:
    """What ``solver.tiles`` did (meta['tiles'], dse.study.tiles): the tiles used, why, the cache's work and how
    much the CP-SAT tiles changed the front (the same designs on the evaluator's default tiles)."""
    t = meta.get("tiles")
    if not isinstance(t, Mapping) or not t.get("used"):
        return []
    if t["used"] != "cpsat":
        return [f"tiles: the evaluator's default (heuristic) tiles ({t.get('reason', '')})"]
    out = [f"tiles: CP-SAT-optimal tiles per design ({t.get('reason', '')})"]
    c = t.get("cache") or {}
    if c:
        out.append(f"tile problems solved: {int(c.get('solves', 0)):,} ({int(c.get('proven', 0)):,} proven optimal), "
                   f"for {int(c.get('lookups', 0)):,} operator look-ups ({int(c.get('row_hits', 0)):,} repeated "
                   f"designs or operators, {int(c.get('data_hits', 0)):,} with equal tile data); "
                   f"{format_value(float(c.get('solve_cpu_s', 0.0)), 's')} CP-SAT CPU"
                   + (f"; {int(c['no_fit']):,} operators with no tile that fits kept the default tiles"
                      if c.get("no_fit") else ""))
    e = t.get("effect") or {}
    if e:
        line = (f"what the tiles changed (the same {int(e.get('designs', 0)):,} designs on the default tiles): "
                f"front {e.get('front_heuristic', 0)} -> {e.get('front_cpsat', 0)} designs, "
                f"{e.get('front_both', 0)} on both; feasible {e.get('feasible_heuristic', 0)} -> "
                f"{e.get('feasible_cpsat', 0)}")
        if e.get("hypervolume_ratio") is not None:
            line += (f"; hypervolume {e['hypervolume_heuristic']:.4g} -> {e['hypervolume_cpsat']:.4g} "
                     f"({e['hypervolume_ratio']:.4g}x, both fronts normalized together)")
        if e.get("time_ratio"):
            line += (f"; step time on the default tiles / on CP-SAT's: median {e['time_ratio']['median']:.4g}x, "
                     f"max {e['time_ratio']['max']:.4g}x")
        ch = e.get("objective_change") or {}
        if ch:
            line += "; on the CP-SAT front, default / CP-SAT: " + ", ".join(
                f"{k} median {v['median']:.4g}x ({v['min']:.4g}-{v['max']:.4g})" for k, v in ch.items())
        out.append(line)
    return out
