"""The project pages' forms: create a project (staff), add a member or change a role, share an
object, set a project's or a user's GPU-hour quota (staff). They clean what a browser sends into
what the services take; the rules themselves (a free slug, a known user, a role, a number of
GPU-hours) are the validators', checked again by the services, so a refusal reads the same words
as the API's and the commands'."""

from __future__ import annotations

import re

from django import forms

from workbench.core.errors import RequestError
from workbench.core.ownership import ROLES, VIEWER
from workbench.projects import validators
from workbench.projects.models import Quota


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=80)
    slug = forms.CharField(
        required=False, max_length=60, help_text="its name in addresses and commands; blank: made from the name"
    )
    description = forms.CharField(required=False, max_length=500, widget=forms.Textarea(attrs={"rows": 2}))
    admins = forms.CharField(
        required=False, label="Admins", help_text="usernames, separated by commas or spaces: they manage its members"
    )

    def clean_admins(self) -> list:
        users = []
        for username in re.split(r"[\s,]+", self.cleaned_data["admins"].strip()):
            if not username:
                continue
            try:
                users.append(validators.user_named(username))
            except RequestError as error:
                raise forms.ValidationError(f"{error.message}.") from None
        return users


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=[(role, role) for role in ROLES], initial=VIEWER)

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip()


class ShareForm(forms.Form):
    """What the Project select of a dataset's or a run's page posts: the object, the project
    (blank: none) and the page to go back to."""

    kind = forms.ChoiceField(choices=[(kind, kind) for kind in validators.SHAREABLE])
    id = forms.IntegerField(min_value=1)
    project = forms.SlugField(required=False, max_length=60)
    next = forms.CharField(required=False, max_length=500)

    def clean_project(self) -> str | None:
        return self.cleaned_data["project"] or None


class QuotaForm(forms.Form):
    """A quota's GPU-hours and period. The numbers are kept as typed: services.quota_set checks
    them (validators.clean_quota), so a refusal reads the words of the API and the command."""

    gpu_hours = forms.CharField(
        label="GPU-hours", max_length=30, widget=forms.NumberInput(attrs={"min": 0, "step": "any"})
    )
    period = forms.ChoiceField(choices=Quota.Period.choices, initial=Quota.Period.MONTH)
    window_days = forms.CharField(
        label="Window in days",
        required=False,
        max_length=10,
        initial=30,
        help_text="a rolling window's length, 1 to 366",
        widget=forms.NumberInput(attrs={"min": 1, "max": 366}),
    )

    @classmethod
    def of(cls, quota: Quota | None) -> QuotaForm:
        """The form filled with `quota`'s values (a blank one when there is none)."""
        if quota is None:
            return cls()
        return cls(initial={"gpu_hours": f"{quota.gpu_hours:g}", "period": quota.period,
                            "window_days": quota.window_days})  # fmt: skip


class UserQuotaForm(QuotaForm):
    """The quotas page's form: one user's quota."""

    username = forms.CharField(max_length=150)
    field_order = ["username", "gpu_hours", "period", "window_days"]

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip()
