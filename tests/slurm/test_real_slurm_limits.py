"""GrpTRESMins replayed against real Slurm 22.05.8 (fixtures/22.05/grptresmins/scenario.sh on a fresh
slurm-harness cluster): the job that used the account's GPU-minutes ends TIMEOUT, the next GPU job
waits with Slurm's reason, and sshare -l prints the limit in its GrpTRESMins column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness  # noqa: F401 - the harness-shaped cluster fixture

REAL = Path(__file__).parent / "fixtures" / "22.05" / "grptresmins"
START = dt.datetime(2026, 12, 4, 20, 46, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def test_grp_tres_mins_on_the_harness(harness, cast):  # noqa: F811
    cluster, _ = harness
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=START, last_priority_time=START)
    alice = cast["alice"]
    sacctmgr_run(cluster=cluster, line="sacctmgr -i modify account physics set GrpTRESMins=gres/gpu=2", actor="root",
                 is_admin=True, now=START)

    def sbatch(*args: str, at: dt.datetime):
        return job_submit(cluster=cluster, user=alice, submission=Submission(argv=args), now=at)

    sbatch("-A", "physics", "-p", "batch", "--gres=gpu:8", "-t", "5", "-J", "burn", "--wrap", "sleep 300", at=START)
    run_pass(cluster, START + SECOND)
    run_pass(cluster, START + 61 * SECOND)  # the decay thread: 8 GPU-minutes used of 2
    later = START + 76 * SECOND
    sbatch("-A", "physics", "-p", "batch", "--gres=gpu:1", "-J", "g2", "--wrap", "sleep 5", at=later)
    sbatch("-A", "physics", "-p", "batch", "-J", "c3", "--wrap", "sleep 5", at=later)
    run_pass(cluster, later)
    squeue = reports.squeue(cluster, now=later).text.splitlines()
    assert [line for line in squeue if line.split()[0] in ("JOBID", "2")] == real("squeue").splitlines()
    sacct = reports.sacct(cluster, now=later, viewer="root", all_users=True,
                          fields=["JobID", "JobName", "Account", "State", "ExitCode"]).text.splitlines()
    assert sacct[:4] == real("sacct").splitlines()[:4]  # job 3 ran 5 s on Slurm; simulated here, it still runs
    sshare = reports.sshare(cluster, now=later, viewer="root", long=True, accounts="physics").text.splitlines()
    end = sshare[0].index("GrpTRESMins") + len("GrpTRESMins")
    column = slice(end - 30, end)  # the right-aligned GrpTRESMins column, 30 wide
    assert [line[column] for line in sshare] == [line[column] for line in real("sshare-l-physics").splitlines()]
