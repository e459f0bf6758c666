"""trainhub replays fixtures/22.05/part-reason.sh: a job over its partition's limits (EnforcePartLimits=NO) on
the slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU.

What Slurm did. At submission such a job pends with PartitionConfig (job_allocate's _select_nodes_parts:
limits.over_partition_limits), over its --begin and its dependency but not -H: squeue and scontrol show it until
the main scheduler's run that follows, whose queue build keeps it in state_reason_prev_db and gives the job the
limit's reason (PartitionNodeLimit for ``-N 5`` on the 4 nodes and ``-N 3`` or ``-N 1-4`` under MaxNodes=2,
PartitionTimeLimit for ``-t 10`` under MaxTime=5), or BeginTime, Dependency. The job's first record, sent by
slurmctld's db_inx thread (services.accounting.job_records_sent) after that one build, carries PartitionConfig
(JobHeldUser for the held one; but Dependency for the dependent one, FIRST_RECORD_UNEXPLAINED): sacct's Reason of
the job, pending or cancelled. The script's check-NAME lists the builds slurmctld logged
between each submission and its first record: one main-scheduler run each, as the replay's one pass.

The replay steps its clock on the recording's (scontrol's SubmitTime of each case).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import formats, reports
from trainhub.slurm.models import JobState, Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services.accounting import job_records_sent
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "part-reason"
#: The sbatch options of the script's submit (its SB).
SB = ["-A", "physics", "-o", "/dev/null"]
SECOND = dt.timedelta(seconds=1)
#: scontrol's line a case compares: the job's state and reason.
STATE_LINE = re.compile(r"^\s+JobState=")


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


#: ``case_ NAME ARGS...`` in order: NAME -> alice's sbatch arguments; job ids from 2 on (1 is the probe).
CASES = {words[1]: words[2:] for words in (shlex.split(line) for line in REAL.with_suffix(".sh").read_text()
                                           .splitlines() if line.startswith("case_ "))}
#: What the script changes before a case: slurm.conf's partition options, as ``scontrol update`` sets them.
PARTITION_UPDATES = {"N3": ("batch", {"MaxNodes": "2"}), "t10": ("urgent", {"MaxTime": "5"})}


def submitted_at(name: str) -> dt.datetime:
    """The case's SubmitTime in the recording's scontrol."""
    clock = re.search(r"SubmitTime=(\S+)", real(f"sub-{name}")).group(1)
    return dt.datetime.fromisoformat(f"{clock}+00:00")


def shown(cluster: SlurmCluster, job_id: int, moment: dt.datetime) -> str:
    """The script's show: ``squeue -h -o '%i %T %r' -j JOB`` and scontrol's state line."""
    squeue = reports.squeue(cluster, now=moment, jobs=str(job_id), format="%i %T %r").text.split("\n", 1)[1]
    return squeue + state_line(reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text)


def state_line(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if STATE_LINE.match(line))


def recorded_shown(name: str) -> str:
    """The same of the recording (after sbatch's line, for sub-NAME)."""
    lines = [line for line in real(name).splitlines(keepends=True) if not line.startswith("Submitted")]
    return lines[0] + state_line("".join(lines[1:]))


def sacct_text(cluster: SlurmCluster, moment: dt.datetime, *, jobs: str = "", parsable: str | None = "plain",
               fields: str = "JobID,JobName,State,Reason") -> str:
    records = reports.sacct(cluster, now=moment, viewer="root", all_users=True, jobs=jobs, allocations=True,
                            fields=fields.split(",")).items
    return formats.sacct_text([record for record, _ in records], fields=fields.split(","), parsable=parsable)


def sbatch(replay: Replay, name: str, args: list[str], moment: dt.datetime) -> SlurmJob:
    args = [*SB, "-J", name, *args, "--wrap", "true"]
    return job_submit(cluster=replay.cluster, user=replay.users["alice"], now=moment,
                      submission=Submission(argv=tuple(args), alloc_node="localhost", submit_dir="/tmp"))


@pytest.fixture
def replayed(cast, now) -> tuple[Replay, dict[str, str]]:
    """The probe held at first (its record sent), then each case: its sbatch and show at once, a pass (the
    main scheduler's run), show, the records sent, sacct -j."""
    cluster, _ = harness_cluster(cast, now)
    replay = Replay(cluster, cast)
    first = submitted_at(next(iter(CASES)))
    sbatch(replay, "probe", ["-p", "batch", "-H"], first - 10 * SECOND)
    job_records_sent(now=first - 9 * SECOND)
    answers = {}
    for name, args in CASES.items():
        if name in PARTITION_UPDATES:
            partition, config = PARTITION_UPDATES[name]
            row = Partition.objects.get(cluster=cluster, name=partition)
            Partition.objects.filter(pk=row.pk).update(config={**row.config, **config})
        moment = submitted_at(name)
        job = sbatch(replay, name, args, moment)
        answers[f"sub-{name}"] = submitted_message(job, Submission(argv=())) + "\n" + shown(cluster, job.job_id,
                                                                                            moment)
        run_pass(cluster, moment + SECOND)
        answers[f"built-{name}"] = shown(cluster, job.job_id, moment + 3 * SECOND)
        job_records_sent(now=moment + 4 * SECOND)
        answers[f"first-{name}"] = sacct_text(cluster, moment + 4 * SECOND, jobs=str(job.job_id))
    end = moment + 40 * SECOND
    run_pass(cluster, end)
    answers["squeue"] = reports.squeue(cluster, now=end, format="%i %T %r").text.split("\n", 1)[1]
    answers["sacct"] = sacct_text(cluster, end, fields="JobID,State,Reason", parsable=None)
    answers["sacct-p"] = sacct_text(cluster, end)
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING):
        job_cancel(job=job, actor=replay.users["alice"], is_admin=True, now=end + SECOND)
    answers["sacct-end"] = sacct_text(cluster, end + 7 * SECOND)
    return replay, answers


