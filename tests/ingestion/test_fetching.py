"""Fetching: HTTP against servers on 127.0.0.1 only, the address guard by calling it.

No test sends anything beyond loopback. Name resolution is faked for the whole module
(`fake_dns`), so even a mistaken host name raises instead of querying a resolver, and the
guard's verdicts on private and public addresses come from calls, never from requests.
"""

import http.server
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import pytest

from ingestion.fetching import FetchError, FetchResult, check_address, fetch_url, read_local
from ingestion.fetching import addresses as addresses_module
from ingestion.fetching.addresses import vetted_addresses
from ingestion.fetching.remote import USER_AGENT
from ingestion.fetching.transport import FetchDeadline

REAL_GETADDRINFO = socket.getaddrinfo
ETAG = '"v1"'
LAST_MODIFIED = "Wed, 09 Sep 2026 10:00:00 GMT"
BODY = b'[{"id": "ev-1", "title": "Jazz night"}]'
TRICKLE_INTERVAL_S = 0.5
HUGE_OFFER_BYTES = 64 * 1024 * 1024


class FakeDNS:
    """getaddrinfo for tests: literals resolve to themselves, names to `answers`.

    With several answers for a name, each lookup takes the next one (the last one sticks),
    which is how a rebinding attacker's DNS server behaves.
    """

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []
        self.delay_s = 0.0

    def __call__(self, host: str, port: int, *_: Any, **__: Any) -> list[tuple[Any, ...]]:
        self.lookups.append(host)
        time.sleep(self.delay_s)
        try:
            ipaddress.ip_address(host)
            addresses = [host]
        except ValueError:
            answers = self.answers.get(host)
            if not answers:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
            addresses = answers.pop(0) if len(answers) > 1 else answers[0]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
            if ":" in address
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
            for address in addresses
        ]


@pytest.fixture(autouse=True)
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    dns = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", dns)
    return dns


