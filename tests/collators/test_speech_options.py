"""Speech padding options and rows as transformers' feature extractors take them (issue 40,
item 8): `truncation` by its truth value, the output container picked from the value
transformers looks at, lists of 0-d tensors, extra keys it cannot read, `feature_size=None`,
tuple labels in the speech collators, and what the collators are made with."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import (
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Processor,
    WhisperFeatureExtractor,
)

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.speech import ctc_tokenizer

pytestmark = pytest.mark.parity

def _outcome(call, rows):
    try:
        return call(copy.deepcopy(rows)), None
    except Exception as err:  # noqa: BLE001 - compared with transformers' own
        return None, err


def assert_pads_as_transformers(extractor, rows, **options):
    expected, their_error = _outcome(lambda r: extractor.pad(r, **options), rows)
    got, our_error = _outcome(lambda r: fastcollate.pad(r, extractor, **options), rows)
    if their_error is not None:
        assert type(our_error) is type(their_error), our_error
        assert str(our_error) == str(their_error)
        return
    assert our_error is None, our_error
    assert type(got) is type(expected)
    if any(getattr(v, "dtype", None) == np.dtype(object) for v in expected.values()):
        # transformers' ragged object arrays: the extractor padded it itself, row by row
        for key in expected:
            for ours, theirs in zip(got[key], expected[key], strict=True):
                np.testing.assert_array_equal(ours, theirs)
        return
    assert_same_batch(dict(got), dict(expected))


def _rows(*lengths, make=lambda a: a):
    rng = np.random.default_rng(sum(lengths))
    return [{"input_values": make(rng.random(n).astype(np.float32))} for n in lengths]


@pytest.mark.parametrize("truncation", [1, 0, 1.0, "yes", "", np.bool_(True),
                                        torch.tensor(True), torch.tensor(False),
                                        torch.tensor([True, False])],
                         ids=repr)
@pytest.mark.parametrize("padding", ["max_length", True])
def test_truncation_is_taken_by_its_truth_value(truncation, padding):
    extractor = Wav2Vec2FeatureExtractor(return_attention_mask=True)
    assert_pads_as_transformers(extractor, _rows(6, 3), truncation=truncation, max_length=4,
                                padding=padding)


@pytest.mark.parametrize("rows", [
    pytest.param([{"input_values": []}, {"input_values": torch.ones(3)}], id="empty-list-tensor"),
    pytest.param([{"input_values": []}, {"input_values": np.ones(3, np.float32)}],
                 id="empty-list-array"),
    pytest.param([{"input_values": ()}, {"input_values": [0.5, 0.25]}], id="empty-tuple-list"),
    pytest.param([{"input_values": np.zeros(0, np.float32)}, {"input_values": torch.ones(2)}],
                 id="empty-array-tensor"),
    pytest.param([{"input_values": torch.zeros(0)}, {"input_values": [0.5, 0.25]}],
                 id="empty-tensor-list"),
    pytest.param([{"input_values": [torch.tensor(0.5), torch.tensor(0.25)]},
                  {"input_values": [torch.tensor(1.0)]}], id="zero-d-tensors"),
    pytest.param([{"input_values": [np.float32(0.5)]}, {"input_values": [np.float32(1.0)]}],
                 id="numpy-float32-scalars"),
    pytest.param([{"input_values": []}, {"input_values": []}], id="all-empty"),
])
@pytest.mark.parametrize("return_tensors", [None, "pt", "np"])
def test_the_output_container_is_picked_as_transformers_picks_it(rows, return_tensors):
    extractor = Wav2Vec2FeatureExtractor(return_attention_mask=True)
    assert_pads_as_transformers(extractor, rows, return_tensors=return_tensors)


@pytest.mark.parametrize("extra", ["text", None, 3, 2.5, (1, 2), [1, 2], np.int8(3)], ids=repr)
@pytest.mark.parametrize("return_tensors", [None, "pt"])
def test_extra_keys_are_read_as_transformers_reads_them(extra, return_tensors):
    extractor = Wav2Vec2FeatureExtractor(return_attention_mask=True)
    rows = _rows(4, 2)
    for row in rows:
        row["extra"] = copy.deepcopy(extra)
    assert_pads_as_transformers(extractor, rows, return_tensors=return_tensors)


@pytest.mark.parametrize("make", [WhisperFeatureExtractor, Wav2Vec2FeatureExtractor])
def test_feature_size_none_fails_as_in_transformers(make):
    extractor = make()
    extractor.feature_size = None  # (Whisper's constructor fails on it already)
    assert_pads_as_transformers(extractor, _rows(4, 2))


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    tokenizer = ctc_tokenizer(tmp_path_factory.mktemp("vocab"))
    return Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(), tokenizer=tokenizer)


def test_tuple_labels_in_the_ctc_collator_pad_as_lists(processor):
    # The example's collator pads labels with `processor.pad(labels=...)`: a tuple row that
    # needs padding fails there (a tuple plus the pad list); fastcollate reads tuples as lists
    # (docs: What differs from transformers).
    rows = [{"input_values": np.ones(3, np.float32), "labels": (4, 5, 6)},
            {"input_values": np.ones(2, np.float32), "labels": (7,)}]
    with pytest.raises(TypeError, match="concatenate tuple"):
        processor.pad(labels=[{"input_ids": r["labels"]} for r in rows], padding=True,
                      return_tensors="pt")
    collator = fastcollate.DataCollatorCTCWithPadding(processor)
    as_lists = [{**row, "labels": list(row["labels"])} for row in rows]
    assert_same_batch(dict(collator(rows)), dict(collator(as_lists)))
    assert collator(rows)["labels"].tolist() == [[4, 5, 6], [7, -100, -100]]


@pytest.mark.parametrize("given", ["facebook/wav2vec2-base", 42, Wav2Vec2Processor])
def test_speech_collators_are_made_with_a_processor(processor, given):
    with pytest.raises(TypeError, match="processor must be a processor instance"):
        fastcollate.DataCollatorCTCWithPadding(given)
    with pytest.raises(TypeError, match="processor must be a processor instance"):
        fastcollate.DataCollatorSpeechSeq2SeqWithPadding(given, decoder_start_token_id=3)
    fastcollate.DataCollatorCTCWithPadding(processor)  # the real one is taken
