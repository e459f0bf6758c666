"""The scheduler pass on the database: allocation at GPU granularity, Slurm's pending reasons,
backfill estimates, limits, time limits, usage, and partition_prio preemption with REQUEUE."""

import datetime as dt

import pytest
from django.db import IntegrityError, transaction

from tests.slurm.conftest import run_pass, seed_spec, slurm_spec
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.conf import parse_config
from trainhub.slurm.models import Association, GpuAllocation, JobNode, JobState, Qos, SlurmJob
from trainhub.slurm.services.accounting import account_add, associations_modify, user_add
from trainhub.slurm.services.clusters import cluster_config_set, cluster_create
from trainhub.slurm.services.jobs import Submission, job_submit


def at(now, **delta):
    return now + dt.timedelta(**delta)


def submit(cluster, user, *args, now, script=None):
    return job_submit(cluster=cluster, user=user, submission=Submission(argv=tuple(args), script=script), now=now)


def reload(job):
    job.refresh_from_db()
    return job


def test_jobs_share_a_node_by_gpus_and_never_get_the_same_gpu(accounts, cast, now):
    first = submit(accounts, cast["uma"], "--gres=gpu:4", "--wrap", "a", now=now)
    second = submit(accounts, cast["uma"], "--gres=gpu:4", "--wrap", "b", now=now)
    run_pass(accounts, now)
    first, second = reload(first), reload(second)
    assert first.state == second.state == JobState.RUNNING
    assert first.node_list == second.node_list  # best fit packs the second job onto the same node
    gpus = [set(JobNode.objects.get(job=job).gpu_indices) for job in (first, second)]
    assert gpus[0].isdisjoint(gpus[1]) and gpus[0] | gpus[1] == set(range(8))
    node = Node.objects.get(name=first.node_list)
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuAllocation.objects.create(job=first, node=node, gpu_index=min(gpus[1]))


def test_a_multi_node_job_gets_all_its_nodes_at_once_or_waits(accounts, cast, now):
    small = submit(accounts, cast["uma"], "--gres=gpu:1", "--wrap", "a", now=now)
    run_pass(accounts, now)
    big = submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "--wrap", "b", now=at(now, seconds=1))
    run_pass(accounts, at(now, seconds=3))  # the main scheduler, batch_sched_delay after its last run
    big = reload(big)
    assert big.state == JobState.PENDING and big.reason == "Resources"
    assert not JobNode.objects.filter(job=big).exists()
    from trainhub.slurm.services.jobs import job_cancel

    job_cancel(job=reload(small), actor=cast["uma"], is_admin=False, now=at(now, seconds=3))
    small = reload(small)
    assert small.state == JobState.CANCELLED  # no batch script ran yet: it ends at once
    run_pass(accounts, at(now, seconds=4))
    big = reload(big)
    assert big.state == JobState.RUNNING and big.node_list == "a4-[0-1]"
    assert sorted(JobNode.objects.filter(job=big).values_list("batch_host", flat=True)) == [False, True]


def test_a_job_submitted_after_a_main_run_waits_batch_sched_delay_but_not_after_a_job_ends(accounts, cast, now):
    """slurmctld runs its main scheduler for a submission batch_sched_delay (3 s) after its last run,
    but at once when a job's epilog completes (scheduler.main_due)."""
    small = submit(accounts, cast["uma"], "--gres=gpu:1", "--wrap", "a", now=now)
    run_pass(accounts, now)
    big = submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "--wrap", "b", now=at(now, seconds=1))
    run_pass(accounts, at(now, seconds=2))
    assert (reload(big).state, reload(big).reason) == (JobState.PENDING, "None")  # not looked at yet
    run_pass(accounts, at(now, seconds=3))
    assert (reload(big).state, reload(big).reason) == (JobState.PENDING, "Resources")
    from trainhub.slurm.services.jobs import job_cancel

    job_cancel(job=reload(small), actor=cast["uma"], is_admin=False, now=at(now, seconds=4))
    run_pass(accounts, at(now, seconds=5))  # 2 s after the last run, but a job ended
    assert reload(big).state == JobState.RUNNING


