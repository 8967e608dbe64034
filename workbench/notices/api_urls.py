from django.urls import path

from workbench.notices import api

urlpatterns = [
    path("notices/", api.notice_list, name="api-notices"),
    path("notices/settings/", api.notice_settings, name="api-notice-settings"),
]
