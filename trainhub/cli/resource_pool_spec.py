"""Turn `trainhub ai persistent-resources create|update` flags and `--config` into request bodies.

Mirrors `gcloud ai persistent-resources create`: `--resource-pool-spec` takes gcloud's KEY=VALUE
lists, `--config` holds a PersistentResource (its `resourcePools:`, or the `resourcePoolSpecs:`
key gcloud's own help shows), and the pools of both are combined. Only the shape of each flag is
checked here (gcloud's own validation); the server judges the resource. Pure Python.
"""

from __future__ import annotations

import copy

from trainhub.cli.worker_pool_spec import SpecError, positive_int, parse_key_values

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

RESOURCE_POOL_SPEC_KEYS = ("machine-type", "replica-count", "min-replica-count", "max-replica-count",
                           "accelerator-type", "accelerator-count", "disk-type", "disk-size")
RESIZE_KEYS = ("id", "replica-count", "min-replica-count", "max-replica-count")


def _key_values(text: str, allowed: tuple[str, ...], required: str, missing: str) -> dict[str, str]:
    """KEY=VALUE pairs of known keys, none empty, the ``required`` one present (else ``missing``)."""
    spec = parse_key_values(text)
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise SpecError(f"unknown key [{unknown[0]}]; allowed keys: {', '.join(allowed)}")
    for key, value in spec.items():
        if not value.strip():
            raise SpecError(f"{key} must not be empty")
    if required not in spec:
        raise SpecError(missing)
    return spec


def _both_or_neither(spec: dict[str, str], first: str, second: str) -> None:
    if (first in spec) != (second in spec):
        raise SpecError(f"keys [{first}] and [{second}] must be given together")


def _counts(spec: dict[str, str]) -> dict[str, Any]:
    """replicaCount and autoscalingSpec of a pool from its count keys."""
    _both_or_neither(spec, "min-replica-count", "max-replica-count")
    pool: dict[str, Any] = {}
    if "replica-count" in spec:
        pool["replicaCount"] = positive_int(spec, "replica-count", 1)
    if "min-replica-count" in spec:
        pool["autoscalingSpec"] = {"minReplicaCount": positive_int(spec, "min-replica-count", 1),
                                   "maxReplicaCount": positive_int(spec, "max-replica-count", 1)}
    return pool


def parse_resource_pool_spec(text: str) -> dict[str, Any]:
    """One `--resource-pool-spec` value -> a ResourcePool wire mapping."""
    spec = _key_values(text, RESOURCE_POOL_SPEC_KEYS, "machine-type", "machine-type is required")
    if "replica-count" not in spec and "min-replica-count" not in spec:
        raise SpecError("replica-count is required unless min-replica-count and max-replica-count are given")
    _both_or_neither(spec, "accelerator-type", "accelerator-count")
    machine_spec: dict[str, Any] = {"machineType": spec["machine-type"]}
    if "accelerator-type" in spec:
        machine_spec["acceleratorType"] = spec["accelerator-type"]
        machine_spec["acceleratorCount"] = positive_int(spec, "accelerator-count", 1)
    pool: dict[str, Any] = {"machineSpec": machine_spec, **_counts(spec)}
    disk: dict[str, Any] = {}
    if "disk-type" in spec:
        disk["bootDiskType"] = spec["disk-type"]
    if "disk-size" in spec:
        disk["bootDiskSizeGb"] = positive_int(spec, "disk-size", 100)
    if disk:
        pool["diskSpec"] = disk
    return pool


def parse_resize_spec(text: str) -> dict[str, Any]:
    """One `update --resource-pool-spec` value: id=POOL plus the counts to change."""
    spec = _key_values(text, RESIZE_KEYS, "id", "id (the resource pool to resize) is required")
    pool = {"id": spec["id"], **_counts(spec)}
    if len(pool) == 1:
        raise SpecError("give replica-count, or min-replica-count and max-replica-count")
    return pool


def _config_pools(config: dict[str, Any]) -> list[Any]:
    for key in ("resourcePools", "resource_pools", "resourcePoolSpecs", "resource_pool_specs"):
        if key in config:
            pools = config[key]
            return list(pools) if isinstance(pools, list) else [pools]
    return []


def build_persistent_resource(*, display_name: str | None, config: dict[str, Any] | None,
                              resource_pool_specs: list[dict[str, Any]] | None, labels: dict[str, str] | None,
                              network: str | None) -> dict[str, Any]:
    """The create body: the config's PersistentResource with the flags' pools added and its
    displayName, labels and network replaced by the flags that are given."""
    body = copy.deepcopy(config) if config else {}
    pools = _config_pools(body) + list(resource_pool_specs or [])
    for key in ("resourcePoolSpecs", "resource_pool_specs", "resource_pools"):
        body.pop(key, None)
    if not pools:
        raise SpecError("either --resource-pool-spec or a --config file with resourcePools is required")
    body["resourcePools"] = pools
    for key, value in (("displayName", display_name), ("labels", labels), ("network", network)):
        if value:
            body[key] = value
    return body


def build_update(*, display_name: str | None, labels: dict[str, str] | None,
                 resizes: list[dict[str, Any]] | None) -> tuple[str, dict[str, Any]]:
    """(updateMask, body) naming exactly the fields the flags change."""
    mask: list[str] = []
    body: dict[str, Any] = {}
    if display_name is not None:
        mask.append("displayName")
        body["displayName"] = display_name
    if labels is not None:
        mask.append("labels")
        body["labels"] = labels
    if resizes:
        if any("replicaCount" in pool for pool in resizes):
            mask.append("resourcePools.replicaCount")
        if any("autoscalingSpec" in pool for pool in resizes):
            mask.append("resourcePools.autoscalingSpec")
        body["resourcePools"] = resizes
    if not mask:
        raise SpecError("nothing to update: give --display-name, --labels or --resource-pool-spec")
    return ",".join(mask), body
