"""TRL's preference collators on the native padding call: DPO's `DataCollatorForPreference`,
the reward trainer's class of the same name (`RewardDataCollatorForPreference` here) and KTO's
`DataCollatorForUnpairedPreference`.

DPO and KTO read the prompt and completion columns of the rows in one native call
(`_native.pad_prompt_completion`) that joins, cuts and pads them and writes the attention and
completion masks, without building the joined lists; only when it refuses a batch are the
joined sequences built in Python, to name the bad row. The reward collator uses the same call
without a prompt.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
import torch
from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreferenceCollator
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpairedCollator
from trl.trainer.reward_trainer import DataCollatorForPreference as TRLRewardCollator

from .. import _native
from ..arrow import ArrowBatch
from ..collators.base import TakesArrowBatches
from .collator_options import PtOnly, checked_options, keeps_end
from .language_modeling import _row_dtype, _tensor
from .padding import padded_columns, padded_ids
from .preference_arrow import joined, padded_together, token_columns

_BOOLS = {bool}
_FLOATS = {float}
_LISTS = {list}
_DICTS = {dict}
_PAIRED = (("", "chosen_ids"), ("", "rejected_ids"))  # DPO's and the reward's completions
# KTO's completion columns, each with the prefix of its outputs.
_UNPAIRED_SETS = (("", "completion_ids"), ("KL_", "KL_completion_ids"))


def _rows(examples: Any) -> list[Any]:
    if isinstance(examples, (Mapping, str, bytes)):
        raise TypeError("a collator takes a list of rows (mappings of feature names to values)")
    rows = examples if isinstance(examples, list) else list(examples)
    if not rows:
        raise ValueError("cannot collate an empty batch: no rows were given")
    if set(map(type, rows)) == _DICTS:
        return rows  # the usual batch, without an ABC check per row
    for row, example in enumerate(rows):
        if not isinstance(example, Mapping):
            raise TypeError(f"row {row} is a {type(example).__name__}; rows must be mappings")
    return rows


def _column(rows: list[Any], key: str) -> list[Any]:
    """Every row's `key`; a missing one is a ValueError naming the row."""
    try:
        return [example[key] for example in rows]
    except KeyError:
        row = next(i for i, example in enumerate(rows) if key not in example)
        raise ValueError(f"row {row} has no '{key}'; every row needs it") from None


def _token_lists(rows: list[Any], key: str) -> list[Any]:
    """`key` of every row, which must be a list or tuple of token ids: TRL joins prompt and
    completion with `+`, which adds numpy arrays and tensors element by element instead."""
    values = _column(rows, key)
    for row, value in enumerate(values):
        if type(value) is not list and not isinstance(value, (list, tuple)):
            raise TypeError(
                f"'{key}' in row {row} is a {type(value).__name__}; it must be a list of token "
                "ids (TRL would add an array to the prompt element by element)"
            )
    return values


def _joined(prompts: list[Any], completions: list[Any]) -> list[Any]:
    return [
        prompt + completion if type(prompt) is type(completion) else [*prompt, *completion]
        for prompt, completion in zip(prompts, completions, strict=True)
    ]


