"""Hostile inputs for every entry point, and the rules each call must keep.

`case(seed)` builds one call (entry point, batch, options) from a seed, deterministically.
`run(seed)` makes it with fastcollate and with transformers' counterpart and returns the
violations: an exception other than ValueError/TypeError that is not the very type transformers
raises (a pyo3 PanicException included), input changed by the call, an output that differs
from transformers' where both succeed, or options a collator refuses when made that its call
would refuse differently (another exception or message) or take.

`python -m tests.support.fuzz_cases` (from the repository root) is a worker: one seed per line
on stdin, one JSON result per line on stdout, so a crash (abort, segfault) shows as a dead
worker instead of a dead test process. Used by tests/collators/test_fuzz.py and
benches/soak_fuzz.py.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import sys
import warnings
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.trainer_pt_utils import get_length_grouped_indices  # noqa: E402

import fastcollate  # noqa: E402
from tests.support.bundled_model import model_dir  # noqa: E402
from tests.support.torch_modes import LIES, Lie, Move  # noqa: E402
from tests.support.transformers_releases import LEAVES_OUT_EMPTY_ROWS  # noqa: E402

try:  # TRL 1.16 needs Python >= 3.11: its entry point is fuzzed where it is installed.
    import trl.trainer.dpo_trainer as trl_dpo  # noqa: E402
    import trl.trainer.kto_trainer as trl_kto  # noqa: E402
    import trl.trainer.reward_trainer as trl_reward  # noqa: E402
    import trl.trainer.sft_trainer as trl_sft  # noqa: E402
    import trl.trainer.utils as trl_utils  # noqa: E402

    import fastcollate.trl  # noqa: E402
except ImportError:
    trl_sft = None

ENTRY_POINTS = (
    "pad",
    "pad_without_tokenizer",
    "DataCollatorWithPadding",
    "default_data_collator",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
    "DataCollatorWithFlattening",
    "DataCollatorForLanguageModeling",
    "DataCollatorForMultipleChoice",
    "get_length_grouped_indices",
) + (
    (
        "trl.DataCollatorForLanguageModeling",
        "trl.DataCollatorForPreference",
        "trl.RewardDataCollatorForPreference",
        "trl.DataCollatorForUnpairedPreference",
        "trl.pad",
        "trl.pad_with_mask",
    )
    if trl_sft is not None
    else ()
)
# The keys of token ids each TRL preference collator reads.
TRL_SEQUENCE_KEYS = {
    "trl.DataCollatorForPreference": ["prompt_ids", "chosen_ids", "rejected_ids"],
    "trl.RewardDataCollatorForPreference": ["chosen_ids", "rejected_ids"],
    "trl.DataCollatorForUnpairedPreference": ["prompt_ids", "completion_ids", "KL_completion_ids"],
}
TRL_SCALAR_KEYS = {
    "trl.DataCollatorForPreference": ["ref_chosen_logps", "ref_rejected_logps"],
    "trl.RewardDataCollatorForPreference": ["margin"],
    "trl.DataCollatorForUnpairedPreference": ["ref_logps", "ref_KL_logps", "label"],
}
ABSURD_INTS = [2**45, 2**62, 2**63 - 1, 2**63, 2**64, 2**100, -1, -(2**63), -(2**64)]
NUMPY_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", ">i4", ">i8", ">f8", "<i2", "object", "U3",
]  # fmt: skip
TORCH_DTYPES = [
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.bfloat16, torch.float32, torch.float64, torch.complex64,
]  # fmt: skip


class LazyRow(dict):
    """A dict subclass whose `__getitem__` transforms values (a lazy dataset row)."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        return [v + 1 for v in value] if isinstance(value, list) and value and all(
            type(v) is int for v in value
        ) else value


