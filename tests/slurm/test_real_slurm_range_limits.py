"""trainhub replays fixtures/22.05/range-limits.sh (issue 19): node ranges under limits on the slurm-harness
cluster of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU, AccountingStorageEnforce=associations,limits,qos.

What Slurm did: select takes a ``-N MIN-MAX`` job's MAX nodes (one task's CPU on each without -n) and only
then counts its limits on them (acct_policy_job_runnable_post_select): under GrpTRES=cpu=3 ``-N 1-4`` beside
4 idle nodes waits AssocGrpCpuLimit (NODES 4, CPUS 1) and never tries fewer nodes, ``-N 1-4 -n 2`` runs on
2; under MaxTRESPerJob=cpu=2 it waits AssocMaxCpuPerJobLimit. ``--gpus=N`` without -N takes as many nodes as
its GPUs need, at most the node limits' (MaxTRESPerJob=node=2, GrpTRES=node=2, the QOS's MaxTRESPerJob) and
the partition's MaxNodes: beside 2 free GPUs a node ``--gpus=6`` waits with Resources under each. Under those
node limits ``-N 1-4`` runs on 2 nodes, and ``-N 3-4`` waits AssocMaxNodePerJobLimit showing NumNodes=3-4 (no
node test at its submission). ``-N 1-4`` under MaxNodes=2 waits PartitionNodeLimit (its MAX is over it),
showing NumNodes=1-4.

The replay compares each case's squeue (every job's state, nodes, CPUs, nodes or reason) and scontrol's
state, reason and node count lines; not their clocks (each case is one main-scheduler pass here).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_nsplit import end
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "range-limits"
WORK = "/tmp/range-limits"
SQUEUE = "%i|%j|%T|%D|%C|%b|%N|%R"
SECOND = dt.timedelta(seconds=1)
#: Between two steps: more than batch_sched_delay, so that each submission meets a main-scheduler pass.
STEP = 5 * SECOND
#: scontrol's lines a case compares: its state and reason, its node count and CPUs.
COMPARED = re.compile(r"^\s+(JobState=|NumNodes=)")


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def steps() -> list[tuple[str, str, list[str]]]:
    """range-limits.sh's steps in order: (``limit``, NAME, the command), (``case``, NAME, alice's sbatch
    arguments), (``hold``, NAME, sbatch arguments: bob's, or alice's grp-used2), (``end``, "", the jobs)."""
    found = []
    script = REAL.with_suffix(".sh").read_text()
    for line in script[script.index("\n# GrpTRES=cpu=3"):].splitlines():
        if line.startswith("for n in") and "hold" in line:  # for n in 1 2 3 4; do hold gpu-hold$n -w gpu$n ...; done
            loop, body = line.split("; do ")
            for n in loop.split()[3:]:
                args = shlex.split(body.split(";")[0].replace("$n", n))
                found.append(("hold", args[1], args[2:]))
            continue
        words = shlex.split(line.split("#")[0].split(";")[0])
        if not words:
            continue
        if words[0] == "limit":
            command = words[2:]
            if words[2] == "$ASSOC":
                command = ["sacctmgr", "-i", "modify", "user", "alice", "where", "account=physics",
                           "partition=batch", "set", *words[3:]]
            found.append(("limit", words[1], command))
        elif words[0] == "case_":
            found.append(("case", words[1], words[2:]))
        elif words[0] == "end":
            found.append(("end", "", words[1:]))
        elif words[:2] == ["rec", "sbatch-grp-used2"]:
            found.append(("hold", "grp-used2", words[words.index("grp-used2") + 1:-2]))
    return found


def replay(cast, now) -> tuple[SlurmCluster, dict[str, dict[str, str]]]:
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos", PriorityCalcPeriod="10")
    # as the recording's: no decay run while it ran, every job's Priority=10000
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=now, last_priority_time=now)
    harness = Replay(cluster, cast)
    jobs: dict[str, SlurmJob] = {}
    outcomes: dict[str, dict[str, str]] = {}
    moment = now

    def submit(name: str, user: str, args: list[str]) -> SlurmJob:
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", "-J", name, *args, "--wrap", "sleep 600")
        return job_submit(cluster=cluster, user=harness.users[user], now=moment,
                          submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))

    script = steps()
    held = {row[1]: tuple(dt.datetime.fromisoformat(text) for text in row[2:4])
            for row in (line.split("|") for line in real("sacct-times").splitlines()[1:]) if row[3] != "None"}
    for index, (kind, name, args) in enumerate(script):
        moment += STEP
        if kind == "limit":
            if args[0] == "sacctmgr":
                sacctmgr_run(cluster=cluster, line=shlex.join(args), actor="root", is_admin=True, now=moment)
            else:  # scontrol update PartitionName=batch MaxNodes=...
                partition = Partition.objects.get(cluster=cluster, name="batch")
                config = {**partition.config, "MaxNodes": args[-1].split("=")[1]}
                if config["MaxNodes"] == "UNLIMITED":
                    config.pop("MaxNodes")
                Partition.objects.filter(pk=partition.pk).update(config=config)
        elif kind == "hold":
            jobs[name] = submit(name, "alice" if name == "grp-used2" else "bob", args)
            submitted, started = held[name]
            if started == submitted:  # started by slurmctld's node test at its submission
                run_pass(cluster, moment)
            elif script[index + 1][0] != "hold":  # the others submitted with it by the main scheduler's next run
                moment += started - submitted
                run_pass(cluster, moment)
        elif kind == "end":
            for ended in args:
                end(jobs[ended], harness, moment)
            run_pass(cluster, moment)
        else:
            jobs[name] = job = submit(name, "alice", args)
            run_pass(cluster, moment)
            moment += 2 * SECOND
            job.refresh_from_db()
            outcomes[name] = {
                "squeue": reports.squeue(cluster, now=moment, format=SQUEUE).text,
                "scontrol": "".join(line for line in reports.scontrol_jobs(
                    cluster, now=moment, job=str(job.job_id)).text.splitlines(keepends=True) if COMPARED.match(line))}
            end(job, harness, moment)
            run_pass(cluster, moment)
    return cluster, outcomes


@pytest.fixture
def replayed(cast, now):
    return replay(cast, now)


def test_each_case_runs_or_waits_as_slurm_did(replayed):
    _, outcomes = replayed
    assert {name: outcome["squeue"] for name, outcome in outcomes.items()} == {
        name: real(f"squeue-{name}") for name in outcomes}


def test_scontrol_shows_each_cases_reason_and_node_count_as_slurm_did(replayed):
    _, outcomes = replayed
    recorded = {name: "".join(line for line in real(f"scontrol-{name}").splitlines(keepends=True)
                              if COMPARED.match(line)) for name in outcomes}
    assert {name: outcome["scontrol"] for name, outcome in outcomes.items()} == recorded
