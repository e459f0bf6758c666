"""The test suite's settings: trainhub's, with a SECRET_KEY set (trainhub.settings refuses to
start without one unless DEBUG is on). Set in the environment so that the processes tests start
(gunicorn, benchmarks) inherit it."""

import os

os.environ.setdefault("SECRET_KEY", "trainhub-test-suite-key-not-secret-" + "x" * 20)

from trainhub.settings import *  # noqa: E402,F403

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not Django's shared in-memory database: a live server shares an in-memory
    # database's one connection between its request threads and the test's thread, and two
    # agents' requests at once interleave statements on it ("cannot release savepoint - SQL
    # statements in progress"). With a file each thread has its own connection, as web,
    # worker and agents do under `make run`.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405
