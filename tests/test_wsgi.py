"""The WSGI entry point gunicorn loads (trainhub/wsgi.py)."""

import os
import subprocess
import sys


def test_loading_the_wsgi_application_freezes_its_start_up_objects_views_included():
    # A fresh interpreter: this test process has long since loaded Django its own way.
    probe = ("import gc, sys; import trainhub.wsgi; "
             "print(gc.get_freeze_count() > 100_000, 'trainhub.slurm.api.reports' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,  # noqa: S603
                            env={**os.environ, "DEBUG": "true"})
    assert answer.stdout.split() == ["True", "True"]
