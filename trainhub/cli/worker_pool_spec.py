"""Turn `trainhub ai custom-jobs create` flags and `--config` YAML into a CustomJob body.

Mirrors `gcloud ai custom-jobs create`: `--worker-pool-spec` takes gcloud's KEY=VALUE lists,
`--config` holds a CustomJobSpec, and flags override what the file says. Only the shape of each
flag is checked here; the server remains the judge of the job itself (machine catalog, pool
counts, scheduling rules). Pure Python: no HTTP, no Django.
"""

from __future__ import annotations

import copy
import math
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    import yaml

WORKER_POOL_SPEC_KEYS = (
    "machine-type",
    "replica-count",
    "accelerator-type",
    "accelerator-count",
    "container-image-uri",
    "executor-image-uri",
    "python-module",
)


class SpecError(ValueError):
    """A flag value that cannot describe a job; the CLI reports it as a usage error."""


class ConfigFileError(Exception):
    """A `--config` file that cannot be read or is not a CustomJobSpec mapping."""


def split_list(text: str) -> list[str]:
    """Split a gcloud list flag on commas; `^D^a,bDc` uses the delimiter D instead.

    The alternative delimiter (see `gcloud topic escaping`) lets values such as `--lr=0.1,0.2`
    pass through `--args` intact. An empty string is an empty list.
    """
    delimiter = ","
    if text.startswith("^"):
        end = text.find("^", 1)
        if end > 1:
            delimiter, text = text[1:end], text[end + 1:]
    return text.split(delimiter) if text else []


def parse_key_values(text: str) -> dict[str, str]:
    """Parse `k=v,k2=v2` (gcloud ArgDict syntax), as `--labels` and `--worker-pool-spec` take."""
    result: dict[str, str] = {}
    for item in split_list(text):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"expected KEY=VALUE, got [{item}]")
        if key in result:
            raise SpecError(f"key [{key}] is given more than once")
        result[key] = value
    return result


def positive_int(spec: dict[str, str], key: str, default: int) -> int:
    """``spec[key]`` as a positive integer (``default`` when absent), as gcloud's flag parsers read it."""
    raw = spec.get(key)
    if raw is None:
        return default
    if not re.fullmatch(r"\s*\d+\s*", raw) or int(raw) < 1:
        raise SpecError(f"{key} must be a positive integer, got [{raw}]")
    return int(raw)


def _require_values(spec: dict[str, str]) -> None:
    for key, value in spec.items():
        if not value.strip():
            raise SpecError(f"{key} must not be empty")


def parse_worker_pool_spec(text: str) -> dict[str, Any]:
    """Parse one `--worker-pool-spec` value into a WorkerPoolSpec wire mapping.

    An empty string is a skipped pool and yields `{}` (only allowed after the first pool; the
    caller checks that, as it sees every pool).
    """
    if not text.strip():
        return {}
    spec = parse_key_values(text)
    unknown = sorted(set(spec) - set(WORKER_POOL_SPEC_KEYS))
    if unknown:
        raise SpecError(
            f"unknown key [{unknown[0]}]; allowed keys: {', '.join(WORKER_POOL_SPEC_KEYS)}"
        )
    _require_values(spec)
    if "machine-type" not in spec:
        raise SpecError("machine-type is required")
    if "accelerator-count" in spec and "accelerator-type" not in spec:
        raise SpecError("accelerator-count requires accelerator-type")
    container_image = spec.get("container-image-uri")
    executor_image = spec.get("executor-image-uri")
    if (container_image is None) == (executor_image is None):
        raise SpecError("exactly one of container-image-uri or executor-image-uri is required")
    if container_image is not None and "python-module" in spec:
        raise SpecError("python-module is only allowed with executor-image-uri, not with container-image-uri")
    if executor_image is not None and "python-module" not in spec:
        raise SpecError("python-module is required with executor-image-uri")

    machine_spec: dict[str, Any] = {"machineType": spec["machine-type"]}
    if "accelerator-type" in spec:
        machine_spec["acceleratorType"] = spec["accelerator-type"]
        machine_spec["acceleratorCount"] = positive_int(spec, "accelerator-count", 1)
    pool: dict[str, Any] = {"machineSpec": machine_spec, "replicaCount": positive_int(spec, "replica-count", 1)}
    if container_image is not None:
        pool["containerSpec"] = {"imageUri": container_image}
    else:
        pool["pythonPackageSpec"] = {"executorImageUri": executor_image, "pythonModule": spec["python-module"]}
    return pool


def load_job_spec_config(path: str | Path) -> dict[str, Any]:
    """Read a `--config` YAML file holding a CustomJobSpec; an empty file is an empty spec."""
    return load_config_mapping(path, "a CustomJobSpec mapping (workerPoolSpecs, scheduling, ...)")