def test_later_jobs_of_a_blocked_partition_wait_for_priority(accounts, cast, now):
    jobs = [submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "--wrap", str(i), now=now) for i in range(3)]
    run_pass(accounts, now)
    assert [reload(job).state for job in jobs] == [JobState.RUNNING, JobState.PENDING, JobState.PENDING]
    assert [reload(job).reason for job in jobs[1:]] == ["Resources", "Priority"]


def test_backfill_starts_a_short_job_that_delays_no_reservation_and_estimates_starts(accounts, cast, now):
    running = submit(accounts, cast["uma"], "--gres=gpu:8", "-t", "60", "--wrap", "a", now=now)
    run_pass(accounts, now)
    big = submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "-t", "60", "--wrap", "b", now=at(now, seconds=1))
    short = submit(accounts, cast["uma"], "--gres=gpu:8", "-t", "30", "--wrap", "c", now=at(now, seconds=2))
    long = submit(accounts, cast["uma"], "--gres=gpu:8", "-t", "120", "--wrap", "d", now=at(now, seconds=3))
    run_pass(accounts, at(now, seconds=30))  # the next backfill iteration (bf_interval=30)
    assert reload(running).state == JobState.RUNNING
    big, short, long = reload(big), reload(short), reload(long)
    assert big.state == JobState.PENDING and big.reason == "Resources"
    # the big job's start is bounded by the running job's time limit (bf_resolution rounds it)
    assert big.expected_start is not None and big.expected_start <= at(now, minutes=60, seconds=1)
    assert short.state == JobState.RUNNING  # ends before the big job's reservation
    assert long.state == JobState.PENDING  # would delay the big job


def test_backfill_runs_every_bf_interval_not_at_every_pass(accounts, cast, now):
    """slurmctld's main scheduler runs on events; its backfill thread every bf_interval (30 s): a job
    only backfill can start waits for the next iteration, and a blocked job's --start estimate stays
    what the last iteration found."""
    submit(accounts, cast["uma"], "--gres=gpu:8", "-t", "60", "--wrap", "a", now=now)
    run_pass(accounts, now)
    big = submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "-t", "60", "--wrap", "b", now=at(now, seconds=1))
    run_pass(accounts, at(now, seconds=3))  # main scheduler only (batch_sched_delay after its last run)
    assert (reload(big).reason, reload(big).expected_start) == ("Resources", None)
    run_pass(accounts, at(now, seconds=30))
    estimate = reload(big).expected_start
    assert estimate is not None
    short = submit(accounts, cast["uma"], "--gres=gpu:8", "-t", "30", "--wrap", "c", now=at(now, seconds=31))
    run_pass(accounts, at(now, seconds=32))
    assert reload(short).state == JobState.PENDING  # fits only by backfill
    assert reload(big).expected_start == estimate  # kept between iterations
    run_pass(accounts, at(now, seconds=60))
    assert reload(short).state == JobState.RUNNING


def test_a_job_past_its_time_limit_is_stopped_as_timeout(accounts, cast, now):
    job = submit(accounts, cast["uma"], "-t", "1", "--wrap", "sleep 600", now=now)
    run_pass(accounts, now)
    assert reload(job).state == JobState.RUNNING
    run_pass(accounts, at(now, minutes=2))
    job = reload(job)
    # the batch script never launched (no agent ran its prolog), so it ends at once
    assert job.state == JobState.TIMEOUT and job.state_desc == "DUE TO TIME LIMIT"


def test_a_group_gpu_limit_keeps_jobs_pending_with_slurms_reason(accounts, cast, now):
    ml = Association.objects.get(cluster=accounts, account__name="ml", user="")
    associations_modify(cluster=accounts, associations=[ml], actor="test", settings={"grp_tres": {"gres/gpu": 8}})
    first = submit(accounts, cast["uma"], "--gres=gpu:8", "--wrap", "a", now=now)
    second = submit(accounts, cast["alice"], "--gres=gpu:1", "--wrap", "b", now=now)
    run_pass(accounts, now)
    assert reload(first).state == JobState.RUNNING
    second = reload(second)
    assert (second.state, second.reason) == (JobState.PENDING, "AssocGrpGRES")


