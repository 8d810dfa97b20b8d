"""A source whose server stalls for minutes neither delays other sources nor gets
hammered: its fetches time out, its breaker opens, and an open breaker skips it."""

import http.server
import threading
from collections.abc import Iterator

import pytest
from django.test import override_settings

from ingestion.demo import DEMO_DIR
from ingestion.models import Listing, Poll, Source
from ingestion.polling import poll_source
from ingestion.tasks import poll_source as poll_source_task
from tests.conftest import start_worker, stop_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
FEED = (DEMO_DIR / "publisher-feed.xml").read_bytes()
STALL_LIMIT_S = 300  # "minutes"; released by the test as soon as it is done


class Server:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.stalled_requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/stall":
                    server.stalled_requests += 1
                    server.release.wait(STALL_LIMIT_S)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/rss+xml")
                self.send_header("Content-Length", str(len(FEED)))
                self.end_headers()
                self.wfile.write(FEED)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


@pytest.mark.slow
def test_a_stalled_source_does_not_delay_another(server: Server, child_env: dict[str, str]) -> None:
    env = child_env | {"FETCH_ALLOW_PRIVATE_ADDRESSES": "1", "FETCH_TOTAL_TIMEOUT_S": "600"}
    worker = start_worker(env, name="stall-worker", concurrency=2)
    try:
        stalled = Source.objects.create(name="stalled", kind="feed", url=f"{server.base}/stall")
        healthy = Source.objects.create(name="healthy", kind="feed", url=f"{server.base}/ok")
        poll_source_task.delay(stalled.pk)
        wait_until(lambda: server.stalled_requests == 1, 30, "the stalled fetch to start")
        poll_source_task.delay(healthy.pk)
        wait_until(
            lambda: Listing.objects.filter(records__source=healthy).count() == 4,
            30,
            "the healthy source's listings",
        )
        assert not server.release.is_set()  # the stalled fetch is still hanging
        assert not Poll.objects.filter(source=stalled).exists()
    finally:
        server.release.set()
        stop_worker(worker)


@override_settings(
    FETCH_ALLOW_PRIVATE_ADDRESSES=True,
    FETCH_TOTAL_TIMEOUT_S=0.3,
    FETCH_READ_TIMEOUT_S=0.3,
    SOURCE_BREAKER_MIN_CALLS=3,
    SOURCE_BREAKER_FAILURE_RATIO=1.0,
)
def test_the_breaker_of_a_stalled_source_opens_after_the_configured_failures(
    server: Server,
) -> None:
    stalled = Source.objects.create(name="stalled", kind="feed", url=f"{server.base}/stall")
    statuses = [poll_source(stalled.pk).status for _ in range(3)]
    assert statuses == [Poll.Status.FAILED] * 3
    stalled.refresh_from_db()
    assert stalled.breaker_state == "open"
    assert stalled.last_error_permanent is False  # a timeout is transient
    assert poll_source(stalled.pk).status == Poll.Status.SKIPPED
    assert server.stalled_requests == 3  # the open breaker did not fetch again
