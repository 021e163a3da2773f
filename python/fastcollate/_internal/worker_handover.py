"""Which collator calls hand their batch over through the worker's shared arena
(`worker_arena`): the outermost fastcollate collator call in a DataLoader worker, with sharing
on. Outside a worker nothing changes; ``FASTCOLLATE_WORKER_SHARING=0`` turns it off in workers.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .worker_arena import place_batch

_WORKER_MODULE = "torch.utils.data._utils.worker"

F = TypeVar("F", bound=Callable[..., Any])


def in_worker() -> bool:
    """Whether this process is a torch DataLoader worker (without importing torch: a process
    that never imported the DataLoader's worker module is none)."""
    worker = sys.modules.get(_WORKER_MODULE)
    return worker is not None and worker.get_worker_info() is not None


def sharing_on() -> bool:
    """Whether `FASTCOLLATE_WORKER_SHARING` leaves worker sharing on (anything but "0")."""
    return os.environ.get("FASTCOLLATE_WORKER_SHARING", "1").strip() != "0"


class _Depth(threading.local):
    """How many decorated calls this thread is inside (a collator may call another)."""

    calls = 0


_depth = _Depth()


def hands_over(call: F) -> F:
    """Decorates a collator's `__call__` (or a collating function): in a DataLoader worker,
    with sharing on, the outermost such call's torch output is written into the worker's
    arena (`worker_arena.place_batch`); elsewhere, and in the calls it makes, the call is
    unchanged."""

    @functools.wraps(call)
    def collate(*args: Any, **kwargs: Any) -> Any:
        if not in_worker():
            # Outside a worker (where a process stays all its life) no call hands over, at
            # any depth: nothing to count.
            return call(*args, **kwargs)
        _depth.calls += 1
        try:
            batch = call(*args, **kwargs)
        finally:
            _depth.calls -= 1
        if _depth.calls == 0 and sharing_on():
            return place_batch(batch)
        return batch

    return collate  # type: ignore[return-value]
