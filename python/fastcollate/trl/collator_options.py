"""The options of fastcollate's TRL collators, each checked by one rule: when the collator is
made (`PtOnly.__post_init__`) and again by every call, with the same message."""

from __future__ import annotations

from typing import Any

from .._internal.worker_handover import hands_over
from ..collators.padding_options import MAX_SIZE, checked_int, checked_pad_id

TRUNCATION_MODES = ("keep_start", "keep_end")


def check_pt_only(return_tensors: Any) -> None:
    """TRL's collators return torch tensors only."""
    if return_tensors != "pt":
        raise ValueError(
            f"return_tensors={return_tensors!r} is not supported: TRL's collator returns torch "
            "tensors only ('pt')"
        )


def checked_options(collator: Any) -> tuple[int, int | None, int | None]:
    """The collator's `pad_token_id`, `pad_to_multiple_of` and (where it has one) `max_length`,
    checked."""
    pad_token_id = checked_pad_id("pad_token_id", collator.pad_token_id)
    multiple = collator.pad_to_multiple_of
    if multiple is not None:
        multiple = checked_int("pad_to_multiple_of", multiple, 1, MAX_SIZE)
    max_length = getattr(collator, "max_length", None)
    if max_length is not None:
        # TRL's keep_end with 0 would keep everything (a slice from -0); refused instead.
        max_length = checked_int("max_length", max_length, 1, MAX_SIZE)
    return pad_token_id, multiple, max_length


def keeps_end(collator: Any) -> bool:
    """Whether DPO's collator cuts sequences from the start (`truncation_mode="keep_end"`)."""
    if collator.truncation_mode not in TRUNCATION_MODES:
        raise ValueError(
            f"Unsupported truncation mode: {collator.truncation_mode!r}; expected 'keep_start' "
            "or 'keep_end'"
        )
    keep_end: bool = collator.truncation_mode == "keep_end"
    return keep_end


class PtOnly:
    """A TRL collator: torch tensors only (another `return_tensors` is refused with a
    ValueError, where TRL's mixin fails on a missing `numpy_call`), and options checked when
    it is made. Its subclasses are dataclasses again, so that TRL's fields reach
    `__post_init__`."""

    return_tensors: str

    def __post_init__(self) -> None:
        check_pt_only(self.return_tensors)
        checked_options(self)

    @hands_over
    def __call__(self, features: Any, return_tensors: str | None = None) -> dict[str, Any]:
        check_pt_only(self.return_tensors if return_tensors is None else return_tensors)
        return self.torch_call(features)  # type: ignore[attr-defined,no-any-return]
