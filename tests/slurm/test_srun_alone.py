"""srun outside an allocation: it makes its own (salloc's path), runs one step there with the
output here, exits with the step's status and releases the allocation; Slurm 22.05's lines
(fixtures/22.05/srun-alone)."""

import os
import re
import socket

import pytest

from tests.slurm.conftest import (SRUN_ABORT_FIXTURES, SRUN_ALONE_FIXTURES, SRUN_DETAILS_FIXTURES, SRUN_TIMEOUT_FIXTURES,
                                  SRUN_VV_FIXTURES, database_thread, run_pass)
from tests.slurm.test_salloc import Clock, FakeAllocation, answer
from trainhub.cli import salloc as salloc_cli
from trainhub.cli import srun as srun_cli
from trainhub.cli.client import CliError
from trainhub.iam.services import posix_identity_set
from trainhub.slurm.models import JobState, SlurmJob


def recorded(name: str) -> list[str]:
    """A recorded srun's output lines, without the recorder's ``rc=`` line."""
    return [line for line in (SRUN_ALONE_FIXTURES / name).read_text().splitlines() if not line.startswith("rc=")]


def on_trainhub_nodes(lines: list[str], first: int, job_id: int | None = None) -> list[str]:
    """Lines of a job of the harness that ran on gpuFIRST and the next as the test cluster's
    (a4-0, a4-1; ``gpu[1-2]`` -> ``a4-[0-1]``), its job id (sacct's first column) as ``job_id``."""
    renamed = []
    for line in lines:
        line = line.replace(f"gpu[{first}-{first + 1}]", "a4-[0-1]")
        line = line.replace(f"gpu{first}", "a4-0").replace(f"gpu{first + 1}", "a4-1")
        if job_id is not None:
            recorded_id, _, rest = line.partition("|")
            line = f"{recorded_id.replace(recorded_id.split('.')[0], str(job_id), 1)}|{rest}"
        renamed.append(line)
    return renamed


# The command line --------------------------------------------------------------------------------

def test_the_job_is_named_after_the_commands_basename_and_the_step_gets_the_step_options():
    """fixtures/22.05/srun-alone/sacct-p.txt: ``srun ... /no/such/program`` is job ``program``."""
    job, step = srun_cli.split(["-A", "ml", "-N2", "--ntasks-per-node=2", "-l", "--gres=gpu:1", "/no/such/program", "-l"])
    assert job == ["--job-name=program", "--account=ml", "--nodes=2", "--ntasks-per-node=2", "--gres=gpu:1"]
    assert step == ["srun", "--nodes=2", "--ntasks-per-node=2", "--label", "--", "/no/such/program", "-l"]


def test_short_flags_may_be_grouped_as_getopt_reads_them():
    """``srun -vv`` (srun-vv.sh), and a group ending in an option that takes the rest as its value."""
    assert srun_cli.split(["-vv", "hostname"])[1] == ["srun", "--verbose", "--verbose", "--", "hostname"]
    assert srun_cli.split(["-lvN2", "hostname"]) == (["--job-name=hostname", "--nodes=2"],
                                                     ["srun", "--label", "--verbose", "--nodes=2", "--", "hostname"])


def test_the_distribution_is_the_steps():
    """fixtures/22.05/srun-dist/srun-alone.txt: ``srun -N 2 -n 5 -m cyclic`` deals its step's tasks cyclic."""
    assert srun_cli.split(["-N", "2", "-n", "5", "-m", "cyclic", "true"]) == (
        ["--job-name=true", "--nodes=2", "--ntasks=5"],
        ["srun", "--nodes=2", "--ntasks=5", "--distribution=cyclic", "--", "true"])


def test_cpu_bind_is_the_steps():
    """srun --cpu-bind outside an allocation: the step launcher sets the tasks' SLURM_CPU_BIND* (cpu-bind)."""
    assert srun_cli.split(["--cpu-bind=v,cores", "true"]) == (
        ["--job-name=true"], ["srun", "--cpu-bind=v,cores", "--", "true"])


