"""Parse and validate PersistentResource documents and update requests (Vertex AI v1 wire
format) into a canonical form. Pure Python, no Django.

Rules (shared/reference/vertex-api.md section 5, issue 4):
- The id matches ^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$; displayName is at most 128 characters;
  labels follow the Google label rules (the same checks as a CustomJob's).
- resourcePools: at least one; each has a machineSpec validated against the machine catalog as a
  worker pool's is, a diskSpec with the CustomJob defaults (pd-ssd, or hyperdisk-balanced on
  A3 Ultra / A4; 100 GB) so that a job's pool can match it exactly, and a unique id (given, or
  generated from the machine spec).
- Counts: 0 < minReplicaCount <= replicaCount <= maxReplicaCount <= 1000. Autoscaling needs both
  bounds; without it replicaCount is required. An autoscaling pool without replicaCount starts
  at minReplicaCount. (The issue's bounds win over the proto comment's strict min < max.)
- An update names the fields it changes in updateMask: displayName, labels, and of the pools only
  replicaCount and autoscalingSpec (machineSpec and diskSpec are immutable, pools are neither
  added nor removed). Any other path is refused, naming it. The pools in the body (by id, else by
  position) change the named parts they give; ``autoscalingSpec: {}`` turns autoscaling off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from trainhub.common.errors import FieldViolation
from trainhub.common.wire import camel_key, camelize, parse_int
from trainhub.jobs.spec import (
    MAX_DISPLAY_NAME,
    Checker,
    ReplicaShape,
    SpecError,
    parse_disk_spec,
    parse_labels,
    parse_machine_spec,
)

MAX_REPLICAS = 1000
#: Vertex documents no limit; this one bounds the work of one request (every pool's id is checked
#: against all the others), far above the pools a location's inventory could place.
MAX_RESOURCE_POOLS = 64
RESOURCE_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")

_RESOURCE_FIELDS = {"name", "displayName", "resourcePools", "state", "error", "createTime", "startTime",
                    "updateTime", "labels", "network", "pscInterfaceConfig", "encryptionSpec",
                    "resourceRuntimeSpec", "resourceRuntime", "reservedIpRanges", "satisfiesPzs", "satisfiesPzi"}
#: Accepted and echoed back; trainhub does not act on them.
_STORED_OPTIONS = ("network", "pscInterfaceConfig", "encryptionSpec", "resourceRuntimeSpec", "reservedIpRanges")
_POOL_FIELDS = {"id", "machineSpec", "replicaCount", "diskSpec", "usedReplicaCount", "autoscalingSpec"}
_AUTOSCALING_FIELDS = {"minReplicaCount", "maxReplicaCount"}

#: updateMask paths -> what they change. A pool path changes that part of every pool in the body.
UPDATABLE_PATHS = {
    "displayName": "displayName",
    "labels": "labels",
    "resourcePools": "counts",
    "resourcePools.replicaCount": "replicaCount",
    "resourcePools.autoscalingSpec": "autoscalingSpec",
    "resourcePools.autoscalingSpec.minReplicaCount": "minReplicaCount",
    "resourcePools.autoscalingSpec.maxReplicaCount": "maxReplicaCount",
}


class PoolSize:
    """The size rules of a resource pool, for anything with replica_count, min_replica_count and
    max_replica_count (PoolSpec here, the ResourcePool model)."""

    replica_count: int
    min_replica_count: int | None
    max_replica_count: int | None

    @property
    def autoscaling(self) -> bool:
        return self.min_replica_count is not None

    @property
    def capacity(self) -> int:
        """The most replicas a job may ask of the pool: maxReplicaCount, else replicaCount."""
        return self.max_replica_count if self.autoscaling else self.replica_count

    @property
    def floor(self) -> int:
        """Machines always provisioned: minReplicaCount, else replicaCount."""
        return self.min_replica_count if self.autoscaling else self.replica_count


@dataclass(frozen=True)
class PoolSpec(PoolSize):
    pool_id: str
    machine_spec: dict[str, Any]
    shape: ReplicaShape
    disk_spec: dict[str, Any]
    replica_count: int
    min_replica_count: int | None = None
    max_replica_count: int | None = None


@dataclass(frozen=True)
class ParsedResource:
    display_name: str
    labels: dict[str, str]
    pools: tuple[PoolSpec, ...]
    options: dict[str, Any]


@dataclass(frozen=True)
class ParsedUpdate:
    """None means "not in the updateMask": keep the current value."""

    display_name: str | None
    labels: dict[str, str] | None
    pools: tuple[PoolSpec, ...] | None


def _check_counts(check: Checker, path: str, replica_count: int | None, minimum: int | None,
                  maximum: int | None) -> None:
    """0 < min <= replicaCount <= max <= 1000, reported on the field that breaks it."""
    if (minimum is None) != (maximum is None):
        check.add(f"{path}.autoscalingSpec", "needs both minReplicaCount and maxReplicaCount")
        return
    if minimum is None:
        if replica_count is None:
            check.add(f"{path}.replicaCount", "is required unless autoscalingSpec is set")
        return
    if minimum > maximum:
        check.add(f"{path}.autoscalingSpec.minReplicaCount",
                  f"must be at most maxReplicaCount ({maximum}), got {minimum}")
    elif replica_count is not None and not minimum <= replica_count <= maximum:
        check.add(f"{path}.replicaCount", f"must be between minReplicaCount ({minimum}) and maxReplicaCount "
                                           f"({maximum}), got {replica_count}")


def _count(check: Checker, mapping: dict, key: str, path: str) -> int | None:
    if mapping.get(key) is None:
        return None
    return check.wire(parse_int, mapping[key], f"{path}.{key}", minimum=1, maximum=MAX_REPLICAS)


def _parse_autoscaling(check: Checker, value: Any, path: str) -> tuple[int | None, int | None]:
    spec = check.mapping(value, f"{path}.autoscalingSpec", _AUTOSCALING_FIELDS, required=False)
    if not spec:
        return None, None
    return (_count(check, spec, "minReplicaCount", f"{path}.autoscalingSpec"),
            _count(check, spec, "maxReplicaCount", f"{path}.autoscalingSpec"))


def generated_pool_id(machine_spec: dict[str, Any], taken: set[str]) -> str:
    """A pool id from the machine spec ("n1-standard-4-nvidia-tesla-t4"), unique among ``taken``."""
    parts = [machine_spec["machineType"]]
    if machine_spec.get("acceleratorType"):
        parts.append(machine_spec["acceleratorType"])
    base = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")[:56]
    candidate, suffix = base, 1
    while candidate in taken:
        candidate, suffix = f"{base}-{suffix}", suffix + 1
    return candidate


def _parse_pool(check: Checker, value: Any, path: str) -> PoolSpec | None:
    pool = check.mapping(value, path, _POOL_FIELDS)
    if pool is None:
        return None
    pool_id = check.string(pool.get("id"), f"{path}.id", max_length=63)
    if pool_id and not RESOURCE_ID.match(pool_id):
        check.add(f"{path}.id", "must match ^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
    machine = parse_machine_spec(check, pool.get("machineSpec"), f"{path}.machineSpec")
    replica_count = _count(check, pool, "replicaCount", path)
    minimum, maximum = _parse_autoscaling(check, pool.get("autoscalingSpec"), path)
    _check_counts(check, path, replica_count, minimum, maximum)
    if machine is None:
        return None
    machine_spec, shape = machine
    disk_spec = parse_disk_spec(check, pool.get("diskSpec"), f"{path}.diskSpec", shape.machine_type)
    return PoolSpec(pool_id or "", machine_spec, shape, disk_spec, replica_count or minimum or 1, minimum, maximum)


def _pool_list(value: Any) -> Any:
    # gcloud YAML often writes a single pool as a mapping rather than a list of one.
    return [value] if isinstance(value, dict) else value


def _document(check: Checker, body: Any) -> dict:
    """The body as a camelCase PersistentResource mapping; SpecError if it is not an object."""
    document = camelize(body, verbatim_maps=frozenset({"labels"})) if isinstance(body, dict) else body
    resource = check.mapping(document, "", _RESOURCE_FIELDS)
    if resource is None:
        raise SpecError(check.violations or [FieldViolation("persistentResource", "must be a JSON object")])
    return resource


def parse_persistent_resource(body: Any) -> ParsedResource:
    """Validate a PersistentResource body; raise SpecError with every field violation found."""
    check = Checker()
    resource = _document(check, body)
    display_name = check.string(resource.get("displayName"), "displayName", max_length=MAX_DISPLAY_NAME) or ""
    labels = parse_labels(check, resource.get("labels"))
    raw_pools = _pool_list(resource.get("resourcePools"))
    pools: list[PoolSpec] = []
    if not isinstance(raw_pools, list) or not raw_pools:
        check.add("resourcePools", "at least one resource pool is required")
    elif len(raw_pools) > MAX_RESOURCE_POOLS:
        check.add("resourcePools", f"at most {MAX_RESOURCE_POOLS} resource pools are allowed")
    else:
        for index, raw_pool in enumerate(raw_pools):
            pool = _parse_pool(check, raw_pool, f"resourcePools[{index}]")
            if pool is not None:
                pools.append(pool)
    given = [pool.pool_id for pool in pools if pool.pool_id]
    for pool_id in sorted({p for p in given if given.count(p) > 1}):
        check.add("resourcePools", f"resource pool id {pool_id!r} is used more than once")
    if check.violations:
        raise SpecError(check.violations)
    taken = set(given)
    named = []
    for pool in pools:
        if not pool.pool_id:
            pool = replace(pool, pool_id=generated_pool_id(pool.machine_spec, taken))
            taken.add(pool.pool_id)
        named.append(pool)
    options = {key: resource[key] for key in _STORED_OPTIONS if resource.get(key) not in (None, "", [], {})}
    return ParsedResource(display_name, labels, tuple(named), options)


def parse_update_mask(mask: Any) -> list[str]:
    """Comma-separated field paths, camelCase or snake_case; every one must be updatable."""
    if not isinstance(mask, str) or not mask.strip():
        raise SpecError([FieldViolation("updateMask", "is required: name the fields to change, e.g. "
                                                      "resourcePools.replicaCount")])
    paths = [".".join(camel_key(part) for part in path.strip().split(".")) for path in mask.split(",")]
    refused = [path for path in paths if path not in UPDATABLE_PATHS]
    if refused:
        allowed = ", ".join(UPDATABLE_PATHS)
        raise SpecError([FieldViolation(path, f"cannot be updated; updateMask may name {allowed}")
                         for path in refused])
    return paths


def _check_immutable(check: Checker, path: str, raw: dict, current: PoolSpec) -> None:
    if raw.get("machineSpec") is not None:
        machine = parse_machine_spec(check, raw["machineSpec"], f"{path}.machineSpec")
        if machine is not None and machine[0] != current.machine_spec:
            check.add(f"{path}.machineSpec", "is immutable: a resource pool keeps the machines it was created with")
    if raw.get("diskSpec") is not None:
        disk = parse_disk_spec(check, raw["diskSpec"], f"{path}.diskSpec", current.shape.machine_type)
        if disk != current.disk_spec:
            check.add(f"{path}.diskSpec", "is immutable: a resource pool keeps the disks it was created with")


def _updated_pool(check: Checker, raw: dict, path: str, current: PoolSpec, changes: set[str]) -> PoolSpec:
    """The pool after the changes the mask names, for the parts this pool of the body gives (a
    pool that leaves a part out keeps it); ``autoscalingSpec: {}`` turns autoscaling off."""
    _check_immutable(check, path, raw, current)
    replica_count, minimum, maximum = current.replica_count, current.min_replica_count, current.max_replica_count
    if changes & {"counts", "autoscalingSpec"} and "autoscalingSpec" in raw:
        minimum, maximum = _parse_autoscaling(check, raw["autoscalingSpec"], path)
    autoscaling = raw.get("autoscalingSpec") if isinstance(raw.get("autoscalingSpec"), dict) else {}
    for bound in ("minReplicaCount", "maxReplicaCount"):
        if bound in changes and bound in autoscaling:
            value = _count(check, autoscaling, bound, f"{path}.autoscalingSpec")
            minimum, maximum = (value, maximum) if bound == "minReplicaCount" else (minimum, value)
    if changes & {"counts", "replicaCount"} and raw.get("replicaCount") is not None:
        replica_count = _count(check, raw, "replicaCount", path)
    elif minimum is not None and maximum is not None:
        # A new range without a new size keeps the pool's size, moved inside the range.
        replica_count = min(max(replica_count, minimum), maximum)
    _check_counts(check, path, replica_count, minimum, maximum)
    return replace(current, replica_count=replica_count or current.replica_count, min_replica_count=minimum,
                   max_replica_count=maximum)


def parse_update(mask: Any, body: Any, current: Sequence[PoolSpec]) -> ParsedUpdate:
    """Validate a PATCH: the updateMask and the fields it names of the body."""
    paths = parse_update_mask(mask)
    changes = {UPDATABLE_PATHS[path] for path in paths}
    check = Checker()
    resource = _document(check, body)
    display_name = labels = pools = None
    if "displayName" in changes:
        display_name = check.string(resource.get("displayName"), "displayName", max_length=MAX_DISPLAY_NAME) or ""
    if "labels" in changes:
        labels = parse_labels(check, resource.get("labels"))
    if changes - {"displayName", "labels"}:
        pools = _updated_pools(check, _pool_list(resource.get("resourcePools")), current, changes)
    if check.violations:
        raise SpecError(check.violations)
    return ParsedUpdate(display_name, labels, pools)


def _updated_pools(check: Checker, raw_pools: Any, current: Sequence[PoolSpec],
                   changes: set[str]) -> tuple[PoolSpec, ...]:
    if not isinstance(raw_pools, list) or not raw_pools:
        check.add("resourcePools", "the updateMask names resource pool fields, so resourcePools must list the "
                                   "pools to change")
        return tuple(current)
    by_id = {pool.pool_id: pool for pool in current}
    result = {pool.pool_id: pool for pool in current}
    for index, raw in enumerate(raw_pools):
        path = f"resourcePools[{index}]"
        if check.mapping(raw, path, _POOL_FIELDS) is None:
            continue
        pool_id = raw.get("id")
        if pool_id is None:
            if index >= len(current):
                check.add(path, f"the resource has {len(current)} resource pool(s); pools cannot be added")
                continue
            pool_id = current[index].pool_id
        if not isinstance(pool_id, str) or pool_id not in by_id:
            check.add(f"{path}.id", f"no resource pool {pool_id!r}; pools cannot be added "
                                    f"(existing: {', '.join(by_id)})")
            continue
        result[pool_id] = _updated_pool(check, raw, path, by_id[pool_id], changes)
    return tuple(result[pool.pool_id] for pool in current)


def validate_resource_id(value: Any) -> str:
    if not isinstance(value, str) or not RESOURCE_ID.match(value):
        raise SpecError([FieldViolation("persistentResourceId", "is required and must match "
                                                                "^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")])
    return value


def render_pool(pool: PoolSpec) -> dict[str, Any]:
    """A pool in wire form (int64 counts as strings, as the v1 API emits them)."""
    rendered: dict[str, Any] = {"id": pool.pool_id, "machineSpec": pool.machine_spec,
                                "replicaCount": str(pool.replica_count), "diskSpec": pool.disk_spec}
    if pool.autoscaling:
        rendered["autoscalingSpec"] = {"minReplicaCount": str(pool.min_replica_count),
                                       "maxReplicaCount": str(pool.max_replica_count)}
    return rendered

