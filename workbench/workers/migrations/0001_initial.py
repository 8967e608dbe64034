# Hosts and devices moved here from the runs app. Their tables stay where the runs app made them
# (Meta.db_table), so this migration changes Django's state only, not the database.

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("runs", "0004_pretrained_weights_wait_holder"),
    ]

    state_operations = [
        migrations.CreateModel(
            name="WorkerHost",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hostname", models.CharField(max_length=255, unique=True)),
                ("queue", models.CharField(blank=True, max_length=300)),
                ("devices", models.JSONField(default=list)),
                ("boot_id", models.UUIDField(default=uuid.uuid4)),
                ("simulated", models.BooleanField(default=False)),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("last_seen", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={"db_table": "runs_workerhost", "ordering": ["hostname"]},
        ),
        migrations.CreateModel(
            name="Device",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("gpu", "Gpu"), ("cpu", "Cpu")], max_length=8)),
                ("index", models.PositiveIntegerField()),
                ("name", models.CharField(max_length=200)),
                ("memory_total_mb", models.PositiveIntegerField(default=0)),
                ("memory_used_mb", models.PositiveIntegerField(default=0)),
                ("utilization_percent", models.FloatField(blank=True, null=True)),
                ("temperature_c", models.FloatField(blank=True, null=True)),
                ("power_watts", models.FloatField(blank=True, null=True)),
                ("simulated", models.BooleanField(default=False)),
                (
                    "run",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                        related_name="devices", to="runs.run",
                    ),
                ),
                (
                    "host",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="device_rows", to="workers.workerhost"
                    ),
                ),
            ],
            options={
                "db_table": "runs_device",
                "ordering": ["host__hostname", "kind", "index"],
                "constraints": [models.UniqueConstraint(fields=("host", "kind", "index"), name="unique_device_per_host")],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
