"""The metric roll-ups' model moves here from retrieval (its 0005 made the table): this
app takes over the model's state while the table, its rows and its index stay as they
are. The content type moves with it, so the model's permissions and any grant of them
follow; then the ops page's permission, which sat on ingestion's sources, becomes this
app's, given to everyone who had the old one."""

from typing import Any

from django.db import migrations, models

OLD = ("ingestion", "source")
NEW = ("ops", "metricrollup")
CODENAME, NAME = "view_ops_page", "Can view the ops page"


def move_to_ops(apps: Any, schema_editor: Any) -> None:
    _content_type(apps, ("retrieval", "metricrollup"), NEW)
    _permission(apps, OLD, NEW)


def move_back(apps: Any, schema_editor: Any) -> None:
    _permission(apps, NEW, OLD)
    _content_type(apps, NEW, ("retrieval", "metricrollup"))


def _content_type(apps: Any, was: tuple[str, str], becomes: tuple[str, str]) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label=was[0], model=was[1]).update(
        app_label=becomes[0], model=becomes[1]
    )


def _permission(apps: Any, was: tuple[str, str], becomes: tuple[str, str]) -> None:
    """The ops page's permission moved from `was` to `becomes`, with every grant of it."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    old = Permission.objects.filter(
        codename=CODENAME, content_type__app_label=was[0], content_type__model=was[1]
    ).first()
    if old is None:
        return  # a database made without the roles: the model's Meta makes the new one
    target, _ = ContentType.objects.get_or_create(app_label=becomes[0], model=becomes[1])
    new, _ = Permission.objects.get_or_create(
        codename=CODENAME, content_type=target, defaults={"name": NAME}
    )
    for group in old.group_set.all():
        group.permissions.add(new)
    for user in old.user_set.all():
        user.user_permissions.add(new)
    old.delete()


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("retrieval", "0006_warm_up"),
        ("ingestion", "0009_editor_and_ops_roles"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="MetricRollup",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("minute", models.DateTimeField()),
                        ("metric", models.CharField(max_length=100)),
                        ("labels", models.JSONField(default=dict)),
                        ("value", models.FloatField()),
                    ],
                    options={
                        "db_table": "retrieval_metric_rollup",
                        "indexes": [
                            models.Index(fields=["minute"], name="retrieval_rollup_minute")
                        ],
                        "permissions": [("view_ops_page", "Can view the ops page")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_to_ops, move_back),
    ]
