"""The Notices page: one's settings (a form) and one's latest notices with their deliveries."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from workbench.core.errors import RequestError
from workbench.notices import services
from workbench.notices.api import settings_json
from workbench.notices.models import KINDS, Notice


@require_http_methods(["GET", "POST"])
def notices_page(request):
    errors: dict[str, str] = {}
    if request.method == "POST":
        try:
            services.settings_update(by=request.user, data=_posted(request.POST))
        except RequestError as error:
            errors = {field or "form": message for field, message in error.errors}
        else:
            messages.success(request, "Your notice settings were saved.")
            return redirect("notices")
    context = {
        "chosen": settings_json(services.settings_for(request.user)),
        "kinds": KINDS.items(),
        "errors": errors,
        "notices": Notice.objects.filter(user=request.user).prefetch_related("deliveries")[:50],
    }
    return render(request, "notices/notices.html", context, status=400 if errors else 200)


def _posted(post) -> dict:
    data = {
        "kinds": [kind for kind in post.getlist("kinds") if kind],
        "email_enabled": post.get("email_enabled") == "on",
        "email": post.get("email", "").strip(),
        "webhook_url": post.get("webhook_url", "").strip(),
        "apprise_url": post.get("apprise_url", "").strip(),
    }
    if post.get("webhook_secret"):  # blank keeps the one set; "Remove the secret" clears it
        data["webhook_secret"] = post["webhook_secret"]
    if post.get("clear_secret") == "on":
        data["webhook_secret"] = ""
    for name in ("stall_minutes", "idle_minutes"):
        minutes = post.get(name, "").strip()
        if minutes:
            data[name] = int(minutes) if minutes.isdigit() else minutes
    return data
