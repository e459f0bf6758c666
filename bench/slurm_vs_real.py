"""Real Slurm and trainhub in one run, what a Slurm user waits for (issue 21): ``sbatch`` from 1 and
from 2 submitters, and ``sprio``, ``sprio -l`` and ``squeue`` over a queue of N pending jobs (10,000;
1,000 with --quick).

Real Slurm is the slurm-harness cluster (``../shared/tools/slurm-harness/``: Slurm 22.05, 4 nodes),
found through ``${TMPDIR:-/tmp}/slurm-harness.current``; start it fresh (``./start.sh``) before the
run, since finished job records slow it down. Its nodes are drained for the run (every job stays
pending, and eligible, so sprio lists it) and resumed after; every job the run submitted is cancelled.
Submissions are shell loops of ``sbatch --wrap true`` run as the harness's users alice and bob (two
loops at once for 2 submitters); the queue is then filled to N with the same loops, untimed. Each
command's time is the median wall time of 5 runs, output to /dev/null.

The sbatch figures are the median of 3 rounds (1 with --quick), each a real and a trainhub run for 1
and for 2 submitters, the sides alternated and their order swapped every other round: on a shared
machine the load drifts within minutes, and measuring one side after the other put the whole drift
on the ratio. The harness settles after each of its rounds (slurmdbd and MariaDB record the jobs
after sbatch has answered); every round's figure is printed in the notes.

trainhub's side is the ``slurm_submit`` cluster (the seed's cluster on drained simulated nodes):
sbatch over REST from 1 and 2 client processes (bench.submission.http_run against the web tier, as
``slurm_submit`` measures), then N pending jobs with their priorities computed by a scheduler pass,
and ``GET .../sprio``, ``.../sprio?long=true`` and ``.../squeue`` over HTTP, one kept-alive
connection, 5 timed requests each; then ``trainhub slurm sprio|squeue`` from the CLI (its whole run,
start-up included; the CLI as users install it, bench.cli.cli_installs), median of 5 once every
gunicorn worker has answered it untimed. Without the harness, trainhub's side is printed alone and
the notes say real Slurm was not available. The ratio is "how many times trainhub is faster" (> 1:
trainhub wins). Nothing here asserts on a time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from bench.cli import _children_cpu, cli_installs
from bench.environment import free_port, load_average, start_web
from bench.report import Column, Section
from bench.scheduler_pass import QUICK, Sizes
from bench.slurm_submit import SBATCH_ARGS, sbatch_target
from bench.submission import _cpu_of, _cpu_spent, _request_bytes, http_run

RUNS = 5
#: sbatch rounds of each side in a full run (bench_slurm_vs_real: alternated; one in a quick run).
ROUNDS = 3
CLIENTS = (1, 2)
SUBMITTERS = ("alice", "bob")
#: The harness's partition and one account each submitter belongs to (start.sh).
HARNESS_SBATCH = {"alice": "-A physics -p batch", "bob": "-A bio -p batch"}
READS = (("sprio", "sprio", {}), ("sprio -l", "sprio", {"long": "true"}), ("squeue", "squeue", {}))


def harness_environment() -> dict[str, str] | None:
    """The environment that reaches the running harness cluster, or None when none answers."""
    pointer = Path(os.environ.get("TMPDIR", "/tmp")) / "slurm-harness.current"
    try:
        env_file = Path(pointer.read_text().strip()) / "env.sh"
        exported = dict(line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines()
                        if line.startswith("export "))
    except (OSError, ValueError):
        return None
    environ = {**os.environ, **{name: value.strip("'\"") for name, value in exported.items()}}
    if not Path(environ.get("SLURM_CONF", "")).is_file():  # a purged state dir
        return None
    try:
        answered = subprocess.run(["scontrol", "ping"], env=environ, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return environ if answered.returncode == 0 and b"UP" in answered.stdout else None


def _as_user(user: str, script: str, environ: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(["runuser", "-u", user, "--", "bash", "-c", script], env=environ, cwd="/tmp",  # noqa: S603
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _sbatch_loops(environ: dict[str, str], counts: dict[str, int]) -> float:
    """Each user's shell loop of sbatch calls, all at once; the seconds until the last ends."""
    begun = time.perf_counter()
    loops = [_as_user(user, f"for i in $(seq {count}); do sbatch {HARNESS_SBATCH[user]} -J bench "
                            f"--wrap true >/dev/null || exit 1; done", environ) for user, count in counts.items()]
    errors = [loop.communicate()[1].decode().strip() for loop in loops]
    elapsed = time.perf_counter() - begun
    failed = [error for loop, error in zip(loops, errors, strict=True) if loop.returncode != 0]
    if failed:
        raise RuntimeError(f"sbatch on the harness failed: {failed[0][-300:]}")
    return elapsed


