"""trainhub replays fixtures/22.05/review-records.sh (the review of issue 19's job records) on the slurm-harness
cluster of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU, AccountingStorageEnforce=associations,limits,qos.

What Slurm did. A node range over a TRES-minutes limit is held back after select chose its nodes
(acct_policy_job_runnable_post_select), as one over GrpTRES is: under QOS MaxTRESMinsPerJob=cpu=10,
``-N 3-4 -t 5`` (15 CPU-minutes at MIN already) and ``-N 1-4 -t 5`` (5 at MIN, 20 on 4 nodes) both wait
QOSMaxCpuMinutesPerJobLimit showing NumNodes=4-4, and so does ``-N 3-4 -c 3 -t 5``, whose request alone (one
task's 3 CPUs) is over the limit at submission: its node test there gave it its count all the same. sacct's Reason of a job waiting PartitionNodeLimit for the
partition's MaxNodes (``-N 3`` and ``-N 1-4`` under MaxNodes=2) is PartitionConfig, as ``-N 5``'s on 4 nodes is
(job-records): their submission's reason, which the build after it kept before their first records went
(fixtures/22.05/part-reason). Part 1 (squeue -O NumTasks of a running --ntasks-per-node job) is replayed by
test_real_slurm_ntasks_per_node.
"""

from __future__ import annotations

from pathlib import Path

from trainhub.slurm import formats, reports
from trainhub.slurm.models import Partition, SlurmJob
from trainhub.slurm.services.accounting import job_records_sent
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_job_records import COMPARED, SECOND, job_id_masked, sbatch
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "review-records"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def compared(text: str) -> str:
    """scontrol's state and node count lines, without the job id."""
    return "".join(line for line in text.splitlines(keepends=True) if COMPARED.match(line))


def replay_mins_cases(cast, now, cases: dict[str, tuple[str, ...]], squeue_recorded: str,
                      scontrol_recorded: tuple[str, ...]) -> None:
    """Part 3's cases (name -> sbatch arguments) submitted together under QOS normal's MaxTRESMinsPerJob=cpu=10,
    then squeue and each one's scontrol lines, 8 s on, against the recording (job ids masked)."""
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    sacctmgr_run(cluster=cluster, line="-i modify qos normal set MaxTRESMinsPerJob=cpu=10", actor="root",
                 is_admin=True, now=now)
    users = Replay(cluster, cast).users
    for name, args in cases.items():
        out, error = sbatch(cluster, users, name, now, *args, "--wrap", "sleep 600")
        assert error == "rc=0\n", out + error
    run_pass(cluster, now + 2 * SECOND)
    moment = now + 8 * SECOND
    squeue = reports.squeue(cluster, now=moment, format="%i|%j|%T|%D|%C|%r").text
    assert job_id_masked(squeue) == job_id_masked(real(squeue_recorded))
    for job_id, recorded in enumerate(scontrol_recorded, start=1):
        shown = reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
        assert compared(shown) == compared(real(recorded)), recorded


def test_a_node_range_over_max_tres_mins_per_job_waits_with_the_nodes_select_chose(cast, now):
    replay_mins_cases(cast, now, {"mins-N3-4": ("-N", "3-4", "-t", "5"), "mins-N1-4": ("-N", "1-4", "-t", "5")},
                      "squeue-mins", ("scontrol-4", "scontrol-5"))


def test_sacct_reason_of_a_job_over_max_nodes_is_partition_config(cast, now):
    cluster, _ = harness_cluster(cast, now)
    partition = Partition.objects.get(cluster=cluster, name="batch")
    Partition.objects.filter(pk=partition.pk).update(config={**partition.config, "MaxNodes": "2"})
    users = Replay(cluster, cast).users
    for name, nodes in (("N3", "3"), ("N1-4", "1-4")):
        assert sbatch(cluster, users, name, now, "-N", nodes, "--wrap", "sleep 600")[1] == "rc=0\n"
    assert list(SlurmJob.objects.filter(cluster=cluster).values_list("reason", flat=True)) == [
        "PartitionConfig"] * 2  # until the first build (fixtures/22.05/part-reason)
    run_pass(cluster, now + 2 * SECOND)
    assert list(SlurmJob.objects.filter(cluster=cluster).values_list("reason", flat=True)) == [
        "PartitionNodeLimit"] * 2
    job_records_sent(now=now + 3 * SECOND)  # after that build, which kept PartitionConfig
    fields = ["JobID", "JobName", "State", "Reason"]
    records = [record for record, _ in reports.sacct(cluster, now=now + 10 * SECOND, viewer="root", fields=fields,
                                                     all_users=True, allocations=True).items]
    recorded = "".join(line for line in real("sacct-reason").splitlines(keepends=True) if not line.startswith("1|"))
    assert job_id_masked(formats.sacct_text(records, fields=fields, parsable="plain")) == job_id_masked(recorded)


def test_a_node_range_over_max_tres_mins_per_job_at_submission_shows_the_nodes_its_node_test_gave(cast, now):
    """limits.counted_after_selection: a TRES-minutes limit waits after select chose the nodes, as GrpTRES does."""
    replay_mins_cases(cast, now, {"mins-N3-4-c3": ("-N", "3-4", "-c", "3", "-t", "5")}, "squeue-mins-c3",
                      ("scontrol-6",))
