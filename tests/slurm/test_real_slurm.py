"""trainhub replays the scenario recorded on real Slurm 22.05.8 (fixtures/22.05/scenario.sh, run on
a fresh slurm-harness cluster: 4 nodes gpu[1-4] of 16 CPUs and 8 GPUs, partitions batch (PriorityTier=1)
and urgent (PriorityTier=10), accounts physics and bio) and prints what Slurm printed, byte for byte.

Times differ between the recording and the replay, so the replay steps its own clock through the
same events and a comparison leaves out only the cells that print a wall-clock time.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.iam.roles import USER
from trainhub.iam.services import membership_set, posix_identity_set, user_ensure
from trainhub.inventory.models import Executor, Node
from trainhub.inventory.services import node_heartbeat, node_pool_ensure
from trainhub.slurm import formats, reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.render import render_job
from trainhub.slurm.services.clusters import cluster_create, node_real_memory_set
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import SEED_SPEC, run_pass

REAL = Path(__file__).parent / "fixtures" / "22.05" / "scenario"

#: The uids start.sh's useradd -M gave the harness's users (each a group of its own of that number and
#: name): scontrol show job's UserId=alice(1001) GroupId=alice(1001).
HARNESS_UIDS = {"alice": 1001, "bob": 1002, "carol": 1003}

#: start.sh's slurm.conf: NodeName=gpu[1-4] ... RealMemory=16000.
HARNESS_REAL_MEMORY = 16000

#: start.sh's accounting, in its order (sacctmgr-setup.txt is what these printed).
SETUP = (
    "sacctmgr -i add account physics Description=physics Organization=science Fairshare=30",
    "sacctmgr -i add account bio Description=bio Organization=science Fairshare=10",
    "sacctmgr -i add User Accounts=physics Partition=batch alice",
    "sacctmgr -i add User Accounts=physics Partition=urgent alice",
    "sacctmgr -i add User Accounts=physics Partition=batch bob",
    "sacctmgr -i add User Accounts=bio Partition=batch bob",
    "sacctmgr -i add User Accounts=bio Partition=batch carol",
    "sacctmgr -i add User Accounts=bio Partition=urgent carol",
)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def harness(cast, now):
    """The harness's cluster in trainhub, its accounting added with start.sh's commands; returns
    (cluster, what those commands printed)."""
    return harness_cluster(cast, now)


def harness_cluster(cast, now, **config: str):
    """harness's cluster (start.sh's slurm.conf: CR_CPU, memory not a consumable resource, its nodes'
    RealMemory=16000), ``config`` as start.sh's knobs change slurm.conf (PreemptExemptTime="00:00:00");
    alice, bob and carol are members with the harness's uids."""
    pool = node_pool_ensure(name="gpu", machine_type="n1-standard-16", accelerator_type="NVIDIA_TESLA_V100",
                            accelerator_count=8, node_count=4, executor=Executor.SIMULATED)
    for index, node in enumerate(pool.nodes.order_by("pk"), start=1):
        Node.objects.filter(pk=node.pk).update(name=f"gpu{index}", hostname=f"gpu{index}")
    node_heartbeat(node_ids=list(pool.nodes.values_list("pk", flat=True)), now=now)
    spec = SEED_SPEC["orchestratorSpec"]["slurmSpec"]
    body = {"orchestratorSpec": {"slurmSpec": {
        "config": {**spec["config"], "PriorityCalcPeriod": "1", "SelectTypeParameters": "CR_CPU", **config},
        "partitions": [{"id": "batch", "node_pool_ids": ["gpu"], "config": {"PriorityTier": "1"}},
                       {"id": "urgent", "node_pool_ids": ["gpu"], "config": {"PriorityTier": "10"}}],
        "default_partition_id": "batch"}}}
    cluster = cluster_create(project=cast["alpha"], location="us-central1", cluster_id="harness", body=body,
                             user=cast["alice"], now=now)
    for node in pool.nodes.all():
        cluster = node_real_memory_set(cluster=cluster, node=node, real_memory_mb=HARNESS_REAL_MEMORY, actor="root",
                                       now=now)
    for name in ("bob", "carol"):
        membership_set(project=cast["alpha"], user=user_ensure(username=name, password=f"{name}-password"),
                       role=USER)
    for user in get_user_model().objects.filter(username__in=HARNESS_UIDS):
        posix_identity_set(user=user, uid=HARNESS_UIDS[user.username])
    printed = "".join(sacctmgr_run(cluster=cluster, line=line, actor="root", is_admin=True, now=now).output
                      for line in SETUP)
    return cluster, printed


