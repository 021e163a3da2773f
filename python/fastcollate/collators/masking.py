"""Native masked-LM masking: what it reads from the tokenizer, and the state it keeps across
batches (the tokenizer's ids; the epoch and the batch counter that key each batch's random
stream, shared with DataLoader workers)."""

from __future__ import annotations

import contextvars
import multiprocessing as mp
import multiprocessing.context
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from .. import _native
from .._internal.tensors import torch_module

# Seeds are 64-bit: every seed is taken modulo this.
SEEDS = 2**64
# A stream's batch word is (epoch << 32) | batch within the epoch: epoch 0 keys batches as
# before epochs were counted, and every (epoch, batch) pair gets its own word.
EPOCHS = 2**31 - 1
BATCHES_PER_EPOCH = 2**32
_LOW32 = 2**32 - 1
_NO_IDS = np.zeros(0, dtype=np.int64)


@dataclass
class BatchPlace:
    """Where the batch being collated sits, told by the loader collating it
    (`fastcollate.Trainer` sets one around each call of its DataLoaders' collate_fn): the
    loader's stream (`stream`: 0 training, 1 evaluation, 2 prediction, plus a DataLoader
    worker's id above bit 16 where positions count per worker), the epoch, and the batch's
    position in the epoch. Seeded native masks are then keyed by it, not by the collator's own
    batch count: every seeded collator called inside the collate_fn (wrapped, partial, a lambda)
    masks by the batch's place, and evaluation leaves the training masks as they were. `calls`
    counts the seeded maskings inside this one batch, so a collator that masks twice per batch
    draws two streams."""

    stream: int
    epoch: int
    position: int
    calls: int = field(default=0)


# The place of the batch being collated in this thread; None outside a placing loader.
BATCH_PLACE: contextvars.ContextVar[BatchPlace | None] = contextvars.ContextVar(
    "fastcollate_batch_place", default=None
)
# A placed batch's stream id takes the worker word's bits above 32 (DataLoader worker ids,
# which key unplaced batches, stay below); the seeded maskings within one batch the low 16.
_STREAM_SHIFT = 32
CALLS_PER_BATCH = 2**16


def base_special_tokens_mask() -> Any:
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return PreTrainedTokenizerBase.get_special_tokens_mask


def asks_tokenizer_per_row(tokenizer: Any) -> bool:
    """Whether special tokens must come from the tokenizer's own `get_special_tokens_mask`
    (it replaces transformers' membership test in `all_special_ids`)."""
    method = getattr(type(tokenizer), "get_special_tokens_mask", None)
    return method is not None and method is not base_special_tokens_mask()


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):
        return cast(np.ndarray, x.detach().cpu().numpy())
    return np.array(x)


def _int64_array(x: Any) -> np.ndarray | None:
    """An int64 C-contiguous array of `x` (the same array when it already is one)."""
    if x is None:
        return None
    return np.ascontiguousarray(to_numpy(x), dtype=np.int64)


@dataclass(frozen=True)
class TokenIds:
    """What native masking needs from the tokenizer, read once per tokenizer."""

    vocab_size: int
    mask_token_id: int
    # Sorted int64 ids never selected (the pad token among them); None where the tokenizer's
    # own get_special_tokens_mask decides, row by row.
    special_ids: np.ndarray | None

    @classmethod
    def read(cls, tokenizer: Any, vocab_size: int) -> TokenIds:
        special_ids = None
        if not asks_tokenizer_per_row(tokenizer):
            found = {int(i) for i in tokenizer.all_special_ids if i is not None}
            special_ids = np.array(sorted(found), dtype=np.int64)
        mask_token_id = tokenizer.convert_tokens_to_ids(tokenizer.mask_token)
        return cls(vocab_size, int(mask_token_id), special_ids)


def global_seed(framework: str) -> int:
    """One 64-bit seed from the global generator the framework's users seed: torch's
    (`torch.manual_seed`, `transformers.set_seed`, DataLoader workers) or numpy's."""
    if framework == "pt":
        torch = torch_module()
        return cast(int, torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64).item() % SEEDS)
    return int(np.random.randint(0, SEEDS, dtype=np.uint64))


def worker_id() -> int:
    """The DataLoader worker this process is (0 in the main process). Elsewhere than a
    DataLoader worker, a child process cannot be told apart from its siblings: an error, as
    transformers' seeded collator raises."""
    if mp.current_process().name == "MainProcess":
        return 0
    worker_info = torch_module().utils.data.get_worker_info()
    if worker_info is None:
        raise ValueError(
            "Worker process information is not available for seeding the generator. The "
            "`seed` parameter can only be used in a single process or in a PyTorch "
            "DataLoader with multiple workers."
        )
    return int(worker_info.id)


