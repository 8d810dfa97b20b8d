"""What the API docs page (`/api/docs`, searchsite/templates/searchsite/api_docs.html)
shows, read from the OpenAPI document alone: every operation with its parameters, request
body and responses, every named schema with its fields, and the authentication schemes.
Whatever the document says the page says, so the two cannot disagree.

Types come out as HTML (a named schema is a link to its own section); every value taken
from the document is escaped on the way."""

from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

_METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Row:
    """A parameter, a field or a header: one row of a table."""

    name: str
    type: SafeString
    required: bool
    limits: str
    description: SafeString
    location: str = ""
    example: str = ""


@dataclass(frozen=True)
class Response:
    status: str
    description: SafeString
    body: SafeString | None
    headers: list[Row]


@dataclass(frozen=True)
class Operation:
    id: str
    method: str
    path: str
    summary: str
    description: SafeString
    security: list[str]
    parameters: list[Row]
    body: SafeString | None
    body_description: SafeString
    responses: list[Response]


@dataclass(frozen=True)
class NamedSchema:
    name: str
    description: SafeString
    fields: list[Row]
    values: list[str]  # an enumeration's values; fields is empty then


@dataclass(frozen=True)
class SecurityScheme:
    name: str
    scheme: str  # an HTTP authentication scheme: "bearer"
    description: SafeString


def prose_html(text: str) -> SafeString:
    """A description as HTML: its `backticked` words as code, everything escaped."""
    pieces = text.split("`")  # the odd ones were inside backticks
    code = (format_html("<code>{}</code>", p) if i % 2 else p for i, p in enumerate(pieces))
    return format_html_join("", "{}", ((piece,) for piece in code))


def type_html(schema: dict[str, Any]) -> SafeString:
    """A schema as a reader says it: "list of <a>ResultBody</a>", "string or null"."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return format_html('<a href="#schema-{}">{}</a>', name, name)
    if "anyOf" in schema:
        return format_html_join(" or ", "{}", ((type_html(s),) for s in schema["anyOf"]))
    if "enum" in schema:
        values = format_html_join(", ", "<code>{}</code>", ((v,) for v in schema["enum"]))
        return format_html("one of {}", values)
    if "const" in schema:
        return format_html("<code>{}</code>", schema["const"])
    kind = schema.get("type", "any")
    if kind == "array":
        return format_html("list of {}", type_html(schema.get("items", {})))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return format_html("object of {}", type_html(schema["additionalProperties"]))
    if "format" in schema:
        return format_html("{} ({})", kind, schema["format"])
    return format_html("{}", kind)


def limits_text(schema: dict[str, Any]) -> str:
    """The bounds of a value, its alternatives' and its items' included, in words."""
    parts: list[str] = []
    for part in (schema, *schema.get("anyOf", ()), schema.get("items", {})):
        low, high = part.get("minimum"), part.get("maximum")
        if low is not None and high is not None:
            parts.append(f"{low} to {high}")
        elif low is not None:
            parts.append(f"at least {low}")
        elif high is not None:
            parts.append(f"at most {high}")
        if "maxLength" in part and "minLength" in part:
            parts.append(f"{part['minLength']} to {part['maxLength']} characters")
        elif "maxLength" in part:
            parts.append(f"at most {part['maxLength']} characters")
        elif "minLength" in part:
            parts.append(f"at least {part['minLength']} characters")
        if "maxItems" in part:
            parts.append(f"at most {part['maxItems']} items")
        if "default" in part:
            parts.append(f"default {part['default']}")
    return "; ".join(parts)


def _parameter_row(parameter: dict[str, Any]) -> Row:
    example = parameter.get("example", "")
    return Row(
        name=parameter["name"],
        type=type_html(parameter["schema"]),
        required=parameter.get("required", False),
        limits=limits_text(parameter["schema"]),
        description=prose_html(parameter.get("description", "")),
        location=parameter["in"],
        example=", ".join(example) if isinstance(example, list) else str(example),
    )


def _body(content: dict[str, Any]) -> SafeString | None:
    media = content.get("application/json")
    return type_html(media["schema"]) if media else None


def _response(status: str, response: dict[str, Any]) -> Response:
    headers = [
        Row(name, type_html(h["schema"]), h["required"], "", prose_html(h["description"]))
        for name, h in response.get("headers", {}).items()
    ]
    body = _body(response.get("content", {}))
    return Response(status, prose_html(response["description"]), body, headers)


def _operation(path: str, method: str, operation: dict[str, Any]) -> Operation:
    body = operation.get("requestBody", {})
    return Operation(
        id=operation["operationId"],
        method=method.upper(),
        path=path,
        summary=operation.get("summary", ""),
        description=prose_html(operation.get("description", "")),
        security=[name for requirement in operation.get("security", []) for name in requirement],
        parameters=[_parameter_row(p) for p in operation.get("parameters", [])],
        body=_body(body.get("content", {})),
        body_description=prose_html(body.get("description", "")),
        responses=[_response(status, r) for status, r in operation["responses"].items()],
    )


def _named_schema(name: str, schema: dict[str, Any]) -> NamedSchema:
    required = set(schema.get("required", ()))
    fields = [
        Row(
            field,
            type_html(s),
            field in required,
            limits_text(s),
            prose_html(s.get("description", "")),
        )
        for field, s in schema.get("properties", {}).items()
    ]
    values = [str(value) for value in schema.get("enum", ())]
    return NamedSchema(name, prose_html(schema.get("description", "")), fields, values)


def page_context(document: dict[str, Any], schema_url: str) -> dict[str, Any]:
    components = document.get("components", {})
    return {
        "title": document["info"]["title"],
        "description": prose_html(document["info"].get("description", "")),
        "openapi_version": document["openapi"],
        "schema_url": schema_url,
        "operations": [
            _operation(path, method, item[method])
            for path, item in document["paths"].items()
            for method in _METHODS
            if method in item
        ],
        "schemas": [_named_schema(n, s) for n, s in sorted(components.get("schemas", {}).items())],
        "security_schemes": [
            SecurityScheme(name, scheme["scheme"], prose_html(scheme.get("description", "")))
            for name, scheme in components.get("securitySchemes", {}).items()
        ],
    }
