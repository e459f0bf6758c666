"""The web sign-in form: Django's, throttled per account and client address (iam.throttle)."""

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from trainhub.iam.throttle import (
    blocked_message,
    client_address,
    login_blocked_seconds,
    login_failed,
    login_succeeded,
)


class ThrottledAuthenticationForm(AuthenticationForm):
    def clean(self):
        who = {"username": self.cleaned_data.get("username") or "", "address": client_address(self.request)}
        wait = login_blocked_seconds(**who)
        if wait:
            raise forms.ValidationError(blocked_message(wait), code="throttled")
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            login_failed(**who)
            raise
        login_succeeded(**who)
        return cleaned
