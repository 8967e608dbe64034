"""Pages of inference, mounted at the site root (they live under /runs/<id>/)."""

from django.urls import path

from workbench.inference import views

urlpatterns = [
    path("runs/<int:pk>/classify/", views.classify_page, name="inference-classify"),
    path("runs/<int:pk>/detect/", views.detect_page, name="inference-detect"),
    path("runs/<int:pk>/segment/", views.segment_page, name="inference-segment"),
    path("runs/<int:pk>/test/", views.test_page, name="inference-test"),
    path("runs/<int:pk>/inside/", views.inside_page, name="inference-inside"),
    path("runs/<int:pk>/export/", views.export_page, name="inference-export"),
    path("runs/<int:pk>/jobs/<int:job_pk>/", views.job_page, name="inference-job"),
    path("runs/<int:pk>/jobs/<int:job_pk>/results.csv", views.job_csv, name="inference-job-csv"),
    path("runs/<int:pk>/jobs/<int:job_pk>/mistakes/<int:index>.png", views.job_mistake, name="inference-mistake"),
    path("runs/<int:pk>/jobs/<int:job_pk>/top/<int:label>_<int:rank>.png", views.job_top, name="inference-top"),
    path("runs/<int:pk>/jobs/<int:job_pk>/worst/<int:rank>.png", views.job_worst, name="inference-worst"),
    path("runs/<int:pk>/jobs/<int:job_pk>/masks/<int:index>.png", views.job_mask, name="inference-mask"),
    path("runs/<int:pk>/jobs/<int:job_pk>/thumbs/<int:index>.png", views.job_thumb, name="inference-thumb"),
    path("runs/<int:pk>/jobs/<int:job_pk>/delete/", views.job_delete, name="inference-job-delete"),
]
