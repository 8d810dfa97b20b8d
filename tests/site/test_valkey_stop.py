"""Stopping the embedded Valkey from a process that did not start it (bench/faults.py
stops the supervisor's): it ends, a zombie until the supervisor reaps it, and `stop`
returns once it has, rather than waiting out its timeout for a zombie to go."""

import subprocess
import sys
import time
from pathlib import Path

from searchsite import embedded
from searchsite.embedded import valkey

STARTER = """
import sys, time
from pathlib import Path
from searchsite import embedded
from searchsite.embedded import valkey
valkey.start(Path(sys.argv[1]))
print("up", flush=True)
time.sleep(120)  # the parent, never reaping its child, as the supervisor between stops
"""


def test_a_valkey_another_process_started_is_stopped_at_once(tmp_path: Path) -> None:
    data = tmp_path / "valkey"
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(data)], stdout=subprocess.PIPE, cwd=embedded.REPO_DIR
    )
    try:
        assert starter.stdout is not None  # a pipe: asked for above
        assert starter.stdout.readline().strip() == b"up"
        assert valkey.is_running(data)
        started = time.monotonic()
        valkey.stop(data, timeout_s=5.0)
        assert time.monotonic() - started < 4.0
        assert not valkey.is_running(data)
    finally:
        starter.kill()
        starter.wait()
