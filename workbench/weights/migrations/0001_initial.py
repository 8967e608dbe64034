import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="StoredWeights",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("network", models.CharField(max_length=100)),
                (
                    "source",
                    models.CharField(
                        choices=[("torchvision", "Torchvision"), ("timm", "Timm"), ("local", "Local")], max_length=16
                    ),
                ),
                ("tag", models.CharField(blank=True, max_length=100)),
                ("file_name", models.CharField(max_length=255)),
                ("path", models.CharField(max_length=1000, unique=True)),
                ("sha256", models.CharField(max_length=64)),
                ("size_bytes", models.PositiveBigIntegerField(default=0)),
                ("tensor_count", models.PositiveIntegerField(default=0)),
                ("verified", models.BooleanField(default=False)),
                ("licence", models.CharField(blank=True, max_length=300)),
                ("dataset", models.CharField(blank=True, max_length=100)),
                ("accuracy", models.JSONField(blank=True, default=dict)),
                ("mean", models.JSONField(blank=True, null=True)),
                ("std", models.JSONField(blank=True, null=True)),
                ("resize", models.PositiveIntegerField(blank=True, null=True)),
                ("crop", models.PositiveIntegerField(blank=True, null=True)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "stored weights",
                "ordering": ["network", "-verified", "tag", "pk"],
            },
        ),
    ]