class Generator:
    def __init__(self, seed: int, batch_format: str | None = None):
        self.r = random.Random(seed)
        # Half the cases are well-formed but varied (formats, dtypes, shapes, options), so many
        # calls succeed on both sides and get compared; the rest are hostile throughout.
        self.hostile = self.r.random() < 0.5
        # Every batch's rows in this format (the draw is made all the same, so a seed's other
        # choices do not change).
        self.batch_format = batch_format

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def harm(self, p: float) -> bool:
        """A hostile choice, only in hostile cases."""
        return self.hostile and self.r.random() < p

    def length(self) -> int:
        return self.r.choice([0, 1, 2, 3, 5, 8]) if self.chance(0.9) else self.r.randint(9, 40)

    def ints(self, n: int) -> list[int]:
        return [self.r.randint(0, 30000) for _ in range(n)]

    def hostile_scalar(self) -> Any:
        return self.r.choice(
            [
                None, "a", b"b", 1.5, float("nan"), float("inf"), -float("inf"), True,
                2**63, -(2**63) - 1, 2**64, 2**53 + 1, -7, np.int64(5), np.float32(0.5),
                np.uint64(2**64 - 1), np.bool_(True), torch.tensor(3), torch.tensor(0.5),
                np.array(4), [1], (), {}, object(), 1 + 2j,
            ]
        )  # fmt: skip

    def numpy_sequence(self, n: int) -> np.ndarray:
        dtype = self.r.choice(NUMPY_DTYPES if self.hostile else NUMPY_DTYPES[:12])
        values = self.ints(n)
        if dtype == "object":
            array = np.array(values + [None] * self.chance(0.5), dtype=object)
        elif dtype == "U3":
            array = np.array([str(v)[:3] for v in values], dtype=dtype)
        elif dtype == "bool":
            array = np.array([v % 2 for v in values], dtype=bool)
        else:
            array = np.array(values, dtype="int64").astype(dtype)
            if np.dtype(dtype).kind == "f" and n and self.harm(0.3):
                array[self.r.randrange(n)] = self.r.choice([np.nan, np.inf])
        shape = self.r.random() if self.hostile else 0.16 + 0.84 * self.r.random()
        if shape < 0.08:
            array = np.array(array[0] if n else 0, dtype=array.dtype)  # 0-d
        elif shape < 0.16:
            array = np.stack([array, array])  # 2-d
        elif shape < 0.3:
            array = np.concatenate([array, array])[::2]  # non-contiguous
        elif shape < 0.38:
            array = array[::-1]
        if self.chance(0.3):
            array.flags.writeable = False
        return array

    def torch_sequence(self, n: int) -> torch.Tensor:
        dtype = self.r.choice(TORCH_DTYPES if self.hostile else TORCH_DTYPES[:-1])
        tensor = torch.tensor(self.ints(n), dtype=torch.int64).to(dtype)
        if dtype == torch.bool:
            tensor = torch.tensor([v % 2 == 0 for v in self.ints(n)])
        if dtype.is_floating_point and n and self.harm(0.3):
            tensor[self.r.randrange(n)] = float(self.r.choice(["nan", "inf"]))
        shape = self.r.random() if self.hostile else 0.2 + 0.8 * self.r.random()
        if shape < 0.06:
            tensor = tensor.to("meta")
        elif shape < 0.12 and dtype != torch.bool:
            tensor = tensor.to_sparse()
        elif shape < 0.2:
            tensor = tensor[0] if n else torch.tensor(0, dtype=dtype)  # 0-d
        elif shape < 0.28:
            tensor = torch.stack([tensor, tensor])  # 2-d
        elif shape < 0.36:
            tensor = torch.cat([tensor, tensor])[::2]  # non-contiguous
        elif shape < 0.42 and dtype.is_floating_point:
            tensor = tensor.requires_grad_()
        return tensor

    def sequence(self, fmt: str | None = None, n: int | None = None) -> Any:
        """A value for a padded key: mostly token ids in some format, sometimes hostile."""
        n = self.length() if n is None else n
        formats = ["list", "list", "tuple", "numpy", "torch"] + ["hostile"] * self.hostile
        fmt = fmt or self.r.choice(formats)
        if fmt == "list":
            values: list = self.ints(n)
            if n and self.harm(0.4):
                values[self.r.randrange(n)] = self.hostile_scalar()
            return values
        if fmt == "tuple":
            return tuple(self.ints(n))
        if fmt == "numpy":
            return self.numpy_sequence(n)
        if fmt == "torch":
            return self.torch_sequence(n)
        return self.hostile_scalar()

    def row(self, keys: list[str], fmt: str | None, lengths_from: str | None = None) -> Any:
        kind = self.r.random()
        if kind < 0.03 and self.hostile:
            return self.r.choice([None, 3, "row", [1, 2], (("input_ids", [1]),)])
        n = self.length()
        row: dict = {}
        for key in keys:
            if self.harm(0.08):
                continue  # missing key
            if key in ("label", "labels") and lengths_from is None and self.chance(0.6):
                row[key] = self.hostile_scalar() if self.harm(0.4) else self.r.choice([0, 1, 2.5])
            elif key in ("attention_mask", "token_type_ids", "labels") and self.chance(0.85):
                row[key] = self.sequence(None if self.harm(0.2) else fmt, n)
                if key == "attention_mask" and isinstance(row[key], list):
                    row[key] = [1] * n
            else:
                row[key] = self.sequence(None if self.harm(0.2) else fmt, n)
        if self.harm(0.15):
            row["extra"] = self.hostile_scalar()
        if kind < 0.08:
            return LazyRow(row)
        return row

    def batch(self, keys: list[str], lengths_from: str | None = None) -> Any:
        size = self.r.choice([1, 2, 3, 4, 7, 0 if self.hostile else 5]) if self.chance(0.95) else 20
        fmt = self.r.choice(["list", "numpy", "torch"] + [None] * self.hostile)
        fmt = self.batch_format or fmt
        rows = [self.row(keys, fmt, lengths_from) for _ in range(size)]
        container = self.r.random()
        if container < 0.05:
            return tuple(rows)
        if container < 0.08 and rows:
            array = np.empty(len(rows), dtype=object)
            array[:] = rows
            return array
        return rows

    def option_int(self, normal: list) -> Any:
        if not self.harm(0.5):
            return self.r.choice(normal)
        return self.r.choice(ABSURD_INTS + [3.5, "8", True, float("nan")])

    def padding_options(self) -> dict:
        options: dict = {}
        if self.chance(0.7):
            strategies = [True, False, "longest", "max_length", "do_not_pad"]
            options["padding"] = self.r.choice(strategies + ["bogus", None] * self.hostile)
        if self.chance(0.5):
            options["max_length"] = self.option_int([None, 0, 4, 8, 16, 64])
        if self.chance(0.4):
            options["pad_to_multiple_of"] = self.option_int([None, 1, 2, 8])
        return options


