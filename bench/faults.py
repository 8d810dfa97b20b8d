"""Faults under load against a running `make run` (issue 12, item 3): one sub-command per
fault, each at the issue's durations by default, under an open-loop search load
(tests/load_driver.py) at a rate you give: half the sustainable rate, per the issue.

    .venv/bin/python bench/faults.py valkey        [--outage-s 30]
    .venv/bin/python bench/faults.py stop-postgres    [--outage-s 10]
    .venv/bin/python bench/faults.py freeze-postgres  [--outage-s 6]
    .venv/bin/python bench/faults.py freeze-valkey    [--outage-s 6]
    .venv/bin/python bench/faults.py embed-worker  [--outage-s 30]
    .venv/bin/python bench/faults.py ingest-worker
    .venv/bin/python bench/faults.py lock          [--outage-s 5]
    common: [--url http://127.0.0.1:8000] [--rate 50] [--before-s 5] [--after-s 15]

Valkey and Postgres are the embedded servers under SEARCHSITE_RUN_DIR (`.run`), stopped
and started for real, or frozen (SIGSTOP of the server, Postgres' postmaster and every
backend, then SIGCONT): a paused VM or a stalled disk, which refuses nothing and answers
nothing. A worker is "killed" in its pool process (SIGKILL) while its main
process is stopped (SIGSTOP) for the outage, then let go: killing the main process would
make the supervisor stop everything. Prints the figures docs/reliability.md records: 5xx,
503, hung, slowest 503, time to serve normally again; the tests (tests/faults/)
hold the same scenarios to their properties at a small scale.
"""

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchsite import embedded
from searchsite.embedded import postgres as embedded_postgres
from searchsite.embedded import valkey as embedded_valkey
from tests.load_driver import (
    Load,
    between,
    hung,
    recovery_s,
    server_errors,
    under_load,
    untruthful,
)
from tests.private_services import PrivatePostgres, PrivateValkey

QUERIES = ["jazz", "concert", "organ recital", "family workshop", "exhibition", "theatre"]
VECTOR_TAG = "/* searchsite:vector */%"
# A vector statement still running this long after it started outlived its budget (the
# default SEARCH_VECTOR_BUDGET_MS) by more than the 20 ms.
OVERDUE_AFTER_S = (float(os.environ.get("SEARCH_VECTOR_BUDGET_MS", "40")) + 20) / 1000


def _workers(hostname_prefix: str) -> tuple[psutil.Process, list[psutil.Process]]:
    """The `make run` worker named `hostname_prefix@…` and its pool processes."""
    for process in psutil.process_iter(["cmdline"]):
        if f"--hostname={hostname_prefix}@%h" in (process.info["cmdline"] or []):
            return process, process.children()
    raise SystemExit(f"no {hostname_prefix} worker running: start `make run` first")


def _stalled_worker(hostname_prefix: str, outage_s: float) -> None:
    main, pool = _workers(hostname_prefix)
    main.send_signal(signal.SIGSTOP)
    try:
        for child in pool:
            child.send_signal(signal.SIGKILL)
        time.sleep(outage_s)
    finally:
        main.send_signal(signal.SIGCONT)


def _postgres() -> PrivatePostgres:
    pgdata = embedded.pgdata_dir(embedded.run_dir())
    info = embedded_postgres._running_info(pgdata)
    if info is None or not info.socket_dir:
        raise SystemExit(f"no embedded Postgres under {pgdata}")
    return PrivatePostgres(pgdata, embedded.default_database_url(), Path(info.socket_dir))


def _postgres_restarted(outage_s: float) -> None:
    server = _postgres()
    server.stop()
    time.sleep(outage_s)
    server.start()


def _postgres_frozen(outage_s: float) -> None:
    with _postgres().frozen():
        time.sleep(outage_s)


def _valkey_restarted(outage_s: float) -> None:
    data = embedded.valkey_dir(embedded.run_dir())
    embedded_valkey.stop(data)
    time.sleep(outage_s)
    embedded_valkey.start(data)


def _valkey_frozen(outage_s: float) -> None:
    with PrivateValkey(embedded.valkey_dir(embedded.run_dir())).frozen():
        time.sleep(outage_s)


def _embeddings_locked(outage_s: float) -> None:
    with psycopg.connect(embedded.default_database_url()) as holder:
        holder.execute("LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE")
        deadline = time.monotonic() + outage_s
        worst = 0
        with psycopg.connect(embedded.default_database_url(), autocommit=True) as observer:
            while time.monotonic() < deadline:
                row = observer.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                    " AND query LIKE %s"
                    " AND clock_timestamp() - query_start > make_interval(secs => %s)",
                    [VECTOR_TAG, OVERDUE_AFTER_S],
                ).fetchone()
                worst = max(worst, int(row[0]) if row else 0)
        holder.rollback()
    print(f"{'vector statements overdue (max seen)':<40}{worst}")


FAULTS: dict[str, tuple[Callable[[float], None], float]] = {
    "valkey": (_valkey_restarted, 30.0),
    "stop-postgres": (_postgres_restarted, 10.0),
    "freeze-postgres": (_postgres_frozen, 6.0),
    "freeze-valkey": (_valkey_frozen, 6.0),
    "embed-worker": (lambda s: _stalled_worker("embed-worker", s), 30.0),
    "ingest-worker": (lambda s: _stalled_worker("ingest-worker", s), 5.0),
    "lock": (_embeddings_locked, 5.0),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fault", choices=sorted(FAULTS))
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--rate", type=float, default=50.0, help="searches per second")
    parser.add_argument("--outage-s", type=float, help="the fault's length (the issue's)")
    parser.add_argument("--before-s", type=float, default=5.0)
    parser.add_argument("--after-s", type=float, default=15.0)
    args = parser.parse_args()
    cause, default_s = FAULTS[args.fault]
    outage_s = args.outage_s if args.outage_s is not None else default_s
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")

    load = Load(args.url, QUERIES, args.rate, args.before_s + outage_s + args.after_s)
    with under_load(load):
        while not load.started_at:
            time.sleep(0.01)
        time.sleep(args.before_s)
        began = time.monotonic()
        cause(outage_s)
        ended = time.monotonic()
    _report(load, began, ended)
    return 0


def _report(load: Load, began: float, ended: float) -> None:
    samples = load.samples
    during = between(samples, began, ended)
    refused = [s for s in during if s.status == 503]
    slowest = max((s.latency_s or 0 for s in refused), default=0.0)
    slowest_answer = max((s.latency_s or 0 for s in during), default=0.0)
    recovered = recovery_s(samples, ended)
    rows = [
        ("searches", len(samples)),
        ("5xx other than 503", len([s for s in server_errors(samples) if s.status != 503])),
        ("503 (all / during the fault)", f"{len(server_errors(samples))} / {len(refused)}"),
        ("503 without Retry-After", len([s for s in refused if not s.retry_after])),
        ("slowest 503 during the fault (ms)", f"{slowest * 1000:.0f}"),
        ("slowest answer during the fault (ms)", f"{slowest_answer * 1000:.0f}"),
        ("hung (no answer in 5 s)", len(hung(samples))),
        ("answers whose mode/reasons disagree", len(untruthful(samples))),
        ("time to serve normally (s)", "-" if recovered is None else round(recovered, 2)),
    ]  # fmt: skip
    for name, value in rows:
        print(f"{name:<40}{value}")
    for sample in untruthful(samples)[:3]:  # what disagreed, to read
        print(f"disagreeing answer: {json.dumps(sample.body)[:600]}")


if __name__ == "__main__":
    sys.exit(main())
