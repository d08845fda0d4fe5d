"""Suite-wide test settings.

Hypothesis: no per-example deadline (its default fails an example that takes over 200 ms of wall time, which a
loaded machine decides, not the code: issue 21 item 7). A test that sets its own ``deadline`` keeps it.
``computed_once``: a costly value computed once per session, whatever the xdist workers.

Ctrl-C: a test run started in the background by a shell without job control (``make test &`` in a script, a CI
runner's ``sh -c``) inherits SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt handler, in
the workers nor in the ``dse`` processes they start (an ignored signal stays ignored across exec): the tests of
Ctrl-C (a study sent SIGINT, a solver that holds one) then waited for their hang cap and failed. The suite
restores Python's own handler, whose processes then start with SIGINT's default.
"""

import fcntl
import os
import pickle
import signal

import pytest
from hypothesis import settings

settings.register_profile("dse", deadline=None)
settings.load_profile("dse")

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def computed_once(tmp_path_factory):
    """``computed_once(key, compute)``: ``compute()``'s value, computed once per test session and shared by every
    xdist worker of the session (pickled into the session's temp folder, under a lock: a worker that needs it
    while another computes it waits for it, it does not compute it again).

    For a costly module fixture (the serving fit: a minute of CPU): `pytest -n 2` gives a module's tests to both
    workers, and a worker that comes back to the module after another one sets its module fixtures up again
    (issue 21 item 7). The value must pickle; the tests must not change it.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' temp folders are siblings in the session's own folder

    def get(key: str, compute):
        path = root / f"computed-once-{key}.pickle"
        with open(root / f"computed-once-{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if path.exists():
                    return pickle.loads(path.read_bytes())
                value = compute()
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_bytes(pickle.dumps(value))
                os.replace(tmp, path)
                return value
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    return get
