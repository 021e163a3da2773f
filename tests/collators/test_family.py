"""Differential tests: fastcollate's DataCollatorForTokenClassification, DataCollatorForSeq2Seq,
DataCollatorWithFlattening and DataCollatorForLanguageModeling against transformers' own
classes on the same hypothesis-generated batches (lists / numpy / torch rows, every option, both
padding sides, "pt" and "np"), plus bad-input tests. Inputs must come back untouched."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from transformers.utils import PaddingStrategy

import fastcollate
from tests.support.compare import assert_same_batch, has_object_array
from tests.support.hypothesis_profiles import examples
from tests.support.transformers_releases import LEAVES_OUT_EMPTY_ROWS, flattening_as_5_24

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
FORMATS = ("list", "numpy", "torch")
SPECIAL_IDS = (0, 100, 101, 102, 103)  # [PAD], [UNK], [CLS], [SEP], [MASK] of the BERT vocab


@pytest.fixture(scope="module")
def tokenizers(model_path):
    """The real BERT tokenizer, padding on each side."""
    from transformers import AutoTokenizer

    return {
        side: AutoTokenizer.from_pretrained(model_path, padding_side=side)
        for side in ("right", "left")
    }


def to_format(values, fmt, dtype=np.int64):
    if fmt == "list":
        return list(values)
    array = np.asarray(values, dtype=dtype)
    return array if fmt == "numpy" else torch.from_numpy(array)


def ids(length):
    return st.lists(
        st.one_of(st.integers(1000, 30000), st.sampled_from(SPECIAL_IDS)),
        min_size=length,
        max_size=length,
    )


def snapshot(rows):
    return copy.deepcopy(rows)


def assert_unchanged(rows, before):
    """The caller's rows: same keys, same values, same types and dtypes."""
    assert len(rows) == len(before)
    for row, old in zip(rows, before, strict=True):
        if not isinstance(row, dict):
            row, old = {"": row}, {"": old}
        assert list(row) == list(old)
        for key in row:
            a, b = row[key], old[key]
            assert type(a) is type(b), key
            if isinstance(a, (np.ndarray, torch.Tensor)):
                assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b)), key
            else:
                assert a == b, key


def run_both(ours_fn, theirs_fn, rows, must_fail=False):
    """transformers runs on a deep copy. Where it fails (or builds an object array) fastcollate
    must raise ValueError/TypeError; elsewhere the outputs must be identical. Either way the
    caller's rows stay untouched. Returns whether the outputs were compared."""
    before = snapshot(rows)
    try:
        theirs = theirs_fn(snapshot(rows))
        failed = has_object_array(theirs)
    except (ValueError, TypeError, RuntimeError, IndexError):
        failed = True
    if failed or must_fail:
        event("both raised")
        with pytest.raises((ValueError, TypeError)):
            ours_fn(rows)
    else:
        event("outputs compared")
        assert_same_batch(ours_fn(rows), theirs)
    assert_unchanged(rows, before)
    return not (failed or must_fail)


def no_padding(padding):
    return padding in (False, "do_not_pad")


@st.composite
def padding_options(draw):
    return {
        "padding": draw(
            st.sampled_from([True, "longest", "max_length", False, "do_not_pad", *PaddingStrategy])
        ),
        "max_length_extra": draw(st.one_of(st.none(), st.integers(0, 4))),
        "pad_to_multiple_of": draw(st.one_of(st.none(), st.integers(1, 8))),
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
        "side": draw(st.sampled_from(["right", "left"])),
    }


def resolve_max_length(options, longest):
    """max_length=None (the model's 512 under "max_length") or at least the longest row:
    rows longer than max_length are the bad-input tests' business."""
    extra = options["max_length_extra"]
    return None if extra is None else longest + extra


def draw_lengths(draw, size, equal, low=0, high=10):
    if equal:
        return [draw(st.integers(low, high))] * size
    return draw(st.lists(st.integers(low, high), min_size=size, max_size=size))


