"""Rows and lengths for the stream tests, how many rounds a rank gets unchanged, and a dataset
read back as a real `datasets` stream from a local Parquet or JSON file."""

from __future__ import annotations

import datasets
import numpy as np


def make_rows(lengths):
    return [{"input_ids": [1 + (i + k) % 90 for k in range(n)], "row": i}
            for i, n in enumerate(lengths)]


def rounds_dealt_unchanged(batches, world, drop_last):
    """How many of a rank's first batches are the single reader's `batches` dealt round robin
    as they are: every round, except the last two when the batches do not divide by the ranks
    and drop_last keeps the rows (those two are cut again: buffered_stream.deal_to_ranks)."""
    recut = not drop_last and batches % world
    return max(0, batches // world - 1) if recut else batches // world


def lognormal_lengths(n, seed=0, cap=512):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(5.2, 0.6, n).astype(int), 1, cap).tolist()


def local_stream(tmp_path, file_format, dataset):
    """`dataset` written to a local Parquet or JSON file in `tmp_path`, read back as a real
    `datasets` stream (`load_dataset(..., streaming=True)`)."""
    path = tmp_path / f"rows.{file_format}"
    if file_format == "parquet":
        dataset.to_parquet(str(path))
    else:
        dataset.to_json(str(path))
    stream = datasets.load_dataset(file_format, data_files=str(path), split="train",
                                   streaming=True)
    assert isinstance(stream, datasets.IterableDataset)
    return stream
