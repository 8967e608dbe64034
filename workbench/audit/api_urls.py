from django.urls import path

from workbench.audit import api

urlpatterns = [path("audit/", api.audit_list, name="api-audit")]
