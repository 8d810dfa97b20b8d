"""Celery tasks: thin wrappers that unpack ids and call plain functions."""

import logging
import time
from typing import Any

import kombu.exceptions
import redis
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from ingestion import generations, indexing, pacing, polling, scheduling
from ingestion.postgres_outage import task_outliving_postgres_outages
from resilience import redis_keys
from resilience.redis_clients import get_redis

logger = logging.getLogger(__name__)
# Set while an embedding sweep is queued and not yet started (schedule_embedding); whoever
# purges the queues must drop it too, or no sweep is queued until it expires.
EMBED_SCHEDULED_KEY = redis_keys.EMBED_SCHEDULED


@shared_task
def poll_due_sources() -> int:
    due = scheduling.claim_due_sources()
    for source_id in due:
        poll_source.delay(source_id)
    return len(due)


@task_outliving_postgres_outages
def poll_source(source_id: int, force: bool = False) -> str:
    poll = polling.poll_source(source_id, force=force)
    if poll.new or poll.updated:
        schedule_embedding()
    return str(poll.status)


@task_outliving_postgres_outages
def embed_pending(gather: bool = True) -> int:
    """Embed batches until none are left or this task's time slice is used up; a new
    sweep (`gather`) first gathers what arrives while searches do (pacing.gather).

    Its queued mark goes first: kept through the gather, a Valkey outage then ended the
    task with the mark still set, and no sweep could be queued until it expired (a
    minute). Gone, a poll meanwhile queues one more sweep, which gathers in its turn."""
    get_redis().delete(EMBED_SCHEDULED_KEY)
    if gather:
        pacing.gather()
    deadline = time.monotonic() + settings.EMBED_TASK_SLICE_S
    done = indexing.embed_pending(until=deadline, keep_lanes=True)
    if time.monotonic() >= deadline:
        # More work may remain: yield the worker, and continue in a new task at once (there
        # is nothing to gather for: what it will find is already waiting).
        schedule_embedding(gather=False)
    else:
        # Nothing was left to claim, and this sweep's vectors are committed: a generation
        # they completed is ready (generations.mark_complete_generations_ready).
        generations.mark_complete_generations_ready()
    return done


def schedule_embedding(*, gather: bool = True) -> None:
    """Queue one embedding sweep; while one is queued and not yet started, don't add more.

    Without Redis nothing is queued and nothing lost: the work is the data (listings
    without an embedding of their current version), which the next sweep anyone queues,
    or beat's own, takes up. So a write that succeeded does not fail for want of a
    broker (the editorial API answered 500 for records it had stored)."""
    try:
        if get_redis().set(EMBED_SCHEDULED_KEY, "1", nx=True, ex=60):
            embed_pending.delay(gather=gather)
    except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
        logger.warning("embedding not queued (%s): the next sweep takes it up", type(exc).__name__)


@worker_ready.connect
def _sweep_on_start(**_: Any) -> None:
    """A worker killed in the middle of a sweep leaves its message unacknowledged, and
    Redis hands it out again only after the visibility timeout (ten minutes): the work
    it left would wait that long, or for beat's sweep, when no new listing schedules one.
    So every worker asks for a sweep as it starts (it changes nothing when none is due)."""
    schedule_embedding()
