from django.urls import path

from workbench.labelchecks import views

urlpatterns = [
    path("", views.label_check_list, name="label-check-list"),
    path("new/", views.label_check_new, name="label-check-new"),
    path("<int:pk>/", views.label_check_detail, name="label-check-detail"),
    path("<int:pk>/accept/", views.label_check_accept, name="label-check-accept"),
    path("<int:pk>/abort/", views.label_check_action, {"action": "abort"}, name="label-check-abort"),
    path("<int:pk>/pause/", views.label_check_action, {"action": "pause"}, name="label-check-pause"),
    path("<int:pk>/resume/", views.label_check_action, {"action": "resume"}, name="label-check-resume"),
]
