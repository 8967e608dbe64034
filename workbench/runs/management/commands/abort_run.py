from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from workbench.core.commands import command_owner, refusal_error, require_running_workbench
from workbench.runs.models import Run
from workbench.runs.selectors import run_to_change
from workbench.runs.services import RunError, run_abort, run_pause, run_resume

ACTIONS = {"abort": run_abort, "pause": run_pause, "resume": run_resume}


class Command(BaseCommand):
    help = "Abort a run (or, with --pause / --resume, pause or resume it)."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--pause", dest="action", action="store_const", const="pause")
        group.add_argument("--resume", dest="action", action="store_const", const="resume")
        parser.add_argument(
            "--as", dest="acting", metavar="USERNAME",
            help="act as this user, under the page's rules (a project's viewer may not); default: the operator",
        )  # fmt: skip

    def handle(self, *args, run_id, action=None, acting=None, **options):
        action = action or "abort"
        actor = command_owner(acting, option="--as") if acting else None
        if actor is not None:
            try:
                run = run_to_change(actor, run_id)
            except (Http404, PermissionDenied) as error:
                raise refusal_error(error) from None
        else:  # whoever runs manage.py on the server is its operator
            run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        if action == "resume":
            require_running_workbench()  # the resumed run goes back to the queue
        try:
            run = ACTIONS[action](run=run, by=actor)
        except RunError as error:
            raise CommandError(str(error)) from None
        if run.stop_request:
            self.stdout.write(f"run {run.pk}: {action} requested; the trainer saves a checkpoint and stops")
        else:
            self.stdout.write(f"run {run.pk}: {run.state}")
