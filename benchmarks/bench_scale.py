"""Trials per second of the default study with 1, 2 and 4 worker processes, per storage.

    .venv/bin/python benchmarks/bench_scale.py                       # journal, SQLite, PostgreSQL (if any)
    .venv/bin/python benchmarks/bench_scale.py --trials 2000 --workers 1,2,4,8
    .venv/bin/python benchmarks/bench_scale.py --postgres postgresql+psycopg2://user:pass@host/db

Each cell is one ``run_study`` of studies/qwen3-8b-decode-chip.yaml (NSGA-II,
batch 200) into a fresh storage, timed end to end (worker start-up, the
search, the final load and the results table; no report files), and checked
to hold exactly the budget of COMPLETE trials. PostgreSQL: ``--postgres URL``
or ``$DSE_TEST_POSTGRES_URL`` (a fresh database is created on that server
for each cell), else a throw-away local server if Debian's ``postgresql`` is
installed (tests/scale/pgserver.py), else the column is skipped with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dse.study.distributed import SharedBudget  # noqa: E402
from dse.study import run_study  # noqa: E402
from dse.spec.study import load_study  # noqa: E402

DEFAULT = ROOT / "studies" / "qwen3-8b-decode-chip.yaml"


def _storage(kind: str, folder: Path, pg_url: str | None) -> str:
    if kind == "journal":
        return str(folder / "study.journal")
    if kind == "sqlite":
        return f"sqlite:///{folder / 'study.db'}"
    from tests.scale.pgserver import fresh_database

    return fresh_database(pg_url)


def one(kind: str, workers: int, trials: int, pg_url: str | None) -> tuple[float, float]:
    """(wall seconds, trials per second) of one run into a fresh storage."""
    name = load_study(DEFAULT).name
    with tempfile.TemporaryDirectory(prefix="dse-bench-") as d:
        folder = Path(d)
        url = _storage(kind, folder, pg_url)
        t0 = time.perf_counter()
        table = run_study(DEFAULT, trials=trials, workers=workers, storage=url, out=folder / "out", write=False)
        wall = time.perf_counter() - t0
        stored = SharedBudget(url, name, trials).complete()
        if len(table) != trials or stored != trials:
            raise SystemExit(f"{kind} x{workers}: {stored} trials stored, {len(table)} in the table, expected {trials}")
    return wall, trials / wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000, help="budget of each run (default 1000)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated (default 1,2,4)")
    ap.add_argument("--storages", default="journal,sqlite,postgresql")
    ap.add_argument("--postgres", help="PostgreSQL URL (default: $DSE_TEST_POSTGRES_URL or a local throw-away server)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    counts = [int(w) for w in args.workers.split(",")]
    kinds = [k.strip() for k in args.storages.split(",") if k.strip()]
    pg_url, skipped = args.postgres or os.environ.get("DSE_TEST_POSTGRES_URL"), {}
    if "postgresql" in kinds and not pg_url:
        from tests.scale.pgserver import server_url

        pg_url, reason = server_url()
        if pg_url is None:
            skipped["postgresql"] = reason
            kinds.remove("postgresql")
    print(f"default study, {args.trials} trials per run, NSGA-II batch 200, {os.cpu_count()} CPUs; "
          f"wall time end to end and trials/s")
    results: dict[tuple[str, int], tuple[float, float]] = {}
    for kind in kinds:
        for w in counts:
            results[kind, w] = one(kind, w, args.trials, pg_url)
            wall, rate = results[kind, w]
            print(f"  {kind:<10} workers={w}: {wall:7.1f} s  {rate:8.1f} trials/s", flush=True)
    print()
    head = f"| workers | " + " | ".join(f"{k} trials/s (s)" for k in kinds) + " |"
    print(head)
    print("|" + "---|" * (len(kinds) + 1))
    for w in counts:
        cells = [f"{results[k, w][1]:.0f} ({results[k, w][0]:.1f})" for k in kinds]
        print(f"| {w} | " + " | ".join(cells) + " |")
    for kind, reason in skipped.items():
        print(f"{kind}: skipped: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
