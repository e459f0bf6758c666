"""Template helpers of the Slurm pages."""

from django import template

register = template.Library()

_BADGE = {"PENDING": "pending", "RUNNING": "running", "COMPLETED": "succeeded", "FAILED": "failed",
          "TIMEOUT": "failed", "NODE_FAIL": "failed", "CANCELLED": "cancelled", "PREEMPTED": "cancelled",
          "REQUEUED": "cancelled", "UP": "node-up", "DOWN": "node-down", "DRAIN": "node-drain"}


@register.inclusion_tag("slurm/_badge.html")
def slurm_badge(state: str) -> dict:
    """A job or node state as a badge in the palette the CustomJob pages use."""
    return {"state": state, "kind": _BADGE.get(state, "queued")}


@register.filter
def setting_value(value: object) -> str:
    """A recorded setting the way slurm.conf and sacctmgr write it, never Python's dict text:
    None -> "unset", {"A": 1, "B": [x, y]} -> "A=1 B=x,y" (keys sorted: PostgreSQL's jsonb keeps no
    insertion order, so the same change reads the same on every database), a script -> its first
    line and size."""
    if value is None:
        return "unset"
    if isinstance(value, dict):
        return " ".join(f"{key}={_nested(item)}" for key, item in sorted(value.items())) or "(empty)"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_value(item) for item in value) or "(none)"
    text = str(value)
    lines = text.splitlines()
    return f"{lines[0]} … ({len(lines)} lines)" if len(lines) > 1 else text


def _nested(value: object) -> str:
    if isinstance(value, dict):
        return f"({setting_value(value)})"
    if isinstance(value, (list, tuple)):
        return ",".join(map(_nested, value))
    return setting_value(value)
