"""Editors' admin: sources, listings, quarantine, polls, index generations, API tokens."""

from ingestion.admin import generations, listings, quarantine, sources, tokens

__all__ = ["generations", "listings", "quarantine", "sources", "tokens"]
