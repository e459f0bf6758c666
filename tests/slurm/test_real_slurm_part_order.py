"""trainhub replays fixtures/22.05/part-order.sh: the order in which slurmctld weighs a job's partition limits
against each other and against its account and QOS, on the slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs
(AccountingStorageEnforce=associations,limits,qos), batch given MaxNodes=2 MaxTime=5.

What Slurm did. EnforcePartLimits=NO: at submission a job over a limit pends with PartitionConfig; the main
scheduler's next run gives ``-N 3 -t 10`` and ``-N 5 -t 10`` PartitionNodeLimit (nodes before time, also ``-N 5
-t 10`` with MaxNodes unset: the partition's 4 nodes), ``-t 10`` PartitionTimeLimit. With batch DOWN, ``-t 10``
pends with PartitionDown at once (job_limits_check: node limits, then the partition's state, then its time
limit), ``-N 3`` and ``-N 5`` with PartitionConfig, then all PartitionDown (the main scheduler tests the state
first). EnforcePartLimits=ALL: a job over both is refused as ``Node count specification invalid``, with MaxNodes
unset too; an unknown account or QOS is refused as such whatever the node count or time (_job_create validates
the association and QOS before _valid_job_part).
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from pathlib import Path

import pytest

from trainhub.common.errors import ApiError
from trainhub.inventory.models import Node
from trainhub.slurm import reports
from trainhub.slurm.models import JobState, Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services.clusters import node_features_set
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "part-order"
SECOND = dt.timedelta(seconds=1)
#: The step kinds of part-order.sh and part-edge.sh (``job``: a submission either refused or pending).
KINDS = ("part", "enforce", "features", "pend", "refuse", "job", "cancel")


def script_steps(script: Path) -> list[list[str]]:
    """A recording script's steps, in order, as words: part ARGS, enforce MODE, features, pend NAME ARGS, refuse NAME
    ARGS, job NAME ARGS, cancel."""
    return [shlex.split(line) for line in script.read_text().splitlines() if line.split(" ", 1)[0] in KINDS]


#: The script's steps, in order, as words: part ARGS, enforce MODE, pend NAME ARGS, refuse NAME ARGS, cancel.
STEPS = script_steps(REAL.with_suffix(".sh"))
PENDING = [words[1] for words in STEPS if words[0] == "pend"]
REFUSED = [words[1] for words in STEPS if words[0] == "refuse"]


def real(name: str, suffix: str = "txt") -> str:
    return (REAL / f"{name}.{suffix}").read_text()


def recorded(folder: Path, step: str, name: str) -> str:
    """A case's recording in ``folder`` for a replay's key ``step`` (``sub-{}``: sbatch's stderr and exit status,
    ``sub-{}.txt`` its stdout, ``at-{}`` and ``built-{}`` squeue's line), NAME for ``{}``."""
    key = step.format(name)
    return (folder / (key if key.endswith(".txt") else f"{key}.{'err' if step == 'sub-{}' else 'txt'}")).read_text()


def sbatch_args(args: list[str]) -> list[str]:
    """The script's sb: -p batch, -A physics unless the case names -A, -o /dev/null."""
    return ["-p", "batch", *([] if "-A" in args else ["-A", "physics"]), "-o", "/dev/null", *args, "--wrap", "true"]


def squeue(cluster: SlurmCluster, job_id: int, moment: dt.datetime) -> str:
    """``squeue -h -o '%i %T %r' -j JOB``."""
    return reports.squeue(cluster, now=moment, jobs=str(job_id), format="%i %T %r").text.split("\n", 1)[1]


def replay(cast, now, steps: list[list[str]], features: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every step of a script on trainhub: a part line updates batch's options, an enforce line slurm.conf's
    EnforcePartLimits and resets batch to its configured options (as scontrol reconfigure did), a features line
    gives each node of ``features`` those features (available and active), a pend, refuse or job case is
    submitted and, where accepted, shown at once and after one pass (the main scheduler's run)."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    users = Replay(cluster, cast).users
    batch = Partition.objects.get(cluster=cluster, name="batch")
    configured = dict(batch.config)
    answers: dict[str, str] = {}
    moment = now
    for kind, *words in steps:
        moment += 10 * SECOND
        if kind == "features":
            for name, featured in (features or {}).items():
                cluster = node_features_set(cluster=cluster, node=Node.objects.get(name=name), available=featured,
                                            active=featured, actor="root", now=moment)
        elif kind == "part":
            batch.refresh_from_db()
            update = dict(word.split("=", 1) for word in words)
            Partition.objects.filter(pk=batch.pk).update(config={**batch.config, **update})
        elif kind == "enforce":
            SlurmCluster.objects.filter(pk=cluster.pk).update(config={**cluster.config, "EnforcePartLimits": words[0]})
            Partition.objects.filter(pk=batch.pk).update(config=configured)
            cluster.refresh_from_db()
        elif kind == "cancel":
            for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING):
                job_cancel(job=job, actor=users["alice"], is_admin=True, now=moment)
        else:
            name, args = words[0], sbatch_args(["-J", words[0], *words[1:]])
            try:
                job = job_submit(cluster=cluster, user=users["alice"], now=moment,
                                 submission=Submission(argv=tuple(args), alloc_node="localhost", submit_dir="/tmp"))
            except ApiError as exc:
                answers[f"sub-{name}"] = exc.message + "\nrc=1\n"
                continue
            answers[f"sub-{name}"] = "rc=0\n"
            answers[f"sub-{name}.txt"] = submitted_message(job, Submission(argv=())) + "\n"
            answers[f"at-{name}"] = squeue(cluster, job.job_id, moment)
            run_pass(cluster, moment + SECOND)
            answers[f"built-{name}"] = squeue(cluster, job.job_id, moment + 2 * SECOND)
    return answers


@pytest.fixture
def replayed(cast, now) -> dict[str, str]:
    return replay(cast, now, STEPS)


def test_the_replay_sets_the_limits_the_recording_had():
    """The premise: scontrol's view of batch after each part line, and EnforcePartLimits after each enforce."""
    assert [real(f"part-{index}") for index in range(1, 7)] == [
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=DOWN\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n"]
    assert real("enforce-ALL") == "EnforcePartLimits       = ALL\n"


@pytest.mark.parametrize("name", PENDING)
def test_a_job_over_its_partition_is_accepted_and_pends_as_in_slurm(replayed, name):
    assert (replayed[f"sub-{name}"], replayed[f"sub-{name}.txt"]) == (real(f"sub-{name}", "err"),
                                                                       real(f"sub-{name}"))
    assert replayed[f"at-{name}"] == real(f"at-{name}")


@pytest.mark.parametrize("name", PENDING)
def test_the_main_schedulers_run_gives_the_reason_slurm_gave(replayed, name):
    assert replayed[f"built-{name}"] == real(f"built-{name}")


@pytest.mark.parametrize("name", REFUSED)
def test_enforce_part_limits_refuses_with_slurms_first_error(replayed, name):
    assert replayed[f"sub-{name}"] == real(f"sub-{name}", "err")
    assert real(f"sub-{name}") == ""