def test_a_job_name_given_is_kept():
    assert srun_cli.split(["-J", "named", "true"])[0] == ["--job-name=named"]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "srun: fatal: No command given to execute."),
    (["--bogus", "true"], "srun: unrecognized option '--bogus'"),
])
def test_a_bad_command_line_is_refused_in_sruns_words(argv, message):
    with pytest.raises(CliError) as refused:
        srun_cli.split(argv)
    assert refused.value.message == message


# srun's lines while it waits ---------------------------------------------------------------------

def test_a_pending_allocation_prints_sruns_two_lines(capsys):
    """fixtures/22.05/srun-alone/srun-7.err: every GPU busy, then granted; nothing when granted at once."""
    clock = Clock()
    fake = FakeAllocation([answer("PENDING")] * 20 + [answer("RUNNING", ready=True)])
    fake.job_id = 7
    assert salloc_cli._wait_granted(fake, [], words=srun_cli.SRUN, now=clock, sleep=clock.sleep)["ready"]
    assert capsys.readouterr().err.splitlines() == recorded("srun-7.err")
    fake = FakeAllocation([answer("PENDING"), answer("RUNNING", ready=True)])
    salloc_cli._wait_granted(fake, [], words=srun_cli.SRUN, now=clock, sleep=clock.sleep)
    assert capsys.readouterr().err == ""
    # Ctrl-C while pending: test_salloc.test_a_signal_while_pending_revokes_the_allocation


class Refusing:
    """The control plane refusing the allocation as it words it for salloc."""

    def post(self, path, body):
        from trainhub.slurm.services.allocations import ALLOCATE_FAILED

        raise CliError(f"{ALLOCATE_FAILED}Invalid account or account/partition combination specified",
                       "INVALID_ARGUMENT", 400)


def test_a_refused_allocation_prints_sruns_error_and_exits_1(capsys):
    """fixtures/22.05/srun-alone/srun-6.err: ``srun -A bio true`` by a user without bio."""
    from trainhub.slurm.services.allocations import ALLOCATE_FAILED

    assert salloc_cli.ALLOCATE_FAILED == ALLOCATE_FAILED
    assert srun_cli.run(Refusing(), "c1", ["-A", "bio", "true"]) == 1
    assert capsys.readouterr().err.splitlines() == recorded("srun-6.err")


def test_salloc_prints_its_own_refusal_and_exits_1(capsys):
    assert salloc_cli.run(Refusing(), "c1", ["-A", "bio", "true"]) == 1
    assert capsys.readouterr().err == (
        "salloc: error: Job submit/allocate failed: Invalid account or account/partition combination specified\n")


# End to end: the CLI, a live server, real agents ---------------------------------------------------

