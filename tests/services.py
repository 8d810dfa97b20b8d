"""pytest plugin: real Postgres and Valkey for the whole session.

With DATABASE_URL and REDIS_URL set, the suite uses those servers. Otherwise it starts
embedded ones in a temporary directory before Django reads its settings, and stops them
when the session ends. (A plugin hook rather than a fixture, because settings are read
while pytest-django starts, before any fixture runs.)
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from searchsite import embedded

_services: embedded.EmbeddedServices | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    global _services
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    base = Path(tempfile.mkdtemp(prefix="searchsite-test-"))
    os.environ["SEARCHSITE_RUN_DIR"] = str(base)
    _services = embedded.ensure_running(base)


def pytest_unconfigure() -> None:
    if _services is not None:
        _services.stop()
        shutil.rmtree(_services.base, ignore_errors=True)
