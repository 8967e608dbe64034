from django.urls import path

from workbench.projects import views

urlpatterns = [
    path("", views.project_list, name="project-list"),
    # Before the project's own page: a project cannot be reached as /projects/share/ or /projects/quotas/
    # (validators.RESERVED_SLUGS).
    path("share/", views.project_share, name="project-share"),
    path("quotas/", views.project_quotas, name="project-quotas"),
    path("quotas/clear/", views.project_quotas_clear, name="project-quotas-clear"),
    path("<slug:slug>/", views.project_detail, name="project-detail"),
    path("<slug:slug>/members/", views.project_member_set, name="project-member-set"),
    path("<slug:slug>/members/remove/", views.project_member_remove, name="project-member-remove"),
    path("<slug:slug>/quota/", views.project_quota_set, name="project-quota-set"),
    path("<slug:slug>/quota/clear/", views.project_quota_clear, name="project-quota-clear"),
]
