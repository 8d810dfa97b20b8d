"""GET /healthz: the state of every part a search or an ingestion depends on."""

from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from ingestion.embedding_lag import TIMEOUT, embedding_lag
from ingestion.generations import active_generation
from resilience.redis_clients import get_redis
from searchsite.heartbeat import newest_age_s


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


def check_postgres() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return Check(False, f"unreachable: {type(exc).__name__}")
    return Check(True, "ok")


def check_redis() -> Check:
    try:
        get_redis().ping()
    except redis.RedisError as exc:
        return Check(False, f"unreachable: {type(exc).__name__}")
    return Check(True, "ok")


def check_index_generation() -> Check:
    try:
        active = active_generation()
    except DatabaseError:
        return Check(False, "unknown: Postgres unreachable")
    if active is None:
        return Check(False, "no active index generation")
    return Check(True, f"generation {active.pk} ({active.embedding_model}, {active.dimensions}d)")


def check_vector_lag() -> Check:
    """Listings waiting for their embedding: a dead or overwhelmed embedding worker shows
    here even while other workers' heartbeats keep `worker` green."""
    try:
        lag = embedding_lag()
    except DatabaseError:
        return Check(False, "unknown: Postgres unreachable")
    if lag is None:
        return Check(False, f"unknown: no answer within {TIMEOUT}")
    if lag.oldest_s is None:
        return Check(True, f"{lag.pending} listings waiting")
    detail = f"{lag.pending} listings waiting, the oldest for {lag.oldest_s:.0f}s"
    return Check(lag.oldest_s <= settings.VECTOR_LAG_MAX_S, detail)


def check_worker() -> Check:
    try:
        age = newest_age_s(get_redis())
    except redis.RedisError:
        return Check(False, "unknown: Redis unreachable")
    if age is None:
        return Check(False, "no worker heartbeat")
    if age > settings.WORKER_HEARTBEAT_MAX_AGE_S:
        return Check(False, f"last worker heartbeat {age:.0f}s ago")
    return Check(True, f"last heartbeat {age:.1f}s ago")


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {
        "postgres": check_postgres(),
        "redis": check_redis(),
        "index_generation": check_index_generation(),
        "worker": check_worker(),
        "vector_lag": check_vector_lag(),
    }
    failing = [name for name, check in checks.items() if not check.ok]
    body = {
        "status": "ok" if not failing else "failing",
        "failing": failing,
        "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()},
    }
    return JsonResponse(body, status=503 if failing else 200)
