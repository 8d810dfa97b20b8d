"""Who the ops page is for, and who not: an `ops` member (the group with the ops app's
permission, made here if a flushed test database lost it), a staff member without the
permission, and a superuser."""

from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType

from ops.models import MetricRollup

PASSWORD = "a long passphrase"


def ops_permission() -> Permission:
    permission, _ = Permission.objects.get_or_create(
        codename="view_ops_page",
        content_type=ContentType.objects.get_for_model(MetricRollup),
        defaults={"name": "Can view the ops page"},
    )
    return permission


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
