"""Lexical retrieval: weighted full-text search over active listings."""

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F

from ingestion.models import SEARCH_CONFIG, Listing


def lexical_search(query: str, k: int) -> list[Listing]:
    tsquery = SearchQuery(query, search_type="websearch", config=SEARCH_CONFIG)
    return list(
        Listing.objects.filter(status=Listing.Status.ACTIVE, search_vector=tsquery)
        .annotate(rank=SearchRank(F("search_vector"), tsquery))
        .order_by("-rank", "id")[:k]
    )