def test_srun_runs_a_labelled_step_across_its_own_allocation_and_releases_it(slurm_cli_as_uma, accounts):
    """fixtures/22.05/srun-alone/srun-1: ``srun -N2 --ntasks-per-node=2 -l sh -c '...'`` prints
    four labelled lines from two nodes (their order is the tasks'), exits 0; sacct shows the job
    and its step 0 named ``sh``, no batch step (sacct-p.txt)."""
    from django.utils import timezone

    from trainhub.slurm import reports

    code, out, err = slurm_cli_as_uma("srun", "-N2", "--ntasks-per-node=2", "-l", "sh", "-c",
                                      "echo $SLURMD_NODENAME $SLURM_PROCID $SLURM_STEP_ID")
    assert (code, err) == (0, "")
    assert sorted(out.splitlines()) == sorted(on_trainhub_nodes(recorded("srun-1.txt"), 1))
    job = SlurmJob.objects.get()
    assert (job.state, job.exit_code, job.name, job.num_nodes) == (JobState.COMPLETED, 0, "sh", 2)
    text = reports.sacct(accounts, now=timezone.now(), viewer="uma", jobs=str(job.job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    sacct = recorded("sacct-p.txt")
    assert text.splitlines() == [sacct[0], *on_trainhub_nodes(sacct[1:3], 1, job.job_id)]


def test_srun_exits_with_the_failed_tasks_code_and_the_job_records_it(slurm_cli_as_uma, accounts):
    """fixtures/22.05/srun-alone/srun-2: the task on the second node exits 3: srun's error line,
    exit 3, the job FAILED 3:0."""
    code, out, err = slurm_cli_as_uma("srun", "-N2", "sh", "-c",
                                      "echo on $SLURMD_NODENAME; [ $SLURM_NODEID = 1 ] && exit 3; exit 0")
    assert sorted(out.splitlines()) == sorted(on_trainhub_nodes(recorded("srun-2.txt"), 3))
    assert err.splitlines() == on_trainhub_nodes(recorded("srun-2.err"), 3)
    assert code == 3
    job = SlurmJob.objects.get()
    assert (job.state, job.exit_code, job.name) == (JobState.FAILED, 3, "sh")



#: The recording's names for what the test cluster calls otherwise.
HARNESS_NAMES = {"harness": "c1", "physics": "ml", "batch": "a4", "alice": "uma", "gpu[1-2]": "a4-[0-1]",
                 "gpu1": "a4-0", "gpu2": "a4-1"}
#: Values of the machine and the moment: the job's id, the tasks' pid, srun's directory, host, umask
#: and priority.
NATURAL = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST", "SLURM_UMASK", "SLURM_PRIO_PROCESS",
           "SLURM_TASK_PID")
#: What a trainhub task does not get (jobenv.step_environments says why), and the harness's own.
NOT_GIVEN = ("SLURMH_", "SLURM_CONF=", "SLURM_WORKING_CLUSTER=", "SLURM_LAUNCH_NODE_IPADDR=", "SLURM_SRUN_COMM_",
             "SLURM_STEP_LAUNCHER_PORT=")


def task_environment(lines: list[str]) -> list[str]:
    """A task's Slurm variables (``env | grep -e ^SLURM -e ^CUDA -e ^GPU_ | sort``), sorted, the natural
    values masked and the harness's names as the test cluster's."""
    kept = []
    for line in sorted(lines):
        name, _, value = line.partition("=")
        if not name.startswith(("SLURM", "CUDA_", "GPU_")) or line.startswith(NOT_GIVEN):
            continue
        if name in NATURAL:
            value = f"<{name}>"
        kept.append(f"{name}={HARNESS_NAMES.get(value, value)}")
    return kept


def test_the_tasks_environment_is_real_sruns(slurm_cli_as_uma, cast):
    """fixtures/22.05/srun-details/env-1.txt, env-2.txt, env-3.txt: ``srun -N1 --gres=gpu:2``, ``srun -N2
    --ntasks-per-node=2`` (task 3) and ``srun -n3`` (task 2) outside an allocation: the tasks get
    srun's variables and slurmstepd's, none of a batch script's (SLURM_JOB_GPUS, SLURM_JOB_START_TIME)
    nor salloc's (SLURM_NODE_ALIASES), no GPU variable without GPUs, srun's own SLURM_SUBMIT_DIR, and
    SLURM_JOB_UID/GID the submitter's (uma with alice's uid 1001 on the harness), not the agent's."""
    posix_identity_set(user=cast["uma"], uid=1001, gid=1001)
    show = "env | grep -e ^SLURM -e ^CUDA -e ^GPU_ | sort"
    for recorded, argv in (("env-1.txt", ["-N1", "--gres=gpu:2", "sh", "-c", show]),
                           ("env-2.txt", ["-N2", "--ntasks-per-node=2", "sh", "-c",
                                          f"[ $SLURM_PROCID = 3 ] && {show}; true"]),
                           ("env-3.txt", ["-n3", "sh", "-c", f"[ $SLURM_PROCID = 2 ] && {show}; true"])):
        code, out, err = slurm_cli_as_uma("srun", *argv)
        assert (code, err) == (0, ""), recorded
        assert task_environment(out.splitlines()) == task_environment(
            (SRUN_DETAILS_FIXTURES / recorded).read_text().splitlines()), recorded
        env = dict(line.split("=", 1) for line in out.splitlines())
        assert env["SLURM_SUBMIT_DIR"] == os.getcwd()


def test_a_program_that_cannot_start_fails_with_slurmstepds_line_and_errno(slurm_cli_as_uma, accounts):
    """fixtures/22.05/srun-alone/srun-5: ``srun -N1 /no/such/program``: slurmstepd's execve() line,
    srun's error line for the task, exit 2 (ENOENT); the job ``program`` FAILED 2:0 (sacct-p.txt)."""
    from django.utils import timezone

    from trainhub.slurm import reports

    code, out, err = slurm_cli_as_uma("srun", "-N1", "/no/such/program")
    assert (code, out) == (2, "")
    assert err.splitlines() == on_trainhub_nodes(recorded("srun-5.err"), 1)
    job = SlurmJob.objects.get()
    text = reports.sacct(accounts, now=timezone.now(), viewer="uma", jobs=str(job.job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    sacct = recorded("sacct-p.txt")
    assert text.splitlines() == [sacct[0], *on_trainhub_nodes(sacct[9:11], 1, job.job_id)]


# Ctrl-C and scancel while the step runs ----------------------------------------------------------

def details(name: str, job_id: int) -> list[str]:
    """A recorded srun-details line list on the test cluster (gpu1 -> a4-0, gpu2 -> a4-1), its job's
    id as ``job_id``, without the recorder's ``rc=`` line."""
    recorded_id = int(name.split("-")[1].split(".")[0])
    lines = (SRUN_DETAILS_FIXTURES / name).read_text().splitlines()
    return [line.replace(f"StepId={recorded_id}.", f"StepId={job_id}.")
            .replace(f"STEP {recorded_id}.", f"STEP {job_id}.").replace("gpu1", "a4-0").replace("gpu2", "a4-1")
            for line in lines if not line.startswith("rc=")]


def recorded_status(name: str) -> int:
    return int((SRUN_DETAILS_FIXTURES / name).read_text().rsplit("rc=", 1)[1])


def _running(marker: str, command: bytes, tasks: int = 1) -> bool:
    """``tasks`` tasks' ``command`` (their /proc cmdline) run with ``marker`` in their environment (a
    step over two nodes is signalled once both of its tasks run, not while one is still starting)."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline, open(f"/proc/{pid}/environ", "rb") as environ:
                found += cmdline.read() == command and marker.encode() in environ.read()
        except OSError:
            continue
    return found >= tasks


class CtrlC:
    """Types Ctrl-C ``times`` times, ``gap`` seconds apart, once ``tasks`` tasks' ``command`` run."""

    def __init__(self, marker: str, command: bytes, times: int, gap: float = 0.3, tasks: int = 1):
        self.marker, self.command, self.left, self.gap, self.tasks = marker, command, times, gap, tasks
        self.next = None

    def __call__(self, terminal: int, shown: bytes) -> None:
        import time

        if not self.left or (self.next is None and not _running(self.marker, self.command, self.tasks)):
            return
        if self.next is None or time.monotonic() >= self.next:
            os.write(terminal, b"\x03")
            self.left -= 1
            self.next = time.monotonic() + self.gap


def terminal_lines(shown: bytes) -> list[str]:
    """What a cooked terminal showed, as lines, without its ``^C`` echoes (the recording's srun was
    sent SIGINT with kill, with no terminal)."""
    return shown.replace(b"^C", b"").decode().replace("\r\n", "\n").splitlines()


@pytest.fixture
def kill_wait_5(accounts):
    """The harness's KillWait (srun says it waits KillWait + 2 = 7 seconds)."""
    from django.utils import timezone

    from trainhub.slurm.services.clusters import cluster_config_set

    cluster_config_set(cluster=accounts, changes={"KillWait": "5"}, actor="admin", now=timezone.now())


def test_one_ctrl_c_says_how_the_tasks_are_and_the_step_goes_on(slurm_cli_as_uma, tmp_path):
    """fixtures/22.05/srun-details/int-5: one SIGINT: srun's two lines, the task goes on and srun
    exits with its status."""
    marker = f"SRUN_TEST={tmp_path.name}"
    code, shown = slurm_cli_as_uma.on_terminal("srun", "-N1", "sh", "-c", "sleep 3; echo done",
                                               react=CtrlC(marker, b"sleep\x003\x00", 1),
                                               environ={"SRUN_TEST": tmp_path.name})
    job = SlurmJob.objects.get()
    assert (code, terminal_lines(shown)) == (
        recorded_status("int-5.err"), details("int-5.err", job.job_id) + details("int-5.txt", job.job_id))
    assert (job.state, job.exit_code) == (JobState.COMPLETED, 0)


def test_two_ctrl_c_within_a_second_send_the_tasks_sigint_abort_the_step_and_cancel_the_job(
        slurm_cli_as_uma, tmp_path, accounts, kill_wait_5):
    """int-7: ``srun -N1 sleep 30``, two SIGINT 0.3 s apart: srun's five lines, the task killed by
    SIGINT (no line for it after the abort), exit 130; srun-abort, job 1, the same: then srun
    completes its job as cancelled: sacct's job and step ``CANCELLED by 1001`` (the user's uid),
    0:0 and 0:2, scontrol's ``JobState=CANCELLED Reason=None`` and ``ExitCode=0:0``."""
    marker = f"SRUN_TEST={tmp_path.name}"
    code, shown = slurm_cli_as_uma.on_terminal("srun", "-N1", "sleep", "30", react=CtrlC(marker, b"sleep\x0030\x00", 2),
                                               environ={"SRUN_TEST": tmp_path.name})
    job = SlurmJob.objects.get()
    assert (code, terminal_lines(shown)) == (recorded_status("int-7.err"), details("int-7.err", job.job_id))
    assert details("int-7.err", 1) == aborted("abort-1.err")
    assert_recorded_records(accounts, job, sacct_rows=slice(1, 3), scontrol="scontrol-1.txt")


def aborted(name: str) -> list[str]:
    """A recorded srun-abort output's lines, without the recorder's ``rc=`` line."""
    return [line for line in (SRUN_ABORT_FIXTURES / name).read_text().splitlines() if not line.startswith("rc=")]


def assert_recorded_records(accounts, job: SlurmJob, *, sacct_rows: slice, scontrol: str) -> None:
    """The job's sacct -p rows are srun-abort/sacct-p.txt's ``sacct_rows`` (the canceller's uid: the job's
    user's here, 1001 there), scontrol show job's state and exit code lines ``scontrol``'s."""
    from django.utils import timezone

    from trainhub.slurm import reports

    text = reports.sacct(accounts, now=timezone.now(), viewer="uma", jobs=str(job.job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    sacct = [line.replace("by 1001", f"by {job.uid}") for line in aborted("sacct-p.txt")]
    assert text.splitlines() == [sacct[0], *on_trainhub_nodes(sacct[sacct_rows], 1, job.job_id)]
    shown = reports.scontrol_jobs(accounts, now=timezone.now(), job=str(job.job_id)).text.splitlines()
    assert shown[3:5] == aborted(scontrol)[3:5]


def test_two_ctrl_c_reach_tasks_that_trap_sigint_on_every_node(slurm_cli_as_uma, tmp_path, kill_wait_5):
    """int-6: ``srun -N2 sh -c 'trap "echo INT on $SLURMD_NODENAME; exit 9" INT; ...'``: both tasks
    trap the SIGINT and exit 9: srun's lines, the tasks' exit lines (Slurm prints each as its node
    reports it, trainhub once the step ended, in task order) and exit 9."""
    marker = f"SRUN_TEST={tmp_path.name}"
    code, shown = slurm_cli_as_uma.on_terminal(
        "srun", "-N2", "sh", "-c", 'trap "echo INT on $SLURMD_NODENAME; exit 9" INT; while :; do sleep 1; done',
        react=CtrlC(marker, b"sleep\x001\x00", 2, tasks=2), environ={"SRUN_TEST": tmp_path.name})
    job = SlurmJob.objects.get()
    lines = terminal_lines(shown)
    expected = details("int-6.err", job.job_id) + details("int-6.txt", job.job_id)
    errors = sorted(line for line in expected if line.startswith("srun: error:"))
    said = [line for line in expected if line.startswith("srun: ") and line not in errors]
    assert code == recorded_status("int-6.err")
    assert [line for line in lines if line.startswith("srun: ")] == said + errors
    assert sorted(line for line in lines if not line.startswith("srun: ")) == sorted(details("int-6.txt", job.job_id))
    step = job.steps.get()  # sacct-p.txt: 6.0 FAILED 9:0, though srun stopped it
    assert (step.state, step.exit_code, step.exit_signal) == (JobState.FAILED, 9, 0)


def test_the_job_cancelled_under_its_step_prints_slurmstepds_and_sruns_lines(slurm_cli_as_uma, tmp_path,
                                                                           kill_wait_5):
    """scancel-8: ``scancel`` of srun's job while its step runs on two nodes: slurmstepd's CANCELLED
    line, srun's abort line (the two come in either order from Slurm), a Terminated line per task,
    exit 143; no "revoked" line."""
    import re
    import time

    from django.utils import timezone

    from trainhub.slurm.services.jobs import job_cancel

    marker = f"SRUN_TEST={tmp_path.name}"

    def cancel_when_running():
        give_up = time.monotonic() + 60
        while not _running(marker, b"sleep\x00300\x00", tasks=2) and time.monotonic() < give_up:
            time.sleep(0.1)
        from django.contrib.auth import get_user_model

        job_cancel(job=SlurmJob.objects.get(), actor=get_user_model().objects.get(username="uma"), is_admin=False,
                   now=timezone.now())

    canceller = database_thread(cancel_when_running)
    try:
        code, out, err = slurm_cli_as_uma("srun", "-N2", "sh", "-c", f"export {marker}; sleep 300")
    finally:
        canceller.join()
    job = SlurmJob.objects.get()
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
    expected = [stamp.sub("<time>", line) for line in details("scancel-8.err", job.job_id)]
    lines = [stamp.sub("<time>", line) for line in err.splitlines()]
    assert (code, out) == (recorded_status("scancel-8.err"), "")
    assert sorted(lines[:2]) == sorted(expected[:2])
    assert sorted(lines[2:]) == sorted(expected[2:])
    assert job.state == JobState.CANCELLED


def test_srun_v_prints_its_options_and_the_steps_launch(slurm_cli_as_uma):
    """fixtures/22.05/srun-details/verbose-4.err: ``srun -A physics -p batch -v -N1 true``: the options
    given, the job's nodes and CPUs, the step's launch on its node and its task's completion."""
    code, out, err = slurm_cli_as_uma("srun", "-A", "ml", "-p", "a4", "-v", "-N1", "true")
    job = SlurmJob.objects.get()
    expected = [line.replace("physics", "ml").replace(": batch", ": a4")
                for line in details("verbose-4.err", job.job_id)]
    expected = [line.replace("jobid 4:", f"jobid {job.job_id}:") for line in expected]
    assert (code, out, err.splitlines()) == (0, "", expected)


def srun_pid(marker: str) -> int | None:
    """The step launcher (trainhub's ``srun sleep 30``) running with ``marker`` in its environment,
    once its task runs."""
    if not _running(marker, b"sleep\x0030\x00"):
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline, open(f"/proc/{pid}/environ", "rb") as environ:
                if cmdline.read().endswith(b"srun.py\x00sleep\x0030\x00") and marker.encode() in environ.read():
                    return int(pid)
        except OSError:
            continue
    return None


def interrupt_twice(pid: int) -> None:
    """Two SIGINT 0.3 s apart, as srun-abort.sh sends them."""
    import signal
    import time

    os.kill(pid, signal.SIGINT)
    time.sleep(0.3)
    os.kill(pid, signal.SIGINT)


#: The command of srun-abort's batch script (job 2) and salloc (job 3).
AFTER = 'srun sleep 30; echo "srun exit $?"; srun true; echo "second srun exit $?"'


def test_two_ctrl_c_to_srun_in_sallocs_command_abort_its_step_only(slurm_cli_as_uma, tmp_path, accounts,
                                                                   kill_wait_5):
    """srun-abort, job 3: ``salloc -N1 sh -c 'srun sleep 30; echo "srun exit $?"; srun true; ...'``,
    two SIGINT to srun: srun's five lines and exit 130, the command goes on (a second step runs),
    salloc relinquishes the job COMPLETED 0:0; the aborted step ``CANCELLED by 1001`` 0:2. (salloc
    runs as a process of its own: one in this process would ignore SIGINT here, in the agents' tasks too.)"""
    marker = f"SRUN_TEST={tmp_path.name}"
    interrupted = []

    def interrupt_when_running(terminal, shown):
        if not interrupted and (pid := srun_pid(marker)) is not None:
            interrupted.append(pid)
            interrupt_twice(pid)

    code, shown = slurm_cli_as_uma.on_terminal("salloc", "-N1", "sh", "-c", f"export {marker}; {AFTER}",
                                               react=interrupt_when_running)
    job = SlurmJob.objects.get()
    err = [line.replace("allocation 3", f"allocation {job.job_id}").replace("StepId=3.", f"StepId={job.job_id}.")
           for line in aborted("salloc-3.err")]
    assert (code, terminal_lines(shown)) == (0, err[:-1] + aborted("salloc-3.txt") + err[-1:])
    assert_recorded_records(accounts, job, sacct_rows=slice(7, 10), scontrol="scontrol-3.txt")


# The time limit under the running step ------------------------------------------------------------

def test_the_time_limit_under_the_step_prints_slurmstepds_time_limit_line(slurm_cli_as_uma, tmp_path, accounts,
                                                                        kill_wait_5, monkeypatch):
    """fixtures/22.05/srun-timeout, job 2: ``srun -t 1 sleep 300`` reaching its time limit:
    slurmstepd's ``*** STEP N.0 ON NODE CANCELLED AT T DUE TO TIME LIMIT ***``, srun's abort line, the
    task Terminated, exit 143; sacct's job TIMEOUT 0:0 and its step CANCELLED 0:15, scontrol's
    ``JobState=TIMEOUT Reason=TimeLimit`` and ``ExitCode=0:15``. (The time limit is reached by a
    scheduler pass a minute after the start, run once the task runs.)"""
    import datetime as dt
    import re
    import time

    from django.utils import timezone

    from trainhub.slurm import reports

    marker = f"SRUN_TEST={tmp_path.name}"
    monkeypatch.setenv("SRUN_TEST", tmp_path.name)  # srun's, so its task's

    def time_out_when_running():
        give_up = time.monotonic() + 60
        while not _running(marker, b"sleep\x00300\x00") and time.monotonic() < give_up:
            time.sleep(0.1)
        run_pass(accounts, SlurmJob.objects.get().start_time + dt.timedelta(minutes=1))

    stopper = database_thread(time_out_when_running)
    try:
        code, out, err = slurm_cli_as_uma("srun", "-t", "1", "sleep", "300")
    finally:
        stopper.join()
    job = SlurmJob.objects.get()
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
    recorded = [stamp.sub("<time>", line).replace("STEP 2.", f"STEP {job.job_id}.").replace("gpu1", "a4-0")
                for line in (SRUN_TIMEOUT_FIXTURES / "srun-2.err").read_text().splitlines()]
    assert (code, out, [stamp.sub("<time>", line) for line in err.splitlines()]) == (
        int(recorded[-1].removeprefix("rc=")), "", recorded[:-1])
    text = reports.sacct(accounts, now=timezone.now(), viewer="uma", jobs=str(job.job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    sacct = (SRUN_TIMEOUT_FIXTURES / "sacct-p.txt").read_text().splitlines()
    assert text.splitlines() == [sacct[0], *on_trainhub_nodes(sacct[4:6], 1, job.job_id)]
    shown = reports.scontrol_jobs(accounts, now=timezone.now(), job=str(job.job_id)).text.splitlines()
    assert shown[3:5] == (SRUN_TIMEOUT_FIXTURES / "scontrol-2.txt").read_text().splitlines()[3:5]


# srun -vv ----------------------------------------------------------------------------------------

def debug_masked(lines: list[str], job_id: int) -> list[str]:
    """srun -vv's lines with the values of the machine and the moment masked: resource limits,
    priority, umask, ports, thread and user ids; the harness's names as the test cluster's and
    ``job_id`` for the recorded job's id."""
    import re

    masked = []
    for line in lines:
        line = re.sub(r"(propagating \w+=)\d+", r"\1<n>", line)
        line = re.sub(r"(net_stream_listen is |socket, port |user |thread \()\d+", r"\1<n>", line)
        line = re.sub(r"(jobid |jobid {15}: |requesting job |StepId=|allocation )\d+", rf"\g<1>{job_id}", line)
        masked.append(line.replace("physics", "ml").replace(": batch", ": a4").replace("gpu1", "a4-0"))
    return masked


def test_srun_vv_alone_prints_22_05s_debug_lines(slurm_cli_as_uma):
    """fixtures/22.05/srun-vv/vv-1.err: ``srun -A physics -p batch -vv -N1 hostname``: -v's lines and
    the debug ones between them: the limits, priority and umask passed on, the allocation's message
    thread, the plugins, the step's request, launch and IO thread, each task done."""
    code, out, err = slurm_cli_as_uma("srun", "-A", "ml", "-p", "a4", "-vv", "-N1", "hostname")
    job = SlurmJob.objects.get()
    recorded = (SRUN_VV_FIXTURES / "vv-1.err").read_text().splitlines()
    assert (code, out) == (0, f"{socket.gethostname()}\n")
    assert debug_masked(err.splitlines(), job.job_id) == debug_masked(recorded[:-1], job.job_id)


#: srun -vvv's debug2 lines of its IO thread (stdio sockets and buffers: their number and order depend
#: on when the tasks' output comes), which trainhub's srun, with no IO thread, does not print.
IO_THREAD = re.compile(r"srun: debug2: (Called _file_|Entering _file_|Leaving  _file_|Activity on IO listening "
                       r"socket|Entering io_init_msg|Leaving io_init_msg|Validated IO connection|"
                       r"eio_message_socket_accept|  false, shutdown)")


def test_srun_vvv_alone_prints_22_05s_debug2_lines_but_its_io_threads(slurm_cli_as_uma):
    """fixtures/22.05/srun-vv/vvv-2.err: ``srun -A physics -p batch -vvv -N1 hostname``: -vv's lines and
    the debug2 ones but the IO thread's: the step's tasks and CPUs per task, the launch's replies, each
    node's launch and exit messages, the allocation's message thread cleared up."""
    code, out, err = slurm_cli_as_uma("srun", "-A", "ml", "-p", "a4", "-vvv", "-N1", "hostname")
    job = SlurmJob.objects.get()
    recorded = [line for line in (SRUN_VV_FIXTURES / "vvv-2.err").read_text().splitlines()[:-1]
                if not IO_THREAD.match(line)]
    assert (code, out) == (0, f"{socket.gethostname()}\n")
    assert debug_masked(err.splitlines(), job.job_id) == debug_masked(recorded, job.job_id)


def test_srun_vv_inside_an_allocation_says_the_allocations_options_too(slurm_cli_as_uma):
    """srun-vv/salloc-3.err: ``srun -vv -N1 hostname`` inside salloc's command: the options it takes
    from the allocation (its node list as ``(null)``, its job id and name), then the same debug
    lines but the allocation's message thread."""
    code, out, err = slurm_cli_as_uma("salloc", "-N1", "srun", "-vv", "-N1", "hostname")
    job = SlurmJob.objects.get()
    recorded = (SRUN_VV_FIXTURES / "salloc-3.err").read_text().splitlines()
    first_srun = recorded[:recorded.index("srun: debug:  IO thread exiting") + 1]
    assert (code, out) == (0, f"{socket.gethostname()}\n")
    assert debug_masked(err.splitlines(), job.job_id) == debug_masked(
        first_srun + ["salloc: Relinquishing job allocation 3"], job.job_id)


def test_a_hostfile_of_names_no_host_list_reads_is_refused_at_allocation(slurm_cli_as_uma, tmp_path, monkeypatch):
    """22.05.8: ``SLURM_HOSTFILE`` of ``gpu[1-,gpu2,gpu3`` with ``-m arbitrary -n 2`` outside a job: ``srun:
    error: Unable to allocate resources: Invalid node name specified``, exit 1; cutting the names to -n's
    first nodes (steps.first_nodes) must not read them as a host list."""
    (tmp_path / "hosts").write_text("a4-[0-,a4-0,a4-1\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    code, out, err = slurm_cli_as_uma("srun", "-m", "arbitrary", "-n", "2", "true")
    assert (code, out, err) == (1, "", "srun: error: Unable to allocate resources: Invalid node name specified\n")
    assert not SlurmJob.objects.exists()
