"""fastcollate's speech collators against the collators of transformers' speech examples and
the audio course, written here from their documented behaviour on transformers' own
`processor.pad` / `feature_extractor.pad` / `tokenizer.pad`."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import (
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Processor,
    WhisperFeatureExtractor,
)

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.hypothesis_profiles import examples
from tests.support.speech import VOCAB, ctc_tokenizer, unaligned

pytestmark = pytest.mark.parity

@dataclass
class ReferenceCTCCollator:
    """transformers' speech-recognition CTC example collator."""

    processor: Any
    padding: bool | str = "longest"
    pad_to_multiple_of: int | None = None
    pad_to_multiple_of_labels: int | None = None
    feature_extractor_input_name: str = "input_values"

    def __call__(self, features):
        name = self.feature_extractor_input_name
        input_features = [{name: feature[name]} for feature in features]
        label_features = [{"input_ids": feature["labels"]} for feature in features]
        batch = self.processor.pad(input_features, padding=self.padding,
                                   pad_to_multiple_of=self.pad_to_multiple_of,
                                   return_tensors="pt")
        labels_batch = self.processor.pad(labels=label_features, padding=self.padding,
                                          pad_to_multiple_of=self.pad_to_multiple_of_labels,
                                          return_tensors="pt")
        labels = labels_batch["input_ids"].masked_fill(labels_batch.attention_mask.ne(1), -100)
        batch["labels"] = labels
        if "attention_mask" in batch:
            batch["attention_mask"] = batch["attention_mask"].to(torch.long)
        return batch


@dataclass
class ReferenceSpeechSeq2SeqCollator:
    """transformers' speech seq2seq example collator (the audio course's, with
    forward_attention_mask=False)."""

    processor: Any
    decoder_start_token_id: int
    forward_attention_mask: bool = False

    def __call__(self, features):
        name = self.processor.model_input_names[0]
        input_features = [{name: feature[name]} for feature in features]
        label_features = [{"input_ids": feature["labels"]} for feature in features]
        batch = self.processor.feature_extractor.pad(input_features, return_tensors="pt")
        if self.forward_attention_mask:
            batch["attention_mask"] = torch.LongTensor(
                [feature["attention_mask"] for feature in features])
        labels_batch = self.processor.tokenizer.pad(label_features, return_tensors="pt")
        labels = labels_batch["input_ids"].masked_fill(labels_batch.attention_mask.ne(1), -100)
        if (labels[:, 0] == self.decoder_start_token_id).all().cpu().item():
            labels = labels[:, 1:]
        batch["labels"] = labels
        return batch


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return ctc_tokenizer(tmp_path_factory.mktemp("vocab"))


def as_format(array, fmt):
    if fmt == "np":
        return array
    if fmt == "np_unaligned":
        return unaligned(array)
    if fmt == "pt":
        return torch.from_numpy(array.copy())
    return array.tolist()


@settings(max_examples=examples(30), deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 60), st.integers(0, 9)), min_size=1, max_size=5),
    fmt=st.sampled_from(["np", "pt", "list", "np_unaligned"]),
    padding=st.sampled_from([True, "longest"]),
    multiple=st.sampled_from([None, 8]),
    multiple_labels=st.sampled_from([None, 4]),
    mask=st.booleans(),
    side=st.sampled_from(["left", "right"]),
    seed=st.integers(0, 1000),
)
def test_ctc_collator_matches_the_example(tokenizer, lengths, fmt, padding, multiple,
                                          multiple_labels, mask, side, seed):
    extractor = Wav2Vec2FeatureExtractor(return_attention_mask=mask, padding_side=side)
    processor = Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer)
    rng = np.random.default_rng(seed)
    features = [
        {"input_values": as_format(rng.standard_normal(n).astype(np.float32), fmt),
         "labels": rng.integers(2, len(VOCAB), size=k).tolist(), "input_length": n}
        for n, k in lengths
    ]
    options = dict(padding=padding, pad_to_multiple_of=multiple,
                   pad_to_multiple_of_labels=multiple_labels)
    theirs = ReferenceCTCCollator(processor, **options)(copy.deepcopy(features))
    ours = fastcollate.DataCollatorCTCWithPadding(processor, **options)(features)
    assert_same_batch(ours, theirs)


@pytest.mark.parametrize("fmt", ["np", "pt", "list", "np_unaligned"])
@pytest.mark.parametrize("all_start", [True, False])
@pytest.mark.parametrize("forward_attention_mask", [False, True])
def test_speech_seq2seq_collator_matches_the_example(tokenizer, fmt, all_start,
                                                     forward_attention_mask):
    extractor = WhisperFeatureExtractor(feature_size=80)
    processor = SimpleNamespace(feature_extractor=extractor, tokenizer=tokenizer,
                                model_input_names=["input_features", "attention_mask"])
    start = VOCAB["<s>"]
    rng = np.random.default_rng(7)
    features = []
    for i, k in enumerate((3, 1, 5)):
        labels = [start, *rng.integers(4, len(VOCAB), size=k).tolist()]
        if not all_start and i == 1:
            labels = labels[1:]
        features.append({
            "input_features": as_format(rng.standard_normal((80, 3000)).astype(np.float32), fmt),
            "labels": labels,
            "attention_mask": [1] * 3000,
        })
    theirs = ReferenceSpeechSeq2SeqCollator(processor, start, forward_attention_mask)(
        copy.deepcopy(features))
    ours = fastcollate.DataCollatorSpeechSeq2SeqWithPadding(processor, start,
                                                           forward_attention_mask)(features)
    assert_same_batch(ours, theirs)
    # The longest labels hold 6 ids, the start token among them.
    assert ours["labels"].shape[1] == (5 if all_start else 6)
