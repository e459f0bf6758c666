"""Browser forms for persistent resources. They only turn text into the wire shape; every rule
about a valid resource stays in resources.spec and the services, whose field violations are
shown back on the matching fields."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

from django import forms
from django.core.validators import RegexValidator

from trainhub.common.errors import ApiError, FieldViolation
from trainhub.common.formerrors import show_service_error
from trainhub.jobs.forms import DEFAULT_LOCATION, accelerator_choices, count_choices, machine_choices
from trainhub.jobs.spec import DISK_TYPES, MAX_DISPLAY_NAME
from trainhub.resources.models import PersistentResource
from trainhub.resources.spec import MAX_REPLICAS, RESOURCE_ID

MAX_FORM_POOLS = 4
_REPLICAS = {"min_value": 1, "max_value": MAX_REPLICAS, "required": False}


class ResourceSettingsForm(forms.Form):
    resource_id = forms.CharField(max_length=63, label="Resource ID", validators=[RegexValidator(
        RESOURCE_ID, "Lowercase letters, digits and hyphens, starting with a letter (at most 63).")])
    display_name = forms.CharField(max_length=MAX_DISPLAY_NAME, required=False)
    location = forms.CharField(max_length=32, initial=DEFAULT_LOCATION, validators=[
        RegexValidator(r"^[a-z][a-z0-9-]*[a-z0-9]$", "Lowercase letters, digits and hyphens, e.g. us-central1.")])


class ResourcePoolForm(forms.Form):
    """One resource pool; pools 1-3 are skipped when their machine type is left empty."""

    # The data- attributes are the hooks of static/js/trainhub.js (accelerators per machine type).
    machine_type = forms.ChoiceField(required=False, widget=forms.Select(attrs={"data-machine-type": ""}))
    accelerator_type = forms.ChoiceField(required=False, choices=accelerator_choices,
                                         widget=forms.Select(attrs={"data-accelerator-type": ""}))
    accelerator_count = forms.ChoiceField(required=False, choices=count_choices,
                                          widget=forms.Select(attrs={"data-accelerator-count": ""}))
    pool_id = forms.CharField(required=False, max_length=63, label="Pool ID",
                              help_text="Empty: named after the machine type.")
    replica_count = forms.IntegerField(**_REPLICAS, help_text="Machines to provision (empty with autoscaling: "
                                                              "the minimum).")
    min_replica_count = forms.IntegerField(**_REPLICAS, label="Autoscaling minimum")
    max_replica_count = forms.IntegerField(**_REPLICAS, label="Autoscaling maximum")
    disk_type = forms.ChoiceField(required=False, choices=[("", "Default")] + [(d, d) for d in DISK_TYPES])
    disk_size_gb = forms.IntegerField(required=False, min_value=100, max_value=64000, label="Disk size (GB)")

    def __init__(self, *args: Any, index: int, **kwargs: Any) -> None:
        super().__init__(*args, prefix=f"pool{index}", **kwargs)
        self.index = index
        self.section = f"Resource pool {index}"
        machine = self.fields["machine_type"]
        machine.required = index == 0
        empty = "Choose a machine type" if index == 0 else "Not used (skip this pool)"
        machine.choices = [("", empty)] + machine_choices()

    def resource_pool(self) -> dict[str, Any] | None:
        data = self.cleaned_data
        if not data["machine_type"]:
            return None
        machine_spec: dict[str, Any] = {"machineType": data["machine_type"]}
        if data["accelerator_type"]:
            machine_spec["acceleratorType"] = data["accelerator_type"]
        if data["accelerator_count"]:
            machine_spec["acceleratorCount"] = int(data["accelerator_count"])
        pool: dict[str, Any] = {"machineSpec": machine_spec}
        if data["pool_id"]:
            pool["id"] = data["pool_id"]
        if data["replica_count"]:
            pool["replicaCount"] = data["replica_count"]
        if data["min_replica_count"] or data["max_replica_count"]:
            pool["autoscalingSpec"] = {key: value for key, value in (
                ("minReplicaCount", data["min_replica_count"]), ("maxReplicaCount", data["max_replica_count"]))
                if value}
        disk = {key: value for key, value in (("bootDiskType", data["disk_type"]),
                                              ("bootDiskSizeGb", data["disk_size_gb"])) if value}
        if disk:
            pool["diskSpec"] = disk
        return pool


_POOL_PATH = re.compile(r"^resourcePools\[(\d+)\]\.?(.*)$")
_POOL_FIELD_BY_PATH = (
    ("machineSpec.machineType", "machine_type"),
    ("machineSpec.acceleratorType", "accelerator_type"),
    ("machineSpec.acceleratorCount", "accelerator_count"),
    ("id", "pool_id"),
    ("replicaCount", "replica_count"),
    ("autoscalingSpec.minReplicaCount", "min_replica_count"),
    ("autoscalingSpec.maxReplicaCount", "max_replica_count"),
    ("autoscalingSpec", "min_replica_count"),
    ("diskSpec.bootDiskType", "disk_type"),
    ("diskSpec.bootDiskSizeGb", "disk_size_gb"),
)
_SETTINGS_FIELD_BY_PATH = {"persistentResourceId": "resource_id", "displayName": "display_name"}


def _pool_field(path_rest: str) -> str | None:
    return next((name for prefix, name in _POOL_FIELD_BY_PATH if path_rest.startswith(prefix)), None)


class _FormSet(ABC):
    """Several Django forms shown as one, and a service's ApiError shown on the fields its
    violations name (those without a field at the top of the page)."""

    def __init__(self) -> None:
        self.violations: list[FieldViolation] = []
        self.service_message = ""

    @abstractmethod
    def forms(self) -> list[forms.Form]:
        """Every form of the set."""

    def is_valid(self) -> bool:
        return all([form.is_valid() for form in self.forms()])  # a list: validate every form

    @property
    def has_errors(self) -> bool:
        return any(form.errors for form in self.forms())

    def show_service_error(self, error: ApiError) -> None:
        show_service_error(self, error, self.field_for)

    @abstractmethod
    def field_for(self, path: str) -> tuple[forms.Form, str | None]:
        """The form and field a violation's path names (field None: the form's top)."""


class ResourceCreateForm(_FormSet):
    """The create page: the resource's settings and up to four resource pools."""

    def __init__(self, data: Any = None, *, location: str) -> None:
        super().__init__()
        self.settings = ResourceSettingsForm(data, initial={"location": location})
        self.pools = [ResourcePoolForm(data, index=index) for index in range(MAX_FORM_POOLS)]

    def forms(self) -> list[forms.Form]:
        return [self.settings, *self.pools]

    def persistent_resource_body(self) -> dict[str, Any]:
        pools = [pool.resource_pool() for pool in self.pools]
        return {"displayName": self.settings.cleaned_data["display_name"],
                "resourcePools": [pool for pool in pools if pool is not None]}

    def field_for(self, path: str) -> tuple[forms.Form, str | None]:
        match = _POOL_PATH.match(path)
        if match:
            # Skipped forms are left out of the body: the n-th pool sent is the n-th used form.
            used = [pool for pool in self.pools if pool.cleaned_data.get("machine_type")]
            if int(match.group(1)) < len(used):
                return used[int(match.group(1))], _pool_field(match.group(2))
        return self.settings, _SETTINGS_FIELD_BY_PATH.get(path)


