"""`manage.py evaluate` and the recall guardrail on a small hand-made collection, through
the real import, the real search paths, the real model and a real Celery worker."""

import json
import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from evaluation.importing import import_collection
from evaluation.models import EvaluationRun, EvaluationSet
from evaluation.runs import evaluate
from ingestion.models import Listing
from tests.conftest import wait_until
from tests.evaluation.test_collections import write
from tests.scraping import scrape_sync

pytestmark = pytest.mark.django_db(transaction=True)

# Imported in this order, so the last document is the newest tenth: the one the
# simulated cache never saw.
DOCUMENTS = [
    ("d1", "Canal towpath walk", "A guided walk along the canal towpath past old locks."),
    ("d2", "Organ recital", "Bach and Buxtehude on the cathedral organ."),
    ("d3", "Jazz quartet", "A jazz quartet plays standards at the riverside bar."),
    ("d4", "Pottery workshop", "Learn to throw clay pots on the wheel."),
    ("d5", "Night market", "Street food stalls and music at the night market."),
    ("d6", "Choir evensong", "The cathedral choir sings evensong."),
    ("d7", "Film screening", "A silent film with live piano accompaniment."),
    ("d8", "Poetry reading", "Local poets read new work in the library."),
    ("d9", "Bird watching", "Spot herons and kingfishers by the reservoir."),
    ("d10", "Lantern parade", "Children carry paper lanterns through the old town at dusk."),
]
# Natural-language questions: no document holds every term of any of them.
QUERIES = {
    "q1": "where can I walk my dog along the canal",
    "q2": "cathedral organ music tonight",
    "q3": "a paper lantern parade for the children this winter",
    "q4": "jazz by the river on sunday",
}
RELEVANT = {"q1": "d1", "q2": "d2", "q3": "d10", "q4": "d3"}
PATHS = ["lexical", "vector", "hybrid", "lexical_fallback", "cache_fallback"]


@pytest.fixture
def collection(tmp_path: Path) -> EvaluationSet:
    folder = tmp_path / "events"
    write(
        folder,
        "corpus.jsonl",
        "".join(
            json.dumps({"_id": i, "title": title, "text": text}) + "\n"
            for i, title, text in DOCUMENTS
        ),
    )
    write(
        folder,
        "queries.jsonl",
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()),
    )
    write(
        folder,
        "qrels/test.tsv",
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in RELEVANT.items()),
    )
    return import_collection(folder, progress=False).evaluation_set


def test_json_prints_exactly_the_five_paths_and_the_slices(collection: EvaluationSet) -> None:
    out = StringIO()
    call_command("evaluate", "--collection", "events", "--json", stdout=out)

    printed = json.loads(out.getvalue())
    assert list(printed) == ["paths", "slices"]
    assert list(printed["paths"]) == PATHS
    for figures in printed["paths"].values():
        assert list(figures) == ["recall@10", "ndcg@10", "mrr@10"]
    assert set(printed["slices"]) == {"query_class", "freshness", "variants"}
    assert list(printed["slices"]["freshness"]) == ["fresh", "rest"]


def test_every_path_answers_questions_no_document_matches_in_full(
    collection: EvaluationSet,
) -> None:
    report = evaluate(collection, k=3)

    assert report.failures == dict.fromkeys([*PATHS, "cache_fallback_without_merge"], 0)
    # Lexical ranking of partial matches: requiring every term found nothing here.
    assert report.paths["lexical"]["recall@3"] == 1.0
    assert report.paths["lexical_fallback"] == report.paths["lexical"]
    assert report.paths["hybrid"]["recall@3"] == 1.0
    assert report.slices["query_class"]["long"]["queries"] == 4


def test_the_freshness_slice_shows_what_the_merge_of_fresh_lexical_hits_buys(
    collection: EvaluationSet,
) -> None:
    report = evaluate(collection, k=3)

    fresh, rest = report.slices["freshness"]["fresh"], report.slices["freshness"]["rest"]
    assert (report.fresh_documents, fresh["queries"], rest["queries"]) == (1, 1, 3)
    # The cached ranking was made before the lantern parade arrived: alone it cannot
    # find it, merged with what lexical finds now it does.
    assert fresh["cache_fallback_without_merge"]["recall@3"] == 0.0
    assert fresh["cache_fallback"]["recall@3"] == 1.0
    assert rest["cache_fallback_without_merge"]["recall@3"] == 1.0


