"""Parse and validate a CustomJob document (Vertex AI v1 wire format) into a canonical form.

The canonical form is camelCase JSON with enums as names, counts as ints, durations as "Ns"
strings and every default filled in, so the rest of trainhub reads one shape. Every rule that
rejects input produces a FieldViolation with the path of the offending field, so the caller
answers 400 INVALID_ARGUMENT listing all of them at once. Pure Python, no Django.

Rules (Vertex AI v1 CustomJob, see shared/reference/vertex-api.md sections 1, 4 and 8):
- displayName is required, at most 128 characters; labels follow the Google label rules.
- workerPoolSpecs: 1 to 4 pools; pool 0 must be non-empty with replicaCount 1; later pools may be
  skipped with {}; each non-empty pool has exactly one of containerSpec / pythonPackageSpec.
- machineSpec.machineType must be in the catalog; the accelerator must be attachable to it in an
  allowed count (A2/A3/A4/G2 machines have a fixed GPU; N1 takes 1/2/4/8 of T4/V100/P4/P100).
- scheduling: timeout defaults to 7 days; FLEX_START needs an L4/A100/H100/H200/B200 GPU, a
  timeout of at most 7 days and one machineSpec shared by every pool; maxWaitDuration "0s"
  waits forever and unset means one day (kept distinct: the field is simply absent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable

from trainhub.catalog.machines import (
    ACCELERATOR_TYPES,
    NO_ACCELERATOR,
    is_flex_start_eligible,
    machine_type_get,
)
from trainhub.common.errors import FieldViolation
from trainhub.common.wire import (
    WireError,
    camelize,
    format_duration,
    parse_duration,
    parse_enum,
    parse_int,
)

STRATEGIES: dict[int, str] = {
    0: "STRATEGY_UNSPECIFIED",
    1: "ON_DEMAND",
    2: "LOW_COST",
    3: "STANDARD",
    4: "SPOT",
    6: "FLEX_START",
}
#: Deprecated and unspecified strategies run as their modern equivalent.
EFFECTIVE_STRATEGY = {"STRATEGY_UNSPECIFIED": "STANDARD", "ON_DEMAND": "STANDARD", "LOW_COST": "SPOT"}

DEFAULT_TIMEOUT_SECONDS = 7 * 24 * 3600
FLEX_START_MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
DEFAULT_MAX_WAIT_SECONDS = 24 * 3600
MAX_WORKER_POOLS = 4
MAX_REPLICAS_PER_POOL = 1000
MAX_DISPLAY_NAME = 128
MAX_ENV_VARS = 100
MAX_TOTAL_ARGUMENT_CHARS = 100_000
MAX_STRING = 4096
DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
HYPERDISK_DEFAULT_MACHINES = ("a3-ultragpu-8g", "a4-highgpu-8g")

_LABEL_KEY = re.compile(r"^[\w\-]{1,63}$", re.UNICODE)
_LABEL_VALUE = re.compile(r"^[\w\-]{0,63}$", re.UNICODE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESOURCE_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")

_CUSTOM_JOB_FIELDS = {"displayName", "jobSpec", "labels", "encryptionSpec", "name", "state", "createTime",
                      "startTime", "endTime", "updateTime", "error", "webAccessUris", "satisfiesPzs", "satisfiesPzi"}
_OUTPUT_ONLY = {"name", "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris",
                "satisfiesPzs", "satisfiesPzi"}
_JOB_SPEC_STRINGS = {"serviceAccount", "network", "tensorboard", "experiment", "experimentRun",
                     "protectedArtifactLocationId", "persistentResourceId"}
_JOB_SPEC_BOOLS = {"enableWebAccess", "enableDashboardAccess"}
_JOB_SPEC_FIELDS = _JOB_SPEC_STRINGS | _JOB_SPEC_BOOLS | {
    "workerPoolSpecs", "scheduling", "baseOutputDirectory", "reservedIpRanges", "models", "pscInterfaceConfig"}
_POOL_FIELDS = {"machineSpec", "replicaCount", "diskSpec", "containerSpec", "pythonPackageSpec", "nfsMounts",
                "lustreMounts"}
_MACHINE_FIELDS = {"machineType", "acceleratorType", "acceleratorCount", "gpuPartitionSize", "tpuTopology",
                   "reservationAffinity"}
_CONTAINER_FIELDS = {"imageUri", "command", "args", "env"}
_PYTHON_FIELDS = {"executorImageUri", "packageUris", "pythonModule", "args", "env"}
_SCHEDULING_FIELDS = {"timeout", "restartJobOnWorkerRestart", "strategy", "disableRetries", "maxWaitDuration"}
_DISK_FIELDS = {"bootDiskType", "bootDiskSizeGb"}


@dataclass(frozen=True)
class ReplicaShape:
    """What one replica needs from a node: a VM of this machine type with these GPUs."""

    machine_type: str
    accelerator_type: str
    accelerator_count: int


@dataclass(frozen=True)
class PoolRequest:
    index: int
    replica_count: int
    shape: ReplicaShape


@dataclass(frozen=True)
class ParsedCustomJob:
    document: dict[str, Any]
    pools: tuple[PoolRequest, ...]
    strategy: str
    timeout_seconds: int
    #: None means "wait forever" (maxWaitDuration "0s"); only meaningful for FLEX_START.
    max_wait_seconds: int | None

    @property
    def accelerator_type(self) -> str:
        """The job's GPU type in lists and dashboards: the type it asks most GPUs of (the first
        such pool on a tie), or NO_ACCELERATOR for a job without GPUs."""
        return main_accelerator_type((pool.replica_count, pool.shape) for pool in self.pools)


def main_accelerator_type(pools: Iterable[tuple[int, ReplicaShape]]) -> str:
    """The accelerator type with the most GPUs over (replica count, shape) pairs; NO_ACCELERATOR if none."""
    gpus: dict[str, int] = {}
    for replicas, shape in pools:
        if shape.accelerator_count:
            gpus[shape.accelerator_type] = gpus.get(shape.accelerator_type, 0) + replicas * shape.accelerator_count
    return max(gpus, key=gpus.__getitem__) if gpus else NO_ACCELERATOR


class SpecError(Exception):
    def __init__(self, violations: list[FieldViolation]):
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in violations))
        self.violations = violations


def output_uri_problem(uri: str) -> str | None:
    """Why an output URI cannot be used, or None. Only gs://BUCKET/... and absolute file:///... (or
    /...) URIs, with no ``.`` or ``..`` segment: a node maps them to a directory it writes to, and a
    segment climbing out of it would reach the host's files (the node also confines file://
    paths to its --output-root directories)."""
    if uri.startswith("gs://"):
        path = uri[len("gs://"):]
        if not path or path.startswith("/"):
            return "must name a bucket: gs://BUCKET/PATH"
    elif uri.startswith("file:///") or uri.startswith("/"):
        path = uri.removeprefix("file://")
    else:
        return "must start with gs://, file:/// or /"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "must not contain '.' or '..' path segments"
    return None


class Checker:
    """Reads one untrusted document, collecting every field violation with its path instead of
    stopping at the first (the Vertex error lists them all); each reader returns the value or None."""

    def __init__(self) -> None:
        self.violations: list[FieldViolation] = []

    def add(self, path: str, description: str) -> None:
        self.violations.append(FieldViolation(path, description))

    def mapping(self, value: Any, path: str, allowed: set[str], *, required: bool = True) -> dict | None:
        if value is None:
            if required:
                self.add(path, "is required")
            return None
        if not isinstance(value, dict):
            self.add(path, f"must be an object, got {type(value).__name__}")
            return None
        for key in value:
            if key not in allowed:
                self.add(f"{path}.{key}" if path else key, f"Unknown name {key!r}: cannot find field")
        return value

    def string(self, value: Any, path: str, *, required: bool = False, max_length: int = MAX_STRING) -> str | None:
        if value is None or value == "":
            if required:
                self.add(path, "is required")
            return None if value is None else ""
        if not isinstance(value, str):
            self.add(path, f"must be a string, got {type(value).__name__}")
            return None
        if len(value) > max_length:
            self.add(path, f"must be at most {max_length} characters, got {len(value)}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.add(path, f"must be a boolean, got {value!r}")
            return None
        return value

    def string_list(self, value: Any, path: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, "must be a list of strings")
            return []
        result = []
        for position, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                self.add(f"{path}[{position}]", "must be a string")
                continue
            text = item if isinstance(item, str) else str(item)
            if len(text) > MAX_TOTAL_ARGUMENT_CHARS:
                self.add(f"{path}[{position}]", f"must be at most {MAX_TOTAL_ARGUMENT_CHARS} characters")
                continue
            result.append(text)
        return result

    def wire(self, parse, value: Any, path: str, *args, **kwargs):
        try:
            return parse(value, *args, **kwargs)
        except WireError as exc:
            self.add(path, str(exc))
            return None


def _parse_env(check: Checker, value: Any, path: str) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        check.add(path, "must be a list of {name, value}")
        return []
    if len(value) > MAX_ENV_VARS:
        check.add(path, f"must have at most {MAX_ENV_VARS} variables, got {len(value)}")
        return []
    result = []
    for position, item in enumerate(value):
        item_path = f"{path}[{position}]"
        entry = check.mapping(item, item_path, {"name", "value"})
        if entry is None:
            continue
        name = check.string(entry.get("name"), f"{item_path}.name", required=True, max_length=256)
        if name and not _ENV_NAME.match(name):
            check.add(f"{item_path}.name", f"{name!r} is not a valid environment variable name")
            continue
        raw_value = entry.get("value", "")
        if isinstance(raw_value, (int, float)) and not isinstance(raw_value, bool):
            raw_value = str(raw_value)
        env_value = check.string(raw_value, f"{item_path}.value", max_length=MAX_TOTAL_ARGUMENT_CHARS)
        if name and env_value is not None:
            result.append({"name": name, "value": env_value})
    return result


def parse_machine_spec(check: Checker, value: Any, path: str) -> tuple[dict, ReplicaShape] | None:
    """A machineSpec (machine type, accelerator type and count the machine allows) and its shape."""
    spec = check.mapping(value, path, _MACHINE_FIELDS)
    if spec is None:
        return None
    machine_name = check.string(spec.get("machineType"), f"{path}.machineType", required=True, max_length=128)
    if not machine_name:
        return None
    machine = machine_type_get(machine_name)
    if machine is None:
        check.add(f"{path}.machineType", f"Machine type {machine_name!r} is not supported.")
        return None
    accelerator = NO_ACCELERATOR
    if spec.get("acceleratorType") is not None:
        accelerator = check.wire(parse_enum, spec["acceleratorType"], f"{path}.acceleratorType", ACCELERATOR_TYPES)
        if accelerator is None:
            return None
    count = None
    if spec.get("acceleratorCount") is not None:
        count = check.wire(parse_int, spec["acceleratorCount"], f"{path}.acceleratorCount", minimum=0)
        if count is None:
            return None
    fixed = machine.fixed_gpu
    if accelerator == NO_ACCELERATOR and fixed and not count:
        accelerator = fixed[0]
    if accelerator == NO_ACCELERATOR:
        if count:
            check.add(f"{path}.acceleratorCount", "is set but acceleratorType is not")
            return None
        count = 0
    else:
        allowed = machine.accelerators.get(accelerator)
        if not allowed:
            attachable = ", ".join(machine.accelerators) or "none"
            check.add(f"{path}.acceleratorType",
                      f"{accelerator} cannot be attached to machine type {machine_name} (attachable: {attachable})")
            return None
        if count is None or count == 0:
            count = allowed[0]
        if count not in allowed:
            check.add(f"{path}.acceleratorCount",
                      f"{count} x {accelerator} is not allowed on {machine_name}; allowed counts: "
                      + ", ".join(str(c) for c in allowed))
            return None
    for key in ("gpuPartitionSize", "tpuTopology"):
        check.string(spec.get(key), f"{path}.{key}", max_length=64)
    canonical = {"machineType": machine_name}
    if accelerator != NO_ACCELERATOR:
        canonical["acceleratorType"] = accelerator
        canonical["acceleratorCount"] = count
    for key in ("gpuPartitionSize", "tpuTopology", "reservationAffinity"):
        if spec.get(key) not in (None, ""):
            canonical[key] = spec[key]
    return canonical, ReplicaShape(machine_name, accelerator, count)


def parse_disk_spec(check: Checker, value: Any, path: str, machine_type: str) -> dict:
    """A diskSpec with Vertex's defaults for the machine type (hyperdisk-balanced or pd-ssd, 100 GB)."""
    default_type = "hyperdisk-balanced" if machine_type in HYPERDISK_DEFAULT_MACHINES else "pd-ssd"
    spec = check.mapping(value, path, _DISK_FIELDS, required=False) or {}
    disk_type = check.string(spec.get("bootDiskType"), f"{path}.bootDiskType", max_length=64) or default_type
    if disk_type not in DISK_TYPES:
        check.add(f"{path}.bootDiskType", f"must be one of {', '.join(DISK_TYPES)}, got {disk_type!r}")
    size = 100
    if spec.get("bootDiskSizeGb") is not None:
        size = check.wire(parse_int, spec["bootDiskSizeGb"], f"{path}.bootDiskSizeGb", minimum=100, maximum=64000) or 100
    return {"bootDiskType": disk_type, "bootDiskSizeGb": size}