# The entry points whose rows are padded with a tokenizer's rules: keys from the first row,
# token ids (the main input) read as integers. (The LM collator's bare sequences excepted.)
TOKEN_ROW_ENTRIES = (
    "pad", "pad_without_tokenizer", "DataCollatorWithPadding",
    "DataCollatorForTokenClassification", "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling",
)


def make_case(seed: int, batch_format: str | None = None) -> tuple[str, Any, dict]:
    """(entry point, batch, options) for `seed` (rows in `batch_format` when given), sometimes
    with a float among a row's listed token ids or a key only a later row holds (drawn from
    a generator of their own, so the rest of a seed's case stays what it was)."""
    entry, batch, options = _make_case(seed, batch_format)
    r = random.Random(seed ^ 0x5EED)
    rows = [row for row in batch if isinstance(row, dict)] if isinstance(batch, list) else []
    if entry in TOKEN_ROW_ENTRIES and rows and r.random() < 0.1:
        row = r.choice(rows)
        if isinstance(row.get("input_ids"), list) and row["input_ids"]:
            ids = list(row["input_ids"])
            ids[r.randrange(len(ids))] = r.choice([2.5, 3.0, np.float32(4.0), np.float64(1.0)])
            row["input_ids"] = ids
    if entry in (*TOKEN_ROW_ENTRIES, "default_data_collator") and len(rows) > 1 and (
        r.random() < 0.1
    ):
        r.choice(rows[1:])["later"] = r.choice([1, [1, 2], 0.5])
    return entry, batch, options


def refused_by_rule(entry: str, batch: Any) -> str | None:
    """Why a call must fail for this batch whatever transformers does (docs/differences.md),
    or None: a float among a row's listed token ids, or a key that a later row holds and the
    first lacks."""
    if entry not in (*TOKEN_ROW_ENTRIES, "default_data_collator"):
        return None
    if isinstance(batch, (list, tuple)) and batch and all(isinstance(r, Mapping) for r in batch):
        rows = list(batch)
    elif isinstance(batch, Mapping) and entry == "pad":
        rows = [batch]  # one example
    else:
        return None
    for index, row in enumerate(rows[1:], 1):
        extra = [key for key in dict.keys(row) if key not in rows[0]]
        if extra:
            return f"row {index} holds '{extra[0]}', which row 0 lacks"
    if entry == "default_data_collator":
        return None
    for index, row in enumerate(rows):
        ids = dict.get(row, "input_ids")
        if isinstance(ids, (list, tuple)) and any(
            isinstance(v, (float, np.floating)) for v in ids
        ):
            return f"a float among the listed token ids of row {index}"
    return None


