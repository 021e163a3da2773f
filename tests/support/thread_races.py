"""Running many threads released together, with a short thread-switch interval, so that the
interleavings a lock must survive happen in a test run."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


def race(step: Callable[[int, int], None], threads: int, rounds: int) -> list[BaseException]:
    """Runs `step(thread_index, round_index)` for `rounds` rounds in each of `threads` threads,
    all released by one barrier, under a very short switch interval; returns what they raised."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            barrier.wait()
            for round_index in range(rounds):
                step(index, round_index)
        except BaseException as error:  # noqa: BLE001 - returned to the test
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        started = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    return errors
