"""The admin's two roles (issue 13, item 1), as groups a superuser puts people in.

editors: view, add and change listings, sources, source records and quarantine, and merge
and split listings; nothing on users, index generations or API tokens, and no deletes (a
listing goes away by being withdrawn, which keeps its history).
ops: view everything the ingestion app holds, run the index generations (build, activate,
roll back, retire) and see the ops page; change nothing else.

The lists are written out here rather than read from the admin: a migration is history and
must mean the same whatever the code later says. Running it again sets the same
permissions (get_or_create, then set), so a group's permissions are exactly these.

Also: a quarantined item's dismissal note (an editor dismissing an item says why)."""

from typing import Any

from django.contrib.auth.management import create_permissions
from django.db import migrations, models

EDITED_MODELS = ("listing", "source", "sourcerecord", "quarantineditem")
VIEWED_MODELS = (
    "apitoken",
    "indexgeneration",
    "listing",
    "listingembedding",
    "poll",
    "quarantineditem",
    "source",
    "sourcerecord",
)
# (model, codename, name): the admin checks these as "ingestion.<codename>".
CUSTOM_PERMISSIONS = (
    ("listing", "merge_listing", "Can merge listings"),
    ("listing", "split_listing", "Can split listings"),
    # The ops page is not a model; its permission sits on the sources it reports on.
    ("source", "view_ops_page", "Can view the ops page"),
)
ROLES = {
    "editors": [
        *(f"{action}_{model}" for model in EDITED_MODELS for action in ("view", "add", "change")),
        "merge_listing",
        "split_listing",
    ],
    "ops": [
        *(f"view_{model}" for model in VIEWED_MODELS),
        "change_indexgeneration",
        "view_ops_page",
    ],
}


def create_roles(apps: Any, schema_editor: Any) -> None:
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType = apps.get_model("contenttypes", "ContentType")
    # Django makes the model permissions after the last migration (post_migrate); on a new
    # database they do not exist yet, so they are made here. It skips an app whose models
    # module is unset, as the migration state's apps are.
    ingestion = apps.get_app_config("ingestion")
    models_module = getattr(ingestion, "models_module", None)
    ingestion.models_module = models_module or True
    try:
        create_permissions(ingestion, verbosity=0, apps=apps)
    finally:
        ingestion.models_module = models_module
    for model, codename, name in CUSTOM_PERMISSIONS:
        content_type, _ = ContentType.objects.get_or_create(app_label="ingestion", model=model)
        Permission.objects.get_or_create(
            codename=codename, content_type=content_type, defaults={"name": name}
        )
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        permissions = Permission.objects.filter(
            content_type__app_label="ingestion", codename__in=codenames
        )
        assert permissions.count() == len(codenames), f"{role}: a permission is missing"
        group.permissions.set(permissions)


def drop_roles(apps: Any, schema_editor: Any) -> None:
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()
    apps.get_model("auth", "Permission").objects.filter(
        content_type__app_label="ingestion",
        codename__in=[codename for _, codename, _ in CUSTOM_PERMISSIONS],
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0008_listing_normalised_title"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="quarantineditem",
            name="dismissal_note",
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(create_roles, drop_roles),
    ]