# --- the local server --------------------------------------------------------------------


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.connections = 0
        self.requests: list[dict[str, str]] = []
        self.huge_sent = 0
        self.huge_done = threading.Event()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1
        super().process_request(request, client_address)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.server_address[1]}{path}"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output quiet

    def do_GET(self) -> None:
        self.server.requests.append({"path": self.path, **dict(self.headers.items())})
        path = self.path
        if path == "/data":
            self.data()
        elif path.startswith("/status/"):
            self.reply(int(path.rsplit("/", 1)[1]), b"nope")
        elif path == "/exact":
            self.reply(200, b"x" * 1000)
        elif path == "/huge":
            self.huge()
        elif path == "/huge-declared":
            self.reply_headers(200, {"Content-Length": str(HUGE_OFFER_BYTES)})
        elif path == "/trickle":
            self.trickle()
        elif path == "/redirect":
            self.reply(302, b"", {"Location": "/data"})
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            if left == 0:
                self.reply(200, b"end of the chain")
            else:
                self.reply(301, b"", {"Location": f"/chain/{left - 1}"})
        elif path == "/redirect-to-127.0.0.2":
            self.reply(307, b"", {"Location": self.server.url("/data", host="127.0.0.2")})
        elif path == "/redirect-to-ftp":
            self.reply(302, b"", {"Location": "ftp://127.0.0.1/feed.xml"})
        else:
            self.reply(404, b"unknown path")

    def data(self) -> None:
        if self.headers.get("If-None-Match") == ETAG or (
            self.headers.get("If-Modified-Since") == LAST_MODIFIED
        ):
            self.reply_headers(304, {"ETag": ETAG})
        else:
            self.reply(200, BODY, {"ETag": ETAG, "Last-Modified": LAST_MODIFIED})

    def huge(self) -> None:
        # No Content-Length, so only counting bytes can stop the client.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        self.reply_headers(200, {"Connection": "close"})
        chunk = b"x" * 65536
        try:
            while self.server.huge_sent < HUGE_OFFER_BYTES:
                self.wfile.write(chunk)
                self.server.huge_sent += len(chunk)
        except OSError:
            pass  # the client hung up, as it should
        finally:
            self.close_connection = True
            self.server.huge_done.set()

    def trickle(self) -> None:
        self.reply_headers(200, {"Content-Length": "40"})
        try:
            for _ in range(40):  # at most 20 s, but the client leaves long before
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(TRICKLE_INTERVAL_S)
        except OSError:
            self.close_connection = True

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.reply_headers(status, {"Content-Length": str(len(body)), **(headers or {})})
        self.wfile.write(body)

    def reply_headers(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    httpd = Server()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture(scope="module")
def stalling_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/feed.xml"
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    listener.close()


def fetch(url: str, **overrides: Any) -> FetchResult:
    options: dict[str, Any] = {
        "connect_timeout_s": 1.0,
        "read_timeout_s": 1.0,
        "total_timeout_s": 3.0,
        "max_bytes": 100_000,
        "allow_private": True,  # the test servers are on loopback
        **overrides,
    }
    return fetch_url(url, **options)


def fetch_error(url: str, **overrides: Any) -> FetchError:
    with pytest.raises(FetchError) as raised:
        fetch(url, **overrides)
    return raised.value


# --- HTTP -----------------------------------------------------------------------------------


def test_it_fetches_a_body_with_its_validators_and_a_fixed_user_agent(server: Server) -> None:
    result = fetch(server.url("/data"))

    assert (result.body, result.not_modified, result.status) == (BODY, False, 200)
    assert (result.etag, result.last_modified) == (ETAG, LAST_MODIFIED)
    assert 0 < result.elapsed_s < 1
    assert server.requests[-1]["User-Agent"] == USER_AGENT
    assert "If-None-Match" not in server.requests[-1]


def test_it_sends_the_validators_back_and_reports_not_modified(server: Server) -> None:
    first = fetch(server.url("/data"))

    again = fetch(server.url("/data"), etag=first.etag, last_modified=first.last_modified)

    assert (again.body, again.not_modified, again.status) == (None, True, 304)
    # The 304 left Last-Modified out; the one we sent is still current.
    assert (again.etag, again.last_modified) == (ETAG, LAST_MODIFIED)
    sent = server.requests[-1]
    assert (sent["If-None-Match"], sent["If-Modified-Since"]) == (ETAG, LAST_MODIFIED)


def test_last_modified_alone_is_enough_for_not_modified(server: Server) -> None:
    assert fetch(server.url("/data"), last_modified=LAST_MODIFIED).not_modified


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(404, True), (410, True), (401, True), (403, True), (400, True), (429, False),
     (408, False), (500, False), (503, False)],
)  # fmt: skip
def test_it_classifies_error_statuses(server: Server, status: int, permanent: bool) -> None:
    error = fetch_error(server.url(f"/status/{status}"))

    assert error.reason.startswith(f"HTTP {status}")
    assert (error.permanent, error.slow) == (permanent, False)


def test_it_stops_reading_a_body_past_the_cap(server: Server) -> None:
    started = time.monotonic()

    error = fetch_error(server.url("/huge"), max_bytes=1_000_000)

    assert (error.reason, error.permanent) == ("payload over 1000000 bytes", True)
    assert time.monotonic() - started < 2
    assert server.huge_done.wait(5), "the server should notice the client hung up"
    # What was sent beyond the cap sat in socket buffers; the rest was never produced.
    assert server.huge_sent < 8 * 1024 * 1024 < HUGE_OFFER_BYTES


def test_it_refuses_a_declared_oversized_body_without_reading_it(server: Server) -> None:
    error = fetch_error(server.url("/huge-declared"), max_bytes=1_000_000)

    assert (error.reason, error.permanent) == ("payload over 1000000 bytes", True)


def test_a_body_of_exactly_the_cap_is_accepted(server: Server) -> None:
    assert fetch(server.url("/exact"), max_bytes=1000).body == b"x" * 1000
    assert fetch_error(server.url("/exact"), max_bytes=999).permanent


def test_it_cuts_a_trickling_body_at_the_total_timeout(server: Server) -> None:
    started = time.monotonic()

    # Each byte comes well within the read timeout: only the total deadline can stop this.
    error = fetch_error(server.url("/trickle"), read_timeout_s=1.0, total_timeout_s=1.5)

    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 1.5 + 0.5
    assert error.reason == "over the total timeout of 1.5 s"
    assert (error.permanent, error.slow) == (False, True)


