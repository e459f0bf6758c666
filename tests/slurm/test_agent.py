"""The node agent runs Slurm jobs: prolog on every node, the batch script with Slurm's environment
on the batch host, the epilog; failures drain nodes and requeue held, as slurmd/slurmctld do."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.agent.harness import agents_on
from tests.conftest import later
from tests.slurm.conftest import make_job, nodes_done, run_until, start_job
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.models import GpuAllocation, Hold, JobLogLine, JobNode, JobState, NodePhase

pytestmark = pytest.mark.django_db(transaction=True)


def agent_for(tmp_path):
    return agents_on(tmp_path)


def lines(job, stream, node=None):
    rows = JobLogLine.objects.filter(job=job, stream=stream).order_by("id")
    return [line.text for line in (rows.filter(node_name=node) if node else rows)]


SCRIPT = """#!/bin/bash
echo "id=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST n=$SLURM_NNODES part=$SLURM_JOB_PARTITION acct=$SLURM_JOB_ACCOUNT"
echo "user=$SLURM_JOB_USER name=$SLURM_JOB_NAME cluster=$SLURM_CLUSTER_NAME tasks=$SLURM_NTASKS"
echo "gpus=$SLURM_GPUS_ON_NODE cuda=$CUDA_VISIBLE_DEVICES dir=$SLURM_SUBMIT_DIR"
echo "mem=${SLURM_MEM_PER_CPU-unset},${SLURM_MEM_PER_NODE-unset}"
echo oops >&2
"""


def test_a_job_runs_prolog_script_and_epilog_with_slurms_environment(cluster, real_pools, now, tmp_path):
    job = make_job(cluster, script=SCRIPT, name="train", num_nodes=2, num_tasks=2, gpus_per_node=2, mem_per_cpu=500,
                   now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    agent = agent_for(tmp_path)
    run_until(agent, job, now, nodes_done)
    assert job.state == JobState.COMPLETED and job.exit_code == 0
    # slurm-%j.out takes both streams, as one file: its lines, in order, under stdout
    assert lines(job, "stdout") == [
        f"id={job.job_id} nodes=a4-[0-1] n=2 part=a4 acct=ml",
        "user=uma name=train cluster=c1 tasks=2",
        f"gpus=2 cuda=0,1 dir={tmp_path}/slurm/c1/home/uma",
        "mem=500,unset",  # --mem-per-cpu's SLURM_MEM_PER_CPU (fixtures/22.05/mem-env)
        "oops",
    ]
    # two prolog scripts on each of two nodes, in order; the epilog on both nodes
    for node in ("a4-0", "a4-1"):
        assert lines(job, "prolog", node) == ["First prolog script running", "Second prolog script running"]
        assert lines(job, "epilog", node) == ["Epilog script running"]
    out = (tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.out").read_text()
    assert out.splitlines() == lines(job, "stdout")
    assert not GpuAllocation.objects.filter(active=True).exists()
    run = job.runs.get()
    assert run.state == JobState.COMPLETED and run.end_time is not None and run.alloc_gpus == 4


INTERLEAVED = "#!/bin/bash\nfor i in $(seq 200); do echo \"out $i\"; echo \"err $i\" >&2; done\n"


def test_stdout_and_stderr_sharing_the_output_file_keep_their_order(cluster, real_pools, now, tmp_path):
    """slurmstepd hands one descriptor to both streams of slurm-%j.out: 200 rounds of a stdout and a
    stderr line land in the file, and reach the control plane, exactly in the order written."""
    job = make_job(cluster, script=INTERLEAVED, now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    expected = [line for i in range(1, 201) for line in (f"out {i}", f"err {i}")]
    out = tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.out"
    assert out.read_text().splitlines() == expected
    assert lines(job, "stdout") == expected and lines(job, "stderr") == []


def test_separate_output_and_error_files_each_keep_their_stream(cluster, real_pools, now, tmp_path):
    job = make_job(cluster, script=INTERLEAVED, now=now, stderr_pattern="err-%j.txt")
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    home = tmp_path / "slurm" / "c1" / "home" / "uma"
    assert (home / f"err-{job.job_id}.txt").read_text().splitlines() == [f"err {i}" for i in range(1, 201)]
    assert lines(job, "stdout") == [f"out {i}" for i in range(1, 201)]
    assert lines(job, "stderr") == [f"err {i}" for i in range(1, 201)]


def test_each_node_of_a_job_gets_its_own_copy_of_the_scripts(cluster, real_pools, now, tmp_path):
    """One agent serving two nodes of a job: writing the second node's epilog must not truncate the
    file the first node's bash is reading (its output was lost now and then under load)."""
    job = make_job(cluster, script=SCRIPT, num_nodes=2, now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    for kind in ("prolog-0.sh", "prolog-1.sh", "epilog-0.sh"):
        copies = sorted(path.relative_to(tmp_path).parts[1] for path in tmp_path.rglob(kind))
        assert copies == ["a4-0", "a4-1"], kind


def test_prolog_and_epilog_get_slurms_prolog_environment(cluster, real_pools, now, tmp_path):
    cluster.prolog_scripts = ["#!/bin/bash\necho \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID $SLURM_JOB_USER "
                              "$SLURM_JOB_NODELIST $SLURMD_NODENAME $SLURM_JOB_RESTART_COUNT home=${HOME:-none}\""]
    cluster.epilog_scripts = ["#!/bin/bash\necho \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_EXIT_CODE2\""]
    cluster.save()
    job = make_job(cluster, script="#!/bin/bash\nexit 3\n", now=now)
    start_job(job, ["a4-1"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert lines(job, "prolog") == [f"prolog_slurmd {job.job_id} uma a4-1 a4-1 0 home=none"]
    assert lines(job, "epilog") == ["epilog_slurmd 3:0"]
    assert job.state == JobState.FAILED and job.exit_code == 3


def test_a_failing_prolog_drains_the_node_and_requeues_the_job_held(cluster, real_pools, now, tmp_path):
    cluster.prolog_scripts = ["#!/bin/bash\necho broken; exit 1"]
    cluster.save()
    job = make_job(cluster, now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    node = Node.objects.get(name="a4-0")
    assert (node.state, node.state_reason) == (NodeState.DRAIN, "Prolog error")
    assert (job.state, job.hold, job.reason, job.priority) == (JobState.PENDING, Hold.USER, "JobHeldUser", 0)
    assert job.state_desc == "launch failed requeued held"
    assert job.restart_count == 1
    assert job.runs.get().state == JobState.REQUEUED
    assert not lines(job, "stdout")


def test_a_failing_epilog_drains_the_node(cluster, real_pools, now, tmp_path):
    cluster.epilog_scripts = ["#!/bin/bash\nexit 2"]
    cluster.save()
    job = make_job(cluster, now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert job.state == JobState.COMPLETED
    node = Node.objects.get(name="a4-0")
    assert (node.state, node.state_reason) == (NodeState.DRAIN, "Epilog error")


def test_cancelling_a_running_job_signals_its_script(cluster, real_pools, now, tmp_path, cast):
    from trainhub.slurm.services.jobs import job_cancel

    job = make_job(cluster, script="#!/bin/bash\necho started\nsleep 30\n", now=now)
    start_job(job, ["a4-0"], now=now)
    agent = agent_for(tmp_path)
    moment = run_until(agent, job, now, lambda j: "started" in lines(j, "stdout"))
    job_cancel(job=job, actor=cast["uma"], is_admin=False, now=moment)
    run_until(agent, job, moment, nodes_done)
    assert job.state == JobState.CANCELLED
    assert (job.exit_code, job.exit_signal, job.state_desc) == (0, 15, "by uma")


def test_a_simulated_pool_runs_no_script_but_prolog_and_epilog_run(cluster, slurm_pools, now, tmp_path):
    # One simulated second, not the pool's 30: run_until steps 50 ms of agent time a round, so 30 s
    # took 600 rounds (25 s of wall time) and said nothing more than one second does.
    slurm_pools["a4"].simulated_runtime_seconds = 1
    slurm_pools["a4"].save(update_fields=["simulated_runtime_seconds"])
    job = make_job(cluster, script="#!/bin/bash\ntouch /should-not-exist\n", now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done, limit=10**4)
    assert job.state == JobState.COMPLETED
    assert lines(job, "stdout")[0] == f"simulated batch script of job {job.job_id} on a4-0"
    assert lines(job, "prolog") == ["First prolog script running", "Second prolog script running"]


def test_a_job_waits_for_the_previous_job_on_its_gpus_to_leave(cluster, real_pools, now, tmp_path):
    from trainhub.slurm.services.lifecycle import job_requeue

    first = make_job(cluster, script="#!/bin/bash\necho first\nsleep 30\n", gpus_per_node=8, now=now)
    start_job(first, ["a4-0"], now=now)
    agent = agent_for(tmp_path)
    moment = run_until(agent, first, now, lambda j: "first" in lines(j, "stdout"))
    job_requeue(job=first, now=moment, record_state=JobState.PREEMPTED, desc="preempted")
    second = make_job(cluster, script="#!/bin/bash\necho second\n", gpus_per_node=8, now=moment)
    start_job(second, ["a4-0"], now=moment)
    agent.tick(now=later(moment, 0.01))
    assert JobNode.objects.get(job=second).phase == NodePhase.PROLOG and not lines(second, "prolog")
    run_until(agent, second, moment, nodes_done)
    assert second.state == JobState.COMPLETED
    assert first.runs.get().state == JobState.PREEMPTED
    first.refresh_from_db()
    assert first.state == JobState.PENDING and first.restart_count == 1


def test_an_array_tasks_batch_script_gets_slurms_array_variables(cluster, real_pools, now, tmp_path):
    job = make_job(cluster, script="#!/bin/bash\necho $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID "
                                   "$SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX "
                                   "$SLURM_ARRAY_TASK_STEP\n",
                   array_job_id=7, array_task_id=4, array_tasks="0-8:2", now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert lines(job, "stdout") == ["7 4 5 0 8 2"]


def test_signal_with_b_reaches_the_batch_shell_its_time_before_the_limit(cluster, real_pools, now, tmp_path):
    """--signal=B:USR1@59 with a 1-minute limit: USR1 one second after the start, to bash alone (its
    foreground sleep is not signalled, so the trap runs when the sleep ends)."""
    script = ("#!/bin/bash\ntrap 'echo got USR1; exit 0' USR1\necho ready\n"
              "for i in $(seq 600); do sleep 0.05; done\necho no signal\n")
    job = make_job(cluster, script=script, time_limit=1, signal="B:USR1@59", now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert lines(job, "stdout") == ["ready", "got USR1"]
    assert job.state == JobState.COMPLETED


@pytest.mark.parametrize("export,expected", [
    ("", "home=/home/agent foo=unset"), ("NONE", "home=unset foo=unset"), ("FOO=bar", "home=unset foo=bar"),
    ("ALL,FOO=bar", "home=/home/agent foo=bar"), ("HOME,FOO", "home=/home/agent foo=unset")])
def test_export_decides_what_the_batch_script_inherits(cluster, real_pools, now, tmp_path, monkeypatch, export,
                                                       expected):
    """The agent's basic environment stands for the submitter's; SLURM_* are there whatever --export says."""
    monkeypatch.setenv("HOME", "/home/agent")
    monkeypatch.delenv("FOO", raising=False)
    script = '#!/bin/bash\necho "home=${HOME:-unset} foo=${FOO:-unset}"\necho "job=$SLURM_JOB_ID"\n'
    job = make_job(cluster, script=script, export=export, now=now)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert lines(job, "stdout") == [expected, f"job={job.job_id}"]


def test_output_and_error_files_follow_the_patterns(cluster, real_pools, now, tmp_path):
    job = make_job(cluster, script="#!/bin/bash\necho out; echo err >&2\n", name="named", now=now,
                   stdout_pattern="/scratch/%x-%j.log", stderr_pattern="errors/%j.err")
    root = tmp_path / "slurm" / "c1"
    (root / "scratch").mkdir(parents=True)
    (root / "home" / "uma" / "errors").mkdir(parents=True)
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert (root / "scratch" / f"named-{job.job_id}.log").read_text() == "out\n"
    assert (root / "home" / "uma" / "errors" / f"{job.job_id}.err").read_text() == "err\n"


def test_an_output_directory_that_does_not_exist_fails_the_launch_and_is_not_created(cluster, real_pools, now,
                                                                                     tmp_path):
    """As slurmstepd (fixtures/22.05/output_dir): no directory is made on the way, the job fails."""
    job = make_job(cluster, script="#!/bin/bash\necho hi\n", now=now, stdout_pattern="logs/out-%j.txt")
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    home = tmp_path / "slurm" / "c1" / "home" / "uma"
    recorded = (Path(__file__).parent / "fixtures" / "22.05" / "output_dir" / "scontrol-2.txt").read_text()
    assert "JobState=FAILED Reason=JobLaunchFailure " in recorded and " ExitCode=0:53\n" in recorded
    assert (job.state, job.reason, f"{job.exit_code}:{job.exit_signal}") == (JobState.FAILED, "JobLaunchFailure", "0:53")
    assert not (home / "logs").exists()
    assert lines(job, "stderr") == [f"slurmstepd: error: Could not open stdout file {home}/logs/out-{job.job_id}.txt: "
                                    "No such file or directory"]


def test_a_restarted_agent_re_adopts_the_batch_script_its_supervisor_kept_running(cluster, real_pools, now,
                                                                                  tmp_path):
    job = make_job(cluster, script="#!/bin/bash\necho started\nsleep 1\necho done\n", now=now)
    start_job(job, ["a4-0"], now=now)
    moment = run_until(agent_for(tmp_path), job, now, lambda j: "started" in lines(j, "stdout"))
    # the agent dies (no shutdown) and a new one starts while the script runs on
    run_until(agent_for(tmp_path), job, moment, nodes_done)
    assert (job.state, job.restart_count) == (JobState.COMPLETED, 0)
    assert lines(job, "stdout") == ["started", "done"]
    out = tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.out"
    assert out.read_text() == "started\ndone\n"


def test_a_restarted_agent_ships_every_line_of_the_shared_output_file_once_in_order(cluster, real_pools, now,
                                                                                     tmp_path):
    script = "#!/bin/bash\nfor i in $(seq 60); do echo \"out $i\"; echo \"err $i\" >&2; sleep 0.02; done\n"
    job = make_job(cluster, script=script, now=now)
    start_job(job, ["a4-0"], now=now)
    moment = run_until(agent_for(tmp_path), job, now, lambda j: "err 5" in lines(j, "stdout"))
    run_until(agent_for(tmp_path), job, moment, nodes_done)  # the first agent died mid-output
    expected = [line for i in range(1, 61) for line in (f"out {i}", f"err {i}")]
    assert lines(job, "stdout") == expected
    out = tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.out"
    assert out.read_text().splitlines() == expected


def test_a_batch_script_whose_supervisor_died_is_lost_and_the_job_requeued(cluster, real_pools, now, tmp_path):
    job = make_job(cluster, script="#!/bin/bash\necho started\nsleep 30\n", now=now)
    start_job(job, ["a4-0"], now=now)
    first = agent_for(tmp_path)
    moment = run_until(first, job, now, lambda j: "started" in lines(j, "stdout"))
    run = next(first.agents[0].slurm.batch_dir.iterdir())
    supervisor = json.loads((run / "supervisor.json").read_text())["pid"]
    # as after a reboot: the supervisor first (it would record the script's end), then the script
    os.kill(supervisor, signal.SIGKILL)
    os.waitpid(supervisor, 0)  # this test process started it: no zombie left behind
    os.killpg(json.loads((run / "child.json").read_text())["pid"], signal.SIGKILL)
    run_until(agent_for(tmp_path), job, moment, lambda j: j.state == JobState.PENDING)
    assert job.restart_count == 1
    assert job.runs.get().state == JobState.NODE_FAIL


def test_a_preempted_script_gets_its_grace_time_before_sigkill(cluster, real_pools, now, tmp_path):
    from trainhub.slurm.services.lifecycle import job_preempt, preempted_jobs_end

    # The script ignores SIGTERM, as a job checkpointing in its GraceTime would keep running.
    job = make_job(cluster, script="#!/bin/bash\ntrap '' TERM\necho up\nwhile true; do sleep 0.1; done\n", now=now)
    start_job(job, ["a4-0"], now=now)
    agent = agent_for(tmp_path)
    moment = run_until(agent, job, now, lambda j: "up" in lines(j, "stdout"))
    grace_end = later(moment, 30)
    job_preempt(job=job, requeue=True, now=moment, desc="preempted", kill_at=grace_end)
    for _ in range(20):  # well past the agent's 1 s KillWait, inside the 30 s GraceTime
        moment = later(moment, 0.5)
        agent.tick(now=moment)
        time.sleep(0.02)
    assert JobNode.objects.get(job=job, run_index=0).phase == NodePhase.RUNNING
    job.refresh_from_db()
    assert job.state == JobState.RUNNING  # as 22.05 shows a victim in its GraceTime
    moment = run_until(agent, job, later(moment, 30), nodes_done)
    assert JobNode.objects.get(job=job, run_index=0).phase == NodePhase.DONE
    # killed at the end of its GraceTime (SIGKILL KillWait later), it is requeued at slurmctld's next check
    assert job.state == JobState.RUNNING
    preempted_jobs_end(cluster=job.cluster, now=moment)
    job.refresh_from_db()
    assert (job.state, job.restart_count) == (JobState.PENDING, 1) and job.submit_time > grace_end


def test_an_output_file_through_a_symlink_out_of_the_cluster_fails_the_job_and_writes_nothing_there(
        cluster, real_pools, now, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    home = tmp_path / "slurm" / "c1" / "home" / "uma"
    home.mkdir(parents=True)
    (home / "escape").symlink_to(outside)
    job = make_job(cluster, script="#!/bin/bash\necho secret\n", now=now, stdout_pattern="escape/out-%j.txt")
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert job.state == JobState.FAILED
    assert list(outside.iterdir()) == []
    assert any("outside the cluster's file system" in line for line in lines(job, "stderr"))


def test_a_script_that_swaps_its_output_file_for_a_symlink_out_writes_nothing_there(
        cluster, real_pools, now, tmp_path):
    """The agent (root on a real node) opens --output once, through the containment check, before the
    script starts, and keeps it open as slurmstepd does: a script that replaces its output file by a
    symlink to a host file (/etc/...) cannot make the agent append its output there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "passwd"
    job = make_job(cluster, now=now, script=(
        "#!/bin/bash\n"
        "out=\"$SLURM_SUBMIT_DIR/slurm-$SLURM_JOB_ID.out\"\n"
        "while [ ! -e \"$out\" ]; do sleep 0.01; done\n"
        f"rm -f \"$out\"\nln -s {target} \"$out\"\n"
        "echo secret\n"))
    start_job(job, ["a4-0"], now=now)
    run_until(agent_for(tmp_path), job, now, nodes_done)
    assert job.state == JobState.COMPLETED
    assert not target.exists()
    assert lines(job, "stdout") == ["secret"]  # the output is still recorded
