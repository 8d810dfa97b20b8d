"""An httpx transport that connects only to vetted addresses, within a total deadline.

DNS rebinding: a name that is checked and then resolved again to connect can answer
differently the second time (a zero TTL is enough), so a check before the request proves
nothing. Here there is no second lookup: the network backend resolves the name itself,
vets every address and opens the socket to one of those same addresses. httpcore still
gives TLS the host name from the URL, so SNI and certificate checks use it, and the Host
header is untouched. Every connection httpx opens goes through this backend, so every
redirect hop is vetted too.

The deadline: httpx has per-operation timeouts only, so a server sending a byte every
half second could hold a fetch forever. Every socket operation here waits at most until
the fetch's deadline, whatever httpx asked for.
"""

import functools
import ssl
import time
from collections.abc import Callable, Iterable

import httpcore
import httpx

from ingestion.fetching.addresses import vetted_addresses


class FetchDeadline:
    """One fetch's total time, which every connect, read and write of it shares; its
    clock is injectable, so a test moves time instead of waiting."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at = clock() + seconds

    def expired(self) -> bool:
        return self._clock() >= self._at

    def bound(self, timeout: float | None, on_expiry: type[httpcore.TimeoutException]) -> float:
        """`timeout` shortened to what is left; raises `on_expiry` when nothing is."""
        remaining = self._at - self._clock()
        if remaining <= 0:
            raise on_expiry("the total deadline has passed")
        return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: FetchDeadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = self._deadline.bound(timeout, httpcore.ConnectTimeout)
        inner = self._inner.start_tls(ssl_context, server_hostname, bounded)
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> object:
        return self._inner.get_extra_info(info)


class VettingBackend(httpcore.NetworkBackend):
    """Resolves, vets and connects in one step (see the module docstring)."""

    def __init__(self, *, allow_private: bool, deadline: FetchDeadline) -> None:
        self._allow_private = allow_private
        self._deadline = deadline
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = vetted_addresses(
            host,
            port,
            allow_private=self._allow_private,
            timeout_s=self._deadline.bound(timeout, httpcore.ConnectTimeout),
        )
        failure = httpcore.ConnectError(f"{host} has no addresses")
        for address in addresses:  # like happy eyeballs, minus the concurrency
            try:
                stream = self._sockets.connect_tcp(
                    str(address),  # a literal address: connecting does no lookup of its own
                    port,
                    self._deadline.bound(timeout, httpcore.ConnectTimeout),
                    local_address,
                    socket_options,
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        raise failure


class VettingTransport(httpx.HTTPTransport):
    def __init__(self, backend: VettingBackend) -> None:
        context = _tls_context()
        super().__init__(verify=context, trust_env=False)
        # httpx has no public way to give its pool a network backend, so the pool it just
        # built is swapped for the same kind of pool with ours. test_fetching proves the
        # wiring: a loopback URL is refused without the server seeing a connection.
        self._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=backend)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle takes milliseconds; one context serves every fetch.
    return httpx.create_ssl_context(trust_env=False)
