"""`python -m fastcollate bench --cases speech`: the suite checks its outputs against
transformers before timing, times its floor as a copy into buffers allocated before timing, and
the CLI prints its table and writes its JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fastcollate.bench import cli, speech_suite
from fastcollate.bench.errors import BenchError


def test_speech_suite_times_equal_outputs_with_and_without_masks():
    results = speech_suite.run(speech_suite.SpeechSettings(batch_sizes=[2], repeat=1),
                               progress=lambda line: None)
    assert [(r.batch_size, r.attention_mask) for r in results] == [(2, False), (2, True)]
    for result in results:
        assert speech_suite.SAMPLING_RATE <= result.samples <= 16 * speech_suite.SAMPLING_RATE
        for field in ("transformers_ms", "numpy_loop_ms", "fastcollate_ms", "copy_ms"):
            assert getattr(result, field) > 0, field
        record = result.as_dict()
        for key in ("speedup", "vs_numpy_loop", "over_copy", "attention_mask"):
            assert key in record
    table = speech_suite.format_table(results)
    assert "/copy" in table and "vs loop" in table


def test_the_numpy_loop_gives_the_extractors_output():
    from transformers import Wav2Vec2FeatureExtractor

    rows = speech_suite.clips(3, seed=1)
    for with_mask in (False, True):
        extractor = Wav2Vec2FeatureExtractor(return_attention_mask=with_mask)
        theirs = extractor.pad(rows, return_tensors="np")
        mask_dtype = theirs["attention_mask"].dtype if with_mask else None
        ours = speech_suite.numpy_loop(rows, mask_dtype)
        assert set(ours) == set(theirs)
        for key in theirs:
            assert ours[key].dtype == theirs[key].dtype
            assert np.array_equal(ours[key], theirs[key])


def test_the_floor_writes_into_buffers_allocated_once():
    batch = {
        "input_values": np.arange(6, dtype=np.float32).reshape(2, 3),
        "attention_mask": np.ones((2, 3), dtype=np.int32),
    }
    copy = speech_suite.copy_floor(batch)
    first = copy()
    first["input_values"][:] = -1  # the next call writes every byte again
    second = copy()
    for key, value in batch.items():
        assert second[key] is first[key]  # the same buffers, not new ones
        assert second[key] is not value and np.array_equal(second[key], value)


def test_a_differing_output_stops_the_run():
    theirs = {"input_values": np.zeros((1, 2), dtype=np.float32)}
    with pytest.raises(BenchError, match="'input_values' differs"):
        speech_suite._same("x", {"input_values": np.ones((1, 2), dtype=np.float32)}, theirs)


def test_cli_speech_case(tmp_path, capsys):
    path = tmp_path / "speech.json"
    code = cli.bench_main(["--cases", "speech", "--batch-sizes", "2", "--repeat", "1",
                           "--json", str(path)])
    assert code == 0
    assert "Wav2Vec2FeatureExtractor.pad" in capsys.readouterr().out
    record = json.loads(path.read_text())
    assert record["arguments"]["cases"] == ["speech"]
    assert [r["batch_size"] for r in record["results"]] == [2, 2]
    assert [r["attention_mask"] for r in record["results"]] == [False, True]
