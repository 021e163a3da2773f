"""What the TRL benchmark's collators, dataset preparation and `pack_dataset` are given:
`datasets.Dataset`s drawn from a fixed seed (no download), shaped as TRL's trainers leave them.

- `sft_dataset`: chat-SFT-like rows (lognormal lengths around 400 tokens, capped at 2048) with
  `input_ids`, `labels` (the prompt part -100) and `completion_mask`, as `SFTTrainer` hands its
  collator.
- `preference_dataset`: prompts around 150 tokens, completions around 250 (lognormal), the
  preference trainers' tokenized columns and their scalars.
- `tokenized_prompt_completion`: what TRL's tokenizing map leaves for a prompt-completion
  dataset, built in Arrow (`input_ids` int32, `completion_mask` int64), for dataset preparation.
- `imdb_like_dataset`: IMDB-like rows (around 230 tokens, capped at 512) cut into 1,000-row
  record batches as a dataset written by `map` is, for `pack_dataset`.

Needs `datasets` and `pyarrow`; the bench's command line imports this module only after
checking they are installed.
"""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa

from .workload import imdb_like_lengths

PAD_ID = 151643  # a Qwen-style pad id: a real vocabulary's range
SFT_MAX_LENGTH = 2048
_VOCAB = 150000


def _lognormal_lengths(rng: np.random.Generator, rows: int, median: float, cap: int, shortest: int):
    return np.clip(rng.lognormal(np.log(median), 0.6, rows).astype(np.int64), shortest, cap)


def sft_dataset(rows: int, seed: int = 0) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    input_ids, labels, completion_mask = [], [], []
    for length in _lognormal_lengths(rng, rows, 400, SFT_MAX_LENGTH, 16).tolist():
        ids = rng.integers(0, _VOCAB, length).tolist()
        prompt = int(rng.integers(4, max(5, length // 2)))
        input_ids.append(ids)
        labels.append([-100] * prompt + ids[prompt:])
        completion_mask.append([0] * prompt + [1] * (length - prompt))
    return datasets.Dataset.from_dict(
        {"input_ids": input_ids, "labels": labels, "completion_mask": completion_mask}
    )


def preference_dataset(rows: int, seed: int = 2) -> datasets.Dataset:
    rng = np.random.default_rng(seed)

    def tokens(median: float) -> list:
        lengths = _lognormal_lengths(rng, rows, median, 1024, 4)
        return [rng.integers(0, _VOCAB, n).tolist() for n in lengths.tolist()]

    columns = {
        "prompt_ids": tokens(150),
        "chosen_ids": tokens(250),
        "rejected_ids": tokens(250),
        "ref_chosen_logps": rng.normal(-300, 50, rows).tolist(),
        "ref_rejected_logps": rng.normal(-320, 50, rows).tolist(),
        "margin": rng.random(rows).tolist(),
        "label": (rng.random(rows) < 0.5).tolist(),
    }
    return datasets.Dataset.from_dict(columns)


def _list_column(offsets: np.ndarray, values: np.ndarray) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def tokenized_prompt_completion(rows: int, seed: int = 2) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    lengths = _lognormal_lengths(rng, rows, 400, SFT_MAX_LENGTH, 16)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    ids = rng.integers(0, _VOCAB, total).astype(np.int32)
    prompts = rng.integers(4, np.maximum(5, lengths // 2))
    position = np.arange(total) - np.repeat(offsets[:-1], lengths)
    mask = (position >= np.repeat(prompts, lengths)).astype(np.int64)
    table = pa.table(
        {"input_ids": _list_column(offsets, ids), "completion_mask": _list_column(offsets, mask)}
    )
    return datasets.Dataset(table)


def imdb_like_dataset(rows: int, seed: int = 0) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    lengths = imdb_like_lengths(rng, rows)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    table = pa.table(
        {
            "input_ids": _list_column(offsets, rng.integers(0, 30000, total, dtype=np.int32)),
            "attention_mask": _list_column(offsets, np.ones(total, dtype=np.int8)),
        }
    )
    table = pa.Table.from_batches(table.to_batches(max_chunksize=1000))
    # A fixed fingerprint: otherwise datasets hashes the whole table.
    return datasets.Dataset(table, fingerprint=f"bench-pack-{rows}-{seed}")


def shuffled_order(rows: int) -> np.ndarray:
    """The fixed shuffled order the benchmark's batches take rows in."""
    return np.random.default_rng(1).permutation(rows)


def batches_of(dataset: datasets.Dataset, batch_size: int, count: int) -> list[list[dict]]:
    """`count` batches of rows in `shuffled_order`, read as the Trainer's loader reads them
    (`__getitems__`: Python lists)."""
    order = shuffled_order(len(dataset))
    return [
        dataset.__getitems__(order[i * batch_size : (i + 1) * batch_size].tolist())
        for i in range(count)
    ]


def filled_share(packed: datasets.Dataset, seq_length: int) -> float:
    """The share of `seq_length` x rows of a packed dataset that holds tokens."""
    column = packed.data.column("input_ids")
    tokens = sum(
        int(chunk.offsets[-1].as_py() - chunk.offsets[0].as_py()) for chunk in column.chunks
    )
    return tokens / (len(packed) * seq_length)
