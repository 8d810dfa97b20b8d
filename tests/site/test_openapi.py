"""The OpenAPI document says what the code does: it is valid OpenAPI, it declares every
parameter the search reads (and the search accepts every one it declares), real 200, 400
and 503 answers conform to it, and the docs page shows all of it."""

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any, get_args

import httpx
import pytest
import schemathesis
from django.test import AsyncClient, Client
from django.utils.datastructures import MultiValueDict
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from ingestion.api_types import EditorialRecord, PollCounts
from ingestion.models import Poll, Source
from ingestion.parsers import editorial
from retrieval.web.api_types import SOURCE_KINDS, SourceKind, search_parameters
from searchsite.openapi import MEDIA_TYPE, openapi_document
from tests.search_fixtures import LEXICAL_TABLE, VECTOR_TABLE, index_listings, tables_locked

if TYPE_CHECKING:  # imported by pytest_plugins, which must come first to rewrite its asserts
    from tests.live_app import LiveApp

pytest_plugins = ["tests.live_app"]
pytestmark = pytest.mark.django_db(transaction=True)

CONFORMANCE = [
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def api_schema(live_app: "LiveApp") -> OpenApiSchema:
    """The document as a client gets it: from the running app's /api/schema."""
    return schemathesis.openapi.from_url(f"{live_app.url}/api/schema")


def _conforms(api_schema: OpenApiSchema, response: httpx.Response, **query: str) -> None:
    case = api_schema["/api/search"]["GET"].Case(query=query)
    case.validate_response(response, checks=CONFORMANCE)


def test_it_is_valid_openapi_and_served_as_built(client: Client) -> None:
    document = openapi_document()
    schemathesis.openapi.from_dict(document).validate()
    response = client.get("/api/schema")
    assert response.status_code == 200
    assert response["Content-Type"] == MEDIA_TYPE
    assert json.loads(response.content) == document


def test_it_names_the_source_kinds_and_record_fields_as_the_code_does() -> None:
    assert set(get_args(SourceKind)) == set(SOURCE_KINDS) == set(Source.Kind.values)
    assert set(EditorialRecord.__annotations__) == set(editorial.FIELDS)
    assert EditorialRecord.__required_keys__ == set(editorial.REQUIRED_FIELDS)
    assert list(PollCounts.__annotations__) == list(Poll.COUNTS)


def every_query_parameter() -> dict[str, str]:
    """Each query parameter's example at once (`when` left at its default: it cannot be
    combined with a range)."""
    return {
        p.name: str(p.example)
        for p in search_parameters()
        if p.location == "query" and p.name != "when"
    }


@pytest.mark.parametrize(
    "parameter", [p for p in search_parameters() if not p.required], ids=lambda p: p.name
)
async def test_the_search_accepts_each_declared_parameter(
    async_client: AsyncClient, parameter: Any
) -> None:
    value = str(parameter.example)
    if parameter.location == "header":
        response = await async_client.get(
            "/api/search", {"q": "jazz"}, headers={parameter.name: value}
        )
    else:
        response = await async_client.get("/api/search", {"q": "jazz", parameter.name: value})
    assert response.status_code != 400, response.content


async def test_the_search_reads_no_parameter_the_schema_does_not_declare(
    async_client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: set[str] = set()
    for method in ("__getitem__", "__contains__", "get", "getlist"):
        original = getattr(MultiValueDict, method)

        def recording(self: Any, key: str, *args: Any, _original: Any = original) -> Any:
            read.add(key)
            return _original(self, key, *args)

        monkeypatch.setattr(MultiValueDict, method, recording)
    declared = {p.name for p in search_parameters() if p.location == "query"}
    # Every declared parameter at once, so a parameter read only beside another is read too.
    await async_client.get("/api/search", every_query_parameter())
    assert read >= {"q"}, "no query parameter was seen read: the recording is broken"
    assert read <= declared


def test_a_real_200_conforms(api_schema: OpenApiSchema, live_app: "LiveApp") -> None:
    index_listings()
    response = httpx.get(f"{live_app.url}/api/search", params={"q": "jazz"}, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["results"], "a 200 without results checks no result's fields"
    _conforms(api_schema, response, q="jazz")


def test_a_real_400_conforms(api_schema: OpenApiSchema, live_app: "LiveApp") -> None:
    response = httpx.get(f"{live_app.url}/api/search", params={"k": "0", "q": "x"}, timeout=10)
    assert response.status_code == 400
    _conforms(api_schema, response, q="x", k="0")
    assert response.json()["parameter"] == "k"


async def test_a_real_503_conforms(
    api_schema: OpenApiSchema, live_app: "LiveApp", test_database_url: str
) -> None:
    """Both stages' tables locked: neither answers within the deadline, nothing is cached."""
    locked = tables_locked(test_database_url, LEXICAL_TABLE, VECTOR_TABLE)
    async with locked, httpx.AsyncClient() as http:
        response = await asyncio.wait_for(
            http.get(f"{live_app.url}/api/search", params={"q": "organ"}), 10
        )
    assert response.status_code == 503, response.text
    assert response.json()["reasons"]
    _conforms(api_schema, response, q="organ")


def test_the_docs_page_shows_every_operation_parameter_and_type(client: Client) -> None:
    response = client.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    document = openapi_document()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert f'id="{operation["operationId"]}"' in page
            assert f"{method.upper()} {path}" in page
            for parameter in operation.get("parameters", []):
                assert f"<code>{parameter['name']}</code>" in page
            for status in operation["responses"]:
                assert f"<dt>{status}</dt>" in page
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in page
    for name in document["components"]["securitySchemes"]:
        assert f'id="auth-{name}"' in page
    # Accessible without scripts or anything from elsewhere: landmarks, no script at all,
    # no absolute address to fetch an asset from.
    for landmark in ("<header", "<nav", "<main", "<h1"):
        assert landmark in page
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
