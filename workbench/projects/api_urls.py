from django.urls import path

from workbench.projects import api

urlpatterns = [
    path("projects/", api.project_list, name="api-projects"),
    path("projects/<slug:slug>/", api.project_detail, name="api-project"),
    path("projects/<slug:slug>/members/", api.member_set, name="api-project-members"),
    path("projects/<slug:slug>/members/<str:username>/", api.member_remove, name="api-project-member"),
    path("share/", api.share, name="api-share"),
    path("quotas/", api.quota_list, name="api-quotas"),
]
