from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, UserCreationForm

from workbench import throttle


def refuse_if_locked(*, username: str, request) -> None:
    """The "too many attempts" message for a locked account or address, as a form error."""
    if throttle.login_locked(username=username, ip=throttle.client_ip(request)):
        raise forms.ValidationError(throttle.locked_message(), code="throttled")


class ThrottleMessageMixin:
    """Says "too many attempts" on a locked account or address instead of "wrong password".

    Only the message: counting and refusing happen in throttle.ThrottledModelBackend, which every
    password check passes through, so a form without this mixin is refused all the same.
    """

    def clean(self):
        refuse_if_locked(username=self.cleaned_data.get("username") or "", request=self.request)
        return super().clean()


class ThrottledAuthenticationForm(ThrottleMessageMixin, AuthenticationForm):
    """The workbench's login page form."""


class ThrottledAdminAuthenticationForm(ThrottleMessageMixin, AdminAuthenticationForm):
    """The admin site's login form (staff accounts only), with the same throttle message."""


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Changing a password asks for the current one: that check goes through authenticate(), so
    guessing it here counts in the same throttle as every sign-in (check_password would not)."""

    def __init__(self, user, *args, request=None, **kwargs):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self):
        old_password = self.cleaned_data["old_password"]
        username = self.user.get_username()
        refuse_if_locked(username=username, request=self.request)
        user = authenticate(self.request, username=username, password=old_password)
        if user is None or user.pk != self.user.pk:
            raise forms.ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old_password


class FirstAdminForm(UserCreationForm):
    """Creates the first account, a superuser, on a workbench that has none."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")
