"""trainhub replays fixtures/22.05/job-records.sh (issue 19): job records on the slurm-harness cluster of 4
nodes x 16 CPUs x 16000 MB x 8 GPUs, CR_CPU, AccountingStorageEnforce=associations,limits,qos.

What Slurm did. NumTasks: ``-N 2 -n 3`` shows 3 and ``-N 2 --ntasks-per-node=2`` 4 whether it runs, is held,
waits for Resources or was cancelled while held; ``-N 2`` alone shows its node count, but N/A (squeue's
TASKS 4294967294, NO_VAL) once cancelled while held, as a refused ``--gres=gpu:9`` does: slurmctld keeps -n's
count from submission, and without one packs the pending job's nodes or its allocation's. sacct's Reason is
``None`` for every job record, finished, running, pending, held, cancelled and refused (the held jobs' first
records came before the build that kept JobHeldUser), but ``PartitionConfig`` for ``-N 5`` on the 4-node
partition (squeue's PartitionNodeLimit: its submission's reason, which the build after it kept before its record
went; fixtures/22.05/part-reason), blank for a step (formats.accounting_reason). The replay sends the records
on slurmctld's 5-second ticks between those builds.
EnforcePartLimits=ALL and ANY with the partition's MaxNodes=2 refuse a node range whose MAX is over it
(``-N 1-4``, ``-N 2-4``) as they refuse ``-N 3``, and ``-N 1-2`` runs on 2. A node range's billing is counted
again on the nodes select chose (GrpTRES=billing=3: ``-N 1-4`` waits AssocGrpBilling, ``-N 1-3`` runs on 3),
and under CR_CPU GrpTRES=mem= holds nothing back (``-N 3-4 --mem=8000`` asks 24000M of 20000 and runs on 4).
job-records-mem.sh, on a harness with CR_CPU_Memory: memory is counted again on the nodes select chose
(``-N 1-4 --mem=8000`` waits AssocGrpMemLimit showing NumNodes=4-4, ``-N 1-2`` runs on 2).

The replay steps its own clock on the recording's (scontrol's SubmitTime/StartTime/EndTime).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

import pytest

from trainhub.common.errors import ApiError
from trainhub.slurm import formats, reports
from trainhub.slurm.models import Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services.accounting import job_records_sent
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_finished_jobs import cancel, finish, launch
from .test_real_slurm_nsplit import end
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "job-records"
#: Where the recording's sbatch ran (scontrol's WorkDir).
WORK = "/tmp/job-records.cEPk9c"
#: The sbatch options every ``sub`` of the script adds (its SB), and the cases' squeue format (its SQ).
SB = ["-A", "physics", "-p", "batch", "-o", "/dev/null"]
SQUEUE = "%i|%j|%T|%D|%C|%b|%N|%R"
SECOND = dt.timedelta(seconds=1)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def err(name: str) -> str:
    return (REAL / f"{name}.err").read_text()


def at(clock: str) -> dt.datetime:
    """A time of the recording (2026-12-06, UTC)."""
    return dt.datetime.fromisoformat(f"2026-12-06T{clock}+00:00")


def script_lines(folder: Path = REAL) -> list[list[str]]:
    """The recording script's ``sub`` and ``case_`` lines as words, in order."""
    return [shlex.split(line) for line in folder.with_suffix(".sh").read_text().splitlines()
            if line.lstrip().startswith(("sub ", "case_ "))]


#: ``sub NAME USER ARGS...``: NAME -> (user, sbatch arguments as sub passes them).
SUBMISSIONS = {words[1]: (words[2], [*SB, "-J", words[1], *words[3:]])
               for words in script_lines() if words[0] == "sub"}


def sbatch(cluster: SlurmCluster, users, name: str, moment: dt.datetime, *extra: str) -> tuple[str, str]:
    """sbatch NAME at ``moment``: its stdout and stderr as the recording keeps them (stderr's rc= line)."""
    user, args = SUBMISSIONS.get(name) or ("alice", [*SB, "-J", name])
    args = [*args, *extra]
    try:
        job = job_submit(cluster=cluster, user=users[user], now=moment,
                         submission=Submission(argv=tuple(args), alloc_node="localhost", submit_dir=WORK))
    except ApiError as exc:
        return "", exc.message + "\nrc=1\n"
    return submitted_message(job, Submission(argv=tuple(args))) + "\n", "rc=0\n"


# --- part 1: NumTasks and sacct's Reason ------------------------------------------------------------

PART1 = ("done", "run-n3", "run-pn2", "run-N2", "held-n3", "held-pn2", "held-N2", "hcancel-n3", "hcancel-pn2",
         "hcancel-N2", "gpu-all", "res-n3", "res-pn2", "res-N2", "rcancel", "nodes5", "gres9")