def test_sacctmgr_prints_what_it_printed_on_the_harness(harness):
    cluster, printed = harness
    # its first two lines are `sacctmgr add cluster`'s (clusters are made with the slurmClusters API)
    assert printed == real("sacctmgr-setup").split("\n", 2)[2]


def test_a_fresh_clusters_sshare_is_slurms(harness, now):
    cluster, _ = harness
    text = reports.sshare(cluster, now=now, viewer="root", long=True, all_users=True).text
    assert text == real("sshare-fresh")


def test_more_add_user_forms_print_what_they_printed_on_the_harness(harness, now):
    cluster, _ = harness
    recorded = real("sacctmgr-add-users")
    replayed = ""
    for line in recorded.splitlines():
        if line.startswith("$ "):
            result = sacctmgr_run(cluster=cluster, line=line[2:], actor="root", is_admin=True, now=now)
            replayed += f"{line}\n{result.output}rc={result.exit_code}\n"
    assert replayed == recorded



def _submissions() -> list[tuple[str, str, list[str]]]:
    """scenario.sh's sbatch lines: (fixture name, user, sbatch arguments)."""
    found = []
    for line in (REAL.parent / "scenario.sh").read_text().splitlines():
        if line.startswith("rec sbatch-"):
            words = shlex.split(line)
            found.append((words[1], words[3], words[5:]))
    return found


#: The recording's clock (scontrol-job-*-running.txt): job 1 submitted at 17:21:00 and started at
#: 17:21:01, the others submitted at 17:21:02; the "-running" outputs were taken at 17:22:12.
SUBMIT = dt.datetime(2026, 12, 4, 17, 21, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


@pytest.fixture
def replay(harness, cast):
    """scenario.sh replayed on the recording's clock, a pass at each second something happened and
    one per PriorityCalcPeriod. The usage is the replay's own: its decay at 17:21:58 charges job 1's
    57 s as slurmctld's did (227.985 billing-seconds, sshare's RawUsage 227)."""
    cluster, _ = harness
    # the decay thread's phase (PriorityCalcPeriod 1 minute): hh:mm:58, as sprio -n's AGE shows
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=SUBMIT - 2 * SECOND,
                                                      last_priority_time=SUBMIT - 2 * SECOND)
    users = {name: cast.get(name) or get_user_model().objects.get(username=name) for name in ("alice", "bob", "carol")}
    printed = {}
    for index, (name, user, args) in enumerate(_submissions()):
        moment = SUBMIT if index == 0 else SUBMIT + 2 * SECOND
        try:
            # scenario.sh ran sbatch in /tmp: WorkDir=/tmp
            submission = Submission(argv=tuple(args), alloc_node="localhost", alloc_sid=5559, submit_dir="/tmp")
            job = job_submit(cluster=cluster, user=users[user], submission=submission, now=moment)
            printed[name] = (submitted_message(job, Submission(argv=tuple(args))) + "\n", "")
        except ApiError as error:
            printed[name] = ("", error.message + "\n")
        if index == 0:
            run_pass(cluster, SUBMIT + SECOND)
    run_pass(cluster, SUBMIT + 2 * SECOND)
    # slurmctld's backfill runs every bf_interval (30 s) at its own phase: the recording's last
    # iteration before the "-running" outputs came before the 17:21:58 priority recalculation (the
    # decay thread's phase: sprio -n's AGE 0.0000926 is 56 s of the jobs submitted at 17:21:02, and
    # a re-recording on a fresh harness recalculated at :58 too)
    run_pass(cluster, SUBMIT + 40 * SECOND)
    run_pass(cluster, SUBMIT + 58 * SECOND)
    cluster.refresh_from_db()  # the reports read its last decay time (TRESRunMins)
    return cluster, printed, SUBMIT + 72 * SECOND