# --- DataCollatorForTokenClassification ---------------------------------------------------------


@st.composite
def token_classification_case(draw):
    options = draw(padding_options())
    size = draw(st.integers(1, 5))
    lengths = draw_lengths(draw, size, equal=no_padding(options["padding"]))
    fmt = draw(st.sampled_from(FORMATS))
    dtype = draw(st.sampled_from([np.int64, np.int32]))
    label_key = draw(st.sampled_from(["labels", "label", None]))
    extra = sorted(draw(st.sets(st.sampled_from(["token_type_ids", "attention_mask"]))))
    full_labels = draw(st.booleans())
    rows = []
    for length in lengths:
        row = {"input_ids": to_format(draw(ids(length)), fmt, dtype)}
        for key in extra:
            row[key] = to_format([draw(st.integers(0, 1))] * length, fmt, dtype)
        if label_key is not None:
            label_length = length if full_labels else draw(st.integers(0, length))
            labels = draw(st.lists(st.integers(0, 8), min_size=label_length, max_size=label_length))
            row[label_key] = to_format(labels, fmt, dtype)
        rows.append(row)
    options["label_pad_token_id"] = draw(st.sampled_from([-100, 0, 7]))
    return rows, options


@SETTINGS
@given(case=token_classification_case())
def test_token_classification_matches(tokenizers, case):
    rows, options = case
    tokenizer = tokenizers[options["side"]]
    kwargs = {
        "padding": options["padding"],
        "max_length": resolve_max_length(options, max(len(r["input_ids"]) for r in rows)),
        "pad_to_multiple_of": options["pad_to_multiple_of"],
        "label_pad_token_id": options["label_pad_token_id"],
        "return_tensors": options["return_tensors"],
    }
    ours = fastcollate.DataCollatorForTokenClassification(tokenizer, **kwargs)
    theirs = transformers.DataCollatorForTokenClassification(tokenizer, **kwargs)
    run_both(ours, theirs, rows)


def test_token_classification_pads_labels_on_the_padding_side(tokenizers):
    rows = [{"input_ids": [101, 7, 102], "labels": [1, 2, 3]}, {"input_ids": [101], "labels": [4]}]
    for side, expected in (
        ("right", [[1, 2, 3], [4, -100, -100]]),
        ("left", [[1, 2, 3], [-100, -100, 4]]),
    ):
        batch = fastcollate.DataCollatorForTokenClassification(tokenizers[side])(rows)
        assert batch["labels"].tolist() == expected
        assert batch["labels"].dtype == torch.int64
        assert list(batch) == ["input_ids", "attention_mask", "labels"]


def test_token_classification_call_and_framework_methods(tokenizers):
    rows = [{"input_ids": [101, 7, 102], "label": [1, 2, 3]}, {"input_ids": [101], "label": [4]}]
    collator = fastcollate.DataCollatorForTokenClassification(tokenizers["right"])
    reference = transformers.DataCollatorForTokenClassification(tokenizers["right"])
    assert_same_batch(collator(rows, return_tensors="np"), reference(rows, return_tensors="np"))
    assert_same_batch(collator.numpy_call(rows), reference.numpy_call(rows))
    assert_same_batch(collator.torch_call(rows), reference.torch_call(rows))
    with pytest.raises(ValueError, match="not recognized"):
        collator(rows, return_tensors="tf")


# --- DataCollatorForSeq2Seq ---------------------------------------------------------------------


