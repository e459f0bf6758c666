"""salloc: an allocation without a batch script, whose command runs where salloc runs, kept alive by
salloc and relinquished with the command's exit code; Slurm 22.05's lines (fixtures/22.05/salloc)."""

import datetime as dt
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.slurm.conftest import CLUSTERS, SALLOC_FIXTURES, SRUN_ALONE_FIXTURES, SRUN_DETAILS_FIXTURES, run_pass
from trainhub.cli import salloc as salloc_cli
from trainhub.cli.srun import SRUN
from trainhub.slurm.jobenv import salloc_environment
from trainhub.slurm.models import JobNode, JobRun, JobState, NodePhase, SlurmJob
from trainhub.slurm.services.jobs import job_cancel
from trainhub.slurm.services.lifecycle import allocations_abandoned, job_node_prolog_finished
from trainhub.slurm.services.clusters import cluster_config_set
from trainhub.slurm.snapshot import load_cluster

ALLOCATIONS = f"{CLUSTERS}/c1/allocations"
JOBS = f"{CLUSTERS}/c1/jobs"


def fixture_lines(name: str | Path) -> list[str]:
    """A recorded salloc's (or srun's) stderr, without the harness's own noise and the recorder's
    ``rc=`` line; ``name`` in fixtures/22.05/salloc, or a path."""
    return [line for line in (SALLOC_FIXTURES / name).read_text().splitlines()
            if not line.startswith(("rc=", "slurmstepd-"))]


# The environment ------------------------------------------------------------------------------

def test_the_command_gets_sallocs_environment_byte_for_byte():
    """fixtures/22.05/salloc/salloc-3.txt: ``salloc -N2 --gres=gpu:1 -t 5 bash -c 'env | grep ^SLURM_ | sort'``
    (SLURM_CONF names the harness's slurm.conf: a trainhub cluster has no file for it)."""
    recorded = [line for line in (SALLOC_FIXTURES / "salloc-3.txt").read_text().splitlines()
                if not line.startswith("SLURM_CONF=")]
    env = salloc_environment(cluster_name="harness", job_id=3, job_name="interactive", account="physics",
                             partition="batch", qos="normal", hosts=["gpu1", "gpu2"], cpus_per_node=[1, 1],
                             num_tasks=2, submit_dir="/tmp/salloc-scenario.ywadHy", submit_host="vm")
    assert [f"{name}={value}" for name, value in sorted(env.items())] == recorded


#: What a recorded environment holds that a trainhub cluster has no value for (the harness's own
#: variables, its slurm.conf), and values of the recording's machine.
HARNESS_ONLY = ("SLURMH_", "SLURM_CONF=")
MACHINE_VALUES = ("SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST")


def slurm_variables(lines: list[str]) -> list[str]:
    """``NAME=value`` lines of Slurm's variables, sorted, the machine's values masked."""
    kept = []
    for line in sorted(lines):
        name, _, value = line.partition("=")
        if not name.startswith(("SLURM", "CUDA_", "GPU_")) or line.startswith(HARNESS_ONLY):
            continue
        kept.append(f"{name}=<{name}>" if name in MACHINE_VALUES else line)
    return kept


@pytest.mark.parametrize(("recorded", "argv", "hosts", "cpus", "tasks"), [
    ("salloc-9.txt", ["-n", "3"], ["gpu2"], [3], 3),
    ("salloc-10.txt", ["-N2", "--ntasks-per-node=2"], ["gpu1", "gpu2"], [2, 2], 4),
    ("../salloc/salloc-3.txt", ["-N2", "--gres=gpu:1", "-t", "5"], ["gpu1", "gpu2"], [1, 1], 2),
])
def test_sallocs_command_gets_the_tasks_asked_for_only_when_they_were(recorded, argv, hosts, cpus, tasks, tmp_path,
                                                                    monkeypatch):
    """fixtures/22.05/srun-details/salloc-9.txt, salloc-10.txt: ``salloc -n 3`` and ``salloc -N2
    --ntasks-per-node=2`` set SLURM_NTASKS and SLURM_NPROCS (and SLURM_NTASKS_PER_NODE), ``salloc -N2``
    neither (salloc/salloc-3.txt); through the CLI's own environment."""
    from trainhub.slurm.sbatch_argv import split_options

    for name in [name for name in os.environ if name.startswith("SLURM")]:
        monkeypatch.delenv(name)
    lines = (SRUN_DETAILS_FIXTURES / recorded).read_text().splitlines()
    job_id = int(next(line for line in lines if line.startswith("SLURM_JOB_ID=")).split("=")[1])
    answer = {"clusterName": "harness", "hosts": hosts, "cpusPerNode": cpus,
              "job": {"name": "interactive", "account": "physics", "partition": "batch", "qos": "normal",
                      "tasks": tasks, "cpusPerTask": 1}}
    env = salloc_cli.command_environment(answer, job_id=job_id, base_url="http://x", credential="k",
                                         bin_dir=str(tmp_path), given=split_options(argv)[0])
    assert slurm_variables([f"{name}={value}" for name, value in env.items()]) == slurm_variables(lines)


