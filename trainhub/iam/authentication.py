from django.utils import timezone
from rest_framework import authentication, exceptions

from trainhub.iam.models import ApiToken


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
        token = ApiToken.objects.select_related("user").filter(key=key).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid bearer token.")
        now = timezone.now()
        if token.last_used is None or (now - token.last_used).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="trainhub"'
