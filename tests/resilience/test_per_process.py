"""One value per process (resilience/per_process.py): made once however many threads ask,
made again in a forked child rather than inherited, and dropped by `forget`."""

import os
import select
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

from resilience.per_process import PerProcess


def test_threads_asking_at_once_share_the_one_value() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    value = PerProcess(make)
    start = threading.Barrier(8)

    def ask(_: int) -> object:
        start.wait()  # all eight at once
        return value.get()

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(8)))
    assert len(made) == 1
    assert got == made * 8


def test_a_forked_child_makes_its_own_even_with_the_lock_held_at_the_fork() -> None:
    value = PerProcess(lambda: os.getpid())
    assert value.get() == os.getpid()
    read, write = os.pipe()
    with value._lock:  # as another thread of the parent might hold it
        child = os.fork()
        if child == 0:  # the child: its own value, the lock usable
            try:
                os.write(write, str(value.get()).encode())
            finally:
                os._exit(0)
    os.close(write)
    answered, _, _ = select.select([read], [], [], 10)  # a child stuck on the lock never does
    if not answered:
        os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        made_in_child = int(pipe.read() or 0) if answered else 0
    assert made_in_child == child
    assert value.get() == os.getpid()  # the parent's, unchanged


def test_forget_hands_back_this_process_value_and_the_next_get_makes_another() -> None:
    count = iter(range(10))
    value = PerProcess(lambda: next(count))
    assert value.made() is None
    assert value.forget() is None
    assert value.get() == 0
    assert value.made() == 0
    assert value.forget() == 0
    assert value.made() is None
    assert value.get() == 1
