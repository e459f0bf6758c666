"""trainhub replays fixtures/22.05/node-range.sh (issue 19): ``-N MIN-MAX`` beside busy nodes (allocated to
other jobs, not drained) on the slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU.

What Slurm did: with gpu1 and gpu2's CPUs all held, ``-N 1-3`` and ``-N 2-4`` (with -n, --gres, --gpus) start
at once on the 2 free nodes; with only their GPUs held, ``-N 1-3`` takes 3 nodes (it needs no GPU) and ``-N 1-3
--gres=gpu:1`` the 2 with GPUs free. ``-N 3-4`` waits (Resources) showing ``NumNodes=4-4`` (squeue's NODES 4,
--start's N/A) and starts on 3 nodes once a holding job ends; ``-N 2-4 --gres=gpu:1`` beside 3 nodes without a
free GPU starts on 2. After it started a job shows the nodes it got (NumNodes, TRES), but sacct's ReqTRES keeps
its request: MIN nodes, their memory and ``--gres``'s GPUs on MIN nodes.

The recording's clock: each case's SubmitTime and LastSchedEval (the main scheduler's pass that started it or
left it pending); a holding job ended at the StartTime of the job that waited for it. The decay thread ran
between 00:28:41 and 00:28:49 (alice's usage charged: Priority=1428 from g-N1-3 on); no backfill iteration
evaluated the waiting jobs (start-*: N/A).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import reports, snapshot
from trainhub.slurm.formats import sacct_text
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_gputype import _as_trainhubs
from .test_real_slurm_nsplit import end
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "node-range"
#: The recording's $WORK (its sbatch's working directory).
WORK = "/tmp/node-range.xCHc6K"
SQUEUE = "%i|%j|%T|%D|%C|%b|%N|%R"
SECOND = dt.timedelta(seconds=1)
#: A minute before the decay run that charged alice's usage, before gpu-hold1 and gpu-hold2's submission
#: (squeue-g-N1-3 lists them after g-N1-3 of Priority=1428, so theirs was no higher).
DECAY_RUN = dt.datetime(2026, 12, 6, 0, 27, 46, tzinfo=dt.UTC)
#: No backfill iteration within the waiting jobs' seconds (bf_interval 30 s).
BACKFILL_RUN = dt.datetime(2026, 12, 6, 0, 28, 40, tzinfo=dt.UTC)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def recorded_time(name: str, field: str) -> dt.datetime:
    found = re.search(rf"\b{field}=(\S+)", real(f"scontrol-{name}"))
    return dt.datetime.fromisoformat(found[1]).replace(tzinfo=dt.UTC)


def shown_at(name: str) -> dt.datetime:
    return dt.datetime.fromisoformat(real(f"date-{name}").strip()).replace(tzinfo=dt.UTC)


def steps() -> list[tuple[str, str, list[str]]]:
    """node-range.sh's steps in order: (``hold``, NAME, sbatch arguments), (``case``, NAME, arguments),
    (``keep``, NAME, arguments) for KEEP=1, (``release``, "", the holding jobs' names) for their scancel,
    (``show``, NAME, []) and (``cancel``, "", []) for the kept job's."""
    found = []
    script = REAL.with_suffix(".sh").read_text()
    for line in script[script.index("declare -A HOLD"):].splitlines():
        words = shlex.split(line.split("#")[0].split(";")[0])  # a line's first command
        if not words:
            continue
        if words[0] in ("hold", "case_"):
            found.append(("hold" if words[0] == "hold" else "case", words[1], words[2:]))
        elif words[:2] == ["KEEP=1", "case_"]:
            found.append(("keep", words[2], words[3:]))
        elif words[0] == "show":
            found.append(("show", words[1], []))
        elif words[0] == "scancel":
            held = [name for word in words[1:] for name in re.findall(r"HOLD\[(.+)\]", word)]
            found.append(("release", "", held) if held else ("cancel", "", []))
    return found


def _next(after: int, kind: tuple[str, ...]) -> tuple[str, str, list[str]] | None:
    return next((step for step in steps()[after + 1:] if step[0] in kind), None)


def replay_steps(cast, now) -> tuple[SlurmCluster, dict[str, dict[str, str]]]:
    cluster, _ = harness_cluster(cast, now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=BACKFILL_RUN, last_decay_time=DECAY_RUN,
                                                      last_priority_time=DECAY_RUN)
    harness = Replay(cluster, cast)
    alice = harness.users["alice"]
    jobs: dict[str, SlurmJob] = {}
    outcomes: dict[str, dict[str, str]] = {}
    kept: SlurmJob | None = None
    moment = now

    def submit(name: str, args: list[str], at: dt.datetime) -> SlurmJob:
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", "-J", name, *args, "--wrap", "sleep 600")
        job = job_submit(cluster=cluster, user=alice, now=at,
                         submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))
        outcomes[name] = {"sbatch": submitted_message(job, Submission(argv=argv)) + "\n"}
        return job

    def show(name: str, job: SlurmJob) -> None:
        at = shown_at(name)
        job.refresh_from_db()
        outcomes.setdefault(name, {}).update(
            squeue=reports.squeue(cluster, now=at, format=SQUEUE).text,
            scontrol=reports.scontrol_jobs(cluster, now=at, job=str(job.job_id)).text,
            **({"start": reports.squeue(cluster, now=at, start=True, jobs=str(job.job_id)).text}
               if job.state == "PENDING" else {}))

    for index, (kind, name, args) in enumerate(steps()):
        if kind == "hold":
            # the holding jobs are submitted 4 s (the script's sleep) before the next case, and started
            # together by the main scheduler's next run
            following = _next(index, ("case", "keep"))[1]
            moment = recorded_time(following, "SubmitTime") - 4 * SECOND
            jobs[name] = submit(name, args, moment)
            if steps()[index + 1][0] != "hold":
                run_pass(cluster, moment)
        elif kind in ("case", "keep"):
            job = submit(name, args, recorded_time(name, "SubmitTime"))
            run_pass(cluster, recorded_time(name, "LastSchedEval"))
            show(name, job)
            moment = shown_at(name) + SECOND
            if kind == "keep":
                kept = job
            else:
                end(job, harness, moment)
        elif kind == "release":
            following = _next(index, ("show", "case", "keep", "hold"))
            if following and following[0] == "show":
                moment = recorded_time(following[1], "StartTime")
            for held in args:
                end(jobs[held], harness, moment)
            run_pass(cluster, moment)
        elif kind == "show":
            show(name, kept)
        else:
            moment = shown_at(name or _previous_show(index)) + SECOND
            end(kept, harness, moment)
    return cluster, outcomes