def test_sallocs_exit_status_is_the_commands_and_a_users_signal_is_no_failure():
    assert salloc_cli.exit_status(3) == (3, 0, 3)
    assert salloc_cli.exit_status(-signal.SIGHUP) == (0, signal.SIGHUP, 0)
    assert salloc_cli.exit_status(-signal.SIGKILL) == (0, signal.SIGKILL, 0)
    assert salloc_cli.exit_status(-signal.SIGSEGV) == (0, signal.SIGSEGV, 1)


# salloc's lines while it waits ----------------------------------------------------------------

class FakeAllocation:
    """The answers salloc's calls get, one per keep-alive; what it relinquished."""

    def __init__(self, answers):
        self.job_id = 8
        self.answers = list(answers)
        self.relinquished = []

    def keep_alive(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def relinquish(self, exit_code, signum, *, cancelled=False):
        self.relinquished.append((exit_code, signum, cancelled) if cancelled else (exit_code, signum))


def answer(state, ready=False):
    return {"job": {"state": state, "reason": "None"}, "ready": ready}


class Clock:
    def __init__(self):
        self.time = 0.0

    def __call__(self):
        return self.time

    def sleep(self, seconds):
        self.time += seconds


def test_a_pending_allocation_prints_sallocs_four_lines(capsys):
    """fixtures/22.05/salloc/salloc-8.err: every GPU busy, then granted."""
    clock = Clock()
    fake = FakeAllocation([answer("PENDING")] * 20 + [answer("RUNNING", ready=True)])
    assert salloc_cli._wait_granted(fake, [], now=clock, sleep=clock.sleep)["ready"]
    assert capsys.readouterr().err.splitlines() == fixture_lines("salloc-8.err")[:4]


def test_an_allocation_whose_nodes_are_slow_to_be_ready_still_prints_only_granted(capsys):
    """Started at once but its prolog slow (a loaded machine): slurmctld allocated it at once, so
    salloc says nothing of waiting however long the nodes take."""
    clock = Clock()
    fake = FakeAllocation([answer("RUNNING")] * 40 + [answer("RUNNING", ready=True)])
    fake.job_id = 1
    salloc_cli._wait_granted(fake, [], now=clock, sleep=clock.sleep)
    assert clock.time > salloc_cli.GRANT_GRACE_SECONDS
    assert capsys.readouterr().err.splitlines() == fixture_lines("salloc-1.err")[:1]


def test_an_allocation_granted_at_once_prints_only_granted(capsys):
    clock = Clock()
    fake = FakeAllocation([answer("PENDING"), answer("RUNNING"), answer("RUNNING", ready=True)])
    fake.job_id = 1
    salloc_cli._wait_granted(fake, [], now=clock, sleep=clock.sleep)
    assert capsys.readouterr().err.splitlines() == fixture_lines("salloc-1.err")[:1]


@pytest.mark.parametrize(("words", "recorded"), [
    (salloc_cli.SALLOC, SALLOC_FIXTURES / "salloc-9.err"), (salloc_cli.SALLOC, SALLOC_FIXTURES / "salloc-10.err"),
    (SRUN, SRUN_ALONE_FIXTURES / "srun-8.err")])
def test_a_signal_while_pending_revokes_the_allocation(capsys, words, recorded):
    """fixtures/22.05/salloc/salloc-9.err (SIGINT) and -10 (SIGTERM): revoked, aborted, exit 1;
    srun-alone/srun-8.err (srun outside an allocation, SIGINT): revoked, force terminated, exit 1."""
    clock = Clock()
    interrupted = []
    fake = FakeAllocation([answer("PENDING")])
    original = fake.keep_alive

    def keep_alive():
        if clock.time > 5:
            interrupted.append(signal.SIGINT)
        return original()

    fake.keep_alive = keep_alive
    fake.job_id = int(recorded.stem.split("-")[1])
    assert salloc_cli._wait_granted(fake, interrupted, words=words, now=clock, sleep=clock.sleep) is None
    assert capsys.readouterr().err.splitlines() == fixture_lines(recorded)
    assert fake.relinquished == [(0, 0)]


# The REST side ----------------------------------------------------------------------------------

def allocate(api, user, *args):
    return api(user).post(ALLOCATIONS, {"sallocArgs": list(args)}, format="json")


def ready(job, now):
    """The agents report the prolog done on every node."""
    for node in JobNode.objects.filter(job=job, run_index=job.restart_count):
        job_node_prolog_finished(job_node=node, exit_code=0, now=now)
    job.refresh_from_db()
    return job


def test_salloc_queues_an_allocation_without_a_batch_script(api, accounts, now):
    response = allocate(api, "uma", "-N", "2", "--gres=gpu:1", "-t", "5")
    assert response.status_code == 200, response.content
    job = SlurmJob.objects.get(job_id=response.json()["jobId"])
    assert (job.interactive, job.name, job.script, job.num_nodes, job.gpus_per_node, job.time_limit) == (
        True, "interactive", "", 2, 1, 5)
    run_pass(accounts)  # the wall clock's now: the submission's
    job = ready(SlurmJob.objects.get(pk=job.pk), now)
    assert job.state == JobState.RUNNING
    # no node runs a batch script: the command runs where salloc runs, so sacct shows no JOBID.batch
    assert not JobNode.objects.filter(job=job, batch_host=True).exists()
    assert set(JobNode.objects.filter(job=job).values_list("phase", flat=True)) == {NodePhase.RUNNING}
    assert JobRun.objects.get(job=job).batch_state == ""


def test_salloc_answers_its_warnings_for_salloc_to_print(api, accounts):
    """fixtures/22.05/tasks-nodes/salloc-6.err: ``salloc -N 3 -n 2`` allocates 2 nodes and says so."""
    answer = allocate(api, "uma", "-N", "3", "-n", "2").json()
    assert answer["warnings"] == ["Warning: can't run 2 processes on 3 nodes, setting nnodes to 2"]
    assert SlurmJob.objects.get(job_id=answer["jobId"]).num_nodes == 2
    assert "warnings" not in allocate(api, "uma", "-N", "2").json()


def test_sallocs_refusals_are_in_sallocs_words(api, accounts):
    response = allocate(api, "uma", "-A", "bio")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "salloc: error: Job submit/allocate failed: Invalid account or account/partition combination specified")
    response = allocate(api, "uma", "--array=1-3")
    assert response.status_code == 400
    assert "salloc: error: salloc takes no --array" in response.json()["error"]["message"]
    assert not SlurmJob.objects.exists()


