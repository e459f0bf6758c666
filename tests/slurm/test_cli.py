"""`trainhub slurm ...` against a live server: sbatch with --wrap and with a script file, squeue,
sprio, sshare, sacct, scancel, scontrol and sacctmgr print what the Slurm commands print."""

import os
import shlex
import socket
from pathlib import Path

import pytest

from tests.slurm.conftest import run_pass
from trainhub.cli import slurm as slurm_cli
from trainhub.cli.main import main
from trainhub.slurm.models import Association, Hold, JobState, SlurmJob

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, cast, tmp_path, capsys):
    def as_user(name):
        environ = {"TRAINHUB_CONFIG": str(tmp_path / f"{name}.json"), "TRAINHUB_PROJECT": "alpha"}
        code = main(["auth", "login", "--url", live_server.url, "--username", name, "--password",
                     f"{name}-password"], environ=environ)
        assert code == 0
        capsys.readouterr()

        def run(*argv):
            code = main(["slurm", *argv], environ=environ)
            captured = capsys.readouterr()
            return code, captured.out, captured.err

        return run

    return as_user


def test_the_issue_command_line_submits_and_squeue_shows_it(cli, accounts):
    uma = cli("uma")
    code, out, err = uma("sbatch", "--cluster", "c1", "-p", "a4", "-A", "ml", "-q", "normal", "-N", "1",
                         "--gres=gpu:2", "-t", "10", "--wrap", "hostname")
    assert code == 0, err
    job = SlurmJob.objects.get()
    assert out == f"Submitted batch job {job.job_id}\n"
    code, out, _ = uma("squeue", "--cluster", "c1")
    assert out.splitlines()[0] == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    # the submission asked for a pass (Celery runs eagerly here), which started the job at once
    assert out.splitlines()[1].split()[:5] == [str(job.job_id), "a4", "wrap", "uma", "R"]


