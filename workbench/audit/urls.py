from django.urls import path

from workbench.audit import views

urlpatterns = [path("", views.audit_page, name="audit")]
