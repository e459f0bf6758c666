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
from django.utils import timezone

from trainhub.slurm import reports
from trainhub.slurm.models import Association, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "squeue-letters"
START = dt.datetime(2026, 12, 5, 5, 14, 57, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: The recording's job folder (%Z, WorkDir), which trainhub's work directories stand for.
WORK = "/tmp/letters-scenario.pHcsy9"
#: Where the recording's sbatch and salloc ran (scontrol's AllocNode:Sid=localhost:7306), as the CLI
#: reports it with each submission.
ALLOC_NODE, ALLOC_SID = "localhost", 7306


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
        job_submit(cluster=cluster, user=users[user], now=START, submission=Submission(
            argv=tuple(args), alloc_node=ALLOC_NODE, alloc_sid=ALLOC_SID, submit_dir=WORK))
    job_submit(cluster=cluster, user=users["alice"], now=START, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N1"), allocation=True, alloc_node=ALLOC_NODE, alloc_sid=ALLOC_SID,
        submit_dir=WORK))
    # slurmctld tries an salloc at once, beside pending jobs of no higher priority, and its backfill
    # (bf_interval) had not run yet: trainhub's passes stand in for both, 6-8 not yet eligible in the first
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=START)  # not due in these passes
    waiting = SlurmJob.objects.filter(cluster=cluster, job_id__in=[6, 7, 8])
    waiting.update(begin_time=START + 2 * SECOND)
    run_pass(cluster, START + SECOND)
    waiting.update(begin_time=START)
    # the second pass is the main scheduler's too (not batch_sched_delay after the first: main_due)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_main_time=None)
    run_pass(cluster, START + SECOND)
    # as beat's pass (passes.cluster_pass_recorded) records it: LastSchedEval of the jobs it looked at
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_pass_time=START + SECOND)
    # granted by slurmctld in its submission's second
    SlurmJob.objects.filter(cluster=cluster, job_id=9).update(start_time=START)
    waiting.update(expected_start=None, expected_nodes="")
    return cluster


def _as_trainhub(cluster, asked: str, text: str) -> str:
    """The recorded output with its association ids as trainhub's (made in the same order, numbered
    from where the database is)."""
    if asked == "AssocID":
        alice = Association.objects.get(cluster=cluster, account__name="physics", user="alice", partition="batch")
        offset = alice.pk - 5  # alice's in physics on batch was association 5 on the harness
        return re.sub(r"^(\d+ +)(\d+)( *)$", lambda match: f"{match[1]}{int(match[2]) + offset:<20}", text,
                      flags=re.M)
    return text


def _squeue(api, monkeypatch, moment: dt.datetime, **params) -> dict:
    """squeue over the REST API at ``moment``."""
    monkeypatch.setattr(timezone, "now", lambda: moment)
    answer = api("alice").get("/v1/projects/alpha/locations/us-central1/slurmClusters/harness/squeue", params)
    assert answer.status_code == 200, answer.content
    return answer.json()


@pytest.mark.parametrize("format_", list(_recorded("letters")))
def test_every_squeue_letter_prints_what_squeue_printed(cluster, api, monkeypatch, format_):
    text = _squeue(api, monkeypatch, START + 6 * SECOND, format=format_)["text"]
    recorded = _as_trainhub(cluster, format_[-1], _recorded("letters")[format_])
    assert sorted(text.splitlines()) == sorted(recorded.splitlines())


@pytest.mark.parametrize("fields", list(_recorded("fields")))
def test_every_squeue_field_prints_what_squeue_printed(cluster, api, monkeypatch, fields):
    """Over REST as ``-O``; a field 22.05 does not know (CPUFreq, Nodes, StepID...) is said so of on
    stderr, and the others printed (squeue printed its error line first)."""
    field = fields.split(",")[1]
    # the fields were recorded after the letters: TimeUsed shows job 1 (started at 05:14:58) at 0:09,
    # PendingTime (a second before) the pending jobs 9 s after their submission
    moment = START + (9 if field == "PendingTime" else 10) * SECOND
    answer = _squeue(api, monkeypatch, moment, outputFormat=fields)
    recorded = _as_trainhub(cluster, field, _recorded("fields")[fields])
    errors = [line for line in recorded.splitlines() if line.startswith("squeue: error: ")]
    assert answer.get("stderr", "") == "".join(f"{line}\n" for line in errors)
    assert sorted(answer["text"].splitlines()) == sorted(line for line in recorded.splitlines() if line not in errors)


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


def test_scontrol_show_job_prints_what_it_printed(cluster):
    """scontrol-N.txt, recorded after the letters and fields (job 1's RunTime 00:00:09)."""
    moment = START + 10 * SECOND
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in range(1, 10)}
    assert scontrol_differences(shown, REAL) == {}