@pytest.fixture
def part1(cast, now) -> tuple[Replay, dict[str, tuple[str, str]]]:
    """Part 1 on the recording's clock: done ran in the second after its submission, the next ten were
    submitted at 07:04:59 and the running ones started at 07:05:01, the rest came at 07:05:02 and the held
    ones and rcancel were cancelled at 07:05:04."""
    cluster, _ = harness_cluster(cast, now)
    replay = Replay(cluster, cast)
    answers = {"done": sbatch(cluster, replay.users, "done", at("07:04:57"))}
    run_pass(cluster, at("07:04:58"))
    launch(1, at("07:04:58"))
    finish(1, exit_code=0, moment=at("07:04:58"))
    replay.epilogs_done(at("07:04:58"))
    for name in PART1[1:11]:
        answers[name] = sbatch(cluster, replay.users, name, at("07:04:59"))
    job_records_sent(now=at("07:05:00"))  # before the build that keeps the held jobs' JobHeldUser
    run_pass(cluster, at("07:05:01"))
    for job_id in (2, 3, 4, 11):
        launch(job_id, at("07:05:01"))
    for name in PART1[11:]:
        answers[name] = sbatch(cluster, replay.users, name, at("07:05:02"))
    run_pass(cluster, at("07:05:04"))
    for job_id in (8, 9, 10, 15):
        cancel(replay, job_id, "alice", at("07:05:04"))
    job_records_sent(now=at("07:05:05"))  # after the build that kept nodes5's PartitionConfig
    return replay, answers


def test_part1_sbatch_answers_as_slurm(part1):
    _, answers = part1
    assert answers == {name: (real(f"sbatch-{name}"), err(f"sbatch-{name}")) for name in PART1}


SHOWN = at("07:05:06")


def test_squeue_shows_tasks_as_slurm(part1):
    """squeue -O NumTasks: -n's count in every state, NO_VAL for a job without one that never had a node
    test (hcancel-N2, gres9)."""
    replay, _ = part1
    for name, format_text in (("squeue", "%i|%j|%T|%D|%C|%r"),
                              ("squeue-O", "JobID,Name,State,NumTasks,NumNodes,NumCPUs,Reason")):
        shown = format_text if name == "squeue" else formats.squeue_long_format(format_text)
        assert replay.squeue(SHOWN, states="all", format=shown) == real(name), name


def test_scontrol_show_job_of_each_is_slurms(part1):
    """NumTasks=3 for ``-N 2 -n 3`` and 4 for ``-N 2 --ntasks-per-node=2``, running, held, waiting for
    Resources and cancelled while held (8, 9); N/A for ``-N 2`` cancelled while held (10)."""
    replay, _ = part1
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(replay.cluster, now=SHOWN, job=str(job_id)).text
             for job_id in range(1, 18)}
    assert scontrol_differences(shown, REAL) == {}


@pytest.mark.parametrize(("name", "fields", "options"), [
    ("sacct-reason", "JobID,JobName,State,Reason", {"all_users": True, "allocations": True}),
    ("sacct-reason-wide", "JobID,JobName,State,Reason,NTasks,NNodes", {"all_users": True, "allocations": True}),
    ("sacct-reason-steps", "JobID,State,Reason", {"all_users": True}),
    ("sacct-reason-j", "JobID,JobName,State,Reason", {"jobs": ",".join(str(n) for n in range(1, 18)),
                                                      "allocations": True}),
])
def test_sacct_reason_is_slurms(part1, name, fields, options):
    replay, _ = part1
    records = reports.sacct(replay.cluster, now=at("07:05:09"), viewer="root", fields=fields.split(","),
                            **options).items
    parsable = None if name == "sacct-reason-wide" else "plain"
    assert formats.sacct_text([record for record, _ in records], fields=fields.split(","),
                              parsable=parsable) == real(name)


# --- parts 2 and 3: EnforcePartLimits with a node range; a node range's billing and memory under GrpTRES ---

#: ``case_ NAME ARGS...``: NAME (epl-$m-... for both modes) -> alice's sbatch arguments.
CASES = {words[1]: words[2:] for words in script_lines() if words[0] == "case_"}
#: job-records-mem.sh's: the mem-* cases again where memory is a consumable resource (CR_CPU_Memory).
MEMORY = REAL.with_name("job-records-mem")
MEMORY_CASES = {words[1]: words[2:] for words in script_lines(MEMORY) if words[0] == "case_"}
#: scontrol's lines a case compares: its state and reason, its node count, CPUs and tasks.
COMPARED = re.compile(r"^\s+(JobState=|NumNodes=)")


def job_id_masked(text: str) -> str:
    """sbatch's and squeue's lines without their job id (the replay's cases run on clusters of their own)."""
    return re.sub(r"^(Submitted batch job )?\d+(\||$)", r"\1ID\2", text, flags=re.MULTILINE)