def _median_wall(argv: list[str], environ: dict[str, str], servers: list[int]) -> tuple[float, float]:
    """The median wall seconds of RUNS runs of ``argv``, and the median CPU seconds each spent: the
    command's own and that of the ``servers`` that answered it (slurmctld; gunicorn and its workers),
    which the other work on a shared machine inflates far less than the wall time."""
    times, cpu = [], []
    for _ in range(RUNS):
        children, before = _children_cpu(), _cpu_of(servers)
        begun = time.perf_counter()
        subprocess.run(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)  # noqa: S603
        times.append(time.perf_counter() - begun)
        cpu.append(_children_cpu() - children + _cpu_spent(before, _cpu_of(servers)))
    return statistics.median(times), statistics.median(cpu)


def _harness_pids(environ: dict[str, str], *names: str) -> list[int]:
    """The harness's daemons of these names (all when none is named), from the PIDs start.sh recorded."""
    pids = (Path(environ.get("SLURMH_STATE", "")) / "pids").read_text().split("\n")
    return [int(pid) for name, _, pid in (line.partition(" ") for line in pids)
            if pid.strip() and (name in names or not names)]


def _slurmctld(environ: dict[str, str]) -> list[int]:
    return _harness_pids(environ, "slurmctld")


#: The harness counts as settled once its daemons use less than this share of a core.
SETTLED_CORE_SHARE = 0.05
SETTLE_LIMIT_SECONDS = 180


def harness_settled(environ: dict[str, str]) -> float:
    """Wait until the harness's daemons are idle again; the seconds waited.

    The real side ends by cancelling its 10,000 jobs: slurmctld, slurmdbd and MariaDB record every
    cancellation for a minute or more afterwards, on the cores trainhub's side is then measured on.
    Each second their CPU is read (``/proc``); below SETTLED_CORE_SHARE of a core they are done.
    """
    daemons = _harness_pids(environ)
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_LIMIT_SECONDS:
        before = _cpu_of(daemons)
        time.sleep(1.0)
        if _cpu_spent(before, _cpu_of(daemons)) < SETTLED_CORE_SHARE:
            break
    return time.monotonic() - started


@contextmanager
def drained(environ: dict[str, str]) -> Iterator[None]:
    """The harness's nodes drained (every job stays pending, and eligible, so sprio lists it); on the
    way out every job of the submitters cancelled and the nodes resumed."""
    nodes = f"gpu[1-{environ.get('SLURMH_NODES', '4')}]"
    subprocess.run(["scontrol", "update", f"nodename={nodes}", "state=drain", "reason=trainhub-bench"], env=environ,
                   check=True, capture_output=True)
    try:
        yield
    finally:
        for user in SUBMITTERS:
            subprocess.run(["scancel", "-u", user], env=environ, check=False, capture_output=True)
        subprocess.run(["scontrol", "update", f"nodename={nodes}", "state=resume"], env=environ, check=False,
                       capture_output=True)


def _real_sbatch(environ: dict[str, str], clients: int, submissions: int) -> float:
    """Real sbatch/s from ``clients`` shell loops (alice's, then bob's too) sending ``submissions`` in all."""
    share = submissions // clients
    return clients * share / _sbatch_loops(environ, dict.fromkeys(SUBMITTERS[:clients], share))


