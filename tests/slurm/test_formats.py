"""sprio, sshare, squeue and sacct text exactly as Slurm lays it out (reference sections 2.4, 3, 5.4, 6.2)."""

import datetime as dt
import math

import pytest

from trainhub.slurm.conf import parse_config
from trainhub.slurm.fairshare import Association, compute_fairshare
from trainhub.slurm.formats import (
    LineCache,
    ReportCache,
    PrintField,
    SacctJob,
    SqueueFormatError,
    SqueueJob,
    accounting_reason,
    in_squeue_order,
    print_fields,
    sacct_rows,
    sacct_text,
    sprio_format,
    sprio_rows,
    sprio_text,
    squeue_long_format,
    squeue_text,
    sshare_rows,
    sshare_text,
)
from trainhub.slurm.priority import FACTOR_NAMES, Factor, PriorityBreakdown

ALL_WEIGHTS = parse_config({"PriorityWeightAge": "1000", "PriorityWeightAssoc": "10", "PriorityWeightFairshare": "100000",
                            "PriorityWeightJobSize": "1000", "PriorityWeightPartition": "10000",
                            "PriorityWeightQOS": "1000", "PriorityWeightTRES": "GRES/gpu=1000"})
FIVE_WEIGHTS = parse_config({"PriorityWeightAge": "1000", "PriorityWeightFairshare": "100000",
                             "PriorityWeightJobSize": "1000", "PriorityWeightPartition": "10000",
                             "PriorityWeightQOS": "1000"})


def breakdown(job_id=65539, partition="gpu", *, weighted=None, normal=None, tres=None, **fields):
    weighted = {"age": 0, "assoc": 0, "fairshare": 0, "jobsize": 0, "partition": 0, "qos": 0, **(weighted or {})}
    """A breakdown whose weighted factors are ``weighted`` (normalised values ``normal`` when given)."""
    normal = normal or {}
    values = tuple(normal.get(name) or float(weighted[name]) for name in FACTOR_NAMES)
    weights = tuple(weighted[name] / normal[name] if normal.get(name) else 1.0 for name in FACTOR_NAMES)
    total = sum(weighted.values()) + sum(f.weighted for f in (tres or {}).values())
    defaults = dict(user="alice", account="ml-team", qos="normal", priority=int(total), site=0, nice=0, total=total)
    return PriorityBreakdown(job_id=job_id, partition=partition, values=values, weights=weights, tres=tres or {},
                             **{**defaults, **fields})


def test_sprio_default_header_with_every_weight():
    assert sprio_text([], ALL_WEIGHTS) == (
        "          JOBID PARTITION   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION"
        "        QOS                 TRES\n")


def test_sprio_default_row_shows_only_weighted_factors():
    text = sprio_text([breakdown(weighted={"fairshare": 51664, "jobsize": 1000, "partition": 10000})], FIVE_WEIGHTS)
    assert text.splitlines() == [
        "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS",
        "          65539 gpu            62664          0          0      51664       1000      10000          0"]


def test_sprio_rounds_columns_but_truncates_the_priority():
    text = sprio_text([breakdown(weighted={"age": 142.857, "fairshare": 5000.6})], FIVE_WEIGHTS)
    cells = text.splitlines()[1].split()
    assert cells[2] == "5143" and cells[4] == "143" and cells[5] == "5001"


def test_sprio_long_layout():
    config = parse_config({"PriorityWeightTRES": "GRES/gpu=1000"})
    row = breakdown(1234, weighted={"age": 231, "fairshare": 5000, "partition": 10000},
                    tres={"gres/gpu": Factor(0.125, 1000.0, 125.0)})
    assert sprio_text([row], config, long=True).splitlines() == [
        "          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE"
        "  PARTITION        QOS        NICE                 TRES",
        "           1234 gpu          alice      15356          0        231          0       5000          0"
        "      10000          0           0         gres/gpu=125"]


