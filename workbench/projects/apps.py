from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "workbench.projects"
    label = "projects"
    verbose_name = "Projects"
