"""The replay of the part-*.sh recordings (fixtures/22.05/part-order.sh, part-edge.sh, part-more.sh) on trainhub:
their steps as words, a case's recorded files, and every step run through job_submit, a scheduler pass and
reports.squeue, as tests/slurm/test_real_slurm_part_order.py, test_real_slurm_part_edge.py and
test_real_slurm_part_more.py compare them with the recording."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainhub.common.errors import ApiError
from trainhub.inventory.models import Node
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, Partition, SlurmCluster
from trainhub.slurm.services.clusters import node_features_set
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_sched import Replay

SECOND = dt.timedelta(seconds=1)
#: The step kinds of part-order.sh, part-edge.sh and part-more.sh (``job``: a submission either refused or pending).
KINDS = ("part", "enforce", "features", "pend", "refuse", "job", "cancel")
#: constraint.sh's features, as the features lines of part-edge.sh and part-more.sh set them.
FEATURES = {"gpu1": "a100,ib", "gpu2": "a100,ib", "gpu3": "v100", "gpu4": "h100"}
#: The keys of what an accepted case recorded: sbatch's stderr and exit status, its stdout, squeue's line at once
#: and after the main scheduler's run.
ACCEPTED_STEPS = ("sub-{}", "sub-{}.txt", "at-{}", "built-{}")
FIXTURES = Path(__file__).parent / "fixtures" / "22.05"


def script_steps(script: Path) -> list[list[str]]:
    """A recording script's steps, in order, as words: part ARGS, enforce MODE, features, pend NAME ARGS, refuse NAME
    ARGS, job NAME ARGS, cancel."""
    return [shlex.split(line) for line in script.read_text().splitlines() if line.split(" ", 1)[0] in KINDS]


@dataclass(frozen=True)
class Recording:
    """A part-*.sh script with features lines (part-edge.sh, part-more.sh) and what it recorded into the folder of its
    name: its job cases, those Slurm accepted (they have their squeue line, at-NAME) and those it refused (none)."""

    folder: Path
    steps: list[list[str]]
    pending: list[str]
    refused: list[str]

    @classmethod
    def named(cls, name: str) -> Recording:
        folder = FIXTURES / name
        steps = script_steps(folder.with_suffix(".sh"))
        cases = [words[1] for words in steps if words[0] == "job"]
        accepted = [case for case in cases if (folder / f"at-{case}.txt").exists()]
        return cls(folder, steps, accepted, [case for case in cases if case not in accepted])

    def real(self, name: str) -> str:
        """A command's recorded stdout (NAME.txt)."""
        return (self.folder / f"{name}.txt").read_text()

    def recorded(self, step: str, name: str) -> str:
        """A case's recording for a replay's key ``step`` (``sub-{}``: sbatch's stderr and exit status, ``sub-{}.txt``
        its stdout, ``at-{}`` and ``built-{}`` squeue's line), NAME for ``{}``."""
        key = step.format(name)
        return (self.folder / (key if key.endswith(".txt") else f"{key}.{'err' if step == 'sub-{}' else 'txt'}")
                ).read_text()

    def replay(self, cast, now) -> dict[str, str]:
        """The script replayed on trainhub (``replay``), its features lines setting FEATURES."""
        return replay(cast, now, self.steps, FEATURES)


def sbatch_args(args: list[str]) -> list[str]:
    """The script's sb: -p batch, -A physics unless the case names -A, -o /dev/null."""
    return ["-p", "batch", *([] if "-A" in args else ["-A", "physics"]), "-o", "/dev/null", *args, "--wrap", "true"]


def squeue(cluster: SlurmCluster, job_id: int, moment: dt.datetime) -> str:
    """``squeue -h -o '%i %T %r' -j JOB``."""
    return reports.squeue(cluster, now=moment, jobs=str(job_id), format="%i %T %r").text.split("\n", 1)[1]


def _ended(cluster: SlurmCluster, moment: dt.datetime) -> None:
    """Every job the pass started ends at once, as ``--wrap true`` did on Slurm: its batch script exits 0 and the
    epilogs are done (fixtures/22.05/part-more: ``-N 2 -C a100*2`` ran, squeue shows nothing after the main
    scheduler's run)."""
    for job_node in JobNode.objects.filter(job__cluster=cluster, job__state=JobState.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=0, signal=0, max_rss_kb=None, now=moment)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG):
        job_node_epilog_finished(job_node=job_node, exit_code=0, now=moment)


def replay(cast, now, steps: list[list[str]], features: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every step of a script on trainhub: a part line updates batch's options, an enforce line slurm.conf's
    EnforcePartLimits and resets batch to its configured options (as scontrol reconfigure did), a features line
    gives each node of ``features`` those features (available and active), a pend, refuse or job case is
    submitted and, where accepted, shown at once and after one pass (the main scheduler's run), a job the pass
    started having ended; a cancel line cancels every job and ends those running."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    jobs = Replay(cluster, cast)
    users = jobs.users
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
            jobs.clear(moment)
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
            _ended(cluster, moment + SECOND)
            answers[f"built-{name}"] = squeue(cluster, job.job_id, moment + 2 * SECOND)
    return answers