def test_sprio_normalised_layout():
    config = parse_config({"PriorityWeightAge": "1000", "PriorityWeightFairshare": "100000",
                           "PriorityWeightPartition": "10000", "PriorityWeightQOS": "1000"})
    row = breakdown(weighted={"age": 0.718, "fairshare": 51664.7, "partition": 10000},
                    normal={"age": 0.000718, "fairshare": 0.516647, "partition": 1.0})
    assert sprio_format(config, norm=True) == "%.15i %9r %10y %10a %10f %10p %10q"
    assert sprio_text([row], config, norm=True).splitlines() == [
        "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  PARTITION  QOS       ",
        "          65539 gpu       0.00001435 0.0007180  0.5166470  1.0000000  0.0000000 "]


def test_sprio_weights_row():
    config = parse_config({"PriorityWeightFairshare": "100000"})
    assert sprio_text([], config, weights=True).splitlines() == [
        "          JOBID PARTITION   PRIORITY       SITE  FAIRSHARE",
        "        Weights                               1     100000"]


def test_sprio_rows_sort_by_job_id_and_cut_long_names():
    rows = [breakdown(9, "a-very-long-partition"), breakdown(3)]
    lines = sprio_text(rows, FIVE_WEIGHTS).splitlines()
    assert lines[1].split()[0] == "3" and "a-very-lo " in lines[2]
    assert sprio_rows(rows)[0]["jobId"] == 3
    assert sprio_rows(rows)[0]["factors"]["fairshare"] == {"factor": 0.0, "weight": 1.0, "weighted": 0.0}


def test_sshare_fair_tree_layout_indents_the_tree():
    result = compute_fairshare([Association("root", "root", shares=None),
                                Association("ml", "ml", parent="root", shares=1),
                                Association("alice@ml", "ml", user="alice", parent="ml", usage=100.7),
                                Association("bob@ml", "ml", user="bob", parent="ml", shares=2)])
    assert sshare_text(result.rows, all_users=True).splitlines() == [
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare ",
        "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- ",
        "root                                          0.000000         100      1.000000            ",
        " ml                                      1    1.000000         100      1.000000            ",
        "  ml                      alice          1    0.333333         100      1.000000   0.500000 ",
        "  ml                        bob          2    0.666667           0      0.000000   1.000000 "]
    long_rows = [line.split("|") for line in sshare_text(result.rows, long=True, all_users=True,
                                                          parsable="plain").splitlines()]
    assert long_rows[0][8] == "LevelFS"
    assert [row[8] for row in long_rows[1:]] == ["", "1.000000", "0.333333", "inf"]
    assert len(sshare_text(result.rows, user="bob").splitlines()) == 5
    assert sshare_rows(result.rows)[2]["levelFsInfinite"] is False
    assert sshare_text(result.rows, parsable="plain", all_users=True).splitlines()[0] == (
        "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare")
    assert sshare_text(result.rows, parsable="ending", all_users=True).splitlines()[1] == (
        "root|||0.000000|100|1.000000||")


def test_print_fields_cuts_strings_with_a_plus_and_blanks_unset_numbers():
    fields = [PrintField("Name", -6), PrintField("Count", 5, "uint"), PrintField("Share", 8, "double")]
    assert print_fields(fields, [["averylongname", None, 4294967294.0], ["ok", 3, math.inf]]).splitlines() == [
        "Name   Count    Share ", "------ ----- -------- ", "avery+                ", "ok         3      inf "]


def test_squeue_default_and_start_layouts():
    now = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
    jobs = [SqueueJob(1234, "gpu", "train", "alice", "PENDING", reason="Priority", priority=5,
                      start_time=now + dt.timedelta(hours=1), sched_nodes="a4-[0-1]"),
            SqueueJob(1200, "gpu", "train", "alice", "RUNNING", elapsed_seconds=3723, nodes=2, nodelist="a4-[0-1]")]
    assert squeue_text(jobs).splitlines() == [
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)",
        "              1234       gpu    train    alice PD       0:00      1 (Priority)",
        "              1200       gpu    train    alice  R    1:02:03      2 a4-[0-1]"]
    assert squeue_text(jobs, start=True).splitlines() == [
        "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           "
        "NODELIST(REASON)",
        "              1234       gpu    train    alice PD 2025-03-01T13:00:00      1 a4-[0-1]             (Priority)"]
    assert squeue_text(jobs, long=True).splitlines()[0] == (
        "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)")