def test_grp_tres_mins_times_out_the_accounts_jobs_at_the_limit_and_holds_the_next(accounts, cast, now):
    from trainhub.slurm.reports import sshare
    from trainhub.slurm.services.sacctmgr import sacctmgr_run

    sacctmgr_run(cluster=accounts, line="sacctmgr -i modify account ml set GrpTRESMins=gres/gpu=60", actor="root",
                 is_admin=True, now=now)
    first = submit(accounts, cast["uma"], "--gres=gpu:8", "--wrap", "a", now=now)
    run_pass(accounts, now)
    assert reload(first).state == JobState.RUNNING
    run_pass(accounts, at(now, minutes=8))  # 8 GPUs x 8 minutes: 63 decayed GPU-minutes
    first = reload(first)
    assert first.state == JobState.TIMEOUT
    assert first.state_desc == ("Job is at or exceeds association (acc=ml/user=(null)/part=(null)) group max "
                                "TRES(gres/gpu) minutes of 60 with 63")
    gpu = submit(accounts, cast["alice"], "--gres=gpu:1", "--wrap", "b", now=at(now, minutes=9))
    cpu_only = submit(accounts, cast["alice"], "--wrap", "c", now=at(now, minutes=9))
    run_pass(accounts, at(now, minutes=9))
    assert (reload(gpu).state, reload(gpu).reason) == (JobState.PENDING, "AssocGrpGRESMinutes")
    assert reload(cpu_only).state == JobState.RUNNING
    text = sshare(accounts, now=at(now, minutes=9), viewer="uma", long=True, all_users=True).text
    ml_row = next(line for line in text.splitlines() if line.split()[:1] == ["ml"] and "uma" not in line)
    assert "gres/gpu=60" in ml_row
    shown = sacctmgr_run(cluster=accounts, line="sacctmgr -n -P show assoc account=ml format=Account,User,GrpTRESMins",
                         actor="uma", is_admin=False, now=at(now, minutes=9)).output
    assert "ml||gres/gpu=60" in shown.splitlines()


def test_a_job_started_in_its_first_pass_keeps_the_priority_computed_for_it(accounts, cast, now):
    job = submit(accounts, cast["uma"], "--gres=gpu:8", "--wrap", "a", now=now)
    run_pass(accounts, at(now, hours=1))
    job = reload(job)
    assert job.state == JobState.RUNNING
    # an hour of age (of PriorityMaxAge 7 days, weight 1000) plus uma's fair-share (weight 10000)
    assert job.priority_time == at(now, hours=1) and job.factor_age == pytest.approx(1 / 168)
    assert job.priority == int(1000 * job.factor_age + 10000 * job.factor_fairshare) > 0


def test_a_pass_stores_every_pending_jobs_priority_and_reason(accounts, cast, now):
    Node.objects.filter(name__startswith="a4").update(state=NodeState.DRAIN, state_reason="maintenance")
    jobs = [submit(accounts, cast[user], "--gres=gpu:8", "--wrap", "x", now=now) for user in ("uma", "alice") * 3]
    run_pass(accounts, at(now, minutes=10))
    jobs = [reload(job) for job in jobs]
    assert all(job.priority_time == at(now, minutes=10) and job.priority > 0 for job in jobs)
    # alice has used nothing, uma nothing either: equal fair-share, so submit order decides
    assert [job.reason for job in jobs] == ["Resources"] + ["Priority"] * 5
    assert len({job.factor_fairshare for job in jobs}) == 1


def test_running_jobs_accrue_billable_usage_on_their_association(accounts, cast, now):
    job = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=now)
    run_pass(accounts, now)
    assert reload(job).state == JobState.RUNNING
    run_pass(accounts, at(now, seconds=100))
    uma = Association.objects.get(cluster=accounts, account__name="ml", user="uma")
    assert uma.raw_usage == 0  # usage is applied by the decay thread, once per PriorityCalcPeriod (5 min)
    run_pass(accounts, at(now, seconds=300))
    uma.refresh_from_db()
    # 4 CPUs billed (no TRESBillingWeights) for 300 s, decayed by a 7-day half-life
    assert uma.raw_usage == pytest.approx(1200, rel=1e-3)
    # and per TRES on the association and the job's QOS (what their GrpTRESMins hold)
    qos = Qos.objects.get(cluster=accounts, name=reload(job).qos)
    assert (uma.tres_usage["cpu"], qos.tres_usage["cpu"], qos.tres_usage["node"]) == (
        pytest.approx(1200, rel=1e-3), pytest.approx(1200, rel=1e-3), pytest.approx(300, rel=1e-3))


