"""The live run page, its series endpoints and the comparison page, mounted under /runs/."""

from django.urls import path

from workbench.runs.web import live_views

urlpatterns = [
    path("<int:pk>/", live_views.run_detail, name="run-detail"),
    path("<int:pk>/series/", live_views.run_series, name="run-series"),
    path("<int:pk>/series.csv", live_views.run_series_csv, name="run-series-csv"),
    path("<int:pk>/series.json", live_views.run_series_json, name="run-series-json"),
    path("compare/", live_views.run_compare, name="run-compare"),
    path("compare/series/", live_views.run_compare_series, name="run-compare-series"),
]
