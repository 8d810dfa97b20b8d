"""Who the ops page is for, and who not: an `ops` member (the group and its permission as
ingestion/migrations/0009 makes them, made here if that migration is not in), a staff
member without the permission, and a superuser."""

from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType

from ingestion.models import Source

PASSWORD = "a long passphrase"


def ops_permission() -> Permission:
    found = Permission.objects.filter(
        codename="view_ops_page", content_type__app_label="ingestion"
    ).first()
    if found is not None:
        return found
    return Permission.objects.create(
        codename="view_ops_page",
        name="Can view the ops page",
        content_type=ContentType.objects.get_for_model(Source),
    )


def ops_member(username: str = "olga") -> User:
    group, _ = Group.objects.get_or_create(name="ops")
    group.permissions.add(ops_permission())
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.groups.add(group)
    return user


def staff_without_ops(username: str = "eddie") -> User:
    return User.objects.create_user(username, password=PASSWORD, is_staff=True)


def superuser(username: str = "sam") -> User:
    return User.objects.create_superuser(username, password=PASSWORD)
