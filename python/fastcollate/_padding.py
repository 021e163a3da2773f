"""`pad()`: the drop-in for `tokenizer.pad()`, on the Rust core."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._arrow import ArrowBatch, collate
from ._rows import first_row, missing_main_input
from ._tensors import batch_encoding, check_return_tensors, convert, is_torch_tensor

# transformers' PreTrainedTokenizerBase defaults, used when no tokenizer is given.
DEFAULT_MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
# transformers treats a model_max_length above this as "no limit" (tokenization_utils_base).
LARGE_INTEGER = int(1e20)
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")


class PadSettings(NamedTuple):
    """What padding needs to know about the tokenizer (or the keyword arguments standing in).
    Immutable; a NamedTuple because it is made on every call, in a third of a frozen
    dataclass's time."""

    pad_token_id: int | None
    pad_token_type_id: int
    padding_side: str
    model_input_names: tuple[str, ...]
    model_max_length: int

    @classmethod
    def resolve(
        cls,
        tokenizer: Any = None,
        *,
        pad_token_id: int | None = None,
        pad_token_type_id: int = 0,
        padding_side: str | None = None,
        model_input_names: Sequence[str] | None = None,
    ) -> PadSettings:
        if tokenizer is not None:
            if pad_token_id is None:
                # transformers refuses to pad when the pad token is unset or its id is negative.
                if getattr(tokenizer, "pad_token", None) is not None:
                    pad_token_id = tokenizer.pad_token_id
            pad_token_type_id = tokenizer.pad_token_type_id
            padding_side = padding_side if padding_side is not None else tokenizer.padding_side
            if model_input_names is None:
                model_input_names = tokenizer.model_input_names
            model_max_length = tokenizer.model_max_length
        else:
            model_max_length = LARGE_INTEGER + 1
        if padding_side is None:
            padding_side = "right"
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', not {padding_side!r}")
        names = tuple(model_input_names or DEFAULT_MODEL_INPUT_NAMES)
        if not names:
            raise ValueError("model_input_names must name at least the main input")
        return cls(pad_token_id, pad_token_type_id, padding_side, names, model_max_length)

    @property
    def main_input(self) -> str:
        return self.model_input_names[0]


def padding_strategy(padding: Any) -> str:
    """True/False/str/transformers.PaddingStrategy -> "longest" / "max_length" / "do_not_pad"."""
    if padding is True:
        return "longest"
    if padding is False or padding is None:
        return "do_not_pad"
    value = getattr(padding, "value", padding)
    if value not in PADDING_STRATEGIES:
        raise ValueError(
            f"{padding!r} is not a valid padding strategy; use True/'longest', 'max_length' or "
            "False/'do_not_pad'"
        )
    return value


def resolve_padding(
    settings: PadSettings, padding: Any, max_length: int | None
) -> tuple[str, int | None]:
    """The strategy and length transformers' `_get_padding_truncation_strategies` settles on,
    with its pad-token check."""
    strategy = padding_strategy(padding)
    if strategy == "max_length" and max_length is None:
        if settings.model_max_length > LARGE_INTEGER:
            strategy = "do_not_pad"
        else:
            max_length = settings.model_max_length
    if strategy != "do_not_pad" and (settings.pad_token_id is None or settings.pad_token_id < 0):
        raise ValueError(
            "Asking to pad but the tokenizer does not have a padding token. Please select a "
            "token to use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or "
            "add a new pad token via `tokenizer.add_special_tokens({'pad_token': '[PAD]'})` "
            "(or pass pad_token_id= to fastcollate.pad)."
        )
    if pad_to_multiple_of_invalid(max_length):
        raise ValueError(f"max_length must be a non-negative integer, not {max_length!r}")
    return strategy, max_length


def pad_to_multiple_of_invalid(value: Any) -> bool:
    return value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0
    )


