"""Editorial API tokens: kept as digests only, compared in constant time, revocable in the
admin, and shown once, when the admin adds one."""

import hashlib
import hmac
import re
from unittest import mock

import pytest
from django.contrib.admin import helpers
from django.db import connection
from django.test import Client
from django.urls import reverse

from ingestion.models import ApiToken, Source
from ingestion.tokens import create_token, source_for_token

pytestmark = pytest.mark.django_db
CHANGELIST = reverse("admin:ingestion_apitoken_changelist")


@pytest.fixture
def desk() -> Source:
    return Source.objects.create(name="Upstream CMS", kind=Source.Kind.EDITORIAL)


def _tables_holding(text: str) -> list[str]:
    """The database's tables with a row whose text contains `text`."""
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        holding = []
        for table in tables:
            name = connection.ops.quote_name(table)
            cursor.execute(
                f"SELECT 1 FROM {name} AS t WHERE strpos(t::text, %s) > 0", [text]
            )  # names from the catalogue
            if cursor.fetchone():
                holding.append(table)
    return holding


def test_the_database_holds_the_token_s_digest_and_never_the_token(desk: Source) -> None:
    token = create_token("cms", desk)

    assert ApiToken.objects.get().token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert _tables_holding(token) == []
    assert source_for_token(token) == desk


def test_it_compares_the_stored_digest_in_constant_time(desk: Source) -> None:
    token = create_token("cms", desk)
    stored = ApiToken.objects.get().token_hash

    with mock.patch("ingestion.tokens.hmac.compare_digest", wraps=hmac.compare_digest) as spy:
        assert source_for_token(token) == desk

    spy.assert_called_once_with(stored, stored)


def test_the_admin_shows_a_new_token_once_and_then_only_its_digest(
    admin_client: Client, desk: Source
) -> None:
    response = admin_client.post(
        reverse("admin:ingestion_apitoken_add"), {"name": "cms", "source": desk.pk}
    )

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]  # no cache keeps a second copy
    found = re.search(r'value="([A-Za-z0-9_-]{43})"', response.content.decode())
    assert found, response.content.decode()[:2000]
    token = found.group(1)
    assert source_for_token(token) == desk
    assert _tables_holding(token) == []
    api_token = ApiToken.objects.get()
    change_page = admin_client.get(reverse("admin:ingestion_apitoken_change", args=[api_token.pk]))
    assert api_token.token_hash in change_page.content.decode()
    assert token not in change_page.content.decode()


def test_the_admin_changes_a_token_s_name_and_nothing_that_grants(
    admin_client: Client, desk: Source
) -> None:
    token = create_token("cms", desk)
    api_token = ApiToken.objects.get()
    ApiToken.objects.update(revoked=True)
    other = Source.objects.create(name="Other desk", kind=Source.Kind.EDITORIAL)

    admin_client.post(
        reverse("admin:ingestion_apitoken_change", args=[api_token.pk]),
        {"name": "renamed", "source": other.pk, "token_hash": "0" * 64, "revoked": ""},
    )

    renamed = ApiToken.objects.get()
    assert renamed.name == "renamed"
    assert (renamed.source, renamed.token_hash, renamed.revoked) == (
        desk,
        api_token.token_hash,
        True,
    )
    assert source_for_token(token) is None


def test_the_admin_action_revokes_the_selected_tokens(admin_client: Client, desk: Source) -> None:
    leaked, kept = create_token("leaked", desk), create_token("kept", desk)
    selected = ApiToken.objects.get(name="leaked")

    response = admin_client.post(
        CHANGELIST,
        {"action": "revoke_selected", helpers.ACTION_CHECKBOX_NAME: [selected.pk]},
        follow=True,
    )

    assert "Revoked 1 token(s)" in response.content.decode()
    assert dict(ApiToken.objects.values_list("name", "revoked")) == {
        "leaked": True,
        "kept": False,
    }
    assert (source_for_token(leaked), source_for_token(kept)) == (None, desk)
