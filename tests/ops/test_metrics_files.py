"""A killed process's live gauges leave the sum; its counters stay in it; a file not yet
written takes nothing from it (searchsite/metrics_files.py). Real processes write real
multiprocess files."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client import CollectorRegistry

from searchsite.metrics_files import WrittenFilesCollector, sweep_dead_processes

# A process that counts one search and holds one in flight, then waits to be killed.
WRITER = """
import sys
from prometheus_client import Counter, Gauge
Counter("demo_searches", "d").inc()
Gauge("demo_in_flight", "d", multiprocess_mode="livesum").inc()
print("written", flush=True)
sys.stdin.read()
"""


def _writer(directory: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "written\n"
    return process


def _summed(directory: Path) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(WrittenFilesCollector(directory))
    return {
        sample.name: sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name in ("demo_searches_total", "demo_in_flight")
    }


def test_a_killed_process_s_live_gauges_go_and_its_counts_stay(tmp_path: Path) -> None:
    living, killed = _writer(tmp_path), _writer(tmp_path)
    try:
        assert _summed(tmp_path) == {"demo_searches_total": 2, "demo_in_flight": 2}
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert sweep_dead_processes(tmp_path) == [killed.pid]
        assert _summed(tmp_path) == {"demo_searches_total": 2, "demo_in_flight": 1}
        assert sweep_dead_processes(tmp_path) == []  # the living one is left alone
    finally:
        living.kill()
        living.wait()


def _starting(directory: Path) -> None:
    """A process's file as it is between its creation and its sizing: empty."""
    (directory / "counter_4194303.db").touch()


def test_a_file_not_yet_written_takes_nothing_from_the_sum(tmp_path: Path) -> None:
    living = _writer(tmp_path)
    try:
        _starting(tmp_path)
        assert _summed(tmp_path) == {"demo_searches_total": 1, "demo_in_flight": 1}
    finally:
        living.kill()
        living.wait()


@pytest.mark.django_db
def test_a_scrape_while_a_process_starts_gets_every_figure(
    tmp_path: Path, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    living = _writer(tmp_path)
    try:
        _starting(tmp_path)
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        response = client.get("/metrics")
    finally:
        living.kill()
        living.wait()
    assert response.status_code == 200
    assert b"demo_searches_total 1.0" in response.content
    assert b"ingestion_" in response.content  # the database's figures follow
