"""A service's ApiError shown on a page of forms: each field violation on the form field its path
names, and listed at the top of the page by that field's label ("Worker pool 1 · Container image
URI"), never by its JSON path (jobSpec.workerPoolSpecs[1].containerSpec.imageUri)."""

from __future__ import annotations

from typing import Any, Callable

from django import forms
from django.forms.utils import pretty_name

from trainhub.common.errors import ApiError, FieldViolation

#: A violation's path -> the form and field it names (field None: the form's top).
FieldFor = Callable[[str], tuple[forms.Form, str | None]]


def field_name_shown(form: forms.Form, field: str | None, path: str) -> str:
    """The label a user reads for ``field`` of ``form``, after the form's ``section`` (a pool's
    name) when it has one; the path itself only when it names no field or section."""
    label = str(form.fields[field].label or pretty_name(field)) if field in form.fields else ""
    return " · ".join(part for part in (getattr(form, "section", ""), label) if part) or path


def show_service_error(form_set: Any, error: ApiError, field_for: FieldFor) -> None:
    """Put ``error``'s violations on ``form_set``'s fields; ``form_set.violations`` are then named
    by field label, and ``form_set.service_message`` holds a message with no violation."""
    form_set.violations = []
    form_set.service_message = "" if error.violations else error.message
    for violation in error.violations:
        form, field = field_for(violation.field)
        form.add_error(field if field in form.fields else None, violation.description)
        form_set.violations.append(FieldViolation(field_name_shown(form, field, violation.field),
                                                  violation.description))
