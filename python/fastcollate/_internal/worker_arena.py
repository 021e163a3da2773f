"""A DataLoader worker's batches written into a shared-memory arena the main process maps once.

torch hands a worker's tensors over one by one: each storage is moved into a shared-memory
segment of its own, and the main process receives one file descriptor per tensor over a socket
and maps it, for every batch. Here a worker writes its batch's tensors into a slot of its
arena (`_native.WorkerArena`: one anonymous shared file, a ring of slots), and what crosses
the process boundary for each tensor is a small description: the arena's identity, the slot,
the offset, dtype, shape and strides. The arena's file goes along only until the main process
has it mapped (a flag in the arena's shared header says so); from then on the main process
wraps each tensor as a view of its mapping (`_native.receive_arena_view`, then
`torch.from_numpy`), without a copy, a socket or a descriptor.

A slot is written again only once every view of it is freed, in the worker and in the main
process: each view holds the slot (a counter in the shared header) until torch frees its
storage. When no free slot fits a batch, the worker makes a larger arena instead of waiting
(the main process may hold batches for good, as `list(loader)` does); an arena with no view
alive is dropped. The main process keeps an arena mapped while its worker may write there,
and drops it once the worker retired it (for a larger one) and no view of it is alive or on
its way, or, for a worker that is gone, with the last view alive.

In a worker, torch's reduction of `torch.Tensor` for multiprocessing is replaced by one that
describes a tensor viewing the arena and hands every other tensor to torch's own (the worker
process's own pickler registry; the main process's is untouched). Linux only: elsewhere (no
`memfd_create`) batches go as torch hands them over.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import MutableMapping
from typing import Any

from .. import _native

# Each tensor starts on a cache line of its own.
_ALIGNMENT = 64
# A new arena's slots, and the least bytes of a slot (rounded to whole pages).
_FIRST_SLOTS = 4
_PAGE = 4096
_LEAST_SLOT_BYTES = 16 * _PAGE

# This worker's arenas, the newest last: older ones stay while a view of them may still be
# pickled (the queue's feeder thread pickles after the collator returns).
_arenas: list[Any] = []
# torch's reduction of a tensor, which every tensor outside the arenas still gets.
_torch_reduce: Any = None


def supported() -> bool:
    """Whether this build has shared arenas (Linux)."""
    return hasattr(_native, "WorkerArena")


def _placed(value: Any, torch: Any) -> bool:
    """Whether `value` is a tensor the arena carries: a plain, dense, contiguous CPU tensor
    with values, not tracked by autograd."""
    return (type(value) is torch.Tensor
            and value.layout is torch.strided
            and value.device.type == "cpu"
            and value.is_contiguous()
            and not value.requires_grad
            and value.numel() > 0)


def place_batch(batch: Any) -> Any:
    """Writes the arena-carried torch tensors of `batch` (a dict or BatchEncoding) into one
    slot of this worker's arena and replaces each with a view of its copy there; `batch` is
    returned. Anything else (other values, another container, no arena support) is left."""
    torch = sys.modules.get("torch")
    if torch is None or not supported() or not isinstance(batch, MutableMapping):
        return batch
    found = [(key, value) for key, value in batch.items() if _placed(value, torch)]
    if not found:
        return batch
    sizes = [value.numel() * value.element_size() for _, value in found]
    offsets = []
    total = 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _ALIGNMENT) * _ALIGNMENT
    try:
        arena, slot = _claim(total)
    except OSError as error:  # no shared memory to be had (ENOMEM, EMFILE, ...)
        _warn_once(f"a DataLoader worker could not make its shared-memory arena ({error}); "
                   "it hands its batches over as torch does")
        return batch
    try:
        for (key, value), offset, size in zip(found, offsets, sizes, strict=True):
            typenum = _numpy_type(value.dtype)
            if typenum is None:  # bfloat16, ...: the bytes, viewed by torch
                data = arena.view(slot, offset, size)
                view = torch.from_numpy(data).view(value.dtype).view(value.shape)
            else:
                view = torch.from_numpy(arena.view(slot, offset, size, typenum, value.shape))
            view.copy_(value)
            batch[key] = view
    finally:
        arena.release(slot)
    return batch


_warned: list[str] = []


def _warn_once(message: str) -> None:
    """Warns of a worker's arena failing, once per process."""
    if not _warned:
        _warned.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _claim(nbytes: int) -> tuple[Any, int]:
    """A slot of at least `nbytes` bytes, claimed; a new, larger arena when none is free."""
    newest = _arenas[-1] if _arenas else None
    if newest is not None:
        slot = newest.claim(nbytes)
        if slot is not None:
            return newest, slot
    slots, slot_bytes = _FIRST_SLOTS, 0
    if newest is not None:
        slot_bytes = newest.slot_bytes
        if nbytes <= slot_bytes:  # every slot held: twice as many
            slots = newest.slots * 2
    # A quarter more than the batch, so batches a little longer still fit.
    wanted = nbytes + nbytes // 4
    slot_bytes = max(slot_bytes, _LEAST_SLOT_BYTES, -(-wanted // _PAGE) * _PAGE)
    arena = _native.WorkerArena(slots, slot_bytes)
    if newest is not None:  # no new batch goes there: the main process may unmap it
        newest.retire()
    # Older arenas no view holds any more are dropped (their memory goes with the last
    # mapping, here or in the main process).
    _arenas[:] = [old for old in _arenas
                  if any(old.holds(index) for index in range(old.slots))]
    _arenas.append(arena)
    _install_reduction()
    slot = arena.claim(nbytes)
    assert slot is not None  # a new arena's slots are all free and large enough
    return arena, slot


def _install_reduction() -> None:
    """Makes this process's multiprocessing pickler describe arena views (`_reduce_tensor`)."""
    global _torch_reduce
    from multiprocessing.reduction import ForkingPickler

    import torch
    import torch.multiprocessing.reductions  # noqa: F401  (torch's own reductions registered)

    current = ForkingPickler._extra_reducers.get(torch.Tensor)  # type: ignore[attr-defined]
    if current is _reduce_tensor:
        return
    _torch_reduce = current
    ForkingPickler.register(torch.Tensor, _reduce_tensor)


def _reduce_tensor(tensor: Any) -> Any:
    """How a worker pickles a tensor for the main process: a view of an arena as its
    description (the arena's file with it until the main process maps the arena), any other
    tensor as torch does."""
    storage = tensor.untyped_storage()
    address, nbytes = storage.data_ptr(), storage.nbytes()
    if not tensor.requires_grad:
        for arena in reversed(tuple(_arenas)):
            found = arena.locate(address, nbytes)
            if found is not None:
                slot, offset = found
                if arena.send(slot):
                    file = None
                else:
                    from multiprocessing.reduction import DupFd
                    file = DupFd(arena.fileno())
                where = (arena.identity, file, os.getpid(), slot, offset, nbytes)
                shape = tuple(tensor.shape)
                whole = (tensor.storage_offset() == 0 and tensor.is_contiguous()
                         and tensor.numel() * tensor.element_size() == nbytes
                         and offset % tensor.element_size() == 0)
                if whole and (typenum := _numpy_type(tensor.dtype)) is not None:
                    return (_rebuild_array, (*where, typenum, shape))
                return (_rebuild_view, (*where, tensor.dtype, shape, tensor.stride(),
                                        tensor.storage_offset()))
    return _torch_reduce(tensor)


# torch dtype -> numpy's type number, None for a dtype numpy lacks (bfloat16, ...).
_numpy_types: dict[Any, int | None] = {}


def _numpy_type(dtype: Any) -> int | None:
    """numpy's type number for the torch `dtype`, when numpy has the type."""
    if dtype not in _numpy_types:
        import torch
        try:
            _numpy_types[dtype] = torch.empty(0, dtype=dtype).numpy().dtype.num
        except TypeError:
            _numpy_types[dtype] = None
    return _numpy_types[dtype]


def _rebuild_array(identity: tuple[int, int], file: Any, owner_pid: int, slot: int,
                   offset: int, nbytes: int, typenum: int, shape: tuple[int, ...]) -> Any:
    """The main process's side of `_reduce_tensor` for a whole contiguous storage of a type
    numpy has: the tensor over the main process's mapping of the worker's arena (mapped here
    on the first view, from the file that came with it), without a copy; the slot stays held
    while the tensor's storage lives."""
    import torch

    fd = -1 if file is None else file.detach()
    return torch.from_numpy(_native.receive_arena_view(identity, fd, owner_pid, slot, offset,
                                                       nbytes, typenum, shape))


def _rebuild_view(identity: tuple[int, int], file: Any, owner_pid: int, slot: int,
                  offset: int, nbytes: int, dtype: Any, shape: tuple[int, ...],
                  stride: tuple[int, ...], storage_offset: int) -> Any:
    """The main process's side of `_reduce_tensor` for any other view: the storage's bytes,
    then the view (dtype, shape, strides, offset) set on them."""
    import torch

    fd = -1 if file is None else file.detach()
    data = _native.receive_arena_view(identity, fd, owner_pid, slot, offset, nbytes)
    storage = torch.from_numpy(data).untyped_storage()
    return torch.empty((0,), dtype=dtype).set_(storage, storage_offset, shape, stride)


def mapped_arenas() -> int:
    """How many workers' arenas this process maps (0 without arena support)."""
    return int(_native.mapped_arenas()) if supported() else 0


def sweep_arenas() -> int:
    """Drops the arenas of workers that are gone, with no view alive here; how many."""
    return int(_native.sweep_arenas()) if supported() else 0
