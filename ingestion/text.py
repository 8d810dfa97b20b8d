"""Text normalisation shared by de-duplication and the embedding pipeline."""

import re
import unicodedata

from ingestion.drafts import ListingDraft

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)

# The listing fields `embedding_text` is made of: a change to any of them makes the
# listing's vectors stale (its content version is bumped), a change to any other does not.
EMBEDDED_FIELDS = ("title", "venue", "aliases", "description")


def normalise(text: str) -> str:
    """Case, Unicode form, accents, punctuation and whitespace folded away."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    without_accents = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_WORD.sub(" ", without_accents).strip()


def embedding_text(title: str, venue: str, aliases: list[str], description: str) -> str:
    """Text pipeline version 1 (ingestion.generations.TEXT_PIPELINE_VERSION): what a
    listing's vector is computed from. Changing it means building a new generation."""
    parts = [title]
    if venue:
        parts.append(f"at {venue}")
    if aliases:
        parts.append(f"also known as {', '.join(aliases)}")
    if description:
        parts.append(description[:1000])
    return ". ".join(parts)


def draft_fields(draft: ListingDraft) -> dict[str, object]:
    """The draft's listing fields in a JSON-ready form (stored on its SourceRecord). A
    series adds its occurrences and rule; a one-off's fields are what they always were,
    so its record's content hash is too."""
    fields: dict[str, object] = {
        "title": draft.title,
        "description": draft.description,
        "venue": draft.venue,
        "aliases": list(draft.aliases),
        "starts_at": draft.starts_at.isoformat() if draft.starts_at else None,
        "ends_at": draft.ends_at.isoformat() if draft.ends_at else None,
        "timezone": draft.timezone,
        "url": draft.url,
        "all_day": draft.all_day,
        "withdrawn": draft.withdrawn,
    }
    if draft.occurrences:
        fields["occurrences"] = [
            [start.isoformat(), end.isoformat()] for start, end in draft.occurrences
        ]
        fields["recurrence"] = draft.recurrence
    return fields
