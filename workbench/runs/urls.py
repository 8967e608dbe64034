from django.urls import path

from workbench.runs import views

urlpatterns = [
    path("", views.run_list, name="run-list"),
]
