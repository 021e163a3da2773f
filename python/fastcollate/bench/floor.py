"""The floor timed beside fastcollate: the least work a call must do for the same rows, so that
the report can say how far fastcollate is from it (fastcollate's time over the floor's).

The floor (`_native.PadFloor`, a native loop that only the benchmark calls) reads every value
of every padded key once and writes it, right-padded to the batch's longest row, into int64
buffers allocated before anything is timed and reused by every call, and reads each label
once. Python lists are read int by int as fastcollate's reader reads them (an exact list of
exact ints); a numpy row is copied with one `memcpy`; a torch row through a numpy view of the
tensor taken before timing, torch's API per tensor left out. Beside it for torch rows, the floor
through torch's API is handed the tensors themselves and asks torch what a sound reader must
(`TORCH_FLOOR_BASIS`). Left out, as no floor can avoid them and every call of fastcollate pays
them: allocating the outputs and handing them to torch, parsing options, checking the
tokenizer. Before anything is timed its output is checked equal to fastcollate's on every
batch, key by key, so the floor cannot measure less work than the call does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastcollate._native import PadFloor

# What the report and the JSON record say the floor is.
FLOOR_BASIS = (
    "the least work the call must do: the same fresh batches padded by a minimal native loop "
    "into int64 buffers allocated before timing and reused (every value of every padded key "
    "read once, each label read once; Python lists read int by int as fastcollate reads them, "
    "a numpy row copied with one memcpy, a torch row copied through a numpy view of the tensor "
    "taken before timing), timed in the same run, interleaved with the others. Left out: "
    "allocating the outputs and handing them to torch, torch's API per tensor, parsing options"
)
# What the report and the JSON record say the floor through torch's API is (torch rows only).
TORCH_FLOOR_BASIS = (
    "the same floor handed the torch rows themselves, paying what any reader that vouches for a "
    "tensor's memory must ask torch: whether a torch function mode is on (once a batch), then "
    "for each tensor its is_neg() through torch's own C method and one description of its "
    "memory through torch's DLPack exchange table, before its values are copied"
)


@dataclass(frozen=True)
class FloorKeys:
    """What a collator's floor pads: each padded key with its pad value, and the label (the
    rows' key, the output's key) when there is one."""

    padded: dict[str, int]
    label: tuple[str, str] | None = None


def with_padding_keys(tokenizer: Any) -> FloorKeys:
    """DataCollatorWithPadding's outputs for the benchmark's rows: input_ids, token_type_ids
    and attention_mask padded right to the longest row, `label` read into `labels`."""
    return FloorKeys(
        {
            "input_ids": tokenizer.pad_token_id,
            "token_type_ids": tokenizer.pad_token_type_id,
            "attention_mask": 0,
        },
        ("label", "labels"),
    )


def floor_rows(rows: list[dict[str, Any]], *, through_torch: bool = False) -> list[dict[str, Any]]:
    """The rows as the floor is handed them: tensors as numpy views of the same memory (taken
    here, before timing), or as they are `through_torch` (the sound route's floor: the floor
    then asks torch what any reader that vouches for a tensor's memory must); every other value
    as it is."""
    import torch

    return [
        {
            k: v.numpy() if isinstance(v, torch.Tensor) and not through_torch else v
            for k, v in row.items()
        }
        for row in rows
    ]


class Floor:
    """One collator's floor for one pool of batches: the batches as the floor reads them, and
    its buffers, sized for the pool's largest batch and longest row before anything is
    timed."""

    def __init__(
        self, keys: FloorKeys, batches: list[list[dict[str, Any]]], *, through_torch: bool = False
    ):
        self.keys = keys
        self.batches = [floor_rows(batch, through_torch=through_torch) for batch in batches]
        longest = max(
            (len(row[key]) for batch in self.batches for row in batch for key in keys.padded),
            default=0,
        )
        self.native = PadFloor(
            list(keys.padded),
            list(keys.padded.values()),
            keys.label,
            max(len(batch) for batch in self.batches),
            longest,
        )
        # The timed call: the native method itself, no Python frame around it.
        self.pad: Callable[[list[dict[str, Any]]], None] = self.native.pad

    def difference(self, index: int, ours: dict[str, Any]) -> str | None:
        """None when the floor's output for pool batch `index` holds exactly fastcollate's
        output `ours` (the same keys, shapes and values), else what differs."""
        self.pad([dict(row) for row in self.batches[index]])
        floor = self.native.outputs()
        if set(floor) != set(ours):
            return f"keys {sorted(floor)} != fastcollate's {sorted(ours)}"
        for key, value in floor.items():
            theirs = np.asarray(ours[key])
            if value.shape != theirs.shape or not np.array_equal(value, theirs):
                return f"'{key}': {value.shape} values differ from fastcollate's {theirs.shape}"
        return None
