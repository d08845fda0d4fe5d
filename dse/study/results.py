"""A study's results on disk: write them atomically, read them back, pick the front, print it.

A results folder holds (all written by :func:`write_results`):

    trials.parquet   one row per evaluated design point, exact dtypes (read back by dse)
    trials.csv       the same table for people and other tools
    pareto.csv       the feasible rank-0 rows, best first by the first objective
    meta.json        the study: name, question, objectives, constraints, space, solver, ...
    catalog.csv      the catalog chips evaluated on the same workloads (header only if none)
    manifest.json    size, SHA-256 and row count of each file above: written last, checked by every reader

Table columns (the contract with :mod:`dse.study`): ``trial``; parameters
``p.<param>`` (SI floats, ints, or strings for choices); objectives
``obj.<name>``; constraints ``con.<name>`` (<= 0 feasible, the magnitude is the
violation in the constraint's unit); metrics ``m.<metric>``; ``feasible``
(bool); ``pareto_rank`` (0 = front over all objectives, -1 = infeasible).

Every file goes through :func:`atomic_write` (temp file in the same folder,
fsync, ``os.replace``), so a crash leaves either the old file or the new one,
never half of one. Output names are confined to the output folder
(:func:`confined_path`).

The folder is one complete set or it is refused (issue 21: a SIGKILL while
writing left a 60,200-row parquet beside a 60,000-row csv, meta and front,
and `dse report` and `dse pareto` took it): ``manifest.json`` is written
last and :func:`read_results`, which every reader goes through (`dse
report`, `dse pareto`, `dse run`'s summary), checks each file against it
and refuses a folder without one, or with a file that does not match, in one
message that says how to rewrite it. A file deleted on purpose (a big
trials.parquet) is not an error as long as a table remains. The temp files
of a write killed half-way are removed by the next `dse run` on the folder
(:func:`dse.fileio.remove_stale_temps`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from dse.errors import SpecError, unknown_name
from dse.fileio import atomic_write, confined_path
from dse.pareto import MAXIMIZE, check_directions, non_dominated_sort, tied
from dse.units import DIMENSIONS, format_quantity

__all__ = [
    "TRIALS_PARQUET",
    "TRIALS_CSV",
    "PARETO_CSV",
    "META_JSON",
    "CATALOG_CSV",
    "MANIFEST_JSON",
    "RESULT_FILES",
    "atomic_write",
    "confined_path",
    "write_results",
    "read_results",
    "check_manifest",
    "check_meta",
    "prepare_table",
    "objective_column",
    "objective_names",
    "objective_directions",
    "front",
    "front_mask",
    "pareto_table",
    "format_value",
    "format_column",
    "column_label",
    "format_table",
]

TRIALS_PARQUET = "trials.parquet"
TRIALS_CSV = "trials.csv"
PARETO_CSV = "pareto.csv"
META_JSON = "meta.json"
CATALOG_CSV = "catalog.csv"
MANIFEST_JSON = "manifest.json"
#: The files of a complete results folder, in the order they are written (the manifest last).
RESULT_FILES = (TRIALS_PARQUET, TRIALS_CSV, PARETO_CSV, CATALOG_CSV, META_JSON, MANIFEST_JSON)
MANIFEST_FORMAT = "dse-results/1"

Writer = Callable[[IO[bytes]], Any]


# ------------------------------------------------------------ meta and table


def _prefixed(table: pd.DataFrame, prefix: str) -> list[str]:
    return [c for c in table.columns if isinstance(c, str) and c.startswith(prefix)]


def objective_names(meta: Mapping) -> list[str]:
    return [str(o["name"]) for o in meta.get("objectives") or []]


def objective_directions(meta: Mapping) -> dict[str, str]:
    return {str(o["name"]): str(o.get("direction", "")) for o in meta.get("objectives") or []}


def check_meta(meta: Any, table: pd.DataFrame | None = None, where: str = "meta") -> None:
    """SpecError listing every problem of ``meta`` (and of ``table`` against it)."""
    if not isinstance(meta, Mapping):
        raise SpecError(f"{where}: expected a mapping (the study's meta data), got {type(meta).__name__}")
    problems: list[str] = []
    objs = meta.get("objectives")
    if not isinstance(objs, Sequence) or isinstance(objs, str) or not objs:
        problems.append(f"{where}.objectives: expected a non-empty list of {{name, direction, unit}}, got {objs!r}")
        objs = []
    for i, o in enumerate(objs):
        if not isinstance(o, Mapping) or "name" not in o:
            problems.append(f"{where}.objectives[{i}]: expected {{name, direction, unit}}, got {o!r}")
            continue
        try:
            check_directions([o.get("direction")])
        except SpecError as e:
            problems.append(f"{where}.objectives[{i}] ({o['name']}): {e}")
        if table is not None and f"obj.{o['name']}" not in table.columns:
            problems.append(f"{where}.objectives[{i}]: the table has no column 'obj.{o['name']}'"
                            f" (objective columns: {', '.join(_prefixed(table, 'obj.')) or 'none'})")
    for i, c in enumerate(meta.get("constraints") or []):
        if not isinstance(c, Mapping) or "name" not in c:
            problems.append(f"{where}.constraints[{i}]: expected {{name, unit, params}}, got {c!r}")
    if table is not None:
        if not isinstance(table, pd.DataFrame):
            problems.append(f"table: expected a pandas DataFrame, got {type(table).__name__}")
        elif "trial" not in table.columns:
            problems.append("table: missing column 'trial'")
    if problems:
        raise SpecError(problems)


def prepare_table(table: pd.DataFrame, meta: Mapping) -> pd.DataFrame:
    """A copy of ``table`` with ``feasible`` and ``pareto_rank`` present.

    Both normally come from the study; when missing, ``feasible`` is
    "every con.* <= 0" and ``pareto_rank`` the non-dominated sort of the
    feasible rows over all objectives (rows with a NaN objective count as
    infeasible for the ranking).
    """
    check_meta(meta, table)
    t = table.copy()
    t.attrs = {}
    if "feasible" not in t.columns:
        cons = _prefixed(t, "con.")
        feas = np.ones(len(t), dtype=bool)
        for c in cons:
            feas &= (pd.to_numeric(t[c], errors="coerce") <= 0).to_numpy()
        t["feasible"] = feas
    else:
        t["feasible"] = t["feasible"].fillna(False).astype(bool)
    if "pareto_rank" not in t.columns:
        names = objective_names(meta)
        t["pareto_rank"] = _ranks(t, [f"obj.{n}" for n in names], [objective_directions(meta)[n] for n in names])
    return t


def _ranks(t: pd.DataFrame, cols: list[str], directions: list[str]) -> np.ndarray:
    F = np.column_stack([pd.to_numeric(t[c], errors="coerce").to_numpy(dtype=float) for c in cols]) \
        if len(t) else np.empty((0, len(cols)))
    feas = t["feasible"].to_numpy(dtype=bool) & ~np.isnan(F).any(axis=1)
    if len(t) == 0:
        return np.empty(0, dtype=np.int64)
    return non_dominated_sort(F, directions, feasible=feas)


def objective_column(meta: Mapping, name: str) -> str:
    """'latency_per_token' or 'obj.latency_per_token' -> 'obj.latency_per_token'; SpecError if unknown."""
    names = objective_names(meta)
    bare = name[4:] if isinstance(name, str) and name.startswith("obj.") else name
    if bare not in names:
        msg = unknown_name("objective", str(bare), names)  # suggest on the bare name ...
        raise SpecError(msg.replace(f"'{bare}'", f"'{name}'", 1))  # ... but quote what was given
    return f"obj.{bare}"


def _sort_best_first(df: pd.DataFrame, col: str, direction: str) -> pd.DataFrame:
    keys = [col] + (["trial"] if "trial" in df.columns else [])
    asc = [direction != MAXIMIZE] + [True] * (len(keys) - 1)
    return df.sort_values(keys, ascending=asc, kind="mergesort", na_position="last")


def front(table: pd.DataFrame, meta: Mapping) -> pd.DataFrame:
    """The study's front: feasible rows of pareto_rank 0, best first by the first objective."""
    t = prepare_table(table, meta)
    rows = t[t["feasible"] & (t["pareto_rank"] == 0)]
    first = objective_names(meta)[0]
    return _sort_best_first(rows, f"obj.{first}", objective_directions(meta)[first]).reset_index(drop=True)


