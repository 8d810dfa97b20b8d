"""Who the ops page is for, and who not: an `ops` member (the group with the ops app's
permission, made here if a flushed test database lost it), a staff member without the
permission, and a superuser."""

from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model

from ops.models import MetricRollup
from retrieval.models import Canary

PASSWORD = "a long passphrase"


def _permission(codename: str, model: type[Model], name: str) -> Permission:
    permission, _ = Permission.objects.get_or_create(
        codename=codename,
        content_type=ContentType.objects.get_for_model(model),
        defaults={"name": name},
    )
    return permission


def ops_permission() -> Permission:
    return _permission("view_ops_page", MetricRollup, "Can view the ops page")


def canary_permission() -> Permission:
    return _permission("run_canary", Canary, "Can start, promote and roll back a budget canary")


def ops_member(username: str = "olga") -> User:
    group, _ = Group.objects.get_or_create(name="ops")
    group.permissions.add(ops_permission(), canary_permission())
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.groups.add(group)
    return user


def staff_without_ops(username: str = "eddie") -> User:
    return User.objects.create_user(username, password=PASSWORD, is_staff=True)


def superuser(username: str = "sam") -> User:
    return User.objects.create_superuser(username, password=PASSWORD)
