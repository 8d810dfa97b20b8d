"""Editors' admin: sources, listings, quarantine, polls and index generations."""

from ingestion.admin import generations, listings, quarantine, sources

__all__ = ["generations", "listings", "quarantine", "sources"]
