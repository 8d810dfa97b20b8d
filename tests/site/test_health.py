"""GET /healthz reports every part and names the failing one; /healthz/ready only what a
search needs, warm-up included; /healthz/live asks nothing."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import AsyncClient, Client
from pytest_django import DjangoAssertNumQueries, Settings

from ingestion import generations
from resilience import redis_clients
from retrieval.warming import warm_up
from searchsite.heartbeat import HEARTBEAT_KEY, beat

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_heartbeat() -> Iterator[None]:
    client = redis_clients.get_redis()
    client.delete(HEARTBEAT_KEY)
    beat(client, "worker@test")
    yield
    client.delete(HEARTBEAT_KEY)


@pytest.fixture
def redis_unreachable(settings: Settings, tmp_path: Path) -> Iterator[None]:
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-listens-here.sock"
    redis_clients.get_redis.cache_clear()
    yield
    redis_clients.get_redis.cache_clear()


@pytest.fixture(autouse=True)
def warmed_up() -> None:
    """The stack warmed up since this Postgres started, as bootstrap leaves it."""
    warm_up.mark_warmed_up()


def test_it_is_healthy_when_every_part_is(client: Client, fresh_heartbeat: None) -> None:
    generation = generations.ensure_active_generation("model-a", 3)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["failing"] == []
    assert body["checks"]["postgres"]["ok"]
    assert f"generation {generation.pk}" in body["checks"]["index_generation"]["detail"]


def test_it_names_a_missing_active_generation(client: Client, fresh_heartbeat: None) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["index_generation"]


def test_it_names_a_worker_that_stopped_beating(client: Client) -> None:
    generations.ensure_active_generation("model-a", 3)
    redis = redis_clients.get_redis()
    redis.delete(HEARTBEAT_KEY)
    beat(redis, "worker@test", now=time.time() - 600)
    try:
        response = client.get("/healthz")
    finally:
        redis.delete(HEARTBEAT_KEY)
    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


def test_it_names_redis_when_redis_is_unreachable(
    client: Client, fresh_heartbeat: None, redis_unreachable: None
) -> None:
    generations.ensure_active_generation("model-a", 3)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert set(response.json()["failing"]) == {"redis", "worker"}


def test_it_names_a_stack_not_warmed_up_since_postgres_started(
    client: Client, fresh_heartbeat: None
) -> None:
    generations.ensure_active_generation("model-a", 3)
    with connection.cursor() as cursor:  # warmed after an earlier start of the server
        cursor.execute("UPDATE retrieval_warm_up SET server_started_at = '2020-01-01'")
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["warm_up"]


@pytest.mark.django_db(transaction=True)  # the view reads from a thread of its own
async def test_readiness_leaves_the_workers_and_redis_out(
    async_client: AsyncClient, redis_unreachable: None
) -> None:
    """A web process serves searches without any worker, and without Redis (no result
    cache, the breaker on its own): it is ready all the same."""
    await sync_to_async(generations.ensure_active_generation)("model-a", 3)
    response = await async_client.get("/healthz/ready")
    assert response.status_code == 200
    assert set(response.json()["checks"]) == {"postgres", "index_generation", "warm_up"}


def test_liveness_asks_no_dependency(
    client: Client, redis_unreachable: None, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(0):
        response = client.get("/healthz/live")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
