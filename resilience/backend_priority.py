"""A Postgres backend runs at the CPU priority of the client thread that opened it.

The embedding and warming workers run at a lower priority (WORKER_NICE) so that searches
get the cores first; but the work they ask of Postgres (an embedding sweep's HNSW inserts:
1.0-1.7 CPU s per 1,024 listings, docs/benchmarks.md) ran in backends at full priority,
beside the searches' own. Postgres has no setting for a backend's priority, so the client
sets it: each connection opened by a thread with a raised niceness has its backend's
niceness raised to match (never lowered, never touched at niceness 0, as in the web
process, which asks nothing more).

Only a backend that is provably a process of this machine is touched: a PID names a
process only in its own PID namespace, and one from a server elsewhere (another host, a
container) would name some unrelated process here. So the server must tell its data
directory (superusers and pg_read_all_settings may read it), whose postmaster.pid must
name the backend's parent; anything else, and a process we may not renice, is left as
it is. The embedded stack (searchsite/embedded) meets all of this: one server on a Unix
socket, its superuser, this machine.
"""

import os
from pathlib import Path

# One row: the backend's PID, and the data directory where this role may read it.
BACKEND_SQL = (
    "SELECT pg_backend_pid(), CASE WHEN pg_has_role('pg_read_all_settings', 'USAGE')"
    " THEN current_setting('data_directory') END"
)


def client_niceness() -> int:
    """The calling thread's niceness (Linux keeps one per thread)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def local_backend(pid: int, data_directory: str | None) -> bool:
    """Whether `pid` is a backend of the server at `data_directory`, on this machine."""
    if not data_directory:
        return False
    try:
        postmaster = int(Path(data_directory, "postmaster.pid").read_text().split()[0])
        # /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and brackets.
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return parent == postmaster


def lower_backend(pid: int, data_directory: str | None, niceness: int) -> bool:
    """Raise the backend's niceness to `niceness` if it is local and lower; True if it now
    runs at least that nice."""
    if not local_backend(pid, data_directory):
        return False
    try:
        if os.getpriority(os.PRIO_PROCESS, pid) < niceness:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except OSError:  # gone meanwhile, or another user's and we lack CAP_SYS_NICE
        return False
    return True
