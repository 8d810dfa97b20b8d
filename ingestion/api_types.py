"""The editorial records API's contract as types: a record as the parser accepts it
(ingestion/parsers/editorial.py, whose limits these are), and the bodies
`POST /api/editorial/records` answers with (ingestion/api.py). The OpenAPI document
(searchsite/openapi.py) is generated from them."""

from typing import Annotated, Required

from pydantic import ConfigDict, Field, with_config

# typing_extensions' TypedDict, not typing's: pydantic reads a TypedDict's fields only
# from the former on Python 3.11.
from typing_extensions import TypedDict

from ingestion.parsers import editorial as limits
from ingestion.upsert import Outcome

# The parser trims text before it measures it, and counts null as absent.
_Id = Annotated[str, Field(min_length=1, max_length=limits.MAX_ID_CHARS)] | int
_Alias = Annotated[str, Field(min_length=1, max_length=limits.MAX_ALIAS_CHARS)]
_Moment = Annotated[str, Field(max_length=100)] | None


# extra="forbid": the parser rejects unknown fields, so a misspelt one is not silently lost.
@with_config(ConfigDict(extra="forbid"))
class EditorialRecord(TypedDict, total=False):
    """One listing as an editor types it. A record the parser refuses is quarantined with
    its reason (its result says `quarantined`), never the whole request."""

    id: Required[Annotated[_Id, Field(description="Its id in your system; resend to update.")]]
    title: Required[Annotated[str, Field(min_length=1, max_length=limits.MAX_TITLE_CHARS)]]
    description: Annotated[str, Field(max_length=limits.MAX_DESCRIPTION_CHARS)] | None
    venue: Annotated[str, Field(max_length=limits.MAX_VENUE_CHARS)] | None
    aliases: Annotated[
        list[_Alias] | None,
        Field(max_length=limits.MAX_ALIASES, description="Other names of the venue."),
    ]
    start: Annotated[
        _Moment,
        Field(
            description="An ISO 8601 date-time (a date alone is refused); without a UTC "
            "offset it is read in `timezone`, which is then required."
        ),
    ]
    end: Annotated[_Moment, Field(description="As `start`; not before it, and only with it.")]
    timezone: Annotated[
        Annotated[str, Field(max_length=100)] | None,
        Field(description="An IANA time zone name, e.g. Europe/London."),
    ]
    url: Annotated[
        Annotated[str, Field(max_length=limits.MAX_URL_CHARS)] | None,
        Field(description="An http(s) address."),
    ]
    withdrawn: Annotated[bool | None, Field(description="true takes the listing down.")]


class RecordsEnvelope(TypedDict):
    records: list[EditorialRecord]


class PollCounts(TypedDict):
    """The request's records by outcome; `items` is all of them."""

    items: int
    new: int
    updated: int
    unchanged: int
    withdrawn: int
    quarantined: int


class RecordResult(TypedDict):
    position: Annotated[int, Field(description="The record's index in the request.")]
    id: Annotated[str | None, Field(description="Its id, or null when it had no valid one.")]
    outcome: Outcome
    error: Annotated[str | None, Field(description="Why it was quarantined, or null.")]


class RecordsBody(TypedDict):
    """The 200 body: one result per record, in the request's order."""

    poll: Annotated[int, Field(description="The id of the poll this request was recorded as.")]
    counts: PollCounts
    results: list[RecordResult]


class ErrorBody(TypedDict):
    """The 400, 401 and 413 bodies: the whole request was refused."""

    error: str
