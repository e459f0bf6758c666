from django.utils import timezone
from rest_framework import authentication, exceptions

from trainhub.iam.selectors import api_token_get
from trainhub.iam.services import api_token_used


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>`, which Google's client libraries and our CLI send."""

    keyword = "bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").strip()
        if not header:
            return None
        scheme, _, key = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        key = key.strip()
        if not key:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        # The project the path names (.../projects/{project}/...) is read with the token.
        token = api_token_get(key=key, project_id=(request.parser_context or {}).get("kwargs", {}).get("project", ""))
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid bearer token.")
        api_token_used(token=token, now=timezone.now())
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="trainhub"'
