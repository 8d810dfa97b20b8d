"""The OpenAPI 3.1 document of the public APIs, `GET /api/schema`, and the docs page made
from it, `GET /api/docs`.

Invariant: the document is generated from the types the views build their bodies as
(retrieval/web/api_types.py, ingestion/api_types.py) and from the search's parameter
declaration, never kept by hand; it is built once per process, on its first request, so
no search request pays for it (nor imports a framework: the views stay plain Django)."""

import json
from functools import cache
from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET
from pydantic import Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue

from ingestion.api import MAX_BODY_BYTES, MAX_RECORDS
from ingestion.api_types import EditorialRecord, ErrorBody, RecordsBody, RecordsEnvelope
from retrieval.web.api import RETRY_AFTER_S
from retrieval.web.api_types import (
    BadParameterBody,
    Parameter,
    SearchBody,
    SuggestBody,
    UnavailableBody,
    search_parameters,
    suggest_parameters,
)
from searchsite import openapi_docs

OPENAPI_VERSION = "3.1.0"
MEDIA_TYPE = "application/vnd.oai.openapi+json;version=3.1"
BEARER_SCHEME = "editorialToken"
_COMPONENTS = "#/components/schemas/{model}"

RecordsRequest = Annotated[list[EditorialRecord], Field(max_length=MAX_RECORDS)] | RecordsEnvelope


