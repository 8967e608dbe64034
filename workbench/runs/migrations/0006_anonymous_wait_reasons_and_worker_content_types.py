# Two clean-ups of what older versions stored:
# - wait reasons written before 0004 name the run holding a GPU ("in use by run #109 (name)") in
#   the state timeline, which is shown to the waiting run's owner; they now read "another run",
#   as the scheduler writes them since, and each viewer sees the holder only if allowed.
# - hosts and devices moved to the workers app (runs 0005); their content types follow, so the
#   permissions and admin log entries that refer to them stay valid.

import re

from django.db import migrations

HOLDER = re.compile(r"in use by run #\d+ \(.*\)")  # greedy: a run name may hold ")"


def anonymous_wait_reasons(apps, schema_editor):
    RunTransition = apps.get_model("runs", "RunTransition")
    Run = apps.get_model("runs", "Run")
    for model, field in ((RunTransition, "reason"), (Run, "wait_reason")):
        for row in model.objects.filter(**{f"{field}__contains": "in use by run #"}).only("pk", field):
            text = HOLDER.sub("in use by another run", getattr(row, field))
            model.objects.filter(pk=row.pk).update(**{field: text})


def content_types_to(app_label: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        source = "runs" if app_label == "workers" else "workers"
        for model in ("workerhost", "device"):
            if not ContentType.objects.filter(app_label=app_label, model=model).exists():
                ContentType.objects.filter(app_label=source, model=model).update(app_label=app_label)

    return move


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0005_hosts_and_devices_to_workers"),
    ]

    operations = [
        migrations.RunPython(anonymous_wait_reasons, migrations.RunPython.noop),
        migrations.RunPython(content_types_to("workers"), content_types_to("runs")),
    ]
