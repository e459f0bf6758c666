"""Accounting forms. Every change they make is a sacctmgr command line (argument list) run like
the console's, so the pages, the console and the CLI share one syntax and one set of rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from trainhub.slurm.timefmt import format_mins, format_secs
from trainhub.slurm.tres import format_tres

#: (sacctmgr key, stored setting name, kind) editable on an association
ASSOC_FIELDS = (("Fairshare", "shares", "shares"), ("Priority", "priority", "int"), ("QOS", "qos", "list"),
                ("DefaultQOS", "default_qos", "name"), ("GrpTRES", "grp_tres", "tres"), ("GrpJobs", "grp_jobs", "int"),
                ("GrpSubmitJobs", "grp_submit_jobs", "int"), ("MaxJobs", "max_jobs", "int"),
                ("MaxSubmitJobs", "max_submit_jobs", "int"), ("MaxTRES", "max_tres_per_job", "tres"),
                ("MaxTRESPerNode", "max_tres_per_node", "tres"), ("MaxWall", "max_wall_minutes", "minutes"))
QOS_FIELDS = (("Description", "description", "text"), ("Priority", "priority", "int"),
              ("Preempt", "preempt", "list"), ("PreemptMode", "preempt_mode", "text"),
              ("PreemptExemptTime", "preempt_exempt_time", "seconds"), ("GraceTime", "grace_time", "int"),
              ("Flags", "flags", "list"), ("UsageFactor", "usage_factor", "float"), ("GrpTRES", "grp_tres", "tres"),
              ("GrpJobs", "grp_jobs", "int"), ("MaxJobsPerUser", "max_jobs_per_user", "int"),
              ("MaxSubmitJobsPerUser", "max_submit_jobs_per_user", "int"),
              ("MaxTRESPerUser", "max_tres_per_user", "tres"), ("MaxTRES", "max_tres_per_job", "tres"),
              ("MaxWall", "max_wall_minutes", "minutes"))


def slurm_text(value: Any, kind: str) -> str:
    """A stored setting as sacctmgr would take it back."""
    if kind == "shares":
        return "parent" if value is None else str(value)
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if kind == "tres":
        return format_tres(value)
    if kind == "list":
        return ",".join(value)
    if kind == "minutes":
        return format_mins(value)
    if kind == "seconds":
        return format_secs(value)
    return str(value)


class SettingsForm(forms.Form):
    """One text field per sacctmgr key, shown in Slurm's syntax; ``changes()`` are the ``Key=value``
    words for what was edited (an emptied field clears it with ``-1``)."""

    def __init__(self, *args: Any, fields: tuple, current: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keys = fields
        self.current = {key: slurm_text(current.get(name), kind) for key, name, kind in fields}
        for key, _, _ in fields:
            self.fields[key] = forms.CharField(required=False, label=key, initial=self.current[key], max_length=512)

    def changes(self) -> list[str]:
        words = []
        for key, _, kind in self.keys:
            new = self.cleaned_data[key].strip()
            if new == self.current[key]:
                continue
            if not new and kind != "text":
                new = "-1"
            words.append(f"{key}={new}")
        return words


class CommandForm(forms.Form):
    """The web console: one sacctmgr command, as typed."""

    command = forms.CharField(max_length=4096, label="sacctmgr",
                              widget=forms.TextInput(attrs={"class": "mono", "autocomplete": "off",
                                                            "spellcheck": "false",
                                                            "placeholder": "show assoc tree format=account,user,share"}))
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)


class AddAccountForm(forms.Form):
    name = forms.CharField(max_length=64)
    parent = forms.CharField(max_length=64, initial="root")
    fairshare = forms.CharField(max_length=16, initial="1", help_text="a number or parent")
    description = forms.CharField(max_length=255, required=False)

    def command(self) -> list[str]:
        data = self.cleaned_data
        words = ["add", "account", data["name"], f"Parent={data['parent']}", f"Fairshare={data['fairshare']}"]
        return words + ([f"Description={data['description']}"] if data["description"] else [])


class AddUserForm(forms.Form):
    name = forms.CharField(max_length=150, help_text="the trainhub user name")
    accounts = forms.CharField(max_length=255, help_text="comma separated")
    partition = forms.CharField(max_length=63, required=False, help_text="empty: every partition")

    def command(self) -> list[str]:
        data = self.cleaned_data
        words = ["add", "user", data["name"], f"Accounts={data['accounts']}"]
        return words + ([f"Partition={data['partition']}"] if data["partition"] else [])


class AddQosForm(forms.Form):
    name = forms.CharField(max_length=64)
    priority = forms.IntegerField(min_value=0, initial=0)
    preempt = forms.CharField(max_length=255, required=False, help_text="QOS it may preempt, comma separated")

    def command(self) -> list[str]:
        data = self.cleaned_data
        words = ["add", "qos", data["name"], f"Priority={data['priority']}"]
        return words + ([f"Preempt={data['preempt']}"] if data["preempt"] else [])
