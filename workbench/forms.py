from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from workbench import throttle


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing attempts once an account or an address failed too often."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        ip = throttle.client_ip(self.request)
        if throttle.login_locked(username=username, ip=ip):
            raise forms.ValidationError(throttle.locked_message(), code="throttled")
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            throttle.login_failed(username=username, ip=ip)
            raise
        throttle.login_succeeded(username=username)
        return cleaned


class FirstAdminForm(UserCreationForm):
    """Creates the first account, a superuser, on a workbench that has none."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")
