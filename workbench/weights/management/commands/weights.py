"""`manage.py weights list|import|fetch`: the weights store from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from workbench.weights.files import WeightsError
from workbench.weights.models import StoredWeights
from workbench.weights.services import store_networks, weights_discover, weights_fetch, weights_import


def _entry(row: StoredWeights) -> dict:
    return {
        "id": row.pk,
        "reference": row.reference,
        "network": row.network,
        "source": row.source,
        "tag": row.tag,
        "verified": row.verified,
        "file": row.file_name,
        "present": row.present,
        "top1": row.top1,
        "licence": row.licence,
    }


class Command(BaseCommand):
    help = "The weights store: list what is filed, import a file copied in by hand, fetch published weights."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        listing = commands.add_parser("list", help="filed weights (and published files found in the caches)")
        listing.add_argument("--format", choices=("table", "json"), default="table")
        imported = commands.add_parser("import", help="check a state_dict file and file it for a network")
        imported.add_argument("file", type=Path)
        imported.add_argument("--network", required=True, help=f"one of {', '.join(store_networks())}")
        imported.add_argument("--tag", default="", help="a name for local weights (e.g. lab-imagenet-v3)")
        fetched = commands.add_parser("fetch", help="download published weights (on a machine that is online)")
        fetched.add_argument("network")
        fetched.add_argument("--tag", default="", help="e.g. IMAGENET1K_V1 (default: the library's DEFAULT)")

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except WeightsError as error:
            raise CommandError(str(error)) from None

    def _list(self, options) -> None:
        for line in weights_discover():
            self.stderr.write(line)
        entries = [_entry(row) for row in StoredWeights.objects.all()]
        if options["format"] == "json":
            self.stdout.write(json.dumps(entries, indent=2))
            return
        if not entries:
            self.stdout.write("no weights filed; see `manage.py weights fetch` or `manage.py weights import`")
            return
        self.stdout.write(f"{'id':>4}  {'network':<20} {'source':<12} {'tag':<26} {'verified':<9} file")
        for e in entries:
            verified = "yes" if e["verified"] else "no"
            missing = "" if e["present"] else "  (file gone)"
            tag = e["tag"] or "-"
            self.stdout.write(
                f"{e['id']:>4}  {e['network']:<20} {e['source']:<12} {tag:<26} {verified:<9} {e['file']}{missing}"
            )

    def _import(self, options) -> None:
        _, line = weights_import(source=options["file"], network=options["network"], tag=options["tag"])
        self.stdout.write(line)

    def _fetch(self, options) -> None:
        row = weights_fetch(network=options["network"], tag=options["tag"], progress=True)
        self.stdout.write(f"fetched and filed as {row.reference}: {row.label}")