def test_it_gives_up_on_a_server_that_never_answers(stalling_server: str) -> None:
    started = time.monotonic()

    error = fetch_error(stalling_server, read_timeout_s=0.5, total_timeout_s=5)

    assert 0.5 <= time.monotonic() - started < 0.5 + 0.5
    assert (error.reason, error.permanent, error.slow) == ("read timeout", False, True)


def test_a_refused_connection_is_transient(server: Server) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        closed_port = probe.getsockname()[1]  # free once the probe closes

    error = fetch_error(f"http://127.0.0.1:{closed_port}/")

    assert error.reason.startswith("ConnectError")
    assert (error.permanent, error.slow) == (False, False)


def test_it_follows_a_redirect(server: Server) -> None:
    result = fetch(server.url("/redirect"))

    assert (result.body, result.etag) == (BODY, ETAG)
    assert [request["path"] for request in server.requests[-2:]] == ["/redirect", "/data"]


def test_it_follows_five_redirects_but_not_six(server: Server) -> None:
    assert fetch(server.url("/chain/5")).body == b"end of the chain"

    error = fetch_error(server.url("/chain/6"))

    assert (error.reason, error.permanent) == ("more than 5 redirects", True)
    assert server.requests[-1]["path"] == "/chain/1"  # the sixth hop was never requested


def test_it_refuses_a_redirect_to_another_scheme(server: Server) -> None:
    error = fetch_error(server.url("/redirect-to-ftp"))

    assert (error.reason, error.permanent) == ("unsupported URL scheme 'ftp'", True)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.org/feed.xml", "unsupported URL scheme 'ftp'"),
        ("file:///etc/passwd", "unsupported URL scheme 'file'"),
        ("gopher://127.0.0.1:70/", "unsupported URL scheme 'gopher'"),
        ("http:///feed.xml", "no host in URL"),
        ("http://[::1/", "invalid URL"),
        ("http://feeds\t.example/", "invalid URL"),
        ("http://xn--/", "invalid URL"),
    ],
)
def test_it_refuses_urls_it_does_not_fetch(url: str, reason: str, fake_dns: FakeDNS) -> None:
    error = fetch_error(url, allow_private=False)

    assert error.reason.startswith(reason)
    assert error.permanent
    assert fake_dns.lookups == []


# --- the address guard, through fetch_url ----------------------------------------------------


def test_it_refuses_loopback_before_connecting(server: Server) -> None:
    before = server.connections

    error = fetch_error(server.url("/data"), allow_private=False)

    assert (error.reason, error.permanent) == (
        "refused 127.0.0.1: loopback address 127.0.0.1",
        True,
    )
    assert server.connections == before


def test_it_refuses_a_name_resolving_to_loopback_before_connecting(
    server: Server, fake_dns: FakeDNS
) -> None:
    fake_dns.answers["feeds.example"] = [["127.0.0.1"]]
    before = server.connections

    error = fetch_error(server.url("/data", host="feeds.example"), allow_private=False)

    assert error.reason == "refused feeds.example: loopback address 127.0.0.1"
    assert server.connections == before


def test_it_connects_to_the_resolved_address_with_the_original_host_header(
    server: Server, fake_dns: FakeDNS
) -> None:
    fake_dns.answers["feeds.example"] = [["127.0.0.1"]]

    result = fetch(server.url("/data", host="feeds.example"))

    assert result.body == BODY
    assert server.requests[-1]["Host"] == f"feeds.example:{server.server_address[1]}"


