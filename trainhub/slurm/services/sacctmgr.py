"""Running sacctmgr commands (parsed by trainhub.slurm.sacctmgr) against a cluster's accounting.

``sacctmgr_run`` answers what sacctmgr prints and its exit status. Changes need an administrator
(sacctmgr's AdminLevel; here: a platform admin holding aiplatform.slurmClusters.update) and run in
one transaction; without ``-i`` the change is made, printed and rolled back, and the answer asks
for confirmation (the CLI prompts as sacctmgr does, the web console offers a Commit button).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from trainhub.slurm import sacctmgr as syntax
from trainhub.slurm.models import Account, Association, Qos, SlurmCluster, SlurmUser
from trainhub.slurm.services import accounting
from trainhub.slurm.services.clusters import ROOT

#: sacctmgr key -> Association.settings name (trainhub.slurm.limits' AssocRecord fields, + priority)
ASSOC_SETTINGS = {"GrpJobs": "grp_jobs", "GrpSubmitJobs": "grp_submit_jobs", "GrpTRES": "grp_tres",
                  "GrpTRESMins": "grp_tres_mins",
                  "GrpWall": "grp_wall", "MaxJobs": "max_jobs", "MaxSubmitJobs": "max_submit_jobs",
                  "MaxTRES": "max_tres_per_job", "MaxTRESPerNode": "max_tres_per_node", "MaxWall": "max_wall_minutes",
                  "Priority": "priority", "QOS": "qos", "DefaultQOS": "default_qos"}
#: sacctmgr key -> Qos.settings name (QosRecord fields)
QOS_SETTINGS = {"Flags": "flags", "GraceTime": "grace_time", "GrpJobs": "grp_jobs", "GrpSubmitJobs": "grp_submit_jobs",
                "GrpTRES": "grp_tres", "GrpTRESMins": "grp_tres_mins", "GrpWall": "grp_wall",
                "MaxJobsPerAccount": "max_jobs_per_account", "MaxTRESMins": "max_tres_mins_per_job",
                "MaxJobsPerUser": "max_jobs_per_user", "MaxSubmitJobsPerAccount": "max_submit_jobs_per_account",
                "MaxSubmitJobsPerUser": "max_submit_jobs_per_user", "MaxTRESPerAccount": "max_tres_per_account",
                "MaxTRESPerNode": "max_tres_per_node", "MaxTRESPerUser": "max_tres_per_user",
                "MaxTRES": "max_tres_per_job", "MaxWall": "max_wall_minutes", "MinTRES": "min_tres_per_job",
                "PreemptExemptTime": "preempt_exempt_time", "PreemptMode": "preempt_mode", "Preempt": "preempt",
                "Priority": "priority", "UsageFactor": "usage_factor"}
#: stored setting name -> sacctmgr show record key, where they differ
_SHOW_KEYS = {"max_tres_per_job": "max_tres", "max_wall_minutes": "max_wall", "min_tres_per_job": "min_tres",
              "max_tres_mins_per_job": "max_tres_mins"}
LIST_KEYS = ("QOS", "Preempt", "Flags")
#: What slurmdbd stores for a QOS setting nobody set (sacctmgr show qos prints them).
QOS_SHOW_DEFAULTS = {"priority": 0, "grace_time": 0, "preempt_mode": "cluster", "usage_factor": 1.0}


@dataclass(frozen=True)
class SacctmgrResult:
    output: str
    exit_code: int = 0
    #: The change was made and rolled back: run again with -i (or confirm) to commit it.
    needs_confirmation: bool = False


def _effective_qos(assoc: Association) -> list[str]:
    """The QOS an association gets: its own list, else its nearest ancestor's (``QOS+=high`` on a user
    that inherits ``normal`` gives ``high,normal``: fixtures/22.05/assoc-order/show-assoc-1.txt)."""
    found: Association | None = assoc
    while found is not None and not found.settings.get("qos"):
        found = found.parent
    return list(found.settings["qos"]) if found is not None else []


class _Refused(Exception):
    def __init__(self, message: str):
        self.message = message


def _list_value(spec: syntax.Spec, current: Sequence[str]) -> list[str]:
    """``QOS=a,b`` sets, ``QOS+=a`` / ``QOS=+a`` adds, ``QOS-=a`` / ``QOS=-a`` removes."""
    items = list(spec.value)
    plain = [item for item in items if item[:1] not in "+-"]
    result = list(current) if spec.op != "=" or not plain else list(plain)
    for item in items:
        name = item.lstrip("+-")
        adding = spec.op == "+=" or item.startswith("+")
        removing = spec.op == "-=" or item.startswith("-")
        if adding and name not in result:
            result.append(name)
        elif removing and name in result:
            result.remove(name)
    return result


def _settings(specs: Mapping[str, syntax.Spec], names: Mapping[str, str],
              current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sacctmgr values among ``specs`` as stored settings (None clears a limit)."""
    settings: dict[str, Any] = {}
    for key, spec in specs.items():
        if key not in names:
            continue
        if key in LIST_KEYS:
            value = _list_value(spec, (current or {}).get(names[key], []))
            settings[names[key]] = value or None
        else:
            settings[names[key]] = spec.value
    return settings


