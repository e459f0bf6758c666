"""Slurm fixtures: the seed's cluster document, pools for it, a staff admin, a cluster made from it."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connections

from trainhub.inventory.models import Executor
from trainhub.inventory.services import node_heartbeat, node_pool_ensure
from trainhub.slurm.demo import SEED_SLURM_SPEC

#: The seed's example cluster specification (orchestratorSpec.slurmSpec): its partition and login
#: pool, and its config block and scripts word for word (trainhub.slurm.demo keeps those).
SEED_SPEC = {"orchestratorSpec": {"slurmSpec": {"partitions": [{"id": "a4", "node_pool_ids": ["a4"]}],
                                                "login_node_pool_id": "login", **SEED_SLURM_SPEC}}}
CLUSTERS = "/v1/projects/alpha/locations/us-central1/slurmClusters"
#: Real Slurm 22.05.8 running fixtures/22.05/srun.sh (srun inside batch scripts).
SRUN_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun"
STEPS_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "steps"
#: Real Slurm 22.05.8 running fixtures/22.05/salloc.sh (salloc, srun inside it).
SALLOC_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "salloc"
#: Real Slurm 22.05.8 running fixtures/22.05/srun-alone.sh (srun outside an allocation, srun --pty).
SRUN_ALONE_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun-alone"
SRUN_DETAILS_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun-details"
#: Real Slurm 22.05.8 running fixtures/22.05/srun-abort.sh (two Ctrl-C to srun: alone, in sbatch, in salloc).
SRUN_ABORT_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun-abort"
#: Real Slurm 22.05.8 running fixtures/22.05/srun-timeout.sh (the time limit under a running srun step).
SRUN_TIMEOUT_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun-timeout"
#: Real Slurm 22.05.8 running fixtures/22.05/srun-vv.sh (srun -vv and -vvv, alone and in salloc).
SRUN_VV_FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun-vv"


def seed_spec() -> dict:
    return copy.deepcopy(SEED_SPEC)


def slurm_spec(body: dict) -> dict:
    return body["orchestratorSpec"]["slurmSpec"]


@pytest.fixture
def admin(cast):
    """alice, admin of alpha, is also a platform administrator (is_staff)."""
    cast["alice"].is_staff = True
    cast["alice"].save(update_fields=["is_staff"])
    return cast["alice"]


@pytest.fixture
def browser(client, cast):
    """browser("uma") -> the test client logged in as uma."""
    def login(name):
        client.force_login(cast[name])
        return client
    return login


@pytest.fixture
def slurm_pools(db, now):
    """a4: two B200x8 nodes (simulated), login: one n1-standard-4; agents alive."""
    pools = {
        "a4": node_pool_ensure(name="a4", machine_type="a4-highgpu-8g", node_count=2, executor=Executor.SIMULATED,
                               simulated_runtime_seconds=30),
        "login": node_pool_ensure(name="login", machine_type="n1-standard-4", node_count=1),
    }
    node_heartbeat(node_ids=[n.pk for pool in pools.values() for n in pool.nodes.all()], now=now)
    return pools


@pytest.fixture
def real_pools(slurm_pools):
    """The a4 nodes run real subprocesses (the agent runs bash on this host)."""
    slurm_pools["a4"].executor = Executor.SUBPROCESS
    slurm_pools["a4"].save(update_fields=["executor"])
    return slurm_pools


def run_until(agent, job, moment, done, limit=400, patience=60.0):
    """Tick ``agent`` (one or a group) until ``done(job)``, 50 ms of the agents' time a round.

    Gives up after ``limit`` rounds, but never before ``patience`` seconds of wall time: the job's
    real processes (bash, prolog scripts) start slowly on a loaded machine, rounds do not."""
    import time

    from trainhub.slurm.models import JobNode

    deadline = time.monotonic() + patience
    rounds = 0
    while rounds < limit or time.monotonic() < deadline:
        rounds += 1
        moment = moment + dt.timedelta(seconds=0.05)
        agent.tick(now=moment)
        job.refresh_from_db()
        if done(job):
            return moment
        time.sleep(0.02)
    raise AssertionError(f"job stuck in {job.state} ({list(JobNode.objects.filter(job=job).values('phase'))})")


def nodes_done(job) -> bool:
    from trainhub.slurm.models import JobNode, NodePhase

    return not JobNode.objects.filter(job=job).exclude(phase=NodePhase.DONE).exists()


@pytest.fixture
def cluster(admin, slurm_pools, now):
    """The seed's cluster, created by alice as c1."""
    from trainhub.slurm.services.clusters import cluster_create

    return cluster_create(project=admin.memberships.get().project, location="us-central1", cluster_id="c1",
                          body=seed_spec(), user=admin, now=now)


