"""The test suite's settings: trainhub's, with a SECRET_KEY set (trainhub.settings refuses to
start without one unless DEBUG is on). Set in the environment so that the processes tests start
(gunicorn, benchmarks) inherit it."""

import os

os.environ.setdefault("SECRET_KEY", "trainhub-test-suite-key-not-secret-" + "x" * 20)

from trainhub.settings import *  # noqa: E402,F403