@pytest.mark.parametrize("name", list(CASES))
def test_the_recording_built_the_queue_once_before_each_first_record(name):
    """The replay's premise: slurmctld's log between the submission and the first record."""
    assert real(f"check-{name}") == "debug:  sched: Running job scheduler for default depth.\n"


@pytest.mark.parametrize("name", list(CASES))
def test_a_job_over_its_partitions_limits_shows_partition_config_until_the_first_build(replayed, name):
    _, answers = replayed
    assert answers[f"sub-{name}"] == "Submitted batch job {}\n".format(list(CASES).index(name) + 2) + recorded_shown(
        f"sub-{name}")


@pytest.mark.parametrize("name", list(CASES))
def test_the_first_build_gives_it_the_limits_reason(replayed, name):
    _, answers = replayed
    assert answers[f"built-{name}"] == recorded_shown(f"built-{name}")


#: N5-dep's first record carried Dependency after the one build slurmctld logged (in two recordings of this
#: script), where trainhub's carries PartitionConfig, its reason at submission, as 22.05 did for ``-N 5 -d
#: afterok:HELD`` submitted by hand on the harness (one build, then PartitionConfig in sacct). Not understood.
FIRST_RECORD_UNEXPLAINED = pytest.mark.xfail(strict=True, reason="the recording's Dependency is not understood")


@pytest.mark.parametrize("name", [pytest.param(name, marks=FIRST_RECORD_UNEXPLAINED) if name == "N5-dep" else name
                                  for name in CASES])
def test_its_first_record_carries_what_the_build_kept(replayed, name):
    _, answers = replayed
    assert answers[f"first-{name}"] == real(f"first-{name}")


def canceller_masked(text: str) -> str:
    """Without the canceller's uid (the recording cancelled as root, the replay as alice)."""
    return re.sub(r"CANCELLED by \d+", "CANCELLED by UID", text)


@pytest.mark.parametrize("name", ["squeue", "sacct", "sacct-p", "sacct-end"])
def test_squeue_and_sacct_at_the_end_are_slurms(replayed, name):
    """squeue the limits' reasons, sacct PartitionConfig, pending and once cancelled (N5-begin, never
    eligible, left out)."""
    _, answers = replayed
    assert canceller_masked(answers[name]) == canceller_masked(real(name))
