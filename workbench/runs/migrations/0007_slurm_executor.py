from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_anonymous_wait_reasons_and_worker_content_types")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="executor",
            field=models.CharField(choices=[("local", "Local"), ("slurm", "Slurm")], default="local", max_length=8),
        ),
        migrations.AddField(model_name="run", name="nodes", field=models.PositiveSmallIntegerField(default=1)),
        migrations.AddField(model_name="run", name="slurm_job_id", field=models.CharField(blank=True, max_length=32)),
        migrations.AddField(model_name="run", name="slurm_state", field=models.CharField(blank=True, max_length=24)),
    ]
