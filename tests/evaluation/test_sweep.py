"""The budget sweep's pieces: the loopback guard, the figures of hand-made answers, the
recommendation rule, the plot, and the clean-up of the ingest stream. The sweep itself
runs against a live system (`manage.py sweep_budgets`), which is not a test."""

import asyncio
import json
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation.sweep import (
    Answer,
    BudgetFigures,
    NotLoopbackError,
    budget_figures,
    loopback_base_url,
    recommend,
)
from evaluation.sweep_plot import plot_sweep
from evaluation.sweep_run import BREAKER_SETTLE_S, cached_rankings_pattern, fresh_start
from evaluation.sweep_stream import (
    STREAM_SOURCE,
    IngestFigures,
    IngestStream,
    fresh_stream_source,
    remove_stream,
    stream_texts,
)
from evaluation.views import BREAKER_KEY
from ingestion.models import Audience, Listing, Source, SourceRecord
from ingestion.tokens import create_token
from ingestion.upsert import apply_draft
from resilience.redis_clients import get_redis
from retrieval.cache import cache_key
from retrieval.query.parse import parse_query
from tests.factories import draft


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "http://127.8.9.10:8770/",
        "http://[::1]:8790",
        "http://localhost:8000",
        "https://localhost",
        "http://[::ffff:127.0.0.1]:8000",
    ],
)
def test_loopback_targets_are_allowed(url: str) -> None:
    assert loopback_base_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.8:8000",  # private
        "http://192.168.1.20",
        "http://172.16.0.1",
        "http://169.254.169.254",  # link-local: a cloud's metadata service
        "http://8.8.8.8",
        "http://0.0.0.0:8000",  # every interface, not loopback
        "http://[::ffff:10.0.0.1]",
        "http://[fe80::1]",
        "http://example.com",
        "http://127.0.0.1.nip.io",  # a name that merely starts like loopback
        "http://127.0.0.1@example.com",  # user info: the host is example.com
        "ftp://127.0.0.1",
        "http://127.0.0.1:8000/?next=http://example.com",
        "127.0.0.1:8000",  # no scheme
    ],
)
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(NotLoopbackError):
        loopback_base_url(url)


JUDGMENTS = {"q1": {"a", "b"}, "q2": {"c"}}


def test_figures_of_hand_made_answers() -> None:
    # 100 requests taking 1..100 ms: nearest-rank percentiles are latencies really seen.
    answers = [Answer("q1", 0, float(ms), 200, "hybrid", (), ("a", "b")) for ms in range(1, 101)]
    answers[:10] = [
        Answer("q2", 0, 1.0, 200, "lexical_fallback", ("vector_timeout",), ("c",)),
        Answer("q2", 0, 2.0, 200, "cache_fallback", ("embed_timeout",), ()),
        Answer("q2", 0, 3.0, 200, "lexical_fallback", ("shed",), ("c",)),
        Answer("q2", 0, 4.0, 200, "lexical_fallback", ("breaker_open",), ("c",)),
        Answer("q2", 0, 5.0, 200, "lexical_fallback", ("no_budget",), ("c",)),
        Answer("q2", 0, 6.0, 503, None, ("vector_timeout", "lexical_timeout")),
        Answer("q2", 0, 7.0, 0),  # no response at all
        Answer("q2", 0, 8.0, 500),
        Answer("q2", 0, 9.0, 200, "hybrid", (), ("x", "c")),
        Answer("q2", 0, 10.0, 200, "hybrid", (), ()),
    ]
    figures = budget_figures(20.0, answers, JUDGMENTS, reference_recall=1.0)
    assert figures.requests == 100
    assert figures.latency_ms == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert figures.outcomes == {
        "cache_fallback": 0.01,
        "failed": 0.02,
        "hybrid": 0.92,
        "lexical_fallback": 0.04,
        "unavailable": 0.01,
    }
    assert figures.fallback_share == pytest.approx(0.08)
    assert figures.reasons == {
        "breaker_open": 0.01,
        "embed_timeout": 0.01,
        "lexical_timeout": 0.01,
        "no_budget": 0.01,
        "shed": 0.01,
        "vector_timeout": 0.02,
    }
    # Started: 100 less 3 never started and 2 that told nothing; exhausted: two timeouts
    # and the 503's.
    assert figures.vector_started == 95
    assert figures.exhausted_ratio == pytest.approx(3 / 95)
    assert figures.unavailable == 1


