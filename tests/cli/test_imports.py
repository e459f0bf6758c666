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
TRANSPORT = {"socket", "http", "email", "ssl", "urllib.request"}
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
    # The usual line is read without argparse (trainhub.cli.slurm_submit.quick_args), which brings gettext.
    assert loaded & {"argparse", "gettext", "trainhub.cli.parsing", "trainhub.cli.slurm"} == set()
    # Its URL is read and quoted without urllib.parse (and the ipaddress module it imports).
    assert loaded & {"urllib", "ipaddress"} == set()


@pytest.mark.parametrize("command", [["sprio", "-l"], ["squeue"]])
def test_a_read_that_reaches_for_the_server_loads_neither_heavy_modules_nor_sbatch_grammar(tmp_path, command) -> None:
    statements = (f"from trainhub.cli.main import main\n"
                  f"assert main(['--url', 'http://127.0.0.1:9', 'slurm', *{command!r}, '--cluster', 'c'], "
                  f"environ={{'TRAINHUB_CONFIG': {str(tmp_path / 'c.json')!r}}}) == 1")
    loaded = _modules_after(statements)
    assert "socket" in loaded  # it did try to reach the server
    not_needed = NEVER | NO_COMMAND_NEEDS | {"trainhub.slurm.sbatch_argv", "http", "dataclasses", "datetime"}
    assert loaded & not_needed == set()


@pytest.mark.parametrize("command", ["srun", "salloc"])
def test_an_allocation_that_reaches_for_the_server_loads_nothing_it_does_not_use(tmp_path, command) -> None:
    """srun outside an allocation goes through salloc's path (trainhub.cli.salloc): until the allocation
    is granted it needs neither the step launcher nor what runs a command."""
    statements = (f"from trainhub.cli.main import main\n"
                  f"assert main(['--url', 'http://127.0.0.1:9', 'slurm', {command!r}, '--cluster', 'c', 'true'], "
                  f"environ={{'TRAINHUB_CONFIG': {str(tmp_path / 'c.json')!r}}}) == 1")
    loaded = _modules_after(statements)
    assert "socket" in loaded  # it did try to reach the server
    not_needed = NEVER | NO_COMMAND_NEEDS | {"trainhub.agent.srun", "subprocess", "tempfile", "threading", "shutil",
                                             "trainhub.slurm.jobenv", "dataclasses"}
    assert loaded & not_needed == set()


def test_a_granted_allocation_writes_its_srun_and_environment_without_pathlib_or_the_step_launcher(tmp_path) -> None:
    """What salloc and srun do once granted, before COMMAND runs: srun's wrapper on the PATH (it
    names trainhub.agent.srun's file, which the CLI does not import) and salloc's environment."""
    answer = {"clusterName": "c1", "hosts": ["a4-0"], "cpusPerNode": [1],
              "job": {"name": "sh", "account": "ml", "partition": "a4", "qos": "normal", "tasks": 1, "cpusPerTask": 1}}
    statements = (f"import os\nfrom trainhub.cli import salloc\n"
                  f"bin_dir = salloc.srun_directory({str(tmp_path)!r})\n"
                  f"env = salloc.command_environment({answer!r}, job_id=3, base_url='http://x', credential='k', "
                  f"bin_dir=bin_dir, given=[])\n"
                  f"assert env['SLURM_JOB_ID'] == '3' and env['PATH'].startswith(bin_dir)\n"
                  f"assert os.path.exists(salloc.SRUN_PROGRAM)\n"
                  f"assert salloc.SRUN_PROGRAM in open(bin_dir + '/srun').read()")
    loaded = _modules_after(statements)
    assert loaded & (NEVER | NO_COMMAND_NEEDS | {"trainhub.agent.srun", "argparse", "ssl", "urllib.request"}) == set()
