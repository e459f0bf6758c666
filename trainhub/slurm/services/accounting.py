"""slurmdbd's writes: accounts (a tree under root), users, associations and QOS, as sacctmgr makes them.

Settings are stored under the field names of trainhub.slurm.limits' AssocRecord / QosRecord
(``grp_tres``, ``max_wall_minutes``, ``qos``, ``flags``, ...) plus ``priority``; a None value clears a
setting (sacctmgr's ``=-1``). Every change leaves an audit entry on the cluster.

Rules (sacctmgr.1, accounting.shtml): a new account's parent defaults to root, its description
to its name and its organization to the parent's (the name itself under root); a user's
association is (account, user[, partition]) under the account's association; a user's first
account becomes its default account; deleting an account removes every association below it;
deleting associations cancels their pending and running jobs (resource_limits.shtml).

Job records: slurmdbd learns a pending job's sacct Reason from the first record slurmctld sends of it
(job_records_sent).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from trainhub.common.errors import ApiError
from trainhub.slurm.models import Account, Association, JobState, Qos, SlurmCluster, SlurmJob, SlurmUser
from trainhub.slurm.services.clusters import ROOT, audit, request_pass
from trainhub.slurm.services.lifecycle import job_event, job_stop

ADMIN_LEVELS = ("None", "Operator", "Administrator")


class AccountingError(ApiError):
    """A refused sacctmgr change; the message is sacctmgr's."""

    def __init__(self, message: str):
        super().__init__(400, message, "FAILED_PRECONDITION")