@st.composite
def seq2seq_case(draw):
    options = draw(padding_options())
    size = draw(st.integers(1, 5))
    equal = no_padding(options["padding"])
    lengths = draw_lengths(draw, size, equal)
    label_lengths = draw_lengths(draw, size, equal, high=12)
    fmt = draw(st.sampled_from(FORMATS))
    label_fmt = draw(st.sampled_from(FORMATS))
    label_mode = draw(st.sampled_from(["labels", "labels", "label", "none", "absent"]))
    with_mask = draw(st.booleans())
    rows = []
    for length, label_length in zip(lengths, label_lengths, strict=True):
        row = {"input_ids": to_format(draw(ids(length)), fmt)}
        if with_mask:
            row["attention_mask"] = to_format([1] * length, fmt)
        labels = draw(st.lists(st.integers(1, 60), min_size=label_length, max_size=label_length))
        if label_mode in ("labels", "label"):
            row[label_mode] = to_format(labels, label_fmt)
        elif label_mode == "none":
            row["labels"] = None
        rows.append(row)
    options["label_pad_token_id"] = draw(st.sampled_from([-100, 0, 3]))
    # T5's _shift_right cannot take a (B, 0) labels tensor, nor numpy labels.
    options["with_model"] = (
        draw(st.booleans()) and options["return_tensors"] == "pt" and min(label_lengths) > 0
    )
    return rows, options


@SETTINGS
@given(case=seq2seq_case())
def test_seq2seq_matches(tokenizers, t5_model, case):
    rows, options = case
    tokenizer = tokenizers[options["side"]]
    longest = max(
        [len(r["input_ids"]) for r in rows]
        + [len(r[k]) for r in rows for k in ("labels", "label") if r.get(k) is not None]
    )
    kwargs = {
        "model": t5_model if options["with_model"] else None,
        "padding": options["padding"],
        "max_length": resolve_max_length(options, longest),
        "pad_to_multiple_of": options["pad_to_multiple_of"],
        "label_pad_token_id": options["label_pad_token_id"],
        "return_tensors": options["return_tensors"],
    }
    ours = fastcollate.DataCollatorForSeq2Seq(tokenizer, **kwargs)
    theirs = transformers.DataCollatorForSeq2Seq(tokenizer, **kwargs)
    run_both(ours, theirs, rows)


def test_seq2seq_labels_padded_separately_with_decoder_input_ids(tokenizers, t5_model):
    rows = [
        {"input_ids": [101, 7, 102], "labels": [5, 6, 7, 8, 9]},
        {"input_ids": [101, 102], "labels": [4]},
    ]
    for side in ("right", "left"):
        kwargs = {"model": t5_model, "pad_to_multiple_of": 4}
        ours = fastcollate.DataCollatorForSeq2Seq(tokenizers[side], **kwargs)(rows)
        theirs = transformers.DataCollatorForSeq2Seq(tokenizers[side], **kwargs)(rows)
        assert ours["labels"].shape == (2, 8) and ours["input_ids"].shape == (2, 4)
        assert list(ours) == ["input_ids", "attention_mask", "labels", "decoder_input_ids"]
        assert_same_batch(ours, theirs)


def test_seq2seq_without_labels_gives_labels_none(tokenizers):
    for rows in (
        [{"input_ids": [101, 7]}, {"input_ids": [101]}],
        [{"input_ids": [101, 7], "labels": None}, {"input_ids": [101], "labels": None}],
    ):
        ours = fastcollate.DataCollatorForSeq2Seq(tokenizers["right"])(rows)
        theirs = transformers.DataCollatorForSeq2Seq(tokenizers["right"])(rows)
        assert ours["labels"] is None
        assert_same_batch(ours, theirs)


def test_seq2seq_label_key_beside_labels_key_replaces_it(tokenizers):
    rows = [
        {"input_ids": [101, 7], "labels": [1, 1], "label": [5, 6, 7]},
        {"input_ids": [101], "labels": [1], "label": [8]},
    ]
    rows = [{"input_ids": r["input_ids"], "labels": [1, 1], "label": r["label"]} for r in rows]
    ours = fastcollate.DataCollatorForSeq2Seq(tokenizers["right"])(rows)
    theirs = transformers.DataCollatorForSeq2Seq(tokenizers["right"])(rows)
    assert_same_batch(ours, theirs)
    assert ours["labels"].tolist() == [[5, 6, 7], [8, -100, -100]]


# --- DataCollatorWithFlattening -----------------------------------------------------------------