def _pair_columns(meta: Mapping, x: str | None, y: str | None) -> list[str]:
    names = objective_names(meta)
    xc = objective_column(meta, x) if x is not None else f"obj.{names[0]}"
    if y is not None:
        yc: str | None = objective_column(meta, y)
    else:
        yc = next((f"obj.{n}" for n in names if f"obj.{n}" != xc), None)
    return [xc] if yc is None or yc == xc else [xc, yc]


def front_mask(table: pd.DataFrame, meta: Mapping, x: str | None = None, y: str | None = None) -> np.ndarray:
    """Row mask of the front of the feasible points over objectives ``x`` and ``y`` (see :func:`pareto_table`)."""
    t = prepare_table(table, meta)
    if x is None and y is None:
        return (t["feasible"] & (t["pareto_rank"] == 0)).to_numpy(dtype=bool)
    cols = _pair_columns(meta, x, y)
    dirs = objective_directions(meta)
    return _ranks(t, cols, [dirs[c[4:]] for c in cols]) == 0


def pareto_table(table: pd.DataFrame, meta: Mapping, x: str | None = None, y: str | None = None) -> pd.DataFrame:
    """The Pareto front of the feasible points, as rows of ``table``.

    With neither ``x`` nor ``y``: the study's own front (``pareto_rank == 0``
    over all objectives), best first by the first objective. With ``x`` and/or
    ``y``: the front over just those two objectives, recomputed with
    :func:`dse.pareto.non_dominated_sort` (``x`` defaults to the first
    objective, ``y`` to the first other one), sorted best first by ``x``.
    Names are accepted with or without the ``obj.`` prefix; an unknown name
    is a SpecError with the closest match. Feasible rows with a NaN in a
    chosen objective are left out.
    """
    if x is None and y is None:
        return front(table, meta)
    t = prepare_table(table, meta)
    cols = _pair_columns(meta, x, y)
    rows = t[front_mask(t, meta, x, y)]
    return _sort_best_first(rows, cols[0], objective_directions(meta)[cols[0][4:]]).reset_index(drop=True)