def _make_case(seed: int, batch_format: str | None = None) -> tuple[str, Any, dict]:
    g = Generator(seed, batch_format)
    entry = g.r.choice(ENTRY_POINTS)
    base = ["input_ids", "attention_mask"] + (["token_type_ids"] if g.chance(0.4) else [])
    if entry in ("pad", "pad_without_tokenizer", "DataCollatorWithPadding"):
        keys = base + (["label"] if g.chance(0.4) else [])
        options = g.padding_options()
        if g.chance(0.3):
            options["padding_side"] = g.r.choice([None, "left", "right", "middle"])
        if entry != "DataCollatorWithPadding":
            if g.chance(0.3):
                options["return_attention_mask"] = g.r.choice([None, True, False])
            options["return_tensors"] = g.r.choice([None, None, "pt", "np", "tf"])
        else:
            options["return_tensors"] = g.r.choice(["pt", "np"])
        if entry == "pad_without_tokenizer":
            options["pad_token_id"] = g.option_int([0, 1, None])
        batch = g.batch(keys)
        if entry == "pad" and g.chance(0.1) and isinstance(batch, list) and batch:
            batch = batch[0]  # one example
        return entry, batch, options
    if entry == "default_data_collator":
        keys = ["input_ids"] + g.r.choice([["label"], ["label_ids"], [], ["labels"]])
        batch = g.batch(keys)
        if isinstance(batch, list):
            # Equal lengths mostly: that is what the collator stacks.
            for row in batch:
                if isinstance(row, dict) and isinstance(row.get("input_ids"), list):
                    row["input_ids"] = row["input_ids"][:2] + [0] * (2 - len(row["input_ids"]))
        return entry, batch, {"return_tensors": g.r.choice(["pt", "np"])}
    if entry == "DataCollatorForTokenClassification":
        options = g.padding_options()
        options["return_tensors"] = g.r.choice(["pt", "np"])
        if g.chance(0.2):
            options["label_pad_token_id"] = g.option_int([-100, 0])
        return entry, g.batch(base + ["labels"], lengths_from="input_ids"), options
    if entry == "DataCollatorForSeq2Seq":
        options = g.padding_options()
        options["return_tensors"] = g.r.choice(["pt", "np"])
        if g.chance(0.2):
            options["label_pad_token_id"] = g.option_int([-100, 0])
        return entry, g.batch(base + ["labels"]), options
    if entry == "DataCollatorWithFlattening":
        options: dict = {"return_tensors": g.r.choice(["pt", "np"])}
        for name in ("return_flash_attn_kwargs", "return_seq_idx", "return_position_ids"):
            options[name] = g.chance(0.5)
        if g.chance(0.2):
            options["separator_id"] = g.option_int([-100, 0])
        if g.chance(0.2):
            options["position_ids_start"] = g.option_int([0, 1])
        keys = ["input_ids"] + (["labels"] if g.chance(0.5) else [])
        return entry, g.batch(keys, lengths_from="input_ids"), options
    if entry == "DataCollatorForLanguageModeling":
        options = {"mlm": False, "return_tensors": g.r.choice(["pt", "np"])}
        if g.chance(0.3):
            options["pad_to_multiple_of"] = g.option_int([None, 1, 8])
        if g.chance(0.15):
            # Bare sequences instead of mappings.
            return entry, [g.sequence() for _ in range(g.r.choice([1, 2, 3]))], options
        return entry, g.batch(["input_ids"]), options
    if entry == "trl.DataCollatorForLanguageModeling":
        options = {"pad_token_id": g.option_int([0, 1, 50])}
        for name in ("padding_free", "return_position_ids"):
            options[name] = g.chance(0.5)
        if g.chance(0.4):
            options["pad_to_multiple_of"] = g.option_int([None, 1, 8])
        keys = ["input_ids"] + (["labels"] if g.chance(0.5) else [])
        batch = g.batch(keys, lengths_from="input_ids")
        if g.chance(0.3):
            # Pre-packed rows: lengths that cover the row, or (hostile) that do not.
            for row in batch if isinstance(batch, list) else []:
                if isinstance(row, dict) and isinstance(row.get("input_ids"), list):
                    n = len(row["input_ids"])
                    cut = g.r.randint(0, n)
                    lengths = [cut, n - cut] if 0 < cut < n else [n]
                    row["seq_lengths"] = g.sequence() if g.harm(0.3) else lengths
        return entry, batch, options
    if entry in TRL_SEQUENCE_KEYS:
        return entry, trl_preference_batch(g, entry), trl_preference_options(g, entry)
    if entry in ("trl.pad", "trl.pad_with_mask"):
        fmt = "torch" if entry == "trl.pad" else "list"
        size = g.r.choice([1, 2, 3, 5, 0 if g.hostile else 4])
        batch = [g.sequence(None if g.harm(0.2) else fmt) for _ in range(size)]
        options = {"padding_value": g.option_int([0, 1, 50])}
        if g.chance(0.7):
            options["padding_side"] = g.r.choice(["left", "right"] + ["middle", None] * g.hostile)
        if g.chance(0.5):
            options["pad_to_multiple_of"] = g.option_int([None, 1, 8])
        return entry, batch, options
    if entry == "DataCollatorForMultipleChoice":
        options = g.padding_options()
        choices = 0 if g.harm(0.1) else g.r.choice([1, 2, 3])
        batch = []
        for _ in range(g.r.choice([0, 1, 2, 3])):
            fmt = g.r.choice(["list", "numpy", "torch"] + [None] * g.hostile)
            example = {
                key: [g.sequence(fmt) for _ in range(choices + g.harm(0.1))]
                for key in base
            }
            example["label"] = g.hostile_scalar() if g.harm(0.2) else g.r.choice([0, 1])
            batch.append(example)
        return entry, batch, options
    lengths = (
        [g.r.randint(0, 50) for _ in range(g.r.choice([0, 1, 3, 10, 40]))]
        if g.chance(0.8)
        else g.r.choice([[3, -1, 2], [1.5, 2], ["a"], None, np.array([1, 2], np.uint64)])
    )
    options = {
        "batch_size": g.option_int([1, 2, 4]),
        "mega_batch_mult": g.option_int([None, None, 1, 2]),
    }
    return entry, lengths, options


def trl_preference_batch(g: Generator, entry: str) -> Any:
    keys = TRL_SEQUENCE_KEYS[entry]
    if entry == "trl.DataCollatorForUnpairedPreference" and g.chance(0.5):
        keys = keys[:2]
    batch = g.batch(keys)
    scalars = [key for key in TRL_SCALAR_KEYS[entry] if key == "label" or g.chance(0.5)]
    for row in batch if isinstance(batch, list) else []:
        if isinstance(row, dict):
            for key in scalars:
                if not g.harm(0.08):
                    row[key] = g.hostile_scalar() if g.harm(0.3) else g.r.choice([0, 1, -2.5])
    return batch