@st.composite
def flattening_case(draw):
    size = draw(st.integers(1, 6))
    fmt = draw(st.sampled_from(FORMATS))
    with_labels = draw(st.booleans())
    with_mask = draw(st.booleans())
    rows = []
    for _ in range(size):
        length = draw(st.integers(0, 9))
        row = {"input_ids": to_format(draw(ids(length)), fmt)}
        if with_mask:
            row["attention_mask"] = to_format([1] * length, fmt)
        if with_labels:
            labels = draw(st.lists(st.integers(-100, 50), min_size=length, max_size=length))
            row["labels"] = to_format(labels, fmt)
        rows.append(row)
    options = {
        "return_position_ids": draw(st.booleans()),
        "separator_id": draw(st.sampled_from([-100, 0, 7])),
        "return_flash_attn_kwargs": draw(st.booleans()),
        "return_seq_idx": draw(st.booleans()),
        "position_ids_start": draw(st.sampled_from([0, 2, 5])),
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
    }
    call_separator = draw(st.sampled_from([None, -1, 9]))
    return rows, options, call_separator


@SETTINGS
@given(case=flattening_case())
def test_flattening_matches(case):
    """Rows with empty input_ids are left out as transformers 5.24 does; older transformers
    packed them into labels longer than input_ids, so there they are compared left out."""
    rows, options, call_separator = case
    ours = fastcollate.DataCollatorWithFlattening(**options)
    theirs = transformers.DataCollatorWithFlattening(**options)

    reference = flattening_as_5_24(lambda rows: theirs(rows, separator_id=call_separator))

    compared = run_both(lambda r: ours(r, separator_id=call_separator), reference, rows)
    assert compared == any(len(row["input_ids"]) for row in rows)


def test_flattening_layout_and_separate_cu_seq_lens():
    rows = [{"input_ids": [5, 6, 7]}, {"input_ids": np.array([8, 9])}]
    batch = fastcollate.DataCollatorWithFlattening(
        return_flash_attn_kwargs=True, return_seq_idx=True, position_ids_start=2
    )(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9]]
    assert batch["labels"].tolist() == [[-100, 6, 7, -100, 9]]
    assert batch["position_ids"].tolist() == [[2, 3, 4, 2, 3]]
    assert batch["seq_idx"].tolist() == [[0, 0, 0, 1, 1]]
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 5]
    assert batch["cu_seq_lens_q"] is not batch["cu_seq_lens_k"]
    assert batch["max_length_q"] == batch["max_length_k"] == 3
    assert type(batch["max_length_q"]) is int
    with pytest.raises(ValueError, match="return_tensors"):
        fastcollate.DataCollatorWithFlattening()(rows, return_tensors="tf")


# --- DataCollatorForLanguageModeling ------------------------------------------------------------


# mask_rng="torch" masks with transformers' own methods and random streams: the same masks as
# transformers' collator under the same seed. The default native masking is checked against
# transformers' distributions in tests/collators/test_masking.py.
TORCH_MASKS = {"mask_rng": "torch"}
MASK_PROBABILITIES = [(0.8, 0.1), (1.0, 0.0), (0.0, 1.0), (0.5, 0.4), (0.5, 0.0)]


@st.composite
def language_modeling_case(draw):
    size = draw(st.integers(1, 5))
    pad_to_multiple_of = draw(st.one_of(st.none(), st.integers(1, 8)))
    equal = draw(st.booleans())
    lengths = draw_lengths(draw, size, equal, low=1, high=10)
    mode = draw(st.sampled_from(["mapping", "mapping", "sequence"]))
    fmt = draw(st.sampled_from(FORMATS))
    special_mask = draw(st.booleans())
    token_types = draw(st.booleans())
    rows = []
    for length in lengths:
        values = draw(ids(length))
        if mode == "sequence":
            rows.append(to_format(values, fmt))
            continue
        row = {"input_ids": to_format(values, fmt)}
        if token_types:
            row["token_type_ids"] = to_format([0] * length, fmt)
        if special_mask:
            flags = draw(st.lists(st.integers(0, 1), min_size=length, max_size=length))
            row["special_tokens_mask"] = to_format(flags, fmt)
        rows.append(row)
    mask_replace_prob, random_replace_prob = draw(st.sampled_from(MASK_PROBABILITIES))
    options = {
        "mlm": draw(st.booleans()),
        "mlm_probability": draw(st.sampled_from([0.0, 0.15, 0.5, 1.0])),
        "mask_replace_prob": mask_replace_prob,
        "random_replace_prob": random_replace_prob,
        "pad_to_multiple_of": pad_to_multiple_of,
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
        "seed": draw(st.one_of(st.none(), st.integers(0, 2**16))),
    }
    extra = {
        "side": draw(st.sampled_from(["right", "left"])),
        "global_seed": draw(st.integers(0, 2**16)),
    }
    return rows, options, extra


