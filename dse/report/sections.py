"""The tables both pages show, as rows of text: settings, design space, objectives, constraints, rejections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