def trl_preference_options(g: Generator, entry: str) -> dict:
    options: dict = {"pad_token_id": g.option_int([0, 1, 50])}
    if g.chance(0.4):
        options["pad_to_multiple_of"] = g.option_int([None, 1, 8])
    if entry != "trl.RewardDataCollatorForPreference" and g.chance(0.5):
        options["max_length"] = g.option_int([None, 1, 3, 8])
    if entry == "trl.DataCollatorForPreference" and g.chance(0.5):
        modes = ["keep_start", "keep_end"] + ["keep_middle"] * g.hostile
        options["truncation_mode"] = g.r.choice(modes)
    return options


def grpo_padding(sequences: Any, **options: Any) -> tuple:
    """TRL's GRPO trainer's padding of prompt or completion token lists."""
    tensors = [torch.tensor(row) for row in sequences]
    masks = [torch.ones_like(row, dtype=torch.long) for row in tensors]
    mask_options = {key: value for key, value in options.items() if key != "padding_value"}
    return trl_utils.pad(tensors, **options), trl_utils.pad(masks, 0, **mask_options)


TOKENIZERS: dict = {}


def tokenizer() -> Any:
    if "bert" not in TOKENIZERS:
        TOKENIZERS["bert"] = transformers.AutoTokenizer.from_pretrained(model_dir())
    return TOKENIZERS["bert"]


def calls(entry: str, batch: Any, options: dict) -> tuple:
    """(our call, transformers' call or None); each takes the batch."""
    tok = tokenizer()
    if entry == "pad":
        return (
            lambda b: fastcollate.pad(b, tok, **options),
            lambda b: tok.pad(b, **options),
        )
    if entry == "pad_without_tokenizer":
        return lambda b: fastcollate.pad(b, **options), None
    if entry == "default_data_collator":
        return (
            lambda b: fastcollate.default_data_collator(b, **options),
            lambda b: transformers.default_data_collator(b, **options),
        )
    if entry == "get_length_grouped_indices":

        def ours(lengths):
            return fastcollate.get_length_grouped_indices(
                lengths, generator=torch.Generator().manual_seed(1), **options
            )

        def theirs(lengths):
            return get_length_grouped_indices(
                lengths, generator=torch.Generator().manual_seed(1), **options
            )

        return ours, theirs
    if entry == "DataCollatorWithFlattening":
        return (
            fastcollate.DataCollatorWithFlattening(**options),
            transformers.DataCollatorWithFlattening(**options),
        )
    if entry == "trl.DataCollatorForLanguageModeling":
        return (
            fastcollate.trl.DataCollatorForLanguageModeling(**options),
            trl_sft.DataCollatorForLanguageModeling(**options),
        )
    if entry in TRL_SEQUENCE_KEYS:
        theirs_module = {
            "trl.DataCollatorForPreference": trl_dpo,
            "trl.RewardDataCollatorForPreference": trl_reward,
            "trl.DataCollatorForUnpairedPreference": trl_kto,
        }[entry]
        name = entry.removeprefix("trl.")
        theirs_cls = getattr(theirs_module, name.removeprefix("Reward"))
        return getattr(fastcollate.trl, name)(**options), theirs_cls(**options)
    if entry == "trl.pad":
        return (
            lambda b: fastcollate.trl.pad(b, **options),
            lambda b: trl_utils.pad(b, **options),
        )
    if entry == "trl.pad_with_mask":
        return (
            lambda b: fastcollate.trl.pad_with_mask(b, **options),
            lambda b: grpo_padding(b, **options),
        )
    ours_cls, theirs_cls = getattr(fastcollate, entry), getattr(transformers, entry)
    return ours_cls(tok, **options), theirs_cls(tok, **options)


# A batch every collator entry point takes with good options: a collator made with the fuzzed
# options on it must fail as its constructor did (the rules are the same functions).
GOOD_BATCHES = {
    "DataCollatorWithPadding": [{"input_ids": [101, 7, 102]}, {"input_ids": [101, 102]}],
    "DataCollatorForTokenClassification": [
        {"input_ids": [101, 7, 102], "labels": [1, 2, 3]},
        {"input_ids": [101, 102], "labels": [4, 5]},
    ],
    "DataCollatorForSeq2Seq": [
        {"input_ids": [101, 7, 102], "labels": [1, 2, 3]},
        {"input_ids": [101, 102], "labels": [4, 5]},
    ],
    "DataCollatorWithFlattening": [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}],
    "DataCollatorForLanguageModeling": [{"input_ids": [101, 7, 102]}, {"input_ids": [101, 102]}],
    "DataCollatorForMultipleChoice": [{"input_ids": [[101, 7, 102], [101, 102]], "label": 0}],
    "trl.DataCollatorForLanguageModeling": [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}],
    "trl.DataCollatorForPreference": [
        {"prompt_ids": [1, 2], "chosen_ids": [3], "rejected_ids": [4, 5]}
    ],
    "trl.RewardDataCollatorForPreference": [{"chosen_ids": [1, 2], "rejected_ids": [3]}],
    "trl.DataCollatorForUnpairedPreference": [
        {"prompt_ids": [1], "completion_ids": [2, 3], "label": True}
    ],
}