def _parse_task(check: Checker, pool: dict, path: str) -> dict | None:
    has_container = pool.get("containerSpec") is not None
    has_python = pool.get("pythonPackageSpec") is not None
    if has_container == has_python:
        check.add(path, "exactly one of containerSpec or pythonPackageSpec must be set"
                  + (" (both are)" if has_container else ""))
        return None
    if has_container:
        spec_path = f"{path}.containerSpec"
        spec = check.mapping(pool["containerSpec"], spec_path, _CONTAINER_FIELDS)
        if spec is None:
            return None
        task = {
            "imageUri": check.string(spec.get("imageUri"), f"{spec_path}.imageUri", required=True, max_length=1024),
            "command": check.string_list(spec.get("command"), f"{spec_path}.command"),
            "args": check.string_list(spec.get("args"), f"{spec_path}.args"),
            "env": _parse_env(check, spec.get("env"), f"{spec_path}.env"),
        }
        return {"containerSpec": task}
    spec_path = f"{path}.pythonPackageSpec"
    spec = check.mapping(pool["pythonPackageSpec"], spec_path, _PYTHON_FIELDS)
    if spec is None:
        return None
    uris = check.string_list(spec.get("packageUris"), f"{spec_path}.packageUris")
    if not uris:
        check.add(f"{spec_path}.packageUris", "is required")
    elif len(uris) > 100:
        check.add(f"{spec_path}.packageUris", "must have at most 100 entries")
    task = {
        "executorImageUri": check.string(spec.get("executorImageUri"), f"{spec_path}.executorImageUri",
                                         required=True, max_length=1024),
        "packageUris": uris,
        "pythonModule": check.string(spec.get("pythonModule"), f"{spec_path}.pythonModule", required=True,
                                     max_length=512),
        "args": check.string_list(spec.get("args"), f"{spec_path}.args"),
        "env": _parse_env(check, spec.get("env"), f"{spec_path}.env"),
    }
    return {"pythonPackageSpec": task}


