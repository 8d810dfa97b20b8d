"""Celery tasks of the read side: thin wrappers around plain functions."""

from celery import shared_task

from retrieval.pg import suggestions, vocabulary
from retrieval.warming import run as warming_run


@shared_task
def warm_cache(key: str) -> str:
    return warming_run.warm(key)


@shared_task
def refresh_vocabulary() -> None:
    vocabulary.refresh()


@shared_task
def refresh_suggestions() -> None:
    suggestions.refresh()
