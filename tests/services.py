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
    # No search's vector stage is watched past its budget unless a test says so (an
    # injected `watch_past_budget`, tests/retrieval/test_vector_stage_record.py): at 1 % by
    # chance, a watched statement outlives its budget by design, and a test asserting that
    # none does would fail one search in a hundred. Set before the settings are read, and
    # inherited by the processes tests start.
    os.environ.setdefault("SEARCH_WHATIF_SAMPLE", "0")
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    base = Path(tempfile.mkdtemp(prefix="searchsite-test-"))
    os.environ["SEARCHSITE_RUN_DIR"] = str(base)
    _services = embedded.ensure_running(base)


def pytest_unconfigure() -> None:
    if _services is not None:
        _services.stop()
        shutil.rmtree(_services.base, ignore_errors=True)
