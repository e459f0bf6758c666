"""OpenAPI pieces every API shares: Google's error body, wire types, and response tables.

Views describe their bodies with plain JSON-schema dicts (drf-spectacular uses a dict as the
schema verbatim), so /api/schema/ tells clients - and schemathesis - what each endpoint really
takes and answers.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

#: google.rpc.Status as Google REST APIs send it: {"error": {code, message, status, details}}.
ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message", "status"],
        "properties": {
            "code": {"type": "integer", "description": "The HTTP status code."},
            "message": {"type": "string"},
            "status": {"type": "string", "description": "google.rpc.Code name, e.g. INVALID_ARGUMENT."},
            "details": {"type": "array", "items": {"type": "object"},
                        "description": "google.rpc.BadRequest with fieldViolations for invalid arguments."},
        },
    }},
}

#: What every authenticated endpoint may answer besides its success.
AUTHENTICATED_ERRORS = (401,)
#: ... and every endpoint under /v1/projects/{project}: no such project for you, or no permission.
PROJECT_ERRORS = (400, 401, 403, 404)

TIMESTAMP: Schema = {"type": "string", "format": "date-time", "nullable": True}
DURATION: Schema = {"type": "string", "pattern": r"^\d+(\.\d{1,9})?s$", "example": "1800s"}


def int64(**bounds: int) -> Schema:
    """An int64 field: a JSON number, or a decimal string as Google's clients send it."""
    return {"anyOf": [{"type": "integer", **bounds}, {"type": "string", "pattern": r"^-?\d{1,19}$"}]}


def enum(names: list[str] | tuple[str, ...]) -> Schema:
    """An enum by name, or by number (enum-encoding=int)."""
    return {"anyOf": [{"type": "string", "enum": list(names)}, {"type": "integer", "minimum": 0}]}


def obj(properties: dict[str, Schema], *, required: tuple[str, ...] = (), extra: bool = False) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        schema["required"] = list(required)
    return schema


def responses(ok: Schema | None, errors: tuple[int, ...]) -> dict[int, Schema | None]:
    """``extend_schema(responses=...)``: 200 with ``ok`` and each error status with Google's body."""
    return {200: ok, **{status: ERROR for status in errors}}