def our_collator(entry: str, options: dict) -> Any:
    if entry == "DataCollatorWithFlattening":
        return fastcollate.DataCollatorWithFlattening(**options)
    if entry.startswith("trl."):
        return getattr(fastcollate.trl, entry.removeprefix("trl."))(**options)
    return getattr(fastcollate, entry)(tokenizer(), **options)


def made_as_called(entry: str, options: dict) -> str | None:
    """When our collator refuses `options` as it is made: the violation if a collator made with
    good options and then given them does not fail with the same exception and message on a
    good batch; None otherwise (also when it was transformers' constructor that refused)."""
    if entry not in GOOD_BATCHES:
        return None
    try:
        our_collator(entry, options)
    except (ValueError, TypeError) as err:
        made = err
    else:
        return None
    collator = our_collator(entry, {"pad_token_id": 0} if entry.startswith("trl.") else {})
    if not all(hasattr(collator, name) for name in options):
        return None  # an argument the class does not take (a TypeError from Python itself)
    for name, value in options.items():
        setattr(collator, name, value)
    try:
        collator(copy.deepcopy(GOOD_BATCHES[entry]))
    except Exception as called:  # noqa: BLE001 - compared with the constructor's below
        if type(called) is type(made) and str(called) == str(made):
            return None
        return (
            f"made: {type(made).__name__}: {made}; called: {type(called).__name__}: {called}"
        )[:500]
    return f"refused when made ({made}) but the call takes the same options"[:500]


# --- comparing -------------------------------------------------------------------------------


def fingerprint(value: Any, depth: int = 0) -> Any:
    """Everything observable about an input, to detect a change made by a call."""
    if depth > 6:
        return "..."
    if isinstance(value, Mapping):
        return (type(value).__name__, [(k, fingerprint(dict.get(value, k) if isinstance(
            value, dict) else value[k], depth + 1)) for k in list(value.keys())])  # fmt: skip
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [fingerprint(v, depth + 1) for v in value])
    if isinstance(value, np.ndarray):
        body = (
            [fingerprint(v, depth + 1) for v in value.ravel().tolist()]
            if value.dtype == object
            else value.tobytes()
        )
        return ("nd", value.dtype.str, value.shape, value.strides, value.flags.writeable, body)
    if isinstance(value, torch.Tensor):
        meta = ("t", str(value.dtype), tuple(value.shape), str(value.device), value.layout)
        try:
            dense = value.detach().to_dense() if value.layout != torch.strided else value.detach()
            if dense.dtype == torch.bfloat16:
                dense = dense.view(torch.int16)
            return (*meta, dense.stride(), dense.contiguous().numpy().tobytes())
        except (RuntimeError, TypeError, NotImplementedError):
            return meta  # meta tensors hold no data
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return (type(value).__name__, repr(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number, np.bool_)) and not (
        isinstance(value, float) and math.isnan(value)
    )


def as_comparable(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and (value.is_meta or value.layout != torch.strided):
        return ("tensor", f"{value.dtype} {value.layout} {value.device}", np.zeros(value.shape))
    if isinstance(value, torch.Tensor):
        array = value.detach()
        if array.dtype == torch.bfloat16:
            array = array.float()
        return ("tensor", str(value.dtype), array.numpy())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value)
    return ("py", type(value).__name__, value)


def same_output(
    ours: Any, theirs: Any, loose: bool = False, copies: Mapping[int, Any] | None = None
) -> str | None:
    """None when equal (keys and order, container, values, shapes, dtypes), else how not.
    `loose`: Python numbers compare by value (return_tensors=None gives them in the batch's
    dtype, so True may come back as 1 and 0 as 0.0). `copies`: the memo of the deep copy
    `theirs` was computed from (id of an original -> its copy): a value passed through is the
    same when `theirs` holds the copy of what `ours` holds (a plain `object()` equals only
    itself)."""
    if copies is not None and copies.get(id(ours), ours) is theirs and theirs is not ours:
        return None
    if loose and _is_number(ours) and _is_number(theirs):
        return None if ours == theirs else f"{ours!r} != {theirs!r}"
    if type(ours) is not type(theirs):
        return f"container {type(ours).__name__} != {type(theirs).__name__}"
    if isinstance(theirs, Mapping):
        if list(ours.keys()) != list(theirs.keys()):
            return f"keys {list(ours.keys())} != {list(theirs.keys())}"
        for key in theirs:
            problem = same_output(ours[key], theirs[key], loose, copies)
            if problem:
                return f"{key}: {problem}"
        return None
    a, b = as_comparable(ours), as_comparable(theirs)
    if a[:2] != b[:2]:
        return f"{a[:2]} != {b[:2]}"
    if a[0] == "py":
        if isinstance(theirs, (list, tuple)) and len(ours) == len(theirs):
            for x, y in zip(ours, theirs, strict=True):
                problem = same_output(x, y, loose, copies)
                if problem:
                    return problem
            return None
        if isinstance(theirs, float) and isinstance(ours, float):
            return None if ours == theirs or (math.isnan(ours) and math.isnan(theirs)) else "!="
        return None if ours == theirs else f"{ours!r} != {theirs!r}"
    x, y = a[2], b[2]
    if x.shape != y.shape:
        return f"shape {x.shape} != {y.shape}"
    nan_ok = x.dtype.kind in "fc"
    return None if np.array_equal(x, y, equal_nan=nan_ok) else f"values {x} != {y}"


