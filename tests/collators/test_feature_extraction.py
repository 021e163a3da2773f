"""Feature-extractor padding (`fastcollate.pad(rows, feature_extractor)` and the collators
given a feature extractor or a processor) against transformers' own `feature_extractor.pad`:
raw audio and 2-d features, every option, numpy / torch / list rows, both sides."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import (
    ASTFeatureExtractor,
    SeamlessM4TFeatureExtractor,
    Wav2Vec2FeatureExtractor,
    WhisperFeatureExtractor,
)

import fastcollate
from fastcollate import _native
from fastcollate.collators.feature_extraction import pad_features
from tests.support.compare import assert_same_batch, assert_unchanged, has_object_array
from tests.support.hypothesis_profiles import examples
from tests.support.speech import unaligned

pytestmark = pytest.mark.parity


def raw_extractor(**kwargs):
    return Wav2Vec2FeatureExtractor(**kwargs)


def to_format(array: np.ndarray, fmt: str):
    if fmt == "np":
        return array
    if fmt == "np_unaligned":
        return unaligned(array)
    if fmt == "pt":
        return torch.from_numpy(array.copy())
    return array.tolist()


def rows_of(lengths, width, fmt, dtype, seed, extra=()):
    rng = np.random.default_rng(seed)
    rows = []
    for i, n in enumerate(lengths):
        shape = (n,) if width == 1 else (n, width)
        row = {"input_values": to_format(rng.standard_normal(shape).astype(dtype), fmt)}
        if "label" in extra:
            row["label"] = i
        if "mask" in extra:
            row["attention_mask"] = to_format(np.ones(n, dtype=np.int32), fmt)
        rows.append(row)
    return rows


def check(extractor, rows, **options):
    """fastcollate's pad and transformers' equal (or both raise ValueError), rows untouched."""
    before = copy.deepcopy(rows)
    try:
        theirs = extractor.pad(copy.deepcopy(rows), **options)
    except (ValueError, IndexError) as err:
        with pytest.raises(type(err)):
            fastcollate.pad(rows, extractor, **options)
        return None
    ours = fastcollate.pad(rows, extractor, **options)
    if has_object_array(theirs):
        # Ragged masks (not padded under return_attention_mask=False): numpy object arrays,
        # compared element by element.
        assert list(ours) == list(theirs)
        for key in theirs:
            assert ours[key].dtype == theirs[key].dtype
            for mine, reference in zip(ours[key], theirs[key], strict=True):
                np.testing.assert_array_equal(mine, reference)
                assert np.asarray(mine).dtype == np.asarray(reference).dtype
    else:
        assert_same_batch(ours, theirs)
    assert_unchanged(rows, before)
    return ours


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    fmt=st.sampled_from(["np", "pt", "list", "np_unaligned"]),
    dtype=st.sampled_from([np.float32, np.float64]),
    side=st.sampled_from(["left", "right"]),
    padding=st.sampled_from([True, False, "longest", "max_length", "do_not_pad"]),
    max_length=st.one_of(st.none(), st.integers(0, 50)),
    truncation=st.booleans(),
    multiple=st.sampled_from([None, 1, 3, 8]),
    return_attention_mask=st.sampled_from([None, True, False]),
    default_mask=st.booleans(),
    return_tensors=st.sampled_from([None, "np", "pt"]),
    padding_value=st.sampled_from([0.0, -1.5, 3]),
    extra=st.sampled_from([(), ("label",), ("mask",), ("label", "mask")]),
    seed=st.integers(0, 2**16),
)
def test_raw_audio_matches_feature_extractor_pad(
    lengths, fmt, dtype, side, padding, max_length, truncation, multiple,
    return_attention_mask, default_mask, return_tensors, padding_value, extra, seed,
):
    extractor = raw_extractor(padding_side=side, padding_value=padding_value,
                              return_attention_mask=default_mask)
    rows = rows_of(lengths, 1, fmt, dtype, seed, extra)
    check(extractor, rows, padding=padding, max_length=max_length, truncation=truncation,
          pad_to_multiple_of=multiple, return_attention_mask=return_attention_mask,
          return_tensors=return_tensors)


@settings(max_examples=examples(25), deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    width=st.integers(2, 5),
    fmt=st.sampled_from(["np", "pt", "list", "np_unaligned"]),
    dtype=st.sampled_from([np.float32, np.float64]),
    side=st.sampled_from(["left", "right"]),
    padding=st.sampled_from([True, "max_length", False]),
    max_length=st.one_of(st.none(), st.integers(0, 14)),
    truncation=st.booleans(),
    multiple=st.sampled_from([None, 4]),
    return_attention_mask=st.sampled_from([None, True, False]),
    return_tensors=st.sampled_from([None, "np", "pt"]),
    seed=st.integers(0, 2**16),
)
def test_feature_frames_match_feature_extractor_pad(
    lengths, width, fmt, dtype, side, padding, max_length, truncation, multiple,
    return_attention_mask, return_tensors, seed,
):
    # SeamlessM4T pads frames × features through the base `pad` (feature_size > 1).
    extractor = SeamlessM4TFeatureExtractor(feature_size=width, padding_side=side,
                                            padding_value=0.25)
    extractor.model_input_names = ["input_values", "attention_mask"]
    rows = rows_of(lengths, width, fmt, dtype, seed)
    check(extractor, rows, padding=padding, max_length=max_length, truncation=truncation,
          pad_to_multiple_of=multiple, return_attention_mask=return_attention_mask,
          return_tensors=return_tensors)


@pytest.mark.parametrize("return_tensors", ["np", "pt", None])
@pytest.mark.parametrize("return_attention_mask", [None, True])
def test_whisper_input_features(return_tensors, return_attention_mask):
    extractor = WhisperFeatureExtractor(feature_size=80)
    rng = np.random.default_rng(1)
    rows = [{"input_features": rng.standard_normal((80, 3000)).astype(np.float32), "label": i}
            for i in range(3)]
    rows[1]["input_features"] = torch.from_numpy(rows[1]["input_features"])
    theirs = extractor.pad(copy.deepcopy(rows), return_tensors=return_tensors,
                           return_attention_mask=return_attention_mask)
    ours = fastcollate.pad(rows, extractor, return_tensors=return_tensors,
                           return_attention_mask=return_attention_mask)
    assert_same_batch(ours, theirs)


def test_whisper_features_from_its_own_call():
    extractor = WhisperFeatureExtractor(feature_size=80)
    rng = np.random.default_rng(2)
    rows = [{"input_features": extractor(rng.standard_normal(n).astype(np.float32),
                                         sampling_rate=16000)["input_features"][0]}
            for n in (8000, 16000)]
    assert_same_batch(fastcollate.pad(rows, extractor, return_tensors="pt"),
                      extractor.pad(copy.deepcopy(rows), return_tensors="pt"))


@pytest.mark.parametrize(
    "make_rows",
    [
        # Integer audio, float16, an override of `pad`: the extractor's own pad.
        lambda: [{"input_values": [1, 2, 3]}, {"input_values": [4]}],
        lambda: [{"input_values": np.ones(n, np.float16)} for n in (3, 1)],
        lambda: [{"input_values": np.ones((3, 2), np.float32)} for _ in range(2)],
        lambda: {"input_values": [np.ones(3, np.float32), np.ones(2, np.float32)]},
        lambda: [{"input_values": np.ones(3, np.float32), "attention_mask": [1, 1, 1]},
                 {"input_values": np.ones(2, np.float32), "attention_mask": np.ones(2, np.int32)}],
    ],
)
def test_other_batches_get_the_extractors_own_result(make_rows):
    extractor = raw_extractor(return_attention_mask=True)
    try:
        theirs = extractor.pad(make_rows(), return_tensors="np")
    except ValueError:
        with pytest.raises(ValueError):
            fastcollate.pad(make_rows(), extractor, return_tensors="np")
        return
    assert_same_batch(fastcollate.pad(make_rows(), extractor, return_tensors="np"), theirs)


@pytest.mark.parametrize("empty", [[], ()])
def test_rows_of_empty_lists_only_get_the_extractors_own_result(empty):
    # transformers finds no first value to tell the type by (an IndexError in 5.20-5.24): the
    # extractor's own pad answers, as for every batch the native path does not cover.
    extractor = raw_extractor()
    rows = [{"input_values": empty}, {"input_values": empty}]
    try:
        theirs = extractor.pad(copy.deepcopy(rows))
    except Exception as err:  # noqa: BLE001 - whatever transformers raises, we raise
        with pytest.raises(type(err)):
            fastcollate.pad(rows, extractor)
        return
    assert_same_batch(fastcollate.pad(rows, extractor), theirs)


def test_ast_and_an_extractor_with_its_own_pad():
    extractor = ASTFeatureExtractor()
    rows = rows_of([4, 2], 1, "np", np.float32, 3)
    assert_same_batch(fastcollate.pad(rows, extractor), extractor.pad(copy.deepcopy(rows)))

    class Doubling(Wav2Vec2FeatureExtractor):
        def pad(self, *args, **kwargs):
            out = super().pad(*args, **kwargs)
            out["input_values"] = out["input_values"] * 2
            return out

    doubling = Doubling()
    assert_same_batch(fastcollate.pad(rows, doubling), doubling.pad(copy.deepcopy(rows)))


def test_given_masks_keep_their_dtype_and_are_truncated():
    extractor = raw_extractor(return_attention_mask=True)
    for mask_dtype in (np.int32, np.int64):
        rows = [{"input_values": np.ones(n, np.float32),
                 "attention_mask": np.ones(n, mask_dtype)} for n in (5, 2)]
        for options in ({}, {"truncation": True, "max_length": 3, "padding": "max_length"}):
            ours = check(extractor, rows, return_tensors="np", **options)
            assert ours["attention_mask"].dtype == mask_dtype


@pytest.mark.parametrize(
    ("value", "message"),
    [("audio", "'input_values' in row 1"), (None, "'input_values' in row 1"),
     (np.array(["a", "b"]), "'input_values' in row 1")],
)
def test_bad_rows_name_the_key_and_row(value, message):
    rows = [{"input_values": np.ones(3, np.float32)}, {"input_values": value}]
    with pytest.raises((TypeError, ValueError), match=message):
        fastcollate.pad(rows, raw_extractor())


def test_ragged_output_is_transformers_own_and_missing_keys_name_the_row():
    rows = [{"input_values": np.ones(3, np.float32)}, {"input_values": np.ones(6, np.float32)}]
    # Rows left of different lengths: transformers' object arrays (np) or its error (pt).
    check(raw_extractor(), rows, padding="max_length", max_length=4)
    check(raw_extractor(), rows, padding=False, return_tensors="pt")
    with pytest.raises(KeyError, match="row 1 has no 'label'"):
        fastcollate.pad([{"input_values": np.ones(2), "label": 1}, {"input_values": np.ones(2)}],
                        raw_extractor())


def test_native_binding_refuses_what_it_cannot_read():
    with pytest.raises(TypeError, match="'x' in row 0"):
        _native.pad_frames("x", [np.ones(3, np.int64)], ndim=1, strategy="longest",
                           max_length=None, pad_to_multiple_of=None, truncation=False,
                           left=False, padding_value=0.0, attention_mask=False)
    with pytest.raises(TypeError, match="not C-contiguous"):
        _native.pad_frames("x", [np.ones(6, np.float32)[::2]], ndim=1, strategy="longest",
                           max_length=None, pad_to_multiple_of=None, truncation=False,
                           left=False, padding_value=0.0, attention_mask=False)
    with pytest.raises(TypeError, match="'x' in row 0: the array is not C-contiguous and aligned"):
        _native.pad_frames("x", [unaligned(np.ones(3, np.float32))], ndim=1, strategy="longest",
                           max_length=None, pad_to_multiple_of=None, truncation=False,
                           left=False, padding_value=0.0, attention_mask=False)
    with pytest.raises(ValueError, match="row 1: 3 features a frame"):
        _native.pad_frames("x", [np.ones((2, 2), np.float32), np.ones((2, 3), np.float32)],
                           ndim=2, strategy="longest", max_length=None, pad_to_multiple_of=None,
                           truncation=False, left=False, padding_value=0.0, attention_mask=False)


def test_output_owns_rust_memory_shared_with_torch():
    rows = rows_of([3, 5], 1, "np", np.float32, 4)
    out = fastcollate.pad(rows, raw_extractor(return_attention_mask=True), return_tensors="pt")
    assert out["input_values"].is_contiguous()
    assert out["attention_mask"].dtype == torch.int32


@pytest.mark.parametrize("collator_class", ["transformers", "fastcollate"])
def test_data_collator_with_padding_takes_a_feature_extractor_and_a_processor(collator_class):
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2Processor

    extractor = raw_extractor(return_attention_mask=True)
    rows = rows_of([6, 2, 4], 1, "list", np.float32, 5, extra=("label",))
    reference = transformers.DataCollatorWithPadding(extractor, pad_to_multiple_of=4)(
        copy.deepcopy(rows))
    assert_same_batch(fastcollate.DataCollatorWithPadding(extractor, pad_to_multiple_of=4)(rows),
                      reference)
    tokenizer = Wav2Vec2CTCTokenizer(vocab_file=_char_vocab(), unk_token="[UNK]",
                                     pad_token="[PAD]", word_delimiter_token="|")
    processor = Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer)
    assert_same_batch(fastcollate.DataCollatorWithPadding(processor, pad_to_multiple_of=4)(rows),
                      transformers.DataCollatorWithPadding(processor, pad_to_multiple_of=4)(
                          copy.deepcopy(rows)))
    assert_same_batch(fastcollate.pad(rows, processor), processor.pad(copy.deepcopy(rows)))
    del collator_class


def _char_vocab() -> str:
    import json
    import tempfile

    vocab = {"[PAD]": 0, "[UNK]": 1, "|": 2, **{c: i + 3 for i, c in enumerate("abcdefgh")}}
    path = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(vocab, path)
    path.close()
    return path.name


def test_padding_side_override_and_pad_features_hand_back_restore_the_extractor():
    extractor = raw_extractor(padding_side="right")
    rows = [{"input_values": np.ones(2, np.float16)}, {"input_values": np.ones(1, np.float16)}]
    out = pad_features(rows, extractor, padding_side="left", return_tensors="np")
    assert out["input_values"][1].tolist() == [0.0, 1.0]
    assert extractor.padding_side == "right"


def _unaligned_rows(width=1, mask=False):
    rng = np.random.default_rng(11)
    rows = []
    for n in (5, 2, 4):
        values = rng.standard_normal((n,) if width == 1 else (n, width)).astype(np.float32)
        row = {"input_values": unaligned(values)}
        if mask:
            row["attention_mask"] = unaligned(np.ones(n, np.int64))
        rows.append(row)
    return rows


@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("return_tensors", ["np", "pt"])
def test_unaligned_rows_are_padded_as_transformers_pads_them(width, mask, return_tensors):
    """Raw PCM read at an odd offset (`np.frombuffer(raw, np.float32, offset=1)`: C-contiguous,
    not aligned), rows and given masks, on `pad`, `DataCollatorWithPadding` with the extractor
    and with a processor forwarding to it (the speech collators: test_speech_collators.py)."""
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2Processor

    if width == 1:
        extractor = raw_extractor(return_attention_mask=True)
    else:
        extractor = SeamlessM4TFeatureExtractor(feature_size=width, padding_value=0.25)
        extractor.model_input_names = ["input_values", "attention_mask"]
    rows = _unaligned_rows(width, mask)
    check(extractor, rows, return_tensors=return_tensors)
    check(extractor, rows, padding="max_length", max_length=6, pad_to_multiple_of=4,
          return_tensors=return_tensors)
    reference = transformers.DataCollatorWithPadding(extractor, return_tensors=return_tensors)(
        copy.deepcopy(rows))
    assert_same_batch(fastcollate.DataCollatorWithPadding(
        extractor, return_tensors=return_tensors)(rows), reference)
    if width == 1:
        tokenizer = Wav2Vec2CTCTokenizer(vocab_file=_char_vocab(), unk_token="[UNK]",
                                         pad_token="[PAD]", word_delimiter_token="|")
        processor = Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer)
        assert_same_batch(fastcollate.pad(rows, processor, return_tensors=return_tensors),
                          processor.pad(copy.deepcopy(rows), return_tensors=return_tensors))


def _extractor_without_feature_size():
    from transformers import SequenceFeatureExtractor

    extractor = SequenceFeatureExtractor(feature_size=None, sampling_rate=16000,
                                         padding_value=0.0)
    extractor.model_input_names = ["input_values"]
    return extractor


@pytest.mark.parametrize("lengths", [(3, 3), (4, 4, 4), (3, 2), (0, 0)])
@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize("return_attention_mask", [None, True])
def test_an_extractor_without_feature_size_pads_as_transformers_does(lengths, width,
                                                                     return_attention_mask):
    """`feature_size=None`: transformers reads it only for a row that needs padding, so rows
    of one length pass and others raise its TypeError; fastcollate gives the same on `pad`
    and `DataCollatorWithPadding`."""
    extractor = _extractor_without_feature_size()
    rows = rows_of(lengths, width, "np", np.float32, 3)
    options = dict(return_tensors="np", return_attention_mask=return_attention_mask)
    try:
        theirs = extractor.pad(copy.deepcopy(rows), **options)
    except TypeError as err:
        assert len(set(lengths)) > 1
        with pytest.raises(TypeError, match=str(err)):
            fastcollate.pad(rows, extractor, **options)
        with pytest.raises(TypeError, match=str(err)):
            fastcollate.DataCollatorWithPadding(extractor, return_tensors="np")(rows)
        return
    assert len(set(lengths)) == 1
    assert_same_batch(fastcollate.pad(rows, extractor, **options), theirs)
    assert_same_batch(fastcollate.DataCollatorWithPadding(extractor, return_tensors="np")(rows),
                      transformers.DataCollatorWithPadding(extractor, return_tensors="np")(
                          copy.deepcopy(rows)))
