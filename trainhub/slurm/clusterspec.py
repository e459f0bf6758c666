"""The cluster document: ``orchestratorSpec.slurmSpec`` as the seed shows it. Pure Python.

```
{"displayName": "...",
 "orchestratorSpec": {"slurmSpec": {
    "partitions": [{"id": "a4", "node_pool_ids": ["a4"], "config": {"PriorityTier": "2"}}],
    "default_partition_id": "a4",            # else the first partition
    "login_node_pool_id": "login",
    "home_directory_storage": "projects/P/locations/Z/instances/I",
    "config": {"PriorityWeightAge": "1000", ...},           # slurm.conf keys (conf.parse_config)
    "prolog_bash_scripts": ["#!/bin/bash\\n..."], "epilog_bash_scripts": [...]}}}
```

Field names are accepted in camelCase and snake_case (``config`` maps keep their keys as
written). A partition's optional ``config`` holds its PartitionName= options
(conf.parse_partition_options). Every problem is reported at once as a field violation whose
path is the camelCase path of the field, e.g. ``orchestratorSpec.slurmSpec.partitions[1].id``.
Node pools are named here and checked against the inventory by the service.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from trainhub.common.errors import FieldViolation
from trainhub.common.wire import camel_key
from trainhub.slurm.conf import ConfigError, SlurmConfig, parse_config, parse_partition_options

SPEC = "orchestratorSpec.slurmSpec"
CLUSTER_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
PARTITION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
FILESTORE = re.compile(r"^projects/[^/\s]+/locations/[^/\s]+/instances/[^/\s]+$")
MAX_SCRIPT_BYTES = 64 * 1024
MAX_SCRIPTS = 16
TOP_FIELDS = ("displayName", "orchestratorSpec")
SLURM_FIELDS = ("partitions", "defaultPartitionId", "loginNodePoolId", "homeDirectoryStorage", "config",
                "prologBashScripts", "epilogBashScripts")
PARTITION_FIELDS = ("id", "nodePoolIds", "config")


class ClusterSpecError(ValueError):
    def __init__(self, violations: list[FieldViolation]):
        self.violations = violations
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in violations))


@dataclass(frozen=True)
class PartitionInput:
    name: str
    pool_names: tuple[str, ...]
    #: PartitionName= options as given (validated).
    options: dict[str, str]


@dataclass(frozen=True)
class ClusterSpec:
    display_name: str
    partitions: tuple[PartitionInput, ...]
    default_partition: str
    login_pool: str | None
    home_directory_storage: str
    config: SlurmConfig
    prolog_scripts: tuple[str, ...]
    epilog_scripts: tuple[str, ...]


def _fields(value: Any, path: str, allowed: tuple[str, ...], violations: list[FieldViolation]) -> dict[str, Any]:
    """The object's fields by camelCase name; unknown or repeated names are violations."""
    if not isinstance(value, dict):
        violations.append(FieldViolation(path, "must be an object"))
        return {}
    fields: dict[str, Any] = {}
    for key, item in value.items():
        name = camel_key(str(key))
        where = f"{path}.{name}" if path else name
        if name not in allowed:
            violations.append(FieldViolation(where, "unknown field; expected one of " + ", ".join(allowed)))
        elif name in fields:
            violations.append(FieldViolation(where, "is given twice (camelCase and snake_case)"))
        else:
            fields[name] = item
    return fields


def _string(value: Any, path: str, violations: list[FieldViolation], *, pattern: re.Pattern | None = None,
            rule: str = "") -> str | None:
    if not isinstance(value, str) or not value.strip():
        violations.append(FieldViolation(path, "must be a non-empty string"))
        return None
    if pattern is not None and not pattern.match(value):
        violations.append(FieldViolation(path, rule))
        return None
    return value


def _config_map(value: Any, path: str, parse, violations: list[FieldViolation]):
    try:
        return parse(value if value is not None else {})
    except ConfigError as exc:
        violations.extend(FieldViolation(f"{path}.{v.key}" if v.key != "config" else path, v.description)
                          for v in exc.violations)
    except (TypeError, AttributeError):
        violations.append(FieldViolation(path, "must be a map of slurm.conf keys to values"))
    return None