def _rows_of(batch: Any) -> list:
    if isinstance(batch, Mapping):
        return [batch]
    try:
        return [row for row in batch if isinstance(row, Mapping)]
    except TypeError:
        return []


def _values(batch: Any):
    for row in _rows_of(batch):
        for key in list(dict.keys(row)) if isinstance(row, dict) else list(row):
            yield key, dict.get(row, key) if isinstance(row, dict) else row[key]


PAD_GROUP = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")


def _is_empty(value: Any) -> bool:
    try:
        return len(value) == 0
    except TypeError:
        return False


def known_difference(entry: str, batch: Any, options: dict) -> str | None:
    """Why fastcollate's output may rightly differ from transformers' for this input (each a
    difference docs/differences.md lists), or None: outputs must then be identical."""
    rows = _rows_of(batch)
    single = type(batch) is LazyRow  # transformers reads a single example's values twice
    lazy_rows = any(type(row) is LazyRow for row in rows)
    if single or (lazy_rows and entry not in ("pad", "default_data_collator")):
        return "dict subclass: transformers reads some keys through .items(), bypassing __getitem__"
    if any(isinstance(value, tuple) for _, value in _values(batch)):
        return "tuples are read like lists"
    if any(isinstance(v, np.ndarray) and v.dtype == object for _, v in _values(batch)):
        return "object arrays: transformers turns them into nested lists first"
    sequence_keys = TRL_SEQUENCE_KEYS.get(entry, ["input_ids", "labels"]) if trl_sft else []
    if entry.startswith("trl.") and any(
        _is_empty(row.get(key)) for row in rows for key in sequence_keys
    ):
        return "an empty row: TRL's torch.tensor([]) is float32, which spreads to its batch"
    if (
        entry == "trl.pad_with_mask"
        and isinstance(batch, list)
        and any(_is_empty(row) for row in batch)
    ):
        return "an empty row: TRL's torch.tensor([]) is float32, which spreads to its batch"
    if entry.startswith("trl.") and any(
        isinstance(value, list) and any(isinstance(x, (bool, np.bool_)) for x in value)
        for value in (
            *(v for _, v in _values(batch)),
            *(batch if entry == "trl.pad_with_mask" else []),
        )
    ):
        return "a bool among token ids is read as 0/1 (TRL's dtype follows a row of bools)"
    if rows and all(_is_empty(row.get("input_ids")) for row in rows):
        return "an empty main input: transformers returns the input unchanged"
    if (
        entry == "DataCollatorWithFlattening"
        and not LEAVES_OUT_EMPTY_ROWS
        and any(_is_empty(row.get("input_ids")) for row in rows)
    ):
        return "an empty row flattened: fastcollate leaves it out as transformers 5.24 does"
    if entry == "DataCollatorForLanguageModeling" and any(
        isinstance(value, np.generic) for _, value in _values(batch)
    ):
        return "numpy scalars beside a tensor main input in the LM collator (dtype may differ)"
    values = [value for _, value in _values(batch)]
    if any(isinstance(v, torch.Tensor) for v in values) and any(
        isinstance(v, (str, bytes)) or (isinstance(v, list) and any(isinstance(x, str) for x in v))
        for v in values
    ):
        return "non-numeric values beside tensors: transformers first turns tensors to Python"
    main_is_list = bool(rows) and isinstance(rows[0].get("input_ids"), (list, tuple))
    if main_is_list and any(
        key in PAD_GROUP and (isinstance(v, (np.ndarray, np.generic, torch.Tensor)))
        for key, v in _values(batch)
    ):
        return "arrays in padded keys beside a list main input are padded as numbers"
    return None