def test_an_evaluation_is_kept_and_counts_nothing_as_public_traffic(
    collection: EvaluationSet, client: Client
) -> None:
    before = scrape_sync(client)
    evaluate(collection, k=3)
    after = scrape_sync(client)

    run = EvaluationRun.objects.get()
    assert (run.kind, run.k, run.query_count) == ("evaluate", 3, 4)
    assert set(run.figures["paths"]) == set(PATHS)  # jsonb keeps no key order
    for name in (
        "retrieval_vector_eligible_total",
        "retrieval_vector_budget_exhausted_total",
        "retrieval_stage_seconds_count",
        "retrieval_local_deadline_exhausted_total",
    ):
        assert after.total_since(before, name) == 0, name


def test_the_guardrail_runs_on_a_worker_and_its_result_is_shown_and_exported(
    collection: EvaluationSet,
    celery_worker: subprocess.Popen[bytes],
    client: Client,
    settings: object,
) -> None:
    with pytest.raises(CommandError, match="no recall guardrail has run yet"):
        call_command("evaluate", "--last")
    from evaluation.tasks import recall_guardrail

    recall_guardrail.delay()
    wait_until(
        lambda: EvaluationRun.objects.filter(kind="guardrail").exists(), 60, "the guardrail run"
    )

    run = EvaluationRun.objects.get(kind="guardrail")
    # The worker's default sample (20) is more than the set has: every judged query.
    assert run.query_count == 4
    assert set(run.figures["paths"]) == {"hybrid", "lexical_fallback", "cache_fallback"}
    out = StringIO()
    call_command("evaluate", "--last", stdout=out)
    assert "recall guardrail on events" in out.getvalue()
    assert "lexical_fallback" in out.getvalue()
    scraped = scrape_sync(client)
    for mode, figures in run.figures["paths"].items():
        assert scraped.value("evaluation_guardrail_recall_at_10", mode=mode) == pytest.approx(
            figures["recall@10"]
        )
    assert scraped.value("evaluation_guardrail_queries") == 4


def test_a_guardrail_samples_at_most_its_configured_queries(
    collection: EvaluationSet, settings: object
) -> None:
    from evaluation import guardrail

    settings.EVALUATION_GUARDRAIL_QUERIES = 2  # type: ignore[attr-defined]
    report = guardrail.run()

    assert report is not None
    assert report.queries == 2
    assert EvaluationRun.objects.get().query_count == 2


def test_a_set_is_scored_on_its_own_documents_whatever_else_is_imported(
    collection: EvaluationSet, tmp_path: Path
) -> None:
    alone = evaluate(collection, k=3)
    # A second collection holding the same documents under other ids: in a shared
    # audience they would be merged with these, or outrank them, and score as misses.
    folder = tmp_path / "twin"
    write(
        folder,
        "corpus.jsonl",
        "".join(
            json.dumps({"_id": f"twin-{i}", "title": title, "text": text}) + "\n"
            for i, title, text in DOCUMENTS
        ),
    )
    write(folder, "queries.jsonl", json.dumps({"_id": "t1", "text": "canal"}) + "\n")
    write(folder, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nt1\ttwin-d1\t1\n")
    twin = import_collection(folder, progress=False).evaluation_set

    assert twin.source.audience != collection.source.audience
    assert evaluate(collection, k=3).paths == alone.paths


def test_fresh_can_mean_ingested_in_the_last_minutes(collection: EvaluationSet) -> None:
    mine = Listing.objects.filter(records__source=collection.source)
    mine.update(created_at=timezone.now() - timedelta(hours=2))
    mine.filter(records__external_id__in=["d3", "d10"]).update(created_at=timezone.now())

    report = evaluate(collection, k=3, fresh_minutes=60)

    fresh = report.slices["freshness"]["fresh"]
    assert (report.fresh_documents, fresh["queries"]) == (2, 2)  # q3 -> d10, q4 -> d3
    assert fresh["cache_fallback_without_merge"]["recall@3"] == 0.0
    assert fresh["cache_fallback"]["recall@3"] > 0


def test_a_running_canary_has_the_guardrail_served_under_each_arms_budgets(
    collection: EvaluationSet,
) -> None:
    from evaluation import guardrail
    from retrieval.models import Canary

    assert guardrail.run_arms() is None  # no canary runs
    # A canary whose deadline leaves its searches no time: every one a 503, nothing shown.
    canary = Canary.objects.create(
        vector_budget_ms=5.0,
        deadline_ms=1.0,
        share=0.1,
        control_vector_budget_ms=1000.0,
        control_deadline_ms=5000.0,
    )

    figures = guardrail.run_arms()

    canary.refresh_from_db()
    assert canary.guardrail == figures
    assert figures is not None
    assert figures["queries"] == 4
    assert figures["canary"] == 0.0
    assert figures["control"] == 1.0  # each question's one document, as hybrid finds it
