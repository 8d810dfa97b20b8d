"""A reader's cookie, so that a budget canary keeps each reader in one arm across searches
and addresses (retrieval/bounds/arms.py). A random token with nothing in it, set on a
page's response only while a canary runs: no canary, no cookie."""

import secrets

from django.http import HttpRequest, HttpResponseBase

READER_COOKIE = "reader"
_YEAR_S = 365 * 24 * 3600


def keep_reader(request: HttpRequest, response: HttpResponseBase, canary_running: bool) -> None:
    if canary_running and READER_COOKIE not in request.COOKIES:
        response.set_cookie(
            READER_COOKIE,
            secrets.token_urlsafe(16),
            max_age=_YEAR_S,
            httponly=True,
            samesite="Lax",
            secure=request.is_secure(),
        )
