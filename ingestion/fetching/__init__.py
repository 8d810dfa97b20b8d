"""Fetching source payloads: over HTTP(S) with an address guard, or from local files."""

from ingestion.fetching.addresses import check_address
from ingestion.fetching.local import read_local
from ingestion.fetching.outcomes import FetchError, FetchResult
from ingestion.fetching.remote import fetch_url

__all__ = ["FetchError", "FetchResult", "check_address", "fetch_url", "read_local"]
