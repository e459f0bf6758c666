"""trainhub replays the dependency part of fixtures/22.05/release.sh (carol's jobs 4-14 on the
harness's cluster: afterok on a job that failed, or that fails while they wait, with and without
SchedulerParameters=kill_invalid_depend) and ``scontrol show job`` prints what Slurm printed.

The recording's clock: job 4 (dfail, ``exit 1``) ran before 02:13:09; jobs 5-9 were submitted at
02:13:09 (7, dlater, failed at once), 10-14 at 02:13:27 (13, klater, failed 5 s later); the scontrol
outputs were taken 40 s after that.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import finish, harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "release"
#: Where release.sh ran sbatch (scontrol's WorkDir).
WORK = "/tmp/release-scenario.UZ9niK"
SCONTROL = ("dep-invalid", "dep-all", "dep-on-later", "kill-invalid", "kill-all", "kill-end", "kill-on-later")


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}+00:00")


def _submissions() -> dict[str, list[str]]:
    """release.sh's ``rec NAME $M ...`` lines: fixture name -> sbatch arguments."""
    found = {}
    for line in (REAL.parent / "release.sh").read_text().splitlines():
        if line.startswith("rec ") and " $M " in line:
            name, _, rest = line[4:].partition(" $M ")
            found[name] = shlex.split(rest.replace('"$(jid fail)"', "4").replace('"$(jid dep-later)"', "7")
                                      .replace('"$(jid kill-later)"', "13"))
    return found


def test_jobs_whose_dependency_can_never_be_satisfied_show_as_in_slurm(harness):
    cluster, _ = harness
    carol = get_user_model().objects.get(username="carol")
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=4)  # jobs 1-3: release.sh's steps
    lines = _submissions()

    def sbatch(name: str, moment: dt.datetime) -> None:
        argv = ("-A", "bio", "-p", "batch", "-o", "/dev/null", *lines[name])
        job = job_submit(cluster=cluster, user=carol, now=moment, submission=Submission(
            argv=argv, alloc_node="localhost", submit_dir=WORK))
        assert f"Submitted batch job {job.job_id}\n" == (REAL / f"{name}.txt").read_text(), name

    sbatch("fail", at("02:13:05"))
    run_pass(cluster, at("02:13:05"))
    finish(cluster, [4], at("02:13:05"), exit_code=1)
    for name in ("dep-invalid", "dep-all", "dep-later", "dep-on-later", "stageout"):
        sbatch(name, at("02:13:09"))
    run_pass(cluster, at("02:13:09"))
    finish(cluster, [7], at("02:13:09"), exit_code=1)
    finish(cluster, [9], at("02:13:09"))
    run_pass(cluster, at("02:13:11"))
    # release.sh set SchedulerParameters=kill_invalid_depend here, which 22.05.8 did not act on (the
    # README: every such job still pending 40 s later) and trainhub does not take
    for name in ("kill-invalid", "kill-all", "kill-end", "kill-later", "kill-on-later"):
        sbatch(name, at("02:13:27"))
    run_pass(cluster, at("02:13:27"))
    finish(cluster, [13], at("02:13:32"), exit_code=1)
    run_pass(cluster, at("02:13:34"))
    moment = at("02:14:07")
    assert reports.squeue(cluster, now=moment, format="%i|%j|%T|%r").text == (REAL / "squeue-kill.txt").read_text()
    cluster.refresh_from_db()
    shown = {f"scontrol-{name}": reports.scontrol_jobs(
        cluster, now=moment, job=str(SlurmJob.objects.get(cluster=cluster, name=lines[name][1]).job_id)).text
        for name in SCONTROL}
    assert scontrol_differences(shown, REAL) == {}
