"""The Celery application: Redis broker, one queue per kind of work."""

import os
import sys

from celery import Celery, signals
from kombu import Queue

from searchsite.env import env_bool, env_float, env_int

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")

app = Celery("searchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")

# Separate queues so a flood of one kind of work cannot starve the others: a backlog of
# embeddings must not delay fetching, and cache warming must never delay either.
QUEUES = ("ingestion", "embedding", "warming")
# How long a task a worker took and never acknowledged waits before another worker takes
# it; above the hard time limit (searchsite/checks.py says so when it is not).
VISIBILITY_TIMEOUT_S = env_float("CELERY_VISIBILITY_TIMEOUT_S", 600.0)

app.conf.update(
    task_queues=[Queue(name) for name in QUEUES],
    task_default_queue="ingestion",
    task_routes={
        "ingestion.tasks.embed_*": {"queue": "embedding"},
        "retrieval.tasks.*": {"queue": "warming"},
        # The recall guardrail is measurement: it must never delay ingestion either.
        "evaluation.tasks.*": {"queue": "warming"},
    },
    # Our tasks are idempotent, so acknowledge after the work: a worker that dies
    # mid-task leaves the message to be redelivered instead of lost.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    # Redis redelivers an unacknowledged message only after the visibility timeout
    # (one hour by default), which would leave a batch of a killed worker stranded for an
    # hour. Ten minutes is well above the hard time limit below, so a task that is still
    # running is never handed to a second worker, yet a lost one comes back soon. A lost
    # one: its worker's pool process died (the worker rejects it back at once), or the
    # whole worker did, as when its host is lost; then any other worker, on any host,
    # finds it past the timeout, each looking every `unacked_restore_interval` seconds
    # (kombu's default looks only every 10th time, about every 100 s).
    broker_transport_options={
        "visibility_timeout": VISIBILITY_TIMEOUT_S,
        "unacked_restore_interval": min(10.0, VISIBILITY_TIMEOUT_S / 4),
        "unacked_restore_throttle": 1,
    },
    # A task past the soft limit is told so (SoftTimeLimitExceeded); past the hard one its
    # pool process is killed and replaced, whatever it waits for: a frozen Postgres
    # answers nothing, and only the kill ends a task blocked on it (its claims, one
    # transaction, end with its connection). The visibility timeout stays above both.
    task_soft_time_limit=env_float("CELERY_TASK_SOFT_TIME_LIMIT_S", 240.0),
    task_time_limit=env_float("CELERY_TASK_TIME_LIMIT_S", 300.0),
    task_ignore_result=True,
    worker_send_task_events=False,
    broker_connection_retry_on_startup=True,
    timezone="UTC",
    beat_schedule={
        # Each source has its own interval; this only asks which ones are due.
        "poll-due-sources": {"task": "ingestion.tasks.poll_due_sources", "schedule": 15.0},
        # A safety sweep: embedding is normally queued by the poll that changed listings.
        # It gathers nothing first: what it is for already waits.
        "embed-pending": {
            "task": "ingestion.tasks.embed_pending",
            "schedule": 60.0,
            "kwargs": {"gather": False},
        },
        "refresh-vocabulary": {"task": "retrieval.tasks.refresh_vocabulary", "schedule": 300.0},
        # A listing added, withdrawn or moved is suggested as it is from the next refresh
        # on (a text whose listings have all ended is dropped at once, by the statement).
        "refresh-suggestions": {
            "task": "retrieval.tasks.refresh_suggestions",
            "schedule": env_float("SEARCH_SUGGEST_REFRESH_S", 60.0),
        },
        # A budget canary's figures over their objectives roll it back (ops/canary.py).
        "watch-canary": {"task": "ops.tasks.watch_canary", "schedule": 60.0},
        "recall-guardrail": {
            "task": "evaluation.tasks.recall_guardrail",
            # Read here, not from Django's settings: this module is imported before the
            # settings may be evaluated (tests choose their database first).
            "schedule": env_float("EVALUATION_GUARDRAIL_INTERVAL_S", 900.0),
        },
    },
)

app.autodiscover_tasks()


# A worker whose work can wait (embedding: its objective is a lag of seconds) yields the
# cores to searches, whose objective is milliseconds: WORKER_NICE raises its niceness, and
# its pool processes inherit it. Under a search load that wants every core it then gets
# what is left, its lag grows and says so (ingestion_embedding_lag_seconds); otherwise it
# runs at full speed. make run and docker-compose.yml set it for the embedding and warming
# workers. WORKER_SCHED_IDLE goes further: Linux's SCHED_IDLE, which runs the whole worker
# only on a core nothing else wants. Off by default: under searches that keep the cores
# busy it would starve the vector floor too; the sweep's model slices but the floor's run
# in that class anyway (EMBED_IDLE_CLASS, ingestion/idle_cores.py).
@signals.worker_init.connect
def _yield_the_cpu(**_: object) -> None:
    nice = env_int("WORKER_NICE", 0)
    idle = env_bool("WORKER_SCHED_IDLE", False)
    # Linux keeps both per thread: every thread the worker has now is set, and the pool
    # processes forked from it, and the threads they start (onnxruntime's), inherit it.
    for thread in (int(name) for name in os.listdir("/proc/self/task")):
        if nice:
            now = os.getpriority(os.PRIO_PROCESS, thread)
            os.setpriority(os.PRIO_PROCESS, thread, min(now + nice, 19))
        if idle:
            os.sched_setscheduler(thread, os.SCHED_IDLE, os.sched_param(0))


def _register_heartbeat() -> None:
    from searchsite.heartbeat import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_register_heartbeat()


# The ops page's history: each pool process writes its own per-minute roll-ups
# (ops/rollup_writer.py), from its start (threads do not survive the fork) to its end.
@signals.worker_process_init.connect
def _start_rollups(**_: object) -> None:
    from ops.rollup_writer import start_in_this_process

    start_in_this_process()


@signals.worker_process_shutdown.connect
def _stop_rollups(**_: object) -> None:
    from ops.rollup_writer import stop_this_process

    stop_this_process()


@signals.worker_process_shutdown.connect
def _close_warming_connections(**_: object) -> None:
    # Only a process that ran a warming task has the module, and connections to close: the
    # others are not made to import the search stack on their way out.
    warm = sys.modules.get("retrieval.warming.run")
    if warm is not None:
        warm.tasks_loop.stop()