def test_recall_is_the_mean_over_the_passes_and_a_503_scores_zero() -> None:
    answers = [
        Answer("q1", 0, 1.0, 200, "hybrid", (), ("a", "b")),
        Answer("q2", 0, 1.0, 200, "hybrid", (), ("c",)),
        Answer("q1", 1, 1.0, 200, "lexical_fallback", ("vector_timeout",), ("a",)),
        Answer("q2", 1, 1.0, 503, None, ("vector_timeout", "lexical_timeout")),
    ]
    reference = budget_figures(10_000.0, answers[:2], JUDGMENTS, reference_recall=None)
    assert (reference.recall, reference.recall_loss) == (1.0, None)
    figures = budget_figures(5.0, answers, JUDGMENTS, reference_recall=reference.recall)
    assert figures.recall == pytest.approx((1.0 + (0.5 + 0.0) / 2) / 2)
    assert figures.recall_loss == pytest.approx(1.0 - 0.625)
    assert figures.exhausted_ratio == 0.5


def test_no_started_vector_stage_has_no_exhausted_ratio() -> None:
    answers = [Answer("q1", 0, 1.0, 200, "lexical_fallback", ("shed",), ("a",))]
    assert budget_figures(5.0, answers, JUDGMENTS, 1.0).exhausted_ratio is None


def _figures(budget: float, *, loss: float = 0.0, exhausted: float | None = 0.0) -> BudgetFigures:
    return BudgetFigures(
        vector_budget_ms=budget,
        requests=100,
        latency_ms={"p50": budget / 2, "p95": budget, "p99": budget + 5},
        outcomes={"hybrid": 1.0},
        fallback_share=exhausted or 0.0,
        reasons={},
        vector_started=100,
        exhausted_ratio=exhausted,
        unavailable=0,
        recall=0.5 - loss,
        recall_loss=loss,
    )


def test_the_recommendation_is_one_step_inside_the_stable_region() -> None:
    budgets = [
        _figures(5, loss=0.08, exhausted=0.6),
        _figures(10, exhausted=0.12),
        _figures(20, exhausted=0.03),
        _figures(40, exhausted=0.01),
        _figures(60),
        _figures(100),
    ]
    recommendation = recommend(budgets)
    assert recommendation.vector_budget_ms == 40
    assert recommendation.warning is None
    verdicts = {v.vector_budget_ms: v for v in recommendation.verdicts}
    assert [v.vector_budget_ms for v in recommendation.verdicts] == [5, 10, 20, 40, 60, 100]
    assert not verdicts[5].passes
    assert "recall loss 0.080 > 0.01" in verdicts[5].why
    assert "exhausted 60.0% of started > 5%" in verdicts[5].why
    assert "exhausted 12.0%" in verdicts[10].why
    assert verdicts[20].passes
    assert "edge" in verdicts[20].why  # passes, but nothing below it does: no margin
    assert verdicts[40].why.startswith("recommended")
    assert "20 ms" in verdicts[40].why


def test_a_lucky_budget_below_a_failing_one_is_not_a_stable_region() -> None:
    budgets = [
        _figures(5, exhausted=0.5),
        _figures(10),  # passes by luck, just past a sharp knee
        _figures(20, loss=0.02),
        _figures(40),
        _figures(60),
        _figures(100),
    ]
    recommendation = recommend(budgets)
    assert recommendation.vector_budget_ms == 60
    verdict_10 = recommendation.verdicts[1]
    assert verdict_10.passes
    assert "20 ms fails" in verdict_10.why


def test_a_region_of_one_budget_comes_with_a_warning_and_none_with_nothing() -> None:
    knee = recommend([_figures(5, exhausted=0.5), _figures(10, exhausted=0.2), _figures(20)])
    assert knee.vector_budget_ms == 20
    assert knee.warning is not None
    assert "sweep larger budgets" in knee.warning
    failing = recommend([_figures(5, exhausted=0.5), _figures(10, exhausted=None)])
    assert failing.vector_budget_ms is None
    assert "no vector stage was started" in failing.verdicts[1].why


def test_every_budget_passing_still_keeps_a_step_of_margin() -> None:
    assert recommend([_figures(b) for b in (5, 10, 20)]).vector_budget_ms == 10


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    reference = replace(_figures(10_000), recall_loss=None)
    budgets = [_figures(5, loss=0.1, exhausted=0.5), _figures(20), _figures(60)]
    path = tmp_path / "sweep.png"
    plot_sweep(path, reference, budgets, title="cranfield: concurrency 8", recommended_ms=20)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # two panels with points and labels, not an empty canvas


def test_the_cache_pattern_matches_the_generations_keys_only() -> None:
    query = parse_query("heated aircraft models", "10")
    assert fnmatchcase(cache_key(query, 7), cached_rankings_pattern(7))
    assert not fnmatchcase(cache_key(query, 71), cached_rankings_pattern(7))


def test_stream_texts_are_real_listings_when_present_else_generated(tmp_path: Path) -> None:
    (tmp_path / "1.json").write_text('{"name": "St Bride\'s Church", "description": "Wren"}')
    assert stream_texts(tmp_path) == [("St Bride's Church", "Wren")]
    generated = stream_texts(tmp_path / "absent")
    assert len(set(generated)) == len(generated) > 10


