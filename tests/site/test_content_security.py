"""The public responses' security headers: a Content-Security-Policy without
'unsafe-inline' (the admin, Django's own templates, left out), nosniff, a referrer policy
and no framing."""

import pytest
from django.test import AsyncClient, Client

from searchsite.content_security import POLICY

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("path", ["/", "/?q=jazz", "/api/docs", "/api/search?q=jazz"])
async def test_public_responses_carry_the_policy_and_the_other_headers(
    async_client: AsyncClient, path: str
) -> None:
    # Async, as the site is served: a search opens its pool on this test's event loop.
    response = await async_client.get(path)
    assert response["Content-Security-Policy"] == POLICY
    assert "unsafe-inline" not in POLICY
    assert "script-src 'self'" in POLICY
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_the_admin_is_left_to_django(client: Client) -> None:
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert "Content-Security-Policy" not in response
