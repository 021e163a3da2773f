"""Native masked-LM masking: what it reads from the tokenizer, and the state it keeps across
batches (the tokenizer's ids, the batch counter that keys each batch's random stream)."""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from .._internal.tensors import torch_module

# Seeds are 64-bit: every seed is taken modulo this.
SEEDS = 2**64
_NO_IDS = np.zeros(0, dtype=np.int64)


def base_special_tokens_mask():
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
        return x.detach().cpu().numpy()
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
        return torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64).item() % SEEDS
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


class NativeMasking:
    """What native masking keeps between batches, and the call that masks one: the tokenizer's
    ids (read again only for another tokenizer or a grown vocabulary: `add_special_tokens`
    grows it) and the number of batches masked with a seed (each batch's random stream is
    keyed by seed, DataLoader worker and that number)."""

    def __init__(self) -> None:
        self.batches_masked = 0
        self._token_ids: tuple[Any, TokenIds] | None = None

    def token_ids(self, tokenizer: Any) -> TokenIds:
        vocab_size = len(tokenizer)
        cached = self._token_ids
        if cached is None or cached[0] is not tokenizer or cached[1].vocab_size != vocab_size:
            cached = (tokenizer, TokenIds.read(tokenizer, vocab_size))
            self._token_ids = cached
        return cached[1]

    def stream_key(self, seed: int | None, framework: str) -> tuple[int, int, int]:
        """(seed, worker, batch number) keying one batch's random stream: without a seed, one
        drawn from the framework's global generator."""
        if seed is None:
            return global_seed(framework), 0, 0
        batch = self.batches_masked
        self.batches_masked += 1
        return int(seed) % SEEDS, worker_id(), batch

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