def _parse_pool(check: Checker, value: Any, index: int) -> tuple[dict, PoolRequest | None]:
    path = f"jobSpec.workerPoolSpecs[{index}]"
    pool = check.mapping(value, path, _POOL_FIELDS)
    if pool is None:
        return {}, None
    if not pool:
        if index == 0:
            check.add(path, "the first worker pool (the primary replica) must not be empty")
        return {}, None
    machine = parse_machine_spec(check, pool.get("machineSpec"), f"{path}.machineSpec")
    replica_count = 1
    if pool.get("replicaCount") is not None:
        replica_count = check.wire(parse_int, pool["replicaCount"], f"{path}.replicaCount", minimum=1,
                                   maximum=MAX_REPLICAS_PER_POOL)
    if index == 0 and replica_count not in (None, 1):
        check.add(f"{path}.replicaCount", f"the primary worker pool must have replicaCount 1, got {replica_count}")
    task = _parse_task(check, pool, path)
    if machine is None or task is None or replica_count is None:
        return {}, None
    machine_spec, shape = machine
    canonical = {
        "machineSpec": machine_spec,
        "replicaCount": replica_count,
        "diskSpec": parse_disk_spec(check, pool.get("diskSpec"), f"{path}.diskSpec", shape.machine_type),
        **task,
    }
    for key in ("nfsMounts", "lustreMounts"):
        if pool.get(key):
            canonical[key] = pool[key]
    return canonical, PoolRequest(index, replica_count, shape)