def test_a_run_that_ends_between_decay_runs_is_charged_at_its_end_and_moves_fairshare_at_the_next(
        accounts, cast, now):
    """As slurmctld (priority_p_job_end): RawUsage and the GrpTRESMins usage hold the run to its end
    at once; NormUsage, FairShare and so new jobs' priorities move only at the next decay run."""
    from trainhub.slurm import reports
    from trainhub.slurm.services.jobs import job_cancel

    job = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=now)
    run_pass(accounts, now)
    Node.objects.filter(dedicated_to=accounts.owner_key).update(state=NodeState.DRAIN, state_reason="maintenance")
    job_cancel(job=reload(job), actor=cast["uma"], is_admin=False, now=at(now, seconds=100))
    uma = Association.objects.get(cluster=accounts, account__name="ml", user="uma")
    assert uma.raw_usage == pytest.approx(400, rel=1e-3) and uma.tres_usage["cpu"] == pytest.approx(400, rel=1e-3)
    assert uma.decay_usage == 0

    def sshare_uma(moment):
        text = reports.sshare(accounts, now=moment, viewer="root", long=True, all_users=True).text
        return next(line.split()[3:7] for line in text.splitlines() if line.split()[1:2] == ["uma"])

    assert sshare_uma(at(now, seconds=100)) == ["0.500000", "399", "0.000000", "0.000000"]
    jobs = [submit(accounts, cast[user], "-n", "4", "--wrap", "b", now=at(now, seconds=110)) for user in ("uma", "alice")]
    run_pass(accounts, at(now, seconds=120))  # not a decay run: the new jobs' priorities, from the last one's usage
    assert reload(jobs[0]).factor_fairshare == reload(jobs[1]).factor_fairshare
    run_pass(accounts, at(now, seconds=300))
    uma.refresh_from_db()
    assert uma.raw_usage == pytest.approx(400, rel=1e-3) and uma.decay_usage == uma.raw_usage  # not charged twice
    assert sshare_uma(at(now, seconds=300)) == ["0.500000", "399", "1.000000", "1.000000"]
    assert reload(jobs[0]).factor_fairshare < reload(jobs[1]).factor_fairshare


def test_a_job_gets_its_priority_as_it_is_submitted_from_the_last_decay_runs_fairshare(accounts, cast, now):
    """slurmctld gives a job its priority as it makes its record (_set_job_prio), from the fair-share
    factors its decay thread last computed, and recomputes it at the next decay run only (sbatch reads
    no more of the cluster for it: tests/slurm/test_sbatch_cost.py). Before any decay run trainhub's
    first pass gives it."""
    from trainhub.slurm import reports

    Node.objects.filter(dedicated_to=accounts.owner_key).update(state=NodeState.DRAIN, state_reason="maintenance")
    early = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=now)
    assert early.priority_time is None
    run_pass(accounts, now)  # leaves the fair-share factors and norms submissions read
    early = reload(early)
    assert early.factor_fairshare > 0 and early.priority_time == now
    job = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=at(now, seconds=10))
    assert (job.priority, job.factor_fairshare, job.priority_time) == (early.priority, early.factor_fairshare,
                                                                      at(now, seconds=10))
    assert str(job.job_id) in reports.sprio(accounts, now=at(now, seconds=10)).text
    # usage charged since: the next decay run's fair-share, not the jobs submitted before it
    Association.objects.filter(cluster=accounts, account__name="ml", user="uma").update(raw_usage=1e9)
    later = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=at(now, seconds=20))
    run_pass(accounts, at(now, seconds=30))  # no decay run: priorities kept
    assert (reload(later).priority, reload(later).priority_time) == (early.priority, at(now, seconds=20))
    run_pass(accounts, at(now, seconds=300))  # the decay run
    assert reload(later).factor_fairshare < early.factor_fairshare
    last = submit(accounts, cast["uma"], "-n", "4", "--wrap", "a", now=at(now, seconds=310))
    assert (last.priority, last.factor_fairshare) == (reload(later).priority, reload(later).factor_fairshare)


