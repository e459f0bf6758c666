"""Vertex locations (``us-central1``, ``europe-west4``): the one rule every resource's ``{location}`` follows."""

from __future__ import annotations

import re

from trainhub.common.errors import FieldViolation, invalid_argument

#: Every model stores its location in a column of this length.
LOCATION_MAX_LENGTH = 32
LOCATION_PATTERN = r"^[a-z][a-z0-9-]*[a-z0-9]$"
LOCATION_HINT = "Lowercase letters, digits and hyphens, e.g. us-central1."
_LOCATION = re.compile(LOCATION_PATTERN)


def location_check(location: str) -> None:
    """400 INVALID_ARGUMENT naming ``location`` unless it could be a Vertex location name."""
    if len(location) > LOCATION_MAX_LENGTH or not _LOCATION.match(location):
        shown = location if len(location) <= 64 else location[:64] + "..."
        raise invalid_argument([FieldViolation(
            "location", f"{shown!r} is not a location: at most {LOCATION_MAX_LENGTH} characters. {LOCATION_HINT}")])
