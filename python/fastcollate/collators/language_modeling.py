"""`DataCollatorForLanguageModeling`: padding on the Rust core, and masking either on the Rust
core (the default, `mask_rng="native"`) or with transformers' own masking methods and random
streams (`mask_rng="torch"`, for masks identical to transformers' under the same seed)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .. import _native
from .._internal.patching import original
from .._internal.tensors import is_torch_tensor, torch_module
from .._internal.upstream import LANGUAGE_MODELING_WHOLE_WORD_MASK, LANGUAGE_MODELING_WORD_IDS
from .._internal.worker_handover import hands_over
from ..arrow import ArrowBatch
from .base import TakesArrowBatches, framework
from .masking import (
    NativeMasking,
    asks_tokenizer_per_row,
    base_special_tokens_mask,
    to_numpy,
    worker_id,
)
from .padding_options import check_pad_to_multiple_of, check_tokenizer, clamped_multiple
from .tokenizer_pad import pad

MASK_RNGS = ("native", "torch")


def _transformers_collator() -> Any:
    """transformers' own DataCollatorForLanguageModeling, also while `patch_transformers()` has
    put fastcollate's class in its place."""
    try:
        return original("transformers.data.data_collator", "DataCollatorForLanguageModeling")
    except ImportError as err:
        raise ImportError(
            "mask_rng='torch' masks with transformers' own code, so it needs transformers "
            "installed (pip install transformers); the default mask_rng='native' does not"
        ) from err


def _no_pad_token_error(tokenizer: Any) -> ValueError:
    return ValueError(
        "You are attempting to pad samples but the tokenizer you are using"
        f" ({tokenizer.__class__.__name__}) does not have a pad token."
    )


def _collate_sequences(examples: list[Any], tokenizer: Any, pad_to_multiple_of: int | None,
                       return_tensors: str) -> Any:
    """transformers' `_torch_collate_batch` / `_numpy_collate_batch` for rows that are bare
    sequences of ids: padded to the longest (rounded up to `pad_to_multiple_of`) with the pad
    token on the tokenizer's padding side. Lists become int64; numpy / torch rows keep the
    first row's dtype (torch rows: also numpy rows under "pt" become int64, as there)."""
    first = examples[0]
    pt = return_tensors == "pt"
    as_int64 = isinstance(first, (list, tuple)) or (pt and isinstance(first, np.ndarray))
    try:
        lengths = [len(example) for example in examples]
    except TypeError as err:
        raise TypeError(
            "each example must be a mapping or a sequence of token ids; "
            f"got a {type(first).__name__} ({err})"
        ) from err
    check_pad_to_multiple_of(pad_to_multiple_of)
    pad_to_multiple_of = clamped_multiple(pad_to_multiple_of)
    needs_padding = any(length != lengths[0] for length in lengths) or (
        pad_to_multiple_of is not None and lengths[0] % pad_to_multiple_of != 0
    )
    if needs_padding and tokenizer.pad_token is None:
        raise _no_pad_token_error(tokenizer)
    pad_id = tokenizer.pad_token_id if needs_padding else 0
    group = _native.PadGroup(
        "input_ids",
        pad_value=pad_id,
        strategy="longest" if needs_padding else "do_not_pad",
        pad_to_multiple_of=pad_to_multiple_of,
        left=tokenizer.padding_side != "right",
    )
    native = _native.collate(
        {"input_ids": examples},
        [group],
        float32=False,
        dtypes={"input_ids": "int64"} if as_int64 else None,
    )
    input_ids = native["input_ids"]
    if not isinstance(input_ids, np.ndarray):
        raise TypeError("'input_ids' holds values that are not numbers")
    if pt:
        torch = torch_module()
        tensor = torch.from_numpy(input_ids)
        if is_torch_tensor(first) and tensor.dtype != first.dtype:
            tensor = _exact_cast(tensor, first.dtype, tensor.to)
        return tensor
    if not as_int64:
        dtype = first.dtype if isinstance(first, np.ndarray) else to_numpy(first[:0]).dtype
        if not needs_padding:
            # Equal lengths are stacked (np.stack), which promotes over every row.
            dtype = np.result_type(*(to_numpy(example).dtype for example in examples))
        if input_ids.dtype != dtype:
            input_ids = _exact_cast(input_ids, dtype, input_ids.astype)
    return input_ids