def seeded(fn, seed):
    """Calls fn with the global torch and numpy RNGs in the same state."""

    def call(rows):
        torch.manual_seed(seed)
        np.random.seed(seed)
        return fn(rows)

    return call


@SETTINGS
@given(case=language_modeling_case())
def test_language_modeling_matches_under_the_same_seed(tokenizers, case):
    rows, options, extra = case
    tokenizer = tokenizers[extra["side"]]
    ours = fastcollate.DataCollatorForLanguageModeling(tokenizer, **options, **TORCH_MASKS)
    theirs = transformers.DataCollatorForLanguageModeling(tokenizer, **options)
    reference = theirs
    if isinstance(rows[0], torch.Tensor) and options["return_tensors"] == "np":
        # transformers cannot pad torch rows into numpy (np.full(dtype=torch.int64) raises);
        # fastcollate pads them as it pads the same rows given as numpy arrays.
        def reference(r):
            return theirs([row.numpy() for row in r])

    # Two calls: a seeded collator's generator carries on from one batch to the next.
    for step in range(2):
        seed = extra["global_seed"] + step
        assert run_both(seeded(ours, seed), seeded(reference, seed), rows)


SENTENCES = [
    "tokenization of unbelievably long words",
    "the quick brown fox",
    "transformers collators are interchangeable",
    "hi",
    "supercalifragilistic expialidocious",
]


@SETTINGS
@given(
    picks=st.lists(st.integers(0, len(SENTENCES) - 1), min_size=1, max_size=4),
    probability=st.sampled_from([0.15, 0.5, 1.0]),
    return_tensors=st.sampled_from(["pt", "np"]),
    seed=st.integers(0, 2**16),
    with_special_mask=st.booleans(),
)
def test_whole_word_masking_matches(
    tokenizers, picks, probability, return_tensors, seed, with_special_mask
):
    tokenizer = tokenizers["right"]
    encoded = tokenizer(
        [SENTENCES[i] for i in picks],
        return_offsets_mapping=True,
        return_special_tokens_mask=with_special_mask,
        padding="max_length",
        max_length=16,
    )
    rows = [{k: encoded[k][i] for k in encoded} for i in range(len(picks))]
    kwargs = {
        "whole_word_mask": True,
        "mlm_probability": probability,
        "return_tensors": return_tensors,
        "seed": seed,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Setting mask_replace_prob to 1", from both
        ours = fastcollate.DataCollatorForLanguageModeling(tokenizer, **kwargs, **TORCH_MASKS)
        theirs = transformers.DataCollatorForLanguageModeling(tokenizer, **kwargs)
    assert run_both(ours, theirs, rows)


def test_special_tokens_from_an_overriding_tokenizer_are_asked_row_by_row(tokenizers):
    """A tokenizer with its own get_special_tokens_mask is used as transformers uses it."""
    tokenizer = copy.deepcopy(tokenizers["right"])

    class NothingSpecial(type(tokenizer)):
        def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, **kwargs):
            return [0] * len(token_ids_0)

    tokenizer.__class__ = NothingSpecial
    rows = [{"input_ids": [101, 2000, 102]}, {"input_ids": [101, 102]}]
    ours = fastcollate.DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=1.0, **TORCH_MASKS
    )
    theirs = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=1.0)
    torch.manual_seed(0)
    batch = ours(rows)
    torch.manual_seed(0)
    assert_same_batch(batch, theirs(rows))
    assert (batch["labels"] != -100).all()  # even [CLS], [SEP] and padding were maskable


