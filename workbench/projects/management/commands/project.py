"""`manage.py project`: create and list projects, add, change and remove members, as the API does.

    manage.py project create "Vision lab" [--slug vision-lab] [--description ...] [--admin alice]
    manage.py project list
    manage.py project add-member vision-lab bob [--role viewer|editor|admin]
    manage.py project remove-member vision-lab bob

Each acts for `--as USERNAME` (default: the only superuser), under the same rules as the page and
the API: staff create projects, a project's admins (and staff) manage its members.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand
from django.http import Http404

from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error
from workbench.core.errors import RequestError
from workbench.core.ownership import ROLES, VIEWER, a_role
from workbench.projects import services
from workbench.projects.selectors import project_for, project_summary, projects_visible_to
from workbench.projects.validators import user_named


class Command(BaseCommand):
    help = "Create and list projects; add, change and remove their members (see --help of each)."

    def add_arguments(self, parser):
        parser.add_argument("--as", dest="acting", metavar="USERNAME", help="who acts (default: the only superuser)")
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create a project (staff)")
        create.add_argument("name")
        create.add_argument("--slug", help="its name in URLs and commands (default: from the name)")
        create.add_argument("--description", default="")
        create.add_argument("--admin", action="append", default=[], metavar="USERNAME", help="a first admin")
        actions.add_parser("list", help="the projects you see, with your role and what each holds")
        add = actions.add_parser("add-member", help="add a member or change a member's role")
        add.add_argument("project", help="the project's slug")
        add.add_argument("user")
        add.add_argument("--role", choices=ROLES, default=VIEWER)
        remove = actions.add_parser("remove-member", help="remove a member: they lose sight of it at once")
        remove.add_argument("project", help="the project's slug")
        remove.add_argument("user")

    def handle(self, *args, action, acting=None, **options):
        by = command_owner(acting, option="--as")
        try:
            getattr(self, action.replace("-", "_"))(by, **options)
        except RequestError as error:
            raise command_error(error) from None
        except (Http404, PermissionDenied) as error:
            raise refusal_error(error) from None

    def create(self, by, *, name, slug, description, admin, **_):
        project = services.project_create(
            by=by, name=name, slug=slug, description=description, admins=[user_named(u) for u in admin]
        )
        self.stdout.write(f"project {project.slug} created")

    def list(self, by, **_):
        projects = list(projects_visible_to(by))
        if not projects:
            self.stdout.write("no projects")
        for project in projects:
            summary = project_summary(project, by)
            holds = ", ".join(f"{n} {name}" for name, n in summary["holds"].items())
            self.stdout.write(f"{project.slug}  {project.name}  role: {summary['role'] or '-'}  holds: {holds}")

    def add_member(self, by, *, project, user, role, **_):
        membership = services.member_set(by=by, project=project_for(by, project), username=user, role=role)
        self.stdout.write(f"{membership.user.username} is {a_role(membership.role)} of {project}")

    def remove_member(self, by, *, project, user, **_):
        services.member_remove(by=by, project=project_for(by, project), username=user)
        self.stdout.write(f"{user} removed from {project}")
