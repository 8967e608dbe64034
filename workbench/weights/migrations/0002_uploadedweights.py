"""The uploads' model moves here from the runs app (issue 32) with its table and rows: the state
takes the model as it was (runs_pretrainedweights), then the fields of the copies of a run's
checkpoint go: a `run:` reference is now copied at launch into the run's own folder."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weights", "0001_initial"),
        ("runs", "0011_pretrained_references"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="UploadedWeights",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=200)),
                        ("path", models.CharField(max_length=500, unique=True)),
                        ("size_bytes", models.PositiveBigIntegerField(default=0)),
                        ("source_checkpoint", models.CharField(blank=True, max_length=8)),
                        ("source_epoch", models.FloatField(blank=True, null=True)),
                        ("created", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "owner",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="pretrained_weights",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "source_run",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="runs.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "runs_pretrainedweights",
                        "ordering": ["-created"],
                        "verbose_name_plural": "uploaded weights",
                    },
                ),
            ],
        ),
        migrations.RemoveField(model_name="uploadedweights", name="source_run"),
        migrations.RemoveField(model_name="uploadedweights", name="source_checkpoint"),
        migrations.RemoveField(model_name="uploadedweights", name="source_epoch"),
    ]