class _Schemas(GenerateJsonSchema):
    """pydantic's JSON Schema without a title on every field ("Id", "Title"): the field's
    name says it already."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _body_schemas() -> tuple[dict[str, JsonSchemaValue], dict[str, JsonSchemaValue]]:
    """Each body's schema (a reference, mostly) by name, and every named schema. A request
    body is described as what is read, a response as what the view writes."""
    bodies: dict[str, tuple[Any, JsonSchemaMode]] = {
        "search": (SearchBody, "serialization"),
        "suggest": (SuggestBody, "serialization"),
        "bad_parameter": (BadParameterBody, "serialization"),
        "unavailable": (UnavailableBody, "serialization"),
        "records_request": (RecordsRequest, "validation"),
        "records": (RecordsBody, "serialization"),
        "error": (ErrorBody, "serialization"),
    }
    inputs = [(name, mode, TypeAdapter(kind)) for name, (kind, mode) in bodies.items()]
    refs, named = TypeAdapter.json_schemas(
        inputs, ref_template=_COMPONENTS, schema_generator=_Schemas
    )
    return {name: refs[name, mode] for name, mode, _ in inputs}, named.get("$defs", {})


def _value_schema(parameter: Parameter) -> JsonSchemaValue:
    bounds = {
        "minimum": parameter.minimum,
        "maximum": parameter.maximum,
        "minLength": parameter.min_length,
        "maxLength": parameter.max_length,
        "pattern": parameter.pattern,
        "default": parameter.default,
    }
    schema: JsonSchemaValue = {"type": parameter.type}
    if parameter.formats:
        choices = [{"type": "string", "format": name} for name in parameter.formats]
        schema = {"anyOf": [*choices, {"type": "string", "enum": list(parameter.enum)}]}
    elif parameter.enum:
        schema["enum"] = list(parameter.enum)
    return schema | {key: value for key, value in bounds.items() if value is not None}


def _parameter(parameter: Parameter) -> JsonSchemaValue:
    schema, example = _value_schema(parameter), parameter.example
    if parameter.repeatable:  # form style, exploded: `kind=feed&kind=calendar`
        schema = {"type": "array", "items": schema}
    return {
        "name": parameter.name,
        "in": parameter.location,
        "required": parameter.required,
        "description": parameter.description,
        "schema": schema,
        "example": [example] if parameter.repeatable else example,
    }


def _json(schema: JsonSchemaValue, description: str, **headers: JsonSchemaValue) -> Any:
    response = {"description": description, "content": {"application/json": {"schema": schema}}}
    return response | ({"headers": headers} if headers else {})


def _header(description: str, schema: JsonSchemaValue) -> JsonSchemaValue:
    return {"description": description, "required": True, "schema": schema}


def _search(bodies: dict[str, JsonSchemaValue]) -> JsonSchemaValue:
    retry = {
        "Retry-After": _header(
            "Seconds to wait before asking again.", {"type": "integer", "const": RETRY_AFTER_S}
        )
    }
    parameters = search_parameters(
        max_query_chars=settings.SEARCH_MAX_QUERY_CHARS,
        max_k=settings.SEARCH_MAX_K,
        max_page=settings.SEARCH_MAX_PAGE,
    )
    return {
        "operationId": "search",
        "summary": "Search the listings",
        "description": "Hybrid search (full text and vectors) within a deadline. A stage that "
        "misses its budget leaves the answer degraded, never late: `mode`, `degraded` and "
        "`reasons` say how it was made.",
        "parameters": [_parameter(parameter) for parameter in parameters],
        "responses": {
            "200": _json(bodies["search"], "The results, and how they were found."),
            "400": _json(bodies["bad_parameter"], "A parameter was refused; it is named."),
            "503": _json(bodies["unavailable"], "No stage answered within the deadline.", **retry),
            "504": _json(bodies["unavailable"], "Your own deadline passed first.", **retry),
        },
    }


def _suggest(bodies: dict[str, JsonSchemaValue]) -> JsonSchemaValue:
    parameters = suggest_parameters(max_chars=settings.SEARCH_SUGGEST_MAX_CHARS)
    return {
        "operationId": "suggest",
        "summary": "Suggest titles and venues as a visitor types",
        "description": "Up to a few titles and venues of listings that can still be attended, "
        "for every word typed (the last one as a prefix), then for near misses. Answered "
        "within a deadline of its own: a slow database gives an empty list, not an error.",
        "parameters": [_parameter(parameter) for parameter in parameters],
        "responses": {
            "200": _json(bodies["suggest"], "The suggestions, best first; [] for none."),
            "400": _json(bodies["bad_parameter"], "A parameter was refused; it is named."),
        },
    }


def _editorial(bodies: dict[str, JsonSchemaValue]) -> JsonSchemaValue:
    challenge = _header("The scheme to authenticate with.", {"type": "string"})
    return {
        "operationId": "postEditorialRecords",
        "summary": "Send editorial records",
        "description": "Creates or updates a listing per record, under the token's source. "
        "Each record gets its own result: an invalid one is quarantined with its reason, for "
        "an editor to correct and retry, and never stops the valid ones.",
        "security": [{BEARER_SCHEME: []}],
        "requestBody": {
            "required": True,
            "description": f'A JSON list of records or {{"records": [...]}}, at most '
            f"{MAX_RECORDS} records and {MAX_BODY_BYTES} bytes.",
            "content": {"application/json": {"schema": bodies["records_request"]}},
        },
        "responses": {
            "200": _json(bodies["records"], "Every record's outcome."),
            "400": _json(bodies["error"], "The body is not JSON, or not a list of records."),
            "401": _json(
                bodies["error"], "No valid bearer token.", **{"WWW-Authenticate": challenge}
            ),
            "413": _json(bodies["error"], "Too many records or bytes."),
        },
    }


@cache
def openapi_document() -> dict[str, Any]:
    """The document, built once per process (its limits come from settings)."""
    bodies, named = _body_schemas()
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Listings search",
            "version": "1",
            "description": "Search event listings; send editorial records.",
        },
        "paths": {
            "/api/search": {"get": _search(bodies)},
            "/api/suggest": {"get": _suggest(bodies)},
            "/api/editorial/records": {"post": _editorial(bodies)},
        },
        "components": {
            "schemas": named,
            "securitySchemes": {
                BEARER_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token of an editorial source, made with "
                    "`manage.py create_api_token NAME --source SOURCE`.",
                }
            },
        },
    }


@cache
def _document_bytes() -> bytes:
    return json.dumps(openapi_document(), ensure_ascii=False).encode()


@cache
def _docs_page() -> str:
    context = openapi_docs.page_context(openapi_document(), schema_url="/api/schema")
    return render_to_string("searchsite/api_docs.html", context)


@require_GET
async def schema(request: HttpRequest) -> HttpResponse:
    return HttpResponse(_document_bytes(), content_type=MEDIA_TYPE)


@require_GET
async def docs(request: HttpRequest) -> HttpResponse:
    return HttpResponse(_docs_page())
