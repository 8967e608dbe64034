from django.urls import include, path

from workbench.runs.web import views

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("", include("workbench.runs.web.live_urls")),
    path("queue/", views.queue, name="run-queue"),
    path("<int:pk>/priority/", views.run_priority, name="run-priority"),
    path("", include("workbench.runs.web.wizard_urls")),
]