def run_cases(cluster: SlurmCluster, users, cases: dict[str, list[str]], moment: dt.datetime,
              squeue_format: str = SQUEUE) -> dict[str, str]:
    """Each case (name -> its sbatch arguments) as the script's case_ runs it: sbatch, its squeue and scontrol
    once a scheduler saw it, then scancel; the recorded outputs' names -> trainhub's."""
    shown = {}
    for name, args in cases.items():
        moment += 5 * SECOND
        out, error = sbatch(cluster, users, name, moment, *args, "--wrap", "sleep 600")
        shown[f"sbatch-{name}"] = job_id_masked(out + error)
        if not out:
            continue
        run_pass(cluster, moment)
        job = SlurmJob.objects.get(cluster=cluster, job_id=int(out.split()[-1]))
        shown[f"squeue-{name}"] = job_id_masked(reports.squeue(cluster, now=moment, format=squeue_format).text)
        shown[f"scontrol-{name}"] = "".join(
            line for line in reports.scontrol_jobs(cluster, now=moment, job=str(job.job_id)).text.splitlines(
                keepends=True) if COMPARED.match(line))
        end(job, Replay(cluster, {}), moment)
        run_pass(cluster, moment)
    return shown


def recorded(names: Iterable[str], folder: Path = REAL) -> dict[str, str]:
    """What run_cases shows, as the recording in ``folder`` has it."""
    found = {}
    for name in names:
        found[f"sbatch-{name}"] = job_id_masked("".join(
            (folder / f"sbatch-{name}{suffix}").read_text() for suffix in (".txt", ".err")))
        if (folder / f"squeue-{name}.txt").exists():
            found[f"squeue-{name}"] = job_id_masked((folder / f"squeue-{name}.txt").read_text())
            found[f"scontrol-{name}"] = "".join(
                line for line in (folder / f"scontrol-{name}.txt").read_text().splitlines(keepends=True)
                if COMPARED.match(line))
    return found


@pytest.mark.parametrize("mode", ["ALL", "ANY"])
def test_enforce_part_limits_refuses_a_range_over_max_nodes_as_slurm(cast, now, mode):
    """MaxNodes=2: ``-N 1-4`` and ``-N 2-4`` are refused as ``-N 3`` is (their MAX is over it), ``-N 1-2``
    runs on 2 nodes."""
    cluster, _ = harness_cluster(cast, now, EnforcePartLimits=mode)
    partition = Partition.objects.get(cluster=cluster, name="batch")
    Partition.objects.filter(pk=partition.pk).update(config={**partition.config, "MaxNodes": "2"})
    cases = {f"epl-{mode.lower()}-{case}": CASES[f"epl-$m-{case}"] for case in ("N1-4", "N2-4", "N1-2", "N3")}
    assert run_cases(cluster, Replay(cluster, cast).users, cases, now) == recorded(cases)
    assert real(f"config-{mode}") == f"EnforcePartLimits       = {mode}\nMaxNodes=2\n"


@pytest.mark.parametrize(("limit", "prefix"), [("GrpTRES=mem=20000", "mem-"), ("GrpTRES=billing=3", "bill-")])
def test_a_node_range_under_grp_tres_is_counted_as_slurm(cast, now, limit, prefix):
    """billing=3: ``-N 1-4`` waits AssocGrpBilling (billing 4 on the 4 nodes select chose; NumNodes=4-4, 1 CPU),
    ``-N 1-3`` and ``-N 1-4 -n 2`` run; mem=20000 under CR_CPU: every ``--mem=8000`` range runs, ``-N 3-4``
    on 4 nodes though it asks 24000M."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    sacctmgr_run(cluster=cluster, line=f"-i modify user alice where account=physics partition=batch set {limit}",
                 actor="root", is_admin=True, now=now)
    cases = {name: args for name, args in CASES.items() if name.startswith(prefix)}
    assert run_cases(cluster, Replay(cluster, cast).users, cases, now) == recorded(cases)


def test_a_node_range_under_grp_tres_mem_is_counted_as_slurm_where_memory_is_consumable(cast, now):
    """CR_CPU_Memory, GrpTRES=mem=20000: ``-N 1-4 --mem=8000`` (8000M asked) waits AssocGrpMemLimit showing
    NumNodes=4-4 (32000M on the 4 nodes select chose), as ``--mem-per-cpu=6000`` does; ``-N 1-2`` runs on 2,
    ``--mem=4000`` on 4, ``-N 1-4 -n 2 --mem-per-cpu=6000`` on 2; ``-N 3-4`` (24000M asked) waits."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos",
                                 SelectTypeParameters="CR_CPU_Memory")
    sacctmgr_run(cluster=cluster, line="-i modify user alice where account=physics partition=batch set "
                 "GrpTRES=mem=20000", actor="root", is_admin=True, now=now)
    shown = run_cases(cluster, Replay(cluster, cast).users, MEMORY_CASES, now, squeue_format="%i|%j|%T|%D|%C|%m|%N|%R")
    assert shown == recorded(MEMORY_CASES, MEMORY)
