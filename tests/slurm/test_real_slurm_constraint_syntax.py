"""trainhub replays fixtures/22.05/constraint-syntax.sh (matching OR, counts and parentheses of sbatch
-C/--constraint, recorded on a fresh slurm-harness cluster) and prints what Slurm printed, byte for byte.

The recording: gpu1 a100,ib,rack1; gpu2 a100,rack1; gpu3 v100,ib,rack2; gpu4 h100,rack2. Each form is
submitted (not held), its squeue line (features, node count, state, reason, nodes) taken and the job
cancelled before the next; refused forms print slurmctld's error. Then gpu3 and gpu1 are filled and a
matching OR, a count and a parenthesised form are submitted (squeue-wait).
"""

from __future__ import annotations

import datetime as dt
import shlex

import pytest
from django.contrib.auth import get_user_model

from trainhub.inventory.models import Node
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, SlurmCluster, SlurmJob
from trainhub.slurm.render import render_job
from trainhub.slurm.services.clusters import node_features_set
from trainhub.slurm.services.jobs import job_cancel
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished

from .conftest import run_pass
from .test_real_slurm import harness, in_any_tie_order, scontrol_differences  # noqa: F401 (a fixture)
from .test_real_slurm_constraint import REAL as CONSTRAINT, _submit

REAL = CONSTRAINT.parent / "constraint-syntax"
START = dt.datetime(2026, 12, 5, 2, 13, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: Where constraint-syntax.sh's sbatch ran ($JOBS).
WORK = "/tmp/constraint-slurm/jobs"
SQUEUE = "%i|%f|%D|%T|%r|%N"
FEATURES = {"gpu1": "a100,ib,rack1", "gpu2": "a100,rack1", "gpu3": "v100,ib,rack2", "gpu4": "h100,rack2"}


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_err(name: str) -> str:
    return (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]


def _lines(marker: str) -> list[tuple[str, list[str]]]:
    """constraint-syntax.sh's ``form NAME ARGS`` or ``rec NAME as carol sbatch ... ARGS`` lines."""
    found = []
    for line in (REAL.parent / "constraint-syntax.sh").read_text().splitlines():
        if line.startswith(marker) and (marker == "form " or " sbatch " in line):
            name, _, rest = line[len(marker):].partition(" ")
            args = shlex.split(rest)
            if marker == "rec ":
                args = args[args.index("batch") + 1:args.index("--wrap")]
            found.append((name, args))
    return found


@pytest.fixture
def featured(harness):
    """The recording's nodes and clock: its decay thread (PriorityCalcPeriod 1 minute) ran at hh:mm:05,
    after mor-and-count's submission (02:14:03, Priority=10000) and before wait-mor's (02:14:08,
    carol's fair-share charged: 1428)."""
    cluster, _ = harness
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=START + 5 * SECOND,
                                                      last_priority_time=START + 5 * SECOND)
    for name, features in FEATURES.items():
        cluster = node_features_set(cluster=cluster, node=Node.objects.get(name=name), available=features,
                                    active=features, actor="root", now=START)
    run_pass(cluster, START)
    return cluster


def script_gone(job: SlurmJob, now: dt.datetime) -> None:
    """The agents' reports on a job being stopped: its batch script was killed and every node ran its epilog."""
    for job_node in JobNode.objects.filter(job=job, batch_host=True):
        job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=now)
    for job_node in JobNode.objects.filter(job=job):
        job_node_epilog_finished(job_node=job_node, exit_code=0, now=now)


def _cancel(job: SlurmJob, now: dt.datetime) -> None:
    job_cancel(job=job, actor=get_user_model().objects.get(username="carol"), is_admin=False, now=now)
    script_gone(job, now)


def _scontrol_features(job: SlurmJob) -> str:
    return render_job(job).get("features", "(null)" if job.features is None else "")


