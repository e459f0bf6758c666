"""The sacctmgr web console (everyone may `show`; admins change, confirming as sacctmgr asks) and
the accounting admin page: the association tree and QOS with forms that run sacctmgr commands."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from trainhub.common.errors import ApiError
from trainhub.common.pages import html_page
from trainhub.iam.selectors import posix_accounts_by_username
from trainhub.slurm import selectors
from trainhub.slurm import sacctmgr as syntax
from trainhub.slurm.forms.accounting import (
    ASSOC_FIELDS,
    QOS_FIELDS,
    AddAccountForm,
    AddQosForm,
    AddUserForm,
    CommandForm,
    SettingsForm,
)
from trainhub.slurm.models import Association, Qos
from trainhub.slurm.services.sacctmgr import sacctmgr_run, show_records
from trainhub.slurm.views.common import ADMIN, cluster_context, cluster_for, cluster_kwargs


@html_page
def console(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster)
    form = CommandForm(request.POST or None)
    result = None
    if request.method == "POST" and form.is_valid():
        line = form.cleaned_data["command"]
        if form.cleaned_data["confirm"]:
            line = f"-i {line}"
        result = sacctmgr_run(cluster=cluster_obj, line=line, actor=request.user.get_username(),
                              is_admin=selectors.is_cluster_admin(user=request.user, cluster=cluster_obj),
                              now=timezone.now())
    return render(request, "slurm/sacctmgr.html", {**cluster_context(request, cluster_obj, "sacctmgr"),
                                                   "form": form, "result": result})


def _run(request: HttpRequest, cluster, words: list[str]) -> bool:
    """Run an admin form's sacctmgr command with -i; its output becomes the page's message."""
    result = sacctmgr_run(cluster=cluster, line=["-i", *words], actor=request.user.get_username(), is_admin=True)
    (messages.error if result.exit_code else messages.success)(request, result.output)
    return not result.exit_code


def _tree(cluster) -> list[dict]:
    """The association tree's rows, a user's with the uid and gid their jobs show (``posix``)."""
    rows = show_records(cluster, syntax.parse_sacctmgr(["show", "association", "tree"]))
    pks = {(a.account.name, a.user, a.partition): a.pk
           for a in Association.objects.filter(cluster=cluster).select_related("account")}
    posix = posix_accounts_by_username(usernames=[row["user"] for row in rows if row["user"]])
    for row in rows:
        row["pk"] = pks[(row["account"], row["user"], row["partition"])]
        row["indent"] = "\u2003" * row["depth"]
        row["posix"] = posix.get(row["user"])
    return rows


@html_page
def accounts(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    forms = {"account": AddAccountForm(prefix="account"), "user": AddUserForm(prefix="user"),
             "qos": AddQosForm(prefix="qos")}
    kind = request.POST.get("add")
    if request.method == "POST" and kind in forms:
        forms[kind] = type(forms[kind])(request.POST, prefix=kind)
        if forms[kind].is_valid() and _run(request, cluster_obj, forms[kind].command()):
            return redirect("slurm:accounts", **cluster_kwargs(cluster_obj))
    qos = show_records(cluster_obj, syntax.parse_sacctmgr(["show", "qos"]))
    return render(request, "slurm/accounts.html", {**cluster_context(request, cluster_obj, "accounts"),
                                                   "tree": _tree(cluster_obj), "qos_rows": qos, "forms": forms})


@html_page
def association_edit(request: HttpRequest, project: str, location: str, cluster: str, pk: int) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    assoc = Association.objects.filter(cluster=cluster_obj, pk=pk).select_related("account").first()
    if assoc is None:
        raise ApiError(404, "Association not found.")
    form = SettingsForm(request.POST or None, fields=ASSOC_FIELDS, current={**assoc.settings, "shares": assoc.shares})
    back = redirect("slurm:accounts", **cluster_kwargs(cluster_obj))
    if request.method == "POST" and request.POST.get("delete"):
        words = (["delete", "user", assoc.user, "where", f"Accounts={assoc.account.name}"]
                 + ([f"Partitions={assoc.partition}"] if assoc.partition else []) if assoc.user
                 else ["delete", "account", assoc.account.name])
        _run(request, cluster_obj, words)
        return back
    if request.method == "POST" and form.is_valid():
        changes = form.changes()
        if not changes:
            return back
        where = (["modify", "user", "where", f"Names={assoc.user}", f"Accounts={assoc.account.name}"]
                 + ([f"Partitions={assoc.partition}"] if assoc.partition else []) if assoc.user
                 else ["modify", "account", "where", f"Names={assoc.account.name}"])
        if _run(request, cluster_obj, [*where, "set", *changes]):
            return back
    return render(request, "slurm/settings_edit.html", {
        **cluster_context(request, cluster_obj, "accounts"), "form": form,
        "title": f"Association {assoc}", "deletable": assoc.parent_id is not None})


@html_page
def qos_edit(request: HttpRequest, project: str, location: str, cluster: str, name: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    qos = Qos.objects.filter(cluster=cluster_obj, name=name).first()
    if qos is None:
        raise ApiError(404, f"QOS {name} not found.")
    form = SettingsForm(request.POST or None, fields=QOS_FIELDS,
                        current={**qos.settings, "description": qos.description})
    back = redirect("slurm:accounts", **cluster_kwargs(cluster_obj))
    if request.method == "POST" and request.POST.get("delete"):
        _run(request, cluster_obj, ["delete", "qos", qos.name])
        return back
    if request.method == "POST" and form.is_valid():
        changes = form.changes()
        if not changes or _run(request, cluster_obj, ["modify", "qos", "where", f"Names={qos.name}", "set", *changes]):
            return back
    return render(request, "slurm/settings_edit.html", {**cluster_context(request, cluster_obj, "accounts"),
                                                        "form": form, "title": f"QOS {qos.name}", "deletable": True})
