"""Batches that already sit where accelerate would send them: training on the CPU, accelerate's
`DataLoaderShard` sends every batch to the CPU (`send_to_device`, a walk that rebuilds the batch
and calls `.to` on each tensor), which gives a batch of CPU tensors back as it was. For such a
loader the send is made by the Trainer's collate_fn instead, right after collating, and only
for a batch that is not one of CPU tensors already; the loader itself is left with no device,
as `device_placement=False` leaves it.

Only where nothing can come between the collate_fn and accelerate's send: a DataLoader that
collates in the main process (`num_workers=0`) and does not pin, so the send happens in the
same process, in the same order with the collating and the loader's state snapshots, and the
batches, the loader's `state_dict` and everything multi-process are as they were. On a GPU (or
any device but the CPU) accelerate's one host-to-device move stays where it is."""

from __future__ import annotations

from typing import Any

import torch
from transformers import BatchEncoding

_TENSOR = torch.Tensor
_function_mode_enabled = torch._C._is_torch_function_mode_enabled


def already_on_cpu(batch: Any) -> bool:
    """Whether `send_to_device(batch, cpu)` would give `batch`'s own values back: a dict or a
    BatchEncoding (exact types: no `.to` of a subclass runs) of exact CPU tensors and Python
    ints, with no torch function mode active (one could answer `.to` differently)."""
    kind = type(batch)
    if kind is BatchEncoding:
        values = batch.data
        if type(values) is not dict:
            return False
    elif kind is dict:
        values = batch
    else:
        return False
    if _function_mode_enabled():
        return False
    for value in values.values():
        kind = type(value)
        if kind is _TENSOR:
            if not value.is_cpu:
                return False
        elif kind is not int:
            return False
    return True


def sent_to_device(batch: Any, device: Any, non_blocking: bool) -> Any:
    """`batch` as accelerate's DataLoaderShard hands it on: itself where it is on the CPU
    already (`already_on_cpu`), else through `send_to_device`."""
    if already_on_cpu(batch):
        return batch
    from accelerate.utils import send_to_device

    return send_to_device(batch, device, non_blocking=non_blocking)


def take_over_cpu_placement(loader: Any, collate: Any) -> None:
    """Where `loader` is accelerate's DataLoaderShard sending each batch to the CPU, collated
    by `collate` (a `PlacedCollate`) in the main process and not pinned: `collate` makes the
    send (see the module) and the loader makes none. Any other loader is left as it is."""
    from accelerate.data_loader import DataLoaderShard

    # type(), not isinstance: a DataLoaderShard answers `__class__` as a DataLoader.
    if type(loader) is not DataLoaderShard or loader.device is None:
        return
    device = torch.device(loader.device)
    base = loader.base_dataloader
    if device.type != "cpu" or base.num_workers != 0 or base.pin_memory:
        return
    collate.send_to = (device, bool(getattr(loader, "_non_blocking", False)))
    loader.device = None
