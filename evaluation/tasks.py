"""Celery tasks of the evaluation app: thin wrappers around plain functions."""

from celery import shared_task

from evaluation import guardrail


@shared_task
def recall_guardrail() -> str:
    report = guardrail.run()
    if report is None:
        return "no evaluation set"
    return f"{report.queries} queries"