def test_only_the_owner_may_keep_alive_get_a_credential_or_relinquish(api, accounts, now):
    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    for action in ("keepAlive", "stepCredential", "relinquish"):
        for stranger in ("alice", "vic"):  # the project's admin and a viewer
            response = api(stranger).post(f"{JOBS}/{job_id}:{action}", {}, format="json")
            assert response.status_code in (403, 404), (action, stranger, response.content)
        assert api("alice").post(f"{JOBS}/{job_id}:{action}", {}, format="json").status_code == 404
    # a batch job has no salloc: 404 for its owner too
    batch = api("uma").post(JOBS, {"sbatchArgs": ["--wrap", "x"]}, format="json").json()["jobId"]
    assert api("uma").post(f"{JOBS}/{batch}:stepCredential", {}, format="json").status_code == 404


def test_the_owner_gets_the_runs_step_credential_once_the_allocation_is_ready(api, accounts, now):
    from trainhub.slurm.services.steps import step_credential_job

    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    job = SlurmJob.objects.get(job_id=job_id)
    alive = api("uma").post(f"{JOBS}/{job_id}:keepAlive", {}, format="json").json()
    assert (alive["ready"], alive["hosts"]) == (False, [])
    assert api("uma").post(f"{JOBS}/{job_id}:stepCredential", {}, format="json").status_code == 400
    run_pass(accounts)  # the wall clock's now: the submission's
    ready(job, now)
    alive = api("uma").post(f"{JOBS}/{job_id}:keepAlive", {}, format="json").json()
    assert (alive["ready"], alive["clusterName"], alive["hosts"], alive["cpusPerNode"]) == (True, "c1", ["a4-0"], [1])
    credential = api("uma").post(f"{JOBS}/{job_id}:stepCredential", {}, format="json").json()["credential"]
    assert step_credential_job(credential)[0].pk == job.pk