def check_epoch(epoch: Any) -> int:
    """`epoch` as an int in [0, EPOCHS), or the error naming what is wrong with it."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
        raise TypeError(f"set_epoch takes an int, not {type(epoch).__name__}")
    if not 0 <= int(epoch) < EPOCHS:
        raise ValueError(f"the epoch must lie in [0, {EPOCHS}), not {epoch}")
    return int(epoch)


def _dataloader_iteration() -> int | None:
    """The DataLoader iteration this worker process serves, as its base seed (`worker seed -
    worker id`, drawn afresh by each `iter(loader)`); None outside a DataLoader worker."""
    if mp.current_process().name == "MainProcess":
        return None
    torch = torch_module()
    worker_info = torch.utils.data.get_worker_info()
    seed = getattr(worker_info, "seed", None)  # a stand-in WorkerInfo may have no seed
    if seed is None:
        return None
    return int(seed) - int(worker_info.id)


def _hash32(value: int) -> int:
    return ((value * 0x9E3779B97F4A7C15) % SEEDS) >> 32


class EpochCells:
    """Two int64 cells in memory shared with DataLoader workers (inherited on fork, handed over
    on spawn / forkserver): the epoch given to `set_epoch` (-1: never given), and the DataLoader
    iterations workers have seen, packed as (count << 32) | hash of the iteration's base seed.
    Updated with an atomic compare-and-swap, so no lock has to cross processes."""

    EXPLICIT, ITERATIONS = 0, 1

    def __init__(self, explicit: int = -1, iterations: int = 0) -> None:
        self._raw = mp.RawArray("q", 2)
        self.cells = np.frombuffer(self._raw, dtype=np.int64)
        self.cells[:] = (explicit, iterations)

    def __getstate__(self) -> dict[str, Any]:
        if multiprocessing.context.get_spawning_popen() is not None:
            return {"raw": self._raw}  # a DataLoader worker being started: the same memory
        # Any other copy (deepcopy, pickle to disk) gets memory of its own, with the values.
        return {"values": (int(self.cells[0]), int(self.cells[1]))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "raw" in state:
            self._raw = state["raw"]
            self.cells = np.frombuffer(self._raw, dtype=np.int64)
        else:
            # Re-initialised in place (mypy flags `__init__` called on an instance).
            cast(Any, self).__init__(*state["values"])

    @property
    def explicit(self) -> int:
        return int(self.cells[self.EXPLICIT])

    def set_explicit(self, epoch: int) -> None:
        cell = self.EXPLICIT
        while (old := int(self.cells[cell])) != epoch:
            if _native.compare_exchange(self.cells, cell, old, epoch) == old:
                return

    def iteration_epoch(self, base_seed: int) -> int:
        """The epoch of the DataLoader iteration whose base seed is `base_seed`: the number of
        iterations seen before it. The first worker to see a new base seed counts it; its
        siblings find it counted. (Two iterations whose base seeds share a 32-bit hash, one
        chance in 2**32, would share an epoch.)"""
        tag = _hash32(base_seed)
        cell = self.ITERATIONS
        while True:
            word = int(self.cells[cell])
            if word != 0 and word & _LOW32 == tag:
                return (word >> 32) - 1
            count = word >> 32
            if count >= EPOCHS:
                raise ValueError(
                    f"this collator has served {count} DataLoader iterations, more than the "
                    f"{EPOCHS} epochs its masks can tell apart"
                )
            new = ((count + 1) << 32) | tag
            if _native.compare_exchange(self.cells, cell, word, new) == word:
                return count


def placed_key(seed: int, place: BatchPlace) -> tuple[int, int, int]:
    """(seed, worker word, batch word) of a placed batch's next seeded masking: a pure function
    of (seed, stream, epoch, position, maskings before it in this batch)."""
    call = place.calls
    if call >= CALLS_PER_BATCH:
        raise ValueError(
            f"a seeded collator masked one batch {call} times, more than the "
            f"{CALLS_PER_BATCH} a batch's place can tell apart"
        )
    if not 0 <= place.position < BATCHES_PER_EPOCH:
        raise ValueError(
            f"batch {place.position} of epoch {place.epoch} lies past the "
            f"{BATCHES_PER_EPOCH} batches a seeded epoch can tell apart"
        )
    place.calls += 1
    worker = (place.stream << _STREAM_SHIFT) | call
    return int(seed) % SEEDS, worker, (check_epoch(place.epoch) << 32) | place.position


class NativeMasking:
    """What native masking keeps between batches, and the call that masks one: the tokenizer's
    ids (read again only for another tokenizer or a grown vocabulary: `add_special_tokens`
    grows it), the epoch, and the number of batches this process masked with a seed in that
    epoch. Each seeded batch's random stream is keyed by (seed, epoch, DataLoader worker,
    batch within the epoch).

    The epoch is the one given to `set_epoch` (kept in memory shared with DataLoader workers,
    so persistent workers see it too); without one, a DataLoader worker counts the DataLoader
    iterations (each `iter(loader)` draws a new base seed for its workers), which restart
    non-persistent workers every epoch; the main process, and persistent workers, that are
    never told an epoch go on counting batches across epochs."""

    def __init__(self) -> None:
        self.batches_masked = 0
        self.epoch: int | None = None  # the epoch batches_masked counts in
        self._iteration: int | None = None  # the DataLoader base seed it was read for
        self._token_ids: tuple[Any, TokenIds] | None = None
        self._epochs = EpochCells()

    def set_epoch(self, epoch: int) -> None:
        self._epochs.set_explicit(check_epoch(epoch))

    def current_epoch(self) -> tuple[int, bool]:
        """The epoch of the batch being masked (see the class), and whether this process has
        just started serving a new DataLoader iteration (its batch count then restarts, so
        what the main process masked before starting its workers does not shift theirs)."""
        iteration = _dataloader_iteration()
        new_iteration = iteration is not None and iteration != self._iteration
        if new_iteration:
            self._iteration = iteration
        explicit = self._epochs.explicit
        if explicit >= 0:
            return explicit, new_iteration
        if iteration is None:
            return (0 if self.epoch is None else self.epoch), False
        if new_iteration or self.epoch is None:
            return self._epochs.iteration_epoch(iteration), True
        return self.epoch, False

    def token_ids(self, tokenizer: Any) -> TokenIds:
        vocab_size = len(tokenizer)
        cached = self._token_ids
        if cached is None or cached[0] is not tokenizer or cached[1].vocab_size != vocab_size:
            cached = (tokenizer, TokenIds.read(tokenizer, vocab_size))
            self._token_ids = cached
        return cached[1]

    def stream_key(self, seed: int | None, framework: str) -> tuple[int, int, int]:
        """(seed, worker, batch word) keying one batch's random stream, the batch word being
        (epoch << 32) | batch within the epoch: without a seed, one drawn from the framework's
        global generator."""
        if seed is None:
            return global_seed(framework), 0, 0
        place = BATCH_PLACE.get()
        if place is not None:
            return placed_key(seed, place)
        epoch, new_iteration = self.current_epoch()
        if new_iteration or epoch != self.epoch:
            self.epoch, self.batches_masked = epoch, 0
        batch = self.batches_masked
        if batch >= BATCHES_PER_EPOCH:
            raise ValueError(
                f"this collator masked {batch} batches in epoch {epoch}, more than the "
                f"{BATCHES_PER_EPOCH} a seeded epoch can tell apart; call set_epoch"
            )
        self.batches_masked += 1
        return int(seed) % SEEDS, worker_id(), (epoch << 32) | batch

    def mask(
        self,
        ids: np.ndarray,
        tokenizer: Any,
        *,
        seed: int | None,
        framework: str,
        mlm_probability: float,
        mask_replace_prob: float,
        random_replace_prob: float,
        special_tokens_mask: Any,
        whole_word_mask: bool,
        offset_mapping: Any,
    ) -> np.ndarray:
        """Masks `ids` (int64, C-contiguous, rows x tokens) in place on the Rust core and
        returns the labels. With `whole_word_mask`, `offset_mapping` groups tokens into
        words."""
        if ids.ndim != 2:
            raise ValueError(
                f"masking needs a 2-d batch of 'input_ids' (rows x tokens), got {ids.ndim}-d"
            )
        token_ids = self.token_ids(tokenizer)
        if special_tokens_mask is None and token_ids.special_ids is None:
            special_tokens_mask = [
                tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)
                for row in ids.tolist()
            ]
        if whole_word_mask and offset_mapping is None:
            raise ValueError(
                "whole_word_mask needs 'offset_mapping' in the rows: tokenize with "
                "return_offsets_mapping=True"
            )
        seed, worker, batch = self.stream_key(seed, framework)
        return _native.mask_tokens(
            ids,
            seed=seed,
            worker=worker,
            batch=batch,
            mlm_probability=mlm_probability,
            mask_replace_prob=mask_replace_prob,
            random_replace_prob=random_replace_prob,
            mask_token_id=token_ids.mask_token_id,
            vocab_size=token_ids.vocab_size,
            special_ids=_NO_IDS if token_ids.special_ids is None else token_ids.special_ids,
            special_tokens_mask=_int64_array(special_tokens_mask),
            offset_mapping=_int64_array(offset_mapping) if whole_word_mask else None,
        )