def _real_reads(environ: dict[str, str], queued: int, pending: int) -> dict[str, float]:
    """The queue filled to ``pending`` (``queued`` are there), then each read's median wall and CPU."""
    left = max(pending - queued, 0)
    _sbatch_loops(environ, {"alice": left // 2, "bob": left - left // 2})
    servers, figures = _slurmctld(environ), {}
    for what, command, params in READS:
        figures[what], figures[f"{what} CPU"] = _median_wall([command, *(["-l"] if params else [])], environ, servers)
    return figures


def _sbatch_row(clients: int) -> str:
    return f"sbatch, {clients} submitter{'s' if clients > 1 else ''}"


def _get(path: str, token: str, params: dict[str, str]) -> bytes:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    request = _request_bytes(path + (f"?{query}" if query else ""), token, b"")
    return request.replace(b"POST ", b"GET ", 1)


def _trainhub_sbatch(post: bytes, clients: int, submissions: int) -> float:
    """trainhub's sbatch/s over REST from ``clients`` client processes sending ``submissions`` in all."""
    share = submissions // clients
    return clients * share / http_run([[post] * share for _ in range(clients)], warm_up=20).elapsed


def _trainhub_reads(cluster, token: str, jobs_path: str, pending: int, now: dt.datetime) -> tuple[dict[str, float],
                                                                                                   list[str]]:
    """The sbatch rounds' jobs gone, ``pending`` jobs queued with their priorities computed by a pass,
    then each read over HTTP and from the CLI."""
    from trainhub.slurm.models import SlurmJob
    from trainhub.slurm.services.passes import cluster_pass

    from bench.slurm_pages import USERS, slurm_queue

    SlurmJob.objects.filter(cluster=cluster).delete()
    slurm_queue(cluster, [f"user{index}" for index in range(USERS)], pending, now)
    cluster_pass(cluster=cluster, now=now)
    base, figures = jobs_path.removesuffix("/jobs"), {}
    for what, report, params in READS:
        run = http_run([[_get(f"{base}/{report}", token, params)] * (RUNS + 1)], warm_up=1)
        figures[f"{what} over HTTP"] = statistics.median(run.latencies)
        figures[f"{what} over HTTP CPU"] = run.server_cpu / len(run.latencies)
    return figures, _cli_reads(cluster, token, figures)


def _sbatch_rounds(environ: dict[str, str] | None, post: bytes, submissions: int,
                   rounds: int) -> dict[tuple[str, int], list[float]]:
    """sbatch/s by (side, clients), ``rounds`` of each, the sides alternated within a round and their
    order swapped every other round, so the machine's drifting load falls on both alike. After each
    real round the harness settles first (slurmdbd and MariaDB record the submissions after sbatch
    has answered, on the cores trainhub is measured on next)."""
    rates: dict[tuple[str, int], list[float]] = {}
    for round_number in range(rounds):
        for clients in CLIENTS:
            sides = ("real", "trainhub") if environ else ("trainhub",)
            for side in sides if round_number % 2 == 0 else reversed(sides):
                if side == "real":
                    rate = _real_sbatch(environ, clients, submissions)
                    harness_settled(environ)
                else:
                    rate = _trainhub_sbatch(post, clients, submissions)
                rates.setdefault((side, clients), []).append(rate)
    return rates


def _warm_every_worker(argv: list[str], environ: dict[str, str], workers: list[int]) -> None:
    """Run ``argv`` untimed until every gunicorn worker has answered it once, at most 4 runs a worker:
    each worker builds its first answer cold, and a new connection may reach either, so one warm-up
    left the timed runs a coin toss between a warm worker and a cold one. The worker that answered a
    run is the one whose CPU time grew the most."""
    answered: set[int] = set()
    for _ in range(4 * len(workers)):
        before = _cpu_of(workers)
        subprocess.run(argv, env=environ, stdout=subprocess.DEVNULL, check=True)  # noqa: S603
        after = _cpu_of(workers)
        answered.add(max(after, key=lambda pid: after[pid] - before.get(pid, 0.0)))
        if answered >= set(workers):
            return


def _cli_reads(cluster, token: str, figures: dict[str, float]) -> list[str]:
    """``trainhub slurm sprio [-l] | squeue --cluster bench`` against gunicorn: median wall of 5, from
    the CLI as users install it (bench.cli.cli_installs: a wheel, where pip can build one)."""
    port = free_port()
    server = start_web(port)
    try:
        with tempfile.TemporaryDirectory(prefix="trainhub-bench-cli-") as cache_dir:
            installs, notes = cli_installs(cache_dir, TRAINHUB_URL=f"http://127.0.0.1:{port}", TRAINHUB_TOKEN=token,
                                           TRAINHUB_PROJECT=cluster.project.project_id,
                                           TRAINHUB_CONFIG=os.path.join(cache_dir, "no-config.json"))
            install = installs[0]
            for what, report, params in READS:
                argv = [*install.command, "slurm", report, "--cluster", cluster.cluster_id,
                        *(["-l"] if params else [])]
                _warm_every_worker(argv, install.environ, server.workers())
                figures[f"{what} from the CLI"], figures[f"{what} from the CLI CPU"] = _median_wall(
                    argv, install.environ, server.pids())
    finally:
        server.terminate()
        server.wait(timeout=30)
    return [f"CLI: trainhub slurm sprio|squeue --cluster {cluster.cluster_id} ({install.label} install; start-up "
            "included)", *notes]


def bench_slurm_vs_real(sizes: Sizes) -> Section:
    from trainhub.iam.services import api_token_rotate
    from trainhub.slurm.services.clusters import cluster_delete

    submissions, pending = (200, 1_000) if sizes == QUICK else (1_000, 10_000)
    rounds = 1 if sizes == QUICK else ROUNDS
    load_before = load_average()
    environ = harness_environment()
    now = dt.datetime.now(dt.UTC)
    cluster, admin, jobs_path = sbatch_target(now)
    token = api_token_rotate(user=admin).key
    post = _request_bytes(jobs_path, token, json.dumps({"sbatchArgs": SBATCH_ARGS}).encode())
    real: dict[str, float] = {}
    with drained(environ) if environ else nullcontext():
        rates = _sbatch_rounds(environ, post, submissions, rounds)
        if environ:
            real = _real_reads(environ, rounds * 2 * submissions, pending)
    settle_seconds = harness_settled(environ) if environ else 0.0
    ours, notes = _trainhub_reads(cluster, token, jobs_path, pending, now)
    cluster_delete(cluster=cluster)
    for (side, clients), measured in rates.items():
        (real if side == "real" else ours)[_sbatch_row(clients)] = statistics.median(measured)
    rows = []
    for what, unit in (*((_sbatch_row(clients), "jobs/s") for clients in CLIENTS),
                       *((read, "s") for read, _, _ in READS)):
        real_value = real.get(what)
        for where in ((" over HTTP", " from the CLI") if unit == "s" else ("",)):
            value = ours[what + where]
            faster = None if real_value is None else (value / real_value if unit == "jobs/s" else real_value / value)
            rows.append({"what": what + where, "unit": unit, "real_slurm": real_value, "trainhub": value,
                         "trainhub_faster": faster, "real_slurm_cpu": real.get(f"{what} CPU"),
                         "trainhub_cpu": ours.get(f"{what}{where} CPU")})
    section = Section(
        name="slurm_vs_real",
        key=("what",),
        title=f"trainhub beside real Slurm: sbatch ({submissions:,} jobs) and reads over {pending:,} pending jobs",
        columns=[Column("what", "what"), Column("unit", "unit"), Column("real_slurm", "real Slurm"),
                 Column("trainhub", "trainhub"), Column("trainhub_faster", "trainhub faster (x)"),
                 Column("real_slurm_cpu", "real Slurm CPU s"), Column("trainhub_cpu", "trainhub CPU s")],
        rows=rows,
    )
    section.notes += [
        "real Slurm: the slurm-harness cluster (Slurm 22.05), sbatch loops as its users, commands' wall time"
        if environ else "real Slurm was not available (no slurm-harness cluster answered scontrol ping): "
                        "start ../shared/tools/slurm-harness/start.sh for the comparison",
        "trainhub: sbatch over REST (gunicorn, kept-alive connections), reads over HTTP and from the CLI",
        f"sbatch: the median of {rounds} round(s), the sides alternated within each (jobs/s, in order: "
        + "; ".join(f"{_sbatch_row(clients)} {side} " + ", ".join(f"{rate:.1f}" for rate in rates[side, clients])
                    for clients in CLIENTS for side in ("real", "trainhub") if (side, clients) in rates) + ")",
        *([f"trainhub's side started once the harness's daemons were idle again ({settle_seconds:.0f} s after "
           "its jobs were cancelled: slurmctld, slurmdbd and MariaDB record every cancellation)"] if environ else []),
        *notes,
        "CPU s (reads, median): real Slurm's command and slurmctld; trainhub over HTTP gunicorn's per request, "
        "from the CLI the command's and gunicorn's. Wall time on a shared machine follows its load; CPU much less",
        f"load average {load_before} before, {load_average()} after (2 submitters need 2 free cores)",
    ]
    return section
