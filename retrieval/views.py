"""The public search API and page."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ingestion.models import Listing
from retrieval.lexical import lexical_search

MAX_QUERY_CHARS = 200
MAX_K = 50


class BadQueryError(ValueError):
    pass


def _parse(request: HttpRequest) -> tuple[str, int]:
    query = " ".join(request.GET.get("q", "").split())
    if not query:
        raise BadQueryError("q is required")
    if len(query) > MAX_QUERY_CHARS:
        raise BadQueryError(f"q is longer than {MAX_QUERY_CHARS} characters")
    if any(ord(ch) < 32 for ch in query):
        raise BadQueryError("q contains control characters")
    try:
        k = int(request.GET.get("k", "10"))
    except ValueError:
        raise BadQueryError("k must be an integer") from None
    if not 1 <= k <= MAX_K:
        raise BadQueryError(f"k must be between 1 and {MAX_K}")
    return query, k


def _listing_json(listing: Listing) -> dict[str, object]:
    return {
        "id": listing.pk,
        "title": listing.title,
        "venue": listing.venue,
        "start": listing.starts_at.isoformat() if listing.starts_at else None,
        "url": listing.url,
    }


@require_GET
def search_api(request: HttpRequest) -> JsonResponse:
    try:
        query, k = _parse(request)
    except BadQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    listings = lexical_search(query, k)
    return JsonResponse(
        {
            "mode": "lexical",
            "degraded": False,
            "reasons": [],
            "results": [_listing_json(listing) for listing in listings],
        }
    )


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, object] = {"query": request.GET.get("q", "")}
    if context["query"]:
        try:
            query, k = _parse(request)
            context["results"] = lexical_search(query, k)
        except BadQueryError as exc:
            context["error"] = str(exc)
    return render(request, "retrieval/search.html", context)