def test_a_node_that_goes_down_requeues_its_jobs_as_node_fail(accounts, cast, now):
    job = submit(accounts, cast["uma"], "--gres=gpu:8", "--wrap", "a", now=now)
    run_pass(accounts, now)
    job = reload(job)
    Node.objects.filter(name=job.node_list).update(state=NodeState.DOWN)
    run_pass(accounts, at(now, seconds=5))
    job = reload(job)
    assert (job.state, job.restart_count, job.reason) == (JobState.PENDING, 1, "BeginTime")
    assert job.runs.get().state == JobState.NODE_FAIL


@pytest.fixture
def tiered(admin, slurm_pools, now):
    """The seed's config with two partitions on the same pool: low (PriorityTier=1), high (2)."""
    body = seed_spec()
    slurm_spec(body)["partitions"] = [
        {"id": "low", "node_pool_ids": ["a4"]},
        {"id": "high", "node_pool_ids": ["a4"], "config": {"PriorityTier": "2"}},
    ]
    cluster = cluster_create(project=admin.memberships.get().project, location="us-central1", cluster_id="tiers",
                             body=body, user=admin, now=now)
    account_add(cluster=cluster, name="ml", actor="test", now=now)
    user_add(cluster=cluster, name="uma", accounts=["ml"], actor="test", now=now)
    user_add(cluster=cluster, name="alice", accounts=["ml"], actor="test", now=now)
    return cluster


def test_partition_priority_preemption_requeues_the_lower_tier_job(tiered, cast, now):
    low = submit(tiered, cast["uma"], "-p", "low", "-N", "2", "--gres=gpu:8", "--wrap", "train", now=now)
    run_pass(tiered, now)
    assert reload(low).state == JobState.RUNNING
    high = submit(tiered, cast["alice"], "-p", "high", "--gres=gpu:8", "--wrap", "urgent", now=at(now, minutes=1))
    run_pass(tiered, at(now, minutes=1))
    # PreemptExemptTime=00:10:00: the low job may not be preempted before it ran 10 minutes
    assert reload(low).state == JobState.RUNNING
    assert reload(high).reason == "Resources"
    moment = at(now, minutes=11)
    run_pass(tiered, moment)
    low = reload(low)
    assert (low.state, low.restart_count, low.reason) == (JobState.PENDING, 1, "BeginTime")
    assert low.begin_time == at(moment, seconds=121)
    assert low.accrue_time is None and low.start_time is None
    record = low.runs.get()
    assert record.state == JobState.PREEMPTED and record.state_desc == f"preempted by job {high.job_id}"
    assert not GpuAllocation.objects.filter(job=low, active=True).exists()
    run_pass(tiered, at(moment, seconds=5))
    high = reload(high)
    assert high.state == JobState.RUNNING
    assert reload(low).state == JobState.PENDING and SlurmJob.objects.get(pk=low.pk).job_id == low.job_id


def test_a_requeued_victim_keeps_its_priority_until_the_next_calculation(tiered, cast, now):
    low = submit(tiered, cast["uma"], "-p", "low", "-N", "2", "--gres=gpu:8", "--wrap", "train", now=now)
    run_pass(tiered, now)
    before = reload(low).priority, reload(low).priority_time
    submit(tiered, cast["alice"], "-p", "high", "--gres=gpu:8", "--wrap", "urgent", now=at(now, minutes=11))
    moment = at(now, minutes=11)
    run_pass(tiered, moment)
    run_pass(tiered, at(moment, seconds=5))
    tiered.refresh_from_db()
    low = reload(low)
    assert (low.state, (low.priority, low.priority_time)) == (JobState.PENDING, before)
    period = dt.timedelta(seconds=parse_config(tiered.config).priority_calc_period)
    due = tiered.last_priority_time + period
    run_pass(tiered, due)  # the decay thread recomputes every pending job
    assert reload(low).priority_time == due