def test_relinquishing_ends_the_job_with_the_commands_exit_code(api, accounts, now):
    """fixtures/22.05/salloc/sacct.txt: ``salloc ... bash -c 'exit 3'`` is FAILED 3:0, a 0 COMPLETED."""
    ids = [allocate(api, "uma", "-N", "1").json()["jobId"] for _ in range(2)]
    run_pass(accounts)  # the wall clock's now: the submission's
    for job_id, code in zip(ids, (3, 0)):
        ready(SlurmJob.objects.get(job_id=job_id), now)
        response = api("uma").post(f"{JOBS}/{job_id}:relinquish", {"exitCode": code}, format="json")
        assert response.status_code == 200, response.content
    assert [(job.state, job.exit_code) for job in SlurmJob.objects.order_by("job_id")] == [
        (JobState.FAILED, 3), (JobState.COMPLETED, 0)]
    assert not JobNode.objects.exclude(phase=NodePhase.EPILOG).exists()


def test_relinquishing_as_cancelled_ends_the_job_cancelled_by_its_user_whatever_the_exit_code(api, accounts, now):
    """fixtures/22.05/srun-abort/scontrol-1.txt: srun alone whose step two Ctrl-C aborted exits 130,
    its job ends ``JobState=CANCELLED Reason=None`` ``ExitCode=0:0``; a cancelled that is no boolean
    is refused."""
    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    run_pass(accounts)  # the wall clock's now: the submission's
    ready(SlurmJob.objects.get(job_id=job_id), now)
    refused = api("uma").post(f"{JOBS}/{job_id}:relinquish", {"exitCode": 130, "cancelled": "yes"}, format="json")
    assert refused.status_code == 400
    response = api("uma").post(f"{JOBS}/{job_id}:relinquish", {"exitCode": 130, "cancelled": True}, format="json")
    assert response.status_code == 200, response.content
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.state, job.state_desc, job.reason, job.exit_code, job.exit_signal) == (
        JobState.CANCELLED, "by uma", "None", 0, 0)


def test_relinquishing_a_pending_allocation_cancels_it(api, accounts, now):
    job_id = allocate(api, "uma", "--begin=now+1hour").json()["jobId"]
    assert api("uma").post(f"{JOBS}/{job_id}:relinquish", {}, format="json").status_code == 200
    assert SlurmJob.objects.get(job_id=job_id).state == JobState.CANCELLED


def test_scancel_ends_a_running_allocation_at_once(api, accounts, cast, now):
    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    run_pass(accounts)  # the wall clock's now: the submission's
    job = ready(SlurmJob.objects.get(job_id=job_id), now)
    job_cancel(job=job, actor=cast["uma"], is_admin=False, now=now)
    job.refresh_from_db()
    assert (job.state, job.exit_signal) == (JobState.CANCELLED, 15)


# Liveness ---------------------------------------------------------------------------------------

def test_an_allocation_whose_salloc_went_silent_ends(api, accounts, now):
    """kill -9 of salloc: with InactiveLimit=0 (the default) Slurm 22.05 keeps the allocation
    (squeue-13-killed); trainhub ends it after KEEPALIVE_TIMEOUT_SECONDS, as Slurm does at
    InactiveLimit (scontrol-14: JobState=TIMEOUT Reason=InactiveLimit); a pending one is cancelled."""
    running_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    run_pass(accounts)  # the wall clock's now: the submission's
    pending_id = allocate(api, "uma", "--begin=now+1hour").json()["jobId"]
    SlurmJob.objects.filter(job_id=pending_id).update(salloc_seen=now - dt.timedelta(minutes=10))
    SlurmJob.objects.filter(job_id=running_id).update(salloc_seen=now)
    config = load_cluster(accounts, now=now).config
    assert allocations_abandoned(cluster=accounts, config=config, now=now + dt.timedelta(seconds=59)) == 1
    pending = SlurmJob.objects.get(job_id=pending_id)
    assert (pending.state, pending.reason) == (JobState.CANCELLED, "InactiveLimit")
    api("uma").post(f"{JOBS}/{running_id}:keepAlive", {}, format="json")  # stamps the wall clock's now
    stamp = SlurmJob.objects.get(job_id=running_id).salloc_seen
    assert stamp >= now
    assert allocations_abandoned(cluster=accounts, config=config, now=stamp + dt.timedelta(seconds=59)) == 0
    assert allocations_abandoned(cluster=accounts, config=config, now=stamp + dt.timedelta(seconds=61)) == 1
    running = SlurmJob.objects.get(job_id=running_id)
    assert (running.state, running.reason) == (JobState.TIMEOUT, "InactiveLimit")


