"""A batch's torch tensors placed in one shared-memory storage when the collator runs in a
DataLoader worker.

A worker's batch reaches the main process through torch's multiprocessing reductions: each
tensor's storage is moved into a shared-memory segment of its own (`_share_fd_cpu_`, a new
segment and a copy when the storage is not shared yet) and handed over as one file descriptor,
which the main process receives and maps. With every output a view of one shared storage, the
worker makes one segment and one copy, the pickler reduces that storage once (the tensors'
storages are the same object), and the main process maps it once: a storage already in shared
memory is handed over as it is, not copied again.

Outside a worker nothing changes; ``FASTCOLLATE_WORKER_SHARING=0`` turns it off in workers.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

# Each view starts on a cache line of its own.
_ALIGNMENT = 64
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


def share_batch(batch: Any) -> Any:
    """Replaces the plain contiguous CPU tensors of `batch` (a dict or BatchEncoding; not a
    subclass, sparse or autograd-tracked tensor, nor one in shared memory already) with views of
    one new shared-memory storage holding their values; `batch` is returned. Nothing is done
    with fewer than two such tensors (one tensor is one segment either way). Keys that viewed
    one storage before get copies of their own."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(batch, MutableMapping):
        return batch
    strided = torch.strided
    tensor_type = torch.Tensor
    found = [
        (key, value)
        for key, value in batch.items()
        if type(value) is tensor_type
        and value.layout is strided
        and value.device.type == "cpu"
        and value.is_contiguous()
        and not value.requires_grad
        and not value.is_shared()
    ]
    if len(found) < 2:
        return batch
    offsets = []
    total = 0
    for _, value in found:
        offsets.append(total)
        size = value.numel() * value.element_size()
        total += -(-size // _ALIGNMENT) * _ALIGNMENT
    if total == 0:
        return batch
    storage = torch.UntypedStorage._new_shared(total)
    for (key, value), offset in zip(found, offsets, strict=True):
        view = torch.empty(0, dtype=value.dtype)
        view.set_(storage, offset // value.element_size(), value.shape)
        view.copy_(value)
        batch[key] = view
    return batch


def hands_over(call: F) -> F:
    """Decorates a collator's `__call__`: in a DataLoader worker, with sharing on, its torch
    output is placed in one shared storage (`share_batch`); elsewhere the call is unchanged."""

    @functools.wraps(call)
    def collate(*args: Any, **kwargs: Any) -> Any:
        batch = call(*args, **kwargs)
        if in_worker() and sharing_on():
            return share_batch(batch)
        return batch

    return collate  # type: ignore[return-value]
