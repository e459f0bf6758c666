"""The job submission form: sbatch's common options as fields, then a script or a --wrap command."""

from __future__ import annotations

from typing import Any

from django import forms

from trainhub.common.errors import ApiError

#: Which field an sbatch error belongs to, by a phrase of Slurm's message.
_FIELD_BY_PHRASE = (
    ("invalid account", "account"), ("invalid qos", "qos"), ("partition", "partition"),
    ("--time", "time"), ("time limit", "time"), ("node count", "nodes"), ("node configuration", "gpus_per_node"),
    ("gres", "gpus_per_node"), ("batch script", "script"), ("--wrap", "wrap"), ("nice", "nice"),
)


class SubmitForm(forms.Form):
    partition = forms.ChoiceField(required=False, help_text="-p; empty: the cluster's default partition")
    account = forms.CharField(required=False, max_length=64, help_text="-A; empty: your default account")
    qos = forms.CharField(required=False, max_length=64, label="QOS", help_text="-q; empty: the default QOS")
    job_name = forms.CharField(required=False, max_length=255, help_text="-J")
    nodes = forms.IntegerField(min_value=1, initial=1, help_text="-N")
    gpus_per_node = forms.IntegerField(min_value=0, initial=0, label="GPUs per node", help_text="--gres=gpu:N")
    time = forms.CharField(required=False, max_length=32, label="Time limit",
                           help_text="-t: minutes, HH:MM:SS or D-HH:MM:SS; empty: the partition's default")
    nice = forms.IntegerField(required=False, help_text="--nice: a positive value lowers the priority")
    hold = forms.BooleanField(required=False, help_text="-H: submit held; release it later")
    wrap = forms.CharField(required=False, max_length=4096, label="Command (--wrap)",
                           help_text="A one-line command; or leave empty and give a script below.")
    script = forms.CharField(required=False, label="Batch script",
                             widget=forms.Textarea(attrs={"rows": 12, "class": "mono", "spellcheck": "false"}),
                             help_text="Starts with #!; its #SBATCH lines are honoured, the fields above win.")

    def __init__(self, *args: Any, partitions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["partition"].choices = [("", "Default partition")] + [(name, name) for name in partitions]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("wrap") and data.get("script", "").strip():
            raise forms.ValidationError("Give either a --wrap command or a script, not both.")
        if not data.get("wrap") and not data.get("script", "").strip():
            raise forms.ValidationError("Give a --wrap command or a batch script.")
        return data

    def sbatch_args(self) -> list[str]:
        data = self.cleaned_data
        argv: list[str] = []
        for field, flag in (("partition", "--partition"), ("account", "--account"), ("qos", "--qos"),
                            ("job_name", "--job-name"), ("time", "--time"), ("wrap", "--wrap")):
            if data.get(field):
                argv.append(f"{flag}={data[field]}")
        argv.append(f"--nodes={data['nodes']}")
        if data["gpus_per_node"]:
            argv.append(f"--gres=gpu:{data['gpus_per_node']}")
        if data.get("nice") is not None:
            argv.append(f"--nice={data['nice']}")
        if data.get("hold"):
            argv.append("--hold")
        return argv

    def script_text(self) -> str | None:
        text = self.cleaned_data.get("script", "").replace("\r\n", "\n")
        return text if text.strip() else None

    def show_service_error(self, error: ApiError) -> None:
        lowered = error.message.lower()
        field = next((name for phrase, name in _FIELD_BY_PHRASE if phrase in lowered), None)
        self.add_error(field, error.message)
