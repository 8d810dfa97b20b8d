"""What parsers produce: listing drafts, bad items and whole-payload rejections.

Parsers are pure functions from bytes to a `ParseResult`; they never touch the database.
Invariant: every input item a parser sees ends up exactly once in `drafts` or `bad`, so
`items == len(drafts) + len(bad)` and the per-poll counts can be checked against it.
"""

from dataclasses import dataclass, field
from datetime import datetime

# A quarantined item keeps this much of its raw input for editors to look at.
EXCERPT_CHARS = 500


def storable(text: str) -> str:
    """Text Postgres will store: no NUL, no unpaired surrogates. Parsers should already
    drop these; this is the last line, so one bad character can never fail a whole batch."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


@dataclass(frozen=True)
class ListingDraft:
    """One listing as a source describes it, before de-duplication."""

    external_id: str  # RSS guid or link; iCal UID + RECURRENCE-ID; editorial id
    title: str
    position: int  # the item's index in its payload
    description: str = ""
    venue: str = ""
    aliases: tuple[str, ...] = ()
    starts_at: datetime | None = None  # timezone-aware
    ends_at: datetime | None = None  # timezone-aware
    timezone: str = ""  # IANA name when the source gives one
    url: str = ""
    all_day: bool = False
    withdrawn: bool = False  # e.g. iCal STATUS:CANCELLED, an editorial withdrawal
    # A series (a recurring calendar event): each occurrence's (start, end), sooner first,
    # moved ones at their new time, cancelled ones left out; `starts_at` is the first
    # start and `ends_at` the last end. Empty for a one-off.
    occurrences: tuple[tuple[datetime, datetime], ...] = ()
    recurrence: str = ""  # the rule in words when it is simple: "every Tuesday"

    def __post_init__(self) -> None:
        for name in (
            "external_id",
            "title",
            "description",
            "venue",
            "timezone",
            "url",
            "recurrence",
        ):
            object.__setattr__(self, name, storable(getattr(self, name)))
        object.__setattr__(self, "aliases", tuple(storable(a) for a in self.aliases))


@dataclass(frozen=True)
class BadItem:
    """An input item that cannot become a listing, with the reason editors will see."""

    position: int | None
    external_id: str | None
    reason: str
    excerpt: str = ""
    permanent: bool = True
    # The whole item, for kinds where an editor can correct it and retry (editorial JSON).
    raw: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", storable(self.reason))
        object.__setattr__(self, "excerpt", storable(self.excerpt[:EXCERPT_CHARS]))
        object.__setattr__(self, "raw", storable(self.raw))
        if self.external_id is not None:
            object.__setattr__(self, "external_id", storable(self.external_id))


@dataclass
class ParseResult:
    drafts: list[ListingDraft] = field(default_factory=list)
    bad: list[BadItem] = field(default_factory=list)

    @property
    def items(self) -> int:
        return len(self.drafts) + len(self.bad)

    def add(self, item: "ListingDraft | BadItem") -> None:
        if isinstance(item, BadItem):
            self.bad.append(item)
        else:
            self.drafts.append(item)


class PayloadIds:
    """The ids a payload has used so far: a later item with the same id is a duplicate."""

    def __init__(self) -> None:
        self._first: dict[str, int] = {}

    def duplicate(self, external_id: str | None, position: int) -> str | None:
        """Why the item at `position` is rejected, or None (and its id is remembered)."""
        if external_id is None:
            return None
        if external_id in self._first:
            return f"duplicate id in payload (first at position {self._first[external_id]})"
        self._first[external_id] = position
        return None


class PayloadError(Exception):
    """The whole payload is rejected (not XML at all, entity declarations, too large...)."""

    def __init__(self, reason: str, *, permanent: bool = True, excerpt: str = "") -> None:
        super().__init__(reason)
        self.reason = storable(reason)
        self.permanent = permanent
        self.excerpt = storable(excerpt[:EXCERPT_CHARS])
