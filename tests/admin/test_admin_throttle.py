"""Admin logins are throttled (django-axes): from the AXES_FAILURE_LIMIT-th failed login for
one user name from one address on, even the right password is refused for a while; other user
names are not locked out with it, and a success before the limit starts the count again."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

pytestmark = [pytest.mark.django_db]
LOGIN = "/admin/login/"


def _login(client: Client, username: str, password: str) -> int:
    response = client.post(LOGIN, {"username": username, "password": password})
    return int(response.status_code)


def test_repeated_failures_lock_that_user_name_out(settings: Settings) -> None:
    User.objects.create_superuser("editor", password="the-right-one")
    User.objects.create_superuser("ops", password="also-right")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "editor", "wrong") == 200  # the form again, with its error
    assert _login(client, "editor", "wrong") == 429  # the limit-th failure locks out

    assert _login(client, "editor", "the-right-one") == 429
    assert "_auth_user_id" not in client.session
    assert _login(Client(), "ops", "also-right") == 302  # another user name still logs in


def test_a_success_before_the_limit_starts_the_count_again(settings: Settings) -> None:
    User.objects.create_superuser("editor", password="the-right-one")
    for _ in range(2):
        client = Client()
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            assert _login(client, "editor", "wrong") == 200
        assert _login(client, "editor", "the-right-one") == 302
