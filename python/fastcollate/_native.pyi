"""Type stub for the Rust extension module (rust/py)."""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__version__: str
build_profile: str  # "release" or "debug"

PadGroup = tuple[
    str,  # lead key: its lengths set the target
    int,  # lead pad value
    str,  # "longest" | "max_length" | "do_not_pad"
    int | None,  # max_length
    int | None,  # pad_to_multiple_of
    bool,  # pad on the left
    Sequence[tuple[str, int, bool]],  # (follower key, pad value, same length as lead)
    str | None,  # attention-mask key, created when absent
]

def collate(
    features: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]],
    groups: Sequence[PadGroup],
    *,
    float32: bool,
    allow_ragged: bool = False,
    dtypes: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
) -> dict[str, np.ndarray | list[Any]]: ...

def group_by_length(
    lengths: np.ndarray,  # int64, one per row
    permutation: np.ndarray,  # int64, a permutation of range(len(lengths))
    batch_size: int,
    mega_batch_mult: int | None = None,
) -> np.ndarray: ...  # int64 grouped indices

def flatten_batch(
    features: Sequence[Mapping[str, Any]],
    *,
    labels: bool,  # read each row's "labels" (else labels come from input_ids)
    separator_id: int,
    position_ids_start: int,
    position_ids: bool,
    seq_idx: bool,
    cu_seq_lens: bool,
) -> dict[str, Any]: ...  # input_ids, labels, [position_ids], [seq_idx], [cu_seq_lens, max_length]