def test_sbatch_prints_what_it_printed_on_the_harness(replay):
    _, printed, _ = replay
    for name, (out, err) in printed.items():
        assert out == real(name), name
        recorded_err = (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]
        assert err == recorded_err, name


def test_pending_reasons_are_slurms(replay):
    cluster, _, moment = replay
    recorded = dict(line.split("|")[0::5] for line in real("squeue-o-running").splitlines()[1:])
    reasons = {str(job.job_id): job.reason if job.state == "PENDING" else "None"
               for job in SlurmJob.objects.filter(cluster=cluster, state__in=["PENDING", "RUNNING"])}
    assert reasons == recorded


def test_sprio_is_slurms(replay):
    cluster, _, moment = replay
    assert reports.sprio(cluster, now=moment, long=True).text == real("sprio-l-running")
    assert reports.sprio(cluster, now=moment).text == real("sprio-running")
    assert reports.sprio(cluster, now=moment, weights=True).text == real("sprio-w-running")
    assert reports.sprio(cluster, now=moment, norm=True).text == real("sprio-n-running")


def test_squeue_start_is_slurms(replay):
    """Byte for byte, SCHEDNODES included: jobs 4 and 13 were planned by a backfill iteration before
    the 17:21:58 priority recalculation, both still at priority 10000 (job id order), and kept."""
    cluster, _, moment = replay

    assert reports.squeue(cluster, now=moment, start=True).text == real("squeue-start-running")


def test_sshare_with_usage_and_a_running_job_is_slurms(replay):
    cluster, _, moment = replay
    assert reports.sshare(cluster, now=moment, viewer="root", long=True, all_users=True).text == real(
        "sshare-l-a-running")



def test_scontrols_dependency_field_is_slurms(replay):
    cluster, _, _ = replay
    for job_id in (5, 6, 7, 8, 9):
        recorded = real(f"scontrol-job-{job_id}-running").split("Dependency=", 1)[1].split()[0]
        assert render_job(SlurmJob.objects.get(cluster=cluster, job_id=job_id))["dependency"] == recorded



def test_sacct_is_slurms(replay):
    cluster, _, moment = replay
    fields = ["JobID", "JobName", "Account", "User", "State", "ExitCode", "AllocTRES%60"]
    assert reports.sacct(cluster, now=moment, viewer="root", all_users=True, fields=fields).text == real(
        "sacct-a-running")


def in_any_tie_order(text: str) -> tuple[str, list[str]]:
    """squeue's header, then its lines sorted, for replays that do not step their clocks on every start
    the recording had: squeue orders equal jobs by their start times (reports.squeue_first_sort), which
    such a replay does not reproduce to the second."""
    header, *lines = text.splitlines()
    return header, sorted(lines)


def test_squeue_o_and_O_are_slurms(replay, api):
    cluster, _, moment = replay
    text = reports.squeue(cluster, now=moment, format="%i|%a|%C|%b|%y|%r").text
    assert text == real("squeue-o-running")
    fields = "JobID,Account,NumCPUs,tres-per-node,Nice,Reason"
    text = reports.squeue(cluster, now=moment, format=formats.squeue_long_format(fields)).text
    assert text == real("squeue-O-running")
    url = "/v1/projects/alpha/locations/us-central1/slurmClusters/harness/squeue"
    answer = api("alice").get(url, {"outputFormat": fields}).json()
    assert answer["text"].splitlines()[0] == real("squeue-O-running").splitlines()[0]
    # squeue says so of a field it does not know, and prints the others (squeue-letters/fields.txt: CPUFreq)
    answer = api("alice").get(url, {"outputFormat": "JobID:6,Bogus:9"}).json()
    assert answer["stderr"] == "squeue: error: Invalid job format specification: Bogus\n"
    assert answer["text"] == reports.squeue(cluster, now=moment, format="%6A").text



