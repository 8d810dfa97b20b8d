"""Editors' admin: sources, listings, source records, quarantine, polls, index
generations and API tokens. Who may do what is the groups' business (migrations/0009:
editors, ops)."""

from ingestion.admin import generations, listings, quarantine, records, sources, tokens

__all__ = ["generations", "listings", "quarantine", "records", "sources", "tokens"]