def load_config_mapping(path: str | Path, expected: str) -> dict[str, Any]:
    """Read a `--config` YAML (or JSON) file holding one mapping; an empty file is an empty one.

    `expected` names the mapping in the error for any other document.
    """
    try:
        with open(path, encoding="utf-8") as handle:  # not pathlib: its imports would cost start-up time
            text = handle.read()
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file [{path}]: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"config file [{path}] is not UTF-8 text: {exc.reason}") from exc
    import yaml  # here, not at the top: only --config reads YAML, and importing it costs every command start-up time

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"config file [{path}] is not valid YAML: {_yaml_problem(exc)}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigFileError(f"config file [{path}] must hold {expected}, got a {type(document).__name__}")
    problem = _not_json(document, "")
    if problem:
        raise ConfigFileError(f"config file [{path}]: {problem}")
    return document


def _not_json(value: Any, where: str) -> str:
    """What in a YAML document JSON cannot carry (dates, binary, sets, NaN, non-string keys), or ""."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"key [{key}] under [{where or '/'}] must be a string; quote it"
            problem = _not_json(item, f"{where}.{key}" if where else key)
            if problem:
                return problem
        return ""
    if isinstance(value, list):
        return next((p for i, item in enumerate(value) if (p := _not_json(item, f"{where}[{i}]"))), "")
    if isinstance(value, float) and not math.isfinite(value):
        return f"[{where}] is {value}, which a request cannot carry; write a number"
    if value is None or isinstance(value, (str, int, float)):
        return ""
    return f"[{where}] is a YAML {type(value).__name__}, which a request cannot carry; quote it to send it as text"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def _snake(camel: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), camel)


def _key(mapping: dict[str, Any], camel: str) -> str:
    """The key under which `mapping` holds field `camel`: the server accepts snake_case too."""
    snake = _snake(camel)
    return snake if camel not in mapping and snake in mapping else camel


def _set(mapping: dict[str, Any], camel: str, value: Any) -> None:
    """Set field `camel`, dropping a snake_case spelling so the field is not sent twice."""
    mapping.pop(_snake(camel), None)
    mapping[camel] = value


def _pools(job_spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pools = job_spec.get(_key(job_spec, "workerPoolSpecs"))
    for pool in pools if isinstance(pools, list) else [pools]:
        if isinstance(pool, dict):
            yield pool


def _pool_parts(job_spec: dict[str, Any], camel: str) -> Iterator[dict[str, Any]]:
    for pool in _pools(job_spec):
        part = pool.get(_key(pool, camel))
        if isinstance(part, dict):
            yield part


def build_custom_job(
    *,
    display_name: str,
    config: dict[str, Any] | None = None,
    worker_pool_specs: list[dict[str, Any]] | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    python_package_uris: list[str] | None = None,
    labels: dict[str, str] | None = None,
    persistent_resource_id: str | None = None,
) -> dict[str, Any]:
    """Assemble the CustomJob request body; flags override the `--config` CustomJobSpec.

    `command` and `args` replace those of every pool's containerSpec (`args` also those of
    pythonPackageSpec) and `python_package_uris` replaces every pythonPackageSpec's packageUris,
    as gcloud does. Raises SpecError when the flags describe no worker pool at all.
    """
    job_spec = copy.deepcopy(config) if config else {}
    if worker_pool_specs:
        if not worker_pool_specs[0]:
            raise SpecError("the first --worker-pool-spec must not be empty")
        _set(job_spec, "workerPoolSpecs", copy.deepcopy(worker_pool_specs))
        if python_package_uris is None and any("pythonPackageSpec" in pool for pool in worker_pool_specs):
            raise SpecError("--python-package-uris is required when a --worker-pool-spec uses executor-image-uri")
    if not job_spec.get(_key(job_spec, "workerPoolSpecs")):
        raise SpecError("either --worker-pool-spec or a --config file with workerPoolSpecs is required")

    for container in _pool_parts(job_spec, "containerSpec"):
        if command is not None:
            _set(container, "command", list(command))
        if args is not None:
            _set(container, "args", list(args))
    for package in _pool_parts(job_spec, "pythonPackageSpec"):
        if python_package_uris is not None:
            _set(package, "packageUris", list(python_package_uris))
        if args is not None:
            _set(package, "args", list(args))
    if persistent_resource_id:
        _set(job_spec, "persistentResourceId", persistent_resource_id)

    body: dict[str, Any] = {"displayName": display_name, "jobSpec": job_spec}
    if labels:
        body["labels"] = dict(labels)
    return body
