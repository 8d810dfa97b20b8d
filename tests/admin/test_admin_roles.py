"""The editors and ops groups (issue 13, item 1): each acted as by a staff member of the
group, to prove both what it can and what it cannot do in the admin."""

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from ingestion.models import Listing, QuarantinedItem, Source, SourceRecord
from ingestion.upsert import apply_draft
from tests.admin_pages import EDITORS, OPS, client_of, listing_change_form, make_roles, member_of
from tests.factories import draft, source

pytestmark = pytest.mark.django_db

EDITED = ("listing", "source", "sourcerecord", "quarantineditem")


@pytest.fixture
def editor() -> Client:
    return client_of(EDITORS)


@pytest.fixture
def ops() -> Client:
    return client_of(OPS)


@pytest.fixture
def two_listings() -> list[Listing]:
    """Two listings of one feed, each with a record, and a quarantined item."""
    feed = source()
    apply_draft(feed, draft("a", title="Organ recital"), timezone.now())
    apply_draft(feed, draft("b", title="Organ recital at St Mary's"), timezone.now())
    QuarantinedItem.objects.create(source=feed, position=3, reason="no title")
    return list(Listing.objects.order_by("pk"))


def _admin_models(client: Client) -> set[str]:
    """The models the admin's index page offers, as app_label.model_name."""
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    return {
        f"{app['app_label']}.{model['object_name'].lower()}"
        for app in response.context["app_list"]
        for model in app["models"]
    }


def _actions(client: Client, model: str) -> set[str]:
    """The actions a changelist offers (none: no action form at all)."""
    response = client.get(reverse(f"admin:ingestion_{model}_changelist"))
    assert response.status_code == 200
    form = response.context["action_form"]
    return set() if form is None else {name for name, _ in form.fields["action"].choices if name}


def test_it_offers_editors_listings_sources_records_and_quarantine_only(editor: Client) -> None:
    assert _admin_models(editor) == {f"ingestion.{model}" for model in EDITED}


@pytest.mark.parametrize("model", EDITED)
@pytest.mark.parametrize("page", ["changelist", "add"])
def test_editors_can_list_and_add(editor: Client, model: str, page: str) -> None:
    assert editor.get(reverse(f"admin:ingestion_{model}_{page}")).status_code == 200


@pytest.mark.parametrize(
    "page",
    [
        "admin:auth_user_changelist",
        "admin:auth_group_changelist",
        "admin:ingestion_indexgeneration_changelist",
        "admin:ingestion_poll_changelist",
    ],
)
def test_editors_cannot_see_users_generations_or_polls(editor: Client, page: str) -> None:
    assert editor.get(reverse(page)).status_code == 403


def test_editors_hold_no_token_generation_delete_or_ops_permission() -> None:
    user = member_of(EDITORS)
    assert user.has_perms(["ingestion.merge_listing", "ingestion.split_listing"])
    for permission in (
        "ingestion.view_apitoken",
        "ingestion.change_apitoken",
        "ingestion.view_indexgeneration",
        "ingestion.change_indexgeneration",
        "ingestion.delete_listing",
        "ingestion.delete_source",
        "ops.view_ops_page",
        "auth.view_user",
    ):
        assert not user.has_perm(permission), permission


def test_editors_can_edit_a_listing(editor: Client, two_listings: list[Listing]) -> None:
    listing = two_listings[0]
    url = reverse("admin:ingestion_listing_change", args=[listing.pk])
    response = editor.post(url, listing_change_form(listing, title="Organ recital, rescheduled"))
    assert response.status_code == 302, response.content
    listing.refresh_from_db()
    assert listing.title == "Organ recital, rescheduled"


def test_editors_are_offered_the_changing_actions_and_no_delete(editor: Client) -> None:
    assert _actions(editor, "listing") == {"withdraw", "restore", "merge_listings"}
    assert _actions(editor, "sourcerecord") == {"split_records"}
    assert _actions(editor, "quarantineditem") == {"retry", "dismiss"}


