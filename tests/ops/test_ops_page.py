"""The ops page (ops/page.py): who may open it, and that it shows what searches
just did, a degraded one included, from the roll-ups this process flushes as the page
loads. Through the real view, Postgres, Valkey and the real model."""

import json
import math
import re
from collections.abc import Callable

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from django.utils import timezone

from evaluation.models import EvaluationRun, EvaluationSet
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.generations import ensure_active_generation
from ingestion.models import Listing, QuarantinedItem, Source
from ingestion.pacing import Mode, Pace, report_pace
from ops.history import interpolated
from ops.rollup_writer import RollupWriter
from resilience import redis_keys
from resilience.redis_clients import fast_redis
from tests import factories, ops_personas
from tests.conftest import SHORT_TIMEOUT_MS
from tests.search_fixtures import about_results, embeddings_locked, search_json


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_log_in(client: Client) -> None:
    response = client.get("/ops/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/ops/"


@pytest.mark.django_db
def test_staff_without_the_permission_are_refused(client: Client) -> None:
    client.force_login(ops_personas.staff_without_ops())

    assert client.get("/ops/").status_code == 403
    assert "/ops/" not in client.get("/admin/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("persona", [ops_personas.ops_member, ops_personas.superuser])
def test_ops_members_and_superusers_see_it_linked_from_the_admin_index(
    client: Client, persona: Callable[[], User]
) -> None:
    client.force_login(persona())

    response = client.get("/ops/")
    assert response.status_code == 200
    assert "How search is doing" in response.content.decode()
    assert 'href="/ops/"' in client.get("/admin/").content.decode()


def test_percentiles_interpolate_inside_the_bucket_the_rank_falls_in() -> None:
    cumulative = [(0.01, 2.0), (0.02, 10.0), (math.inf, 10.0)]

    assert interpolated(0.5, cumulative) == pytest.approx(0.01 + 0.01 * 3 / 8)
    assert interpolated(0.1, cumulative) == pytest.approx(0.005)
    assert interpolated(0.99, [(0.01, 0.0), (math.inf, 4.0)]) == 0.01  # past the last bound
    assert interpolated(0.5, [(0.01, 0.0), (math.inf, 0.0)]) is None


def legend(html: str, chart_id: str) -> dict[str, str]:
    """A chart's legend as the page shows it: line name -> "3 in all", "highest 12"."""
    figure = html.split(f'id="{chart_id}"', 1)[1].split("</figure>", 1)[0]
    items = re.findall(r"</span>([^<:]+): ([^<]+)</li>", figure)
    return dict(items)


@pytest.mark.django_db(transaction=True)
async def test_the_page_shows_the_searches_just_made_a_degraded_one_included(
    async_client: AsyncClient,
    patient_search: None,
    warmed_up: None,
    test_database_url: str,
    own_rollup_writer: RollupWriter,
) -> None:
    hybrid = await search_json(async_client, q="organ recital")
    async with embeddings_locked(test_database_url):
        # The same query: its embedding is cached, so the stage reaches its statement.
        degraded = await search_json(async_client, q="organ recital", timeout_ms=SHORT_TIMEOUT_MS)
    await async_client.aforce_login(await sync_to_async(ops_personas.ops_member)())

    response = await async_client.get("/ops/")

    assert response.status_code == 200
    assert hybrid["mode"] == "hybrid"
    assert about_results(degraded["reasons"]) == ["vector_timeout"]
    fallback = degraded["mode"]  # cache_fallback: the hybrid answer was just cached
    html = response.content.decode()
    assert legend(html, "answers-last-hour") == {
        "hybrid": "1 in all",
        fallback: "1 in all",
        "503 (no answer in time, or shed)": "0 in all",
    }
    reasons = legend(html, "reasons-last-hour")
    assert {r: reasons[r] for r in about_results(reasons)} == {"vector_timeout": "1 in all"}
    assert legend(html, "answers-last-day")[fallback] == "1 in all"
    assert legend(html, "exhausted-last-hour") == {"exhausted / eligible": "highest 0.5"}
    assert set(legend(html, "latency-last-hour")) == {"p50", "p95", "p99"}
    assert "objective 10000" in html  # SEARCH_DEADLINE_MS (patient_search), on the latency chart
    assert "50% of answers" in html  # the fallback share


@pytest.mark.django_db
def test_the_state_now_quarantine_coverage_backlog_and_the_latest_guardrail(
    client: Client,
) -> None:
    calendar = factories.source("Venue calendar", Source.Kind.CALENDAR)
    QuarantinedItem.objects.create(source=calendar, reason="no date")
    QuarantinedItem.objects.create(source=calendar, reason="no title")
    QuarantinedItem.objects.create(source=calendar, reason="fixed", resolved_at=timezone.now())
    generation = ensure_active_generation(MODEL_NAME, DIMENSIONS)
    for title in ("Organ recital", "Jazz night"):  # fetched, committed, not yet embedded
        Listing.objects.create(title=title, fetched_kind="feed")
    judged = EvaluationSet.objects.create(
        name="tiny", layout="beir", source=factories.source(), imported_at=timezone.now()
    )
    EvaluationRun.objects.create(
        evaluation_set=judged,
        kind=EvaluationRun.Kind.GUARDRAIL,
        finished_at=timezone.now(),
        k=10,
        query_count=12,
        figures={"paths": {"hybrid": {"recall@10": 0.9}, "lexical_fallback": {"recall@10": 0.6}}},
    )
    client.force_login(ops_personas.ops_member())

    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/ops/").content.decode()))

    assert f"Active generation {generation.pk} ({MODEL_NAME}): 0 of 2 listings embedded" in text
    assert "Open quarantine calendar 2 " in text
    assert "feed 2 " in text  # the vector backlog: two feed listings waiting
    assert "hybrid recall@10 0.900, lexical_fallback recall@10 0.600 (12 queries" in text


@pytest.mark.django_db
def test_the_page_says_when_vector_work_yields_to_searches(client: Client) -> None:
    client.force_login(ops_personas.ops_member())

    def vector_work() -> str:
        html = client.get("/ops/").content.decode()
        found = re.search(r'<dd id="vector-pace"[^>]*>(.*?)</dd>', html)
        assert found is not None
        return found.group(1)

    assert vector_work() == "no embedding sweep running"
    report_pace(Pace(Mode.SHARED, 0.25, 10.0))
    assert vector_work() == "yielding to searches: at most 25% of the time"
    # The floor the sweep last reported: what its backlog needed, not the setting.
    report_pace(Pace(Mode.FLOOR, 0.01, 21.4))
    assert vector_work() == "yielding to searches: its floor, 21 listings a second"
    # As a worker of the release before reported it, without its floor: the setting's.
    fast_redis().set(redis_keys.VECTOR_PACE, json.dumps({"mode": "floor", "share": 0.01}))
    floor = f"{settings.EMBED_FLOOR_PER_S:.0f}"
    assert vector_work() == f"yielding to searches: its floor, {floor} listings a second"
