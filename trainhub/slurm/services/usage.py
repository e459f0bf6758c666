"""Fair-share usage: billable TRES-seconds charged to each job's association and QOS, decayed by
PriorityDecayHalfLife and zeroed at PriorityUsageResetPeriod boundaries (trainhub.slurm.fairshare
holds the formulas). An association's ``raw_usage`` holds only its own jobs' usage; accounts'
usage is the sum of their subtree, computed by fairshare.compute_fairshare. ``tres_usage`` keeps
the same per TRES (Slurm's usage_tres_raw) for associations and QOS, which GrpTRESMins limits.

As slurmctld's priority/multifactor: the decay thread (usage_pass, every PriorityCalcPeriod) decays
every usage and charges the running jobs up to its run, and a run that ends is charged its last
period at once (run_ended_charge; priority_p_job_end), so RawUsage and GrpTRESMins see it. What
NormUsage, EffectvUsage, LevelFS, FairShare and the priorities are computed from changes only at
the decay thread: an association's ``decay_usage`` is ``raw_usage`` as the last usage_pass left it."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db import transaction
from django.db.models import F

from trainhub.slurm.conf import SlurmConfig, parse_config
from trainhub.slurm.fairshare import decayed, usage_increment, usage_reset_due
from trainhub.slurm.models import Association, JobRun, Qos, SlurmCluster, SlurmJob



def run_tres(run: JobRun) -> dict[str, float]:
    """The TRES a run holds, as usage counts them."""
    tres = {"cpu": float(run.alloc_cpus), "node": float(run.num_nodes), "billing": run.billing}
    if run.alloc_gpus:
        tres["gres/gpu"] = float(run.alloc_gpus)
    return tres


def charge_runs(*, cluster: SlurmCluster, runs: list[tuple[SlurmJob, JobRun, float]],
                config: SlurmConfig | None = None) -> None:
    """Add ``seconds`` of each run's billing (times its QOS UsageFactor) to its association and QOS,
    and of each TRES it holds to their ``tres_usage``."""
    config = config or parse_config(cluster.config)
    qos_rows = {q.name: q for q in Qos.objects.filter(cluster=cluster, name__in={job.qos for job, _, _ in runs})}
    assoc_keys = {(a.account.name, a.user, a.partition): a.pk
                  for a in Association.objects.filter(cluster=cluster, user__in={job.user_name for job, _, _ in runs})
                  .select_related("account")}
    by_assoc: dict[int, float] = defaultdict(float)
    by_assoc_tres: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_qos: dict[int, float] = defaultdict(float)
    by_qos_tres: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    half_life = config.priority_decay_half_life
    for job, run, seconds in runs:
        qos = qos_rows.get(job.qos)
        factor = float(qos.settings.get("usage_factor", 1.0)) if qos else 1.0
        charge = usage_increment(run.billing, seconds, half_life, factor)
        if seconds <= 0:
            continue
        assoc = assoc_keys.get((job.account, job.user_name, job.partition)) or assoc_keys.get(
            (job.account, job.user_name, ""))
        tres = {name: usage_increment(count, seconds, half_life, factor) for name, count in run_tres(run).items()}
        if assoc is not None:
            by_assoc[assoc] += charge
            for name, added in tres.items():
                by_assoc_tres[assoc][name] += added
        if qos is not None:
            by_qos[qos.pk] += charge
            for name, added in tres.items():
                by_qos_tres[qos.pk][name] += added
    for model, charges, tres_charges in ((Association, by_assoc, by_assoc_tres), (Qos, by_qos, by_qos_tres)):
        tres_usage = dict(model.objects.filter(pk__in=tres_charges).values_list("pk", "tres_usage"))
        for pk, charge in charges.items():
            usage = dict(tres_usage.get(pk) or {})
            for name, added in tres_charges.get(pk, {}).items():
                usage[name] = usage.get(name, 0.0) + added
            model.objects.filter(pk=pk).update(raw_usage=F("raw_usage") + charge, tres_usage=usage)


def run_ended_charge(*, job: SlurmJob, run: JobRun) -> None:
    """Charge a run that just ended (``run.end_time``) for the time since the last decay calculation
    (or its start), as slurmctld's priority_p_job_end: into raw_usage and tres_usage, not decay_usage."""
    cluster = job.cluster
    # the cluster's row locked as usage_pass locks it: a run ending during a decay run is charged
    # after it (from its new time) or before it (then not running for it), never twice
    last = SlurmCluster.objects.select_for_update().filter(pk=cluster.pk).values_list(
        "last_decay_time", flat=True).first()
    seconds = (run.end_time - max(run.start_time, last or run.start_time)).total_seconds()
    if seconds > 0:
        charge_runs(cluster=cluster, runs=[(job, run, seconds)])


def _decay_all(cluster: SlurmCluster, seconds: float, half_life: int) -> None:
    for assoc in Association.objects.filter(cluster=cluster, raw_usage__gt=0).only("pk", "raw_usage", "tres_usage"):
        Association.objects.filter(pk=assoc.pk).update(
            raw_usage=decayed(assoc.raw_usage, seconds, half_life),
            tres_usage={name: decayed(used, seconds, half_life) for name, used in assoc.tres_usage.items()})
    for qos in Qos.objects.filter(cluster=cluster, raw_usage__gt=0).only("pk", "raw_usage", "tres_usage", "settings"):
        if "nodecay" not in {flag.lower() for flag in qos.settings.get("flags", [])}:
            Qos.objects.filter(pk=qos.pk).update(
                raw_usage=decayed(qos.raw_usage, seconds, half_life),
                tres_usage={name: decayed(used, seconds, half_life) for name, used in qos.tres_usage.items()})


@transaction.atomic
def usage_pass(*, cluster: SlurmCluster, config: SlurmConfig, now: dt.datetime) -> float:
    """Decay every usage since the last run, then charge every running run for the part of that time
    it ran (Slurm's decay thread, once per PriorityCalcPeriod: _apply_decay, then _apply_new_usage
    over the running jobs; ended runs were charged when they ended, run_ended_charge), and take the
    result as what fair-share is computed from until the next run (``decay_usage``). Returns the
    seconds covered."""
    cluster = SlurmCluster.objects.select_for_update().get(pk=cluster.pk)
    last = cluster.last_decay_time or now
    seconds = (now - last).total_seconds()
    if seconds <= 0:
        return 0.0
    if usage_reset_due(config.priority_usage_reset_period, cluster.last_usage_reset, now):
        Association.objects.filter(cluster=cluster).update(raw_usage=0.0, tres_usage={})
        Qos.objects.filter(cluster=cluster).update(raw_usage=0.0, tres_usage={})
        cluster.last_usage_reset = now
    else:
        _decay_all(cluster, seconds, config.priority_decay_half_life)
    runs = JobRun.objects.filter(job__cluster=cluster, start_time__lt=now, end_time__isnull=True).select_related("job")
    charges = [(run.job, run, (now - max(run.start_time, last)).total_seconds()) for run in runs]
    charge_runs(cluster=cluster, runs=charges, config=config)
    Association.objects.filter(cluster=cluster).update(decay_usage=F("raw_usage"))
    cluster.last_decay_time = now
    cluster.save(update_fields=["last_decay_time", "last_usage_reset"])
    return seconds