def test_editors_can_merge_and_split(editor: Client, two_listings: list[Listing]) -> None:
    changelist = reverse("admin:ingestion_listing_changelist")
    selected = [listing.pk for listing in two_listings]
    merge = {"action": "merge_listings", "_selected_action": selected, "confirmed": "yes"}
    assert editor.post(changelist, merge).status_code == 302
    assert Listing.objects.count() == 1

    record = SourceRecord.objects.get(external_id="b")
    split = {"action": "split_records", "_selected_action": [record.pk], "confirmed": "yes"}
    assert editor.post(reverse("admin:ingestion_sourcerecord_changelist"), split).status_code == 302
    assert Listing.objects.count() == 2


def test_it_offers_ops_every_ingestion_model_and_no_users(ops: Client) -> None:
    assert _admin_models(ops) == {
        "ingestion.apitoken",  # seen, never issued or revoked: ops hold view only
        "ingestion.indexgeneration",
        "ingestion.listing",
        "ingestion.poll",
        "ingestion.quarantineditem",
        "ingestion.source",
        "ingestion.sourcerecord",
        "ops.opspage",  # the ops page's link (ops/admin.py)
    }
    assert ops.get(reverse("admin:auth_user_changelist")).status_code == 403


@pytest.mark.parametrize("model", [*EDITED, "indexgeneration", "poll"])
def test_ops_can_view_every_changelist(ops: Client, model: str) -> None:
    assert ops.get(reverse(f"admin:ingestion_{model}_changelist")).status_code == 200


@pytest.mark.parametrize("model", EDITED)
def test_ops_can_add_nothing(ops: Client, model: str) -> None:
    assert ops.get(reverse(f"admin:ingestion_{model}_add")).status_code == 403


def test_ops_can_view_a_listing_but_not_change_it(ops: Client, two_listings: list[Listing]) -> None:
    listing = two_listings[0]
    url = reverse("admin:ingestion_listing_change", args=[listing.pk])
    assert ops.get(url).status_code == 200
    assert ops.post(url, listing_change_form(listing, title="Hijacked")).status_code == 403
    listing.refresh_from_db()
    assert listing.title == "Organ recital"


@pytest.mark.parametrize("model", ["listing", "sourcerecord", "quarantineditem"])
def test_ops_are_offered_no_changing_action(ops: Client, model: str) -> None:
    assert _actions(ops, model) == set()


def test_ops_are_offered_no_source_action(ops: Client) -> None:
    assert _actions(ops, "source") == set()


def test_an_action_ops_post_anyway_changes_nothing(
    ops: Client, two_listings: list[Listing]
) -> None:
    changelist = reverse("admin:ingestion_listing_changelist")
    selected = [listing.pk for listing in two_listings]
    for action in ("merge_listings", "withdraw"):
        posted = {"action": action, "_selected_action": selected, "confirmed": "yes", "reason": "x"}
        ops.post(changelist, posted)
    assert list(Listing.objects.values_list("status", flat=True)) == ["active", "active"]


def test_ops_run_generations_and_see_the_ops_page() -> None:
    user = member_of(OPS)
    assert user.has_perms(
        ["ingestion.change_indexgeneration", "ops.view_ops_page", "retrieval.run_canary"]
    )
    assert user.has_perm("ingestion.view_apitoken")
    for permission in ("ingestion.change_listing", "ingestion.merge_listing", "auth.view_user"):
        assert not user.has_perm(permission), permission


def test_staff_in_no_group_see_nothing() -> None:
    client = Client()
    client.force_login(member_of(EDITORS, "leaver"))
    Group.objects.get(name=EDITORS).user_set.clear()
    assert _admin_models(client) == set()
    assert client.get(reverse("admin:ingestion_listing_changelist")).status_code == 403


def test_running_the_roles_migration_again_changes_no_group() -> None:
    def permissions() -> dict[str, set[str]]:
        return {
            group.name: set(group.permissions.values_list("codename", flat=True))
            for group in Group.objects.filter(name__in=[EDITORS, OPS])
        }

    before = permissions()
    Group.objects.get(name=OPS).permissions.clear()  # as if someone had edited the group
    make_roles()
    assert permissions() == before
    assert Source.objects.count() == 0  # a roles migration makes no data of its own