def main_group(
    settings: PadSettings,
    strategy: str,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_attention_mask: bool | None,
) -> tuple:
    """The pad group `tokenizer._pad` applies: the main input, token_type_ids,
    special_tokens_mask and (when asked for) the attention mask."""
    if pad_to_multiple_of_invalid(pad_to_multiple_of) or pad_to_multiple_of == 0:
        raise ValueError(
            f"pad_to_multiple_of must be a positive integer, not {pad_to_multiple_of!r}"
        )
    if return_attention_mask is None:
        return_attention_mask = "attention_mask" in settings.model_input_names
    followers = [
        ("token_type_ids", settings.pad_token_type_id, True),
        ("special_tokens_mask", 1, True),
    ]
    return (
        settings.main_input,
        settings.pad_token_id if settings.pad_token_id is not None else 0,
        strategy,
        max_length,
        pad_to_multiple_of,
        settings.padding_side == "left",
        [f for f in followers if f[0] != settings.main_input],
        "attention_mask" if return_attention_mask else None,
    )


def _is_single_example(main_value: Any) -> bool:
    """transformers pads a mapping as one example when its main input is a flat sequence."""
    if isinstance(main_value, np.ndarray) or is_torch_tensor(main_value):
        return main_value.ndim == 1
    if isinstance(main_value, (list, tuple)):
        for item in main_value:
            if isinstance(item, (list, tuple)):
                if len(item):
                    return False
                continue
            if isinstance(item, np.ndarray) or is_torch_tensor(item):
                return item.ndim == 0
            return True
    return False


def _first_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and value:
        return value[0]
    return value


def _default_return_tensors(main_value: Any) -> str | None:
    """tokenizer.pad's default for numpy / torch inputs: return the same kind."""
    if isinstance(main_value, np.ndarray):
        return "np"
    if is_torch_tensor(main_value):
        return "pt"
    return None


def pad(
    encoded_inputs: Any,
    tokenizer: Any = None,
    *,
    padding: bool | str = True,
    max_length: int | None = None,
    pad_to_multiple_of: int | None = None,
    padding_side: str | None = None,
    return_attention_mask: bool | None = None,
    return_tensors: str | None = None,
    pad_token_id: int | None = None,
    pad_token_type_id: int = 0,
    model_input_names: Sequence[str] | None = None,
):
    """Pads a batch (list of mappings, or mapping of lists) or one example, like
    `tokenizer.pad(...)`, with the same result. See the README for what differs."""
    settings = PadSettings.resolve(
        tokenizer,
        pad_token_id=pad_token_id,
        pad_token_type_id=pad_token_type_id,
        padding_side=padding_side,
        model_input_names=model_input_names,
    )
    return_tensors = check_return_tensors(return_tensors)
    strategy, max_length = resolve_padding(settings, padding, max_length)
    group = main_group(settings, strategy, max_length, pad_to_multiple_of, return_attention_mask)
    main = settings.main_input

    single = False
    # Lists first: the common case, and the ABC checks below cost more than the rest of it.
    if isinstance(encoded_inputs, (list, tuple)):
        features = encoded_inputs
        first_main = first_row(encoded_inputs, main, "pad")[main]
    elif isinstance(encoded_inputs, ArrowBatch):
        # Rows still in Arrow storage: their Python rows hold lists, hence first_main = [].
        features, first_main = encoded_inputs.require(main), []
    elif isinstance(encoded_inputs, Mapping):
        if main not in encoded_inputs:
            raise missing_main_input(main, encoded_inputs.keys())
        main_value = encoded_inputs[main]
        single = _is_single_example(main_value)
        features: Any = (
            {key: [value] for key, value in encoded_inputs.items()} if single else encoded_inputs
        )
        first_main = main_value if single else _first_value(main_value)
    else:
        raise TypeError(
            "pad() takes a list of mappings, a mapping of lists or one example, not "
            f"{type(encoded_inputs).__name__}"
        )
    if return_tensors is None:
        return_tensors = _default_return_tensors(first_main)

    batch = collate(
        features,
        [group],
        float32=return_tensors == "pt",
        allow_ragged=return_tensors is None,
    )
    out = convert(batch, return_tensors)
    if single:
        out = {key: _unbatch(value) for key, value in out.items()}
    return batch_encoding(out)


def _unbatch(value: Any) -> Any:
    if isinstance(value, list):
        return value[0]
    return value.reshape(value.shape[1:])