def _exact_cast(values: Any, dtype: Any, cast: Any) -> Any:
    """`cast(dtype)` of the padded ids (the first row's dtype, as transformers keeps it), or a
    ValueError where that would change a value (transformers wraps them around silently) or
    could not hold the -100 of the labels."""
    name = str(dtype).removeprefix("torch.")
    if name.startswith("uint") or name == "bool":
        raise ValueError(
            f"'input_ids' rows are {name}, which cannot hold the -100 of language-modeling "
            "labels; use a signed integer dtype"
        )
    converted = cast(dtype)
    back = converted.to(values.dtype) if is_torch_tensor(values) else converted.astype(values.dtype)
    same = (back == values) | (back != back) & (values != values)
    if not bool(same.all()):
        raise ValueError(
            f"'input_ids' holds values that the first row's dtype ({name}) cannot hold; give "
            "every row the same dtype"
        )
    return converted


@dataclass
class DataCollatorForLanguageModeling(TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForLanguageModeling`, plus
    `mask_rng`. Padding runs on the Rust core. With mlm=True:

    - `mask_rng="native"` (the default) masks on the Rust core, in place (attached: the
      batch is a numpy array Python could resize, so the interpreter is not released over
      it): each maskable token (not a special token or padding) is selected
      with probability `mlm_probability` (with `whole_word_mask`, each word, from
      `offset_mapping`, by transformers' word-boundary rule); a selected token becomes the mask
      token with probability `mask_replace_prob`, a random id uniform over `len(tokenizer)` with
      probability `random_replace_prob`, else stays; labels are the original id where selected
      and -100 elsewhere. These are transformers' distributions, drawn from fastcollate's own
      generator (xoshiro256++), so masks are not transformers' bit for bit. With `seed=`, a
      batch's masks are a pure function of (seed, epoch, DataLoader worker id, batch number
      within the epoch in that worker): different every epoch, the same run to run. The epoch
      is the one given to `set_epoch(epoch)` (`fastcollate.Trainer` calls it at each epoch;
      DataLoader workers see it, persistent or not, fork or spawn); without it, each
      `iter(loader)` counts as an epoch in DataLoader workers that the loader restarts every
      epoch, and a process that is never told an epoch (the main process, persistent workers)
      counts its batches on across epochs. Without `seed=`, each batch takes one 64-bit seed
      from torch's global generator (numpy's for return_tensors="np"), so `torch.manual_seed`
      / `transformers.set_seed` make runs reproducible and DataLoader workers differ.
    - `mask_rng="torch"` masks with transformers' own masking methods and random streams
      (`seed=` or the global torch / numpy generators): the same masks as transformers' collator
      under the same seed. Needs transformers installed.

    Subclasses that override `torch_mask_tokens` / `numpy_mask_tokens` have them called.

    Unlike transformers, bare torch-tensor rows are padded under return_tensors="np"
    (transformers raises there)."""

    tokenizer: Any
    mlm: bool = True
    whole_word_mask: bool = False
    mlm_probability: float | None = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"
    seed: int | None = None
    mask_rng: str = "native"

    def __post_init__(self) -> None:
        # Bad options raise here; those a call also checks, by the same rules, in its order.
        framework(self.return_tensors)
        check_tokenizer(self.tokenizer, "DataCollatorForLanguageModeling")
        check_pad_to_multiple_of(self.pad_to_multiple_of)
        if self.mask_rng not in MASK_RNGS:
            raise ValueError(f"mask_rng must be 'native' or 'torch', not {self.mask_rng!r}")
        if self.mask_rng == "torch":
            _transformers_collator()
        if self.mlm:
            if self.tokenizer.mask_token is None:
                raise ValueError(
                    "This tokenizer does not have a mask token which is necessary for masked "
                    "language modeling. You should pass `mlm=False` to train on causal language "
                    "modeling instead."
                )
            if self.mlm_probability is None or not 0 <= self.mlm_probability <= 1:
                raise ValueError("mlm_probability should be between 0 and 1.")
            self.mlm_probability = float(self.mlm_probability)
        elif self.whole_word_mask:
            raise ValueError(
                "Whole word masking can only be used with mlm=True."
                "If you want to use whole word masking, please set mlm=True."
            )
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError(
                "The sum of mask_replace_prob and random_replace_prob should not exceed 1"
            )
        if not 0 <= self.mask_replace_prob <= 1:
            raise ValueError("mask_replace_prob should be between 0 and 1.")
        if not 0 <= self.random_replace_prob <= 1:
            raise ValueError("random_replace_prob should be between 0 and 1.")
        if self.whole_word_mask:
            if not getattr(self.tokenizer, "is_fast", False):
                warnings.warn(
                    "Whole word masking depends on offset mapping which is only natively "
                    "available with fast tokenizers.",
                    UserWarning,
                    stacklevel=2,
                )
            if self.mask_replace_prob < 1:
                warnings.warn(
                    "Random token replacement is not supported with whole word masking. "
                    "Setting mask_replace_prob to 1.",
                    stacklevel=2,
                )
                self.mask_replace_prob = 1
                self.random_replace_prob = 0
        self.mask_replace_prob = float(self.mask_replace_prob)
        self.random_replace_prob = float(self.random_replace_prob)
        self.generator: Any = None  # mask_rng="torch" with seed=: transformers' generator
        self._generator_pid: int | None = None  # the process that made it
        self._masking = NativeMasking()  # mask_rng="native": ids and batch counter

    _batch_methods = ("__call__", "torch_call", "numpy_call", "_collate")

    def set_epoch(self, epoch: int) -> None:
        """Keys the native masks of the batches that follow by `epoch` (with `seed=`): each
        epoch's masks differ, and each process's batch count restarts. DataLoader workers,
        persistent ones included, read the epoch from memory they share with this process, so
        call it before iterating the epoch's DataLoader. mask_rng="torch" masks keep
        transformers' random streams, which know no epochs."""
        self._masking.set_epoch(epoch)

    @hands_over
    def __call__(self, features: Any, return_tensors: str | None = None) -> Any:
        if return_tensors is None:
            return_tensors = self.return_tensors
        if framework(return_tensors) == "pt":
            return self.torch_call(features)
        return self.numpy_call(features)

    def get_generator(self, seed: int, return_tensors: str | None = None) -> Any:
        """transformers' generator for mask_rng="torch": torch's for "pt", numpy's for "np"."""
        if (return_tensors or self.return_tensors) == "pt":
            return torch_module().Generator().manual_seed(seed)
        return np.random.default_rng(seed)

    def create_rng(self, return_tensors: str | None = None) -> None:
        """mask_rng="torch": transformers' generator (seed + worker id in a DataLoader worker)."""
        # Called only with a seed (mask_rng="torch" and seed=), as transformers calls it.
        self.generator = self.get_generator(cast(int, self.seed) + worker_id(), return_tensors)
        self._generator_pid = os.getpid()

    def _torch_generator_for(self, return_tensors: str) -> None:
        """As transformers 5.24 does: a generator of the kind the call masks with, made again
        in a new process (a forked DataLoader worker gets its own stream, seed + worker id,
        even when the parent had made one)."""
        wanted = torch_module().Generator if return_tensors == "pt" else np.random.Generator
        if not isinstance(self.generator, wanted) or self._generator_pid != os.getpid():
            self.create_rng(return_tensors)

    def _collate(self, examples: Any, return_tensors: str) -> tuple[Any, Any, Any]:
        check_tokenizer(self.tokenizer, "DataCollatorForLanguageModeling")
        if self.mask_rng == "torch" and self.seed is not None:
            self._torch_generator_for(return_tensors)
        if isinstance(examples, Mapping):
            raise TypeError("a collator takes a list of rows, not a mapping")
        arrow = isinstance(examples, ArrowBatch)
        if not isinstance(examples, (list, tuple)) and not arrow:
            examples = list(examples)
        if not len(examples):
            raise ValueError("cannot collate an empty batch: no rows were given")
        # An ArrowBatch's rows are mappings; pad() reads them from Arrow.
        if arrow or isinstance(examples[0], Mapping):
            batch = pad(
                examples,
                self.tokenizer,
                return_tensors=return_tensors,
                pad_to_multiple_of=self.pad_to_multiple_of,
            )
        else:
            batch = {
                "input_ids": _collate_sequences(
                    examples, self.tokenizer, self.pad_to_multiple_of, return_tensors
                )
            }
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        offset_mapping = batch.pop("offset_mapping", None)
        if self.mlm and special_tokens_mask is None and self.mask_rng == "torch":
            # transformers would ask the tokenizer row by row; the same mask, at once.
            special_tokens_mask = self._special_tokens_mask(batch["input_ids"])
        return batch, special_tokens_mask, offset_mapping

    def torch_call(self, examples: Any) -> Any:
        """Pads `examples` and masks (or, with mlm=False, copies) the labels as torch tensors."""
        batch, special_tokens_mask, offset_mapping = self._collate(examples, "pt")
        if self.mlm:
            batch["input_ids"], batch["labels"] = self.torch_mask_tokens(
                batch["input_ids"],
                special_tokens_mask=special_tokens_mask,
                offset_mapping=offset_mapping,
            )
        else:
            labels = batch["input_ids"].clone()
            if self.tokenizer.pad_token_id is not None:
                labels[labels == self.tokenizer.pad_token_id] = -100
            batch["labels"] = labels
        return batch

    def numpy_call(self, examples: Any) -> Any:
        """Pads `examples` and masks (or, with mlm=False, copies) the labels as numpy arrays."""
        batch, special_tokens_mask, offset_mapping = self._collate(examples, "np")
        if self.mlm:
            batch["input_ids"], batch["labels"] = self.numpy_mask_tokens(
                batch["input_ids"],
                special_tokens_mask=special_tokens_mask,
                offset_mapping=offset_mapping,
            )
        else:
            labels = np.copy(batch["input_ids"])
            if self.tokenizer.pad_token_id is not None:
                labels[labels == self.tokenizer.pad_token_id] = -100
            batch["labels"] = labels
        return batch

    def _special_tokens_mask(self, input_ids: Any) -> Any:
        """The mask `tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)`
        gives for every row (membership in `all_special_ids`), computed in one vectorized
        step. None (masking then asks the tokenizer row by row) when the tokenizer has its own
        get_special_tokens_mask or the ids are not integers."""
        if base_special_tokens_mask() is None or asks_tokenizer_per_row(self.tokenizer):
            return None
        special_ids = sorted({int(i) for i in self.tokenizer.all_special_ids if i is not None})
        if isinstance(input_ids, np.ndarray):
            if input_ids.dtype.kind not in "iu":
                return None
            return np.isin(input_ids, np.array(special_ids, dtype=np.int64)).astype(np.int64)
        torch = torch_module()
        if input_ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            return None
        ids = torch.tensor(special_ids, dtype=torch.int64)
        return torch.isin(input_ids.to(torch.int64), ids).to(torch.int64)

    def torch_mask_tokens(self, inputs: Any, special_tokens_mask: Any = None,
                          offset_mapping: Any = None) -> tuple[Any, Any]:
        """Masked-LM inputs and labels from a padded tensor of ids (modified in place)."""
        if self.mask_rng == "torch":
            return cast(tuple[Any, Any], _transformers_collator().torch_mask_tokens(
                self, inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping
            ))
        torch = torch_module()
        in_place = (
            inputs.dtype == torch.int64 and inputs.device.type == "cpu" and inputs.is_contiguous()
        )
        # Otherwise masked in an int64 copy, written back below.
        ids = (inputs if in_place else inputs.detach().to("cpu", torch.int64).contiguous()).numpy()
        labels = torch.from_numpy(
            self._mask_natively(ids, special_tokens_mask, offset_mapping, "pt")
        )
        if not in_place:
            inputs.copy_(torch.from_numpy(ids))
            labels = labels.to(device=inputs.device, dtype=inputs.dtype)
        return inputs, labels

    def numpy_mask_tokens(self, inputs: Any, special_tokens_mask: Any = None,
                          offset_mapping: Any = None) -> tuple[Any, Any]:
        """Masked-LM inputs and labels from a padded array of ids (modified in place)."""
        if self.mask_rng == "torch":
            return cast(tuple[Any, Any], _transformers_collator().numpy_mask_tokens(
                self, inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping
            ))
        inputs = np.asarray(inputs)
        in_place = inputs.dtype == np.int64 and inputs.flags.c_contiguous and inputs.flags.writeable
        ids = inputs if in_place else inputs.astype(np.int64, order="C")
        labels = self._mask_natively(ids, special_tokens_mask, offset_mapping, "np")
        if not in_place:
            inputs[...] = ids
            labels = labels.astype(inputs.dtype)
        return inputs, labels

    def _mask_natively(self, ids: np.ndarray, special_tokens_mask: Any, offset_mapping: Any,
                       framework: str) -> Any:
        """Masks `ids` (int64, C-contiguous) in place on the Rust core; returns the labels."""
        return self._masking.mask(
            ids,
            self.tokenizer,
            seed=self.seed,
            framework=framework,
            # A float once __post_init__ checked it (with mlm); unchecked, the native call raises.
            mlm_probability=cast(float, self.mlm_probability),
            mask_replace_prob=self.mask_replace_prob,
            random_replace_prob=self.random_replace_prob,
            special_tokens_mask=special_tokens_mask,
            whole_word_mask=self.whole_word_mask,
            offset_mapping=offset_mapping,
        )

    # transformers' masking methods (mask_rng="torch") call these on the collator (their names:
    # `_internal.upstream`).
    @staticmethod
    def _calc_word_ids_and_prob_mask(offsets: Any, special_tokens_mask: Any) -> Any:
        word_ids = getattr(_transformers_collator(), LANGUAGE_MODELING_WORD_IDS)
        return word_ids(offsets, special_tokens_mask)

    @staticmethod
    def _whole_word_mask(word_ids: Any, mask: Any) -> Any:
        return getattr(_transformers_collator(), LANGUAGE_MODELING_WHOLE_WORD_MASK)(word_ids, mask)