def test_seeded_generator_in_a_dataloader_worker_is_seed_plus_worker_id(tokenizers, monkeypatch):
    import multiprocessing
    import types

    rows = [{"input_ids": [101, 2000, 2001, 2002, 102]}, {"input_ids": [101, 2003, 102]}]
    worker = types.SimpleNamespace(name="Worker-1")
    monkeypatch.setattr(multiprocessing, "current_process", lambda: worker)
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: types.SimpleNamespace(id=3))
    for return_tensors in ("pt", "np"):
        kwargs = {"seed": 11, "mlm_probability": 0.5, "return_tensors": return_tensors}
        ours = fastcollate.DataCollatorForLanguageModeling(
            tokenizers["right"], **kwargs, **TORCH_MASKS
        )
        theirs = transformers.DataCollatorForLanguageModeling(tokenizers["right"], **kwargs)
        assert_same_batch(ours(rows), theirs(rows))
        assert_same_batch(ours(rows), theirs(rows))  # the generator carries on
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: None)
    for mask_rng in ("native", "torch"):
        outside = fastcollate.DataCollatorForLanguageModeling(
            tokenizers["right"], seed=1, mask_rng=mask_rng
        )
        with pytest.raises(ValueError, match="Worker process information"):
            outside(rows)


def test_causal_labels_mask_padding(tokenizers):
    rows = [{"input_ids": [101, 7, 102]}, {"input_ids": [101, 102]}]
    batch = fastcollate.DataCollatorForLanguageModeling(tokenizers["left"], mlm=False)(rows)
    assert batch["labels"].tolist() == [[101, 7, 102], [-100, 101, 102]]
    assert batch["input_ids"].tolist() == [[101, 7, 102], [0, 101, 102]]


def test_language_modeling_keeps_dtype_of_sequence_rows(tokenizers):
    tokenizer = tokenizers["right"]
    rows = [np.array([101, 7, 102], dtype=np.int32), np.array([101, 102], dtype=np.int32)]
    for kwargs in ({"return_tensors": "np"}, {"return_tensors": "pt"}):
        ours = fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False, **kwargs)(rows)
        theirs = transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False, **kwargs)(rows)
        assert_same_batch(ours, theirs)


# --- Bad input ----------------------------------------------------------------------------------


def no_pad_token(tokenizer):
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.pad_token = None
    return tokenizer


def raises_untouched(exception, match, fn, rows):
    before = snapshot(rows)
    with pytest.raises(exception, match=match):
        fn(rows)
    assert_unchanged(rows, before)


def test_token_classification_bad_labels(tokenizers):
    collator = fastcollate.DataCollatorForTokenClassification(tokenizers["right"])
    missing = [{"input_ids": [1, 2], "labels": [0, 0]}, {"input_ids": [1]}]
    raises_untouched(ValueError, r"row 1 has no key 'labels'", collator, missing)
    too_long = [{"input_ids": [1, 2], "labels": [0, 0]}, {"input_ids": [1], "labels": [0, 0, 0]}]
    raises_untouched(ValueError, r"'labels' in row 1 has length 3", collator, too_long)
    strings = [{"input_ids": [1, 2], "labels": ["B-PER", "O"]}]
    raises_untouched(TypeError, r"'labels' in row 0", collator, strings)
    capped = fastcollate.DataCollatorForTokenClassification(
        tokenizers["right"], padding="max_length", max_length=2
    )
    raises_untouched(
        ValueError, r"'input_ids' in row 0 has length 3", capped, [{"input_ids": [1, 2, 3]}]
    )
    raises_untouched(ValueError, "input_ids", collator, [{"labels": [1]}])
    no_pad = fastcollate.DataCollatorForTokenClassification(no_pad_token(tokenizers["right"]))
    raises_untouched(ValueError, "padding token", no_pad, [{"input_ids": [1], "labels": [1]}])
    with pytest.raises(ValueError, match="empty batch"):
        collator([])


