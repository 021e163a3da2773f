"""Smoke tests of `python -m fastcollate bench` (no timings are asserted)."""

from __future__ import annotations

import numpy as np
import pytest

import fastcollate
from fastcollate import _bench


def test_rows_are_imdb_like_and_deterministic():
    rows = _bench.classification_rows(np.random.default_rng(0), 64)
    again = _bench.classification_rows(np.random.default_rng(0), 64)
    assert rows == again
    for row in rows:
        ids = row["input_ids"]
        assert 4 <= len(ids) <= _bench.MAX_TOKENS
        assert ids[0] == _bench.CLS_ID and ids[-1] == _bench.SEP_ID
        assert all(0 <= i < _bench.VOCAB_SIZE for i in ids)
        assert row["attention_mask"] == [1] * len(ids)
        assert row["token_type_ids"] == [0] * len(ids)
        assert row["label"] in (0, 1)


def test_run_checks_and_times_every_format():
    results = _bench.run(
        batch_sizes=[3],
        repeat=1,
        min_seconds=0.0,
        cases=["DataCollatorWithPadding"],
        pool_batches=1,
    )
    assert [(r.format, r.batch_size) for r in results] == [(f, 3) for f in _bench.FORMATS]
    for r in results:
        assert set(r.seconds) == {"transformers", "pad_sequence", "numpy loop", "fastcollate"}
        assert r.vs_transformers > 0 and r.vs_best_baseline > 0
    table = _bench.format_table(results)
    assert "WithPadding" in table and "vs transformers" in table


def test_a_debug_build_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(fastcollate, "build_profile", "debug")
    assert _bench.main(["--quick"]) == 1
    assert "debug build" in capsys.readouterr().err


def test_a_wrong_output_aborts(monkeypatch):
    class Broken(fastcollate.DataCollatorWithPadding):
        def __call__(self, features):
            batch = super().__call__(features)
            batch["input_ids"][0, 0] += 1
            return batch

    monkeypatch.setattr(fastcollate, "DataCollatorWithPadding", Broken)
    with pytest.raises(_bench.BenchError, match="'input_ids' differs"):
        _bench.run(
            batch_sizes=[2],
            formats=["lists"],
            repeat=1,
            min_seconds=0.0,
            cases=["DataCollatorWithPadding"],
            pool_batches=1,
        )