def pretend_public(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """Let the guard treat one loopback address as public, so a loopback server can stand in
    for a public one while every other address keeps its real verdict."""
    real = addresses_module.refusal_reason
    monkeypatch.setattr(
        addresses_module,
        "refusal_reason",
        lambda candidate: None if str(candidate) == address else real(candidate),
    )


def test_dns_rebinding_cannot_swap_the_address_after_the_check(
    server: Server, fake_dns: FakeDNS, monkeypatch: pytest.MonkeyPatch
) -> None:
    pretend_public(monkeypatch, "127.0.0.1")
    # First answer passes the check; any later lookup would get a refused address.
    fake_dns.answers["rebind.example"] = [["127.0.0.1"], ["127.0.0.2"]]

    result = fetch(server.url("/data", host="rebind.example"), allow_private=False)

    assert result.body == BODY
    assert fake_dns.lookups.count("rebind.example") == 1  # connected to the vetted address


def test_it_vets_every_redirect_hop(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    pretend_public(monkeypatch, "127.0.0.1")

    error = fetch_error(server.url("/redirect-to-127.0.0.2"), allow_private=False)

    assert (error.reason, error.permanent) == (
        "refused 127.0.0.2: loopback address 127.0.0.2",
        True,
    )


def test_it_bounds_a_slow_name_lookup_by_the_total_timeout(fake_dns: FakeDNS) -> None:
    fake_dns.answers["slow.example"] = [["127.0.0.1"]]
    fake_dns.delay_s = 1.0
    started = time.monotonic()

    error = fetch_error("http://slow.example/feed.xml", total_timeout_s=0.3)

    assert time.monotonic() - started < 0.6
    assert (error.permanent, error.slow) == (False, True)
    assert error.reason.startswith("resolving slow.example took over")


# --- the address guard, called directly ------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback address 127.0.0.1"),
        ("127.1.2.3", "loopback address 127.1.2.3"),
        ("::1", "loopback address ::1"),
        ("10.0.0.1", "private address 10.0.0.1"),
        ("172.16.5.4", "private address 172.16.5.4"),
        ("192.168.1.1", "private address 192.168.1.1"),
        ("fc00::1", "private address fc00::1"),
        ("169.254.169.254", "link-local address 169.254.169.254"),
        ("fe80::1", "link-local address fe80::1"),
        ("0.0.0.0", "unspecified address 0.0.0.0"),  # noqa: S104  # checked, never bound
        ("::", "unspecified address ::"),
        ("224.0.0.251", "multicast address 224.0.0.251"),
        ("ff02::1", "multicast address ff02::1"),
        ("240.0.0.1", "reserved address 240.0.0.1"),
        ("100.64.0.1", "non-global address 100.64.0.1"),
        ("::ffff:127.0.0.1", "loopback address 127.0.0.1 (inside ::ffff:7f00:1)"),
        ("::ffff:10.0.0.1", "private address 10.0.0.1 (inside ::ffff:a00:1)"),
        ("::ffff:169.254.169.254", "link-local address 169.254.169.254 (inside ::ffff:a9fe:a9fe)"),
        ("2002:7f00:1::1", "loopback address 127.0.0.1 (inside 2002:7f00:1::1)"),  # 6to4
        ("64:ff9b::a9fe:a9fe", "link-local address 169.254.169.254 (inside 64:ff9b::a9fe:a9fe)"),
    ],
)
def test_it_refuses_non_public_literals(address: str, reason: str) -> None:
    with pytest.raises(FetchError) as raised:
        check_address(address, 443, allow_private=False)

    assert raised.value.reason == f"refused {address}: {reason}"
    assert raised.value.permanent


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (["10.0.0.1"], "private address 10.0.0.1"),
        (["127.0.0.1"], "loopback address 127.0.0.1"),
        (["::1"], "loopback address ::1"),
        (["169.254.169.254"], "link-local address 169.254.169.254"),
        (["::ffff:127.0.0.1"], "loopback address 127.0.0.1 (inside ::ffff:7f00:1)"),
        (["fe80::1"], "link-local address fe80::1"),
        (["0.0.0.0"], "unspecified address 0.0.0.0"),  # noqa: S104  # checked, never bound
        (["93.184.216.34", "10.0.0.1"], "private address 10.0.0.1"),  # one bad one is enough
    ],
)
def test_it_refuses_a_name_resolving_to_a_non_public_address(
    answer: list[str], reason: str, fake_dns: FakeDNS
) -> None:
    fake_dns.answers["feeds.example"] = [answer]

    with pytest.raises(FetchError) as raised:
        check_address("feeds.example", 443, allow_private=False)

    assert raised.value.reason == f"refused feeds.example: {reason}"
    assert raised.value.permanent