def _shares(specs: Mapping[str, syntax.Spec]) -> int | None | str:
    """Fairshare=N -> N, Fairshare=parent -> None; "unchanged" when not given."""
    if "Fairshare" not in specs:
        return "unchanged"
    value = specs["Fairshare"].value
    return None if value == "parent" else value


def _slurm_limits(specs: Mapping[str, syntax.Spec], names: Mapping[str, str]) -> dict[str, Any]:
    return {key: spec.value for key, spec in specs.items() if key in names or key == "Fairshare"}


def _value(specs: Mapping[str, syntax.Spec], key: str, default: Any = None) -> Any:
    return specs[key].value if key in specs else default


class _Runner:
    def __init__(self, cluster: SlurmCluster, command: syntax.SacctmgrCommand, actor: str, now: dt.datetime):
        self.cluster, self.command, self.actor, self.now = cluster, command, actor, now
        self.name = cluster.cluster_id

    def _check_cluster(self, specs: Mapping[str, syntax.Spec]) -> None:
        clusters = _value(specs, "Clusters", ())
        unknown = [name for name in clusters if name != self.name]
        if unknown:
            raise _Refused(f" This cluster is {self.name}; {', '.join(unknown)} is not managed here")

    def _check_qos_names(self, specs: Mapping[str, syntax.Spec]) -> None:
        """QOS=, Preempt= and DefaultQOS= must name existing QOS, as sacctmgr checks them against
        slurmdbd's list (``slurmdb_addto_qos_char_list``, ``sacctmgr_set_assoc_rec``)."""
        known = set(Qos.objects.filter(cluster=self.cluster).values_list("name", flat=True))
        for key in ("QOS", "Preempt"):
            bad = [name for name in (item.lstrip("+-") for item in _value(specs, key, ())) if name not in known]
            if bad:
                raise _Refused(f"You gave a bad qos '{bad[0]}'. Valid QOS's are {','.join(sorted(known))}")
        default = _value(specs, "DefaultQOS")
        if default is not None and default not in known:
            raise _Refused(f"You gave a bad default qos '{default}'.  Use 'list qos' to get complete list.")

    # -- add --

    def add_account(self) -> str:
        specs = self.command.set
        self._check_cluster(specs)
        self._check_qos_names(specs)
        parent = _value(specs, "Parent", ROOT)
        settings = _settings(specs, ASSOC_SETTINGS)
        for name in self.command.names:
            accounting.account_add(cluster=self.cluster, name=name, actor=self.actor, parent=parent,
                                   description=_value(specs, "Description", ""),
                                   organization=_value(specs, "Organization", ""),
                                   shares=1 if _shares(specs) == "unchanged" else _shares(specs), settings=settings,
                                   now=self.now)
        return syntax.added_accounts_text(self.command.names, cluster=self.name,
                                          description=_value(specs, "Description"),
                                          organization=_value(specs, "Organization"), parent=parent,
                                          limits=_slurm_limits(specs, ASSOC_SETTINGS))

    def add_user(self) -> str:
        specs = self.command.set
        self._check_cluster(specs)
        self._check_qos_names(specs)
        accounts = list(_value(specs, "Accounts", ()))
        partitions = list(_value(specs, "Partitions", ())) or [""]
        known = set(self.cluster.partitions.values_list("name", flat=True))
        unknown = [p for p in partitions if p and p not in known]
        if unknown:
            raise _Refused(f" Partition {unknown[0]} doesn't exist on cluster {self.name}")
        default = _value(specs, "DefaultAccount")
        settings = _settings(specs, ASSOC_SETTINGS)
        shares = 1 if _shares(specs) == "unchanged" else _shares(specs)
        added: list[tuple[str, str, str, str | None]] = []
        known_users = set(SlurmUser.objects.filter(cluster=self.cluster, name__in=self.command.names)
                          .values_list("name", flat=True))
        for user in self.command.names:
            for partition in partitions:
                try:
                    rows = accounting.user_add(cluster=self.cluster, name=user, accounts=accounts, actor=self.actor,
                                               partition=partition, default_account=default,
                                               admin_level=_value(specs, "AdminLevel"), shares=shares,
                                               settings=settings, now=self.now)
                except accounting.AccountingError as error:
                    if error.message.strip() != syntax.NOTHING_ADDED.strip():
                        raise
                    continue
                added += [(user, row.account.name, self.name, row.partition or None) for row in rows]
        if not added:
            raise _Refused(syntax.NOTHING_ADDED.rstrip("\n"))
        return syntax.added_users_text([name for name in self.command.names if name not in known_users],
                                       default_account=default,
                                       admin_level=_value(specs, "AdminLevel"), associations=added,
                                       limits=_slurm_limits(specs, ASSOC_SETTINGS))

    def add_qos(self) -> str:
        specs = self.command.set
        self._check_qos_names(specs)
        for name in self.command.names:
            accounting.qos_add(cluster=self.cluster, name=name, actor=self.actor,
                               description=_value(specs, "Description", ""), settings=_settings(specs, QOS_SETTINGS),
                               now=self.now)
        shown = {key: spec.value for key, spec in specs.items() if key in QOS_SETTINGS or key == "Description"}
        return syntax.added_qos_text(self.command.names, shown)

    # -- selection --

    def _accounts(self) -> list[Account]:
        where = self.command.where
        rows = Account.objects.filter(cluster=self.cluster)
        if self.command.names:
            rows = rows.filter(name__in=self.command.names)
        if "Descriptions" in where:
            rows = rows.filter(description=where["Descriptions"].value)
        if "Organizations" in where:
            rows = rows.filter(organization=where["Organizations"].value)
        if "Parents" in where:
            rows = rows.filter(associations__user="", associations__parent__account__name__in=where["Parents"].value)
        return list(rows.distinct())

    def _associations(self, *, users: bool) -> list[Association]:
        where = self.command.where
        rows = Association.objects.filter(cluster=self.cluster).select_related("account")
        rows = rows.exclude(user="") if users else rows.filter(user="")
        names = self.command.names
        if names:
            rows = rows.filter(user__in=names) if users else rows.filter(account__name__in=names)
        if users and "Accounts" in where:
            rows = rows.filter(account__name__in=where["Accounts"].value)
        if "Users" in where:
            rows = rows.filter(user__in=where["Users"].value)
        if "Partitions" in where:
            rows = rows.filter(partition__in=where["Partitions"].value)
        if "Parents" in where:
            rows = rows.filter(parent__account__name__in=where["Parents"].value)
        return list(rows.order_by("account__name", "user", "-partition"))

    def _object(self, assoc: Association) -> str:
        return syntax.association_object(self.name, assoc.account.name, assoc.user or None, assoc.partition or None)

    # -- modify --

    def _modify_associations(self, rows: list[Association], kind: str) -> str:
        specs = self.command.set
        if not rows:
            return ""
        self._check_qos_names(specs)
        for assoc in rows:
            current = {**assoc.settings, "qos": _effective_qos(assoc)}
            accounting.associations_modify(cluster=self.cluster, associations=[assoc], actor=self.actor,
                                           shares=_shares(specs), settings=_settings(specs, ASSOC_SETTINGS, current),
                                           now=self.now)
        return syntax.changed_text("Modified", kind, [self._object(a) for a in rows])

    def modify_account(self) -> str:
        specs = self.command.set
        accounts = self._accounts()
        out = ""
        if "Description" in specs or "Organization" in specs:
            accounting.accounts_modify(cluster=self.cluster, accounts=accounts, actor=self.actor,
                                       description=_value(specs, "Description"),
                                       organization=_value(specs, "Organization"), now=self.now)
            out += syntax.changed_text("Modified", "accounts", [a.name for a in accounts])
        if "Parent" in specs:
            for account in accounts:
                accounting.account_move(cluster=self.cluster, account=account, parent=specs["Parent"].value,
                                        actor=self.actor, now=self.now)
            out += syntax.changed_text("Modified", "account associations",
                                       [syntax.association_object(self.name, a.name) for a in accounts])
        if any(key in specs for key in (*ASSOC_SETTINGS, "Fairshare")):
            names = [a.name for a in accounts]
            rows = [a for a in self._associations(users=False) if a.account.name in names]
            out += self._modify_associations(rows, "account associations")
        return out or syntax.NOTHING_MODIFIED

    def modify_user(self) -> str:
        specs = self.command.set
        out = ""
        if "DefaultAccount" in specs or "AdminLevel" in specs:
            users = list(SlurmUser.objects.filter(cluster=self.cluster, name__in=self.command.names or
                                                  _value(self.command.where, "Users", ())))
            accounting.users_modify(cluster=self.cluster, users=users, actor=self.actor,
                                    default_account=_value(specs, "DefaultAccount"),
                                    admin_level=_value(specs, "AdminLevel"), now=self.now)
            out += syntax.changed_text("Modified", "users", [u.name for u in users])
        if any(key in specs for key in (*ASSOC_SETTINGS, "Fairshare")):
            out += self._modify_associations(self._associations(users=True), "user associations")
        return out or syntax.NOTHING_MODIFIED

    def modify_qos(self) -> str:
        rows = self._qos()
        if not rows:
            return syntax.NOTHING_MODIFIED
        self._check_qos_names(self.command.set)
        for qos in rows:
            accounting.qos_modify(cluster=self.cluster, qos_rows=[qos], actor=self.actor,
                                  settings=_settings(self.command.set, QOS_SETTINGS, qos.settings),
                                  description=_value(self.command.set, "Description"), now=self.now)
        return syntax.changed_text("Modified", "qos", [q.name for q in rows])

    def _qos(self) -> list[Qos]:
        """The QOS the command names, by id as slurmdbd lists them (fixtures/22.05/qos_tres_mins/show-qos.txt)."""
        rows = Qos.objects.filter(cluster=self.cluster).order_by("pk")
        if self.command.names:
            rows = rows.filter(name__in=self.command.names)
        if "Descriptions" in self.command.where:
            rows = rows.filter(description=self.command.where["Descriptions"].value)
        return list(rows)

    # -- delete --

    def delete_account(self) -> str:
        names = [a.name for a in self._accounts()]
        if ROOT in names:
            raise _Refused(" The root account cannot be deleted")
        rows = [a for a in self._associations(users=False) if a.account.name in names and not a.partition]
        accounting.associations_delete(cluster=self.cluster, associations=rows, actor=self.actor, now=self.now)
        return syntax.changed_text("Deleting", "accounts", names)

    def delete_user(self) -> str:
        rows = self._associations(users=True)
        accounting.associations_delete(cluster=self.cluster, associations=rows, actor=self.actor, now=self.now)
        if "Accounts" in self.command.where or "Partitions" in self.command.where:
            return syntax.changed_text("Deleting", "user associations", [self._object(a) for a in rows])
        return syntax.changed_text("Deleting", "users", sorted({a.user for a in rows}))

    def delete_qos(self) -> str:
        rows = self._qos()
        accounting.qos_delete(cluster=self.cluster, qos_rows=rows, actor=self.actor, now=self.now)
        return syntax.changed_text("Deleting", "QOS(s)", [q.name for q in rows])

    # -- show --

    def show(self) -> str:
        command = self.command
        records = show_records(self.cluster, command)
        entity = "user withassoc" if command.entity == "user" and "withassoc" in command.flags else command.entity
        return syntax.show_text(entity, records, format=command.format, parsable=command.parsable,
                                header=command.header, tree="tree" in command.flags)


