"""The admin as its people use it. Its people are as the roles migration makes them
(migrations/0009): staff members of the editors or the ops group, never superusers, so a
test proves what the group lets them do and what it does not."""

import importlib

from django.apps import apps
from django.contrib.auth.models import Group, User
from django.test import Client

from ingestion.models import Listing

EDITORS, OPS = "editors", "ops"


def make_roles() -> None:
    """The groups made again by the roles migrations' own functions, for a transactional
    test: those before it flushed the database, and the migrations' rows with it. The
    ops group's budget canaries came in a later migration of their own."""
    importlib.import_module("ingestion.migrations.0009_editor_and_ops_roles").create_roles(
        apps, None
    )
    importlib.import_module("retrieval.migrations.0011_budget_canary").grant_to_ops(apps, None)


def member_of(group: str, username: str | None = None) -> User:
    user = User.objects.create_user(username or f"{group}-member", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def client_of(group: str) -> Client:
    client = Client()
    client.force_login(member_of(group))
    return client


def listing_change_form(listing: Listing, **changes: str) -> dict[str, str]:
    """What the admin's change form posts for `listing`, with `changes` typed in."""
    records = list(listing.records.order_by("pk"))
    data = {
        "title": listing.title,
        "description": listing.description,
        "venue": listing.venue,
        "aliases": ",".join(listing.aliases),
        "starts_at_0": "",
        "starts_at_1": "",
        "ends_at_0": "",
        "ends_at_1": "",
        "timezone": listing.timezone,
        "url": listing.url,
        "status": listing.status,
        "records-TOTAL_FORMS": str(len(records)),
        "records-INITIAL_FORMS": str(len(records)),
        "records-MIN_NUM_FORMS": "0",
        "records-MAX_NUM_FORMS": "1000",
    }
    for number, record in enumerate(records):
        data[f"records-{number}-id"] = str(record.pk)
        data[f"records-{number}-listing"] = str(listing.pk)
    return {**data, **changes}
