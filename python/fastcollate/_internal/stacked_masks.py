"""Per-example attention masks of two or more dimensions, which `tokenizer.pad` does not pad.

transformers 5.9+ (`PreTrainedTokenizerBase.pad`) takes `attention_mask` out of the batch when the
first row's mask has `ndim > 1` (a 2-d or 4-d mask made for each example, e.g. for packed
sequences), pads the rest (creating a fresh 1-d mask when one is asked for), and then puts the
masks back as they were, stacked: `torch.stack` for tensors, `np.stack` for numpy arrays,
`np.array` otherwise. The final conversion (`BatchEncoding(..., tensor_type=...)`) then makes
the stack a tensor / array of the requested kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .tensors import is_torch_tensor, output_kind, torch_module

MASK = "attention_mask"


class SetAside(NamedTuple):
    """The batch to pad without the masks, the keys to pad (None: every key), and the masks."""

    features: Any
    keys: list[str] | None
    masks: list[Any]


def set_aside_masks(features: Any, keys: list[str] | None = None) -> SetAside | None:
    """The masks taken out of a list of rows or a mapping of lists, as tokenizer.pad takes
    them; None when the first row's mask is not an array of two or more dimensions. The
    caller's rows are left as they are: list rows are padded with `keys` that leave the mask
    out, a mapping is copied without it."""
    if isinstance(features, (list, tuple)):
        first = features[0] if features else None
        if type(first) is not dict and not isinstance(first, Mapping):
            return None
        mask = first.get(MASK)
        # A list mask (the usual row) has no dimensions to ask for: settled without getattr.
        if mask is None or type(mask) is list or getattr(mask, "ndim", 0) <= 1:
            return None
        masks = []
        for index, row in enumerate(features):
            if not isinstance(row, Mapping) or MASK not in row:
                raise ValueError(
                    f"row {index} has no key '{MASK}', which the first row has (as an array of "
                    f"{first[MASK].ndim} dimensions); every row of a batch needs the same keys"
                )
            masks.append(row[MASK])
        names = [key for key in (first if keys is None else keys) if key != MASK]
        return SetAside(features, names, masks)
    if isinstance(features, Mapping) and MASK in features:
        masks = features[MASK]
        # As in transformers: only a list of masks is looked into.
        if not isinstance(masks, list) or not masks or getattr(masks[0], "ndim", 0) <= 1:
            return None
        rest = {key: features[key] for key in features if key != MASK}
        return SetAside(rest, keys, masks)
    return None


def put_back(batch: dict[str, Any], aside: SetAside, return_tensors: str | None) -> None:
    """Puts the set-aside masks into the padded batch, stacked and converted as transformers
    does: in place of a mask the padding created, else last."""
    batch[MASK] = _as_requested(_stacked(aside.masks), return_tensors)


def _stacked(masks: list[Any]) -> Any:
    """The masks as transformers stacks them; a ValueError when their shapes differ."""
    sample = masks[0]
    try:
        if is_torch_tensor(sample):
            return torch_module().stack(masks)
        if isinstance(sample, np.ndarray):
            return np.stack(masks)
        return np.array(masks)
    except (ValueError, TypeError, RuntimeError) as err:
        raise ValueError(
            f"cannot stack the rows' '{MASK}' arrays (masks of two or more dimensions are "
            f"stacked as they are, not padded): {err}"
        ) from err


def _as_requested(mask: Any, return_tensors: str | None) -> Any:
    """The stacked masks converted as `BatchEncoding(..., tensor_type=return_tensors)` converts
    a value: a torch / numpy value of the requested kind is kept, anything else is converted
    (`torch.tensor`, `np.asarray`)."""
    try:
        if return_tensors == "pt":
            torch = torch_module()
            return mask if torch.is_tensor(mask) else torch.tensor(mask)
        if return_tensors == "np":
            return mask if isinstance(mask, np.ndarray) else np.asarray(mask)
    except (ValueError, TypeError, RuntimeError) as err:
        raise ValueError(f"cannot make {output_kind(return_tensors)} of '{MASK}': {err}") from err
    return mask
