from django.urls import path

from workbench.runs.web import api, pretrained_api

urlpatterns = [
    path("runs/", api.run_list, name="api-runs"),
    path("runs/<int:pk>/", api.run_detail, name="api-run"),
    path("runs/<int:pk>/abort/", api.run_abort, name="api-run-abort"),
    path("runs/<int:pk>/pause/", api.run_pause, name="api-run-pause"),
    path("runs/<int:pk>/resume/", api.run_resume, name="api-run-resume"),
    path("sweeps/", api.sweep_create, name="api-sweeps"),
    path("queue/", api.queue, name="api-queue"),
    path("gpus/", api.gpus, name="api-gpus"),
    path("pretrained/", pretrained_api.pretrained_list, name="api-pretrained"),
    path("pretrained/<int:pk>/", pretrained_api.pretrained_detail, name="api-pretrained-detail"),
]
