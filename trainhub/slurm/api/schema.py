"""What /api/schema/ says of the Slurm endpoints: JSON objects in, JSON objects out, and Google's
error body for every refusal (409 when a cluster id is taken)."""

from trainhub.common.openapi import PROJECT_ERRORS, responses

BODY = {"type": "object", "description": "A trainhub Slurm resource or report in JSON; see the README's Slurm table."}
ERRORS = PROJECT_ERRORS + (409,)

__all__ = ["BODY", "ERRORS", "responses"]
