"""The embedding worker yields the CPU to searches: WORKER_NICE (searchsite/celery.py)
lowers a Celery worker's priority, its pool's too, and `make run` sets it for the
embedding and warming workers (searchsite/supervisor.py)."""

import os

import psutil

from searchsite.supervisor import WORKERS
from tests.conftest import start_worker, stop_worker, wait_until


def test_a_worker_with_worker_nice_runs_its_pool_at_that_lower_priority(
    child_env: dict[str, str],
) -> None:
    ours = os.nice(0)
    worker = start_worker({**child_env, "WORKER_NICE": "7"}, name="nice-worker", queues="embedding")
    try:
        main = psutil.Process(worker.pid)
        wait_until(lambda: bool(main.children()), 30, "the worker's pool process")
        pool = main.children()
        threads = [thread.id for process in [main, *pool] for thread in process.threads()]
        assert {os.getpriority(os.PRIO_PROCESS, thread) for thread in threads} == {
            min(ours + 7, 19)
        }
    finally:
        stop_worker(worker)


def test_a_worker_with_worker_sched_idle_runs_its_pool_only_on_idle_cores(
    child_env: dict[str, str],
) -> None:
    worker = start_worker(
        {**child_env, "WORKER_SCHED_IDLE": "1"}, name="idle-worker", queues="embedding"
    )
    try:
        main = psutil.Process(worker.pid)
        wait_until(lambda: bool(main.children()), 30, "the worker's pool process")
        threads = [
            thread.id for process in [main, *main.children()] for thread in process.threads()
        ]
        assert {os.sched_getscheduler(thread) for thread in threads} == {os.SCHED_IDLE}
    finally:
        stop_worker(worker)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's own process untouched


def test_make_run_lowers_embedding_and_warming_alike_and_leaves_fetching() -> None:
    nice = {worker.name: worker.nice for worker in WORKERS}
    assert nice["embed-worker"] == nice["warm-worker"] > 0
    assert nice["ingest-worker"] == 0  # a poll's parsing is what makes listings searchable
