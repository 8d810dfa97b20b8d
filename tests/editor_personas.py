"""An editor who logs in through the admin's form, as the browser tests do: a staff member
of `editors` (the group and its permissions as ingestion/migrations/0009 makes them), not a
superuser, with a password (tests/admin_pages.py's members have none, as a test client
logs them in without one)."""

from django.contrib.auth.models import Group, User

from tests.admin_pages import EDITORS, make_roles, member_of
from tests.ops_personas import PASSWORD

__all__ = ["PASSWORD", "editor"]


def editor(username: str = "edith") -> User:
    if not Group.objects.filter(name=EDITORS).exists():
        make_roles()  # a transactional test flushed the migration's rows
    user = member_of(EDITORS, username)
    user.set_password(PASSWORD)
    user.save(update_fields=["password"])
    return user