def _clock(name: str) -> tuple[dt.datetime, dt.datetime, dt.datetime]:
    """The recording's clock of an accepted form (NAME-scontrol.txt): when it was submitted, started
    (slurmctld's scheduler ran in the same second or the next) and shown (its RunTime later)."""
    fields = dict(word.split("=", 1) for word in real(f"{name}-scontrol").split() if "=" in word)
    submitted, started = (dt.datetime.fromisoformat(f"{fields[key]}+00:00") for key in ("SubmitTime", "StartTime"))
    hours, minutes, seconds = map(int, fields["RunTime"].split(":"))
    return submitted, started, started + dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _replay_forms(cluster) -> tuple[dt.datetime, dict[str, str]]:
    """Every ``form`` but the waiting one, as recorded: sbatch's answer, the job's squeue line and
    scontrol show job (on the recording's clock: _clock), then scancel; a refused form 3 s after the
    last. Returns the time it ended and scontrol's outputs."""
    base = ["-A", "bio", "-p", "batch"]
    now = START
    forms = [(name, args) for name, args in _lines("form ") if not name.startswith("wait-")]
    assert len(forms) == 38
    shown = {}
    for name, args in forms:
        submitted, started, now = _clock(name) if real(name) else (now + 3 * SECOND,) * 3
        argv = [*base, *args, "--wrap", "sleep 600"]
        assert _submit(cluster, argv, submitted, WORK) == (real(name), real_err(name)), name
        job = SlurmJob.objects.filter(cluster=cluster).order_by("-job_id").first()
        if not real(name):
            continue
        run_pass(cluster, started)
        text = reports.squeue(cluster, now=now, jobs=str(job.job_id), format=SQUEUE).text
        assert text == real(f"{name}-squeue"), name
        shown[f"{name}-scontrol"] = reports.scontrol_jobs(cluster, now=now, job=str(job.job_id)).text
        _cancel(job, now)
    return now, shown


def test_every_form_is_accepted_refused_and_placed_as_in_slurm(featured):
    """scontrol show job byte for byte too, its Features= as given (NAME-scontrol.txt)."""
    _, shown = _replay_forms(featured)
    assert len(shown) == 17
    assert scontrol_differences(shown, REAL) == {}


def test_a_matching_or_takes_the_first_alternative_that_fits_now(featured):
    """squeue-wait: with gpu3 (the only v100 node) and gpu1 filled, ``[v100|a100]`` runs on gpu2 at
    once; ``a100*2`` waits for Resources showing one node (slurmctld raises the count when it
    allocates), and the later jobs of the partition wait with Priority."""
    cluster = featured
    base = ["-A", "bio", "-p", "batch"]
    _replay_forms(cluster)
    (name, args), = [(name, args) for name, args in _lines("form ") if name.startswith("wait-")]
    submitted, started, now = _clock(name)
    lines = dict(_lines("rec "))
    for fill in ("fill-3-run", "fill-1-run"):
        argv = [*base, *lines[fill], "--wrap", "sleep 600"]
        assert _submit(cluster, argv, submitted - 2 * SECOND, WORK) == (real(fill), ""), fill
    run_pass(cluster, submitted - 2 * SECOND)
    assert _submit(cluster, [*base, *args, "--wrap", "sleep 600"], submitted, WORK) == (real(name), "")
    run_pass(cluster, started)
    job = SlurmJob.objects.get(cluster=cluster, job_id=41)
    assert reports.squeue(cluster, now=now, jobs="41", format=SQUEUE).text == real(f"{name}-squeue")
    shown = {f"{name}-scontrol": reports.scontrol_jobs(cluster, now=now, job="41").text}
    assert scontrol_differences(shown, REAL) == {}
    _cancel(job, now)
    for name in ("wait-count", "wait-mor-2", "wait-paren"):
        assert _submit(cluster, [*base, *lines[name], "--wrap", "sleep 600"], now) == (real(name), ""), name
    now += 3 * SECOND
    run_pass(cluster, now)
    assert in_any_tie_order(reports.squeue(cluster, now=now, format="%i|%j|%f|%D|%T|%r|%N").text) == (
        in_any_tie_order(real("squeue-wait")))