def _previous_show(index: int) -> str:
    return next(name for kind, name, _ in reversed(steps()[:index]) if kind == "show")


@pytest.fixture
def replayed(cast, now):
    return replay_steps(cast, now)


def test_sbatch_answers_as_slurm(replayed):
    _, outcomes = replayed
    answered = {name: outcome["sbatch"] for name, outcome in outcomes.items() if "sbatch" in outcome}
    assert answered == {name: real(f"sbatch-{name}") for name in answered}


def test_a_node_range_starts_on_the_free_nodes_it_has_at_least_min_of(replayed):
    """squeue-*: ``-N 1-3`` and ``-N 2-4`` run on gpu[3-4] beside gpu1 and gpu2's held CPUs; ``-N 1-3`` without
    GPUs on gpu[1-3] beside their held GPUs; a waiting ``-N 3-4`` shows 4 nodes, then runs on gpu[2-4]."""
    cluster, outcomes = replayed
    shown = {name: _as_trainhubs(outcome["squeue"], cluster) for name, outcome in outcomes.items()
             if "squeue" in outcome}
    assert shown == {name: real(f"squeue-{name}") for name in shown}


def test_squeue_start_shows_a_waiting_node_range_as_slurm_does(replayed):
    _, outcomes = replayed
    shown = {name: outcome["start"] for name, outcome in outcomes.items() if "start" in outcome}
    assert shown == {name: real(f"start-{name}") for name in ("wait-N3-4", "wait-N2-4-gres1")}


def test_scontrol_show_job_prints_what_it_printed(replayed):
    cluster, outcomes = replayed
    shown = {f"scontrol-{name}": outcome["scontrol"] for name, outcome in outcomes.items() if "scontrol" in outcome}
    assert len(shown) == 14
    # scontrol-g-N1-3 ran in the second after its date-g-N1-3 (RunTime 2 s after StartTime=00:28:54)
    assert scontrol_differences(shown, REAL) == {"scontrol-g-N1-3": [
        "-   RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A", "+   RunTime=00:00:01 TimeLimit=UNLIMITED TimeMin=N/A"]}


def test_sacct_keeps_the_request_and_shows_what_each_job_got(replayed):
    """sacct.txt: ReqTRES is MIN nodes (their memory, --gres's GPUs on each), the tasks' CPUs; AllocTRES and
    NNodes the nodes it ran on. Not compared: State's canceller (the replay cancels as alice, the
    recording as root)."""
    cluster, _ = replayed
    fields = ["JobID", "JobName", "NNodes", "NodeList", "AllocCPUS", "ReqTRES", "AllocTRES"]
    records = reports.sacct(cluster, now=dt.datetime(2026, 12, 6, 1, tzinfo=dt.UTC), viewer="root",
                            all_users=True, allocations=True, fields=fields).items
    shown = sacct_text([record for record, _ in records], fields=fields, parsable="plain")
    recorded = [line.split("|") for line in _as_trainhubs(real("sacct"), cluster).splitlines()]
    assert shown.splitlines() == ["|".join(row[:2] + row[3:]) for row in recorded]


def test_a_waiting_node_range_counts_its_minimum_for_its_share_limits_and_priority(cast, now):
    """wait-N3-4 shows NumNodes=4-4 once tried, but slurmctld's limits and job size factor read its
    min_nodes and min_cpus (TRES=cpu=1,...,node=3): trainhub's too (snapshot.asked_nodes, job_cpus), and each
    of its nodes still needs one task's CPU."""
    cluster, _ = harness_cluster(cast, now)
    alice = Replay(cluster, cast).users["alice"]

    def submit(*args: str) -> SlurmJob:
        argv = ("-A", "physics", "-p", "batch", *args, "--wrap", "sleep 600")
        return job_submit(cluster=cluster, user=alice, now=now,
                          submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))

    submit("-w", "gpu1", "-N", "1", "-n", "16")
    submit("-w", "gpu2", "-N", "1", "-n", "16")
    run_pass(cluster, now)
    job = submit("-N", "3-4")
    run_pass(cluster, now + 4 * SECOND)
    job.refresh_from_db()
    assert (job.state, job.num_nodes, job.min_nodes) == ("PENDING", 4, 3)
    state = snapshot.load_cluster(cluster, now=now)
    assert snapshot.limit_request(job, state).nodes == 3
    assert {name: snapshot.job_tres(job, state)[name] for name in ("node", "cpu")} == {"node": 3, "cpu": 1}
    assert state.per_node_request(job).cpus == 1