def test_a_requeued_job_runs_again_under_the_same_id(tiered, cast, now):
    low = submit(tiered, cast["uma"], "-p", "low", "-N", "2", "--gres=gpu:8", "--wrap", "train", now=now)
    run_pass(tiered, now)
    high = submit(tiered, cast["alice"], "-p", "high", "-N", "2", "--gres=gpu:8", "-t", "5", "--wrap", "u",
                  now=at(now, minutes=11))
    run_pass(tiered, at(now, minutes=11))
    run_pass(tiered, at(now, minutes=11, seconds=1))
    assert reload(high).state == JobState.RUNNING
    run_pass(tiered, at(now, minutes=17))  # high hits its 5-minute limit
    assert reload(high).state == JobState.TIMEOUT
    run_pass(tiered, at(now, minutes=17, seconds=1))
    low = reload(low)
    assert (low.state, low.restart_count) == (JobState.RUNNING, 1)
    assert [run.state for run in low.runs.order_by("index")] == [JobState.PREEMPTED, JobState.RUNNING]


def test_a_failed_pass_is_recorded_on_the_cluster_and_shown(accounts, client, cast, now, monkeypatch):
    from trainhub.slurm.services import passes

    def broken(**_kwargs):
        raise RuntimeError("the scheduler fell over")

    monkeypatch.setattr(passes, "cluster_pass", broken)
    assert passes.cluster_pass_recorded(cluster_pk=accounts.pk, now=now) is None
    accounts.refresh_from_db()
    assert accounts.last_pass_summary == {"time": accounts.last_pass_summary["time"], "ok": False,
                                          "error": "RuntimeError: the scheduler fell over"}
    client.force_login(cast["vic"])
    page = client.get("/slurm/projects/alpha/locations/us-central1/clusters/c1/").content.decode()
    assert "failed: RuntimeError: the scheduler fell over" in page


def test_a_finished_job_asks_for_a_pass(accounts, cast, now, django_capture_on_commit_callbacks):
    from trainhub.slurm.services.lifecycle import job_batch_finished

    job = submit(accounts, cast["uma"], "--wrap", "a", now=now)
    run_pass(accounts, now)
    with django_capture_on_commit_callbacks(execute=True):
        job_batch_finished(job_node=JobNode.objects.get(job=job), exit_code=0, signal=0, max_rss_kb=None, now=now)
    accounts.refresh_from_db()
    assert accounts.last_pass_summary["ok"] and accounts.last_pass_time > now  # the pass ran (eager Celery)


@pytest.mark.parametrize(("exit_code", "signal", "reason"), [(3, 0, "NonZeroExitCode"), (0, 9, "JobLaunchFailure")])
def test_a_failed_batch_script_gives_job_completes_reason_for_an_exit_code_or_a_signal(accounts, cast, now, exit_code,
                                                                                       signal, reason):
    """job_mgr.c job_complete: FAIL_EXIT_CODE for a non-zero exit, FAIL_LAUNCH for a death by a signal
    (22.05.8: ``--wrap 'exit 3'`` Reason=NonZeroExitCode ExitCode=3:0, ``--wrap 'kill -9 $$'``
    Reason=JobLaunchFailure ExitCode=0:9)."""
    from trainhub.slurm.services.lifecycle import job_batch_finished

    job = submit(accounts, cast["uma"], "--wrap", "a", now=now)
    run_pass(accounts, now)
    job_batch_finished(job_node=JobNode.objects.get(job=job), exit_code=exit_code, signal=signal, max_rss_kb=None,
                       now=now)
    job = reload(job)
    assert (job.state, job.reason, job.exit_code, job.exit_signal) == (JobState.FAILED, reason, exit_code, signal)