def _scripts(value: Any, path: str, violations: list[FieldViolation]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        violations.append(FieldViolation(path, "must be a list of Bash scripts"))
        return ()
    if len(value) > MAX_SCRIPTS:
        violations.append(FieldViolation(path, f"at most {MAX_SCRIPTS} scripts"))
    scripts = []
    for index, script in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(script, str) or not script.strip():
            violations.append(FieldViolation(where, "must be the non-empty text of a Bash script"))
        elif len(script.encode()) > MAX_SCRIPT_BYTES:
            violations.append(FieldViolation(where, f"is longer than {MAX_SCRIPT_BYTES} bytes"))
        elif "\x00" in script:
            violations.append(FieldViolation(where, "must not contain NUL characters"))
        else:
            scripts.append(script)
    return tuple(scripts)


def _partitions(value: Any, violations: list[FieldViolation]) -> list[PartitionInput]:
    path = f"{SPEC}.partitions"
    if not isinstance(value, list) or not value:
        violations.append(FieldViolation(path, "is required: a non-empty list of {id, node_pool_ids}"))
        return []
    partitions: list[PartitionInput] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        fields = _fields(item, where, PARTITION_FIELDS, violations)
        name = _string(fields.get("id"), f"{where}.id", violations, pattern=PARTITION_NAME,
                       rule="must start with a letter and hold only letters, digits, '-' and '_' (at most 63)")
        if name is not None and name in seen:
            violations.append(FieldViolation(f"{where}.id", f"duplicate partition id {name!r} "
                                                            f"(also partitions[{seen[name]}])"))
            name = None
        elif name is not None:
            seen[name] = index
        pools = fields.get("nodePoolIds")
        pool_names: list[str] = []
        if not isinstance(pools, list) or not pools:
            violations.append(FieldViolation(f"{where}.nodePoolIds", "is required: a non-empty list of node pool ids"))
        else:
            for pool_index, pool in enumerate(pools):
                pool_name = _string(pool, f"{where}.nodePoolIds[{pool_index}]", violations)
                if pool_name is not None and pool_name in pool_names:
                    violations.append(FieldViolation(f"{where}.nodePoolIds[{pool_index}]",
                                                     f"node pool {pool_name!r} is listed twice"))
                elif pool_name is not None:
                    pool_names.append(pool_name)
        options = fields.get("config") or {}
        if _config_map(options, f"{where}.config", parse_partition_options, violations) is not None and name:
            partitions.append(PartitionInput(name, tuple(pool_names), {str(k): str(v) for k, v in options.items()}))
    return partitions


def parse_cluster_spec(body: Any) -> ClusterSpec:
    """Validate a cluster document; raises ClusterSpecError listing every violation."""
    violations: list[FieldViolation] = []
    top = _fields(body, "", TOP_FIELDS, violations)
    display_name = top.get("displayName", "")
    if not isinstance(display_name, str) or len(display_name) > 128:
        violations.append(FieldViolation("displayName", "must be a string of at most 128 characters"))
        display_name = ""
    orchestrator = _fields(top.get("orchestratorSpec"), "orchestratorSpec", ("slurmSpec",), violations)
    if "orchestratorSpec" in top and "slurmSpec" not in orchestrator:
        violations.append(FieldViolation(SPEC, "is required"))
    elif "orchestratorSpec" not in top:
        violations.append(FieldViolation("orchestratorSpec", "is required: {\"slurmSpec\": {...}}"))
    slurm = _fields(orchestrator.get("slurmSpec"), SPEC, SLURM_FIELDS, violations) if "slurmSpec" in orchestrator else {}
    partitions = _partitions(slurm.get("partitions"), violations) if "slurmSpec" in orchestrator else []
    default = slurm.get("defaultPartitionId")
    if default is not None:
        default = _string(default, f"{SPEC}.defaultPartitionId", violations)
        if default is not None and default not in {p.name for p in partitions}:
            violations.append(FieldViolation(f"{SPEC}.defaultPartitionId",
                                             f"{default!r} is not the id of one of the partitions"))
    login = slurm.get("loginNodePoolId")
    if login is not None:
        login = _string(login, f"{SPEC}.loginNodePoolId", violations)
    home = slurm.get("homeDirectoryStorage", "")
    if home:
        home = _string(home, f"{SPEC}.homeDirectoryStorage", violations, pattern=FILESTORE,
                       rule="must be a Filestore instance: projects/PROJECT/locations/ZONE/instances/NAME") or ""
    config = _config_map(slurm.get("config"), f"{SPEC}.config", parse_config, violations)
    prolog = _scripts(slurm.get("prologBashScripts"), f"{SPEC}.prologBashScripts", violations)
    epilog = _scripts(slurm.get("epilogBashScripts"), f"{SPEC}.epilogBashScripts", violations)
    if violations:
        raise ClusterSpecError(violations)
    return ClusterSpec(display_name=display_name, partitions=tuple(partitions),
                       default_partition=default or partitions[0].name, login_pool=login,
                       home_directory_storage=home, config=config, prolog_scripts=prolog, epilog_scripts=epilog)


def validate_scripts(value: Any, field: str) -> tuple[str, ...]:
    """An admin's new prolog or epilog script list (``field`` names it in violations)."""
    violations: list[FieldViolation] = []
    scripts = _scripts(value if value is not None else [], field, violations)
    if violations:
        raise ClusterSpecError(violations)
    return scripts
