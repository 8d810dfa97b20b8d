"""Schemathesis against the running app, over real HTTP: cases generated from the app's
own /api/schema, for the search with every parameter and the editorial API with and
without a token. Every answer must be documented (status, content type, headers, body)
and none a 5xx. A 503 from a loaded machine is a documented answer, not a failure.

Bounded and reproducible: few examples per operation, derandomized, no deadline (the
machine is shared; the server's own deadline is what a slow answer meets). The cases come
from Schemathesis' Hypothesis strategies rather than its pytest plugin, whose lazy schema
does not run under pytest 9.2 (it sets `Function._nodeid`, which pytest no longer has)."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from ingestion.models import Source
from ingestion.tokens import create_token
from searchsite.openapi import openapi_document
from tests.conftest import wait_until
from tests.search_fixtures import index_listings
from tests.site.test_openapi import every_query_parameter

if TYPE_CHECKING:  # imported by pytest_plugins, which must come first to rewrite its asserts
    from tests.live_app import LiveApp

pytest_plugins = ["tests.live_app"]
pytestmark = pytest.mark.django_db(transaction=True)

CHECKS: list[Callable[..., Any]] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
BOUNDED = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TIMEOUT_S = 10
Operation = APIOperation[Any, Any, Any, Any]
OperationCase = Case[Operation]  # a request to one of the loaded schema's operations


def _documented_server_errors_allowed() -> schemathesis.Config:
    """not_a_server_error takes an operation's documented 5xx (the search's 503 and 504)
    as answers; any other 5xx fails it."""
    operations = []
    for path, item in openapi_document()["paths"].items():
        documented = [s for o in item.values() for s in o["responses"] if s.startswith("5")]
        if documented:
            expected = {"expected-statuses": ["2xx", "3xx", "4xx", *documented]}
            operations.append({"include-path": path, "checks": {"not_a_server_error": expected}})
    return schemathesis.Config.from_dict({"operations": operations})


@pytest.fixture(scope="module")
def app_schema(live_app: "LiveApp") -> OpenApiSchema:
    return schemathesis.openapi.from_url(
        f"{live_app.url}/api/schema", config=_documented_server_errors_allowed()
    )


@pytest.fixture
def editorial_token() -> str:
    desk = Source.objects.create(name="Schemathesis desk", kind=Source.Kind.EDITORIAL)
    return create_token("schemathesis", desk)


def _cases(
    operation: Operation, headers: dict[str, str] | None
) -> st.SearchStrategy[OperationCase]:
    """Requests that fit the schema, and requests that do not (each a documented 4xx);
    `headers` are sent as they are, never mangled."""
    return st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, headers=headers),
        operation.as_strategy(GenerationMode.NEGATIVE, headers=headers),
    )


def _each_case(
    operation: Operation,
    test: Callable[[OperationCase], None],
    *extra: OperationCase,
    headers: dict[str, str] | None = None,
) -> None:
    """`test` on the generated cases and on `extra`, within the bounds."""
    run = BOUNDED(given(case=_cases(operation, headers))(test))
    for case in extra:
        test(case)
    run()


def _answers_a_search(live_app: "LiveApp") -> bool:
    response = httpx.get(f"{live_app.url}/api/search", params={"q": "jazz"}, timeout=TIMEOUT_S)
    return response.status_code == 200


def test_the_search_answers_as_documented(app_schema: OpenApiSchema, live_app: "LiveApp") -> None:
    index_listings()  # so that the results' fields are checked too, not only empty lists
    # A server's first searches open its pool, and may miss the deadline on a loaded machine.
    wait_until(lambda: _answers_a_search(live_app), 30, "a first search answered")
    operation = app_schema["/api/search"]["GET"]
    found = operation.Case(query={"q": "jazz"})
    every_parameter = operation.Case(
        query={"q": "jazz", **every_query_parameter(), "kind": ["feed", "calendar"]},
        headers={"X-Request-Timeout-Ms": "800"},
    )
    results: list[int] = []

    def check(case: OperationCase) -> None:
        response = case.call_and_validate(checks=CHECKS, timeout=TIMEOUT_S)
        if response.status_code == 200:
            results.append(len(response.json()["results"]))

    _each_case(operation, check, found, every_parameter)
    assert any(results), "no answer had results, so no result was checked"


def test_the_editorial_api_answers_as_documented_with_a_token(
    app_schema: OpenApiSchema, editorial_token: str
) -> None:
    operation = app_schema["/api/editorial/records"]["POST"]
    statuses: list[int] = []

    def check(case: OperationCase) -> None:
        response = case.call_and_validate(checks=CHECKS, timeout=TIMEOUT_S)
        statuses.append(response.status_code)

    _each_case(operation, check, headers={"Authorization": f"Bearer {editorial_token}"})
    assert 401 not in statuses, "the token was refused: nothing behind it was tested"
    assert 200 in statuses, "no request was taken: only refusals were tested"


def test_the_editorial_api_answers_as_documented_without_a_token(
    app_schema: OpenApiSchema,
) -> None:
    operation = app_schema["/api/editorial/records"]["POST"]

    def check(case: OperationCase) -> None:
        case.headers.pop("Authorization", None)
        response: Response = case.call_and_validate(checks=CHECKS, timeout=TIMEOUT_S)
        assert response.status_code == 401

    _each_case(operation, check)
