"""Length grouping on the Rust core: `get_length_grouped_indices`.

The random permutation is drawn in Python with `torch.randperm`, exactly as transformers draws
it, so a torch generator (or the global torch RNG) is consumed identically and the same seed
gives the same indices. Splitting, sorting and the longest-first swap run in Rust. So these
need torch (a numpy generator cannot give transformers' order): without it they raise an
ImportError saying so and how to install it.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import numpy as np

from .. import _native
from .._internal.extras import require
from .._internal.options import checked_count
from .._internal.tensors import torch_module
from .lengths import as_lengths


def grouped_indices_array(
    lengths: np.ndarray, batch_size: int, mega_batch_mult: int | None, generator: Any
) -> np.ndarray:
    """`get_length_grouped_indices` for int64 lengths, as an int64 array."""
    if mega_batch_mult is not None:
        if isinstance(mega_batch_mult, bool):
            raise TypeError("mega_batch_mult must be an integer, not a bool")
        mega_batch_mult = operator.index(mega_batch_mult)
        if mega_batch_mult < 1:
            raise ValueError(f"mega_batch_mult must be at least 1, not {mega_batch_mult}")
    # A mega-batch that holds every row is one group however large it is: sizes past the row
    # count give the same indices, so they are clamped before the Rust core's int64 arithmetic.
    rows = max(len(lengths), 1)
    if mega_batch_mult is None:
        batch_size = min(batch_size, rows)
    elif mega_batch_mult >= 1 and batch_size * mega_batch_mult >= rows:
        batch_size, mega_batch_mult = rows, 1
    require("get_length_grouped_indices (its shuffle is torch.randperm's, as in transformers)",
            "torch", "torch")
    torch = torch_module()
    permutation = torch.randperm(len(lengths), generator=generator).numpy()
    return _native.group_by_length(lengths, permutation, batch_size, mega_batch_mult)


def get_length_grouped_indices(
    lengths: Any, batch_size: int, mega_batch_mult: int | None = None, generator: Any = None
) -> list[int]:
    """Same indices as `transformers.trainer_pt_utils.get_length_grouped_indices` for the same
    lengths and torch generator: `torch.randperm` shuffles, mega-batches of
    `mega_batch_mult * batch_size` are each sorted longest first (stably), and the longest item
    is swapped to the front. `lengths` may be a list, numpy array or tensor of integers.

    Differences: bad input raises early (negative or non-integer lengths, batch_size < 1), and
    no lengths give no indices where transformers raises."""
    array = as_lengths(lengths)
    batch_size = checked_count(batch_size, "batch_size", 1)
    grouped = grouped_indices_array(array, batch_size, mega_batch_mult, generator)
    return cast(list[int], grouped.tolist())
