"""/metrics answers scrapers only (searchsite/metrics_view.py): loopback, an allowed
network, or the bearer token; anyone else gets a 404. Through the ASGI app, with the
client's address forged in the scope as a server behind no proxy would see it."""

from ipaddress import ip_network

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from searchsite.env import env_networks
from searchsite.handler import SearchASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = ("203.0.113.7", 40000)  # TEST-NET-3: an address on the internet
TOKEN = "a-scrape-token-of-some-length"


async def scrape(client: tuple[str, int], headers: dict[str, str] | None = None) -> int:
    transport = httpx.ASGITransport(app=SearchASGIHandler(), client=client)  # type: ignore[arg-type]  # scope: a dict to django-stubs, a MutableMapping to httpx
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.get("/metrics", headers=headers or {})
    if response.status_code == 200:
        assert "retrieval_started" in response.text  # the figures, not some other page
    return response.status_code


async def test_the_public_gets_nothing_and_loopback_gets_the_figures() -> None:
    assert await scrape(PUBLIC) == 404
    assert await scrape(("127.0.0.1", 40000)) == 200
    assert await scrape(("::1", 40000)) == 200


async def test_the_bearer_token_admits_a_scraper_from_anywhere(settings: Settings) -> None:
    settings.METRICS_BEARER_TOKEN = TOKEN
    assert await scrape(PUBLIC, {"Authorization": f"Bearer {TOKEN}"}) == 200
    assert await scrape(PUBLIC, {"Authorization": f"Bearer {TOKEN[:-1]}x"}) == 404
    assert await scrape(PUBLIC, {"Authorization": TOKEN}) == 404  # not a bearer credential
    assert await scrape(PUBLIC) == 404


async def test_without_a_token_set_no_credential_admits(settings: Settings) -> None:
    settings.METRICS_BEARER_TOKEN = None
    assert await scrape(PUBLIC, {"Authorization": "Bearer "}) == 404


async def test_the_allowed_networks_come_from_settings(settings: Settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = [ip_network("203.0.113.0/24")]
    assert await scrape(PUBLIC) == 200
    assert await scrape(("127.0.0.1", 40000)) == 404  # loopback no longer named


def test_a_network_that_is_not_one_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICS_ALLOWED_NETWORKS", "127.0.0.0/8,everyone")
    with pytest.raises(ImproperlyConfigured, match="METRICS_ALLOWED_NETWORKS"):
        env_networks("METRICS_ALLOWED_NETWORKS", [])