def _record_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {_SHOW_KEYS.get(name, name): value for name, value in settings.items()}


def show_records(cluster: SlurmCluster, command: syntax.SacctmgrCommand) -> list[dict[str, Any]]:
    """The rows ``sacctmgr show <entity>`` prints, as show_text's record dicts."""
    runner = _Runner(cluster, command, actor="", now=timezone.now())
    if command.entity == "account":
        return [{"account": a.name, "description": a.description, "organization": a.organization}
                for a in sorted(runner._accounts(), key=lambda a: a.name)]
    if command.entity == "user":
        users = SlurmUser.objects.filter(cluster=cluster).order_by("name")
        if command.names:
            users = users.filter(name__in=command.names)
        records = [{"user": u.name, "default_account": u.default_account, "admin_level": u.admin_level} for u in users]
        return _with_associations(cluster, command, records) if "withassoc" in command.flags else records
    if command.entity == "qos":
        return [{"name": q.name, "description": q.description, **QOS_SHOW_DEFAULTS, **_record_settings(q.settings)}
                for q in runner._qos()]
    if command.entity == "cluster":
        return [{"cluster": cluster.cluster_id, "control_host": f"{cluster.cluster_id}-controller",
                 "control_port": 6817, "rpc": 9984, "shares": 1, "qos": ["normal"]}]
    return _association_records(cluster, command)


