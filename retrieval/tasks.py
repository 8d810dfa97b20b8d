"""Celery tasks of the read side: thin wrappers around plain functions."""

from celery import shared_task

from retrieval import vocabulary, warm


@shared_task
def warm_cache(key: str) -> str:
    return warm.warm(key)


@shared_task
def refresh_vocabulary() -> None:
    vocabulary.refresh()
