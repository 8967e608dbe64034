"""`manage.py share KIND ID PROJECT`: put a dataset, run, search, benchmark or uploaded weights
into a project (`--none` instead of PROJECT takes it out), as `POST /api/share/` does.

    manage.py share dataset 3 vision-lab --as alice
    manage.py share run 12 --none --as alice
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error
from workbench.core.errors import RequestError
from workbench.projects import services
from workbench.projects.validators import SHAREABLE


class Command(BaseCommand):
    help = "Put an object of yours into a project (or take it out with --none)."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=list(SHAREABLE))
        parser.add_argument("id", type=int)
        parser.add_argument("project", nargs="?", help="the project's slug")
        parser.add_argument("--none", action="store_true", help="take it out of its project")
        parser.add_argument("--as", dest="acting", metavar="USERNAME", help="who acts (default: the only superuser)")

    def handle(self, *args, kind, id, project=None, none=False, acting=None, **options):
        if bool(project) == bool(none):
            raise CommandError("give a project's slug, or --none to take it out of its project")
        by = command_owner(acting, option="--as")
        try:
            row = services.share(by=by, kind=kind, pk=id, project_slug=None if none else project)
        except RequestError as error:
            raise command_error(error) from None
        except (Http404, PermissionDenied) as error:
            raise refusal_error(error) from None
        where = f"in project {row.project.slug}" if row.project_id else "its owner's alone"
        self.stdout.write(f"{kind} {row.pk} is now {where}")
