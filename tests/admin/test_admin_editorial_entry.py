"""Editorial entry in the admin (issue 13, item 3): an editor types one record into a form,
or uploads a file of them from the editorial source's page, and each goes in through the
editorial API's own path: a source record with its provenance, a listing searchable at
once. A file's invalid rows come back with their number, content and reason; its valid
rows are ingested beside them. The result page's query count is pinned (item 7)."""

import json
from typing import TYPE_CHECKING, Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from ingestion.api import MAX_BODY_BYTES
from ingestion.models import Listing, QuarantinedItem, Source, SourceRecord
from ingestion.tasks import EMBED_SCHEDULED_KEY
from resilience.redis_clients import get_redis
from tests.admin_pages import EDITORS, OPS, client_of, make_roles, member_of
from tests.factories import source
from tests.search_fixtures import search_json

if TYPE_CHECKING:  # the test client's response type exists only in django-stubs
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

TITLE = "Lantern parade on the quay"
CSV = (
    "id,title,venue,start,timezone\n"
    "e-1,Harbour swim,The quay,2027-06-01T07:00,Europe/London\n"
    "e-2,Fish market tour,Fish market,2027-06-02T09:00,Europe/London\n"
    "e-3,,Lighthouse,2027-06-03T21:00,Europe/London\n"
)


@pytest.fixture
def desk() -> Source:
    return source("Listings desk", kind=Source.Kind.EDITORIAL)


@pytest.fixture
def editor() -> Client:
    return client_of(EDITORS)


def _add_url(desk: Source) -> str:
    return reverse("admin:ingestion_source_record_add", args=[desk.pk])


def _upload_url(desk: Source) -> str:
    return reverse("admin:ingestion_source_upload", args=[desk.pk])


def _record_form(**changes: str) -> dict[str, str]:
    form = {
        "id": "lantern-1",
        "title": TITLE,
        "description": "Paper lanterns along the harbour wall.",
        "venue": "The quay",
        "aliases": "Harbour wall\nQuayside",
        "start": "2027-11-05T18:30",
        "end": "",
        "timezone": "Europe/London",
        "url": "https://example.org/lanterns",
    }
    return {**form, **changes}


def _upload(client: Client, desk: Source, name: str, content: bytes) -> "TestResponse":
    return client.post(_upload_url(desk), {"file": SimpleUploadedFile(name, content)})


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_queued_embedding")
async def test_a_record_an_editor_types_in_is_searchable_at_once_with_its_provenance(
    async_client: AsyncClient,
) -> None:
    await sync_to_async(make_roles)()
    await async_client.aforce_login(await sync_to_async(member_of)(EDITORS))
    desk = await sync_to_async(source)("Listings desk", kind=Source.Kind.EDITORIAL)
    response = await async_client.post(_add_url(desk), _record_form())
    listing = await Listing.objects.aget(title=TITLE)
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:ingestion_listing_change", args=[listing.pk])

    body = await search_json(async_client, q=TITLE)
    assert [result["id"] for result in body["results"]] == [listing.pk]
    record = await SourceRecord.objects.aget(listing=listing)
    assert (record.source_id, record.external_id) == (desk.pk, "lantern-1")
    assert listing.aliases == ["Harbour wall", "Quayside"]
    assert listing.source_kinds == [Source.Kind.EDITORIAL]
    assert get_redis().exists(EMBED_SCHEDULED_KEY)  # its embedding is queued


@pytest.mark.django_db
def test_the_same_id_again_updates_the_record(editor: Client, desk: Source) -> None:
    editor.post(_add_url(desk), _record_form())
    editor.post(_add_url(desk), _record_form(title="Lantern parade, postponed"))
    assert list(Listing.objects.values_list("title", flat=True)) == ["Lantern parade, postponed"]


@pytest.mark.django_db
def test_a_record_the_parser_refuses_is_shown_back_with_reasons_and_nothing_is_stored(
    editor: Client, desk: Source
) -> None:
    response = editor.post(_add_url(desk), _record_form(timezone="", url="ftp://example.org"))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["start"] == ["no UTC offset, so timezone is required"]
    assert errors["url"] == ["must be http(s)"]
    assert not SourceRecord.objects.exists()
    assert not QuarantinedItem.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["csv", "json"])
