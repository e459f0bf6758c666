"""Admin forms of a running cluster: slurm.conf keys, prolog/epilog scripts, partition options, node state."""

from __future__ import annotations

from typing import Any

from django import forms

from trainhub.common.errors import ApiError
from trainhub.slurm.conf import NODE_WEIGHT_MAX

MAX_SCRIPTS = 16


def parse_key_values(text: str) -> dict[str, str]:
    """``Key=Value`` lines (blank lines and ``#`` comments ignored), as in slurm.conf."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, equals, value = stripped.partition("=")
        if not equals or not key.strip():
            raise forms.ValidationError(f"line {number}: write Key=Value, got {stripped!r}")
        values[key.strip()] = value.strip()
    return values


def key_value_text(values: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in values.items())


class KeyValueForm(forms.Form):
    """A map of slurm.conf-style keys edited as ``Key=Value`` lines."""

    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "class": "mono", "spellcheck": "false"}),
                           required=False, label="Settings", help_text="One Key=Value per line.")

    def clean_text(self) -> dict[str, str]:
        return parse_key_values(self.cleaned_data["text"])

    def show_service_error(self, error: ApiError) -> None:
        problems = [f"{v.field.removeprefix('config.')}: {v.description}" for v in error.violations]
        self.add_error("text", problems or [error.message])


class PartitionForm(KeyValueForm):
    """A partition's PartitionName= options and its node pools (the cluster's compute pools)."""

    node_pools = forms.CharField(required=True, label="Node pools", max_length=1024,
                                 help_text="The cluster's compute node pools this partition's jobs run on, "
                                           "comma-separated.")

    def clean_node_pools(self) -> list[str]:
        return [name.strip() for name in self.cleaned_data["node_pools"].split(",") if name.strip()]

    def show_service_error(self, error: ApiError) -> None:
        for violation in error.violations:
            if violation.field.startswith("nodePoolIds"):
                self.add_error("node_pools", violation.description)
            else:
                self.add_error("text", f"{violation.field.removeprefix('config.')}: {violation.description}")
        if not error.violations:
            self.add_error("text", error.message)


class ConfigForm(KeyValueForm):
    """The cluster's explicit slurm.conf keys; a key removed from the text returns to Slurm's default."""

    def changes(self, current: dict[str, str]) -> dict[str, str | None]:
        wanted = self.cleaned_data["text"]
        changes: dict[str, str | None] = {key: None for key in current if key not in wanted}
        changes.update({key: value for key, value in wanted.items() if current.get(key) != value})
        return changes


class ScriptsForm(forms.Form):
    """The prolog or epilog scripts: one text area per script; empty ones are dropped."""

    def __init__(self, *args: Any, scripts: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for index in range(min(len(scripts) + 1, MAX_SCRIPTS)):
            self.fields[f"script_{index}"] = forms.CharField(
                required=False, label=f"Script {index + 1}", initial=scripts[index] if index < len(scripts) else "",
                widget=forms.Textarea(attrs={"rows": 6, "class": "mono", "spellcheck": "false"}))

    def scripts(self) -> list[str]:
        texts = [self.cleaned_data[name].replace("\r\n", "\n") for name in self.fields]
        return [text for text in texts if text.strip()]

    def show_service_error(self, error: ApiError) -> None:
        for violation in error.violations or []:
            index = violation.field.rsplit("[", 1)[-1].rstrip("]")
            field = f"script_{index}" if f"script_{index}" in self.fields else None
            self.add_error(field, violation.description)
        if not error.violations:
            self.add_error(None, error.message)


class NodeFeaturesForm(forms.Form):
    """scontrol update NodeName=N AvailableFeatures=... ActiveFeatures=... (empty active: all available)."""

    available = forms.CharField(required=False, max_length=1024)
    active = forms.CharField(required=False, max_length=1024)


class NodeMemoryForm(forms.Form):
    """slurm.conf's NodeName=N RealMemory=MB (empty: the machine type's memory)."""

    real_memory = forms.IntegerField(required=False, min_value=1)


class NodeWeightForm(forms.Form):
    """slurm.conf's NodeName=N Weight=W (empty: Slurm's default, 1)."""

    weight = forms.IntegerField(required=False, min_value=0, max_value=NODE_WEIGHT_MAX)


class NodeStateForm(forms.Form):
    state = forms.ChoiceField(choices=[("DRAIN", "Drain"), ("UP", "Resume")])
    reason = forms.CharField(required=False, max_length=200)
