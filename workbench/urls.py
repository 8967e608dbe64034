from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, reverse_lazy
from django.views.generic import RedirectView

from workbench import api, views
from workbench.forms import ThrottledAdminAuthenticationForm

# The throttle itself is in the authentication backend; this form only gives the admin login
# the same "too many attempts" message as the login page.
admin.site.login_form = ThrottledAdminAuthenticationForm
handler404 = "workbench.api.not_found"
handler500 = "workbench.api.internal_error"

api_patterns = [
    path("me/", api.me, name="api-me"),
    path("auth/token/", api.ThrottledObtainAuthToken.as_view(), name="api-token"),
    path("workers/", api.worker_list, name="api-workers"),
    path("tasks/probe/", api.probe, name="api-probe"),
    path("tasks/<uuid:task_id>/", api.probe_result, name="api-task"),
]

urlpatterns = [
    path("", views.home, name="home"),
    # The lab's OpenID provider (workbench/directory/oidc.py): 404 while WORKBENCH_OIDC_ISSUER is unset.
    path("oidc/authenticate/", views.oidc_start, name="oidc_authentication_init"),
    path("oidc/callback/", views.oidc_callback, name="oidc_authentication_callback"),
    path("gpus/", views.gpus, name="gpus"),
    path("healthz", views.healthz, name="healthz"),
    path("setup/", views.first_admin, name="first-admin"),
    path("accounts/login/", views.WorkbenchLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    # The admin's own form checks the current password with check_password(), outside the
    # throttle: the admin's link leads to the workbench's throttled form instead.
    path("admin/password_change/", RedirectView.as_view(url=reverse_lazy("password_change"))),
    path("admin/", admin.site.urls),
    path("runs/", include("workbench.runs.web.urls")),
    path("weights/", include("workbench.weights.urls")),
    path("benchmarks/", include("workbench.benchmarks.urls")),
    path("searches/", include("workbench.searches.urls")),
    path("label-checks/", include("workbench.labelchecks.urls")),
    path("datasets/", include("datasets.urls")),
    path("api/datasets/", include("datasets.api_urls")),
    path("api/", include(api_patterns)),
    path("api/", include("workbench.runs.web.api_urls")),
    path("api/", include("workbench.benchmarks.api_urls")),
    path("api/", include("workbench.searches.api_urls")),
    path("api/", include("workbench.labelchecks.api_urls")),
    path("api/", include("workbench.projects.api_urls")),
    path("projects/", include("workbench.projects.urls")),
    path("api/", include("workbench.audit.api_urls")),
    path("audit/", include("workbench.audit.urls")),
    path("api/", include("workbench.notices.api_urls")),
    path("notices/", include("workbench.notices.urls")),
    path("", include("workbench.inference.urls")),
    path("api/", include("workbench.inference.api_urls")),
]
