"""The Postgres backend that builds a generation's graph while searches run is moved into
Linux's SCHED_IDLE class, where the server is a process of this host: it then runs only
on a core searches leave idle, and hands the core back the moment a search's backend
wakes. A build is one statement for minutes (an HNSW graph over every vector) that
nothing can pace from outside; one backend of it on one of two cores still doubled the
searches' p99 (docs/benchmarks.md, "A generation built while searches run").

The backend is found with certainty or not at all: over a Unix socket the kernel names
the server process at the other end (SO_PEERCRED: the postmaster that listened, as this
host numbers it, 0 when it is in a namespace this process cannot see), and
pg_backend_pid() must be a child of it. Over TCP the server is another host's, or not
provably ours: the build runs in its normal class.

Leaving SCHED_IDLE needs privileges that containers rarely grant, so the connection must
not serve other work afterwards: the caller closes it.
"""

import logging
import os
import socket
import struct

from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def idle_backend(connection: BaseDatabaseWrapper) -> bool:
    """Move the server process of Django's `connection` (open) into SCHED_IDLE; whether it
    was. The connection must be closed before it serves anything else."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    listener = _peer_process(connection.connection.pgconn.socket)
    if not listener or _parent_of(backend) != listener:
        logger.info("generation build: its backend is not a process of this host")
        return False
    try:
        os.sched_setscheduler(backend, os.SCHED_IDLE, os.sched_param(0))
    except (PermissionError, ProcessLookupError) as error:
        logger.info("generation build: its backend keeps its class (%s)", type(error).__name__)
        return False
    return True


def _peer_process(fd: int) -> int:
    """The pid, as this host numbers it, of the process at the other end of the Unix socket
    `fd`; 0 for a TCP socket or a process out of sight."""
    with socket.socket(fileno=os.dup(fd)) as peer:
        if peer.family != socket.AF_UNIX:
            return 0
        raw = peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
    pid: int = _PEER_CREDENTIALS.unpack(raw)[0]
    return pid


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # After the command's name in parentheses (which may hold spaces): state, ppid.
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
