"""POST /api/editorial/records: upstream editorial systems push records with a token.

Each record gets its own result; invalid ones are quarantined with their JSON so an editor
can correct and retry them, and never stop the valid ones of the same request.
"""

import json
from dataclasses import dataclass

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingestion.batches import apply_parse_result
from ingestion.drafts import ParseResult
from ingestion.models import Poll, Source
from ingestion.parsers.editorial import validate_record
from ingestion.tasks import schedule_embedding
from ingestion.tokens import source_for_token
from ingestion.upsert import Outcome

MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_RECORDS = 1000


def _error(status: int, message: str) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="editorial"'
    return response


@csrf_exempt
@require_POST
def post_records(request: HttpRequest) -> JsonResponse:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    source = source_for_token(token.strip()) if scheme.lower() == "bearer" else None
    if source is None:
        return _error(401, "a valid bearer token is required")
    if int(request.headers.get("Content-Length") or 0) > MAX_BODY_BYTES:
        return _error(413, f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return _error(400, f"the body is not valid JSON: {exc}")
    records = body.get("records") if isinstance(body, dict) else body
    if not isinstance(records, list):
        return _error(400, 'send a JSON list of records, or {"records": [...]}')
    if len(records) > MAX_RECORDS:
        return _error(413, f"at most {MAX_RECORDS} records per request")

    result = ParseResult()
    for position, record in enumerate(records):
        result.add(validate_record(record, position))  # a bad one carries its JSON
    entered = enter_records(source, result)
    return JsonResponse(
        {
            "poll": entered.poll.pk,
            "counts": {name: getattr(entered.poll, name) for name in Poll.COUNTS},
            "results": [
                {
                    "position": position,
                    "id": external_id,
                    "outcome": outcome.value,
                    "error": reason or None,
                }
                for position, external_id, outcome, reason in entered.results
            ],
        }
    )


@dataclass(frozen=True)
class Entered:
    poll: Poll
    # (position, external id, outcome, reason) of each record, in the records' order.
    results: list[tuple[int, str, Outcome, str]]


def enter_records(source: Source, result: ParseResult) -> Entered:
    """The one way editorial records come in, from this API and from the admin's form and
    upload (ingestion/admin/editorial_entry.py): one poll, a source record (provenance) for
    each valid record, the invalid ones quarantined beside them, and the embedding queued
    once it all committed. It supersedes no earlier quarantine: a request or a file is not
    the source's whole state, as a feed is."""
    report: list[tuple[int, str, Outcome, str]] = []
    now = timezone.now()
    poll = apply_parse_result(
        source, result, fetched_at=now, started_at=now, snapshot=False, report=report
    )
    if poll.new or poll.updated:
        # After the commit: an embedding worker started before it would not see the rows.
        transaction.on_commit(schedule_embedding)
    return Entered(poll, sorted(report, key=lambda row: row[0]))