def test_squeue_format_without_fields_prints_its_text_once_per_job():
    jobs = [SqueueJob(1, "gpu", "a", "alice", "PENDING"), SqueueJob(2, "gpu", "b", "bob", "PENDING")]
    assert squeue_text(jobs, format="queue {x}").splitlines() == ["queue {x}"] * 3
    assert squeue_text([], format="%i").splitlines() == ["JOBID"]


def test_sacct_default_layout_and_cancelled_state():
    jobs = [SacctJob("17", "train", "gpu", "ml-team", 8, "CANCELLED by 1000", "0:15"),
            SacctJob("18", "train", "gpu", "ml-team", 8, "COMPLETED")]
    assert sacct_text(jobs).splitlines() == [
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
        "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
        "17                train        gpu    ml-team          8 CANCELLED+     0:15 ",
        "18                train        gpu    ml-team          8  COMPLETED      0:0 "]
    text = sacct_text([SacctJob("5", "x", "gpu", "a", 2, "TIMEOUT", elapsed_seconds=90061, time_limit_minutes=60)],
                      fields=["JobID", "Elapsed", "Timelimit", "CPUTime%12"], parsable="plain")
    assert text.splitlines() == ["JobID|Elapsed|Timelimit|CPUTime", "5|1-01:01:01|01:00:00|2-02:02:02"]
    assert sacct_rows(jobs, fields=["jobid", "state"]) == [{"JobID": "17", "State": "CANCELLED by 1000"},
                                                            {"JobID": "18", "State": "COMPLETED"}]


def test_squeue_orders_by_partition_state_descending_priority_then_the_first_sorts_order():
    """Equal jobs (3 and 1) stay in the order given: that of squeue's first sort (reports.squeue_first_sort);
    states by their short codes as strings, CG before PD and R (src/squeue/sort.c)."""
    jobs = [SqueueJob(5, "b", "x", "u", "PENDING", priority=1), SqueueJob(4, "a", "x", "u", "RUNNING", priority=9),
            SqueueJob(3, "a", "x", "u", "PENDING", priority=1), SqueueJob(2, "a", "x", "u", "PENDING", priority=7),
            SqueueJob(1, "a", "x", "u", "PENDING", priority=1), SqueueJob(6, "a", "x", "u", "COMPLETING")]
    ordered = in_squeue_order(jobs, partition=lambda job: job.partition, state=lambda job: job.state,
                              priority=lambda job: job.priority)
    assert [job.job_id for job in ordered] == [6, 2, 3, 1, 4, 5]


def _laying_out(calls: list[list]):
    def lay_out(rows):
        calls.append(list(rows))
        return [f"line {row}" for row in rows]
    return lay_out


def test_a_line_cache_lays_out_only_the_rows_its_last_read_of_the_report_did_not_have():
    cache, calls = LineCache(), []
    assert cache.lines("sprio", [1, 2], _laying_out(calls)) == ["line 1", "line 2"]
    assert cache.lines("sprio", [2, 3], _laying_out(calls)) == ["line 2", "line 3"]
    assert cache.lines("sprio", [1, 3], _laying_out(calls)) == ["line 1", "line 3"]
    assert calls == [[1, 2], [3], [1]]  # row 1 was dropped with the second read: only rows last read are kept


def test_a_line_cache_keys_rows_by_what_is_given_and_keeps_the_last_reports_read():
    cache, calls = LineCache(reports=1), []
    cache.lines("squeue", [1], _laying_out(calls), keys=[(1, "12:00")])
    assert cache.lines("squeue", [1], _laying_out(calls), keys=[(1, "12:01")]) == ["line 1"]
    cache.lines("sprio", [1], _laying_out(calls))
    cache.lines("squeue", [1], _laying_out(calls), keys=[(1, "12:01")])  # forgotten: one report is kept
    assert calls == [[1], [1], [1], [1]]


