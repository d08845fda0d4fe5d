"""A throw-away PostgreSQL server for the distributed tests and the scale benchmark.

``server_url()`` answers, in order: ``$DSE_TEST_POSTGRES_URL`` (``.ci/run``
starts a server and sets it); else a server started here with ``initdb`` and
``pg_ctl`` from Debian's ``postgresql`` package (data folder in a temp
folder, listening on 127.0.0.1 only, trust authentication, stopped at exit);
else ``(None, reason)``, which the tests turn into a visible skip.
``fresh_database(url)`` creates an empty database on that server for one test.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

ENV = "DSE_TEST_POSTGRES_URL"
_started: dict = {}


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name)
                  if Path(d).parent.name.isdigit() else 0)
    for d in reversed(dirs):
        if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the 'postgres' user then."""
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root without runuser: cannot start PostgreSQL as the postgres user")
    return [runuser, "-u", "postgres", "--", *cmd]


def start_server() -> str:
    """Start a temporary server; return its admin URL (stopped and removed at interpreter exit)."""
    pg = _pg_bin()
    if pg is None:
        raise RuntimeError("PostgreSQL is not installed (initdb/pg_ctl not found; "
                           "Debian: apt-get install postgresql)")
    import psycopg2  # noqa: F401  - the driver is needed to use the server at all

    root = Path(tempfile.mkdtemp(prefix="dse-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    os.chmod(root, 0o755)
    port = _free_port()
    run = dict(check=True, capture_output=True, text=True, timeout=120)
    subprocess.run(_as_server_user([str(pg / "initdb"), "-D", str(data), "-A", "trust", "-U", "dse", "-E", "UTF8",
                                    "--no-sync", "--no-instructions"]), **run)
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c max_connections=200"
    subprocess.run(_as_server_user([str(pg / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"),
                                    "-w", "-t", "60", "start"]), **run)

    def stop():
        subprocess.run(_as_server_user([str(pg / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql+psycopg2://dse@127.0.0.1:{port}/postgres"


def server_url() -> tuple[str | None, str]:
    """(admin URL, '') or (None, why there is no server)."""
    url = os.environ.get(ENV)
    if url:
        return url, ""
    if "url" in _started:
        return _started["url"], ""
    if "reason" in _started:
        return None, _started["reason"]
    try:
        _started["url"] = start_server()
        return _started["url"], ""
    except ImportError:
        _started["reason"] = f"psycopg2 is not installed (pip install -e '.[postgres]'), and {ENV} is not set"
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", "") or ""
        _started["reason"] = f"no PostgreSQL server: {ENV} is not set and none could be started here: {e} {detail}".strip()
    return None, _started["reason"]


def fresh_database(admin_url: str) -> str:
    """A new empty database on the server of ``admin_url``; returns its URL."""
    import psycopg2
    from sqlalchemy.engine import make_url

    u = make_url(admin_url)
    name = f"dse_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(host=u.host, port=u.port, user=u.username, password=u.password,
                            dbname=u.database or "postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()
    return u.set(database=name).render_as_string(hide_password=False)