def test_squeue_default_is_slurms(replay):
    cluster, _, moment = replay
    text = reports.squeue(cluster, now=moment).text
    assert text == real("squeue-running")


def test_sinfo_with_a_running_job_is_slurms(replay):
    cluster, _, moment = replay
    assert reports.sinfo(cluster, now=moment).text == real("sinfo-running")
    assert reports.sinfo(cluster, now=moment, summarize=True).text == real("sinfo-s-running")
    assert reports.sinfo(cluster, now=moment, reasons=True).text == real("sinfo-R-running")
    assert reports.sinfo(cluster, now=moment, node_oriented=True, long=True).text == real("sinfo-Nl-running")


def test_sinfo_names_drained_and_down_nodes_as_slurm(harness):
    """after.sh: gpu3 set down (reason broken) and gpu4 drained (maint) by root at 17:23:50."""
    from trainhub.inventory.models import NodeState
    from trainhub.slurm.services.clusters import audit, node_state_set

    cluster, _ = harness
    moment = dt.datetime(2026, 12, 4, 17, 23, 50, tzinfo=dt.UTC)
    assert reports.sinfo(cluster, now=moment).text == real("sinfo-idle")
    node_state_set(cluster=cluster, node=Node.objects.get(name="gpu4"), state=NodeState.DRAIN, reason="maint",
                   actor="root", now=moment)
    Node.objects.filter(name="gpu3").update(state=NodeState.DOWN, state_reason="broken")
    audit(cluster, actor="root", subject="node gpu3", old="UP", new="DOWN broken", now=moment)
    later = moment + 5 * SECOND
    assert reports.sinfo(cluster, now=later).text == real("sinfo-nodes")
    assert reports.sinfo(cluster, now=later, summarize=True).text == real("sinfo-s-nodes")
    assert reports.sinfo(cluster, now=later, reasons=True).text == real("sinfo-R-nodes")
    assert reports.sinfo(cluster, now=later, node_oriented=True, long=True).text == real("sinfo-Nl-nodes")


def finish(cluster, job_ids: list[int], moment: dt.datetime, exit_code: int = 0) -> None:
    """The jobs' batch scripts exit ``exit_code`` and their epilogs end at ``moment`` (their prologs
    done first)."""
    from trainhub.slurm.models import JobNode, NodePhase
    from trainhub.slurm.services.lifecycle import (
        job_batch_finished,
        job_node_epilog_finished,
        job_node_prolog_finished,
    )

    nodes = JobNode.objects.filter(job__cluster=cluster, job__job_id__in=job_ids)
    for job_node in nodes.filter(phase=NodePhase.PROLOG):
        job_node_prolog_finished(job_node=job_node, exit_code=0, now=moment)
    for job_node in nodes.filter(batch_host=True, phase=NodePhase.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=exit_code, signal=0, max_rss_kb=None, now=moment)
    for job_node in nodes.filter(phase=NodePhase.EPILOG):
        job_node_epilog_finished(job_node=job_node, exit_code=0, now=moment)


def _later(cluster) -> dt.datetime:
    """test_the_later_outputs_are_slurms's events after the "-running" outputs; returns 17:23:13."""

    def clock(text: str) -> dt.datetime:
        return dt.datetime.fromisoformat(f"2026-12-04T{text}+00:00")

    finish(cluster, [1], clock("17:22:41"))
    run_pass(cluster, clock("17:22:41"))
    finish(cluster, [10], clock("17:22:51"))
    run_pass(cluster, clock("17:22:52"))
    finish(cluster, [9, 13], clock("17:22:57"))
    run_pass(cluster, clock("17:22:57"))
    run_pass(cluster, clock("17:22:58"))
    finish(cluster, [2, 4], clock("17:23:12"))
    return clock("17:23:13")


