"""The system under load, for bench/load.py and bench/soak.py: its web server and
embedding worker, the processes that serve it (web, worker, Postgres, Valkey) found and
measured by CPU and memory, and the probes the generator samples while it runs
(server-side in-flight stages, Postgres connections, Valkey memory).

Reading the system changes nothing: process tables, /metrics, counts from Postgres and
Valkey. What the bench starts it stops; what it ingests, bench/feed.py removes."""

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import psycopg
from feed import remove_bench_sources
from harness import REPO
from openloop import Connections, Probe
from prometheus_client.parser import text_string_to_metric_families
from psycopg.rows import TupleRow

# Each group is measured with every process under its roots, children included (uvicorn's,
# Celery's pool, Postgres' backends), read afresh each time since backends come and go.
Groups = Mapping[str, list[psutil.Process]]


@contextmanager
def web_server(log: Path) -> Iterator[str]:
    """uvicorn serving the site on 127.0.0.1 as `make run` starts it, its output (a line
    per 503 under overload) to `log`; yields the base URL once it is ready."""
    from search import free_port

    from searchsite.supervisor import web_argv

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with open(log, "ab") as output:
        server = subprocess.Popen(
            web_argv(port, "warning"),
            cwd=REPO,
            env={**os.environ, "SEARCHSITE_ROLE": "web"},
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    try:
        _wait_until_ready(base_url, server)
        yield base_url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def _wait_until_ready(base_url: str, server: subprocess.Popen[bytes]) -> None:
    """Until the server is ready, as `make run`'s supervisor waits for it: its first probe
    warms the process (its model, its whole pool, its statements), and the stack if cold."""

    async def ready() -> None:
        connections = Connections(base_url, limit=1)
        try:
            while server.poll() is None:
                with contextlib.suppress(OSError):
                    status, _ = await connections.get("/healthz/ready", lambda: None)
                    if status == 200:
                        return
                await asyncio.sleep(0.1)
        finally:
            await connections.close()

    asyncio.run(asyncio.wait_for(ready(), timeout=300))
    if server.poll() is not None:
        raise SystemExit(f"the web server exited with {server.returncode}")


@contextmanager
def embedding_worker() -> Iterator[psutil.Process]:
    """A Celery worker for embedding (and warming) with one process, as `make run` has."""
    from searchsite.supervisor import STOP_TIMEOUT_S, WORKERS, worker_argv

    (embed,) = (w for w in WORKERS if w.name == "embed-worker")
    worker = subprocess.Popen(
        worker_argv("embedding,warming", 1, "bench-load-embed@%h", "WARNING"),
        cwd=REPO,
        env={**os.environ, "SEARCHSITE_ROLE": embed.name, **embed.env()},
        start_new_session=True,
    )
    try:
        yield psutil.Process(worker.pid)
    finally:
        worker.send_signal(signal.SIGTERM)  # the leader only: it stops its own pool
        try:
            worker.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """The options bench/load.py and bench/soak.py share: where the system is, how long a
    request may take, and how the ingestion ceiling is measured."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench100k",
        help="the database bench/search.py built with --data-dir",
    )
    parser.add_argument("--url", help="a running stack on loopback (else one is started)")
    parser.add_argument("--timeout-s", type=float, default=5.0, help="per request")
    parser.add_argument("--ingest-records", type=int, default=256, help="for the ceiling")


def prepare(data_dir: Path) -> psutil.Process:
    """The bench database as bench/search.py built it (used as found, never rebuilt), less
    anything a run that did not clean up left, with its active generation; returns the
    postmaster."""
    from search_data import record_listings

    from ingestion import generations
    from ingestion.embedding import DIMENSIONS, MODEL_NAME
    from ingestion.models import Listing
    from retrieval.pg.pool import conninfo
    from retrieval.warming import warm_up

    remove_bench_sources()  # of a run that did not clean up
    record_listings()  # a database built before its listings had their records
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    print(f"{Listing.objects.count()} listings in {data_dir}")
    # As `manage.py bootstrap` does before `make run` serves: Postgres was just started
    # with empty shared buffers, and a capacity limit measured cold would be one of a
    # stack that is not yet serving.
    warmed = warm_up.warm_up()
    print(f"warmed up: {sum(warmed.prewarmed.values())} blocks prewarmed, searches {warmed.modes}")
    return postgres_postmaster(conninfo())


def serve(
    stack: ExitStack, url: str | None, log: Path, postmaster: psutil.Process
) -> tuple[str, Groups]:
    """The base URL of the system to load and its processes by group: with `url`, the
    stack already serving there (e.g. `make run`'s); else a web server and an embedding
    worker started here, stopped when `stack` closes."""
    if url:
        base_url = url.rstrip("/")
        web = listening_process(base_url)
        workers = celery_workers(web)
    else:
        base_url = stack.enter_context(web_server(log))
        print(f"web server's log: {log}")
        web = listening_process(base_url)
        workers = [stack.enter_context(embedding_worker())]
    return base_url, {
        "web": [web],
        "postgres": [postmaster],
        "worker": workers,
        "valkey": [valkey_process()],
    }


def listening_process(url: str) -> psutil.Process:
    """The process of this user that listens on `url`'s port (the web server): with
    several web processes (WEB_PROCESSES), the uvicorn process that started them, so that
    all of them are measured under it (the listening socket is reported for one of them
    only)."""
    port = urlsplit(url).port
    for conn in psutil.net_connections(kind="tcp"):
        # laddr is (ip, port), or () for a socket bound to nothing
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr[1] == port and conn.pid:
            process = psutil.Process(conn.pid)
            parent = process.parent()
            if parent is not None and "uvicorn" in parent.cmdline():
                return parent
            return process
    raise SystemExit(f"no process of this user listens on port {port}")


def celery_workers(beside: psutil.Process) -> list[psutil.Process]:
    """Celery workers started from the same directory as `beside` (an attached stack's)."""
    cwd = beside.cwd()
    found = []
    for process in psutil.process_iter(["cmdline", "cwd", "ppid"]):
        cmdline = process.info["cmdline"] or []
        if "celery" in cmdline[:3] and "worker" in cmdline and process.info["cwd"] == cwd:
            found.append(process)
    # The workers' pool processes are their children: measured under them, not twice.
    pids = {process.pid for process in found}
    return [process for process in found if process.info["ppid"] not in pids]


def postgres_postmaster(conninfo: str) -> psutil.Process:
    """The postmaster: the parent of a backend this opens (asked while it is open)."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None  # a SELECT of a value has a row
        parent = psutil.Process(row[0]).parent()
    if parent is None:
        raise SystemExit("the database's backend has no parent process on this machine")
    return parent


def valkey_process() -> psutil.Process:
    from resilience.redis_clients import get_redis

    info = get_redis().info("server")
    return psutil.Process(int(info["process_id"]))


def process_tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(groups: Groups) -> dict[tuple[str, int], float]:
    """User plus system CPU of each group's processes alive now, since each started, by
    (group, pid); and under (group, -pid) of each group's root, what its children that
    have ended used (Postgres' parallel workers live for one statement: counted only
    while alive, a plan that starts two on every call went unseen)."""
    found = {}
    for name, roots in groups.items():
        for root in roots:
            for process in process_tree(root):
                try:
                    times = process.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                found[name, process.pid] = times.user + times.system
                if process is root:
                    found[name, -root.pid] = times.children_user + times.children_system
    return found


def cpu_used(
    before: Mapping[tuple[str, int], float], after: Mapping[tuple[str, int], float]
) -> dict[str, float]:
    """CPU seconds each group used between two `cpu_seconds` readings. A process that
    ended between them counts whole, from its start, with its root's ended children (a
    parallel worker's whole life is one statement; a backend's is the pool's lifetime,
    and few end within a step); one that started is counted whole."""
    used: dict[str, float] = {}
    for (name, pid), total in after.items():
        used[name] = used.get(name, 0.0) + total - before.get((name, pid), 0.0)
    return used


def cores_used(
    before: Mapping[tuple[str, int], float], after: Mapping[tuple[str, int], float], seconds: float
) -> dict[str, float]:
    """`cpu_used` over `seconds`, in cores."""
    return {name: round(cpu / seconds, 3) for name, cpu in cpu_used(before, after).items()}


def rss_mb(groups: Groups) -> dict[str, float]:
    """Resident memory of every process of every group, keyed "group pid name"."""
    found = {}
    for name, roots in groups.items():
        for process in (p for root in roots for p in process_tree(root)):
            try:
                found[f"{name} {process.pid} {process.name()}"] = process.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                continue
    return found


# Cumulative series of /metrics the probe reads where the server exports them, under the
# names the step figures give them (a name ending in _total: the increase over a step).
SERVER_TOTALS = {
    "retrieval_pool_wait_seconds_count": "pool_waits_total",
    "retrieval_pool_wait_seconds_sum": "pool_wait_seconds_total",
    "retrieval_pool_timeouts_total": "pool_timeouts_total",
    "retrieval_shed_at_door_total": "shed_at_door_total",
}


# Latency histograms whose slow part is counted apart, by the label that names what was
# timed, with the bucket bound above which it counts as slow (one of LATENCY_BUCKETS): so
# that a step's tail can be put down to the stage it grew in, or to none (the request's
# own time on the server, every stage included, against the client's).
SLOW_PARTS = {
    "retrieval_stage_seconds": ("stage", "0.01"),
    "retrieval_request_seconds": ("mode", "0.02"),
}


def server_metrics(base_url: str) -> Probe:
    """From the web server's /metrics: stages running now (`retrieval_in_flight`, by
    stage), listings waiting for their embedding, its waits for a pooled connection and
    requests shed at the door so far, what each pacer let through in each mode, and of
    each stage and each kind of answer, how many
    so far and how many of them slow (SLOW_PARTS: `<part>_total`, `<part>_slow_total`)."""
    connections = Connections(base_url, limit=1)

    async def probe() -> dict[str, float]:
        try:
            async with asyncio.timeout(1.0):
                status, body = await connections.get("/metrics", lambda: None)
        except (TimeoutError, OSError):
            return {}
        if status != 200:
            return {}
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                if family.name == "retrieval_in_flight":
                    found[f"server_in_flight_{sample.labels['stage']}"] = sample.value
                elif sample.name == "ingestion_embeddings_pending":
                    found["embeddings_pending"] = sample.value
                elif sample.name == "ingestion_paced_total":  # what each pacer let through
                    key = f"paced_{sample.labels['work']}_{sample.labels['mode']}_total"
                    found[key] = sample.value
                elif sample.name in SERVER_TOTALS:  # summed over labels (the door's surface)
                    key = SERVER_TOTALS[sample.name]
                    found[key] = found.get(key, 0.0) + sample.value
                elif family.name in SLOW_PARTS:
                    label, bound = SLOW_PARTS[family.name]
                    part = f"{label}_{sample.labels.get(label)}"
                    if sample.name.endswith("_count"):
                        found[f"{part}_total"] = sample.value
                    elif sample.name.endswith("_bucket") and sample.labels["le"] == bound:
                        found[f"{part}_within_total"] = sample.value
        for name in [key for key in found if key.endswith("_within_total")]:
            total = name.replace("_within_total", "_total")
            found[name.replace("_within_total", "_slow_total")] = found[total] - found.pop(name)
        return found

    return probe


def postgres_connections(conn: psycopg.AsyncConnection[TupleRow]) -> Probe:
    """Client connections to Postgres, and how many are running a statement now, asked on
    `conn` (autocommit); also each role's connections (`pg_connections:<application_name>`,
    which every process of the stack sets). A search pool at its limit shows here as every
    one of its connections active."""

    async def probe() -> dict[str, float]:
        cursor = await conn.execute(
            "SELECT application_name, count(*), count(*) FILTER (WHERE state = 'active')"
            " FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " GROUP BY application_name"
        )
        rows = await cursor.fetchall()
        seen = {f"pg_connections:{name or '-'}": float(count) for name, count, _ in rows}
        seen["pg_connections"] = float(sum(count for _, count, _ in rows))
        seen["pg_active"] = float(sum(active for _, _, active in rows))
        return seen

    return probe


@contextlib.asynccontextmanager
async def step_probes(base_url: str) -> AsyncIterator[list[Probe]]:
    """What every load step samples: the web server's /metrics and Postgres's client
    connections, asked on a connection of the probes' own, open for the block."""
    from retrieval.pg.pool import conninfo

    async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as pg:
        yield [server_metrics(base_url), postgres_connections(pg)]


def valkey_memory() -> Probe:
    from resilience.redis_clients import get_redis

    redis = get_redis()

    async def probe() -> dict[str, float]:
        info = await asyncio.to_thread(redis.info)  # its default sections: memory, keyspace
        # Keys with a time to live: the result cache's rankings, with breaker counters and
        # sessions; what has none (Celery's queues, breaker states) is never evicted.
        expiring = sum(
            int(value.get("expires", 0))
            for key, value in info.items()
            if key.startswith("db") and isinstance(value, dict)
        )
        return {
            "valkey_used_memory_mb": int(info["used_memory"]) / 2**20,
            "valkey_keys_with_ttl": float(expiring),
        }

    return probe
