"""`manage.py import_collection`: hand-made collections (the readers' own fixtures) into
evaluation sets, through the real ingestion path and the real model."""

from io import StringIO
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import AsyncClient

from evaluation.collections import CollectionError
from evaluation.importing import ImportReport, import_collection
from evaluation.models import EvaluationSet
from ingestion import generations
from ingestion.models import Audience, Listing, ListingEmbedding, Source
from tests.conftest import first_search_answered
from tests.evaluation.test_collections import beir, cranfield, write
from tests.search_fixtures import index_listings, search_json

pytestmark = pytest.mark.django_db(transaction=True)


def stored(name: str) -> tuple[list[tuple[str, str]], set[tuple[str, str, bool]]]:
    evaluation_set = EvaluationSet.objects.get(name=name)
    queries = list(evaluation_set.queries.order_by("pk").values_list("external_id", "text"))
    judgments = set(evaluation_set.judgments.values_list("query_id", "document_id", "relevant"))
    return queries, judgments


def listings_of(name: str) -> dict[str, Listing]:
    """The set's listings by document id."""
    source = Source.objects.get(name=f"evaluation: {name}")
    return {
        record.external_id: record.listing
        for record in source.records.select_related("listing")
        if record.listing is not None
    }


def embedded_in(listing_ids: set[int]) -> set[int]:
    return set(
        ListingEmbedding.objects.filter(listing_id__in=listing_ids).values_list(
            "generation_id", flat=True
        )
    )


def test_it_imports_a_cranfield_collection(tmp_path: Path) -> None:
    report = import_collection(cranfield(tmp_path / "cran"), progress=False)

    # Document 2 has neither title nor text: quarantined by the ingestion path, counted.
    assert report.documents == {"new": 2, "updated": 0, "unchanged": 0, "quarantined": 1}
    assert (report.evaluation_set.name, report.evaluation_set.layout) == ("cran", "cranfield")
    listings = listings_of("cran")
    assert sorted(listings) == ["1", "3"]
    assert listings["1"].title == "tidal flow past a quay wall ."
    assert {listing.audience for listing in listings.values()} == {
        Audience.of_evaluation_set("cran")
    }
    judged_generation = generations.active_generation(Audience.of_evaluation_set("cran"))
    assert judged_generation is not None
    assert embedded_in({listing.pk for listing in listings.values()}) == {judged_generation.pk}
    assert ListingEmbedding.objects.filter(generation=judged_generation).count() == 2
    assert stored("cran") == (
        [("2", "what loads do gusts put on kites ."), ("3", "are there empty papers .")],
        {("2", "3", True), ("2", "1", False), ("3", "2", True), ("3", "3", False)},
    )
    source = Source.objects.get(name="evaluation: cran")
    assert (source.kind, source.active, source.url) == (Source.Kind.EDITORIAL, False, "")


def test_the_command_imports_a_beir_collection_under_its_name(tmp_path: Path) -> None:
    out = StringIO()

    call_command("import_collection", str(beir(tmp_path / "b")), "--name", "mine", stdout=out)

    assert out.getvalue().strip() == (
        "mine (beir): documents new=3 updated=0 unchanged=0 quarantined=0;"
        " queries=3 judged_pairs=4; skipped judgments: unknown_documents=0 unknown_queries=0"
    )
    listings = listings_of("mine")
    assert sorted(listings) == ["3", "d1", "d2"]
    assert listings["d2"].title == "No title here."  # a title from the text, not quarantined
    assert {listing.audience for listing in listings.values()} == {
        Audience.of_evaluation_set("mine")
    }
    assert stored("mine") == (
        [("q1", "walks by water"), ("q2", "untitled"), ("q3", "never judged")],
        {("q1", "d1", True), ("q1", "d2", False), ("q2", "3", True), ("q2", "d1", True)},
    )


def test_reimporting_changes_nothing(tmp_path: Path) -> None:
    folder = beir(tmp_path / "b")
    import_collection(folder, progress=False)
    before = ({i: listing.pk for i, listing in listings_of("b").items()}, stored("b"))
    embeddings = list(ListingEmbedding.objects.order_by("pk").values_list("pk", "embedded_at"))

    again: ImportReport = import_collection(folder, progress=False)

    assert again.documents == {"new": 0, "updated": 0, "unchanged": 3, "quarantined": 0}
    assert again.embedded == 0
    assert ({i: listing.pk for i, listing in listings_of("b").items()}, stored("b")) == before
    assert Listing.objects.count() == 3
    assert list(ListingEmbedding.objects.order_by("pk").values_list("pk", "embedded_at")) == (
        embeddings
    )
    assert EvaluationSet.objects.count() == Source.objects.count() == 1


def test_qids_restrict_the_queries_and_judgments(tmp_path: Path) -> None:
    folder = cranfield(tmp_path / "cran")
    import_collection(folder, progress=False)
    only_two = write(tmp_path, "mine.txt", "2\n")

    report = import_collection(folder, qids=only_two, chunk_size=2, progress=False)

    assert (report.queries, report.judged_pairs) == (1, 2)
    # The earlier import's query 3 and its judgments are gone, not kept beside.
    assert stored("cran") == (
        [("2", "what loads do gusts put on kites .")],
        {("2", "3", True), ("2", "1", False)},
    )
    assert report.documents == {"new": 0, "updated": 0, "unchanged": 2, "quarantined": 1}
    # Document 2's quarantine entry is the latest import's alone, not one per import.
    source = Source.objects.get(name="evaluation: cran")
    assert source.quarantine.filter(resolved_at=None).count() == 1


def test_it_refuses_to_import_into_a_public_source_of_the_same_name(tmp_path: Path) -> None:
    Source.objects.create(name="evaluation: b", kind=Source.Kind.EDITORIAL, url="")

    with pytest.raises(CollectionError, match="is not an evaluation source"):
        import_collection(beir(tmp_path / "b"), progress=False)

    assert not Listing.objects.exists()  # nothing published on the way


JUDGED_TITLE = "Organ recital of heated aircraft wings"


@pytest.mark.usefixtures("patient_search")
async def test_a_public_search_never_finds_an_imported_document(
    tmp_path: Path, async_client: AsyncClient
) -> None:
    folder = tmp_path / "wings"
    write(folder, "corpus.jsonl", f'{{"_id": "w1", "title": "{JUDGED_TITLE}", "text": ""}}\n')
    write(folder, "queries.jsonl", '{"_id": "q1", "text": "organ recital"}\n')
    write(folder, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\tw1\t1\n")
    await sync_to_async(index_listings)()  # public, with "Organ recital" among them
    await sync_to_async(import_collection)(folder, progress=False)
    judged = await Listing.objects.aget(title=JUDGED_TITLE)
    await first_search_answered(async_client)  # the model load and the pool: not measured

    body = await search_json(async_client, q=JUDGED_TITLE, timeout_ms="1000")

    assert body["mode"] == "hybrid", body  # both stages answered, and neither had it
    titles = [result["title"] for result in body["results"]]
    assert "Organ recital" in titles
    assert judged.pk not in [result["id"] for result in body["results"]]
