from django.urls import path

from workbench.projects import views

urlpatterns = [
    path("", views.project_list, name="project-list"),
    # Before the project's own page: a project cannot be reached as /projects/share/.
    path("share/", views.project_share, name="project-share"),
    path("<slug:slug>/", views.project_detail, name="project-detail"),
    path("<slug:slug>/members/", views.project_member_set, name="project-member-set"),
    path("<slug:slug>/members/remove/", views.project_member_remove, name="project-member-remove"),
]
