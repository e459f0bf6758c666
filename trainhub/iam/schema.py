"""Tell drf-spectacular how API clients authenticate: `Authorization: Bearer <token>`."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "trainhub.iam.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A user's API token (browser: Account > API token; CLI: `trainhub auth login`)."}
