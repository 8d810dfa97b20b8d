"""POST /api/editorial/records: token auth, per-record results, quarantine with retry."""

import json
from typing import TYPE_CHECKING

import pytest
from django.test import Client

from ingestion.models import ApiToken, Listing, QuarantinedItem, Source
from ingestion.retrying import retry_record
from ingestion.tokens import create_token

if TYPE_CHECKING:  # the test client's response type exists only in django-stubs
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db
URL = "/api/editorial/records"


@pytest.fixture
def token() -> str:
    desk = Source.objects.create(name="Upstream CMS", kind=Source.Kind.EDITORIAL)
    return create_token("cms", desk)


def _post(client: Client, body: object, token: str | None) -> "TestResponse":
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(URL, json.dumps(body), content_type="application/json", headers=headers)


def test_it_requires_a_valid_token(client: Client, token: str) -> None:
    assert _post(client, [], None).status_code == 401
    assert _post(client, [], "not-the-token").status_code == 401
    assert Listing.objects.count() == 0


def test_a_revoked_token_is_refused_from_the_next_request(client: Client, token: str) -> None:
    assert _post(client, [], token).status_code == 200
    ApiToken.objects.update(revoked=True)

    response = _post(client, [{"id": "late", "title": "After revocation"}], token)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="editorial"'
    assert Listing.objects.count() == 0


def test_a_wrong_token_of_the_right_length_is_refused(client: Client, token: str) -> None:
    last = "A" if token[-1] != "A" else "B"
    assert _post(client, [], token[:-1] + last).status_code == 401
    assert _post(client, [], token).status_code == 200


def test_it_reports_a_result_per_record(client: Client, token: str) -> None:
    records = [
        {"id": "n1", "title": "Organ recital", "start": "2027-02-01T18:00:00+00:00"},
        {"id": "n2", "title": "Talk", "url": "javascript:alert(1)"},
        {"id": "n3", "title": "Book club"},
    ]
    response = _post(client, {"records": records}, token)
    assert response.status_code == 200
    body = response.json()
    assert [r["outcome"] for r in body["results"]] == ["new", "quarantined", "new"]
    assert "url" in body["results"][1]["error"]
    assert body["counts"]["items"] == 3
    assert set(Listing.objects.values_list("title", flat=True)) == {"Organ recital", "Book club"}


def test_bad_bodies_get_a_clear_400(client: Client, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    response = client.post(URL, b"{not json", content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]
    assert _post(client, {"records": "nope"}, token).status_code == 400


def test_a_body_under_the_api_s_own_cap_is_read_by_the_api(client: Client, token: str) -> None:
    """3 MB is under the API's 5 MB cap but over Django's default 2.5 MB for a request
    body, which answered with an HTML 400 of its own before the view ran."""
    padding = " " * (3 * 1024 * 1024)
    body = json.dumps([{"id": "big", "title": "Padded recital"}]) + padding
    headers = {"Authorization": f"Bearer {token}"}
    response = client.post(URL, body, content_type="application/json", headers=headers)
    assert response.status_code == 200, response.content[:200]
    assert response.json()["results"][0]["outcome"] == "new"


def test_a_posted_record_never_supersedes_earlier_quarantine(client: Client, token: str) -> None:
    _post(client, [{"id": "bad", "title": ""}], token)
    _post(client, [{"id": "other", "title": "Fine"}], token)
    assert QuarantinedItem.objects.filter(resolved_at=None).count() == 1


def test_an_editor_can_correct_a_quarantined_record_and_retry(client: Client, token: str) -> None:
    _post(client, [{"id": "late", "title": "", "venue": "Crypt"}], token)
    item = QuarantinedItem.objects.get()
    assert "still invalid" in retry_record(item)
    item.raw = json.dumps({"id": "late", "title": "Evensong", "venue": "Crypt"})
    assert retry_record(item) == "ingested (new)"
    item.refresh_from_db()
    assert item.resolved_at is not None
    assert Listing.objects.get().title == "Evensong"
