from django.urls import path

from datasets import views

urlpatterns = [
    path("", views.dataset_list, name="dataset-list"),
]
