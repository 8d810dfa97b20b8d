"""A listing's content version, bumped whenever its embedded text changes.

Invariant: the bump happens in the same UPDATE that saves the new text, so from the commit
on every live generation's vector of the listing is older than the listing and
ingestion/indexing.py re-embeds it; a save that changes no embedded field leaves the
version, and so the vectors, alone.
"""

from collections.abc import Iterable

from django.db.models import F

from ingestion.models import Listing
from ingestion.text import EMBEDDED_FIELDS


def save_listing(listing: Listing, *, text_changed: bool) -> None:
    """Save `listing`; when its embedded text changed, with its content version bumped. A
    new listing keeps its first version: it has no vector yet to make stale."""
    bump = text_changed and listing.pk is not None
    if bump:
        # F(): two concurrent saves each bump, so neither's vector can pass for current.
        listing.content_version = F("content_version") + 1
    listing.save()
    if bump:
        listing.refresh_from_db(fields=["content_version"])  # the expression, as a number


def save_edit(listing: Listing, changed_fields: Iterable[str]) -> bool:
    """Save an editor's change to `listing` (the names of the fields they changed); True
    when its embedded text changed, so its embedding is to be queued once the transaction
    commits (the caller's job: services never import tasks)."""
    text_changed = not set(EMBEDDED_FIELDS).isdisjoint(changed_fields)
    save_listing(listing, text_changed=text_changed)
    return text_changed
