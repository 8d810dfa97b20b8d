"""`manage.py check --deploy` is clean with production settings (DJANGO_DEBUG=0, a secret
key, the HTTPS settings README names), and says what is missing without them, although
the site runs its own subclasses of Django's security middleware."""

import os
import secrets
import subprocess
import sys

import pytest
from django.test import override_settings

from searchsite import embedded
from searchsite.checks import check_security_middleware

HTTPS = {
    "DJANGO_SECURE_SSL_REDIRECT": "1",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "DJANGO_SECURE_HSTS_PRELOAD": "1",
    "DJANGO_SECURE_COOKIES": "1",
}


def _check_deploy(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        **extra,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=embedded.REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_production_settings_pass_the_deploy_checks() -> None:
    result = _check_deploy(HTTPS)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_without_https_the_deploy_checks_say_what_is_missing() -> None:
    result = _check_deploy({})
    assert result.returncode != 0
    for check_id in ("searchsite.W004", "searchsite.W008", "searchsite.W016", "security.W010"):
        assert check_id in result.stderr, check_id


@pytest.mark.parametrize(
    ("left_out", "check_id"),
    [
        ("searchsite.middleware.SecurityMiddleware", "searchsite.W001"),
        ("searchsite.middleware.XFrameOptionsMiddleware", "searchsite.W002"),
        ("searchsite.middleware.CsrfViewMiddleware", "searchsite.W003"),
    ],
)
def test_a_security_middleware_left_out_is_reported(left_out: str, check_id: str) -> None:
    from django.conf import settings

    assert check_security_middleware() == []
    with override_settings(MIDDLEWARE=[m for m in settings.MIDDLEWARE if m != left_out]):
        assert [message.id for message in check_security_middleware()] == [check_id]