def _scalars(rows: list[Any], key: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """One value per row as a tensor, as `torch.tensor` makes it (TRL's call)."""
    values = _column(rows, key)
    kinds = set(map(type, values))
    float_dtype = torch.get_default_dtype() if dtype is None else dtype
    if kinds == _FLOATS and float_dtype is torch.float32:
        # The reward margins, DPO's reference log-probabilities: array("f") rounds each double
        # to float32 as torch.tensor does (inf past float32's range), in a fifth of its time.
        return torch.frombuffer(array.array("f", values), dtype=torch.float32)
    if dtype is None and kinds == _BOOLS:
        # KTO's labels: the same bool tensor as torch.tensor's, a quarter of its time.
        return torch.from_numpy(np.array(values, dtype=np.bool_))
    try:
        return torch.tensor(values, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as error:
        for row, value in enumerate(values):
            if isinstance(value, (str, bytes)) or not (
                isinstance(value, (int, float, np.number, np.bool_))
                or (isinstance(value, torch.Tensor) and value.dim() == 0)
            ):
                raise TypeError(
                    f"'{key}' in row {row} is {value!r}; it must be a single number"
                ) from None
        raise TypeError(f"'{key}' cannot be made a tensor: {error}") from None


def _cut_join(prompt: Any, completion: Any, max_length: int, keep_end: bool) -> Any:
    """`(prompt + completion)[:max_length]` (or `[-max_length:]`), without building the whole
    join first."""
    if len(prompt) + len(completion) <= max_length:
        pass
    elif keep_end:
        if len(completion) >= max_length:
            return completion[len(completion) - max_length :]
        prompt = prompt[len(prompt) - (max_length - len(completion)) :]
    else:
        if len(prompt) >= max_length:
            return prompt[:max_length]
        completion = completion[: max_length - len(prompt)]
    return prompt + completion if type(prompt) is type(completion) else [*prompt, *completion]


def _prompt_and_completion(
    prompts: list[Any], completions: list[Any], max_length: int | None, keep_end: bool
) -> tuple[list[Any], np.ndarray]:
    """The joined sequences (cut to `max_length`) and, per sequence, the first column of its
    completion after the cut."""
    prompt_lengths = np.fromiter(map(len, prompts), dtype=np.int64, count=len(prompts))
    if max_length is None:
        return _joined(prompts, completions), prompt_lengths
    if keep_end:
        completion_lengths = np.fromiter(map(len, completions), np.int64, len(completions))
        dropped = np.maximum(prompt_lengths + completion_lengths - max_length, 0)
        prompt_lengths = np.maximum(prompt_lengths - dropped, 0)
    sequences = [
        _cut_join(prompt, completion, max_length, keep_end)
        for prompt, completion in zip(prompts, completions, strict=True)
    ]
    return sequences, prompt_lengths


def _completion_mask(attention_mask: np.ndarray, completion_starts: np.ndarray) -> np.ndarray:
    """1 from each row's completion start to the end of its tokens (read from the mask)."""
    completion = attention_mask.copy()
    for row, start in enumerate(completion_starts.tolist()):
        if start:
            completion[row, :start] = 0
    return cast(np.ndarray, completion)


def _padded_prompt_completion(
    rows: list[Any],
    prompt_key: str | None,
    completion_keys: list[str],
    together: bool,
    pad_token_id: int,
    multiple: int | None,
    max_length: int | None,
    keep_end: bool,
    report_bad_row: Any,
    completion_mask: bool = True,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """`(input_ids, attention_mask, completion_mask)` of `prompt_key` (None: no prompt) joined
    to each of `completion_keys` (padded together or one by one), in one native call; the
    completion mask is None (not written) unless `completion_mask`. If the
    call refuses the batch, `report_bad_row()` pads the joined sequences the slow way to raise
    an error that names the row; the native error is raised if it does not."""
    try:
        padded, _, _ = _native_read(
            rows,
            prompt_key,
            completion_keys,
            together,
            pad_token_id,
            multiple,
            max_length,
            keep_end,
            completion_mask,
            [],
        )
    except (TypeError, ValueError, OverflowError):
        report_bad_row()
        raise
    return padded


def _native_read(
    examples: list[Any],
    prompt_key: str | None,
    completion_keys: list[str],
    together: bool,
    pad_token_id: int,
    multiple: int | None,
    max_length: int | None,
    keep_end: bool,
    completion_mask: bool,
    scalars: list[tuple[str, str]],
) -> tuple[list[Any], list[np.ndarray | None], bool]:
    """The one native call of the preference collators: `(input_ids, attention_mask,
    completion_mask)` of `prompt_key` (None: no prompt) joined to each of `completion_keys`
    (padded together or one by one; the completion mask None unless `completion_mask`); each
    `(key, kind)` of `scalars` (kind "float32": exact floats, "bool": exact bools) read in the
    same call (None where the rows do not all hold such a value: the caller reads that column
    itself); and whether the strict route read the rows (every token value a list or tuple of
    ints: such a batch passes every check the caller would make, so none is made)."""
    *read, read_strictly = _native.pad_prompt_completion(
        examples,
        prompt_key,
        completion_keys,
        together=together,
        pad_id=pad_token_id,
        multiple=multiple,
        max_length=max_length,
        keep_end=keep_end,
        completion_mask=completion_mask,
        scalars=scalars,
    )
    split = len(read) - len(scalars)
    return read[:split], read[split:], read_strictly


def _scalar(
    rows: list[Any], key: str, read: np.ndarray | None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """`key`'s tensor: `read` (the column read with the tokens) when there is one, else read
    from the rows by `_scalars`."""
    return _scalars(rows, key, dtype) if read is None else torch.from_numpy(read)


def _first_dict(examples: Any) -> dict[str, Any] | None:
    """The first row of a non-empty list whose first row is a dict (the usual batch)."""
    if type(examples) is list and examples and type(examples[0]) is dict:
        return examples[0]
    return None


def _preference_from_rows(
    rows: list[Any],
    completions: list[Any],
    pad_token_id: int,
    multiple: int | None,
    max_length: int | None,
    keep_end: bool,
    padded: list[Any] | None = None,
) -> list[Any]:
    """DPO's padded matrices (`completions`: the chosen and rejected columns), every row
    checked (and a bad one named); `padded`, when given, the matrices the lax route made."""
    keys = (completions[0][1], completions[1][1])
    prompts = _token_lists(rows, "prompt_ids")
    chosen, rejected = (_token_lists(rows, key) for key in keys)
    if padded is not None:
        return padded

    def report_bad_row() -> None:
        chosen_sequences, _ = _prompt_and_completion(prompts, chosen, max_length, keep_end)
        rejected_sequences, _ = _prompt_and_completion(prompts, rejected, max_length, keep_end)
        _padded_pairs(
            chosen_sequences,
            rejected_sequences,
            keys,
            pad_token_id,
            multiple,
            prompt="prompt_ids",
        )

    return _padded_prompt_completion(
        rows,
        "prompt_ids",
        list(keys),
        True,
        pad_token_id,
        multiple,
        max_length,
        keep_end,
        report_bad_row,
    )


def _padded_pairs(
    first: list[Any],
    second: list[Any],
    keys: tuple[str, str],
    pad_token_id: int,
    multiple: int | None,
    prompt: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`first` then `second` padded together; a bad row is reported under the rows' own keys."""
    batch = len(first)

    def where(row: int) -> str:
        key = f"'{keys[row >= batch]}'"
        return (
            f"'{prompt}' + {key} in row {row % batch}" if prompt else f"{key} in row {row % batch}"
        )

    return padded_ids(first + second, pad_token_id, multiple, False, where)


def _reward_from_rows(
    rows: list[Any],
    completions: list[Any],
    pad_token_id: int,
    multiple: int | None,
    max_length: int | None,
    keep_end: bool,
    padded: list[Any] | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor, None]]:
    """The reward collator's `input_ids` and `attention_mask` (and no completion mask) of rows
    that are not all lists of ints: in the first chosen row's dtype, each row checked (and a
    bad one named). It has no `max_length`: `max_length` and `keep_end` are None and False."""
    keys = (completions[0][1], completions[1][1])
    chosen, rejected = (_column(rows, key) for key in keys)
    dtype = _row_dtype(chosen[0], keys[0], 0)
    if set(map(type, chosen)).union(map(type, rejected)) != _LISTS:
        for key, values in zip(keys, (chosen, rejected), strict=True):
            for row, value in enumerate(values):
                _row_dtype(value, key, row)
    ((input_ids, attention_mask, _),) = (
        padded
        if padded is not None
        else _padded_prompt_completion(
            rows,
            None,
            list(keys),
            True,
            pad_token_id,
            multiple,
            None,
            False,
            lambda: _padded_pairs(chosen, rejected, keys, pad_token_id, multiple),
            completion_mask=False,
        )
    )
    return [
        (
            _tensor(input_ids, dtype, "input_ids"),
            _tensor(attention_mask, dtype, "attention_mask"),
            None,
        )
    ]


def _unpaired_from_rows(
    rows: list[Any],
    sets: list[Any],
    pad_token_id: int,
    multiple: int | None,
    max_length: int | None,
    keep_end: bool,
    padded: list[Any] | None = None,
) -> list[Any]:
    """The padded matrices of KTO's `(prefix, key)` sets (those in the first row), every row
    checked (and a bad one named); `padded`, when given, the matrices the lax route made. KTO
    keeps the start: `keep_end` is False."""
    prompts = _token_lists(rows, "prompt_ids")
    keys = [key for _, key in sets]
    completions = [_token_lists(rows, key) for key in keys]
    if padded is not None:
        return padded

    def report_bad_row() -> None:
        columns = [
            _prompt_and_completion(prompts, values, max_length, False)[0] for values in completions
        ]
        padded_columns(
            columns,
            pad_token_id,
            multiple,
            False,
            lambda index, row: f"'prompt_ids' + '{keys[index]}' in row {row}",
        )

    if not sets:
        return []
    return _padded_prompt_completion(
        rows,
        "prompt_ids",
        keys,
        False,
        pad_token_id,
        multiple,
        max_length,
        False,
        report_bad_row,
    )


# --- the same batches read from Arrow (see preference_arrow); None: the rows decide ------------


def _preference_from_arrow(collator: Any, batch: ArrowBatch) -> dict[str, Any] | None:
    pad_token_id, multiple, max_length = checked_options(collator)
    keep_end = keeps_end(collator)
    scalars = [k for k in ("ref_chosen_logps", "ref_rejected_logps") if k in batch.columns]
    found = token_columns(batch, ["prompt_ids", "chosen_ids", "rejected_ids"], scalars)
    if found is None:
        return None
    parts, starts = [], []
    for key in ("chosen_ids", "rejected_ids"):
        values, lengths, completion_starts = joined(
            found["prompt_ids"], found[key], max_length, keep_end
        )
        parts.append((values, lengths))
        starts.append(completion_starts)
    input_ids, attention_mask = padded_together(parts, pad_token_id, multiple)
    output = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "completion_mask": torch.from_numpy(
            _completion_mask(attention_mask, np.concatenate(starts))
        ),
    }
    for key in scalars:
        output[key] = torch.tensor(found[key])
    return output


def _reward_from_arrow(collator: Any, batch: ArrowBatch) -> dict[str, Any] | None:
    pad_token_id, multiple, _ = checked_options(collator)
    scalars = ["margin"] if "margin" in batch.columns else []
    found = token_columns(batch, ["chosen_ids", "rejected_ids"], scalars)
    if found is None:
        return None
    input_ids, attention_mask = padded_together(
        [found["chosen_ids"], found["rejected_ids"]], pad_token_id, multiple
    )
    output = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
    }
    if scalars:
        output["margin"] = torch.tensor(found["margin"], dtype=torch.float)
    return output


def _unpaired_from_arrow(collator: Any, batch: ArrowBatch) -> dict[str, Any] | None:
    pad_token_id, multiple, max_length = checked_options(collator)
    sets = [(prefix, key) for prefix, key in _UNPAIRED_SETS if key in batch.columns]
    scalars = [k for k in ("ref_logps", "ref_KL_logps") if k in batch.columns] + ["label"]
    found = token_columns(batch, ["prompt_ids", *(key for _, key in sets)], scalars)
    if found is None:
        return None
    output: dict[str, Any] = {}
    for prefix, key in sets:
        values, lengths, starts = joined(found["prompt_ids"], found[key], max_length, False)
        input_ids, attention_mask = padded_together([(values, lengths)], pad_token_id, multiple)
        output[f"{prefix}input_ids"] = torch.from_numpy(input_ids)
        output[f"{prefix}attention_mask"] = torch.from_numpy(attention_mask)
        output[f"{prefix}completion_mask"] = torch.from_numpy(
            _completion_mask(attention_mask, starts)
        )
    for key in scalars:
        output[key] = torch.tensor(found[key])
    return output


# --- the collators: one shared torch_call, each driven by its layout ------------------------------


def _torch(matrix: np.ndarray | torch.Tensor) -> torch.Tensor:
    return matrix if isinstance(matrix, torch.Tensor) else torch.from_numpy(matrix)


@dataclass(frozen=True)
class _Scalar:
    """A per-row value a preference collator hands on as a 1-d tensor, as TRL's `torch.tensor`
    makes it."""

    key: str
    kind: str  # "float" or "bool": what the native call may read with the tokens
    dtype: torch.dtype | None = None  # None: torch.tensor's own choice (TRL passes none)
    required: bool = False  # in the output even when the first row lacks it (then an error)

    def native_kind(self) -> str | None:
        """The native call's kind for this column, or None where its values cannot be read
        there exactly as `torch.tensor` makes them (a float64 default dtype, an explicit
        dtype for bools)."""
        if self.kind == "bool":
            return "bool" if self.dtype is None else None
        dtype = torch.get_default_dtype() if self.dtype is None else self.dtype
        return "float32" if dtype is torch.float32 else None


@dataclass(frozen=True)
class _Layout:
    """What a preference collator reads and writes: the prompt column (None: no prompt), the
    completion columns with the prefix of their outputs, whether they are padded together into
    one matrix (every column needed; the outputs unprefixed) or one matrix each (those the
    first row has), whether a completion mask is written, whether the collator has TRL's
    `truncation_mode`, the per-row values that follow the matrices, and the two other ways a
    batch is read."""

    prompt: str | None
    completions: tuple[tuple[str, str], ...]
    together: bool
    completion_mask: bool
    truncation_mode: bool
    scalars: tuple[_Scalar, ...]
    # The padded matrices of a batch the strict route did not read, every row checked (a bad one
    # named): (rows, completions, pad_token_id, multiple, max_length, keep_end, padded), where
    # `padded` is what the lax route already made of the rows (None: pad them here).
    from_rows: Callable[
        [list[Any], list[Any], int, int | None, int | None, bool, list[Any] | None], list[Any]
    ]
    # The output read from an ArrowBatch, or None where the rows must decide.
    from_arrow: Callable[[Any, ArrowBatch], dict[str, Any] | None]

    def completions_in(self, first: Any) -> list[tuple[str, str]]:
        if self.together:
            return list(self.completions)
        return [pair for pair in self.completions if first is not None and pair[1] in first]

    def native_scalars(self, first: Any) -> list[tuple[str, str]]:
        """`(key, kind)` of the values the native call reads with the tokens."""
        return [
            (scalar.key, kind)
            for scalar in self.scalars
            if (kind := scalar.native_kind()) is not None
            and (scalar.required or (first is not None and scalar.key in first))
        ]


class _PreferenceTorchCall:
    """The `torch_call` of the three preference collators, driven by each one's `_layout`: an
    `ArrowBatch` read from Arrow where it can be (`from_arrow`); the usual batch (a list of
    dicts of token lists) read by the reader's strict route in one native call, the scalars
    with it; any other by its lax route in the same call, then checked row by row
    (`from_rows`, which names a bad row)."""

    _batch_methods: tuple[str, ...] = ("__call__", "torch_call")
    _layout: ClassVar[_Layout]

    def torch_call(self, examples: Any) -> dict[str, Any]:
        if isinstance(examples, ArrowBatch):
            from_arrow = self._layout.from_arrow(self, examples)
            if from_arrow is not None:
                return from_arrow
            examples = examples.rows()
        layout = self._layout
        pad_token_id, multiple, max_length = checked_options(self)
        keep_end = keeps_end(self) if layout.truncation_mode else False
        first = _first_dict(examples)
        completions = layout.completions_in(first)
        scalars = layout.native_scalars(first)
        # None when the call refuses the batch: the rows are then checked here, naming the
        # bad one.
        read = None
        if completions:
            try:
                read = _native_read(
                    examples,
                    layout.prompt,
                    [key for _, key in completions],
                    layout.together,
                    pad_token_id,
                    multiple,
                    max_length,
                    keep_end,
                    layout.completion_mask,
                    scalars,
                )
            except (TypeError, ValueError, OverflowError):
                pass
        if read and read[2]:
            rows = examples
            padded, values, _ = read
            columns = {key: value for (key, _), value in zip(scalars, values, strict=True)}
        else:
            # Read by the lax route (its matrices, checked here as the rows are), or refused
            # (None: the rows checked and padded here, which names the bad one).
            rows = _rows(examples)
            completions = layout.completions_in(rows[0])
            padded = layout.from_rows(
                rows,
                completions,
                pad_token_id,
                multiple,
                max_length,
                keep_end,
                read[0] if read else None,
            )
            columns = {}
        prefixes = [""] if layout.together else [prefix for prefix, _ in completions]
        output: dict[str, Any] = {}
        for prefix, (input_ids, attention_mask, completion_mask) in zip(
            prefixes, padded, strict=True
        ):
            output[f"{prefix}input_ids"] = _torch(input_ids)
            output[f"{prefix}attention_mask"] = _torch(attention_mask)
            if layout.completion_mask:
                output[f"{prefix}completion_mask"] = _torch(completion_mask)
        for scalar in layout.scalars:
            if scalar.required or scalar.key in rows[0]:
                output[scalar.key] = _scalar(
                    rows, scalar.key, columns.get(scalar.key), scalar.dtype
                )
        return output


@dataclass
class DataCollatorForPreference(
    _PreferenceTorchCall, TakesArrowBatches, PtOnly, TRLPreferenceCollator
):
    """Same arguments and output as `trl.trainer.dpo_trainer.DataCollatorForPreference` (TRL
    1.16), DPO's collator: `pad_token_id`, `max_length`, `truncation_mode` ("keep_start" or
    "keep_end"), `pad_to_multiple_of`, `return_tensors` ("pt" only, as in TRL).

    Rows hold `prompt_ids`, `chosen_ids`, `rejected_ids` (lists of token ids) and optionally
    `ref_chosen_logps` / `ref_rejected_logps`. Output: `input_ids` (prompt + chosen for every
    row, then prompt + rejected: 2 × batch rows, each truncated to `max_length` and padded right
    with `pad_token_id`), `attention_mask`, `completion_mask` (1 on completion tokens), all
    int64, then the reference log-probabilities as TRL's `torch.tensor` makes them.

    Unlike TRL: a numpy array or tensor among the ids is a TypeError (TRL's `+` would add it to
    the prompt element by element); an empty first sequence leaves `input_ids` int64 (TRL's
    `torch.tensor([])` makes the whole batch float32); `max_length` must be at least 1 (TRL's
    keep_end with 0 keeps everything); a missing key or a non-integer id is a ValueError /
    TypeError naming the key and row. The vision collator (`DataCollatorForVisionPreference`) is
    not replaced.

    Also takes an `ArrowBatch` (see `fastcollate.ArrowBatches`; `fastcollate.trl`'s trainers
    hand it one), whose token columns are read without Python rows.
    """

    _layout = _Layout(
        prompt="prompt_ids",
        completions=_PAIRED,
        together=True,
        completion_mask=True,
        truncation_mode=True,
        scalars=(_Scalar("ref_chosen_logps", "float"), _Scalar("ref_rejected_logps", "float")),
        from_rows=_preference_from_rows,
        from_arrow=_preference_from_arrow,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        keeps_end(self)


@dataclass
class RewardDataCollatorForPreference(
    _PreferenceTorchCall, TakesArrowBatches, PtOnly, TRLRewardCollator
):
    """Same arguments and output as `trl.trainer.reward_trainer.DataCollatorForPreference` (TRL
    1.16), the reward trainer's collator — a different class from DPO's of the same name, hence
    the name here: `pad_token_id`, `pad_to_multiple_of`, `return_tensors` ("pt" only).

    Rows hold `chosen_ids`, `rejected_ids` and optionally `margin`. Output: `input_ids` (every
    row's chosen sequence, then every rejected one, padded right), `attention_mask`, both in the
    first chosen row's dtype (Python lists: int64; numpy arrays and tensors keep theirs, as
    TRL's `torch.tensor` does), and `margin` (float32).

    Unlike TRL: an empty first sequence leaves the output int64 (TRL's `torch.tensor([])` makes
    it float32); a pad id the first row's dtype cannot hold, a non-integer id or a missing key is
    a ValueError / TypeError naming the key and row, where TRL wraps values around or fails deep
    in torch.

    Also takes an `ArrowBatch` (see `fastcollate.ArrowBatches`; `fastcollate.trl`'s trainers
    hand it one), whose token columns are read without Python rows.
    """

    # The margins: float32, as TRL makes them.
    _layout = _Layout(
        prompt=None,
        completions=_PAIRED,
        together=True,
        completion_mask=False,
        truncation_mode=False,
        scalars=(_Scalar("margin", "float", torch.float),),
        from_rows=_reward_from_rows,
        from_arrow=_reward_from_arrow,
    )


@dataclass
class DataCollatorForUnpairedPreference(
    _PreferenceTorchCall, TakesArrowBatches, PtOnly, TRLUnpairedCollator
):
    """Same arguments and output as `trl.trainer.kto_trainer.DataCollatorForUnpairedPreference`
    (TRL 1.16), KTO's collator: `pad_token_id`, `max_length` (keeps the start),
    `pad_to_multiple_of`, `return_tensors` ("pt" only).

    Rows hold `prompt_ids`, `completion_ids`, `label`, and optionally `KL_completion_ids`,
    `ref_logps`, `ref_KL_logps`. Output: `input_ids`, `attention_mask`, `completion_mask` (int64,
    padded right), the same three with a `KL_` prefix when the first row has
    `KL_completion_ids`, then `ref_logps`, `ref_KL_logps` and `label` as TRL's `torch.tensor`
    makes them.

    Unlike TRL: a numpy array or tensor among the ids is a TypeError (TRL's `+` would add it to
    the prompt element by element); `max_length` must be at least 1; a missing key or a
    non-integer id is a ValueError / TypeError naming the key and row. The vision collator is not
    replaced.

    Also takes an `ArrowBatch` (see `fastcollate.ArrowBatches`; `fastcollate.trl`'s trainers
    hand it one), whose token columns are read without Python rows.
    """

    # The labels are required, as in TRL; the reference log-probabilities are optional.
    _layout = _Layout(
        prompt="prompt_ids",
        completions=_UNPAIRED_SETS,
        together=False,
        completion_mask=True,
        truncation_mode=False,
        scalars=(
            _Scalar("ref_logps", "float"),
            _Scalar("ref_KL_logps", "float"),
            _Scalar("label", "bool", required=True),
        ),
        from_rows=_unpaired_from_rows,
        from_arrow=_unpaired_from_arrow,
    )
