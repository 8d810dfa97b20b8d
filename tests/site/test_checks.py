"""The search settings' invariants are Django system checks (retrieval/bounds/checks.py),
as is the task queue's (searchsite/checks.py)."""

import pytest
from django.test import override_settings

from retrieval.bounds.checks import check_search_budgets
from searchsite.celery import app
from searchsite.checks import check_visibility_timeout


def _ids() -> set[str]:
    return {error.id for error in check_search_budgets() if error.id}


def test_the_default_settings_pass() -> None:
    assert _ids() == set()


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"SEARCH_RESERVE_MS": -1.0}, "retrieval.E002"),
        ({"SEARCH_VECTOR_BUDGET_MS": 150.0}, "retrieval.E003"),
        ({"SEARCH_VECTOR_BUDGET_MS": 33.0}, "retrieval.W001"),
        ({"SEARCH_HNSW_EF_SEARCH": 0}, "retrieval.E006"),
        ({"SEARCH_HNSW_M": 1}, "retrieval.E007"),
        ({"SEARCH_HNSW_M": 16, "SEARCH_HNSW_EF_CONSTRUCTION": 31}, "retrieval.E007"),
        ({"SEARCH_HNSW_EF_CONSTRUCTION": 1001}, "retrieval.E007"),
    ],
)
def test_a_setting_out_of_bounds_is_an_error(overrides: dict[str, object], error: str) -> None:
    with override_settings(**overrides):
        assert _ids() == {error}


def test_a_visibility_timeout_within_the_task_time_limit_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert check_visibility_timeout() == []
    monkeypatch.setitem(app.conf, "task_time_limit", 600.0)
    assert [error.id for error in check_visibility_timeout()] == ["searchsite.E001"]