def make_job(cluster, *, user="uma", job_id=None, script="#!/bin/bash\necho hello\n", now=None, **fields):
    """A pending job written directly (tests of what happens after submission)."""
    from django.utils import timezone

    from trainhub.slurm.models import SlurmJob

    now = now or timezone.now()
    if job_id is None:
        cluster.refresh_from_db(fields=["next_job_id"])
        job_id = cluster.next_job_id
        cluster.next_job_id += 1
        cluster.save(update_fields=["next_job_id"])
    values = dict(name="job", user_name=user, account="ml", partition=cluster.default_partition, qos="normal",
                  script=script, work_dir=f"/home/{user}", submit_time=now, begin_time=now, accrue_time=now)
    values.update(fields)
    return SlurmJob.objects.create(cluster=cluster, job_id=job_id, **values)


def start_job(job, node_names, gpus_per_node=None, now=None, billing=1.0):
    """Allocate ``job`` on the named nodes as a scheduler pass would: its tasks in blocks, a CPU per
    task (cpus-per-task each) on every node."""
    from django.utils import timezone

    from trainhub.inventory.models import Node
    from trainhub.slurm.jobenv import tasks_per_node
    from trainhub.slurm.services.lifecycle import JobStart, NodeGrant, jobs_start

    gpus = job.gpus_per_node if gpus_per_node is None else gpus_per_node
    nodes = {node.name: node for node in Node.objects.filter(name__in=node_names)}
    counts = tasks_per_node(max(job.num_tasks, len(node_names)), len(node_names))
    grants = tuple(NodeGrant(nodes[name].pk, tuple(range(gpus)), count * job.cpus_per_task)
                   for name, count in zip(node_names, counts))
    started = jobs_start(starts=[JobStart(job.pk, grants, billing)], now=now or timezone.now())
    job.refresh_from_db()
    return started


@pytest.fixture
def accounts(cluster, now):
    """Account ml under root with uma and alice; account bio with bob (no trainhub login)."""
    from trainhub.slurm.services.accounting import account_add, user_add

    account_add(cluster=cluster, name="ml", actor="test", now=now)
    account_add(cluster=cluster, name="bio", actor="test", now=now)
    user_add(cluster=cluster, name="uma", accounts=["ml"], actor="test", now=now)
    user_add(cluster=cluster, name="alice", accounts=["ml"], actor="test", now=now)
    user_add(cluster=cluster, name="bob", accounts=["bio"], actor="test", now=now)
    return cluster


JOBS = f"{CLUSTERS}/c1/jobs"


def sbatch(api, user, *args, script=None):
    body = {"sbatchArgs": list(args)}
    if script is not None:
        body["script"] = script
    return api(user).post(JOBS, body, format="json")


def run_pass(cluster, now=None):
    """One scheduler pass of the cluster at ``now``, its nodes' agents alive then (tests step the
    scheduler; the on_commit requests for a pass do not run in tests)."""
    from django.utils import timezone

    from trainhub.inventory.models import Node
    from trainhub.slurm.services.passes import cluster_pass

    now = now or timezone.now()
    Node.objects.filter(dedicated_to=cluster.owner_key).update(last_heartbeat=now)
    return cluster_pass(cluster=cluster, now=now)


DAY = dt.timedelta(days=1)
#: batch_sched_delay: a pass this long after the main scheduler's last run runs it again (a node
#: resumed or a job submitted in between waits for it: scheduler.main_due).
SCHED_DELAY = dt.timedelta(seconds=3)