def test_a_report_cache_gives_back_a_text_only_under_the_fingerprint_it_was_built_under():
    cache = ReportCache(reports=1)
    assert cache.get("sprio", [(1, "12:00")]) is None
    cache.put("sprio", [(1, "12:00")], "text 1", ["row 1"])
    assert cache.get("sprio", [(1, "12:00")]) == ("text 1", ["row 1"])
    assert cache.get("sprio", [(1, "12:01")]) is None  # its priority computed again
    assert cache.get("sprio", [(1, "12:00"), (2, "12:00")]) is None  # one more job
    cache.put("sprio -l", [(1, "12:00")], "long 1", ["row 1"])
    assert cache.get("sprio", [(1, "12:00")]) is None  # forgotten: one report is kept
    cache.clear()
    assert cache.get("sprio -l", [(1, "12:00")]) is None


def test_squeue_O_fields_without_a_letter_take_widths_and_right_justify():
    format_ = squeue_long_format("JobID:4,AllocNodes:.8,PendingTime:3,Cluster")
    assert format_ == "%4A%.8{allocnodes}%3{pendingtime}%20{cluster}"
    job = SqueueJob(7, "gpu", "x", "uma", "PENDING", alloc_node="login-node-1", pending_seconds=12345, cluster="c1")
    assert squeue_text([job], format=format_).splitlines() == [
        "JOBIALLOC_NOPENCLUSTER             ", "7   login-no123c1                  "]


def test_squeue_O_says_so_of_a_field_it_does_not_know_and_keeps_the_others():
    unknown: list[str] = []
    assert squeue_long_format("JobID:4,CPUFreq:9,Nodes,StepID", unknown=unknown) == "%4A"
    assert unknown == [f"squeue: error: Invalid job format specification: {name}"
                       for name in ("CPUFreq", "Nodes", "StepID")]
    with pytest.raises(SqueueFormatError):
        squeue_long_format("JobID,Bogus")


def test_scontrol_show_job_memory_and_tres_as_scontrol_prints_them():
    """fixtures/22.05/scenario/scontrol-job-*: one pending node's 16000M, four nodes' 62.50G;
    constraint/scontrol-5: two nodes' 32000M (not 31.25G: a multiple of 512 MB goes up a unit)."""
    from trainhub.slurm.scontrol_job import memory_text, scontrol_job_text, tres_text

    assert [memory_text(mb) for mb in (16000, 64000, 61440, 1024 * 1024, 32000, 48000, 1536 * 1024)] == [
        "16000M", "62.50G", "60G", "1T", "32000M", "48000M", "1.50T"]
    assert tres_text(cpus=4, mem_mb=0, nodes=4, billing=4, gpus=32) == "cpu=4,node=4,billing=4,gres/gpu=32"
    assert tres_text(cpus=1, mem_mb=16000, nodes=1, billing=1, gpus=0) == "cpu=1,mem=16000M,node=1,billing=1"
    assert scontrol_job_text([]) == "No jobs in the system\n"
    assert scontrol_job_text([], asked="7") == ""


@pytest.mark.parametrize(("prev_db", "recorded", "started", "shown"), [
    ("Dependency", "None", True, "Dependency"),  # its start record carried the kept reason
    ("None", "", True, "None"),
    ("JobHeldUser", "JobHeldUser", False, "JobHeldUser"),  # first record after a build
    ("AssocGrpCpuLimit", "None", False, "None"),  # first record before the build kept it
    ("JobHeldUser", "", False, "None"),  # ended before any record: the completion has none
    ("PartitionNodeLimit", "PartitionConfig", False, "PartitionConfig"),  # one build kept submission's reason
])
def test_sacct_reason_is_the_kept_reason_slurmdbd_got_with_the_jobs_records(prev_db, recorded, started, shown):
    """fixtures/22.05/acct-reason (Dependency, JobHeldUser, AssocGrpCpuLimit) and part-reason (PartitionConfig)."""
    assert accounting_reason(reason_prev_db=prev_db, reason_recorded=recorded, started=started) == shown
