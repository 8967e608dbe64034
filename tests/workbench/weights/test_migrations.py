"""The uploads' model moved from the runs app to this one with its rows (runs 0011, weights 0002),
and the paths runs stored became the references they were resolved from."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0010_watched_at"), ("weights", "0001_initial")]
AFTER = [("runs", "0011_pretrained_references"), ("weights", "0002_uploadedweights")]


def migrate(targets):
    """The two apps at `targets`, every other app at its latest (as a live database is), but those
    whose migrations need a later runs app."""
    executor = MigrationExecutor(connection)
    # Label checks came later: their first migration needs the runs app's latest, not 0010.
    others = [leaf for leaf in executor.loader.graph.leaf_nodes() if leaf[0] not in ("runs", "weights", "labelchecks")]
    executor.migrate(targets)
    return executor.loader.project_state([*others, *targets]).apps


@pytest.mark.django_db(transaction=True)
def test_it_moves_the_uploads_with_their_rows_and_stores_references_in_place_of_paths():
    old = migrate(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="mover")
    dataset = old.get_model("datasets", "Dataset").objects.create(owner_id=user.pk, name="d")
    Run = old.get_model("runs", "Run")
    source = Run.objects.create(owner_id=user.pk, name="source", dataset_id=dataset.pk, network="lenet")
    Uploads = old.get_model("runs", "PretrainedWeights")
    upload = Uploads.objects.create(owner_id=user.pk, name="mine.pt", path=f"pretrained/user{user.pk}/upload-a.pt")
    copy = Uploads.objects.create(owner_id=user.pk, name=f"run #{source.pk} best", source_run_id=source.pk,
                                  path=f"pretrained/user{user.pk}/run.pt", source_checkpoint="best")  # fmt: skip
    stored = old.get_model("weights", "StoredWeights").objects.create(
        network="lenet", source="local", file_name="lenet.pt", path="/srv/weights/lenet.pt", sha256="0" * 64
    )
    data = Path(settings.DATA_DIR)
    configs = {
        str(data / upload.path): f"upload:{upload.pk}",
        str(data / copy.path): f"upload:{copy.pk}",  # the copy made at submit stays the run's start
        stored.path: f"weights:{stored.pk}",
        f"run:{source.pk}:last": f"run:{source.pk}:last",  # a reference already: untouched
        "/elsewhere/x.pt": "/elsewhere/x.pt",  # maps to nothing: refused at launch like any bad reference
    }
    runs = {
        Run.objects.create(
            owner_id=user.pk, name="r", dataset_id=dataset.pk, network="lenet", config={"pretrained": path, "epochs": 1}
        ).pk: reference  # fmt: skip
        for path, reference in configs.items()
    }

    new = migrate(AFTER)

    moved = new.get_model("weights", "UploadedWeights").objects.order_by("pk")
    assert [(row.pk, row.name, row.path) for row in moved] == [
        (upload.pk, "mine.pt", upload.path),
        (copy.pk, copy.name, copy.path),
    ]
    stored_configs = {run.pk: run.config for run in new.get_model("runs", "Run").objects.filter(pk__in=runs)}
    assert stored_configs == {pk: {"pretrained": reference, "epochs": 1} for pk, reference in runs.items()}
    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # as it was
