"""The sign-in forms: Django's web and admin ones, throttled per account and client address (iam.throttle)."""

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm

from trainhub.iam.throttle import (
    blocked_message,
    client_address,
    login_blocked_seconds,
    login_failed,
    login_succeeded,
)


class ThrottledSignIn:
    """Asks iam.throttle before an authentication form checks the password, and reports the outcome."""

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


class ThrottledAuthenticationForm(ThrottledSignIn, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledSignIn, AdminAuthenticationForm):
    """/admin/login/ checks passwords too (a staff account's): without this it was a third, unthrottled login."""