def test_seq2seq_bad_labels(tokenizers):
    tokenizer = tokenizers["right"]
    capped = fastcollate.DataCollatorForSeq2Seq(tokenizer, padding="max_length", max_length=3)
    too_long = [{"input_ids": [1], "labels": [1, 2]}, {"input_ids": [1], "labels": [1, 2, 3, 4]}]
    raises_untouched(ValueError, r"'labels' in row 1 has length 4", capped, too_long)
    unpadded = fastcollate.DataCollatorForSeq2Seq(tokenizer, padding=False)
    ragged = [{"input_ids": [1], "labels": [1, 2]}, {"input_ids": [2], "labels": [1]}]
    raises_untouched(ValueError, r"'labels' in row 1 has length 1", unpadded, ragged)
    collator = fastcollate.DataCollatorForSeq2Seq(tokenizer)
    missing = [{"input_ids": [1], "labels": [1]}, {"input_ids": [2]}]
    raises_untouched(ValueError, r"row 1 has no key 'labels'", collator, missing)
    partly_none = [{"input_ids": [1], "labels": [1]}, {"input_ids": [2], "labels": None}]
    raises_untouched(TypeError, r"'labels' in row 1", collator, partly_none)
    with pytest.raises(ValueError, match="return_tensors"):
        fastcollate.DataCollatorForSeq2Seq(tokenizer, return_tensors="tf")([{"input_ids": [1]}])


def test_flattening_bad_input():
    collator = fastcollate.DataCollatorWithFlattening()
    mismatched = [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [3], "labels": [1, 2]}]
    raises_untouched(ValueError, r"'labels' in row 1 has length 2", collator, mismatched)
    missing = [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [3]}]
    raises_untouched(ValueError, r"row 1 has no key 'labels'", collator, missing)
    empty = [{"input_ids": []}, {"input_ids": np.array([], dtype=np.int64)}]
    raises_untouched(ValueError, r"'input_ids' holds no tokens in any row", collator, empty)
    words = [{"input_ids": [1]}, {"input_ids": ["a"]}]
    raises_untouched(TypeError, r"'input_ids' in row 1", collator, words)
    scalars = [{"input_ids": 3}]
    raises_untouched(ValueError, r"'input_ids' in row 0 is a single number", collator, scalars)
    raises_untouched(ValueError, "input_ids", collator, [{"labels": [1]}])
    with pytest.raises(ValueError, match="empty batch"):
        collator([])


def test_language_modeling_bad_input(tokenizers):
    tokenizer = tokenizers["right"]
    no_mask = copy.deepcopy(tokenizer)
    no_mask.mask_token = None
    with pytest.raises(ValueError, match="mask token"):
        fastcollate.DataCollatorForLanguageModeling(no_mask)
    fastcollate.DataCollatorForLanguageModeling(no_mask, mlm=False)  # causal LM needs none
    with pytest.raises(ValueError, match="mlm_probability"):
        fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm_probability=1.5)
    with pytest.raises(ValueError, match="should not exceed 1"):
        fastcollate.DataCollatorForLanguageModeling(
            tokenizer, mask_replace_prob=0.8, random_replace_prob=0.3
        )
    with pytest.raises(ValueError, match="Whole word masking"):
        fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False, whole_word_mask=True)
    with pytest.raises(ValueError, match="mask_rng must be 'native' or 'torch'"):
        fastcollate.DataCollatorForLanguageModeling(tokenizer, mask_rng="numpy")

    unpaddable = fastcollate.DataCollatorForLanguageModeling(no_pad_token(tokenizer), mlm=False)
    raises_untouched(ValueError, "pad token", unpaddable, [[1, 2], [3]])
    same_length = unpaddable([[1, 2], [3, 4]])  # no padding needed: no pad token needed
    assert same_length["input_ids"].tolist() == [[1, 2], [3, 4]]
    raises_untouched(ValueError, "padding token", unpaddable, [{"input_ids": [1, 2]}])

    collator = fastcollate.DataCollatorForLanguageModeling(tokenizer)
    raises_untouched(ValueError, "input_ids", collator, [{"ids": [1]}])
    raises_untouched(TypeError, r"'input_ids' in row 1", collator, [[1, 2], ["a", "b"]])
    raises_untouched(
        ValueError,
        r"row 1 has no key 'special_tokens_mask'",
        collator,
        [{"input_ids": [1], "special_tokens_mask": [1]}, {"input_ids": [2, 3]}],
    )
    with pytest.raises(ValueError, match="empty batch"):
        collator([])


