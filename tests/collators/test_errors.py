"""Bad input gets a Python exception that names the key and row; nothing crashes, and the
caller's data is never modified."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity


def rows3():
    return [{"input_ids": [1, 2, 3], "label": 0}, {"input_ids": [4], "label": 1},
            {"input_ids": [5, 6], "label": 0}]


def test_missing_key_names_key_and_row(bert_tokenizer):
    rows = rows3()
    del rows[2]["label"]
    with pytest.raises(ValueError, match=r"row 2 has no key 'label'"):
        fastcollate.pad(rows, bert_tokenizer)
    with pytest.raises(ValueError, match=r"row 2 has no key 'label'"):
        fastcollate.default_data_collator([{"label": 1}, {"label": 2}, {"x": 1}])


def test_missing_main_input(bert_tokenizer):
    with pytest.raises(ValueError, match="input_ids"):
        fastcollate.pad([{"ids": [1]}], bert_tokenizer)
    rows = rows3()
    del rows[1]["input_ids"]
    with pytest.raises(ValueError, match=r"row 1 has no key 'input_ids'"):
        fastcollate.pad(rows, bert_tokenizer)


@pytest.mark.parametrize(
    "bad, kind, match",
    [
        ("x", TypeError, r"'input_ids' in row 1 holds text \(a str at position 1\), not token ids; "
         r"tokenize first"),
        # Token ids must be integers: transformers raises for a float first value and returns
        # float ids (no embedding takes them) for a later one; fastcollate raises for any.
        (1.5, ValueError, r"'input_ids' in row 1 holds floats, not token ids; token ids must be "
         r"integers: tokenize first"),
        (None, TypeError, r"'input_ids' in row 1 holds a NoneType at position 1"),
        ([1, 2], ValueError, r"'input_ids' in row 1 nests deeper"),
        (2**70, ValueError, r"'input_ids' in row 1 holds an integer at position 1 that does not"),
    ],
)
def test_bad_sequence_values(bert_tokenizer, bad, kind, match):
    rows = [{"input_ids": [1, 2]}, {"input_ids": [3, bad, 4]}]
    snapshot = copy.deepcopy(rows)
    if kind is None:
        out = fastcollate.pad(rows, bert_tokenizer, return_tensors="np")
        assert out["input_ids"].dtype == np.float64
    else:
        with pytest.raises(kind, match=match):
            fastcollate.pad(rows, bert_tokenizer, return_tensors="pt")
    assert rows == snapshot


def test_uint64_overflow_in_numpy_rows(bert_tokenizer):
    rows = [{"input_ids": np.array([1, 2**63 + 5], dtype=np.uint64)}]
    with pytest.raises(ValueError, match=r"'input_ids' in row 0 .* position 1 .*int64"):
        fastcollate.pad(rows, bert_tokenizer)


def test_empty_batch(bert_tokenizer):
    with pytest.raises(ValueError, match="empty batch"):
        fastcollate.pad([], bert_tokenizer)
    with pytest.raises(ValueError, match="empty batch"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer)([])
    with pytest.raises(ValueError, match="empty batch"):
        fastcollate.default_data_collator([])


def test_unknown_padding_strategy_and_side(bert_tokenizer):
    with pytest.raises(ValueError, match="'shortest' is not a valid padding strategy"):
        fastcollate.pad(rows3(), bert_tokenizer, padding="shortest")
    with pytest.raises(ValueError, match="padding_side must be 'left' or 'right'"):
        fastcollate.pad(rows3(), bert_tokenizer, padding_side="middle")
    with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive integer"):
        fastcollate.pad(rows3(), bert_tokenizer, pad_to_multiple_of=0)
    with pytest.raises(ValueError, match="return_tensors='tf' is not supported"):
        fastcollate.pad(rows3(), bert_tokenizer, return_tensors="tf")


def test_no_pad_token():
    # Without a tokenizer the message says first what to pass.
    with pytest.raises(ValueError, match="^pass pad_token_id= to fastcollate.pad"):
        fastcollate.pad(rows3())
    # Without padding no pad token is needed (equal lengths stack).
    out = fastcollate.pad([{"input_ids": [1, 2]}, {"input_ids": [3, 4]}], padding=False,
                          return_tensors="np")
    np.testing.assert_array_equal(out["input_ids"], [[1, 2], [3, 4]])


def test_too_long_under_max_length_names_row(bert_tokenizer):
    rows = rows3()
    with pytest.raises(ValueError, match=r"'input_ids' in row 0 has length 3, longer than "
                                         r"max_length=2.*truncat"):
        fastcollate.pad(rows, bert_tokenizer, padding="max_length", max_length=2)


def test_ragged_unpadded_keys(bert_tokenizer):
    rows = [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [3], "labels": [3]}]
    with pytest.raises(ValueError, match=r"'labels' in row 1 has length 1 but row 0 has length 2"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer)(rows)
    with pytest.raises(ValueError, match=r"'label_ids' in row 1 has length 1"):
        fastcollate.default_data_collator([{"label_ids": [1, 2]}, {"label_ids": [1]}])
    with pytest.raises(ValueError, match=r"'input_ids' in row 1 has length 3"):
        fastcollate.default_data_collator([{"input_ids": [1, 2]}, {"input_ids": [1, 2, 3]}])


def test_mismatched_token_type_ids(bert_tokenizer):
    rows = [{"input_ids": [1, 2], "token_type_ids": [0, 0]},
            {"input_ids": [3], "token_type_ids": [0, 0]}]
    with pytest.raises(ValueError, match=r"'token_type_ids' in row 1 has length 2 but "
                                         r"'input_ids' has length 1"):
        fastcollate.pad(rows, bert_tokenizer)


def test_scalar_where_sequence_expected(bert_tokenizer):
    with pytest.raises(ValueError, match=r"'input_ids' in row 1 is a scalar"):
        fastcollate.pad([{"input_ids": [1]}, {"input_ids": 5}], bert_tokenizer)


def test_row_that_is_not_a_mapping(bert_tokenizer):
    with pytest.raises(TypeError, match="row 1 is a list"):
        fastcollate.pad([{"input_ids": [1]}, [1, 2]], bert_tokenizer)


def test_deeper_nesting_in_tensors(bert_tokenizer):
    rows = [{"input_ids": torch.ones(2, 2, dtype=torch.long)}]
    with pytest.raises(ValueError, match=r"'input_ids' in row 0 nests deeper"):
        fastcollate.pad(rows, bert_tokenizer)


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3)
    | st.binary(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2),
                                                                      children, max_size=2),
    max_leaves=8,
)


@settings(max_examples=examples(200), deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["input_ids", "label", "attention_mask"]),
                                     junk, max_size=3), max_size=4),
       return_tensors=st.sampled_from([None, "np", "pt"]))
def test_malformed_input_never_crashes(rows, return_tensors):
    snapshot = copy.deepcopy(rows)
    for call in (
        lambda: fastcollate.pad(rows, pad_token_id=0, return_tensors=return_tensors),
        lambda: fastcollate.default_data_collator(rows, return_tensors or "pt"),
    ):
        try:
            call()
        except (ValueError, TypeError):
            pass
    assert rows == snapshot


TEXT_LABELS = [("label", "positive"), ("labels", ["positive", "negative"]),
               ("label", np.str_("positive"))]


@pytest.mark.parametrize("where", [0, 1])
@pytest.mark.parametrize(
    "call, name, label",
    [(call, name, label) for call in ["default_pt", "default_np", "with_padding_pt", "pad_pt"]
     for name, label in TEXT_LABELS
     # numpy holds strings: a 'labels' key of them is stacked as a string array, by both.
     if (call, name) != ("default_np", "labels")],
)
def test_text_labels_say_to_map_them_to_ids(bert_tokenizer, call, name, label, where):
    # Class names left in the rows (a dataset's label column before it was encoded): both
    # libraries refuse them; fastcollate names the key and row and says what to do.
    import transformers

    rows = [{"input_ids": [101, 5, 102], name: 0 if name == "label" else [0, 1]}
            for _ in range(3)]
    rows[where][name] = label
    snapshot = copy.deepcopy(rows)
    calls = {
        "default_pt": (fastcollate.default_data_collator, transformers.default_data_collator),
        "default_np": (
            lambda rows: fastcollate.default_data_collator(rows, return_tensors="np"),
            lambda rows: transformers.default_data_collator(rows, return_tensors="np"),
        ),
        "with_padding_pt": (
            fastcollate.DataCollatorWithPadding(bert_tokenizer),
            transformers.DataCollatorWithPadding(bert_tokenizer),
        ),
        "pad_pt": (
            lambda rows: fastcollate.pad(rows, bert_tokenizer, return_tensors="pt"),
            lambda rows: bert_tokenizer.pad(rows, return_tensors="pt"),
        ),
    }
    ours, theirs = calls[call]
    with pytest.raises((ValueError, TypeError)):
        theirs(copy.deepcopy(rows))
    with pytest.raises(ValueError) as raised:
        ours(rows)
    message = str(raised.value)
    assert f"'{name}' in row {where} is text" in message
    assert "map them to integer ids" in message
    assert rows == snapshot


@pytest.mark.parametrize(
    "make",
    [
        lambda tok: (lambda rows: fastcollate.pad(rows, tok)),
        lambda tok: fastcollate.DataCollatorWithPadding(tok),
        lambda tok: fastcollate.DataCollatorForTokenClassification(tok),
        lambda tok: fastcollate.DataCollatorForSeq2Seq(tok),
        lambda tok: fastcollate.DataCollatorForLanguageModeling(tok, mlm=False),
        lambda tok: fastcollate.DataCollatorWithFlattening(),
        lambda tok: fastcollate.DataCollatorForMultipleChoice(tok),
        lambda tok: fastcollate.default_data_collator,
    ],
    ids=["pad", "WithPadding", "TokenClassification", "Seq2Seq", "LanguageModeling",
         "WithFlattening", "MultipleChoice", "default_data_collator"],
)
def test_text_in_input_ids_says_tokenize_first_on_every_entry_point(make, bert_tokenizer):
    collate = make(bert_tokenizer)
    rows = [{"input_ids": [101, 102]}, {"input_ids": ["a", "review"]}]
    if collate is fastcollate.default_data_collator:
        rows = [{"input_ids": [101, 102]}, {"input_ids": ["a", "b"]}]
    if isinstance(collate, fastcollate.DataCollatorForMultipleChoice):
        rows = [{"input_ids": [[101], [102]]}, {"input_ids": [["a"], ["b"]]}]
    with pytest.raises((TypeError, ValueError)) as raised:
        collate(rows)
    message = str(raised.value)
    # Multiple choice numbers the flattened choices (row 1's first choice is row 2).
    row = 2 if isinstance(collate, fastcollate.DataCollatorForMultipleChoice) else 1
    assert f"'input_ids' in row {row} holds text" in message, message
    assert "tokenize first" in message, message


@pytest.mark.parametrize("padding_free", [False, True])
def test_trl_text_and_floats_say_tokenize_first(padding_free):
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    collate = trl.DataCollatorForLanguageModeling(pad_token_id=0, padding_free=padding_free)
    for bad, words in ((["a", "b"], "holds text"), ([1.5, 2.5], "holds floats or bools")):
        with pytest.raises(TypeError) as raised:
            collate([{"input_ids": [5, 6]}, {"input_ids": bad}])
        message = str(raised.value)
        assert f"'input_ids' in row 1 {words}" in message and "tokenize first" in message, message


def trl_collators():
    """fastcollate's TRL collators (their rows: token lists under TRL's keys); none without TRL."""
    try:
        import fastcollate.trl as trl
    except ImportError:
        return []
    return [
        pytest.param(lambda tok: trl.DataCollatorForLanguageModeling(pad_token_id=0),
                     {"input_ids": [5, 6]}, id="trl.LanguageModeling"),
        pytest.param(lambda tok: trl.DataCollatorForLanguageModeling(pad_token_id=0,
                                                                 padding_free=True),
                     {"input_ids": [5, 6]}, id="trl.LanguageModeling-padding_free"),
        pytest.param(lambda tok: trl.DataCollatorForPreference(pad_token_id=0),
                     {"prompt_ids": [1], "chosen_ids": [2, 3], "rejected_ids": [4]},
                     id="trl.Preference"),
        pytest.param(lambda tok: trl.RewardDataCollatorForPreference(pad_token_id=0),
                     {"chosen_ids": [2, 3], "rejected_ids": [4]}, id="trl.RewardPreference"),
        pytest.param(lambda tok: trl.DataCollatorForUnpairedPreference(pad_token_id=0),
                     {"prompt_ids": [1], "completion_ids": [2, 3], "label": True},
                     id="trl.UnpairedPreference"),
    ]


@pytest.mark.parametrize(
    ("make", "row"),
    [
        pytest.param(lambda tok: fastcollate.DataCollatorWithPadding(tok),
                     {"input_ids": [1, 2]}, id="WithPadding"),
        pytest.param(lambda tok: (lambda rows: fastcollate.pad(rows, tok)),
                     {"input_ids": [1, 2]}, id="pad"),
        pytest.param(lambda tok: fastcollate.DataCollatorWithFlattening(), {"input_ids": [1, 2]},
                     id="WithFlattening"),
        pytest.param(lambda tok: fastcollate.default_data_collator, {"input_ids": [1, 2]},
                     id="default_data_collator"),
        *trl_collators(),
    ],
)
def test_a_batch_that_is_neither_rows_nor_columns_is_a_clear_error(make, row, bert_tokenizer):
    # A numpy object array of row dicts (found by the fuzz test on TRL's reward collator): not
    # a list or tuple of rows, not a mapping of columns. An error that names the type passed,
    # or the bad row, never an AttributeError from inside the read.
    batch = np.empty(2, dtype=object)
    batch[0], batch[1] = dict(row), dict(row)
    try:
        make(bert_tokenizer)(batch)
    except (TypeError, ValueError) as error:
        assert "ndarray" in str(error) or "row" in str(error), error
