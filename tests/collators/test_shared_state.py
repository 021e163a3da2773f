"""Nothing fastcollate is handed is changed, even for the length of a call: a feature extractor
or a tokenizer shared by threads padding on different sides gives each call transformers'
result for its own side, and no attribute of it is ever set (spied on by a `__setattr__`)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import Wav2Vec2FeatureExtractor

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.thread_races import race

pytestmark = pytest.mark.parity

# The objects whose attribute sets are recorded (by id: a copy of one is not watched).
WATCHED: dict[int, list[str]] = {}


class SpiedExtractor(Wav2Vec2FeatureExtractor):
    def __setattr__(self, name, value):
        if id(self) in WATCHED:
            WATCHED[id(self)].append(name)
        super().__setattr__(name, value)


def watch(obj) -> list[str]:
    WATCHED[id(obj)] = []
    return WATCHED[id(obj)]


def audio_rows(dtype) -> list[dict]:
    rng = np.random.default_rng(0)
    return [{"input_values": rng.standard_normal(n).astype(dtype)} for n in (5, 2, 7)]


def extractor_expected(extractor, rows, side):
    """transformers' own result for `side`, from a copy of the extractor set to it."""
    own = copy.deepcopy(extractor)
    own.padding_side = side
    return own.pad(copy.deepcopy(rows), return_tensors="np")


# float16 audio is handed to the extractor's own pad; float32 takes the native path.
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_the_extractor_is_never_set_and_each_side_is_transformers(dtype):
    extractor = SpiedExtractor(padding_side="right")
    rows = audio_rows(dtype)
    expected = {side: extractor_expected(extractor, rows, side) for side in ("left", "right")}
    sets = watch(extractor)
    for side in ("left", "right"):
        assert_same_batch(fastcollate.pad(rows, extractor, padding_side=side,
                                          return_tensors="np"), expected[side])
    assert sets == []
    assert extractor.padding_side == "right"


def hammer(calls: dict[str, object], make) -> list[str]:
    """Runs `make(side)` from two threads at once (one per side), many times, and returns a
    line per thread whose result was not `calls[side]` (that thread stops there)."""
    sides = ("left", "right")

    def step(index: int, round_index: int) -> None:
        side = sides[index]
        try:
            assert_same_batch(make(side), calls[side])
        except AssertionError as error:
            raise AssertionError(f"{side} call {round_index}: {error}") from None

    return [str(error) for error in race(step, threads=len(sides), rounds=150)]


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_threads_sharing_an_extractor_each_get_their_side(dtype):
    extractor = SpiedExtractor(padding_side="right")
    rows = audio_rows(dtype)
    expected = {side: extractor_expected(extractor, rows, side) for side in ("left", "right")}
    sets = watch(extractor)
    wrong = hammer(expected, lambda side: fastcollate.pad(rows, extractor, padding_side=side,
                                                          return_tensors="np"))
    assert wrong == []
    assert sets == []


@pytest.mark.parametrize("fmt", ["list", "np", "pt"])
def test_threads_sharing_a_tokenizer_each_get_their_side(bert_tokenizer, fmt):
    tokenizer = copy.deepcopy(bert_tokenizer)
    spied_class = type("SpiedTokenizer", (type(tokenizer),), {
        "__setattr__": SpiedExtractor.__setattr__,
    })
    tokenizer.__class__ = spied_class
    ids = [[101, 7, 8, 102], [101, 102], [101, 9, 102]]
    convert = {"list": list, "np": np.asarray, "pt": torch.tensor}[fmt]
    rows = [{"input_ids": convert(row), "attention_mask": convert([1] * len(row))}
            for row in ids]
    expected = {side: bert_tokenizer.pad(copy.deepcopy(rows), padding_side=side,
                                         return_tensors="pt") for side in ("left", "right")}
    sets = watch(tokenizer)
    wrong = hammer(expected, lambda side: fastcollate.pad(rows, tokenizer, padding_side=side,
                                                          return_tensors="pt"))
    assert wrong == []
    assert sets == []
    assert tokenizer.padding_side == bert_tokenizer.padding_side