class PoolResizeForm(forms.Form):
    replica_count = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, label="Machines")
    min_replica_count = forms.IntegerField(**_REPLICAS, label="Autoscaling minimum")
    max_replica_count = forms.IntegerField(**_REPLICAS, label="Autoscaling maximum")


class ResourceResizeForm(_FormSet):
    """Resize every pool at once: its size and its autoscaling range (empty range: no autoscaling)."""

    def __init__(self, data: Any = None, *, resource: PersistentResource) -> None:
        super().__init__()
        self.pools = [
            (pool, PoolResizeForm(data, prefix=f"resize-{pool.pool_id}", initial={
                "replica_count": pool.replica_count, "min_replica_count": pool.min_replica_count,
                "max_replica_count": pool.max_replica_count}))
            for pool in resource.pools.all()
        ]

    def forms(self) -> list[forms.Form]:
        return [form for _, form in self.pools]

    def update(self) -> tuple[str, dict[str, Any]]:
        """(updateMask, body) setting every pool's size and range as the form says."""
        pools = []
        for pool, form in self.pools:
            data = form.cleaned_data
            autoscaling = {key: value for key, value in (("minReplicaCount", data["min_replica_count"]),
                                                         ("maxReplicaCount", data["max_replica_count"])) if value}
            pools.append({"id": pool.pool_id, "replicaCount": data["replica_count"], "autoscalingSpec": autoscaling})
        return "resourcePools.replicaCount,resourcePools.autoscalingSpec", {"resourcePools": pools}

    def field_for(self, path: str) -> tuple[forms.Form, str | None]:
        match = _POOL_PATH.match(path)
        if match and int(match.group(1)) < len(self.pools):
            return self.pools[int(match.group(1))][1], _pool_field(match.group(2))
        return self.pools[0][1], None
