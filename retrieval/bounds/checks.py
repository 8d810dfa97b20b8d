"""Configuration invariants of search (the deadline's budgets, HNSW bounds), as Django system
checks."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from retrieval.metrics import WHATIF_BOUNDS


@register()
def check_search_budgets(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    deadline = settings.SEARCH_DEADLINE_MS
    reserve = settings.SEARCH_RESERVE_MS
    vector = settings.SEARCH_VECTOR_BUDGET_MS
    errors: list[CheckMessage] = []
    if deadline <= 0:
        errors.append(Error("SEARCH_DEADLINE_MS must be positive", id="retrieval.E001"))
    if not 0 <= reserve < deadline:
        errors.append(
            Error(
                "SEARCH_RESERVE_MS must be below SEARCH_DEADLINE_MS",
                hint="the reserve pays for fusion and serialisation inside the deadline",
                id="retrieval.E002",
            )
        )
    if vector >= deadline - reserve:
        errors.append(
            Error(
                "SEARCH_VECTOR_BUDGET_MS must be below SEARCH_DEADLINE_MS - SEARCH_RESERVE_MS",
                hint="the vector stage needs a smaller budget than the request, or its misses "
                "leave no time for the fallback",
                id="retrieval.E003",
            )
        )
    if not 0 <= settings.SEARCH_MIN_VECTOR_BUDGET_MS <= vector:
        errors.append(
            Error(
                "SEARCH_MIN_VECTOR_BUDGET_MS must be between 0 and SEARCH_VECTOR_BUDGET_MS",
                id="retrieval.E004",
            )
        )
    if reserve > settings.SEARCH_CALLER_TIMEOUT_CAP_MS:
        errors.append(
            Error(
                "SEARCH_CALLER_TIMEOUT_CAP_MS must be at least SEARCH_RESERVE_MS",
                id="retrieval.E005",
            )
        )
    if not 1 <= settings.SEARCH_HNSW_EF_SEARCH <= 1000:
        errors.append(
            Error(
                "SEARCH_HNSW_EF_SEARCH must be between 1 and 1000",
                hint="it bounds the cost of one HNSW search, which statement_timeout cannot cut",
                id="retrieval.E006",
            )
        )
    m, ef_construction = settings.SEARCH_HNSW_M, settings.SEARCH_HNSW_EF_CONSTRUCTION
    if not (2 <= m <= 100 and 2 * m <= ef_construction <= 1000):
        errors.append(
            Error(
                "SEARCH_HNSW_M must be between 2 and 100, and SEARCH_HNSW_EF_CONSTRUCTION "
                "between 2 * SEARCH_HNSW_M and 1000",
                hint="pgvector refuses to build an HNSW index outside these bounds",
                id="retrieval.E007",
            )
        )
    if not any(abs(bound * 1000 - vector) < 1e-9 for bound in WHATIF_BOUNDS):
        errors.append(
            Warning(
                "SEARCH_VECTOR_BUDGET_MS is not one of the what-if's bounds",
                hint="a stage's time is recorded in buckets; the what-if of other budgets "
                f"needs the one in force among them (ms): {[b * 1000 for b in WHATIF_BOUNDS]}",
                id="retrieval.W001",
            )
        )
    return errors
