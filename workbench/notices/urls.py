from django.urls import path

from workbench.notices import views

urlpatterns = [path("", views.notices_page, name="notices")]