def test_it_accepts_public_addresses_without_making_a_request(fake_dns: FakeDNS) -> None:
    fake_dns.answers["feeds.example"] = [["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]]

    check_address("93.184.216.34", 443, allow_private=False)
    check_address("feeds.example", 443, allow_private=False)

    assert fake_dns.lookups == ["93.184.216.34", "feeds.example"]


def test_it_lets_private_addresses_through_when_allowed(fake_dns: FakeDNS) -> None:
    fake_dns.answers["db.internal"] = [["10.0.0.5"]]

    check_address("db.internal", 5432, allow_private=True)
    check_address("127.0.0.1", 80, allow_private=True)


def test_it_agrees_with_the_real_resolver_on_literals(monkeypatch: pytest.MonkeyPatch) -> None:
    # Numeric hosts never reach DNS, so the real getaddrinfo is safe to call here.
    monkeypatch.setattr(socket, "getaddrinfo", REAL_GETADDRINFO)

    check_address("93.184.216.34", 80, allow_private=False)
    for address in ("127.0.0.1", "169.254.169.254", "::ffff:127.0.0.1"):
        with pytest.raises(FetchError, match="refused"):
            check_address(address, 80, allow_private=False)


def test_an_unresolvable_name_is_transient(fake_dns: FakeDNS) -> None:
    with pytest.raises(FetchError) as raised:
        check_address("nowhere.example", 443, allow_private=False)

    assert raised.value.reason.startswith("cannot resolve nowhere.example")
    assert not raised.value.permanent


def test_vetted_addresses_are_the_ones_to_connect_to(fake_dns: FakeDNS) -> None:
    fake_dns.answers["feeds.example"] = [["93.184.216.34", "93.184.216.34", "2606:4700::1111"]]

    addresses = vetted_addresses("feeds.example", 443, allow_private=False, timeout_s=1)

    assert [str(address) for address in addresses] == ["93.184.216.34", "2606:4700::1111"]


# --- local files ------------------------------------------------------------------------------


def test_it_reads_a_local_path_and_a_file_url(tmp_path: Path) -> None:
    path = tmp_path / "records with space.json"
    path.write_bytes(BODY)

    by_path = read_local(str(path), max_bytes=1000)
    by_url = read_local(path.as_uri(), max_bytes=1000)

    assert by_path.body == by_url.body == BODY
    assert (by_path.not_modified, by_path.status) == (False, 200)


def test_a_local_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 1001)

    assert read_local(str(path), max_bytes=1001).body == b"x" * 1001
    with pytest.raises(FetchError) as raised:
        read_local(str(path), max_bytes=1000)
    assert (raised.value.reason, raised.value.permanent) == ("payload over 1000 bytes", True)


def test_local_sources_that_cannot_be_read_are_permanent_errors(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases = {
        str(tmp_path / "missing.json"): "no such file",
        str(tmp_path): "not a regular file",
        str(fifo): "not a regular file",  # and no waiting for a writer
        "file://fileserver/share/a.json": "file URL names another host",
    }
    for source, reason in cases.items():
        with pytest.raises(FetchError) as raised:
            read_local(source, max_bytes=1000)
        assert raised.value.reason.startswith(reason), source
        assert raised.value.permanent


def test_a_fetch_s_deadline_shortens_each_wait_to_what_is_left_on_its_clock() -> None:
    now = [100.0]
    deadline = FetchDeadline(2.0, clock=lambda: now[0])
    assert deadline.bound(5.0, httpcore.ReadTimeout) == 2.0
    now[0] = 101.5
    assert deadline.bound(None, httpcore.ReadTimeout) == 0.5
    assert deadline.bound(0.2, httpcore.ReadTimeout) == 0.2
    assert not deadline.expired()
    now[0] = 102.0
    assert deadline.expired()
    with pytest.raises(httpcore.ConnectTimeout):
        deadline.bound(1.0, httpcore.ConnectTimeout)
