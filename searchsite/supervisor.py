"""`make run`: the whole system in one terminal.

Starts the embedded services (unless DATABASE_URL / REDIS_URL point elsewhere), and with
SEARCH_REPLICAS=N that many streaming replicas of the embedded Postgres, prepares the
database, then runs a Celery worker, Celery beat and the ASGI web server until
Ctrl-C, and stops everything it started in reverse order.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass

from searchsite import embedded
from searchsite.env import env_int

# Celery's warm shutdown finishes the task in hand; past this it is killed and, thanks
# to acks_late, the task is redelivered on the next start.
STOP_TIMEOUT_S = 20.0
# Loading the model and warming up take seconds; far longer, and something is wrong.
READY_TIMEOUT_S = 120.0


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]


def _spawn(name: str, argv: list[str], added_env: dict[str, str]) -> Child:
    # Own process group: Ctrl-C reaches only the supervisor, which then stops the children
    # in order (web before worker before the servers they use).
    # The child names itself in its database connections (settings.PROCESS_ROLE).
    env = {**os.environ, **added_env, "SEARCHSITE_ROLE": name}
    return Child(
        name, subprocess.Popen(argv, cwd=embedded.REPO_DIR, env=env, start_new_session=True)
    )


def _stop(child: Child) -> None:
    if child.process.poll() is not None:
        return
    # SIGTERM to the leader only: Celery's main process then finishes the tasks in hand and
    # stops its pool itself (signalling the whole group would kill tasks mid-way).
    child.process.send_signal(signal.SIGTERM)
    try:
        child.process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"{child.name} did not stop within {STOP_TIMEOUT_S:.0f}s; killing it", flush=True)
        os.killpg(child.process.pid, signal.SIGKILL)
        child.process.wait()


def worker_argv(queues: str, concurrency: int, hostname: str, loglevel: str = "INFO") -> list[str]:
    # Without gossip and mingle: with a Redis broker, a worker whose gossip failed to
    # restart after a broker outage ("Error on restarting Gossip") may never consume again
    # (celery/celery#8030, #8082), which a full test run saw once after Valkey came back.
    # Nothing here uses either; remote control (`inspect ping`) does not need them.
    return [
        sys.executable, "-m", "celery", "-A", "searchsite", "worker", f"--loglevel={loglevel}",
        f"--queues={queues}", f"--concurrency={concurrency}", f"--hostname={hostname}",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip


# Web processes `make run` starts (WEB_PROCESSES): chosen by measurement, docs/reliability.md.
DEFAULT_WEB_PROCESSES = 1


def web_processes() -> int:
    return env_int("WEB_PROCESSES", DEFAULT_WEB_PROCESSES)


def web_argv(port: int, log_level: str = "info") -> list[str]:
    """uvicorn on loopback, with `web_processes()` processes sharing its socket."""
    return [
        sys.executable, "-m", "uvicorn", "searchsite.asgi:application", "--host", "127.0.0.1",
        "--port", str(port), "--lifespan", "off", "--log-level", log_level, "--loop", "uvloop",
        "--workers", str(web_processes()),
    ]  # fmt: skip


@dataclass(frozen=True)
class Worker:
    name: str
    queues: str
    concurrency: int
    nice: int = 0  # its WORKER_NICE (searchsite/celery.py)

    def argv(self) -> list[str]:
        return worker_argv(self.queues, self.concurrency, f"{self.name}@%h")

    def env(self) -> dict[str, str]:
        """What it adds to the environment it is started with."""
        return {"WORKER_NICE": str(self.nice)} if self.nice else {}


# Fetching waits on the network, so it gets several processes: one stalled source must not
# hold up the others. Embedding is CPU-bound and gets its own worker, so neither kind of
# work can starve the other. Warming gets a third: its searches wait on Postgres, and
# during a vector stall the embedding of new listings waited behind them
# (docs/decisions/one-celery-worker-per-kind-of-work.md). Embedding and warming can wait
# for searches: they run at a lower CPU priority, the same for both (warming, with the two
# at one priority, still slowed the embedding's catch-up after a vector stall by a third:
# docs/reliability.md; above it, it would take more).
BACKGROUND_NICE = 10
WORKERS = (
    Worker("ingest-worker", "ingestion", 4),
    Worker("embed-worker", "embedding", 1, nice=BACKGROUND_NICE),
    Worker("warm-worker", "warming", 1, nice=BACKGROUND_NICE),
)


def commands(port: int) -> list[tuple[str, list[str], dict[str, str]]]:
    """Each child's name, argv and the environment it adds (docker-compose.yml runs the
    same: tests/site/test_compose.py)."""
    schedule = embedded.run_dir() / "celerybeat-schedule"
    beat = [sys.executable, "-m", "celery", "-A", "searchsite", "beat", "--loglevel=INFO",
            f"--schedule={schedule}"]  # fmt: skip
    workers = [(worker.name, worker.argv(), worker.env()) for worker in WORKERS]
    return [*workers, ("beat", beat, {}), ("web", web_argv(port), {})]


def _prepare_metrics_dir() -> None:
    """Web and worker processes write their metrics here, and /metrics adds them all up.
    Files of a previous run would count its processes twice, so start empty."""
    metrics_dir = embedded.run_dir() / "prometheus"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)


def _wait_until_ready(port: int, children: list[Child], stopping: threading.Event) -> None:
    """Until the web server answers /healthz/ready (its first probe warms its own event
    loop: retrieval/warming/warm_up.py), a child exits, or Ctrl-C; at most READY_TIMEOUT_S."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and not stopping.is_set():
        if any(child.process.poll() is not None for child in children):
            return  # the main loop reports it
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/ready", timeout=5):
                return
        except OSError:  # not listening yet, or 503 (HTTPError) while it warms up
            stopping.wait(0.2)
    print(f"the web server is not ready after {READY_TIMEOUT_S:.0f}s", flush=True)


def _announce(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    print(
        "\nListings search is starting:\n"
        f"  search page  {base}/\n"
        f"  search API   {base}/api/search?q=concert\n"
        f"  admin        {base}/admin/\n"
        f"  metrics      {base}/metrics\n"
        f"  health       {base}/healthz (and /healthz/ready, /healthz/live)\n"
        "Press Ctrl-C to stop everything.\n",
        flush=True,
    )


def main() -> int:
    port = int(os.environ.get("PORT", "8000"))
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())

    own_postgres = not os.environ.get("DATABASE_URL")
    services = embedded.ensure_running()
    replicas = int(os.environ.get("SEARCH_REPLICAS") or 0)
    if replicas and own_postgres:
        embedded.ensure_replicas(services, replicas)
    _prepare_metrics_dir()
    children: list[Child] = []
    try:
        manage = [sys.executable, "manage.py", "bootstrap"]
        if subprocess.run(manage, cwd=embedded.REPO_DIR, check=False).returncode != 0:
            print("bootstrap failed; stopping", flush=True)
            return 1
        for name, argv, added_env in commands(port):
            children.append(_spawn(name, argv, added_env))
        _wait_until_ready(port, children, stopping)
        _announce(port)
        while not stopping.wait(0.5):
            exited = [c for c in children if c.process.poll() is not None]
            if exited:
                print(
                    f"{exited[0].name} exited with {exited[0].process.returncode}; stopping",
                    flush=True,
                )
                return 1
        return 0
    finally:
        for child in reversed(children):
            _stop(child)
        services.stop()
        print("stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
