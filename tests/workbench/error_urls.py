"""The workbench's URLs plus views that fail on purpose, for the error pages' tests."""

from django.core.exceptions import PermissionDenied
from django.urls import path

from workbench.urls import handler404, handler500
from workbench.urls import urlpatterns as workbench_urlpatterns

__all__ = ["handler404", "handler500", "urlpatterns"]


def crash(request):
    raise RuntimeError("a bug that mentions /srv/workbench/var/datasets/.7.extract-1234")


def refuse(request):
    raise PermissionDenied("only staff can change a run's priority")


urlpatterns = [
    path("crash/", crash),
    path("api/crash/", crash),
    path("refuse/", refuse),
    *workbench_urlpatterns,
]
