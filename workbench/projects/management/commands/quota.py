"""`manage.py quota`: GPU-hour quotas of users and projects, as `/api/quotas/` sets them.

    manage.py quota set --project vision-lab --gpu-hours 40 [--period month|rolling] [--window-days 30]
    manage.py quota set --user alice --gpu-hours 10
    manage.py quota list
    manage.py quota clear --project vision-lab

Each acts for `--as USERNAME` (default: the only superuser); staff set and clear quotas.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand

from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error
from workbench.core.errors import RequestError
from workbench.projects import services
from workbench.projects.quotas import usage
from workbench.projects.selectors import quotas_for


class Command(BaseCommand):
    help = "Set, list and clear GPU-hour quotas of users and projects (staff)."

    def add_arguments(self, parser):
        parser.add_argument("--as", dest="acting", metavar="USERNAME", help="who acts (default: the only superuser)")
        actions = parser.add_subparsers(dest="action", required=True)
        quota_set = actions.add_parser("set", help="set or change a quota")
        clear = actions.add_parser("clear", help="clear a quota")
        for sub in (quota_set, clear):
            holder = sub.add_mutually_exclusive_group(required=True)
            holder.add_argument("--user", metavar="USERNAME")
            holder.add_argument("--project", metavar="SLUG")
        quota_set.add_argument("--gpu-hours", required=True)
        quota_set.add_argument("--period", choices=["month", "rolling"], default="month")
        quota_set.add_argument("--window-days", default=30, help="rolling: the window's length in days")
        actions.add_parser("list", help="the quotas with their use in the current period")

    def handle(self, *args, action, acting=None, **options):
        by = command_owner(acting, option="--as")
        try:
            if action == "set":
                quota = services.quota_set(
                    by=by, username=options["user"], project_slug=options["project"],
                    gpu_hours=options["gpu_hours"], period=options["period"], window_days=options["window_days"],
                )  # fmt: skip
                self.stdout.write(_line(usage(quota)))
            elif action == "clear":
                services.quota_clear(by=by, username=options["user"], project_slug=options["project"])
                self.stdout.write(f"quota of {options['user'] or 'project ' + options['project']} cleared")
            else:
                rows = [usage(quota) for quota in quotas_for(by)]
                self.stdout.write("\n".join(_line(row) for row in rows) or "no quotas")
        except RequestError as error:
            raise command_error(error) from None
        except PermissionDenied as error:
            raise refusal_error(error) from None


def _line(row: dict) -> str:
    spent = f" (spent; allowed again {row['allowed_again_at']})" if row["spent"] else ""
    return f"{row['for']}: {row['used_gpu_hours']:.1f} of {row['gpu_hours']:g} GPU-hours {row['period_words']}{spent}"
