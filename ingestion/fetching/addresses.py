"""Which addresses a fetch may connect to.

Source URLs come from outside the team, so one can name anything a worker can reach: our
own Postgres or Valkey, a router, a cloud metadata service (169.254.169.254). Every address
a host name resolves to is vetted, and a single bad one refuses the host, since we cannot
know which of them a connection would use.
"""

import ipaddress
import socket
import threading

from ingestion.fetching.outcomes import FetchError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Ordered from most to least specific, so the reason names what the address really is.
_REFUSED_KINDS = (
    ("is_unspecified", "unspecified"),
    ("is_loopback", "loopback"),
    ("is_link_local", "link-local"),
    ("is_multicast", "multicast"),
    ("is_reserved", "reserved"),
    ("is_private", "private"),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def check_address(host: str, port: int, *, allow_private: bool) -> None:
    """Refuse `host` (a permanent FetchError) unless every address it resolves to is public.

    A name that does not resolve is a transient FetchError. The check on its own, e.g. to
    vet a URL as it is configured; `fetch_url` does not rely on it but vets as it connects.
    """
    vetted_addresses(host, port, allow_private=allow_private)


def vetted_addresses(
    host: str, port: int, *, allow_private: bool, timeout_s: float | None = None
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses, all of them vetted.

    Callers connect to these very addresses, never to the name again: see `transport`.
    """
    addresses = _resolve(host.strip("[]"), port, timeout_s)
    if not allow_private:
        for address in addresses:
            if reason := refusal_reason(address):
                raise FetchError(f"refused {host}: {reason}", permanent=True)
    return addresses


def refusal_reason(address: IPAddress) -> str | None:
    """Why a fetch must not connect to `address`, or None for a public unicast one."""
    # An IPv6 address can carry an IPv4 one that the network will reach instead
    # (::ffff:127.0.0.1, 6to4 2002:7f00:1::, NAT64 64:ff9b::7f00:1): judge that one first.
    for candidate in (*_embedded_ipv4(address), address):
        inside = "" if candidate is address else f" (inside {address})"
        for attribute, kind in _REFUSED_KINDS:
            if getattr(candidate, attribute):
                return f"{kind} address {candidate}{inside}"
        if not candidate.is_global:  # e.g. 100.64.0.0/10, shared by carrier-grade NAT
            return f"non-global address {candidate}{inside}"
    return None


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    if isinstance(address, ipaddress.IPv4Address):
        return []
    embedded = [address.ipv4_mapped, address.sixtofour]
    if address in _NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF))
    return [candidate for candidate in embedded if candidate is not None]


def _resolve(host: str, port: int, timeout_s: float | None) -> list[IPAddress]:
    """getaddrinfo, bounded by `timeout_s` when given.

    getaddrinfo takes no timeout and can block for the resolver's retries, which would
    break the fetch's total deadline; so it runs in a daemon thread that is abandoned on
    timeout (it ends when the resolver gives up).
    """
    outcome: list[list[str] | Exception] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            outcome.append([str(sockaddr[0]) for *_, sockaddr in infos])
        except (OSError, UnicodeError) as exc:
            outcome.append(exc)

    if timeout_s is None:
        lookup()
    else:
        thread = threading.Thread(target=lookup, name=f"resolve {host}", daemon=True)
        thread.start()
        thread.join(timeout_s)
    if not outcome:
        raise FetchError(f"resolving {host} took over {timeout_s} s", permanent=False, slow=True)
    result = outcome[0]
    if isinstance(result, UnicodeError):
        raise FetchError(f"invalid host name {host!r}", permanent=True)
    if isinstance(result, Exception):
        raise FetchError(f"cannot resolve {host}: {result}", permanent=False)
    addresses: list[IPAddress] = []
    for text in result:
        address = ipaddress.ip_address(text)
        if address not in addresses:
            addresses.append(address)
    return addresses
