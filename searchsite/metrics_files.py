"""The multiprocess metrics files: those of processes that are gone, and those not yet
written.

With PROMETHEUS_MULTIPROC_DIR every web and worker process writes its metrics to files
there, and /metrics adds them all up. A counter's file must outlive its process (its
counts happened; dropping them would make the total go backwards), but a live gauge's
must not: an in-flight count a killed process last wrote would be added in for ever.
prometheus_client removes those files only when told a process died (gunicorn's
`child_exit` hook does it); uvicorn's and Celery's process pools have no such hook, and a
killed process tells no one. So each scrape removes the live gauges of every process that
no longer exists, before it reads them.

A process creates its file before it sizes it, so for a moment the file is empty, and
prometheus_client fails the whole scrape reading it (prometheus/client_python#1199, open
in 0.26.0): a scrape while a worker starts was a 500. An empty file holds no figures yet;
the collector here passes over it. One a process left empty when it was killed stays
passed over.
"""

import os
import re
from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

# prometheus_client's file names for the gauge modes that count live processes only:
# gauge_livesum_<pid>.db, gauge_liveall_<pid>.db, gauge_livemax_<pid>.db, ...
_LIVE_GAUGE = re.compile(r"gauge_live[a-z]+_(\d+)\.db")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process, but a process
        return True
    return True


def sweep_dead_processes(directory: Path) -> list[int]:
    """Remove the live-gauge files of processes that no longer exist; their pids."""
    dead = sorted(
        {
            int(match.group(1))
            for name in os.listdir(directory)
            if (match := _LIVE_GAUGE.fullmatch(name))
        }
    )
    dead = [pid for pid in dead if not _alive(pid)]
    for pid in dead:
        mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    return dead


class WrittenFilesCollector(MultiProcessCollector):
    """Every process's figures, from the files that hold some."""

    def __init__(self, directory: Path) -> None:
        super().__init__(None, path=str(directory))  # type: ignore[no-untyped-call]  # unannotated upstream; registered by the caller
        self._directory = directory

    def collect(self) -> list[Metric]:
        written = []
        for path in self._directory.glob("*.db"):
            try:
                if path.stat().st_size > 0:
                    written.append(str(path))
            except FileNotFoundError:  # a live gauge swept away since the glob
                continue
        return list(self.merge(written, accumulate=True))  # type: ignore[no-untyped-call]  # unannotated upstream
