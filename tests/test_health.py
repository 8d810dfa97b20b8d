"""GET /healthz reports every part and names the failing one."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client
from pytest_django import Settings

from ingestion import generations
from resilience import redis_clients
from searchsite.heartbeat import HEARTBEAT_KEY, beat

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_heartbeat() -> Iterator[None]:
    client = redis_clients.get_redis()
    client.delete(HEARTBEAT_KEY)
    beat(client, "worker@test")
    yield
    client.delete(HEARTBEAT_KEY)


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
    client: Client, settings: Settings, tmp_path: Path, fresh_heartbeat: None
) -> None:
    generations.ensure_active_generation("model-a", 3)
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-listens-here.sock"
    redis_clients.get_redis.cache_clear()
    try:
        response = client.get("/healthz")
    finally:
        redis_clients.get_redis.cache_clear()
    assert response.status_code == 503
    assert set(response.json()["failing"]) == {"redis", "worker"}
