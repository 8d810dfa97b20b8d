"""Celery tasks of the ops app: thin wrappers over ops/canary.py."""

from celery import shared_task
from django.utils import timezone

from ops import canary


@shared_task
def watch_canary() -> int | None:
    """Roll back a canary whose figures stay over their objectives; its id, if one was."""
    rolled_back = canary.watch(timezone.now())
    return rolled_back.pk if rolled_back else None
