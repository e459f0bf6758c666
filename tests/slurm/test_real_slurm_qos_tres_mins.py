"""QOS GrpTRESMins and MaxTRESMins replayed against real Slurm 22.05.8 (fixtures/22.05/qos_tres_mins.sh on
a fresh slurm-harness cluster): sacctmgr's answers and ``show qos`` byte for byte, then alice's jobs under
the QOS: over MaxTRESMins they wait (QOSMaxGRESMinutesPerJob, QOSMaxCpuMinutesPerJobLimit; no time limit
is always over), under GrpTRESMins they run until the QOS's decayed usage reaches it, then the ones
holding that TRES end TIMEOUT and new ones wait with QOSGrpGRESMinutes."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness, in_any_tie_order, scontrol_differences  # noqa: F401 (a fixture)
from .test_real_slurm_constraint_syntax import script_gone

REAL = Path(__file__).parent / "fixtures" / "22.05" / "qos_tres_mins"
#: The recording's clock (scontrol-N.txt): job 1 submitted at 02:30:32 and started a second later,
#: jobs 2-8 submitted then, 6-8 started by the next main scheduler run (02:30:36), scontrol at 02:30:37.
START = dt.datetime(2026, 12, 5, 2, 30, 31, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: Where the recording's sbatch ran ($JOBS).
WORK = "/tmp/constraint-slurm/jobs.FIb0Xw"
#: the recorded squeue -o "%i|%j|%q|%T|%r|%l" without its %q (QOS) column, which trainhub's squeue lacks
SQUEUE = "%i|%j|%T|%r|%l"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_err(name: str) -> tuple[str, int]:
    text, _, code = (REAL / f"{name}.err").read_text().rpartition("rc=")
    return text, int(code)


def real_squeue(name: str) -> str:
    return "".join("|".join(cells[:2] + cells[3:]) for cells in (line.split("|") for line in
                                                                  real(name).splitlines(keepends=True)))


def _recorded(command: str) -> list[tuple[str, str]]:
    """qos_tres_mins.sh's ``rec NAME <command> ...`` lines: (name, the rest of the line)."""
    found = []
    for line in (REAL.parent / "qos_tres_mins.sh").read_text().splitlines():
        if line.startswith("rec ") and line.split()[2] == command:
            found.append((line.split()[1], line.split(" ", 2)[2]))
    return found


def _sacctmgr(cluster) -> None:
    for name, line in _recorded("sacctmgr"):
        result = sacctmgr_run(cluster=cluster, line=line, actor="root", is_admin=True, now=START)
        text, code = real_err(name)
        if name == "assoc-alice":  # slurmdbd's order among one user's associations is not modelled
            assert sorted(result.output.splitlines()) == sorted(real(name).splitlines())
            continue
        assert (result.output, result.exit_code) == (real(name) + text, code), name


def test_sacctmgr_add_modify_and_show_qos_tres_minutes_as_slurm(harness):
    cluster, _ = harness
    _sacctmgr(cluster)


def test_jobs_wait_and_time_out_under_qos_tres_minute_limits_as_in_slurm(harness, cast):
    cluster, _ = harness
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=START, last_priority_time=START)
    _sacctmgr(cluster)
    alice = cast["alice"]

    def sbatch(name: str, line: str, at: dt.datetime) -> None:
        args = ["-A", "physics", "-p", "batch", *shlex.split(line)[1:], "--wrap", "sleep 300"]
        submission = Submission(argv=tuple(args), alloc_node="localhost", submit_dir=WORK)
        job = job_submit(cluster=cluster, user=alice, submission=submission, now=at)
        assert f"Submitted batch job {job.job_id}\n" == real(name), name

    (first_name, first_line), *more, (last_name, last_line) = _recorded("S")
    sbatch(first_name, first_line, START + SECOND)
    run_pass(cluster, START + 2 * SECOND)
    for name, line in more:
        sbatch(name, line, START + 2 * SECOND)
    moment = START + 5 * SECOND
    run_pass(cluster, moment)
    assert in_any_tie_order(reports.squeue(cluster, now=moment, format=SQUEUE).text) == (
        in_any_tie_order(real_squeue("squeue-1")))
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment + SECOND, job=str(job_id)).text
             for job_id in range(1, 9)}
    assert scontrol_differences(shown, REAL) == {}
    stop = START + 65 * SECOND
    run_pass(cluster, stop)  # the decay thread: job 6's 8 GPUs charged, over gres/gpu=2: jobs 6 and 7 stopped
    for job in SlurmJob.objects.filter(cluster=cluster, job_id__in=(6, 7)):
        script_gone(job, stop)
    later = START + 80 * SECOND
    sbatch(last_name, last_line, later)
    run_pass(cluster, later)
    assert in_any_tie_order(reports.squeue(cluster, now=later, format=SQUEUE).text) == (
        in_any_tie_order(real_squeue("squeue-3")))
    sacct = reports.sacct(cluster, now=later, viewer="root", all_users=True,
                          fields=["JobID", "JobName", "QOS", "State", "ExitCode"]).text
    assert sacct == real("sacct")
    stopped = SlurmJob.objects.get(cluster=cluster, job_id=6)  # 60 s of 8 GPUs charged (acct_policy's text)
    assert stopped.state_desc == "Job is at or exceeds QOS tgrp's group max TRES(gres/gpu) minutes of 2 with 8"
