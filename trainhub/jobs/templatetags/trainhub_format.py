"""Formatting for people, shared by every page: GPU type names and compact durations."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone

from trainhub.catalog.machines import accelerator_label

register = template.Library()


@register.filter
def gpu_label(accelerator_type: str) -> str:
    return accelerator_label(accelerator_type)


def compact_duration(seconds: float) -> str:
    """12s, 4m 05s, 3h 07m, 2d 04h: two units at most, never a negative duration."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


@register.simple_tag
def elapsed(start: dt.datetime | None, end: dt.datetime | None = None) -> str:
    """Time from ``start`` to ``end`` (now while ``end`` is unset); "" without a start."""
    if start is None:
        return ""
    return compact_duration(((end or timezone.now()) - start).total_seconds())