def merge_settings(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` over ``current``; a None value removes the setting (sacctmgr ``=-1``). TRES maps
    merge per TRES (``GrpTRES=gres/gpu=-1`` clears only the GPU limit)."""
    merged = dict(current)
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        elif isinstance(value, Mapping):
            tres = {**merged.get(name, {}), **value}
            tres = {key: count for key, count in tres.items() if count is not None}
            if tres:
                merged[name] = tres
            else:
                merged.pop(name, None)
        else:
            merged[name] = list(value) if isinstance(value, (set, frozenset, tuple)) else value
    return merged


def _account(cluster: SlurmCluster, name: str) -> Account:
    account = Account.objects.filter(cluster=cluster, name=name).first()
    if account is None:
        raise AccountingError(f" Account {name} doesn't exist")
    return account


def _account_association(account: Account) -> Association:
    return Association.objects.get(cluster_id=account.cluster_id, account=account, user="", partition="")


def account_add(*, cluster: SlurmCluster, name: str, actor: str, parent: str = ROOT, description: str = "",
                organization: str = "", shares: int | None = 1, settings: Mapping[str, Any] | None = None,
                now: dt.datetime | None = None) -> Account:
    now = now or timezone.now()
    with transaction.atomic():
        if Account.objects.filter(cluster=cluster, name=name).exists():
            raise AccountingError(f" Nothing new added.\n Account {name} already exists")
        parent_account = _account(cluster, parent)
        account = Account.objects.create(
            cluster=cluster, name=name, description=description or name,
            organization=organization or (name if parent == ROOT else parent_account.organization))
        Association.objects.create(cluster=cluster, account=account, parent=_account_association(parent_account),
                                   shares=shares, settings=merge_settings({}, settings or {}))
        audit(cluster, actor=actor, subject=f"account {name}", old=None,
              new={"parent": parent, "fairshare": shares, **merge_settings({}, settings or {})}, now=now)
    return account


def account_move(*, cluster: SlurmCluster, account: Account, parent: str, actor: str,
                 now: dt.datetime | None = None) -> Account:
    """``modify account NAME set parent=P``: the account and its subtree move under P."""
    now = now or timezone.now()
    with transaction.atomic():
        assoc = _account_association(account)
        new_parent = _account_association(_account(cluster, parent))
        ancestor: Association | None = new_parent
        while ancestor is not None:
            if ancestor.pk == assoc.pk:
                raise AccountingError(f" Can't move account {account.name} under its own sub-account {parent}")
            ancestor = ancestor.parent
        old = assoc.parent.account.name if assoc.parent else None
        assoc.parent = new_parent
        assoc.save(update_fields=["parent"])
        audit(cluster, actor=actor, subject=f"account {account.name} parent", old=old, new=parent, now=now)
        request_pass(cluster)
    return account


def user_add(*, cluster: SlurmCluster, name: str, accounts: Iterable[str], actor: str, partition: str = "",
             default_account: str | None = None, admin_level: str | None = None, shares: int | None = 1,
             settings: Mapping[str, Any] | None = None, now: dt.datetime | None = None) -> list[Association]:
    """``sacctmgr add user NAME Accounts=A[,B] [Partition=P]``: one association per account."""
    now = now or timezone.now()
    accounts = list(accounts)
    if not accounts and not default_account:
        raise AccountingError(" Need name of account to add user to.")
    accounts = accounts or [default_account]
    if admin_level is not None and admin_level not in ADMIN_LEVELS:
        raise AccountingError(f" Unknown AdminLevel {admin_level}; use one of {', '.join(ADMIN_LEVELS)}")
    created: list[Association] = []
    with transaction.atomic():
        user, _ = SlurmUser.objects.get_or_create(cluster=cluster, name=name)
        for account_name in accounts:
            account = _account(cluster, account_name)
            if Association.objects.filter(cluster=cluster, account=account, user=name, partition=partition).exists():
                continue
            created.append(Association.objects.create(
                cluster=cluster, account=account, user=name, partition=partition,
                parent=_account_association(account), shares=shares, settings=merge_settings({}, settings or {})))
        if not created:
            raise AccountingError(" Nothing new added.")
        if default_account or not user.default_account:
            user.default_account = default_account or accounts[0]
        if admin_level is not None:
            user.admin_level = admin_level
        user.save(update_fields=["default_account", "admin_level"])
        audit(cluster, actor=actor, subject=f"user {name}", old=None,
              new={"accounts": accounts, "partition": partition, "fairshare": shares,
                   **merge_settings({}, settings or {})}, now=now)
    return created


def qos_add(*, cluster: SlurmCluster, name: str, actor: str, description: str = "",
            settings: Mapping[str, Any] | None = None, now: dt.datetime | None = None) -> Qos:
    now = now or timezone.now()
    with transaction.atomic():
        if Qos.objects.filter(cluster=cluster, name=name).exists():
            raise AccountingError(f" Nothing new added.\n Qos {name} already exists")
        qos = Qos.objects.create(cluster=cluster, name=name, description=description or name,
                                 settings=merge_settings({}, settings or {}))
        audit(cluster, actor=actor, subject=f"qos {name}", old=None, new=qos.settings, now=now)
        request_pass(cluster)
    return qos


def associations_modify(*, cluster: SlurmCluster, associations: Iterable[Association], actor: str,
                        shares: int | None | str = "unchanged", settings: Mapping[str, Any] | None = None,
                        now: dt.datetime | None = None) -> int:
    """Set Fairshare (an int, or None for Fairshare=parent) and/or limits on associations."""
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        for assoc in associations:
            old = {"fairshare": assoc.shares, **assoc.settings}
            if shares != "unchanged":
                assoc.shares = shares
            assoc.settings = merge_settings(assoc.settings, settings or {})
            assoc.save(update_fields=["shares", "settings"])
            audit(cluster, actor=actor, subject=f"association {assoc}", old=old,
                  new={"fairshare": assoc.shares, **assoc.settings}, now=now)
            count += 1
        request_pass(cluster)
    return count


def qos_modify(*, cluster: SlurmCluster, qos_rows: Iterable[Qos], actor: str, settings: Mapping[str, Any],
               description: str | None = None, now: dt.datetime | None = None) -> int:
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        for qos in qos_rows:
            old = dict(qos.settings)
            qos.settings = merge_settings(qos.settings, settings)
            if description is not None:
                qos.description = description
            qos.save(update_fields=["settings", "description"])
            audit(cluster, actor=actor, subject=f"qos {qos.name}", old=old, new=qos.settings, now=now)
            count += 1
        request_pass(cluster)
    return count


def accounts_modify(*, cluster: SlurmCluster, accounts: Iterable[Account], actor: str, description: str | None = None,
                    organization: str | None = None, now: dt.datetime | None = None) -> int:
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        for account in accounts:
            old = {"description": account.description, "organization": account.organization}
            account.description = description if description is not None else account.description
            account.organization = organization if organization is not None else account.organization
            account.save(update_fields=["description", "organization"])
            audit(cluster, actor=actor, subject=f"account {account.name}", old=old,
                  new={"description": account.description, "organization": account.organization}, now=now)
            count += 1
    return count


def users_modify(*, cluster: SlurmCluster, users: Iterable[SlurmUser], actor: str, default_account: str | None = None,
                 admin_level: str | None = None, now: dt.datetime | None = None) -> int:
    now = now or timezone.now()
    if admin_level is not None and admin_level not in ADMIN_LEVELS:
        raise AccountingError(f" Unknown AdminLevel {admin_level}; use one of {', '.join(ADMIN_LEVELS)}")
    count = 0
    with transaction.atomic():
        for user in users:
            if default_account is not None and not Association.objects.filter(
                    cluster=cluster, user=user.name, account__name=default_account).exists():
                raise AccountingError(f" User {user.name} has no association with account {default_account}; "
                                      "add it first")
            old = {"default_account": user.default_account, "admin_level": user.admin_level}
            user.default_account = default_account if default_account is not None else user.default_account
            user.admin_level = admin_level if admin_level is not None else user.admin_level
            user.save(update_fields=["default_account", "admin_level"])
            audit(cluster, actor=actor, subject=f"user {user.name}", old=old,
                  new={"default_account": user.default_account, "admin_level": user.admin_level}, now=now)
            count += 1
    return count


def _cancel_jobs_of(cluster: SlurmCluster, removed: list[Association], actor: str, now: dt.datetime) -> None:
    """Jobs of deleted associations are cancelled (resource_limits.shtml)."""
    for assoc in removed:
        if not assoc.user:
            continue
        for job in SlurmJob.objects.filter(cluster=cluster, account=assoc.account.name, user_name=assoc.user,
                                           state__in=[JobState.PENDING, JobState.RUNNING]):
            if assoc.partition and job.partition != assoc.partition:
                continue
            if job.state == JobState.RUNNING:
                job_stop(job=job, ending_state=JobState.CANCELLED, now=now, desc=f"association removed by {actor}")
            else:
                SlurmJob.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, end_time=now, reason="None",
                                                          state_desc=f"association removed by {actor}")
                job_event(job, now, f"Cancelled: its association was removed by {actor}.")


def _subtree(assoc: Association, children: dict[int, list[Association]]) -> list[Association]:
    found = [assoc]
    for child in children.get(assoc.pk, []):
        found += _subtree(child, children)
    return found


def associations_delete(*, cluster: SlurmCluster, associations: list[Association], actor: str,
                        now: dt.datetime | None = None) -> list[Association]:
    """Remove associations and everything below them; their jobs are cancelled. Returns what was
    removed (sacctmgr lists it)."""
    now = now or timezone.now()
    with transaction.atomic():
        children: dict[int, list[Association]] = {}
        for row in Association.objects.filter(cluster=cluster).select_related("account"):
            children.setdefault(row.parent_id, []).append(row)
        removed: dict[int, Association] = {}
        for assoc in associations:
            if assoc.parent_id is None:
                raise AccountingError(" The root association cannot be removed")
            for row in _subtree(assoc, children):
                removed[row.pk] = row
        rows = list(removed.values())
        _cancel_jobs_of(cluster, rows, actor, now)
        Association.objects.filter(pk__in=removed).delete()
        account_names = {row.account.name for row in rows if not row.user}
        Account.objects.filter(cluster=cluster, name__in=account_names).delete()
        users = {row.user for row in rows if row.user}
        for user in SlurmUser.objects.filter(cluster=cluster, name__in=users):
            remaining = list(Association.objects.filter(cluster=cluster, user=user.name)
                             .values_list("account__name", flat=True))
            if not remaining:
                user.delete()
            elif user.default_account not in remaining:
                user.default_account = remaining[0]
                user.save(update_fields=["default_account"])
        for row in rows:
            audit(cluster, actor=actor, subject=f"association {row}", old={"fairshare": row.shares, **row.settings},
                  new=None, now=now)
        request_pass(cluster)
    return rows


def qos_delete(*, cluster: SlurmCluster, qos_rows: list[Qos], actor: str, now: dt.datetime | None = None) -> list[Qos]:
    now = now or timezone.now()
    with transaction.atomic():
        for qos in qos_rows:
            if SlurmJob.objects.filter(cluster=cluster, qos=qos.name,
                                       state__in=[JobState.PENDING, JobState.RUNNING]).exists():
                raise AccountingError(f" Qos {qos.name} has pending or running jobs; cancel them first")
            audit(cluster, actor=actor, subject=f"qos {qos.name}", old=qos.settings, new=None, now=now)
        Qos.objects.filter(pk__in=[q.pk for q in qos_rows]).delete()
        request_pass(cluster)
    return qos_rows


def job_records_sent(*, now: dt.datetime) -> int:
    """slurmctld's db_inx thread (slurm:src/plugins/accounting_storage/slurmdbd/accounting_storage_slurmdbd.c
    _set_db_inx_thread): every 5 seconds it sends slurmdbd a start record of each job it has sent none of,
    with the job's state_reason_prev_db (SlurmJob.reason_prev_db). That is the Reason sacct shows of a job
    that never runs, pending or ended: a later queue build changes only slurmctld's copy, and the job's
    completion record carries no reason (fixtures/22.05/job-records: ``-N 5`` kept PartitionConfig after
    cancelling; acct-reason: a pending ``-d afterok`` shows Dependency, a job whose first build gave it
    AssocGrpCpuLimit None until it ran). The thread runs apart from the scheduler, so whether a job's first
    record comes before or after its first queue build is a race (job-records: held jobs cancelled after a
    build showed None; acct-reason: JobHeldUser). Returns how many jobs' records were sent."""
    return (SlurmJob.objects.filter(state=JobState.PENDING, reason_recorded="", submit_time__lte=now)
            .update(reason_recorded=F("reason_prev_db")))
