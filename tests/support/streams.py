"""Rows and lengths for the stream tests, and a dataset read back as a real `datasets` stream
from a local Parquet or JSON file."""

from __future__ import annotations

import datasets
import numpy as np


def make_rows(lengths):
    return [{"input_ids": [1 + (i + k) % 90 for k in range(n)], "row": i}
            for i, n in enumerate(lengths)]


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
