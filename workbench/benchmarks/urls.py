from django.urls import path

from workbench.benchmarks import views

urlpatterns = [
    path("", views.benchmark_list, name="benchmark-list"),
    path("<int:pk>/", views.benchmark_detail, name="benchmark-detail"),
    path("<int:pk>/cancel/", views.benchmark_cancel, name="benchmark-cancel"),
    path("<int:pk>/benchmark.csv", views.benchmark_csv, name="benchmark-csv"),
    path("<int:pk>/benchmark.md", views.benchmark_markdown, name="benchmark-markdown"),
    path("<int:pk>/compare/<int:other>/", views.benchmark_compare, name="benchmark-compare"),
]