def test_usage_decays_by_the_half_life_and_resets_at_the_period(accounts, now):
    from trainhub.slurm.services.clusters import cluster_config_set

    cluster_config_set(cluster=accounts, changes={"PriorityDecayHalfLife": "1-0"}, actor="alice")
    Association.objects.filter(user="uma").update(raw_usage=1000.0)
    Qos.objects.filter(cluster=accounts, name="normal").update(raw_usage=1000.0, tres_usage={"gres/gpu": 1000.0})
    run_pass(accounts, now)
    run_pass(accounts, at(now, days=1))
    # Slurm's per-second factor 1 - 0.693/half-life, to the power of a day: about one half
    assert Association.objects.get(user="uma").raw_usage == pytest.approx(500, rel=0.01)
    assert Qos.objects.get(cluster=accounts, name="normal").tres_usage["gres/gpu"] == pytest.approx(500, rel=0.01)
    cluster_config_set(cluster=accounts, changes={"PriorityUsageResetPeriod": "DAILY"}, actor="alice")
    run_pass(accounts, at(now, days=2, hours=1))
    assert Association.objects.get(user="uma").raw_usage == 0
    assert Qos.objects.get(cluster=accounts, name="normal").tres_usage == {}


def test_a_victim_past_its_grace_time_is_requeued_where_backfill_runs_more_often_than_30_s(tiered, cast, now):
    """bf_interval=10: a backfill iteration every 10 s tries the victim's preemptor, which requeues the
    victim past its GraceTime (preemption's module doc); the 30 s since the last iteration never come,
    and the victim must not hold its nodes for ever."""
    from trainhub.slurm.services.lifecycle import job_node_prolog_finished, job_preempt

    cluster_config_set(cluster=tiered, changes={"SchedulerParameters": "bf_interval=10"}, actor="alice")
    victim = submit(tiered, cast["uma"], "-p", "low", "--gres=gpu:8", "--wrap", "train", now=now)
    run_pass(tiered, now)
    job_node_prolog_finished(job_node=JobNode.objects.get(job=victim), exit_code=0, now=now)  # its script runs
    chosen = at(now, minutes=11)
    job_preempt(job=reload(victim), requeue=True, now=chosen, desc="preempted", kill_at=at(chosen, seconds=30))
    for seconds in range(10, 100, 10):
        run_pass(tiered, at(chosen, seconds=seconds))
    victim = reload(victim)
    assert (victim.state, victim.restart_count) == (JobState.PENDING, 1)
    assert victim.runs.get().end_time == at(chosen, seconds=30)  # the first iteration after its GraceTime


def test_a_node_range_job_runs_on_fewer_nodes_while_one_is_drained(accounts, cast, now):
    """-N 1-2 asks for up to 2 nodes, at least 1: a DRAIN (or DOWN, or silent) node is no node the
    select plugin is given, so the job runs on the one left (rem_nodes counts the usable nodes) instead
    of waiting for the drained one for ever."""
    from trainhub.slurm.services.clusters import node_state_set

    node_state_set(cluster=accounts, node=Node.objects.get(name="a4-1"), state=NodeState.DRAIN, reason="fan",
                   actor="alice")
    for minute, args in enumerate((("-N", "1-2"), ("-N", "1-2", "-n", "2"))):
        job = submit(accounts, cast["uma"], *args, "--wrap", "x", now=at(now, minutes=minute))
        run_pass(accounts, at(now, minutes=minute))
        assert (reload(job).state, reload(job).node_list) == (JobState.RUNNING, "a4-0"), args


def test_switching_to_priority_basic_gives_a_job_queued_before_the_lowest_priority_not_an_error(accounts, cast, now):
    """A job queued under priority/multifactor took no FIFO value: under priority/basic it is last
    (priority 1, priority_basic.c's floor), its nice cannot take it below 0 (the pass raised)."""
    submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "--wrap", "x", now=now)
    niced = submit(accounts, cast["uma"], "--nice=10", "--gres=gpu:1", "--wrap", "x", now=now)
    run_pass(accounts, now)
    accounts = cluster_config_set(cluster=accounts, changes={"PriorityType": "priority/basic"}, actor="alice")
    later = submit(accounts, cast["uma"], "--gres=gpu:1", "--wrap", "x", now=at(now, minutes=1))
    run_pass(accounts, at(now, minutes=1))
    assert (reload(niced).state, reload(niced).priority) == (JobState.PENDING, 1)
    assert reload(later).priority > 1