def _parse_scheduling(check: Checker, value: Any) -> tuple[dict, str, int, int | None]:
    spec = check.mapping(value, "jobSpec.scheduling", _SCHEDULING_FIELDS, required=False) or {}
    strategy = "STRATEGY_UNSPECIFIED"
    if spec.get("strategy") is not None:
        strategy = check.wire(parse_enum, spec["strategy"], "jobSpec.scheduling.strategy", STRATEGIES) or strategy
    timeout = Decimal(DEFAULT_TIMEOUT_SECONDS)
    if spec.get("timeout") is not None:
        parsed = check.wire(parse_duration, spec["timeout"], "jobSpec.scheduling.timeout")
        if parsed is not None and parsed <= 0:
            check.add("jobSpec.scheduling.timeout", "must be greater than 0s")
        elif parsed is not None:
            timeout = parsed
    canonical: dict[str, Any] = {"strategy": strategy, "timeout": format_duration(timeout)}
    max_wait: int | None = DEFAULT_MAX_WAIT_SECONDS
    if spec.get("maxWaitDuration") is not None:
        parsed = check.wire(parse_duration, spec["maxWaitDuration"], "jobSpec.scheduling.maxWaitDuration")
        if parsed is not None:
            canonical["maxWaitDuration"] = format_duration(parsed)
            max_wait = None if parsed == 0 else int(parsed.to_integral_value(rounding="ROUND_CEILING"))
    for key in ("restartJobOnWorkerRestart", "disableRetries"):
        flag = check.boolean(spec.get(key), f"jobSpec.scheduling.{key}")
        if flag is not None:
            canonical[key] = flag
    effective = EFFECTIVE_STRATEGY.get(strategy, strategy)
    return canonical, effective, int(timeout.to_integral_value(rounding="ROUND_CEILING")), max_wait