def outcome(call, batch) -> tuple[Any, BaseException | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(batch), None
        except BaseException as err:  # noqa: BLE001 - PanicException is a BaseException
            if isinstance(err, KeyboardInterrupt):
                raise
            return None, err


def run(seed: int) -> dict:
    entry, batch, options = make_case(seed)
    result: dict = {"seed": seed, "entry": entry, "violations": []}
    try:
        ours_call, theirs_call = calls(entry, batch, options)
    except (ValueError, TypeError) as err:
        result["ours"] = result["theirs"] = f"constructor {type(err).__name__}"
        problem = made_as_called(entry, options)
        if problem:
            result["violations"].append(f"construction and call disagree: {problem}")
        return result
    except BaseException as err:  # noqa: BLE001
        result["violations"].append(f"constructor raised {type(err).__name__}: {err}")
        return result
    before = fingerprint(batch)
    ours, our_error = outcome(ours_call, batch)
    if fingerprint(batch) != before:
        result["violations"].append("input changed")
    theirs, their_error = (None, None)
    copies: dict[int, Any] = {}
    if theirs_call is not None:
        try:
            theirs_batch = copy.deepcopy(batch, copies)
        except Exception:  # noqa: BLE001 - an input deepcopy cannot take: compare nothing
            theirs_call = None
        else:
            theirs, their_error = outcome(theirs_call, theirs_batch)
    result["ours"] = "ok" if our_error is None else type(our_error).__name__
    if theirs_call is None:
        result["theirs"] = "n/a"
    else:
        result["theirs"] = "ok" if their_error is None else type(their_error).__name__
    refused = refused_by_rule(entry, batch)
    result["refused"] = refused
    if refused and our_error is None:
        result["violations"].append(f"accepted {refused}")
    if our_error is not None:
        # MemoryError: an output too large to allocate, named (the issue allows it).
        allowed = isinstance(our_error, (ValueError, TypeError, MemoryError)) or (
            their_error is not None and type(our_error) is type(their_error)
        )
        if not allowed or type(our_error).__name__ == "PanicException":
            result["violations"].append(f"raised {type(our_error).__name__}: {our_error}")
    elif theirs_call is not None and their_error is None:
        reason = known_difference(entry, batch, options)
        loose = "return_tensors" in options and options["return_tensors"] is None
        problem = None if reason else same_output(ours, theirs, loose, copies)
        result["compared"] = reason is None
        if problem:
            result["violations"].append(f"differs from transformers: {problem}"[:500])
    return result


# --- under torch function modes -----------------------------------------------------------


def hostile_mode(r: random.Random, batch: Any) -> Any:
    """A torch function mode that lies about one thing a tensor reports, or one that moves
    every tensor of `batch` to new memory (values kept) on each torch call."""
    if r.random() < 0.6:
        name = r.choice(sorted(LIES))
        return name, Lie(*LIES[name])
    how = r.choice(["resize", "set"])
    victims = [value for row in _rows_of(batch) if isinstance(row, Mapping)
               for value in row.values() if isinstance(value, torch.Tensor)]
    return f"move by {how}", Move(victims, how)


def run_under_mode(seed: int) -> dict:
    """The call `make_case(seed, "torch")` builds, made under `hostile_mode`: exactly what the
    same call gives outside the mode (the same output, or the same exception class), the
    input's values unchanged, and no crash."""
    entry, batch, options = make_case(seed, "torch")
    result: dict = {"seed": f"mode {seed}", "entry": entry, "violations": []}
    try:
        ours_call, _ = calls(entry, batch, options)
        outside_call, _ = calls(entry, batch, options)
    except (ValueError, TypeError):
        return result
    name, mode = hostile_mode(random.Random(seed), batch)
    result["mode"] = name
    copies: dict[int, Any] = {}
    try:
        outside_batch = copy.deepcopy(batch, copies)
    except Exception:  # noqa: BLE001 - an input deepcopy cannot take: nothing to compare
        return result
    expected, expected_error = outcome(outside_call, outside_batch)
    before = fingerprint(batch)
    with mode:
        got, error = outcome(ours_call, batch)
    if fingerprint(batch) != before:
        result["violations"].append("input changed")
    result["ours"] = "ok" if error is None else type(error).__name__
    if error is not None and type(error).__name__ == "PanicException":
        result["violations"].append(f"panicked: {error}")
    elif type(error) is not type(expected_error):
        result["violations"].append(
            f"under {name}: {result['ours']} ({error}), outside the mode: "
            f"{'ok' if expected_error is None else type(expected_error).__name__}"
        )
    elif error is None:
        problem = same_output(got, expected, copies=copies)
        if problem:
            result["violations"].append(f"under {name}, differs: {problem}"[:500])
        result["compared"] = problem is None
    return result


def worker() -> None:
    for line in sys.stdin:
        if line.strip() == "abort":
            os.abort()  # tests/collators/test_fuzz.py checks that a crash is reported
        if line.startswith("mode "):
            seed = int(line.split()[1])
            try:
                result = run_under_mode(seed)
            except BaseException as err:  # noqa: BLE001 - the harness itself failed
                result = {"seed": line.strip(), "violations": [f"harness: {err!r}"]}
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()
            continue
        seed = int(line)
        try:
            result = run(seed)
        except BaseException as err:  # noqa: BLE001 - the harness itself failed
            result = {"seed": seed, "violations": [f"harness: {type(err).__name__}: {err}"]}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    worker()
