from django.urls import path

from workbench.labelchecks import api

urlpatterns = [
    path("label-checks/", api.label_check_list, name="api-label-checks"),
    path("label-checks/<int:pk>/", api.label_check_detail, name="api-label-check"),
    path("label-checks/<int:pk>/abort/", api.label_check_abort, name="api-label-check-abort"),
    path("label-checks/<int:pk>/pause/", api.label_check_pause, name="api-label-check-pause"),
    path("label-checks/<int:pk>/resume/", api.label_check_resume, name="api-label-check-resume"),
    path("label-checks/<int:pk>/accept/", api.label_check_accept, name="api-label-check-accept"),
]
