# Hosts and devices now belong to the workers app (workers 0001); the tables are unchanged.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0004_pretrained_weights_wait_holder"),
        ("workers", "0001_initial"),
    ]

    state_operations = [
        migrations.AlterField(
            model_name="run",
            name="host",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="runs",
                to="workers.workerhost",
            ),
        ),
        migrations.DeleteModel(name="Device"),
        migrations.DeleteModel(name="WorkerHost"),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