def parse_labels(check: Checker, value: Any, path: str = "labels") -> dict[str, str]:
    """Resource labels: at most 64, keys and values as Google Cloud restricts them."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        check.add(path, "must be a map of string to string")
        return {}
    if len(value) > 64:
        check.add(path, "must have at most 64 labels")
        return {}
    labels = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_KEY.match(key) or key != key.lower() or key[0].isdigit():
            check.add(f"{path}.{key}", "label keys must be 1-63 lowercase letters, digits, '_' or '-', "
                                        "starting with a letter")
            continue
        if not isinstance(item, str) or not _LABEL_VALUE.match(item) or item != item.lower():
            check.add(f"{path}.{key}", "label values must be at most 63 lowercase letters, digits, '_' or '-'")
            continue
        labels[key] = item
    return labels


def _check_flex_start(check: Checker, pools: list[PoolRequest], timeout_seconds: int) -> None:
    for pool in pools:
        if not is_flex_start_eligible(pool.shape.accelerator_type):
            check.add(f"jobSpec.workerPoolSpecs[{pool.index}].machineSpec.acceleratorType",
                      "FLEX_START requires an L4, A100, H100, H200 or B200 GPU; got "
                      + (pool.shape.accelerator_type if pool.shape.accelerator_count else "no accelerator"))
    if timeout_seconds > FLEX_START_MAX_TIMEOUT_SECONDS:
        check.add("jobSpec.scheduling.timeout", "FLEX_START requires a timeout of 7 days (604800s) or less")
    shapes = {pool.shape for pool in pools}
    if len(shapes) > 1:
        check.add("jobSpec.workerPoolSpecs",
                  "FLEX_START requires the same machineSpec in every worker pool")


def parse_custom_job(body: Any) -> ParsedCustomJob:
    """Validate a CustomJob body; raise SpecError with every field violation found."""
    check = Checker()
    document = camelize(body, verbatim_maps=frozenset({"labels"})) if isinstance(body, dict) else body
    job = check.mapping(document, "", _CUSTOM_JOB_FIELDS)
    if job is None:
        raise SpecError(check.violations or [FieldViolation("customJob", "must be a JSON object")])
    display_name = check.string(job.get("displayName"), "displayName", required=True, max_length=MAX_DISPLAY_NAME)
    labels = parse_labels(check, job.get("labels"))
    spec = check.mapping(job.get("jobSpec"), "jobSpec", _JOB_SPEC_FIELDS)
    if spec is None:
        raise SpecError(check.violations)
    raw_pools = spec.get("workerPoolSpecs")
    if isinstance(raw_pools, dict):
        raw_pools = [raw_pools]  # gcloud YAML often writes a single pool as a mapping
    canonical_pools: list[dict] = []
    pool_requests: list[PoolRequest] = []
    if not isinstance(raw_pools, list) or not raw_pools:
        check.add("jobSpec.workerPoolSpecs", "at least one worker pool is required")
    elif len(raw_pools) > MAX_WORKER_POOLS:
        check.add("jobSpec.workerPoolSpecs", f"at most {MAX_WORKER_POOLS} worker pools are allowed")
    else:
        for index, raw_pool in enumerate(raw_pools):
            canonical_pool, request = _parse_pool(check, raw_pool, index)
            canonical_pools.append(canonical_pool)
            if request is not None:
                pool_requests.append(request)
        while canonical_pools and not canonical_pools[-1]:
            canonical_pools.pop()
    total_chars = sum(
        len(item)
        for pool in canonical_pools
        for task in (pool.get("containerSpec") or pool.get("pythonPackageSpec") or {},)
        for item in task.get("command", []) + task.get("args", [])
    )
    if total_chars > MAX_TOTAL_ARGUMENT_CHARS:
        check.add("jobSpec.workerPoolSpecs", f"the combined length of all commands and arguments must be at most "
                                             f"{MAX_TOTAL_ARGUMENT_CHARS} characters, got {total_chars}")
    scheduling, strategy, timeout_seconds, max_wait = _parse_scheduling(check, spec.get("scheduling"))
    if strategy == "FLEX_START" and pool_requests:
        _check_flex_start(check, pool_requests, timeout_seconds)
    canonical_spec: dict[str, Any] = {"workerPoolSpecs": canonical_pools, "scheduling": scheduling}
    for key in sorted(_JOB_SPEC_STRINGS):
        text = check.string(spec.get(key), f"jobSpec.{key}", max_length=1024)
        if text:
            canonical_spec[key] = text
    if canonical_spec.get("persistentResourceId") and not _RESOURCE_ID.match(canonical_spec["persistentResourceId"]):
        check.add("jobSpec.persistentResourceId", "must match ^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
    for key in sorted(_JOB_SPEC_BOOLS):
        flag = check.boolean(spec.get(key), f"jobSpec.{key}")
        if flag is not None:
            canonical_spec[key] = flag
    output = spec.get("baseOutputDirectory")
    if output is not None:
        if isinstance(output, str):
            check.add("jobSpec.baseOutputDirectory", "must be an object {\"outputUriPrefix\": \"...\"}, not a string")
        else:
            out = check.mapping(output, "jobSpec.baseOutputDirectory", {"outputUriPrefix"})
            prefix = check.string((out or {}).get("outputUriPrefix"), "jobSpec.baseOutputDirectory.outputUriPrefix",
                                  required=True, max_length=1024)
            problem = output_uri_problem(prefix) if prefix else None
            if problem:
                check.add("jobSpec.baseOutputDirectory.outputUriPrefix", problem)
            elif prefix:
                canonical_spec["baseOutputDirectory"] = {"outputUriPrefix": prefix if prefix.endswith("/") else prefix + "/"}
    for key in ("reservedIpRanges", "models"):
        values = check.string_list(spec.get(key), f"jobSpec.{key}")
        if values:
            canonical_spec[key] = values
    if check.violations:
        raise SpecError(check.violations)
    canonical = {"displayName": display_name, "jobSpec": canonical_spec, "labels": labels}
    if job.get("encryptionSpec"):
        canonical["encryptionSpec"] = job["encryptionSpec"]
    return ParsedCustomJob(
        document=canonical,
        pools=tuple(pool_requests),
        strategy=strategy,
        timeout_seconds=timeout_seconds,
        max_wait_seconds=max_wait if strategy == "FLEX_START" else None,
    )


def document_pools(document: dict[str, Any]) -> tuple[PoolRequest, ...]:
    """The non-empty worker pools of a canonical CustomJob document, as parse_custom_job stored it."""
    pools = []
    for index, pool in enumerate(document["jobSpec"]["workerPoolSpecs"]):
        if not pool:
            continue
        machine = pool["machineSpec"]
        shape = ReplicaShape(machine["machineType"], machine.get("acceleratorType", NO_ACCELERATOR),
                             machine.get("acceleratorCount", 0))
        pools.append(PoolRequest(index, pool["replicaCount"], shape))
    return tuple(pools)


def render_job_spec(job_spec: dict[str, Any]) -> dict[str, Any]:
    """Canonical jobSpec -> wire form: int64 replicaCount as a string, as the v1 API emits it."""
    pools = []
    for pool in job_spec.get("workerPoolSpecs", []):
        if pool:
            pool = {**pool, "replicaCount": str(pool["replicaCount"])}
        pools.append(pool)
    return {**job_spec, "workerPoolSpecs": pools}
