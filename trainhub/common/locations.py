"""Vertex locations (``us-central1``, ``europe-west4``): the one rule every resource's ``{location}`` follows."""

from __future__ import annotations

import re

from django.conf import settings

from trainhub.common.errors import FieldViolation, invalid_argument

#: Every model stores its location in a column of this length.
LOCATION_MAX_LENGTH = 32
LOCATION_PATTERN = r"^[a-z][a-z0-9-]*[a-z0-9]$"
LOCATION_HINT = "Lowercase letters, digits and hyphens, e.g. us-central1."
_LOCATION = re.compile(LOCATION_PATTERN)


def known_locations() -> set[str]:
    """The locations resources may be created in: the catalog's (settings.TRAINHUB_LOCATIONS) and
    every location that has a node pool."""
    from trainhub.inventory.models import NodePool

    return set(settings.TRAINHUB_LOCATIONS) | set(NodePool.objects.order_by().values_list("location", flat=True).distinct())


def location_check(location: str) -> None:
    """400 INVALID_ARGUMENT naming ``location`` unless it is a Vertex location name this
    installation knows (known_locations): a job under a made-up location would otherwise bypass
    that location's quota."""
    if len(location) > LOCATION_MAX_LENGTH or not _LOCATION.match(location):
        shown = location if len(location) <= 64 else location[:64] + "..."
        raise invalid_argument([FieldViolation(
            "location", f"{shown!r} is not a location: at most {LOCATION_MAX_LENGTH} characters. {LOCATION_HINT}")])
    if location in settings.TRAINHUB_LOCATIONS:  # the catalog's: no query on the submission path
        return
    known = known_locations()
    if location not in known:
        raise invalid_argument([FieldViolation("location", f"Location {location} is not supported. Supported "
                                                           f"locations: {', '.join(sorted(known))}.")])
