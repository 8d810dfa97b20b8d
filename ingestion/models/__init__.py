"""The write side's schema: sources, their records, canonical listings
(ingestion/models/listings.py), index generations, listing embeddings and embedding
candidates (ingestion/models/index.py), polls, quarantined items and API tokens
(ingestion/models/intake.py). Every model is imported here, where Django looks for them."""

from ingestion.models.index import EmbeddingCandidate, IndexGeneration, ListingEmbedding
from ingestion.models.intake import ApiToken, Poll, QuarantinedItem
from ingestion.models.listings import Audience, Listing, Source, SourceRecord, occurrence

__all__ = [
    "ApiToken",
    "Audience",
    "EmbeddingCandidate",
    "IndexGeneration",
    "Listing",
    "ListingEmbedding",
    "Poll",
    "QuarantinedItem",
    "Source",
    "SourceRecord",
    "occurrence",
]
