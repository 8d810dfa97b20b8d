"""A real Celery worker starts against the broker and announces itself."""

import subprocess

import pytest
from django.test import Client

from ingestion import generations
from retrieval.warming import warm_up


@pytest.mark.django_db(transaction=True)
def test_healthz_sees_a_real_worker(celery_worker: subprocess.Popen[bytes], client: Client) -> None:
    generations.ensure_active_generation("model-a", 3)
    warm_up.mark_warmed_up()  # what bootstrap does: /healthz asks for it too
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["worker"]["ok"]