def test_the_later_outputs_are_slurms(replay):
    """scenario.sh's "-later" outputs (17:23:13): job 1 ended at 17:22:41 (sleep 100), u10 ran 10 s on
    every node, jobs 2, 4, 9 and 13 started at 17:22:52 (9 and 13 ended at 17:22:57, 2 and 4 at
    17:23:12, a second before the recording: their dependants not yet evaluated); the decay thread
    ran at 17:22:58. sshare-l-a-later's RawUsage already holds jobs 2 and 4 to their end
    (priority_p_job_end) while its NormUsage, EffectvUsage, FairShare and LevelFS are the 17:22:58
    decay's."""
    cluster, _, _ = replay
    moment = _later(cluster)
    assert reports.sprio(cluster, now=moment, long=True).text == real("sprio-l-later")
    assert reports.squeue(cluster, now=moment).text == real("squeue-later")
    assert reports.squeue(cluster, now=moment, start=True).text == real("squeue-start-later")
    fields = ["JobID", "JobName", "Account", "User", "State", "ExitCode", "AllocTRES%60"]
    assert reports.sacct(cluster, now=moment, viewer="root", all_users=True, allocations=True,
                         fields=fields).text == real("sacct-a-later")
    assert reports.sinfo(cluster, now=moment).text == real("sinfo-later")
    assert reports.sshare(cluster, now=moment, viewer="root", long=True, all_users=True).text == real(
        "sshare-l-a-later")


SCONTROL_JOBS = sorted(path.stem for path in REAL.glob("scontrol-job-*.txt"))


def scontrol_masked(text: str) -> str:
    """scontrol show job but AllocNode:Sid's session id (sbatch's, a pid)."""
    return re.sub(r"AllocNode:Sid=(\S+):\d+", r"AllocNode:Sid=\1:?", text)


def scontrol_differences(shown: Mapping[str, str], folder: Path) -> dict[str, list[str]]:
    """Each of ``shown``'s outputs (fixture name: trainhub's scontrol show job) that differs from the one
    recorded in ``folder``, both scontrol_masked: its differing lines, recorded ("-") then shown ("+")."""
    differences = {}
    for name, text in shown.items():
        recorded = scontrol_masked((folder / f"{name}.txt").read_text()).splitlines(keepends=True)
        lines = list(difflib.unified_diff(recorded, scontrol_masked(text).splitlines(keepends=True), n=0))
        if lines:
            differences[name] = [line.rstrip("\n") for line in lines[2:] if not line.startswith("@@")]
    return differences


def _scontrol_outputs(cluster) -> dict[str, str]:
    """scontrol show job N at the "-running" moment (17:22:12) and after test_the_later_outputs_are_slurms's
    events at 17:23:13."""
    shown = {}
    running = SUBMIT + 72 * SECOND
    for job_id in range(1, 14):
        shown[f"scontrol-job-{job_id}-running"] = reports.scontrol_jobs(cluster, now=running, job=str(job_id)).text
    later = _later(cluster)
    for job_id in (2, 4, 5, 6, 7, 8, 9, 10):
        shown[f"scontrol-job-{job_id}-later"] = reports.scontrol_jobs(cluster, now=later, job=str(job_id)).text
    return shown


def test_scontrol_show_job_prints_what_it_printed_on_the_harness(replay, api):
    cluster, _, _ = replay
    url = "/v1/projects/alpha/locations/us-central1/slurmClusters/harness/scontrolJobs"
    answer = api("alice").get(url, {"job": "13"}, HTTP_ACCEPT="text/plain")
    assert answer["content-type"].startswith("text/plain")
    assert "JobId=13 JobName=p13\n" in answer.content.decode()
    assert api("alice").get(url, {"job": "99"}).json() == {
        "text": "", "rows": [], "stderr": "slurm_load_jobs error: Invalid job id specified\n"}
    shown = _scontrol_outputs(cluster)
    assert sorted(shown) == SCONTROL_JOBS
    assert scontrol_differences(shown, REAL) == {}
    assert len(SCONTROL_JOBS) == 21  # scenario.sh: 13 "-running", 8 "-later"
