"""trainhub replays fixtures/22.05/node-range.sh (issue 19): ``-N MIN-MAX`` beside busy nodes (allocated to
other jobs, not drained) on the slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU.

What Slurm did: with gpu1 and gpu2's CPUs all held, ``-N 1-3`` and ``-N 2-4`` (with -n, --gres, --gpus) start
at once on the 2 free nodes; with only their GPUs held, ``-N 1-3`` takes 3 nodes (it needs no GPU) and ``-N 1-3
--gres=gpu:1`` the 2 with GPUs free. ``-N 3-4`` waits (Resources) showing ``NumNodes=4-4`` (squeue's NODES 4,
--start's N/A until a backfill iteration) and starts on 3 nodes once a holding job ends; ``-N 2-4 --gres=gpu:1``
beside 3 nodes without a free GPU starts on 2. Backfill plans a waiting ``-N 2-4`` for when a second node
frees, on those 2 (planned-N2-4: gpu[1,4]), and leaves ``-N 3-4`` behind it unplanned (Priority, N/A: the
first holds gpu[1,4] for ever, and only 2 others ever free). After it started a job shows the nodes it got
(NumNodes, TRES), but sacct's ReqTRES keeps its request: MIN nodes, their memory, ``--gres``'s GPUs on MIN
nodes and without -n one CPU; a job cancelled before it ran has MIN nodes.

The recording's clock: each case's SubmitTime and LastSchedEval (the main scheduler's pass that started it or
left it pending); a holding job's Submit and Start (sacct-times.txt); a holding job ended at the StartTime of the job that waited for it; the backfill thread's
iterations every 30 s (bf_interval), one at 01:03:07 (planned-*: LastSchedEval, Scheduler=Backfill:*), one at
01:02:07, the second wait-N3-4 was submitted in, before the main scheduler's run for it (Scheduler=Main). The
harness ran with PriorityCalcPeriod=10: no decay run, every job's Priority=10000.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import reports, snapshot
from trainhub.slurm.formats import sacct_text
from trainhub.slurm.models import Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.allocations import allocation_submit
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_gputype import _as_trainhubs
from .test_real_slurm_nsplit import end
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "node-range"
#: The recording's $WORK (its sbatch's working directory).
WORK = "/tmp/node-range.g3vhhZ"
SQUEUE = "%i|%j|%T|%D|%C|%b|%N|%R"
SECOND = dt.timedelta(seconds=1)
#: One of the recording's backfill iterations, bf_interval apart (planned-*'s LastSchedEval); the one 60 s
#: before gave wait-N3-4, submitted at 01:02:07, its start a year on (start-wait-N3-4).
BACKFILL = dt.datetime(2026, 12, 6, 1, 3, 7, tzinfo=dt.UTC)
BF_INTERVAL = dt.timedelta(seconds=30)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def recorded_time(name: str, field: str) -> dt.datetime:
    found = re.search(rf"\b{field}=(\S+)", real(f"scontrol-{name}"))
    return dt.datetime.fromisoformat(found[1]).replace(tzinfo=dt.UTC)


def shown_at(name: str) -> dt.datetime:
    return dt.datetime.fromisoformat(real(f"date-{name}").strip()).replace(tzinfo=dt.UTC)


def steps() -> list[tuple[str, str, list[str]]]:
    """node-range.sh's steps in order: (``hold``, NAME, sbatch arguments), (``case``, NAME, arguments),
    (``keep``, NAME, arguments) for KEEP=1, (``end``, "", the jobs' names) and (``show``, NAME, [the job's
    name])."""
    found = []
    script = REAL.with_suffix(".sh").read_text()
    for line in script[script.index("\n# gpu1 and gpu2"):].splitlines():
        words = shlex.split(line.split("#")[0].split(";")[0])  # a line's first command
        if not words:
            continue
        if words[0] in ("hold", "case_"):
            found.append(("hold" if words[0] == "hold" else "case", words[1], words[2:]))
        elif words[:2] == ["KEEP=1", "case_"]:
            found.append(("keep", words[2], words[3:]))
        elif words[0] == "show":
            found.append(("show", words[1], re.findall(r"JOB\[(.+)\]", words[2])))
        elif words[0] == "end":
            found.append(("end", "", words[1:]))
    return found


def run_at(cluster: SlurmCluster, moment: dt.datetime) -> None:
    """A scheduler pass at ``moment``, with the recording's backfill iterations: one at BACKFILL and every
    BF_INTERVAL before and after it, so that the pass runs backfill only at one of those moments."""
    since = (moment - BACKFILL) % BF_INTERVAL
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=moment - (since or BF_INTERVAL))
    run_pass(cluster, moment)


def replay_steps(cast, now) -> tuple[SlurmCluster, dict[str, dict[str, str]]]:
    cluster, _ = harness_cluster(cast, now, PriorityCalcPeriod="10")
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=BACKFILL, last_priority_time=BACKFILL)
    harness = Replay(cluster, cast)
    alice = harness.users["alice"]
    jobs: dict[str, SlurmJob] = {}
    outcomes: dict[str, dict[str, str]] = {}
    moment = now
    script = steps()
    held = {row[1]: tuple(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC) for text in row[2:4])
            for row in (line.split("|") for line in real("sacct-times").splitlines()[1:]) if "hold" in row[1]}

    def submit(name: str, args: list[str], at: dt.datetime) -> None:
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", "-J", name, *args, "--wrap", "sleep 600")
        jobs[name] = job_submit(cluster=cluster, user=alice, now=at,
                                submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))
        outcomes[name] = {"sbatch": submitted_message(jobs[name], Submission(argv=argv)) + "\n"}

    def show(name: str, job: SlurmJob) -> None:
        at = shown_at(name)
        job.refresh_from_db()
        cluster.refresh_from_db()
        outcomes.setdefault(name, {}).update(
            squeue=reports.squeue(cluster, now=at, format=SQUEUE).text,
            scontrol=reports.scontrol_jobs(cluster, now=at, job=str(job.job_id)).text,
            **({"start": reports.squeue(cluster, now=at, start=True, jobs=str(job.job_id)).text}
               if job.state == "PENDING" else {}))

    for index, (kind, name, args) in enumerate(script):
        following = next((step for step in script[index + 1:] if step[0] != "hold"), None)
        if kind == "hold":
            # submitted and started (together, by the main scheduler's next run) as sacct-times shows
            moment, started = held[name]
            submit(name, args, moment)
            if script[index + 1][0] != "hold":
                moment = started
                run_at(cluster, moment)
        elif kind in ("case", "keep"):
            submit(name, args, recorded_time(name, "SubmitTime"))
            run_at(cluster, recorded_time(name, "LastSchedEval"))
            show(name, jobs[name])
            moment = shown_at(name) + SECOND
            if kind == "case":
                end(jobs[name], harness, moment)
        elif kind == "end":
            # a job waiting for the ended ones starts at once (the after-* StartTime)
            moment = (recorded_time(following[1], "StartTime") if following and following[0] == "show"
                      and "JobState=RUNNING" in real(f"scontrol-{following[1]}") else moment + SECOND)
            for ended in args:
                end(jobs[ended], harness, moment)
            run_at(cluster, moment)
        else:
            if recorded_time(name, "LastSchedEval") > moment:  # a backfill iteration since (planned-*)
                moment = BACKFILL
                run_at(cluster, moment)
            show(name, jobs[args[0]])
            moment = max(moment, shown_at(name))
    return cluster, outcomes


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
    """start-*: N/A before a backfill iteration, a year on once one saw the holding jobs without a time limit
    (wait-N3-4); planned-N2-4 at plan-hold1's end on gpu[1,4]; planned-N3-4, behind it, N/A (Priority):
    plan-N2-4's reservation, without a time limit, reaches bf_window's end and holds gpu[1,4] for the rest
    of the iteration, and only 2 other nodes ever free."""
    _, outcomes = replayed
    shown = {name: outcome["start"] for name, outcome in outcomes.items() if "start" in outcome}
    recorded = {path.stem.removeprefix("start-"): path.read_text() for path in REAL.glob("start-*.txt")}
    assert shown == recorded


def test_scontrol_show_job_prints_what_it_printed(replayed):
    _, outcomes = replayed
    shown = {f"scontrol-{name}": outcome["scontrol"] for name, outcome in outcomes.items() if "scontrol" in outcome}
    assert len(shown) == 22
    assert scontrol_differences(shown, REAL) == {}


def test_sacct_keeps_the_request_and_shows_what_each_job_got(replayed):
    """sacct.txt: ReqTRES is MIN nodes (their memory, --gres's GPUs on each), the tasks' CPUs (one without -n);
    AllocTRES and NNodes the nodes it ran on; a job cancelled while it waited MIN nodes and its CPUs; none for
    the held and --begin jobs cancelled before they were eligible. Not compared: State's canceller (the replay cancels as alice, the
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


def test_salloc_of_a_node_range_gets_the_free_nodes_at_once(cast, now):
    """As sbatch's (the same select test when slurmctld receives the request): beside gpu1 and gpu2's held
    CPUs ``salloc -N 1-3`` is granted gpu[3-4] (seen on the harness by hand, not recorded: SLURM_NNODES=2,
    SLURM_JOB_NODELIST=gpu[3-4])."""
    cluster, _ = harness_cluster(cast, now)
    alice = Replay(cluster, cast).users["alice"]
    for node in ("gpu1", "gpu2"):
        job_submit(cluster=cluster, user=alice, now=now, submission=Submission(
            argv=("-A", "physics", "-p", "batch", "-w", node, "-N", "1", "-n", "16", "--wrap", "sleep 300"),
            alloc_node="localhost", submit_dir=WORK))
    run_pass(cluster, now)
    job = allocation_submit(cluster=cluster, user=alice, is_admin=False, now=now + 3 * SECOND, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N", "1-3"), allocation=True))
    run_pass(cluster, now + 3 * SECOND)
    job.refresh_from_db()
    assert (job.state, job.node_list, job.num_nodes, job.min_nodes) == ("RUNNING", "gpu[3-4]", 2, 1)


def test_a_requeued_node_range_asks_again_for_min_tasks(cast, now):
    """A node range without -n that ran on 3 nodes (a task each) and was requeued asks again for a task on
    each of MIN nodes, one CPU in all: beside 3 full nodes and one with a CPU free it starts on that one
    with one task, as the same job submitted then would, not waiting for 3 CPUs there."""
    cluster, _ = harness_cluster(cast, now)
    alice = Replay(cluster, cast).users["alice"]

    def submit(at: dt.datetime, *args: str) -> SlurmJob:
        argv = ("-A", "physics", "-p", "batch", *args, "--wrap", "sleep 600")
        return job_submit(cluster=cluster, user=alice, now=at,
                          submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))

    job = submit(now, "-N", "1-3")
    run_pass(cluster, now + SECOND)
    job.refresh_from_db()
    assert (job.node_list, job.num_tasks) == ("gpu[1-3]", 3)
    lifecycle.job_requeue(job=job, now=now + 2 * SECOND, record_state="REQUEUED", desc="requeued by test")
    job.refresh_from_db()
    assert (job.state, job.num_tasks) == ("PENDING", 1)
    for node, tasks in (("gpu1", "16"), ("gpu2", "16"), ("gpu3", "16"), ("gpu4", "15")):
        submit(now + 3 * SECOND, "-w", node, "-N", "1", "-n", tasks)
    run_pass(cluster, now + 4 * SECOND)
    run_pass(cluster, now + 4 * SECOND + lifecycle.REQUEUE_DELAY)
    job.refresh_from_db()
    assert (job.state, job.node_list, job.num_nodes, job.num_tasks) == ("RUNNING", "gpu4", 1, 1)


def test_a_node_range_over_the_partitions_max_nodes_waits(cast, now):
    """_part_access_check tests a job's MAX against the partition's MaxNodes: ``-N 1-4`` in a partition of
    MaxNodes=2 waits PartitionNodeLimit beside idle nodes, showing its range (no node test at submission),
    as ``-N 3-4`` does; ``-N 1-2`` runs (fixtures/22.05/range-limits pm-N1-4: NumNodes=1-4)."""
    cluster, _ = harness_cluster(cast, now)
    partition = Partition.objects.get(cluster=cluster, name="batch")
    Partition.objects.filter(pk=partition.pk).update(config={**partition.config, "MaxNodes": "2"})
    alice = Replay(cluster, cast).users["alice"]
    jobs = [job_submit(cluster=cluster, user=alice, now=now, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N", nodes, "--wrap", "sleep 600"), alloc_node="localhost",
        submit_dir=WORK)) for nodes in ("1-4", "3-4", "1-2")]
    run_pass(cluster, now + SECOND)
    for job in jobs:
        job.refresh_from_db()
    assert [(job.state, job.node_list, job.reason, job.num_nodes) for job in jobs] == [
        ("PENDING", "", "PartitionNodeLimit", 1), ("PENDING", "", "PartitionNodeLimit", 3),
        ("RUNNING", "gpu[1-2]", "None", 2)]


def test_a_node_range_takes_at_most_its_limits_nodes(cast, now):
    """select_nodes caps a job's MAX at its association's and QOS's node limits (acct_policy_get_max_nodes):
    ``-N 1-4`` of a user with MaxTRESPerJob=node=2 runs on 2 idle nodes, not 4."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    sacctmgr_run(cluster=cluster, line="sacctmgr -i modify user alice set MaxTRESPerJob=node=2", actor="root",
                 is_admin=True, now=now)
    job = job_submit(cluster=cluster, user=Replay(cluster, cast).users["alice"], now=now, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N", "1-4", "--wrap", "sleep 600"), alloc_node="localhost",
        submit_dir=WORK))
    run_pass(cluster, now + SECOND)
    job.refresh_from_db()
    assert (job.state, job.node_list, job.num_nodes) == ("RUNNING", "gpu[1-2]", 2)
