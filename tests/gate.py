"""Pause a dse process at a known point of its search, so that a test signals it there on any machine load.

A crash test used to start ``dse run``, poll its storage and kill it "mid-study", hoping the poll was faster
than the run: on a loaded machine the run could finish first, or the poll's timeout decide the test (issue
21 item 7). A :class:`Gate` instead makes the run itself stop and say so. Its folder holds a
``sitecustomize.py`` that a child Python (and each worker it starts, which inherits the environment) imports
at startup: it wraps ``dse.study.problem.evaluate_points`` so that the process's ``stops[i]``-th call (a
batch, once the batches before it are stored) writes ``paused.<i>.<pid>`` and waits for ``go.<i>``. The test
waits for that file (bounded polling with a generous cap, which only stops a hung test: it never decides
pass or fail by speed), signals the process, or releases it with :meth:`Gate.release`.

Everything between two stops is free-running, so a kill after ``release(i)`` lands anywhere (an
evaluation, a tell, an append) until the next stop, and the test still knows how far the process can have
got: between stop ``i`` and stop ``i + 1``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ENV = "DSE_TEST_GATE"
CAP_S = 900.0  # a hung process or test: not a speed

SITE = '''\
import json, os, time
_cfg = json.loads(os.environ.get("DSE_TEST_GATE") or "null")
if _cfg:
    import dse.study.problem as _problem
    _real, _calls = _problem.evaluate_points, [0]

    def _gated(spec, params):
        _calls[0] += 1
        if _calls[0] in _cfg["stops"]:
            i = _cfg["stops"].index(_calls[0])
            go = os.path.join(_cfg["dir"], f"go.{i}")
            if not os.path.exists(go):
                mark = os.path.join(_cfg["dir"], f"paused.{i}.{os.getpid()}")
                open(mark + ".tmp", "w").close()
                os.replace(mark + ".tmp", mark)
                end = time.monotonic() + _cfg["cap"]
                while not os.path.exists(go) and time.monotonic() < end:
                    time.sleep(0.01)
        return _real(spec, params)

    _problem.evaluate_points = _gated
'''


class Gate:
    """Stops at the ``stops``-th calls of evaluate_points (1-based, per process); see the module doc."""

    def __init__(self, folder: Path, stops: list[int] | tuple[int, ...]):
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stops = [int(s) for s in stops]
        (self.dir / "sitecustomize.py").write_text(SITE)

    def env(self, base: dict | None = None) -> dict:
        """``base`` (default: this process's environment) with the gate on and its folder first on PYTHONPATH."""
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = str(self.dir) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[ENV] = json.dumps({"dir": str(self.dir), "stops": self.stops, "cap": CAP_S})
        return env

    def paused(self, i: int = 0) -> list[int]:
        """The pids of the processes waiting at stop ``i``."""
        return sorted(int(p.name.rsplit(".", 1)[1]) for p in self.dir.glob(f"paused.{i}.*") if not p.name.endswith(".tmp"))

    def wait(self, proc, i: int = 0, count: int = 1) -> list[int]:
        """Wait until ``count`` processes are paused at stop ``i``; fail at once if ``proc`` ends first."""
        end = time.monotonic() + CAP_S
        while time.monotonic() < end:
            pids = self.paused(i)
            if len(pids) >= count:
                return pids
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"the process ended (code {proc.returncode}) before stop {i} "
                                     f"(call {self.stops[i]} of evaluate_points):\n{(err or '')[-3000:]}")
            time.sleep(0.02)
        raise AssertionError(f"nothing reached stop {i} in {CAP_S:.0f} s: the process hangs")

    def release(self, i: int = 0) -> None:
        """Let every process paused at stop ``i`` (and any that reaches it later) go on."""
        (self.dir / f"go.{i}").touch()

    def release_all(self) -> None:
        for i in range(len(self.stops)):
            self.release(i)