def test_an_upload_ingests_its_valid_rows_and_shows_the_invalid_one_with_its_reason(
    editor: Client, desk: Source, kind: str
) -> None:
    if kind == "csv":
        name, content = "records.csv", CSV.encode()
    else:
        records: list[dict[str, Any]] = [
            {"id": "e-1", "title": "Harbour swim", "venue": "The quay"},
            {"id": "e-2", "title": "Fish market tour", "venue": "Fish market"},
            {"id": "e-3", "title": "", "venue": "Lighthouse"},
        ]
        name, content = "records.json", json.dumps(records).encode()
    response = _upload(editor, desk, name, content)
    assert response.status_code == 200
    assert set(Listing.objects.values_list("title", flat=True)) == {
        "Harbour swim",
        "Fish market tour",
    }
    assert set(SourceRecord.objects.filter(source=desk).values_list("external_id", flat=True)) == {
        "e-1",
        "e-2",
    }
    [row] = response.context["invalid"]
    assert (row.number, row.reason) == (3, "title: required")
    assert "Lighthouse" in row.excerpt
    page = response.content.decode()
    assert "<td>3</td>" in page
    assert "title: required" in page
    assert "Lighthouse" in page
    assert QuarantinedItem.objects.get(source=desk).external_id == "e-3"


@pytest.mark.django_db
def test_a_file_over_the_cap_is_refused_with_a_clear_error(editor: Client, desk: Source) -> None:
    response = _upload(editor, desk, "records.csv", CSV.encode() + b" " * MAX_BODY_BYTES)
    assert response.status_code == 200
    [error] = response.context["form"].errors["file"]
    assert f"may be {MAX_BODY_BYTES:,} at most" in error
    assert not SourceRecord.objects.exists()


@pytest.mark.django_db
def test_a_file_that_cannot_be_read_is_refused_whole(editor: Client, desk: Source) -> None:
    response = _upload(editor, desk, "records.csv", b"id,titel\ne-1,Harbour swim\n")
    [error] = response.context["form"].errors["file"]
    assert (
        error
        == "Nothing was ingested: CSV header: unknown columns: 'titel'; missing columns: title"
    )
    assert not SourceRecord.objects.exists()


@pytest.mark.django_db
def test_the_editorial_source_s_page_and_the_list_link_to_entry(
    editor: Client, desk: Source
) -> None:
    feed = source("Courier")
    page = editor.get(reverse("admin:ingestion_source_change", args=[desk.pk])).content.decode()
    assert _add_url(desk) in page
    assert _upload_url(desk) in page
    feed_page = editor.get(reverse("admin:ingestion_source_change", args=[feed.pk]))
    assert "/upload/" not in feed_page.content.decode()
    listed = editor.get(reverse("admin:ingestion_source_changelist")).content.decode()
    assert _add_url(desk) in listed
    assert _upload_url(desk) in listed


@pytest.mark.django_db
def test_ops_may_not_enter_records(desk: Source) -> None:
    ops = client_of(OPS)
    for url in (_add_url(desk), _upload_url(desk)):
        assert ops.get(url).status_code == 403
    assert ops.post(_add_url(desk), _record_form()).status_code == 403
    assert _upload(ops, desk, "records.csv", CSV.encode()).status_code == 403
    assert not SourceRecord.objects.exists()
    page = ops.get(reverse("admin:ingestion_source_change", args=[desk.pk])).content.decode()
    assert _upload_url(desk) not in page


@pytest.mark.django_db
def test_a_feed_takes_no_entered_records(editor: Client) -> None:
    feed = source("Courier")
    assert editor.post(_add_url(feed), _record_form()).status_code == 404


@pytest.mark.django_db
def test_the_upload_result_page_is_a_fixed_number_of_queries(
    editor: Client, desk: Source, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    rows = [f"e-{number},{'' if number % 3 == 0 else f'Talk {number}'}" for number in range(300)]
    content = ("id,title\n" + "\n".join(rows)).encode()
    # The user and their permissions (two), then one transaction: its savepoint, the poll,
    # the records' upsert statements, the quarantine, the poll's counts, and its release;
    # then the listings made searchable. None per row.
    with django_assert_num_queries(14):
        response = _upload(editor, desk, "records.csv", content)
    assert len(response.context["invalid"]) == 100
    assert Listing.objects.count() == 200