def _with_associations(cluster: SlurmCluster, command: syntax.SacctmgrCommand,
                       users: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``show user withassoc``: a row per user association, by user, each in tree order, with the
    pre-TRES limit columns (MaxNodes, MaxCPUs: MaxTRES's node and cpu; MaxCPUMins: MaxTRESMins's cpu)."""
    by_name = {user["user"]: user for user in users}
    rows = []
    for record in _association_records(cluster, command):
        if record["user"] in by_name:
            max_tres, max_tres_mins = record.get("max_tres") or {}, record.get("max_tres_mins") or {}
            rows.append({**record, **by_name[record["user"]], "max_nodes": max_tres.get("node"),
                         "max_cpus": max_tres.get("cpu"), "max_cpu_mins": max_tres_mins.get("cpu")})
    return sorted(rows, key=lambda row: row["user"])


def _association_records(cluster: SlurmCluster, command: syntax.SacctmgrCommand) -> list[dict[str, Any]]:
    """Associations in tree order (each account, then its users, then its sub-accounts), with the
    QOS each one gets (its own list, else its nearest ancestor's)."""
    rows = list(Association.objects.filter(cluster=cluster).select_related("account"))
    by_parent: dict[int | None, list[Association]] = {}
    for row in rows:
        by_parent.setdefault(row.parent_id, []).append(row)
    where = command.where
    keep_users = set(_value(where, "Users", ())) | set(command.names)
    keep_accounts = set(_value(where, "Accounts", ()))
    keep_partitions = set(_value(where, "Partitions", ()))
    records: list[dict[str, Any]] = []

    def visit(assoc: Association, depth: int, inherited_qos: list[str], parent_name: str) -> None:
        qos = assoc.settings.get("qos") or inherited_qos
        selected = ((not keep_users or assoc.user in keep_users) and (not keep_accounts or assoc.account.name in
                    keep_accounts) and (not keep_partitions or assoc.partition in keep_partitions))
        if selected:
            records.append({**_record_settings(assoc.settings), "cluster": cluster.cluster_id,
                            "account": assoc.account.name, "user": assoc.user, "partition": assoc.partition,
                            "shares": "parent" if assoc.shares is None else assoc.shares, "qos": qos,
                            "parent": parent_name, "depth": depth})
        # users before sub-accounts, by account and user name; a user's partitions in reverse order
        # (slurmdb_defs.c _sort_childern_list; fixtures/22.05/assoc-order: urgent before batch)
        children = sorted(sorted(by_parent.get(assoc.pk, []), key=lambda c: c.partition, reverse=True),
                          key=lambda c: (bool(not c.user), c.account.name, c.user))
        for child in children:
            visit(child, depth + 1, qos, assoc.account.name)

    for root in by_parent.get(None, []):
        visit(root, 0, [], "")
    return records


_ACTIONS = {("add", "account"): "add_account", ("add", "user"): "add_user", ("add", "qos"): "add_qos",
            ("modify", "account"): "modify_account", ("modify", "user"): "modify_user",
            ("modify", "qos"): "modify_qos", ("delete", "account"): "delete_account",
            ("delete", "user"): "delete_user", ("delete", "qos"): "delete_qos"}


def sacctmgr_run(*, cluster: SlurmCluster, line: str | Sequence[str], actor: str, is_admin: bool,
                 now: dt.datetime | None = None) -> SacctmgrResult:
    """Run one sacctmgr command line; never raises for what sacctmgr would report."""
    now = now or timezone.now()
    try:
        command = syntax.parse_sacctmgr(line)
    except syntax.SacctmgrError as error:
        return SacctmgrResult(error.message.rstrip("\n") + "\n", 1)
    if command.verb == "show":
        try:
            return SacctmgrResult(_Runner(cluster, command, actor, now).show())
        except syntax.SacctmgrError as error:
            return SacctmgrResult(error.message.rstrip("\n") + "\n", 1)
    if not is_admin:
        return SacctmgrResult(" Your user doesn't have privilege to perform this action\n", 1)
    action = _ACTIONS.get((command.verb, command.entity))
    if action is None:
        return SacctmgrResult(f" {command.verb} {command.entity} is not supported here: clusters are created and "
                              "deleted with the slurmClusters API\n", 1)
    try:
        with transaction.atomic():
            output = getattr(_Runner(cluster, command, actor, now), action)()
            if not command.immediate:
                transaction.set_rollback(True)
    except (_Refused, accounting.AccountingError) as error:
        return SacctmgrResult(error.message.rstrip("\n") + "\n", 1)
    if not command.immediate and output not in (syntax.NOTHING_MODIFIED, syntax.NOTHING_DELETED):
        return SacctmgrResult(output + syntax.COMMIT_PROMPT, 0, needs_confirmation=True)
    return SacctmgrResult(output)