@pytest.mark.django_db
def test_the_stream_leaves_nothing_behind_but_what_others_share() -> None:
    other = Audience.of_evaluation_set("other")
    # A listing loaded without records before the stream (as a bench database's are).
    before = Listing.objects.create(title="Choral evensong", audience=other, starts_at=None)
    stream = fresh_stream_source(other)
    create_token("stream", stream)
    judged = Source.objects.create(
        name="evaluation: other", kind=Source.Kind.EDITORIAL, audience=other
    )
    with transaction.atomic():
        now = timezone.now()
        apply_draft(stream, draft("s1", title="Organ recital"), now)
        apply_draft(stream, draft("s2", title="Guided tour of the crypt"), now)
        apply_draft(judged, draft("o1", title="Organ recital"), now)  # merged into s1's
        apply_draft(stream, draft("s3", title="Choral Evensong", starts_at=None), now)
    assert Listing.objects.get(records__external_id="s3") == before  # merged into it
    # A record whose listing is gone (it was deleted): no listing id to keep.
    SourceRecord.objects.create(source=judged, external_id="o2", content_hash="", listing=None)
    shared = Listing.objects.get(records__source=judged)
    assert set(shared.records.values_list("external_id", flat=True)) == {"s1", "o1"}
    stream_only = Listing.objects.get(records__external_id="s2")
    stream = fresh_stream_source(other)  # as a new run finds what a crashed one left
    assert not Listing.objects.filter(pk=stream_only.pk).exists()
    assert Listing.objects.filter(pk=shared.pk).exists()
    assert Listing.objects.filter(pk=before.pk).exists()
    assert not stream.records.exists()
    remove_stream(stream)
    assert not Source.objects.filter(name=STREAM_SOURCE).exists()


@pytest.mark.django_db
def test_a_public_source_of_the_streams_name_is_refused() -> None:
    Source.objects.create(name=STREAM_SOURCE, kind=Source.Kind.EDITORIAL)
    with pytest.raises(ValueError, match="not an evaluation source"):
        fresh_stream_source(Audience.of_evaluation_set("any"))
    with pytest.raises(ValueError, match="only ever goes to an evaluation audience"):
        fresh_stream_source(Audience.PUBLIC)
    assert Listing.objects.count() == 0


def test_every_budget_starts_uncached_and_with_the_breaker_closed() -> None:
    redis = get_redis()
    query = parse_query("heated aircraft models", "10")
    mine, other = cache_key(query, 7), cache_key(query, 8)
    redis.set(mine, "{}")
    redis.set(other, "{}")
    redis.set(f"{BREAKER_KEY}:calls:0:1", 12)
    waited: list[float] = []
    fresh_start(7, sleep=waited.append)
    assert (redis.exists(mine), redis.exists(other)) == (0, 1)
    assert not list(redis.scan_iter(f"{BREAKER_KEY}*"))
    assert waited == []  # it was closed: no process holds an open verdict to wait out
    redis.set(BREAKER_KEY, json.dumps({"state": "open", "opened_at": 1.0, "epoch": 3}))
    fresh_start(None, sleep=waited.append)
    assert not redis.exists(BREAKER_KEY)
    assert waited == [settings.VECTOR_BREAKER_COOLDOWN_S + BREAKER_SETTLE_S]


async def test_a_stopped_stream_finishes_its_last_post(tmp_path: Path) -> None:
    """The one seam faked is HTTP: what matters is what the stream does with a post
    still under way when it is told to stop."""
    stop, release = asyncio.Event(), asyncio.Event()
    batches: list[list[dict[str, str]]] = []

    async def editorial_api(request: httpx.Request) -> httpx.Response:
        batches.append(json.loads(request.content))
        stop.set()  # the run ends while this post is under way
        await release.wait()
        return httpx.Response(200, json={"counts": {"new": len(batches[-1]), "updated": 0}})

    client = httpx.AsyncClient(
        transport=httpx.MockTransport(editorial_api), base_url="http://127.0.0.1"
    )
    figures = IngestFigures(rate_asked=1e6)  # records are due at once
    stream = asyncio.create_task(IngestStream(client, figures, "r1", tmp_path).run(stop))
    await stop.wait()
    # Stopped, it still waits for the server's answer: a stream that gave up on the post
    # would be done within this bound (the bound only limits how long a wrong one waits).
    done, _ = await asyncio.wait({stream}, timeout=0.3)
    assert not done
    release.set()
    await asyncio.wait_for(stream, 10)
    assert len(batches) == 1
    assert figures.posted == figures.accepted == len(batches[0]) > 0
    ids = [record["id"] for record in batches[0]]
    assert len(set(ids)) == len(ids)
    assert all(record_id.startswith("sweep-r1-") for record_id in ids)
