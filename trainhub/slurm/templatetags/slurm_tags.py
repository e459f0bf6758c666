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