# --- Where fastcollate deliberately differs -----------------------------------------------------


def test_labels_longer_than_the_target_raise_where_transformers_leaves_them_unpadded(tokenizers):
    """transformers never truncates: when every label row is longer than the target it returns
    labels wider than the padded inputs (or than max_length), which fails far away in the loss;
    fastcollate raises, naming the row."""
    tokenizer = tokenizers["right"]
    rows = [{"input_ids": [1, 2], "labels": [1, 2, 3]}, {"input_ids": [3, 4], "labels": [4, 5, 6]}]
    theirs = transformers.DataCollatorForTokenClassification(tokenizer)(copy.deepcopy(rows))
    assert theirs["labels"].shape != theirs["input_ids"].shape
    with pytest.raises(ValueError, match=r"'labels' in row 0 has length 3"):
        fastcollate.DataCollatorForTokenClassification(tokenizer)(rows)

    kwargs = {"padding": "max_length", "max_length": 2}
    theirs = transformers.DataCollatorForSeq2Seq(tokenizer, **kwargs)(copy.deepcopy(rows))
    assert theirs["labels"].shape == (2, 3)
    with pytest.raises(ValueError, match=r"'labels' in row 0 has length 3.*max_length=2"):
        fastcollate.DataCollatorForSeq2Seq(tokenizer, **kwargs)(rows)


def test_flattening_raises_where_transformers_packs_mismatched_lengths():
    """Labels of another length are packed as they are: transformers returns labels and
    input_ids of different lengths."""
    rows = [{"input_ids": [1, 2], "labels": [1, 2, 3]}]
    theirs = transformers.DataCollatorWithFlattening()(copy.deepcopy(rows))
    assert theirs["labels"].shape != theirs["input_ids"].shape
    with pytest.raises(ValueError, match=r"'labels' in row 0 has length 3"):
        fastcollate.DataCollatorWithFlattening()(rows)


def test_flattening_leaves_out_empty_rows_on_every_transformers_version():
    """transformers 5.24 leaves rows with empty input_ids out, labels and all; before 5.24
    it gave them a separator label past their end (labels longer than input_ids)."""
    rows = [
        {"input_ids": [], "labels": [7, 7, 7]},
        {"input_ids": [1, 2], "labels": [3, 4]},
        {"input_ids": np.array([], dtype=np.int64), "labels": []},
        {"input_ids": [5], "labels": [6]},
    ]
    options = {"return_flash_attn_kwargs": True, "return_seq_idx": True}
    ours = fastcollate.DataCollatorWithFlattening(**options)(rows)
    assert ours["input_ids"].tolist() == [[1, 2, 5]]
    assert ours["labels"].tolist() == [[-100, 4, -100]]
    assert ours["seq_idx"].tolist() == [[0, 0, 1]]
    assert ours["cu_seq_lens_q"].tolist() == [0, 2, 3]
    theirs = transformers.DataCollatorWithFlattening(**options)(copy.deepcopy(rows))
    if LEAVES_OUT_EMPTY_ROWS:
        assert_same_batch(ours, theirs)
    else:
        assert theirs["labels"].shape != theirs["input_ids"].shape
