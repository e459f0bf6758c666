"""trainhub replays fixtures/22.05/constraint.sh (node features and sbatch -C/--constraint, recorded on a
fresh slurm-harness cluster) and prints what Slurm printed, byte for byte.

The recording: gpu[1-2] get a100,ib, gpu3 v100, gpu4 h100 and is drained; held submissions of every
constraint form (ids 1-18; the overlong one takes no id); all cancelled; then job 19 (two exclusive a100
nodes) runs, jobs 20-24 wait behind it (squeue-run: the main scheduler's pass, 8 s later) until the
backfill pass starts the v100 and the featureless job on gpu3 (squeue-backfill).
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm import reports
from trainhub.slurm.models import JobState, SlurmJob
from trainhub.slurm.render import render_job
from trainhub.slurm.services.clusters import node_features_set, node_state_set
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "constraint"
START = dt.datetime(2026, 12, 4, 23, 14, 51, tzinfo=dt.UTC)  # the recording's clock (scontrol-*.txt)
SECOND = dt.timedelta(seconds=1)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_err(name: str) -> str:
    return (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]


def _submissions(marker: str) -> list[tuple[str, list[str]]]:
    """constraint.sh's ``rec NAME $S ARGS`` (held) or ``rec NAME R ARGS`` (running) lines."""
    found = []
    for line in (REAL.parent / "constraint.sh").read_text().splitlines():
        if line.startswith("rec ") and f" {marker} " in line + " ":
            name, _, rest = line[4:].partition(f" {marker}")
            args = shlex.split(rest.replace('"$(printf \'a%.0s\' $(seq 1 5000))"', "a" * 5000))
            found.append((name, args))
    return found


def _submit(cluster, argv: list[str], now: dt.datetime, work_dir: str = "/tmp") -> tuple[str, str]:
    """carol's sbatch, run in ``work_dir`` on the harness's host."""
    carol = get_user_model().objects.get(username="carol")
    submission = Submission(argv=tuple(argv), alloc_node="localhost", submit_dir=work_dir)
    try:
        out = submitted_message(job_submit(cluster=cluster, user=carol, submission=submission, now=now), submission)
    except ApiError as error:
        return "", error.message + "\n"
    cluster.refresh_from_db()
    return out + "\n", ""


@pytest.fixture
def featured(harness):
    """update-*.txt and drain-4: the nodes' features, gpu4 drained."""
    cluster, _ = harness
    for names, features in (("gpu1 gpu2", "a100,ib"), ("gpu3", "v100"), ("gpu4", "h100")):
        for name in names.split():
            cluster = node_features_set(cluster=cluster, node=Node.objects.get(name=name), available=features,
                                        active=features, actor="root", now=START)
    node_state_set(cluster=cluster, node=Node.objects.get(name="gpu4"), state=NodeState.DRAIN, reason="maint",
                   actor="root", now=START)
    run_pass(cluster, START)
    return cluster


def test_active_features_must_be_available(featured):
    with pytest.raises(ApiError) as error:
        node_features_set(cluster=featured, node=Node.objects.get(name="gpu3"), available="v100", active="a100",
                          actor="root")
    assert real_err("update-active-not-avail").endswith(error.value.violations[0].description + "\n")


def test_sinfo_shows_the_features(featured):
    assert reports.sinfo(featured, now=START + SECOND, node_oriented=True, long=True).text == real("sinfo-N-l")
    rows = reports.sinfo(featured, now=START).rows()
    shown = ["|".join((row["node"], ",".join(row["availableFeatures"]), ",".join(row["activeFeatures"]),
                       row["stateCompact"])) for row in rows]
    assert sorted(shown) == sorted(real("sinfo-N-f").splitlines()[1:])


def test_held_constraints_print_what_sbatch_printed(featured):
    cluster = featured
    base = ["-A", "bio", "-p", "batch", "-H", "--wrap", "true"]
    replayed = 0
    for name, args in _submissions("$S"):
        out, err = _submit(cluster, base + args, START + SECOND)
        assert (out, err) == (real(name), real_err(name)), name
        replayed += 1
    assert replayed == 19
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING):
        recorded = dict(word.split("=", 1) for word in real(f"scontrol-{job.job_id}").split() if "=" in word)
        assert render_job(job).get("features", "(null)" if job.features is None else "") == recorded["Features"]
    text = reports.squeue(cluster, now=START + 2 * SECOND, format="%i|%f|%r").text
    assert text == real("squeue-held")
    assert _scontrol_differences(cluster, START + SECOND) == {}


def _scontrol_differences(cluster, moment: dt.datetime) -> dict[str, list[str]]:
    """constraint.sh's ``scontrol show job`` of each job squeue lists (scontrol-N.txt)."""
    listed = SlurmJob.objects.filter(cluster=cluster, state__in=[JobState.PENDING, JobState.RUNNING])
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in listed.values_list("job_id", flat=True)}
    return scontrol_differences(shown, REAL)


def test_jobs_wait_for_nodes_with_their_features_as_in_slurm(featured):
    cluster = featured
    carol = get_user_model().objects.get(username="carol")
    for _, args in _submissions("$S"):
        _submit(cluster, ["-A", "bio", "-p", "batch", "-H", "--wrap", "true", *args], START + SECOND)
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING):
        job_cancel(job=job, actor=carol, is_admin=False, now=START + 2 * SECOND)
    running = _submissions("R")
    base = ["-A", "bio", "-p", "batch", "--wrap", "sleep 600"]
    assert _submit(cluster, base + running[0][1], START + 5 * SECOND) == (real(running[0][0]), "")
    run_pass(cluster, START + 5 * SECOND)  # slurmctld starts it at once (and its backfill runs then)
    for name, args in running[1:]:
        assert _submit(cluster, base + args, START + 6 * SECOND) == (real(name), real_err(name)), name
    run_pass(cluster, START + 8 * SECOND)  # the main scheduler only (LastSchedEval): backfill runs every 30 s
    assert reports.squeue(cluster, now=START + 14 * SECOND, format="%i|%f|%T|%r|%N").text == real("squeue-run")
    assert _scontrol_differences(cluster, START + 14 * SECOND) == {}
    assert reports.sinfo(cluster, now=START + 14 * SECOND, node_oriented=True, long=True).text == real(
        "sinfo-N-l-run")
    run_pass(cluster, START + 49 * SECOND)
    assert reports.squeue(cluster, now=START + 49 * SECOND, format="%i|%f|%T|%r|%N").text == (
        real("squeue-backfill"))
