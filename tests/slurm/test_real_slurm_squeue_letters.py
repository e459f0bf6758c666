"""trainhub replays fixtures/22.05/squeue-letters.sh (running, held, dependent, future, waiting,
array and salloc jobs on a fresh slurm-harness cluster) and prints every squeue -o letter and -O
field as squeue 22.05 printed it.

The recording's clock: everything submitted at 05:14:57, the salloc job (9) granted at once, jobs
1 and 2 started by the next scheduler run a second later; squeue ran five seconds after that.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.formats import SqueueFormatError, squeue_long_format
from trainhub.slurm.models import SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "squeue-letters"
START = dt.datetime(2026, 12, 5, 5, 14, 57, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: The recording's job folder (%Z, WorkDir), which trainhub's work directories stand for.
WORK = "/tmp/letters-scenario.pHcsy9"


def _submissions() -> list[tuple[str, list[str]]]:
    """squeue-letters.sh's sbatch lines: (user, sbatch arguments)."""
    found = []
    for line in (REAL.parent / "squeue-letters.sh").read_text().splitlines():
        if line.startswith("rec sbatch-"):
            words = shlex.split(line)
            found.append((words[3], ["-p", "batch", *(word.replace("$WORK", WORK) for word in words[5:])]))
    return found


def _recorded(name: str) -> dict[str, str]:
    """letters.txt / fields.txt: the format each ``$ squeue -o|-O FORMAT`` asked for -> its output."""
    blocks = re.split(r"^\$ squeue -[oO] ", (REAL / f"{name}.txt").read_text(), flags=re.M)[1:]
    return {block.split("\n", 1)[0]: block.split("\n", 1)[1].rsplit("rc=", 1)[0] for block in blocks}


@pytest.fixture
def cluster(harness):
    cluster, _ = harness
    users = {user.username: user for user in get_user_model().objects.filter(username__in=["alice", "bob", "carol"])}
    for user, args in _submissions():
        job_submit(cluster=cluster, user=users[user], submission=Submission(argv=tuple(args)), now=START)
    job_submit(cluster=cluster, user=users["alice"], now=START,
               submission=Submission(argv=("-A", "physics", "-p", "batch", "-N1"), allocation=True))
    # slurmctld tries an salloc at once, beside pending jobs of no higher priority, and its backfill
    # (bf_interval) had not run yet: trainhub's passes stand in for both, 6-8 not yet eligible in the first
    waiting = SlurmJob.objects.filter(cluster=cluster, job_id__in=[6, 7, 8])
    waiting.update(begin_time=START + 2 * SECOND)
    run_pass(cluster, START + SECOND)
    waiting.update(begin_time=START)
    run_pass(cluster, START + SECOND)
    SlurmJob.objects.filter(cluster=cluster, job_id=9).update(start_time=START)
    waiting.update(expected_start=None, expected_nodes="")
    SlurmJob.objects.filter(cluster=cluster).update(work_dir=WORK)
    return cluster


#: What trainhub does not model: none of these fields are blank in 22.05 for these jobs (see the report).
NOT_MODELLED = set("BgGoU")


@pytest.mark.parametrize("format_", list(_recorded("letters")))
def test_every_squeue_letter_prints_what_squeue_printed(cluster, format_):
    if format_[-1] in NOT_MODELLED:
        pytest.skip(f"%{format_[-1]} is not modelled")
    text = reports.squeue(cluster, now=START + 6 * SECOND, format=format_).text
    assert sorted(text.splitlines()) == sorted(_recorded("letters")[format_].splitlines())



@pytest.mark.parametrize("fields", list(_recorded("fields")))
def test_every_squeue_field_trainhub_knows_prints_what_squeue_printed(cluster, fields):
    try:
        format_ = squeue_long_format(fields)
    except SqueueFormatError:
        pytest.skip(f"-O {fields.split(',')[1]} is not offered")
    if format_[-1] in NOT_MODELLED:
        pytest.skip(f"-O {fields.split(',')[1]} is not modelled")
    # the fields were recorded after the letters: TimeUsed shows job 1 (started at 05:14:58) at 0:09
    text = reports.squeue(cluster, now=START + 10 * SECOND, format=format_).text
    assert sorted(text.splitlines()) == sorted(_recorded("fields")[fields].splitlines())


def _scontrol(job_id: int) -> dict[str, str]:
    """scontrol-N.txt's fields (``Comment=hello `` keeps no trailing blank)."""
    return dict(word.split("=", 1) for word in (REAL / f"scontrol-{job_id}.txt").read_text().split() if "=" in word)


#: scontrol show job's fields that set a batch job apart from an salloc one, as render_job names them.
SCONTROL_FIELDS = {"BatchFlag": "batchFlag", "Command": "command", "WorkDir": "workDir", "StdIn": "stdIn",
                   "StdOut": "stdOut", "StdErr": "stdErr", "BatchHost": "batchHost"}


@pytest.mark.parametrize("job_id", [1, 2, 9])
def test_a_job_shows_scontrols_batch_and_salloc_fields(cluster, api, job_id):
    """scontrol-1 (--wrap, -o), scontrol-2 (--wrap, slurm-%j.out) and scontrol-9 (salloc: BatchFlag=0,
    Command=(null), no StdIn/StdOut/StdErr lines, BatchHost its first node)."""
    recorded = _scontrol(job_id)
    shown = api("alice").get(f"/v1/projects/alpha/locations/us-central1/slurmClusters/harness/jobs/{job_id}").json()
    assert {name: str(shown[key]) for name, key in SCONTROL_FIELDS.items() if key in shown} == (
        {name: recorded[name] for name in SCONTROL_FIELDS if name in recorded})
