"""The CLI imports only what the command it runs uses (issue 21): never Django, Celery, Plotly,
requests or yaml, neither typing nor pathlib, and for `--help` not even the HTTP client. Each case
runs in a fresh interpreter. How long start-up takes is measured by `make bench` (bench/cli.py),
never asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trainhub

NEVER = {"django", "celery", "kombu", "plotly", "requests", "urllib3", "yaml", "redis", "rest_framework"}
#: What sending a request needs (http.client and the email package it parses headers with come only
#: with urllib.request, for https or a proxy): a command that sends nothing loads none of it.
TRANSPORT = {"socket", "_socket", "http", "email", "ssl", "urllib.request"}
#: Neither does argparse's help need shutil (and its zlib, bz2, lzma) when told the terminal's width.
HELP_NEEDS_NOT = TRANSPORT | {"shutil"}
#: What no command loads: typing (annotations are read by type checkers only) and pathlib (os.path's
#: strings) - 5 ms of start-up together.
NO_COMMAND_NEEDS = {"typing", "pathlib"}

REPORT = "import json, sys; print(json.dumps(sorted(sys.modules)))"
#: Where this trainhub is imported from (a checkout, or site-packages).
TRAINHUB_ROOT = str(Path(trainhub.__file__).parent.parent)


def _modules_after(statements: str) -> set[str]:
    """What a fresh interpreter has loaded after ``statements``. It runs without `site` (-S), so that
    .pth files load nothing (an editable install's finder loads pathlib, re and urllib.parse) and
    the CLI finds only the standard library and trainhub: importing anything else fails the run."""
    run = subprocess.run([sys.executable, "-S", "-c", f"{statements}\n{REPORT}"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": TRAINHUB_ROOT}, timeout=60, check=True)
    loaded = set(json.loads(run.stdout.splitlines()[-1]))
    return loaded | {name.split(".")[0] for name in loaded}


def test_importing_the_package_loads_neither_celery_nor_django() -> None:
    assert _modules_after("import trainhub") & (NEVER | TRANSPORT) == set()


def test_importing_the_cli_loads_no_heavy_module() -> None:
    assert _modules_after("import trainhub.cli.main") & (NEVER | TRANSPORT | NO_COMMAND_NEEDS) == set()


@pytest.mark.parametrize("argv", [["--help"], ["slurm", "sbatch", "--help"], ["ai", "custom-jobs", "create", "--help"],
                                  ["ai", "persistent-resources", "list", "--help"], ["auth", "--help"]])
def test_help_loads_no_heavy_module_and_no_http_client(argv: list[str]) -> None:
    loaded = _modules_after(f"import contextlib, io\nfrom trainhub.cli.main import main\n"
                            f"with contextlib.redirect_stdout(io.StringIO()): main({argv!r}, environ={{}})")
    assert loaded & (NEVER | HELP_NEEDS_NOT | NO_COMMAND_NEEDS) == set()


def test_an_sbatch_that_reaches_for_the_server_loads_no_heavy_module(tmp_path) -> None:
    statements = (f"from trainhub.cli.main import main\n"
                  f"assert main(['--url', 'http://127.0.0.1:9', 'slurm', 'sbatch', '--cluster', 'c', '-t', '5', "
                  f"'--wrap', 'hostname'], environ={{'TRAINHUB_CONFIG': {str(tmp_path / 'c.json')!r}}}) == 1")
    loaded = _modules_after(statements)
    assert "trainhub.slurm.sbatch_argv" in loaded  # it did read sbatch's grammar to find the script
    assert loaded & (NEVER | NO_COMMAND_NEEDS) == set()
    # The server parses the options' values: not sbatch's parsers, nor the dataclasses, inspect and
    # datetime they import (a third of a call's start-up in a shell loop).
    assert loaded & {"trainhub.slurm.sbatch", "trainhub.slurm.tres", "trainhub.slurm.timefmt", "dataclasses",
                     "inspect", "datetime"} == set()
    assert "trainhub.cli.worker_pool_spec" not in loaded  # custom jobs' spec parsers
    assert "http" not in loaded  # plain http:// goes out on a socket


@pytest.mark.parametrize("command", [["sprio", "-l"], ["squeue"]])
def test_a_read_that_reaches_for_the_server_loads_neither_heavy_modules_nor_sbatch_grammar(tmp_path, command) -> None:
    statements = (f"from trainhub.cli.main import main\n"
                  f"assert main(['--url', 'http://127.0.0.1:9', 'slurm', *{command!r}, '--cluster', 'c'], "
                  f"environ={{'TRAINHUB_CONFIG': {str(tmp_path / 'c.json')!r}}}) == 1")
    loaded = _modules_after(statements)
    assert "_socket" in loaded  # it did try to reach the server
    assert "socket" not in loaded  # on _socket: socket's enums cost 9 ms of a command's ~35 ms of CPU
    not_needed = NEVER | NO_COMMAND_NEEDS | {"trainhub.slurm.sbatch_argv", "http", "dataclasses", "datetime"}
    assert loaded & not_needed == set()