def test_a_pass_that_builds_a_queue_keeps_the_reason_its_jobs_waited_for_accounting(accounts, cast, now):
    """build_job_queue (scheduler.reason_prev_db): a held job's JobHeldUser is kept by the first pass that runs
    the main scheduler after its submission, not by one between (batch_sched_delay), and stays once it is
    released and runs; Resources and Priority are not kept."""
    submit(accounts, cast["uma"], "-N", "2", "--gres=gpu:8", "--wrap", "all", now=now)
    run_pass(accounts, now)
    held = submit(accounts, cast["uma"], "-H", "--wrap", "h", now=at(now, seconds=1))
    waiting = [submit(accounts, cast["uma"], "--gres=gpu:1", "--wrap", str(i), now=at(now, seconds=1)) for i in range(2)]
    run_pass(accounts, at(now, seconds=2))  # the main scheduler is not due: no queue build
    assert reload(held).reason_prev_db == "None"
    run_pass(accounts, at(now, seconds=3))
    assert [reload(job).reason for job in waiting] == ["Resources", "Priority"]
    assert reload(held).reason_prev_db == "JobHeldUser"
    run_pass(accounts, at(now, seconds=6))
    assert [reload(job).reason_prev_db for job in waiting] == ["None", "None"]
    from trainhub.slurm.services.jobs import job_release

    job_release(job=reload(held), actor=cast["uma"], is_admin=False, now=at(now, seconds=7))
    run_pass(accounts, at(now, seconds=9))
    assert (reload(held).state, reload(held).reason_prev_db) == (JobState.RUNNING, "JobHeldUser")


def test_a_pass_keeps_reasons_for_accounting_in_its_one_write_of_each_pending_job(accounts, cast, now):
    """The kept reasons go in the statements that write the pass's reasons (one executemany each, logged
    once), not one query per job."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for i in range(8):
        submit(accounts, cast["uma"], "-H", "--wrap", str(i), now=now)
    with CaptureQueriesContext(connection) as queries:
        run_pass(accounts, at(now, seconds=1))
    kept = [query["sql"] for query in queries.captured_queries
            if "UPDATE" in query["sql"] and '"reason_prev_db" = ' in query["sql"]]  # "N times: UPDATE ..."
    assert SlurmJob.objects.filter(reason_prev_db="JobHeldUser").count() == 8
    assert 1 <= len(kept) <= 3 and all('"reason" = ' in sql for sql in kept)


def test_a_pending_jobs_first_record_carries_the_reason_kept_then(accounts, cast, now):
    """services.accounting.job_records_sent (slurmctld's db_inx thread): a pending job's first record
    takes its reason_prev_db, which later passes do not change; a job submitted after the tick waits
    for the next."""
    from trainhub.slurm.services.accounting import job_records_sent

    early = submit(accounts, cast["uma"], "-H", "--wrap", "a", now=now)
    run_pass(accounts, now)
    late = submit(accounts, cast["uma"], "-H", "--wrap", "b", now=at(now, seconds=2))
    assert job_records_sent(now=at(now, seconds=1)) == 1
    assert (reload(early).reason_recorded, reload(late).reason_recorded) == ("JobHeldUser", "")
    run_pass(accounts, at(now, seconds=3))
    assert job_records_sent(now=at(now, seconds=6)) == 1
    assert reload(late).reason_recorded == "JobHeldUser"


def test_beat_sends_pending_jobs_first_records_every_5_seconds(accounts, cast, now, settings):
    """As slurmctld's db_inx thread, apart from the passes (a pending job submitted in the past)."""
    from trainhub.slurm import tasks

    assert settings.CELERY_BEAT_SCHEDULE["slurm-job-records"] == {"task": "trainhub.slurm.tasks.job_records_send",
                                                                  "schedule": 5.0}
    held = submit(accounts, cast["uma"], "-H", "--wrap", "a", now=now - dt.timedelta(minutes=1))
    tasks.job_records_send()
    assert reload(held).reason_recorded == "None"  # no queue build had kept JobHeldUser
