"""A run stores the reference of the weights it starts from, never a path (issue 32): the paths
stored before are turned into the references they were resolved from, once, here; the uploads'
model moves to the weights app (weights 0002), its table kept as it is."""

from pathlib import Path

from django.conf import settings
from django.db import migrations

# The grammar as it stood when this migration was written (workbench/weights/references.py).
SCHEMES = ("weights:", "upload:", "run:")


def _reference(path: str, stored: dict[str, int], uploads: dict[str, int]) -> str | None:
    if path in stored:
        return f"weights:{stored[path]}"
    try:
        relative = Path(path).relative_to(settings.DATA_DIR).as_posix()
    except ValueError:
        return None
    # An upload, or the copy of a run's checkpoint made at submit before this change: the copy
    # stays its owner's file, and the run keeps starting from exactly it, as `upload:<id>`.
    return f"upload:{uploads[relative]}" if relative in uploads else None


def paths_to_references(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    stored = dict(apps.get_model("weights", "StoredWeights").objects.values_list("path", "pk"))
    uploads = dict(apps.get_model("runs", "PretrainedWeights").objects.values_list("path", "pk"))
    for run in Run.objects.only("pk", "config").iterator():
        value = (run.config or {}).get("pretrained")
        if not isinstance(value, str) or not value or value.startswith(SCHEMES):
            continue
        # A path that maps to nothing stays: at launch it is refused like any unknown reference.
        reference = _reference(value, stored, uploads)
        if reference is not None:
            Run.objects.filter(pk=run.pk).update(config={**run.config, "pretrained": reference})


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_watched_at"),
        ("weights", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(paths_to_references, migrations.RunPython.noop),
        # The model leaves this app's state; its table stays for the weights app (weights 0002).
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="PretrainedWeights")]),
    ]
