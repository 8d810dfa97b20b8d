"""Celery tasks of the evaluation app: thin wrappers around plain functions."""

from celery import shared_task

from evaluation import guardrail


@shared_task
def recall_guardrail() -> str:
    report = guardrail.run()
    if report is None:
        return "no evaluation set"
    # A budget canary's arms too, each under its own budgets, on the same run's beat.
    arms = guardrail.run_arms()
    return f"{report.queries} queries{'' if arms is None else ', and each canary arm'}"
