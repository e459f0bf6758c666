"""srun inside a batch script: one job step across the allocation, every task on its node with
Slurm's step environment, output into the job's file (``N: `` labels with -l), the worst task's
exit as srun's, steps in sacct; cancelling the job stops every task on every node.

The agents run in process (tests.agent.harness); the batch script, srun and the tasks are real
processes, and srun reaches the control plane over HTTP (a live server)."""

import datetime as dt
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from django.utils import timezone

from tests.agent.harness import AgentGroup, agent_for_identity, agents_on, join_nodes
from tests.conftest import later
from tests.slurm.conftest import SRUN_FIXTURES, STEPS_FIXTURES, make_job, nodes_done, run_until, start_job
from trainhub.slurm import reports
from trainhub.slurm.models import JobState, JobStep, SlurmJob
from trainhub.slurm.services.jobs import job_cancel
from trainhub.slurm.services.passes import cluster_pass

pytestmark = pytest.mark.django_db(transaction=True)


def output(tmp_path, job, suffix="out"):
    return (tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.{suffix}").read_text().splitlines()


def run_job(cluster, tmp_path, live_server, now, script, agents=None, **fields):
    job = make_job(cluster, script=script, now=now, **fields)
    start_job(job, ["a4-0", "a4-1"][:job.num_nodes], now=now)
    run_until(agents or agents_on(tmp_path, srun_url=live_server.url), job, now, nodes_done)
    return job


#: The batch script of job 1 of fixtures/22.05/srun.sh.
STEPS = (SRUN_FIXTURES / "job1.sh").read_text()


def test_srun_runs_one_task_per_slot_on_every_node_of_the_allocation(cluster, real_pools, now, tmp_path,
                                                                      live_server):
    """fixtures/22.05/srun/out-1.txt, the same script on real Slurm (nodes gpu1, gpu2 there); stderr
    in a file of its own here, as the agent reads the script's two streams from two pipes."""
    job = run_job(cluster, tmp_path, live_server, now, STEPS, name="steps", num_nodes=2, num_tasks=4,
                  gpus_per_node=2, stderr_pattern="slurm-%j.err")
    assert output(tmp_path, job) == [
        "batch on a4-0",
        "0: a4-0 0 0 0 0 a4-[0-1] 4",
        "1: a4-0 1 1 0 0 a4-[0-1] 4",
        "2: a4-1 2 0 1 0 a4-[0-1] 4",
        "3: a4-1 3 1 1 0 a4-[0-1] 4",
        "step 0 rc=0",
        "failing on a4-0",
        "step 1 rc=3",
        "0 a4-0 gpus=0 cuda=0",
        "1 a4-0 gpus=0 cuda=0",
        "2 a4-1 gpus=0 cuda=0",
        "step 2 rc=0",
    ]
    assert output(tmp_path, job, "err") == ["srun: error: a4-0: task 0: Exited with exit code 3"]
    assert job.state == JobState.COMPLETED
    steps = [(s.step_id, s.name, s.state, s.exit_code, s.num_tasks, s.node_list)
             for s in JobStep.objects.order_by("step_id")]
    assert steps == [(0, "sh", "COMPLETED", 0, 4, "a4-[0-1]"), (1, "sh", "FAILED", 3, 1, "a4-0"),
                     (2, "sh", "COMPLETED", 0, 3, "a4-[0-1]")]


def test_a_step_waits_for_the_gpus_a_running_step_holds_then_runs(cluster, real_pools, now, tmp_path, live_server):
    """fixtures/22.05/steps/out-1.txt: job 1's script (shorter sleeps) on one node; srun's two lines
    in the error file (the agent reads the script's two streams from two pipes)."""
    script = ("#!/bin/bash\nsrun -n1 --gres=gpu:2 sleep 3 & sleep 1.5\n"
              "srun -n1 --gres=gpu:2 sh -c 'echo $SLURMD_NODENAME'; echo \"second rc=$?\"; wait\n")
    job = run_job(cluster, tmp_path, live_server, now, script, num_nodes=1, num_tasks=1, gpus_per_node=2,
                  stderr_pattern="slurm-%j.err")
    recorded = (STEPS_FIXTURES / "out-1.txt").read_text().replace("job 1", f"job {job.job_id}").splitlines()
    assert output(tmp_path, job, "err") == [line for line in recorded if line.startswith("srun: ")]
    assert output(tmp_path, job) == ["a4-0", "second rc=0"]
    assert [(step.step_id, step.state) for step in JobStep.objects.order_by("step_id")] == [
        (0, "COMPLETED"), (1, "COMPLETED")]


def tasks_alive(agents) -> list[int]:
    """Pids of the step tasks the agents' supervisors started that still run."""
    from trainhub.agent.supervisor import process_start_time

    alive = []
    for agent in agents.agents:
        for child in agent.slurm.task_dir.glob("*/*/child.json"):
            record = json.loads(child.read_text())
            if process_start_time(record["pid"]) == record["start"]:
                alive.append(record["pid"])
    return alive


def real(name: str) -> str:
    """A recorded output with the harness's node names as trainhub's (the same widths)."""
    text = (SRUN_FIXTURES / name).read_text()
    return text.replace("gpu[1-2]", "a4-[0-1]").replace("gpu1", "a4-0").replace("gpu2", "a4-1")


def test_steps_in_sacct_match_slurm_and_cancelling_the_job_stops_every_task(cluster, real_pools, now, tmp_path,
                                                                             live_server, cast):
    """fixtures/22.05/srun.sh: three jobs with steps (one cancelled while its step runs on two nodes,
    one whose step fails while its script succeeds); sacct's job, batch and step rows byte for byte."""
    agents = agents_on(tmp_path, srun_url=live_server.url)
    common = dict(account="physics", partition="batch", now=now)
    first = make_job(cluster, job_id=1, script=STEPS, name="steps", num_nodes=2, num_tasks=4,
                     gpus_per_node=2, **common)
    start_job(first, ["a4-0", "a4-1"], now=now, billing=4)
    moment = run_until(agents, first, now, nodes_done)

    second = make_job(cluster, job_id=2, script="#!/bin/bash\nsrun sleep 300\n", name="cancelme", num_nodes=2,
                      num_tasks=2, **common)
    start_job(second, ["a4-0", "a4-1"], now=moment, billing=2)
    moment = run_until(agents, second, moment, lambda job: len(tasks_alive(agents)) == 2)
    step = JobStep.objects.get(job=second)
    assert (step.state, step.num_tasks, step.node_list) == (JobState.RUNNING, 2, "a4-[0-1]")
    job_cancel(job=second, actor=cast["uma"], is_admin=False, now=moment)
    moment = run_until(agents, second, moment, nodes_done)
    assert tasks_alive(agents) == []
    # slurmstepd's line for the scancel, first in the job's output (srun/out-2.txt, its time aside)
    recorded = real("out-2.txt").splitlines()[3]
    assert re.sub(r"AT \S+", "AT T", output(tmp_path, second)[0]) == re.sub(r"AT \S+", "AT T", recorded)
    step.refresh_from_db()
    assert (second.state, step.state, step.exit_code, step.exit_signal) == (JobState.CANCELLED, "CANCELLED", 0, 15)

    third = make_job(cluster, job_id=3, script="#!/bin/bash\nsrun false; echo after $?\n", name="okafter",
                     **common)
    start_job(third, ["a4-0"], now=moment, billing=1)
    run_until(agents, third, moment, nodes_done)
    assert output(tmp_path, third) == ["srun: error: a4-0: task 0: Exited with exit code 1", "after 1"]
    assert third.state == JobState.COMPLETED

    def sacct(fields, **flags):
        return reports.sacct(cluster, now=timezone.now(), viewer="uma", jobs="1,2,3", fields=fields, **flags).text

    assert sacct(None) == real("sacct.txt")
    assert sacct(["JobID%12", "NodeList", "NTasks", "AllocTRES%50", "State", "ExitCode"]) == real("sacct-nodes.txt")
    # the canceller's uid: uma's here, alice's 1001 on the harness
    uid = SlurmJob.objects.filter(cluster=cluster, user_name="uma").values_list("uid", flat=True).first()
    assert sacct(["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks"], parsable=True) == real(
        "sacct-p.txt").replace("CANCELLED by 1001", f"CANCELLED by {uid}")
    assert sacct(["JobID", "State"], allocations=True).split() == [
        "JobID", "State", "------------", "----------", "1", "COMPLETED", "2", "CANCELLED+", "3", "COMPLETED"]


def test_a_restarted_agent_re_adopts_its_running_tasks_and_reports_them_once(cluster, real_pools, now, tmp_path,
                                                                            live_server):
    state_dir = tmp_path / "agent"
    identities = join_nodes(state_dir)
    agents = AgentGroup([agent_for_identity(identity, state_dir, tmp_path, srun_url=live_server.url)
                         for identity in identities])
    script = "#!/bin/bash\nsrun -l sh -c 'echo start; sleep 1; echo done $SLURM_PROCID'\n"
    job = make_job(cluster, script=script, num_nodes=2, num_tasks=2, now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    moment = run_until(agents, job, now, lambda job: len(tasks_alive(agents)) == 2)
    # a4-1's agent dies (no shutdown) and a new one starts while its task runs on
    agents.agents[1] = agent_for_identity(identities[1], state_dir, tmp_path, srun_url=live_server.url)
    run_until(agents, job, moment, nodes_done)
    assert sorted(output(tmp_path, job)) == ["0: done 0", "0: start", "1: done 1", "1: start"]
    assert JobStep.objects.get(job=job).state == JobState.COMPLETED and job.state == JobState.COMPLETED


def test_the_time_limit_stops_every_task_on_every_node_and_srun_reports_them(cluster, real_pools, now, tmp_path,
                                                                            live_server):
    agents = agents_on(tmp_path, srun_url=live_server.url)
    job = make_job(cluster, script="#!/bin/bash\nsrun sleep 300\n", num_nodes=2, num_tasks=2, time_limit=1, now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    moment = run_until(agents, job, now, lambda job: len(tasks_alive(agents)) == 2)
    cluster_pass(cluster=cluster, now=later(now, 61))
    run_until(agents, job, moment, nodes_done)
    assert tasks_alive(agents) == []
    assert job.state == JobState.TIMEOUT
    assert JobStep.objects.get(job=job).state == JobState.CANCELLED


def test_an_interrupted_srun_stops_its_tasks_on_every_node_and_the_script_goes_on(cluster, real_pools, now,
                                                                                  tmp_path, live_server):
    agents = agents_on(tmp_path, srun_url=live_server.url)
    script = "#!/bin/bash\ntimeout 3 srun sleep 300\necho srun $?\nsrun -l hostname >/dev/null; echo next $?\n"
    job = run_job(cluster, tmp_path, live_server, now, script, num_nodes=2, num_tasks=2,
                  stderr_pattern="slurm-%j.err", agents=agents)
    assert tasks_alive(agents) == []
    assert output(tmp_path, job) == ["srun 124", "next 0"]
    assert output(tmp_path, job, "err")[0] == "srun: forcing job termination"
    first, second = JobStep.objects.filter(job=job).order_by("step_id")
    assert [(step.state, step.exit_signal) for step in (first, second)] == [
        (JobState.CANCELLED, 15), (JobState.COMPLETED, 0)]
    assert first.end_time < job.end_time  # its tasks were stopped then, not when the job ended
    assert job.state == JobState.COMPLETED


@pytest.mark.skipif(os.geteuid() != 0, reason="running jobs as the project's uid needs an agent running as root")
def test_an_isolating_agent_runs_the_script_and_every_task_as_the_projects_uid(cluster, real_pools, now, tmp_path,
                                                                              live_server, settings):
    work = Path(tempfile.mkdtemp(prefix="srun-work-"))  # tmp_path's parents are closed to other uids
    work.chmod(0o755)
    try:
        state_dir = tmp_path / "agent"
        agents = AgentGroup([agent_for_identity(identity, state_dir, work, srun_url=live_server.url, isolate=True)
                             for identity in join_nodes(state_dir)])
        script = "#!/bin/bash\nid -u\nsrun -l id -u | sort\ntouch made-by-the-script\n"
        job = make_job(cluster, script=script, num_nodes=2, num_tasks=2, now=now)
        start_job(job, ["a4-0", "a4-1"], now=now)
        run_until(agents, job, now, nodes_done)
        uid = settings.TRAINHUB_REPLICA_UID_BASE + cluster.project_id
        home = work / "slurm" / "c1" / "home" / "uma"
        assert (home / f"slurm-{job.job_id}.out").read_text().splitlines() == [str(uid), f"0: {uid}", f"1: {uid}"]
        assert (home / "made-by-the-script").stat().st_uid == uid
        assert (home / f"slurm-{job.job_id}.out").stat().st_uid == uid  # opened by the root supervisor
        # the supervisors' records (environments, the step credential) are the agent's alone
        assert (state_dir / "slurm").stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(work)


def test_signal_without_b_reaches_every_task_of_the_steps_on_every_node_not_the_batch_shell(
        cluster, real_pools, now, tmp_path, live_server):
    """--signal=USR1@58 with a 1-minute limit: every task's processes get USR1 two seconds after the
    start and the tasks trap it; the batch shell, which does not trap it, is not signalled (it would
    die of it) and goes on."""
    script = ("#!/bin/bash\ncat > task.sh <<'EOF'\ntrap 'echo $SLURM_PROCID got USR1; exit 0' USR1\n"
              "for i in $(seq 600); do sleep 0.05; done\necho missed\nEOF\n"
              "srun -N 2 -n 2 bash task.sh | sort\necho batch goes on\n")
    job = run_job(cluster, tmp_path, live_server, now, script, num_nodes=2, num_tasks=2, time_limit=1,
                  signal="USR1@58")
    lines = output(tmp_path, job)  # (bash also reports the foreground sleep the signal ended)
    assert {"0 got USR1", "1 got USR1"} <= set(lines) and "missed" not in lines
    assert lines[-1] == "batch goes on" and job.state == JobState.COMPLETED


def test_a_preempted_jobs_steps_get_sigterm_at_once_and_its_batch_shell_only_when_grace_time_ends(
        cluster, real_pools, now, tmp_path, live_server):
    """What 22.05 does to a victim with GraceTime=30 (fixtures/22.05/mail, trap-REQUEUE-*.txt): SIGTERM
    (and SIGCONT) to the steps' tasks at once, nothing to the batch shell or its other children, not
    its --signal; when the grace time ends, SIGTERM to everything, SIGKILL KillWait later."""
    from trainhub.slurm.services.lifecycle import job_preempt, preempted_jobs_end

    home = tmp_path / "slurm" / "c1" / "home" / "uma"
    script = ("#!/bin/bash\ntrap 'touch batch-term' TERM\ncat > task.sh <<'EOF'\n"
              "trap 'touch term-$SLURM_PROCID' TERM\ntouch started-$SLURM_PROCID\n"
              "for i in $(seq 2000); do sleep 0.05; done\nEOF\n"
              "srun -N 2 -n 2 bash task.sh &\nfor i in $(seq 2000); do sleep 0.05; done\n")
    job = make_job(cluster, script=script, num_nodes=2, num_tasks=2, signal="B:USR1@600", now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    agents = agents_on(tmp_path, srun_url=live_server.url)
    moment = run_until(agents, job, now, lambda job: all((home / f"started-{task}").exists() for task in (0, 1)))
    grace_end = moment + dt.timedelta(seconds=3)
    job_preempt(job=job, requeue=True, now=moment, desc="preempted", kill_at=grace_end)
    moment = run_until(agents, job, moment, lambda job: all((home / f"term-{task}").exists() for task in (0, 1)))
    assert moment < grace_end and not (home / "batch-term").exists()
    moment = run_until(agents, job, grace_end, lambda job: (home / "batch-term").exists())
    preempted_jobs_end(cluster=job.cluster, now=moment)  # slurmctld's next check: requeued, its nodes let go
    run_until(agents, job, moment, nodes_done)  # SIGKILL a grace (KillWait) later ends what trapped TERM
    assert tasks_alive(agents) == []


def test_two_ctrl_c_to_srun_in_a_batch_script_abort_its_step_and_the_script_goes_on(cluster, real_pools, now,
                                                                                     tmp_path, live_server):
    """fixtures/22.05/srun-abort, job 2: two SIGINT to ``srun sleep 30`` in a batch script: srun's five
    lines in the output file, exit 130, the script goes on and its next step runs; the job and its
    batch step COMPLETED, the aborted step ``CANCELLED by 1001`` 0:2 (the user's uid)."""
    from tests.slurm.conftest import SRUN_ABORT_FIXTURES
    from tests.slurm.test_srun_alone import AFTER, interrupt_twice, srun_pid
    from trainhub.slurm.services.clusters import cluster_config_set

    cluster_config_set(cluster=cluster, changes={"KillWait": "5"}, actor="admin", now=now)  # the harness's
    marker = f"SRUN_TEST={tmp_path.name}"
    job = make_job(cluster, job_id=2, script=f"#!/bin/bash\nexport {marker}\n{AFTER}\n", name="wrap",
                   account="physics", partition="batch", now=now)
    start_job(job, ["a4-0"], now=now)
    interrupted = []

    def interrupted_then_done(job):
        if not interrupted and (pid := srun_pid(marker)) is not None:
            interrupted.append(pid)
            interrupt_twice(pid)
        return bool(interrupted) and nodes_done(job)

    run_until(agents_on(tmp_path, srun_url=live_server.url), job, now, interrupted_then_done)
    assert output(tmp_path, job) == (SRUN_ABORT_FIXTURES / "out-2.txt").read_text().splitlines()
    text = reports.sacct(cluster, now=timezone.now(), viewer="uma", jobs="2", parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    recorded = (SRUN_ABORT_FIXTURES / "sacct-p.txt").read_text().replace("by 1001", f"by {job.uid}").replace(
        "gpu1", "a4-0")
    assert text.splitlines() == [recorded.splitlines()[0], *recorded.splitlines()[3:7]]


def test_the_time_limit_under_a_step_cancels_the_step_and_leaves_the_script_to_finish(cluster, real_pools, now,
                                                                                      tmp_path, live_server):
    """fixtures/22.05/srun-timeout, job 1: ``sbatch -t 1 --wrap 'srun sleep 300; echo "srun exit $?"'``
    reaching its time limit: slurmstepd's JOB and STEP lines ``... CANCELLED AT T DUE TO TIME LIMIT ***``,
    srun's abort line, the task Terminated, srun exits 143 and the script goes on; the job TIMEOUT 0:0
    (``Reason=TimeLimit``), its batch step COMPLETED 0:0, the step CANCELLED 0:15. (The time limit is
    reached by a scheduler pass a minute after the start, run once the task runs.)"""
    from tests.slurm.conftest import SRUN_TIMEOUT_FIXTURES
    from tests.slurm.test_srun_alone import _running
    from trainhub.slurm.services.clusters import cluster_config_set

    cluster_config_set(cluster=cluster, changes={"KillWait": "5"}, actor="admin", now=now)  # the harness's
    marker = f"SRUN_TEST={tmp_path.name}"
    job = make_job(cluster, job_id=1, script=f'#!/bin/bash\nexport {marker}\nsrun sleep 300; echo "srun exit $?"\n',
                   name="wrap", account="physics", partition="batch", time_limit=1, now=now)
    start_job(job, ["a4-0"], now=now)
    stopped = []

    def timed_out_then_done(job):
        if not stopped and _running(marker, b"sleep\x00300\x00"):
            stopped.append(cluster_pass(cluster=cluster, now=job.start_time + dt.timedelta(minutes=1)))
        return bool(stopped) and nodes_done(job)

    run_until(agents_on(tmp_path, srun_url=live_server.url), job, now, timed_out_then_done)
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
    recorded = (SRUN_TIMEOUT_FIXTURES / "out-1.txt").read_text().replace("gpu1", "a4-0")
    assert [stamp.sub("<time>", line) for line in output(tmp_path, job)] == stamp.sub("<time>", recorded).splitlines()
    text = reports.sacct(cluster, now=timezone.now(), viewer="uma", jobs="1", parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    sacct = (SRUN_TIMEOUT_FIXTURES / "sacct-p.txt").read_text().replace("gpu1", "a4-0").splitlines()
    assert text.splitlines() == sacct[:4]
    shown = reports.scontrol_jobs(cluster, now=timezone.now(), job="1").text.splitlines()
    assert shown[3:5] == (SRUN_TIMEOUT_FIXTURES / "scontrol-1.txt").read_text().splitlines()[3:5]