@pytest.fixture
def queue(accounts, cast, now):
    """Nodes drained so everything pends; usage uma 100, alice 0, bob 50 (reference 2.3's vector)."""
    from trainhub.inventory.models import Node, NodeState
    from trainhub.slurm.models import Association
    from trainhub.slurm.services.jobs import Submission, job_submit

    Node.objects.filter(name__startswith="a4").update(state=NodeState.DRAIN, state_reason="maintenance")
    for user, usage in (("uma", 100.0), ("alice", 0.0), ("bob", 50.0)):
        Association.objects.filter(cluster=accounts, user=user).update(raw_usage=usage, decay_usage=usage)
    jobs = {}
    for user in ("uma", "alice"):
        jobs[user] = job_submit(cluster=accounts, user=cast[user], now=now,
                                submission=Submission(argv=("--gres=gpu:8", "--wrap", "train")))
    jobs["bob"] = make_job(accounts, user="bob", account="bio", gpus_per_node=8, now=now, accrue_time=None)
    run_pass(accounts, now + DAY)
    return jobs


def database_thread(work: Callable[[], None]) -> threading.Thread:
    """A daemon thread, started, that runs ``work`` and then closes its own database connections: left
    open until collected, they keep the test database from being dropped when the run ends."""

    def run() -> None:
        try:
            work()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class SlurmCli:
    """``trainhub slurm COMMAND ...`` as uma against the live server, scheduler passes and the
    agents of a4-0 and a4-1 ticking meanwhile (real prolog, real step tasks)."""

    def __init__(self, accounts, agents, environ: dict[str, str], capfd):
        self.accounts = accounts
        self.agents = agents
        self.environ = environ
        self.capfd = capfd

    @contextlib.contextmanager
    def ticking(self):
        from django.utils import timezone

        stop = threading.Event()

        def tick():
            rounds = 0
            while not stop.wait(0.05):
                if rounds % 10 == 0:
                    run_pass(self.accounts)  # celery beat's passes
                self.agents.tick(now=timezone.now())
                rounds += 1

        ticker = database_thread(tick)
        try:
            yield
        finally:
            stop.set()
            ticker.join()

    def __call__(self, command: str, *argv: str) -> tuple[int, str, str]:
        """Run in this process: (exit status, stdout, stderr) of salloc's or srun's command and their
        own lines together (the command writes to the same descriptors)."""
        from trainhub.cli.main import main

        with self.ticking():
            code = main(["slurm", command, *argv], environ=self.environ)
        captured = self.capfd.readouterr()
        return code, captured.out, captured.err

    def on_terminal(self, command: str, *argv: str, react, environ: dict[str, str] | None = None,
                    rows: int = 24, cols: int = 80, patience: float = 120.0) -> tuple[int, bytes]:
        """Run as a process of its own on a new pseudo-terminal of ``rows`` x ``cols``, calling
        ``react(terminal_fd, output_so_far)`` as its output comes (to type into it); (exit status,
        every byte the terminal showed)."""
        import fcntl
        import os
        import pty
        import select
        import signal
        import struct
        import sys
        import termios
        import time

        pid, terminal = pty.fork()
        if pid == 0:  # the child: the CLI, on the terminal
            os.environ.update({**self.environ, **(environ or {})})
            os.execv(sys.executable, [sys.executable, "-m", "trainhub.cli.main", "slurm", command, *argv])
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        shown = b""
        give_up = time.monotonic() + patience
        with self.ticking():
            while True:
                if time.monotonic() > give_up:  # a hang fails the test rather than the suite
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    os.close(terminal)
                    raise AssertionError(f"still running after {patience} s; the terminal showed {shown!r}")
                react(terminal, shown)
                ready, _, _ = select.select([terminal], [], [], 0.05)
                if ready:
                    try:
                        chunk = os.read(terminal, 4096)
                    except OSError:  # EIO: the CLI and everything it started have ended
                        break
                    if not chunk:
                        break
                    shown += chunk
            _, status = os.waitpid(pid, 0)
        os.close(terminal)
        return os.waitstatus_to_exitcode(status), shown


@pytest.fixture
def slurm_cli_as_uma(live_server, accounts, real_pools, cast, tmp_path, capfd):
    """A SlurmCli logged in as uma; calling it runs in this process (see SlurmCli)."""
    from tests.agent.harness import agents_on
    from trainhub.cli.main import main

    environ = {"TRAINHUB_CONFIG": str(tmp_path / "uma.json"), "TRAINHUB_PROJECT": "alpha"}
    assert main(["auth", "login", "--url", live_server.url, "--username", "uma", "--password", "uma-password"],
                environ=environ) == 0
    capfd.readouterr()
    return SlurmCli(accounts, agents_on(tmp_path, srun_url=live_server.url), environ, capfd)
