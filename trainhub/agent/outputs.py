"""What a primary replica leaves on its node when it exits: the metrics it reported through the
cloudml-hypertune file and the files it wrote under AIP_MODEL_DIR. The agent reads both and
reports them, since the control plane does not share the node's disk.

cloudml-hypertune (GoogleCloudPlatform/cloudml-hypertune, hypertune/hypertune.py) rewrites its
file on every report with the last 100 reports, one ``json.dumps(..., sort_keys=True)`` per line:
``{"global_step": "1000", "<metric tag>": "0.987", "timestamp": 1525851440.12, "trial": "1"}`` -
the tag's value and global_step are strings of numbers, timestamp is epoch seconds.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

_RESERVED_KEYS = frozenset({"global_step", "timestamp", "trial"})
MAX_METRIC_FILE_BYTES = 1 << 20
MAX_MODEL_FILES = 1000


def parse_hypertune_lines(text: str) -> list[dict]:
    """Reports as ``{"globalStep": int, "timestamp": float, "metrics": {tag: float}}``, in file order.

    A line that is not a JSON object, or a value that is not a finite number, is skipped: a
    half-written last line must not hide the reports before it.
    """
    reports = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            step = int(entry.get("global_step", 0) or 0)
            timestamp = float(entry.get("timestamp", 0) or 0)
        except (ValueError, TypeError, AttributeError):
            continue
        metrics = {}
        for key, raw in entry.items():
            if key in _RESERVED_KEYS:
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                metrics[str(key)] = value
        if metrics:
            reports.append({"globalStep": step, "timestamp": timestamp, "metrics": metrics})
    return reports


def read_hypertune_file(path: Path) -> list[dict]:
    """The reports in a replica's metric file; none when the replica never reported."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_METRIC_FILE_BYTES)
    except OSError:
        return []
    return parse_hypertune_lines(data.decode("utf-8", "replace"))


def list_model_files(directory: Path) -> list[dict]:
    """Regular files under ``directory`` as ``{"path": relative posix path, "sizeBytes": n}``, sorted."""
    if not directory.is_dir():
        return []
    files = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            files.append({"path": path.relative_to(directory).as_posix(), "sizeBytes": path.stat().st_size})
            if len(files) >= MAX_MODEL_FILES:
                break
    return files


class OutputPathRefused(ValueError):
    """An AIP_* output directory outside the roots this node writes outputs under."""


OUTPUT_VARIABLES = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")


def confined(path: str, roots: tuple[Path, ...]) -> Path:
    """``path`` resolved (symlinks and ``..`` included), if it lies under one of ``roots``."""
    resolved = Path(path).resolve()
    for root in roots:
        if resolved.is_relative_to(root.resolve()):
            return resolved
    allowed = ", ".join(str(root) for root in roots)
    raise OutputPathRefused(f"output directory {path} is outside the directories this node writes outputs to "
                            f"({allowed}); use gs://BUCKET/... or a file:// path under one of them")


def prepare_outputs(env: dict[str, str], *, roots: tuple[Path, ...], owner: dict | None = None) -> dict | None:
    """Create the primary's AIP_* output directories (a Cloud Storage mount takes writes under any
    path) after checking each lies under ``roots``, owned by ``owner`` ({uid, gid}) when the
    replica runs as its project's user; return where its metric file and model directory are, for
    ``collect_outputs`` when it exits."""
    for name in OUTPUT_VARIABLES:
        if env.get(name, "").startswith("/"):
            directory = confined(env[name], roots)
            directory.mkdir(parents=True, exist_ok=True)
            if owner:
                os.chown(directory, owner["uid"], owner["gid"])
    model_dir = env["AIP_MODEL_DIR"] if env.get("AIP_MODEL_DIR", "").startswith("/") else None
    metric_file = env.get("CLOUD_ML_HP_METRIC_FILE")
    if metric_file is None and model_dir is None:
        return None
    return {"metricFile": metric_file, "modelDir": model_dir}


def collect_outputs(outputs: dict) -> dict:
    """The outputs report of an exited primary: its hypertune reports and model file listing."""
    metric_file, model_dir = outputs.get("metricFile"), outputs.get("modelDir")
    artifacts = {}
    if model_dir:
        artifacts = {"path": model_dir, "files": list_model_files(Path(model_dir))}
    return {"hpMetrics": read_hypertune_file(Path(metric_file)) if metric_file else [], "modelArtifacts": artifacts}
