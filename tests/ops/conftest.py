"""Fixtures for the ops tests."""

import pytest

from ops import rollup_writer
from ops.rollup_writer import RollupWriter
from resilience.per_process import PerProcess


@pytest.fixture
def own_rollup_writer(monkeypatch: pytest.MonkeyPatch) -> RollupWriter:
    """This process's writer as searchsite/asgi.py makes it, from now (what grows from now
    is flushed), but not started: the test flushes it through the page."""
    writer = PerProcess(RollupWriter)
    monkeypatch.setattr(rollup_writer, "_writer", writer)
    return writer.get()
