"""GET /ops/: how search degrades and how fresh the index is, over the last hour (per
minute) and the last day (per quarter hour), for superusers and members of the `ops`
group (permission `ops.view_ops_page`). Works without Prometheus: the charts read
the per-minute roll-ups every process writes into Postgres (ops/rollups.py), and
the state panel reads the database and Redis when the page loads.

This process's own current minute is flushed first, so its latest searches show at once;
another process's current minute shows after its next flush (within a minute)."""

from dataclasses import dataclass
from itertools import pairwise

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, PermissionsMixin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from ingestion.models import Source
from ops import canary, review, rollup_writer, whatif
from ops import history as ops_history
from ops import state as ops_state
from ops.canary_views import may_run
from ops.charts import Chart, line_chart
from ops.history import History, Pick
from ops.whatif import WhatIf
from retrieval.types import Mode

PERMISSION = "ops.view_ops_page"
SHED = "503 (no answer in time, or shed)"


@dataclass(frozen=True)
class Section:
    window: str
    fallback_share: float | None  # of the answers, those not hybrid
    exhausted_ratio: float | None  # exhausted vector budgets / eligible vector stages
    breaker_transitions: int  # changes between open and closed, as seen minute by minute
    charts: list[Chart]
    whatif: WhatIf | None  # other vector budgets, for the active generation's searches


def may_see(user: AbstractBaseUser | AnonymousUser) -> bool:
    # An anonymous user holds no permissions (and is no PermissionsMixin).
    return isinstance(user, PermissionsMixin) and (user.is_superuser or user.has_perm(PERMISSION))


def ops_page(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    if not may_see(request.user):
        raise PermissionDenied
    rollup_writer.flush_this_process()
    now = timezone.now()
    state = ops_state.read_now()
    generation = state.generation.id if state.generation else None
    in_force = canary.in_force()
    sections = [
        section(ops_history.read(window, now), generation, in_force)
        for window in (ops_history.LAST_HOUR, ops_history.LAST_DAY)
    ]
    running = canary.running()
    today = review.now()
    chosen = review.baseline(today)
    context = {
        "review": {
            "chosen": chosen,
            "changes": review.changes(chosen, today, settings.SEARCH_REVIEW_FRACTION),
        },
        "canary": {
            "running": running,
            "arms": canary.compare(running, now) if running else None,
            "may_run": may_run(request.user),
            "in_force": in_force,
            "ended": canary.ended(5),
        },
        "sections": sections,
        "now": state,
        "at": now,
    }
    return render(request, "ops/ops.html", context)


def section(
    history: History, generation: int | None = None, in_force: canary.InForce | None = None
) -> Section:
    key = history.window.name.replace(" ", "-")
    starts = history.starts
    modes = history.by("retrieval_completed_total", "mode")
    unavailable = _plus(
        history.total("retrieval_unavailable_total"), history.total("retrieval_shed_at_door_total")
    )
    eligible = history.total("retrieval_vector_eligible_total")
    exhausted = history.total("retrieval_vector_budget_exhausted_total")
    breaker = history.highest("retrieval_vector_breaker_open")
    charts = [
        line_chart(
            f"answers-{key}",
            "Answers by mode, and 503s",
            f"searches per {_step(history)}",
            starts,
            {**modes, SHED: unavailable},
        ),
        line_chart(
            f"reasons-{key}",
            "Why searches were degraded",
            f"searches per {_step(history)}",
            starts,
            history.by("retrieval_degradation_reasons_total", "reason"),
        ),
        line_chart(
            f"exhausted-{key}",
            "Vector budgets exhausted",
            "share of the vector stages started",
            starts,
            {
                "exhausted / eligible": [
                    _ratio(e, n) for e, n in zip(exhausted, eligible, strict=True)
                ]
            },
            summed=False,
        ),
        line_chart(
            f"latency-{key}",
            "Search request latency",
            "milliseconds",
            starts,
            {
                f"p{round(q * 100)}": _ms(history.quantile(q, "retrieval_request_seconds"))
                for q in (0.5, 0.95, 0.99)
            },
            objective=settings.SEARCH_DEADLINE_MS,
            summed=False,
        ),
        line_chart(
            f"cancelled-{key}",
            "Searches the caller abandoned",
            f"searches per {_step(history)}",
            starts,
            history.by("retrieval_parent_cancelled_total", "cause"),
        ),
        line_chart(
            f"warming-{key}",
            "Cache warming",
            f"events per {_step(history)}",
            starts,
            history.by("retrieval_cache_warming_total", "event"),
        ),
        line_chart(
            f"breaker-{key}",
            "Vector breaker open or half-open",
            "1 when any process saw it so",
            starts,
            {"open": breaker},
            summed=False,
        ),
        line_chart(
            f"lag-{key}",
            "From fetch to searchable, 95th percentile",
            "seconds, over the listings the workers ingested",
            starts,
            _lags(history),
            summed=False,
        ),
    ]
    answered = sum(map(sum, modes.values()))
    fallbacks = answered - sum(modes.get(Mode.HYBRID, []))
    return Section(
        window=history.window.name,
        fallback_share=fallbacks / answered if answered else None,
        exhausted_ratio=sum(exhausted) / sum(eligible) if sum(eligible) else None,
        breaker_transitions=sum(a != b for a, b in pairwise(breaker)),
        charts=charts,
        # Of the budgets in force: the only ones the record's stages were cut at.
        whatif=None
        if generation is None or in_force is None
        else whatif.of_history(
            history,
            generation,
            in_force.vector_budget_ms / 1000,
            (in_force.deadline_ms - settings.SEARCH_RESERVE_MS) / 1000,
        ),
    )


def _lags(history: History) -> dict[str, list[float | None]]:
    lags: dict[str, list[float | None]] = {}
    for stage, histogram in (
        ("lexical", "ingestion_fetch_to_lexical_seconds"),
        ("vector", "ingestion_fetch_to_vector_seconds"),
    ):
        for kind in Source.Kind.values:
            p95 = history.quantile(0.95, histogram, _of_kind(kind))
            if any(v is not None for v in p95):
                lags[f"{stage}, {kind}"] = p95
    return lags


def _of_kind(kind: str) -> Pick:
    return lambda labels: labels.get("kind") == kind


def _step(history: History) -> str:
    minutes = int(history.window.step.total_seconds() // 60)
    return "minute" if minutes == 1 else f"{minutes} minutes"


def _plus(a: list[float], b: list[float]) -> list[float]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _ms(seconds: list[float | None]) -> list[float | None]:
    return [s * 1000 if s is not None else None for s in seconds]
