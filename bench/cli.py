"""The CLI as its user waits for it: how long a command takes to start, and `trainhub slurm sbatch`
called from a shell loop, the way scripts submit to real Slurm.

``cli_startup`` (no database): the median of N runs each of ``trainhub --help`` and
``trainhub slurm sbatch --help``, wall and CPU time, beside ``python -c pass`` - the interpreter's own
start-up in the same environment, which no change to trainhub removes. Target: every command under
50 ms.

``cli_sbatch_loop``: gunicorn started as the REST benchmark starts it (bench.environment.start_gunicorn)
on the Slurm cluster of the ``slurm_pages`` benchmark (its nodes drained, so every job stays pending
and no pass starts one), then one bash loop of 100 ``trainhub slurm sbatch ... --wrap hostname`` calls.
Beside it: the same 100 submissions sent from this process (the CLI's own HTTP client, a new
connection each, as every CLI call opens one), which is the server's share of each call, and a bash loop
of 100 ``python -c pass``, the most any Python command can reach. Target: at least 20 jobs/s.

Both run the console script installed next to this Python (``python -m trainhub.cli.main`` where
there is none) with PYTHONPATH set to this checkout, so they time this checkout's code, and with
bytecode cached in a temporary PYTHONPYCACHEPREFIX - as an installed CLI has its .pyc files - even
where PYTHONDONTWRITEBYTECODE is set. The first run of each command, which writes that cache, is not
counted. Nothing here asserts on a time.
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.environment import REPO_ROOT, free_port, start_gunicorn
from bench.report import Column, Section
from bench.scheduler_pass import QUICK, Sizes
from bench.slurm_submit import SBATCH_ARGS, sbatch_target
from bench.submission import _children, _cpu_of, _cpu_spent, _DatabaseCpu  # the REST benchmark's CPU readings

TARGET_STARTUP_MS = 50
TARGET_LOOP_JOBS_PER_SECOND = 20
LOOP_CALLS = 100
STARTUP_COMMANDS = (("python -c pass", None), ("trainhub --help", ["--help"]),
                    ("trainhub slurm sbatch --help", ["slurm", "sbatch", "--help"]))


def _cli_command() -> list[str]:
    script = Path(sys.executable).with_name("trainhub")
    return [str(script)] if script.exists() else [sys.executable, "-m", "trainhub.cli.main"]


def _cli_environment(cache_dir: str, **extra: str) -> dict[str, str]:
    environ = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), environ.get("PYTHONPATH")]))
    environ["PYTHONPYCACHEPREFIX"] = cache_dir
    return {**environ, **extra}


def _run(argv: list[str], environ: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user + system time) of one run of ``argv``."""
    cpu = _children_cpu()
    begun = time.perf_counter()
    run = subprocess.run(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # noqa: S603
    wall = time.perf_counter() - begun
    if run.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {run.returncode}: {run.stderr[-500:]}")
    return wall, _children_cpu() - cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_cli_startup(sizes: Sizes) -> Section:
    runs = 7 if sizes == QUICK else 21
    cli = _cli_command()
    cache_dir = tempfile.mkdtemp(prefix="trainhub-bench-pycache-")
    environ = _cli_environment(cache_dir, TRAINHUB_CONFIG=os.path.join(cache_dir, "no-config.json"))
    rows = []
    try:
        for label, argv in STARTUP_COMMANDS:
            command = [sys.executable, "-c", "pass"] if argv is None else [*cli, *argv]
            _run(command, environ)  # writes the bytecode cache; not counted
            times = [_run(command, environ) for _ in range(runs)]
            walls, cpus = [wall for wall, _ in times], [cpu for _, cpu in times]
            rows.append({"command": label, "runs": runs, "median_ms": statistics.median(walls) * 1000,
                         "best_ms": min(walls) * 1000, "cpu_median_ms": statistics.median(cpus) * 1000})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    interpreter = rows[0]["median_ms"]
    for row in rows[1:]:
        row["over_interpreter_ms"] = row["median_ms"] - interpreter
    section = Section(
        name="cli_startup",
        key=("command",),
        title=f"CLI start-up: median of {runs} runs of each command ({shlex.join(cli)})",
        columns=[Column("command", "command"), Column("median_ms", "median ms"), Column("best_ms", "best ms"),
                 Column("cpu_median_ms", "CPU median ms"), Column("over_interpreter_ms", "ms over python -c pass")],
        rows=rows,
        extra={"target_ms": TARGET_STARTUP_MS},
    )
    slowest = max(row["median_ms"] for row in rows[1:])
    section.notes += [
        f"target: every command under {TARGET_STARTUP_MS} ms - "
        + ("met" if slowest < TARGET_STARTUP_MS else f"NOT met (slowest median {slowest:.0f} ms)"),
        "python -c pass is the interpreter with this environment's site-packages (an editable install's "
        "finder included); the CLI's own cost is the difference",
        "bytecode cached in a temporary PYTHONPYCACHEPREFIX, as an installed CLI has its .pyc files; "
        "what each command imports: python -X importtime -m trainhub.cli.main ...",
    ]
    return section


def _loop_seconds(command: list[str], environ: dict[str, str], calls: int) -> tuple[float, float]:
    """Wall and CPU seconds (bash's and every command's) of one bash loop running ``command``
    ``calls`` times; any failure stops it."""
    script = f"for i in $(seq {calls}); do {shlex.join(command)} >/dev/null || exit 1; done"
    cpu = _children_cpu()
    begun = time.perf_counter()
    run = subprocess.run(["bash", "-c", script], env=environ, capture_output=True, text=True)  # noqa: S603
    elapsed = time.perf_counter() - begun
    if run.returncode != 0:
        raise RuntimeError(f"the loop of {shlex.join(command)} failed: {run.stderr[-1000:]}")
    return elapsed, _children_cpu() - cpu


def bench_cli_sbatch_loop(sizes: Sizes) -> Section:
    from django.db import connection

    from trainhub.cli.client import TrainhubClient, resource_path
    from trainhub.iam.services import api_token_rotate
    from trainhub.slurm.models import SlurmJob
    from trainhub.slurm.services.clusters import cluster_delete

    calls = 20 if sizes == QUICK else LOOP_CALLS
    cluster, admin, _ = sbatch_target(dt.datetime.now(dt.UTC))
    token = api_token_rotate(user=admin).key  # only digests are stored: a fresh token to send
    project, location, cluster_id = cluster.project.project_id, cluster.location, cluster.cluster_id
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cache_dir = tempfile.mkdtemp(prefix="trainhub-bench-pycache-")
    environ = _cli_environment(cache_dir, TRAINHUB_URL=url, TRAINHUB_TOKEN=token, TRAINHUB_PROJECT=project,
                               TRAINHUB_CONFIG=os.path.join(cache_dir, "no-config.json"))
    sbatch = [*_cli_command(), "slurm", "sbatch", "--region", location, "--cluster", cluster_id, *SBATCH_ARGS]
    connection.close()  # gunicorn opens its own
    server = start_gunicorn(port)
    try:
        client = TrainhubClient(url, token, project)
        path = resource_path(project, location, "slurmClusters", cluster_id, "/jobs")
        body = {"sbatchArgs": SBATCH_ARGS}
        for _ in range(5):  # warm-up: gunicorn's workers import and connect on their first requests
            client.post(path, body)
        _loop_seconds(sbatch[:-2] + ["--wrap", "true"], environ, 3)  # and the bytecode cache
        begun = time.perf_counter()
        for _ in range(calls):
            client.post(path, body)
        in_process = time.perf_counter() - begun
        before = SlurmJob.objects.filter(cluster=cluster).count()
        server_pids = [server.pid, *_children(server.pid)]
        server_before, database = _cpu_of(server_pids), _DatabaseCpu()
        database.start()
        loop, loop_cpu = _loop_seconds(sbatch, environ, calls)
        server_cpu = _cpu_spent(server_before, _cpu_of(server_pids)) + database.spent()
        submitted = SlurmJob.objects.filter(cluster=cluster).count() - before
        interpreter, interpreter_cpu = _loop_seconds([sys.executable, "-c", "pass"], environ, calls)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(cache_dir, ignore_errors=True)
    cluster_delete(cluster=cluster)
    row = {"calls": calls, "seconds": loop, "jobs_per_second": calls / loop, "ms_per_call": loop / calls * 1000,
           "cli_cpu_ms_per_call": loop_cpu / calls * 1000, "server_cpu_ms_per_job": server_cpu / calls * 1000,
           "server_ms_per_job": in_process / calls * 1000,
           "python_pass_per_second": calls / interpreter, "python_pass_cpu_ms": interpreter_cpu / calls * 1000,
           "submitted": submitted}
    row["cli_ms_per_call"] = row["ms_per_call"] - row["server_ms_per_job"]
    # The loop runs one call at a time: on an idle machine a call takes about the CPU time of both sides.
    row["idle_estimate_jobs_per_second"] = 1000 / (row["cli_cpu_ms_per_call"] + row["server_cpu_ms_per_job"])
    section = Section(
        name="cli_sbatch_loop",
        key=("calls",),
        title=f"`trainhub slurm sbatch` in a bash loop: {calls} calls against gunicorn",
        columns=[Column("calls", "calls"), Column("seconds", "s"), Column("jobs_per_second", "jobs/s"),
                 Column("ms_per_call", "ms/call"), Column("server_ms_per_job", "in-process client ms/job"),
                 Column("cli_ms_per_call", "CLI start-up ms/call"), Column("cli_cpu_ms_per_call", "CLI CPU ms/call"),
                 Column("server_cpu_ms_per_job", "server CPU ms/job"),
                 Column("idle_estimate_jobs_per_second", "CPU-bound jobs/s"),
                 Column("python_pass_per_second", "python -c pass loop /s"),
                 Column("python_pass_cpu_ms", "python -c pass CPU ms")],
        rows=[row],
        extra={"target_jobs_per_second": TARGET_LOOP_JOBS_PER_SECOND},
    )
    section.notes += [
        f"target: at least {TARGET_LOOP_JOBS_PER_SECOND} jobs/s - "
        + ("met" if row["jobs_per_second"] >= TARGET_LOOP_JOBS_PER_SECOND else "NOT met"),
        f"each call: {shlex.join(sbatch[-len(SBATCH_ARGS) - 4:])}; {submitted} jobs stored (every node drained: "
        "they stay pending)",
        "in-process client: the same submissions from this process with the CLI's HTTP client, a new connection "
        "each - the server's and the network's share of a call; CLI start-up ms/call = ms/call minus it",
        "python -c pass loop: the same bash loop around the bare interpreter, the ceiling for any Python command",
        "CLI CPU ms/call: user + system time of bash and the trainhub processes over the loop, per call; server "
        "CPU ms/job: gunicorn's (master and workers, /proc) and the database backends' (PostgreSQL only) over the "
        "same loop, as rest_submit reads them. Both are steadier than wall time on a busy machine; since the loop "
        "runs one call at a time, 1000 / their sum is about what an idle machine reaches (CPU-bound jobs/s)",
    ]
    if connection.vendor == "sqlite":
        section.notes.append("database: SQLite (DATABASE_URL not set); set DATABASE_URL to a throwaway PostgreSQL "
                             "database for the deployed figure")
    return section
