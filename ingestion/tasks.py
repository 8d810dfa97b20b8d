"""Celery tasks: thin wrappers that unpack ids and call plain functions."""

import time

from celery import shared_task
from django.conf import settings

from ingestion import indexing, polling, scheduling
from resilience.redis_clients import get_redis

_EMBED_SCHEDULED_KEY = "searchsite:embed-scheduled"


@shared_task
def poll_due_sources() -> int:
    due = scheduling.claim_due_sources()
    for source_id in due:
        poll_source.delay(source_id)
    return len(due)


@shared_task
def poll_source(source_id: int, force: bool = False) -> str:
    poll = polling.poll_source(source_id, force=force)
    if poll.new or poll.updated:
        schedule_embedding()
    return str(poll.status)


@shared_task
def embed_pending() -> int:
    """Embed batches until none are left or this task's time slice is used up."""
    get_redis().delete(_EMBED_SCHEDULED_KEY)
    deadline = time.monotonic() + settings.EMBED_TASK_SLICE_S
    done = indexing.embed_pending(until=deadline)
    if time.monotonic() >= deadline:
        schedule_embedding()  # more work may remain: yield the worker, continue in a new task
    return done


def schedule_embedding() -> None:
    """Queue one embedding sweep; while one is queued and not yet started, don't add more."""
    if get_redis().set(_EMBED_SCHEDULED_KEY, "1", nx=True, ex=60):
        embed_pending.delay()