def test_a_script_file_with_sbatch_lines_and_arguments(cli, accounts, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\n#SBATCH -J train\n#SBATCH --gres=gpu:4\necho $1\n")
    code, out, err = cli("uma")("sbatch", "-t", "5", str(script), "epoch-1")  # the region's only cluster
    assert code == 0, err
    job = SlurmJob.objects.get()
    assert (job.name, job.gpus_per_node, job.time_limit, job.script_args) == ("train", 4, 5, ["epoch-1"])


def test_sbatch_and_salloc_run_jobs_where_they_ran(cli, accounts, tmp_path, monkeypatch):
    """sbatch without --chdir: WorkDir is its working directory, and a relative --chdir is taken from
    there (scenario.sh's sbatch in /tmp: WorkDir=/tmp)."""
    monkeypatch.chdir(tmp_path)
    uma = cli("uma")
    assert uma("sbatch", "-H", "--wrap", "true")[0] == 0
    assert uma("sbatch", "-H", "-D", "sub", "--wrap", "true")[0] == 0
    assert list(SlurmJob.objects.order_by("job_id").values_list("work_dir", flat=True)) == [
        str(tmp_path), str(tmp_path / "sub")]


COMMAND_PATH = Path(__file__).parent / "fixtures" / "22.05" / "command-path"


def test_sbatch_sends_the_script_file_as_sbatch_finds_it(cli, accounts, tmp_path, monkeypatch):
    """fixtures/22.05/command-path.sh in a directory of this machine: a name without a slash is looked
    for in --chdir (relative to here) or here before PATH, and the path found is the job's Command."""
    recorded_work = (COMMAND_PATH / "work.txt").read_text().strip()
    work = tmp_path / "work"
    (work / "d").mkdir(parents=True)
    for script in (work / "ls", work / "d" / "job2.sh"):
        script.write_text("#!/bin/bash\nsleep 300\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # where /usr/bin/ls is, which sbatch ls does not submit
    uma = cli("uma")
    for line in (COMMAND_PATH.parent / "command-path.sh").read_text().splitlines():
        if line.startswith("rec sbatch-"):
            number, argv = line.split()[1], shlex.split(line.replace("$WORK", str(work)))[7:]
            code, out, err = uma("sbatch", *argv)
            error, exit_status = (COMMAND_PATH / f"{number}.err").read_text().rsplit("rc=", 1)
            assert (code, out) == (int(exit_status), (COMMAND_PATH / f"{number}.txt").read_text()), number
            assert error in err  # besides trainhub's notice that the cluster's nodes are simulated
    code, out, _ = uma("squeue", "-o", "%i|%o")
    recorded = [line.rsplit("|", 1)[0].replace(recorded_work, str(work))
                for line in (COMMAND_PATH / "squeue-o.txt").read_text().splitlines()]
    # the recording's jobs ran; these pend without an expected start, which squeue lists last-first
    assert out.splitlines()[0] == recorded[0] and sorted(out.splitlines()[1:]) == sorted(recorded[1:])


def test_sbatch_errors_are_slurms(cli, accounts):
    code, _, err = cli("uma")("sbatch", "-A", "bio", "--wrap", "x")
    assert code == 1
    assert "Invalid account or account/partition combination specified" in err
    code, _, err = cli("uma")("sbatch", "--bogus")
    assert code == 1 and "sbatch: unrecognized option '--bogus'" in err


def test_scontrol_hold_release_and_scancel(cli, accounts):
    uma = cli("uma")
    uma("sbatch", "--begin=now+1hours", "--wrap", "x")
    job = SlurmJob.objects.get()
    assert uma("scontrol", "hold", str(job.job_id))[0] == 0
    job.refresh_from_db()
    assert job.hold == Hold.USER
    assert uma("scontrol", "release", str(job.job_id))[0] == 0
    assert uma("scontrol", "update", f"jobid={job.job_id}", "nice=10")[0] == 0
    job.refresh_from_db()
    assert (job.hold, job.nice) == (Hold.NONE, 10)
    assert uma("scancel", str(job.job_id)) == (0, "", "")
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED


def test_sprio_sshare_and_sacct(cli, accounts):
    uma = cli("uma")
    uma("sbatch", "--begin=now+1hours", "--wrap", "x")
    uma("sbatch", "-H", "--wrap", "x")
    uma("sbatch", "--wrap", "x")
    Association.objects.filter(user="uma").update(raw_usage=10, decay_usage=10)
    run_pass(accounts)
    code, out, _ = uma("sprio", "-w")
    assert out.splitlines()[1].split() == ["Weights", "1", "1000", "10000"]
    code, out, _ = uma("sshare")
    assert [line.split()[1] for line in out.splitlines()[2:] if len(line[21:31].strip())] == ["uma"]
    code, out, _ = uma("sacct")
    # only the eligible job has a record (not the held one, nor the one beginning in an hour)
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["3"]


def test_sacctmgr_with_i_commits_and_without_it_discards_when_not_interactive(cli, cluster, monkeypatch):
    alice = cli("alice")
    code, out, _ = alice("sacctmgr", "add", "account", "ml")
    assert out.endswith("(N/y): \n Changes Discarded\n")
    code, out, _ = alice("sacctmgr", "-i", "add", "account", "ml")
    assert code == 0 and out.startswith(" Adding Account(s)\n  ml\n")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr(slurm_cli, "_input", lambda: "y")
    code, out, _ = alice("sacctmgr", "add", "User", "Accounts=ml", "Partition=a4", "uma")
    assert code == 0 and Association.objects.filter(user="uma", partition="a4").exists()
    code, out, _ = cli("uma")("sacctmgr", "modify", "user", "uma", "set", "maxjobs=1")
    assert code == 1 and "privilege" in out


def test_squeue_takes_o_and_O(cli, accounts):
    uma = cli("uma")
    uma("sbatch", "--gres=gpu:2", "-n", "3", "--nice=5", "--wrap", "x")
    code, out, _ = uma("squeue", "-o", "%i|%a|%C|%b|%y")
    assert (code, out.splitlines()) == (0, ["JOBID|ACCOUNT|CPUS|TRES_PER_NODE|NICE", "1|ml|3|gres:gpu:2|5"])
    code, out, _ = uma("squeue", "-O", "JobID:6,Account")
    assert out.splitlines() == ["JOBID ACCOUNT             ", "1     ml                  "]
    # sbatch told the server where it ran (AllocNode:Sid); a field squeue does not know is said so of
    code, out, err = uma("squeue", "-O", "JobID:6,AllocNodes:.12,CPUFreq,AllocSID:8,BatchFlag:3")
    host, sid = socket.gethostname().split(".")[0], os.getsid(0)
    assert (code, err) == (0, "squeue: error: Invalid job format specification: CPUFreq\n")
    assert out.splitlines() == [f"JOBID {'ALLOC_NODES':>12.12}ALLOC_SIBAT", f"1     {host:>12.12}{str(sid):<8.8}1  "]


def test_sinfo_and_a_simulated_clusters_notice(cli, accounts):
    uma = cli("uma")
    code, out, err = uma("sbatch", "--parsable", "--wrap", "x")
    assert (code, out) == (0, "1\n")
    assert err == ("sbatch: Partly simulated cluster: the nodes of pool(s) a4 are simulated, so jobs placed there "
                   "do not really run.\n")
    code, out, _ = uma("sinfo")  # the job runs on one CPU of a4-0's 224
    assert out.splitlines() == ["PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
                                "a4*          up   infinite      1    mix a4-0",
                                "a4*          up   infinite      1   idle a4-1"]
    code, out, _ = uma("sinfo", "-s")
    assert out.splitlines()[1].split() == ["a4*", "up", "infinite", "1/1/0/2", "a4-[0-1]"]


def test_an_array_with_squeue_r_scancel_of_a_task_and_test_only(cli, accounts):
    uma = cli("uma")
    code, out, err = uma("sbatch", "--array=1-3", "-H", "--wrap", "x")
    assert (code, out) == (0, "Submitted batch job 1\n"), err
    code, out, _ = uma("squeue", "-r")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["1_1", "1_2", "1_3"]
    assert uma("scancel", "1_2") == (0, "", "")
    assert [line.split()[0] for line in uma("squeue")[1].splitlines()[1:]] == ["1_[1,3]"]
    code, out, err = uma("sbatch", "--test-only", "--wrap", "x")
    assert (code, out) == (0, "")
    assert err.startswith("sbatch: Job 2 to start at ") and " using 1 processors on nodes a4-" in err


def test_scontrol_show_job_prints_slurms_paragraph(cli, accounts):
    from trainhub.slurm import reports

    uma = cli("uma")
    uma("sbatch", "-N", "1", "--begin=now+1hours", "--wrap", "x")
    job = SlurmJob.objects.get()
    code, out, err = uma("scontrol", "show", "job", str(job.job_id))
    assert (code, err) == (0, "")
    assert out.startswith(f"JobId={job.job_id} JobName=wrap\n") and "   NumNodes=1-1 " in out
    assert out == reports.scontrol_jobs(accounts, now=job.submit_time, job=str(job.job_id)).text
    # -o: the same fields on one line (job_info.c's line_end a space)
    code, line, _ = uma("scontrol", "-o", "show", "job", str(job.job_id))
    assert line == " ".join(part.strip() for part in out.rstrip("\n ").split("\n")) + " \n"
    assert uma("scontrol", "show", "job", "999") == (1, "", "slurm_load_jobs error: Invalid job id specified\n")


def test_sbatch_warns_of_fewer_tasks_than_nodes_on_stderr(cli, accounts):
    """fixtures/22.05/tasks-nodes/sbatch-1.err: the job runs 2 tasks on 2 nodes."""
    code, out, err = cli("uma")("sbatch", "-N", "3", "-n", "2", "--wrap", "x")
    job = SlurmJob.objects.get()
    assert (code, out) == (0, f"Submitted batch job {job.job_id}\n")
    assert err.startswith("sbatch: Warning: can't run 2 processes on 3 nodes, setting nnodes to 2\n")
    assert job.num_nodes == 2


def test_scontrol_show_partition_prints_slurms_record(cli, accounts, now):
    from trainhub.slurm import reports

    uma = cli("uma")
    code, out, err = uma("scontrol", "show", "partition")
    assert (code, out, err) == (0, reports.scontrol_partitions(accounts, now=now).text, "")
    code, out, _ = uma("scontrol", "-o", "show", "partition", "a4")
    assert (code, out) == (0, reports.scontrol_partitions(accounts, now=now, partition="a4", one_liner=True).text)
    assert uma("scontrol", "show", "partition", "gone") == (1, "Partition gone not found\n", "")


def test_scontrol_show_node_prints_slurms_paragraphs_and_exit_status(cli, accounts, now):
    from trainhub.slurm import reports

    uma = cli("uma")
    assert uma("scontrol", "show", "node", "a4-1") == (0, reports.scontrol_nodes(accounts, now=now, nodes="a4-1").text,
                                                      "")
    assert uma("scontrol", "show", "nodes") == (0, reports.scontrol_nodes(accounts, now=now).text, "")
    code, line, _ = uma("scontrol", "-o", "show", "node", "a4-[0-1]")
    assert code == 0 and [part.split()[0] for part in line.splitlines()] == ["NodeName=a4-0", "NodeName=a4-1"]
    # scontrol's not-found line goes to its standard output, after the nodes it found, and it exits 1
    assert uma("scontrol", "show", "node", "gpu9") == (1, "Node gpu9 not found\n", "")
    code, out, err = uma("scontrol", "show", "node", "a4-1,gpu9")
    assert (code, err) == (1, "") and out == reports.scontrol_nodes(accounts, now=now, nodes="a4-1").text + (
        "Node gpu9 not found\n")
    code, out, err = uma("scontrol", "show", "node", "gpu[2-3]x")
    assert (code, out) == (1, "") and "unable to parse node list gpu[2-3]x" in err


def test_scontrol_show_step_prints_the_running_steps(cli, accounts, now):
    from tests.slurm.conftest import make_job, start_job
    from trainhub.slurm import reports
    from trainhub.slurm.models import JobNode, NodePhase
    from trainhub.slurm.services.steps import step_create
    from trainhub.slurm.steps import StepRequest

    job = make_job(accounts, num_nodes=1, num_tasks=1, now=now)
    start_job(job, ["a4-0"], now=now)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    step_create(job=job, run_index=0, argv=["sleep", "60"], environment={}, request=StepRequest(tasks=1),
                label=False, now=now, srun_host="vm", srun_pid=7)
    uma = cli("uma")
    code, out, err = uma("scontrol", "show", "step", f"{job.job_id}.0")
    assert (code, out, err) == (0, reports.scontrol_steps(accounts, now=now, step=f"{job.job_id}.0").text, "")
    # srun -n1 without --gres in a job without GPUs: no TresPer* lines (fixtures/22.05/release/out-16.txt)
    assert out.startswith(f"StepId={job.job_id}.0 ") and "TresPer" not in out
    assert uma("scontrol", "show", "step", f"{job.job_id}.5") == (1, f"Job step {job.job_id}.5 not found\n", "")
