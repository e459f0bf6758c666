"""The sign-in forms: Django's web and admin ones, throttled per account and client address (iam.throttle)."""

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm

from trainhub.iam.throttle import (
    blocked_message,
    client_address,
    login_attempt_start,
    login_succeeded,
)


class ThrottledSignIn:
    """Starts an attempt with iam.throttle before an authentication form checks the password, and
    reports a success."""

    def clean(self):
        who = {"username": self.cleaned_data.get("username") or "", "address": client_address(self.request)}
        wait = login_attempt_start(**who)  # counts as a failure unless it succeeds
        if wait:
            raise forms.ValidationError(blocked_message(wait), code="throttled")
        cleaned = super().clean()
        login_succeeded(**who)
        return cleaned


class ThrottledAuthenticationForm(ThrottledSignIn, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledSignIn, AdminAuthenticationForm):
    """/admin/login/ checks passwords too (a staff account's): without this it was a third, unthrottled login."""
