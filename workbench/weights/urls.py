from django.urls import path

from workbench.weights import views

urlpatterns = [
    path("", views.weights_page, name="weights"),
]
