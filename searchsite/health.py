"""Health: GET /healthz, the state of every part a search or an ingestion depends on;
GET /healthz/ready, whether this web process should take traffic (what a search needs,
the stack's warm-up and this process's own included: 503 until then); GET /healthz/live,
whether the process answers at all (no dependency asked, so a stalled database never gets
a live process restarted)."""

from collections.abc import Callable
from dataclasses import dataclass

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from ingestion.embedding_lag import TIMEOUT, embedding_lag
from ingestion.generations import active_generation
from resilience.redis_clients import get_redis
from retrieval.warming import warm_up
from searchsite.heartbeat import newest_age_s


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


UNREACHABLE = Check(False, "unknown: Postgres unreachable")


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
        return UNREACHABLE
    if active is None:
        return Check(False, "no active index generation")
    return Check(True, f"generation {active.pk} ({active.embedding_model}, {active.dimensions}d)")


def check_vector_lag() -> Check:
    """Listings waiting for their embedding: a dead or overwhelmed embedding worker shows
    here even while other workers' heartbeats keep `worker` green."""
    try:
        lag = embedding_lag()
    except DatabaseError:
        return UNREACHABLE
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


def check_warm_up() -> Check:
    try:
        warmed = warm_up.warmed_up()
    except DatabaseError:
        return UNREACHABLE
    if not warmed:
        return Check(False, "not warmed up since Postgres started")
    return Check(True, "warmed up since Postgres started")


def _search_checks() -> dict[str, Check]:
    """What a web process needs to serve searches well. Not Redis: a search does without
    the result cache, and the vector breaker runs on its own while Redis is away."""
    return _unless_postgres_failed(
        check_postgres(), {"index_generation": check_index_generation, "warm_up": check_warm_up}
    )


def _unless_postgres_failed(
    postgres: Check, asking: dict[str, Callable[[], Check]]
) -> dict[str, Check]:
    """The Postgres check and the checks that ask Postgres, those only if it answered:
    a stalled server costs a check its whole bound (DATABASE_STALL_TIMEOUT_S), and each
    check asking it again would cost another."""
    if not postgres.ok:
        return {"postgres": postgres} | dict.fromkeys(asking, UNREACHABLE)
    return {"postgres": postgres} | {name: check() for name, check in asking.items()}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = _search_checks()
    vector_lag = check_vector_lag() if checks["postgres"].ok else UNREACHABLE
    return _report(
        checks | {"redis": check_redis(), "worker": check_worker(), "vector_lag": vector_lag}
    )


@require_GET
async def ready(request: HttpRequest) -> JsonResponse:
    checks = await sync_to_async(_search_checks)()
    if checks["postgres"].ok and not checks["warm_up"].ok:
        # Postgres restarted under a running stack, cold again: warm it, then be ready.
        warm_up.warm_up_in_background()
    warm = all(check.ok for check in checks.values())
    # With the stack warm, this process's first searches must not pay for its own pool.
    if warm and not await warm_up.warm_up_this_loop():
        checks["warm_up"] = Check(False, "this process is warming up")
    return _report(checks)


@require_GET
def live(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _report(checks: dict[str, Check]) -> JsonResponse:
    failing = [name for name, check in checks.items() if not check.ok]
    body = {
        "status": "ok" if not failing else "failing",
        "failing": failing,
        "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()},
    }
    return JsonResponse(body, status=503 if failing else 200)