def test_a_silent_sallocs_running_allocation_times_out_after_inactive_limit(api, accounts, admin, now):
    cluster_config_set(cluster=accounts, changes={"InactiveLimit": "20"}, actor="admin", now=now)
    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    run_pass(accounts)  # the wall clock's now: the submission's
    SlurmJob.objects.update(salloc_seen=now)
    run_pass(accounts, now + dt.timedelta(seconds=19))
    assert SlurmJob.objects.get(job_id=job_id).state == JobState.RUNNING
    run_pass(accounts, now + dt.timedelta(seconds=21))
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.state, job.reason, job.exit_code) == (JobState.TIMEOUT, "InactiveLimit", 0)
    assert not JobNode.objects.filter(job=job).exclude(phase=NodePhase.EPILOG).exists()


# End to end: the CLI, a live server, real agents, srun inside salloc -----------------------------

@pytest.fixture
def salloc_as_uma(slurm_cli_as_uma):
    return lambda *argv: slurm_cli_as_uma("salloc", *argv)


def test_salloc_runs_the_command_here_and_srun_inside_runs_on_the_allocations_nodes(
        salloc_as_uma, accounts, real_pools):
    """fixtures/22.05/salloc/salloc-2 and salloc-5: ``srun`` inside runs a task on each node (the
    test's nodes all run on this host: each task prints its SLURMD_NODENAME); the command's exit
    code is salloc's and the job's (FAILED 3:0)."""
    code, out, err = salloc_as_uma("-N", "2", "sh", "-c", 'echo "$SLURM_JOB_NODELIST $SLURM_NNODES"; '
                                   'srun sh -c "echo \\$SLURMD_NODENAME" | sort; echo "srun rc=$?"; exit 3')
    job = SlurmJob.objects.get()
    assert out.splitlines() == ["a4-[0-1] 2", "a4-0", "a4-1", "srun rc=0"]
    assert err.splitlines() == [f"salloc: Granted job allocation {job.job_id}",
                                f"salloc: Relinquishing job allocation {job.job_id}"]
    assert code == 3
    assert (job.state, job.exit_code, job.name) == (JobState.FAILED, 3, "interactive")
    # salloc told the server where it ran: squeue's %B / AllocNodes of an allocation, scontrol's AllocNode:Sid
    assert (job.alloc_node, job.alloc_sid) == (socket.gethostname().split(".")[0], os.getsid(0))


def test_sacct_shows_an_allocation_as_slurm_does_with_no_batch_step(api, accounts, now):
    """fixtures/22.05/salloc/sacct-p.txt: ``5|interactive|FAILED|3:0|...`` and no ``5.batch`` (the
    command ran where salloc ran)."""
    from django.utils import timezone

    from trainhub.slurm import reports

    job_id = allocate(api, "uma", "-N", "1").json()["jobId"]
    run_pass(accounts)
    ready(SlurmJob.objects.get(job_id=job_id), now)
    api("uma").post(f"{JOBS}/{job_id}:relinquish", {"exitCode": 3}, format="json")
    text = reports.sacct(accounts, now=timezone.now(), viewer="uma", jobs=str(job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode"]).text
    recorded = (SALLOC_FIXTURES / "sacct-p.txt").read_text().splitlines()
    assert text.splitlines() == ["JobID|JobName|State|ExitCode|", f"{job_id}|interactive|FAILED|3:0|"]
    assert recorded[6].split("|")[:4] == ["5", "interactive", "FAILED", "3:0"]


@pytest.mark.parametrize(("state", "reason", "recorded"), [("CANCELLED", "None", "salloc-11.err"),
                                                           ("TIMEOUT", "None", "salloc-12.err")])
def test_an_allocation_ended_under_the_command_revokes_it_and_hangs_it_up(monkeypatch, capsys, state, reason,
                                                                          recorded):
    """fixtures/22.05/salloc/salloc-11.err (scancel) and salloc-12.err (time limit): salloc's line;
    the command is hung up (Slurm's salloc does so to an interactive shell) and nothing is relinquished."""
    import subprocess
    import threading

    monkeypatch.setattr(salloc_cli, "POLL_SECONDS", 0.01)
    fake = salloc_cli.Allocation(client=None, path="", job_id=int(recorded.split("-")[1].split(".")[0]))
    fake.keep_alive = lambda: {"job": {"state": state, "reason": reason}}
    child = subprocess.Popen(["sleep", "30"])
    salloc_cli._watch(fake, child, threading.Event())
    assert child.wait(timeout=10) == -signal.SIGHUP
    assert fake.revoked
    assert capsys.readouterr().err.splitlines() == fixture_lines(recorded)[1:]