def objective_points(rows: pd.DataFrame) -> int:
    """How many distinct points of objective space ``rows`` (a front) make: designs that tie on every objective
    (``obj.*``, compared as the Pareto sort compares them: dse.pareto.tied) are one point."""
    objs = [c for c in rows.columns if isinstance(c, str) and c.startswith("obj.")]
    if not objs or rows.empty:
        return len(rows)
    return len(np.unique(tied(rows[objs].to_numpy(dtype=float)), axis=0))


# ------------------------------------------------------------ writing


def _json_default(o: Any) -> Any:
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    if isinstance(o, (pd.Timestamp, pd.Timedelta)):
        return str(o)
    raise TypeError(f"meta: {type(o).__name__} {o!r} is not JSON-serializable")


def _parquet_ready(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding several Python types (e.g. choices [1, 'auto']) become strings."""
    out = df.copy()
    out.attrs = {}
    for c in out.columns:
        col = out[c]
        if col.dtype == object:
            kinds = {type(v) for v in col if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if len(kinds) > 1:
                out[c] = col.map(lambda v: v if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return out


def _csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def write_results(out_dir: str | os.PathLike, table: pd.DataFrame, meta: Mapping,
                  catalog: pd.DataFrame | None = None) -> dict[str, Path]:
    """Write trials.parquet, trials.csv, pareto.csv, catalog.csv, meta.json and manifest.json into ``out_dir``.

    Each file is written atomically; manifest.json (each file's size, SHA-256
    and rows) is written last, so a folder whose files match its manifest
    holds one complete set, and a write interrupted half-way leaves files that
    do not match it, which readers refuse. ``catalog`` None writes a
    header-only catalog.csv (so no stale one from an earlier run survives).
    Returns {file name: path}.
    """
    t = prepare_table(table, meta)
    meta_text = json.dumps(dict(meta), indent=2, default=_json_default, ensure_ascii=False) + "\n"
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    par = _parquet_ready(t)
    written = {
        TRIALS_PARQUET: atomic_write(TRIALS_PARQUET, lambda f: par.to_parquet(f, index=False), root=root),
        TRIALS_CSV: atomic_write(TRIALS_CSV, _csv_bytes(t), root=root),
        PARETO_CSV: atomic_write(PARETO_CSV, _csv_bytes(front(t, meta)), root=root),
    }
    cat = catalog if catalog is not None else pd.DataFrame({"chip": pd.Series([], dtype=str)})
    if "chip" not in cat.columns:
        raise SpecError(f"catalog: expected a column 'chip', got columns {list(cat.columns)}")
    written[CATALOG_CSV] = atomic_write(CATALOG_CSV, _csv_bytes(cat), root=root)
    written[META_JSON] = atomic_write(META_JSON, meta_text, root=root)
    rows = {TRIALS_PARQUET: len(par), TRIALS_CSV: len(t), PARETO_CSV: int(len(front(t, meta))),
            CATALOG_CSV: len(cat)}
    files = {}
    for name in RESULT_FILES[:-1]:
        size, digest = _digest(root / name)
        files[name] = {"bytes": size, "sha256": digest, **({"rows": rows[name]} if name in rows else {})}
    manifest = {"format": MANIFEST_FORMAT, "files": files}
    written[MANIFEST_JSON] = atomic_write(MANIFEST_JSON, json.dumps(manifest, indent=2) + "\n", root=root)
    return written


def _digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex) of a file."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _rewrite_hint(d: Path, meta: Mapping) -> str:
    study = meta.get("study_file") if isinstance(meta, Mapping) else None
    command = f"dse run {study} --out {d}" if study else f"`dse run STUDY --out {d}`"
    return (f"run the study again to rewrite them ({command}: a search reuses the trials its storage holds, "
            f"nothing is evaluated twice)")


def check_manifest(out_dir: str | os.PathLike, meta: Mapping | None = None,
                   rows: Mapping[str, int] | None = None) -> None:
    """SpecError unless every result file in ``out_dir`` matches its manifest.json (size and SHA-256).

    ``rows`` ({file name: rows read}) adds the row counts to the message. A file the manifest lists that is
    gone is not checked (removed on purpose); one that is there and differs, or no manifest at all, means the
    files are not one complete set (a `dse run` killed while writing them, or files copied from two runs).
    """
    d = Path(out_dir)
    hint = _rewrite_hint(d, meta or {})
    m_p = d / MANIFEST_JSON
    if not m_p.is_file():
        raise SpecError(f"{d}: the results are not known to be complete: {MANIFEST_JSON} is missing (a `dse run` "
                        f"stopped while writing them, or written by an older dse); {hint}")
    try:
        manifest = json.loads(m_p.read_text(encoding="utf-8"))
        files = manifest["files"]
        if manifest.get("format") != MANIFEST_FORMAT or not isinstance(files, dict):
            raise ValueError(f"format {manifest.get('format')!r}")
        expected = {str(k): (int(v["bytes"]), str(v["sha256"]), v.get("rows")) for k, v in files.items()}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SpecError(f"{m_p}: cannot be read as a dse results manifest ({type(e).__name__}: {e}); {hint}") from None
    bad = []
    for name in RESULT_FILES[:-1]:
        if name not in expected or not (d / name).is_file():
            continue
        size, digest = _digest(d / name)
        want_size, want_digest, want_rows = expected[name]
        if (size, digest) != (want_size, want_digest):
            got = (rows or {}).get(name)
            detail = (f"{got:,} rows, the manifest {want_rows:,}" if got is not None and want_rows is not None
                      and got != want_rows else f"{size:,} bytes, the manifest {want_size:,}" if size != want_size
                      else "other content than the manifest's")
            bad.append(f"{name} ({detail})")
    if bad:
        raise SpecError(f"{d}: the results are not one complete set: {'; '.join(bad)} do{'es' if len(bad) == 1 else ''}"
                        f" not match {MANIFEST_JSON} (a `dse run` stopped while writing them, or files from two runs); "
                        f"{hint}")


# ------------------------------------------------------------ reading


def read_results(out_dir: str | os.PathLike) -> tuple[pd.DataFrame, dict, pd.DataFrame | None]:
    """``(table, meta, catalog)`` from a results folder; catalog is None if it has no rows.

    SpecError, saying what is wrong, when ``out_dir`` does not exist, is not a
    folder, or is not a dse results folder (no meta.json, no trials table,
    unreadable files, meta that does not match the table), or when its files
    are not one complete set (:func:`check_manifest`).
    """
    d = Path(out_dir)
    expected = f"a dse results folder holds {', '.join(RESULT_FILES)} (written by `dse run STUDY`)"
    if not d.exists():
        raise SpecError(f"results folder {d}: does not exist; {expected}")
    if not d.is_dir():
        raise SpecError(f"results folder {d}: is a file, not a folder; {expected}")
    meta_p = d / META_JSON
    if not meta_p.is_file():
        inner = sorted(p.name for p in d.iterdir() if (p / META_JSON).is_file()) if (d / "scenarios.csv").is_file() \
            else []
        if inner:  # (a study of scenarios: one results folder per scenario, dse.study.run)
            raise SpecError(f"{d} holds a study's scenarios (scenarios.csv, and one results folder each: "
                            f"{', '.join(inner)}); give one of them, e.g. {d / inner[0]}")
        raise SpecError(f"{d} is not a dse results folder: {META_JSON} is missing; {expected}")
    try:
        meta = json.loads(meta_p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(f"{meta_p}: cannot be read as JSON ({e})") from None
    if not isinstance(meta, dict):
        raise SpecError(f"{meta_p}: expected a JSON object, got {type(meta).__name__}")
    pq, csv = d / TRIALS_PARQUET, d / TRIALS_CSV
    try:
        if pq.is_file():
            table = pd.read_parquet(pq)
        elif csv.is_file():
            table = pd.read_csv(csv)
        else:
            raise SpecError(f"{d} is not a dse results folder: neither {TRIALS_PARQUET} nor {TRIALS_CSV} is there;"
                            f" {expected}")
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - any reader failure is a broken file, said once
        raise SpecError(f"{pq if pq.is_file() else csv}: cannot be read ({type(e).__name__}: {e})") from None
    check_meta(meta, table, where=str(meta_p))
    check_manifest(d, meta, {(TRIALS_PARQUET if pq.is_file() else TRIALS_CSV): len(table)})
    catalog = None
    cat_p = d / CATALOG_CSV
    if cat_p.is_file():
        try:
            catalog = pd.read_csv(cat_p)
        except pd.errors.EmptyDataError:
            catalog = None
        except Exception as e:  # noqa: BLE001
            raise SpecError(f"{cat_p}: cannot be read ({type(e).__name__}: {e})") from None
        if catalog is not None and len(catalog) == 0:
            catalog = None
    return table, meta, catalog


# ------------------------------------------------------------ formatting

# dimensions that format_quantity scales (ms, us, GB, ...); the others print as a number + unit
_SCALED = {"bytes", "bandwidth", "time", "frequency", "power", "energy", "flop_rate", "flops"}
# metric-name suffixes -> dimension (SI inside: names carry their unit)
_SUFFIX_DIM = [
    ("_bytes_per_s", "bandwidth"), ("_flop_per_s", "flop_rate"), ("_flops", "flops"),
    ("_mm2", "area"), ("_bytes", "bytes"), ("_hz", "frequency"), ("_usd", "money"),
    ("_s", "time"), ("_w", "power"), ("_j", "energy"),
]
_UNIT_OF_DIM = {"area": "mm^2", "money": "$", "throughput": "/s", "power_density": "W/mm^2", "length": "mm"}


# unit symbols that name a scaled dimension exactly (others, e.g. 'tokens/s', stay as written)
_CANONICAL = {
    "s": "time", "B": "bytes", "byte": "bytes", "bytes": "bytes", "B/s": "bandwidth", "bytes/s": "bandwidth",
    "Hz": "frequency", "W": "power", "J": "energy", "FLOP/s": "flop_rate", "flop/s": "flop_rate",
    "FLOPS": "flop_rate", "FLOP": "flops", "flop": "flops", "FLOPs": "flops", "mm^2": "area", "$": "money",
}


def _dimension(unit: str | None) -> tuple[str | None, str]:
    """A unit ('s', 'mm^2', 'bytes', 'Hz', 'tokens/s') or a dimension name -> (dimension or None, label)."""
    if not unit or not isinstance(unit, str) or unit.strip() in ("1", "-", "dimensionless"):
        return None, ""
    unit = unit.strip()
    if unit in DIMENSIONS:
        return unit, _UNIT_OF_DIM.get(unit, unit)
    return _CANONICAL.get(unit), unit


def _num(v: float, digits: int = 4) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}" if abs(int(v)) >= 10_000 else str(int(v))
    v = float(v)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}" if abs(v) >= 10_000 else str(int(v))
    if 1e4 <= abs(v) < 1e9:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def format_value(value: Any, unit: str | None = None, digits: int = 4) -> str:
    """One value for people: 3.2e-3 's' -> '3.2 ms'; 814.0 'mm^2' -> '814 mm^2'; 'fp8' -> 'fp8'."""
    if value is None:
        return "-"
    if isinstance(value, (str, bytes)):
        return value if isinstance(value, str) else value.decode("utf-8", "replace")
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return _num(v)
    dim, label = _dimension(unit)
    if dim in _SCALED:  # (bytes: binary prefixes for round binary sizes, dse.units.format_quantity)
        return format_quantity(v, dim, digits)
    text = _num(value if isinstance(value, (int, np.integer)) else v, digits)
    return f"{text} {label}" if label else text


def _space_units(meta: Mapping) -> dict[str, str]:
    return {str(s.get("name")): s.get("unit") or "" for s in meta.get("space") or [] if isinstance(s, Mapping)}


def _column_unit(col: str, meta: Mapping) -> str:
    """The unit of a table column, from meta (objectives, constraints, space) or the metric's name."""
    if col.startswith("obj."):
        return next((str(o.get("unit") or "") for o in meta.get("objectives") or [] if o.get("name") == col[4:]), "")
    if col.startswith("con."):
        return next((str(c.get("unit") or "") for c in meta.get("constraints") or [] if c.get("name") == col[4:]), "")
    if col.startswith("p."):
        return str(_space_units(meta).get(col[2:], "") or "")
    if col.startswith("m."):
        name = col[2:].lower()
        for suffix, dim in _SUFFIX_DIM:
            if name.endswith(suffix):
                return dim
    return ""


def format_column(values: Sequence, col: str, meta: Mapping, digits: int = 4) -> list[str]:
    unit = _column_unit(col, meta)
    return [format_value(v, unit, digits) for v in values]


def column_label(col: str, meta: Mapping | None = None) -> str:
    """'obj.latency_per_token' -> 'latency_per_token'; 'p.hbm.stacks' -> 'hbm.stacks'."""
    for prefix in ("obj.", "con.", "p.", "m."):
        if col.startswith(prefix):
            return col[len(prefix):]
    return col


def _default_columns(df: pd.DataFrame, meta: Mapping) -> list[str]:
    cols = ["trial"] if "trial" in df.columns else []
    cols += _prefixed(df, "p.")
    cols += [f"obj.{n}" for n in objective_names(meta) if f"obj.{n}" in df.columns]
    cols += [c for c in ("m.bound",) if c in df.columns]
    return cols


def format_table(df: pd.DataFrame, meta: Mapping, *, columns: Sequence[str] | None = None,
                 max_rows: int | None = None, fmt: str = "text", digits: int = 4) -> str:
    """``df`` (rows of a results table) as a table for people.

    Columns default to trial, the parameters, the objectives and m.bound;
    prefixes are dropped from the headers and values carry their units
    (``3.2 ms``, ``80 GB``, ``814 mm^2``). ``fmt`` is 'text' (aligned
    columns), 'markdown' or 'html'. ``max_rows`` keeps the first rows and
    says how many were left out.
    """
    if fmt not in ("text", "markdown", "html"):
        raise SpecError(unknown_name("table format", fmt, ["text", "markdown", "html"]))
    cols = list(columns) if columns is not None else _default_columns(df, meta)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SpecError([unknown_name("column", c, list(df.columns)) for c in missing])
    shown = df if max_rows is None else df.head(max_rows)
    left = len(df) - len(shown)
    headers, cells = [], []
    for c in cols:
        dim, label = _dimension(_column_unit(c, meta))
        if dim in _SCALED or not label:
            headers.append(column_label(c, meta))
            cells.append(format_column(shown[c].tolist(), c, meta, digits))
        else:  # a unit that does not scale ('stacks', 'mm^2', '$'): once in the header, not in every cell
            headers.append(f"{column_label(c, meta)} [{label}]")
            cells.append([format_value(v, None, digits) for v in shown[c].tolist()])
    rows = [list(r) for r in zip(*cells)] if cells else []
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in cols]
    note = f"... {left} more row{'s' if left != 1 else ''}" if left > 0 else ""
    if fmt == "markdown":
        def md(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")
        out = ["| " + " | ".join(md(h) for h in headers) + " |",
               "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
        out += ["| " + " | ".join(md(v) for v in r) + " |" for r in rows]
        if note:
            out += ["", f"*{note}*"]
        return "\n".join(out)
    if fmt == "html":
        head = "".join(f"<th>{escape(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f'<td class="{"num" if n else "txt"}">{escape(v)}</td>' for v, n in zip(r, numeric))
            + "</tr>" for r in rows)
        foot = f'<p class="note">{escape(note)}</p>' if note else ""
        return f'<table class="results"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{foot}'
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(vals: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, widths, numeric)).rstrip()
    out = [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if note:
        out.append(note)
    return "\n".join(out)

