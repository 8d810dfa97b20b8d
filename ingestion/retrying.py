"""Retrying a quarantined editorial record, after an editor corrected its JSON."""

import json

from django.db import transaction
from django.utils import timezone

from ingestion.drafts import BadItem
from ingestion.models import QuarantinedItem
from ingestion.parsers.editorial import validate_record
from ingestion.upsert import apply_draft


def retry_record(item: QuarantinedItem) -> str:
    try:
        record = json.loads(item.raw)
    except json.JSONDecodeError as exc:
        return _still_bad(item, f"not valid JSON: {exc.msg}")
    result = validate_record(record, item.position or 0)
    if isinstance(result, BadItem):
        return _still_bad(item, result.reason)
    with transaction.atomic():
        outcome = apply_draft(item.source, result, timezone.now())
        item.resolved_at = timezone.now()
        item.save(update_fields=["resolved_at"])
    return f"ingested ({outcome.value})"


def _still_bad(item: QuarantinedItem, reason: str) -> str:
    item.reason = reason
    item.retry_requested_at = timezone.now()
    item.save(update_fields=["reason", "retry_requested_at"])
    return f"still invalid: {reason}"
