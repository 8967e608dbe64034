from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

from datasets.selectors import datasets_visible_to
from workbench.directory.oidc import DiscoveredRequestView
from workbench.forms import FirstAdminForm, ThrottledAuthenticationForm, ThrottledPasswordChangeForm
from workbench.health import health_report
from workbench.runs.scheduler import queue_for
from workbench.runs.selectors import runs_visible_to, slurm_partition_for
from workbench.workers.inventory import hosts_for_display

# The dashboard shows the latest few of each; the list pages have them all.
HOME_ROWS = 10


def home(request):
    """The dashboard: the latest datasets and runs, and what holds the devices now."""
    queue = queue_for(request.user)
    datasets, runs = datasets_visible_to(request.user), runs_visible_to(request.user)
    context = {
        "datasets": datasets[:HOME_ROWS],
        "dataset_count": datasets.count(),
        "runs": runs[:HOME_ROWS],
        "run_count": runs.count(),
        "running": queue["running"],
        "waiting_count": len(queue["waiting"]),
    }
    return render(request, "workbench/home.html", context)


def gpus(request):
    context = {"hosts": hosts_for_display(request.user), "slurm": slurm_partition_for(request.user)}
    return render(request, "workbench/gpus.html", context)


@login_not_required
@never_cache
@require_GET
def healthz(request):
    # Versions, engines, host names and devices are for staff; anyone may see whether parts are up.
    report = health_report(details=request.user.is_staff)
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)


class WorkbenchLoginView(LoginView):
    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["needs_first_admin"] = not get_user_model().objects.exists()
        context["oidc_name"] = settings.OIDC_PROVIDER_NAME if settings.OIDC_ISSUER else None
        context["signin_failed"] = self.request.GET.get("signin") == "failed"
        return context


@login_not_required
@never_cache
def first_admin(request):
    """The first-run page: creates the first (admin) account, and only while none exists."""
    user_model = get_user_model()
    if user_model.objects.exists():
        raise Http404("The workbench already has accounts")
    form = FirstAdminForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            # Two browsers racing on a fresh install: only the first one gets an admin.
            if user_model.objects.select_for_update().exists():
                raise Http404("The workbench already has accounts")
            user = form.save(commit=False)
            user.is_staff = True
            user.is_superuser = True
            user.save()
        login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
        return redirect("home")
    return render(request, "workbench/first_admin.html", {"form": form})


class PasswordChangeView(auth_views.PasswordChangeView):
    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}


@login_not_required
def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: the refusal in the workbench's layout, with the user's own menu, and a
    fresh token for the page they reload."""
    return render(request, "403_csrf.html", {"reason": reason}, status=403)


def _oidc_only(view):
    """The provider's two doors answer 404 while no provider is set (the login page shows none)."""

    @login_not_required
    def door(request, *args, **kwargs):
        if not settings.OIDC_ISSUER:
            raise Http404("no OpenID provider is set up on this workbench")
        return view(request, *args, **kwargs)

    return door


oidc_start = _oidc_only(DiscoveredRequestView.as_view())
oidc_callback = _oidc_only(OIDCAuthenticationCallbackView.as_view())
