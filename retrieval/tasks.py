"""Celery tasks of the read side: thin wrappers around plain functions."""

from celery import shared_task

from retrieval.pg import suggestions, views, vocabulary
from retrieval.warming import run as warming_run


@shared_task
def warm_cache(key: str) -> str:
    return warming_run.warm(key)


@shared_task
def refresh_vocabulary() -> bool:
    return views.refresh_if_stale(vocabulary.VIEWS)


@shared_task
def refresh_suggestions() -> bool:
    return views.refresh_if_stale((suggestions.VIEW,))
