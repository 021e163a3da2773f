"""Regression tests for the trust defects (no crash, no panic, no silent value change) and for
each deliberate difference from transformers that docs/differences.md lists."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

import fastcollate
from tests.support.compare import assert_same_batch

ROW = [{"input_ids": [1, 2, 3]}]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"padding": "max_length", "max_length": 2**45}, MemoryError),
        ({"pad_to_multiple_of": 2**45}, MemoryError),
        ({"padding": "max_length", "max_length": 2**63}, ValueError),
        ({"pad_to_multiple_of": 2**63}, ValueError),
        ({"padding": "max_length", "max_length": 2**64}, ValueError),
        ({"pad_to_multiple_of": 2**100}, ValueError),
    ],
)
def test_huge_targets_raise_instead_of_aborting_or_panicking(bert_tokenizer, options, error):
    with pytest.raises(error, match="input_ids|max_length|pad_to_multiple_of"):
        fastcollate.pad(ROW * 3, bert_tokenizer, return_tensors="np", **options)


def test_an_allocation_failure_does_not_abort_the_interpreter(model_path):
    """The abort the issue reported happened inside the extension: run it in a child."""
    code = (
        "import os, sys; os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "import fastcollate, transformers\n"
        f"tok = transformers.AutoTokenizer.from_pretrained({model_path!r})\n"
        "collate = fastcollate.DataCollatorWithPadding(tok, pad_to_multiple_of=2**45)\n"
        "try:\n    collate([{'input_ids': [1, 2, 3]}])\n"
        "except MemoryError as err:\n    print('MemoryError', err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MemoryError not enough memory for 'input_ids'" in done.stdout


def test_option_ints_out_of_range_are_value_errors(bert_tokenizer):
    with pytest.raises(ValueError, match="pad_token_id"):
        fastcollate.pad([{"input_ids": [1]}, {"input_ids": [1, 2]}], pad_token_id=2**63)
    with pytest.raises(ValueError, match="label_pad_token_id"):
        fastcollate.DataCollatorForTokenClassification(bert_tokenizer, label_pad_token_id=2**63)(
            [{"input_ids": [1], "labels": [1]}]
        )
    with pytest.raises(ValueError, match="separator_id"):
        fastcollate.DataCollatorWithFlattening(separator_id=-(2**64))([{"input_ids": [1]}])


def test_grouping_takes_a_batch_size_past_int64_as_transformers_does():
    torch.manual_seed(0)
    theirs = transformers.trainer_pt_utils.get_length_grouped_indices([3, 1, 2], 2**63)
    torch.manual_seed(0)
    assert fastcollate.get_length_grouped_indices([3, 1, 2], 2**63) == theirs == [0, 2, 1]
    with pytest.raises(ValueError, match="mega_batch_mult"):
        fastcollate.get_length_grouped_indices([3, 1, 2], 2, mega_batch_mult=-(2**64))


def test_nan_and_inf_never_become_integers(bert_tokenizer):
    with pytest.raises(ValueError, match="'labels' in row 0 holds inf"):
        fastcollate.DataCollatorForTokenClassification(bert_tokenizer)(
            [{"input_ids": [1, 2], "labels": [0.5, float("inf")]}]
        )
    with pytest.raises(ValueError, match="'labels' in row 0 holds NaN"):
        fastcollate.DataCollatorWithFlattening()(
            [{"input_ids": [1, 2, 3], "labels": [1, 2, float("nan")]}]
        )


def test_flattening_refuses_trl_packed_rows_that_transformers_misreads():
    rows = [{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": [2, 3]}]
    # transformers reads the packed row as one sequence: positions run across the boundary.
    theirs = transformers.DataCollatorWithFlattening()(rows)
    assert theirs["position_ids"].tolist() == [[0, 1, 2, 3, 4]]
    with pytest.raises(ValueError, match=r"row 0 has 'seq_lengths'.*fastcollate\.trl"):
        fastcollate.DataCollatorWithFlattening()(rows)
    assert rows == [{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": [2, 3]}]


def test_ints_beyond_2_53_stay_exact_beside_floats():
    rows = [{"input_ids": [1, 2, 3], "labels": [9007199254740993, 9007199254740993, 0.5]}]
    ours = fastcollate.DataCollatorWithFlattening()(rows)
    theirs = transformers.DataCollatorWithFlattening()(rows)
    assert ours["labels"].tolist() == [[-100, 9007199254740993, 0]]
    assert_same_batch(ours, theirs)
    rows = [{"x": [9007199254740993, 1]}, {"x": [0.5, 1.0]}]
    for rt in ("pt", "np"):
        ours = fastcollate.default_data_collator(rows, rt)
        assert_same_batch(ours, transformers.default_data_collator(rows, rt))


class Doubling(dict):
    """A dict subclass that transforms on access, as a lazy dataset row may."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        return [2 * v for v in value] if key == "input_ids" else value


def test_dict_subclass_rows_are_read_through_getitem(bert_tokenizer):
    rows = [Doubling(input_ids=[1, 2]), Doubling(input_ids=[3])]
    ours = fastcollate.pad(rows, bert_tokenizer, return_tensors="np")
    theirs = bert_tokenizer.pad(rows, return_tensors="np")
    assert ours["input_ids"].tolist() == [[2, 4], [6, 0]]
    assert_same_batch(ours, theirs)
    # transformers' token classification reads them with .items(), bypassing __getitem__.
    batch = fastcollate.DataCollatorForTokenClassification(bert_tokenizer)(
        [Doubling(input_ids=[1, 2], labels=[0, 1])]
    )
    assert batch["input_ids"].tolist() == [[2, 4]]


def test_malformed_batches_get_type_and_value_errors(bert_tokenizer):
    seq2seq = fastcollate.DataCollatorForSeq2Seq(bert_tokenizer)
    with pytest.raises(TypeError, match="row 1"):
        seq2seq([{"input_ids": [1], "labels": None}, 3])
    with pytest.raises(ValueError, match="label_ids"):
        fastcollate.default_data_collator([{"input_ids": [1], "label_ids": []}])
    rows = np.empty(2, dtype=object)
    rows[:] = [{"x": 1}, {"x": 2}]
    assert_same_batch(
        fastcollate.default_data_collator(rows), transformers.default_data_collator(rows)
    )


def test_smaller_mismatches_of_the_issue(bert_tokenizer):
    # An empty first row then tensor rows: tensors, as transformers returns.
    rows = [{"input_ids": []}, {"input_ids": torch.tensor([1, 2])}]
    assert_same_batch(fastcollate.pad(rows, bert_tokenizer), bert_tokenizer.pad(rows))
    # Big-endian and negative-stride numpy rows under "pt".
    rows = [{"x": np.array([1, 2], ">i4")}, {"x": np.array([3, 4, 5], "<i4")[::-1][:2]}]
    assert_same_batch(
        fastcollate.default_data_collator(rows), transformers.default_data_collator(rows)
    )
    # A one-element 1-d tensor label gives (B,), as torch.tensor reads it as a number.
    rows = [{"label": torch.tensor([1])}, {"label": torch.tensor([0])}]
    assert_same_batch(
        fastcollate.default_data_collator(rows), transformers.default_data_collator(rows)
    )


def test_arrays_beside_a_list_main_input_keep_their_dtype(bert_tokenizer):
    rows = [
        {"input_ids": [1, 2], "score": torch.tensor(0.1, dtype=torch.float64)},
        {"input_ids": [3], "score": torch.tensor(0.2, dtype=torch.float64)},
    ]
    ours = fastcollate.pad(rows, bert_tokenizer, return_tensors="pt")
    assert ours["score"].dtype == torch.float64
    assert_same_batch(ours, bert_tokenizer.pad(rows, return_tensors="pt"))


def test_padded_arrays_beside_a_list_main_input_are_padded_as_numbers(bert_tokenizer):
    """Difference: transformers adds its pad list to such an array elementwise."""
    rows = [
        {"input_ids": [1, 2], "attention_mask": np.array([1, 1])},
        {"input_ids": [3], "attention_mask": np.array([1])},
    ]
    ours = fastcollate.pad(rows, bert_tokenizer, return_tensors="np")
    assert ours["attention_mask"].tolist() == [[1, 1], [1, 0]]


def test_lm_bare_rows_are_never_cast_lossily(bert_tokenizer):
    collate = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mlm=False)
    with pytest.raises(ValueError, match="cannot hold"):
        collate([torch.tensor([1, 2], dtype=torch.int8), torch.tensor([300])])
    with pytest.raises(ValueError, match="uint8"):
        collate([torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3], dtype=torch.uint8)])


def test_default_collator_dtypes_beyond_its_buffers():
    # Complex values are left to the very construction transformers uses.
    rows = [{"x": np.array([1j])}, {"x": np.array([2j])}]
    assert_same_batch(
        fastcollate.default_data_collator(rows), transformers.default_data_collator(rows)
    )
    # uint64 beyond int64, which the native module cannot hold, is stacked by transformers'
    # own construction too: exact, not a changed value.
    rows = [{"x": np.array([2**64 - 1], np.uint64)}, {"x": np.array([1], np.uint64)}]
    for return_tensors in ("np", "pt"):
        ours = fastcollate.default_data_collator(rows, return_tensors)
        assert_same_batch(ours, transformers.default_data_collator(rows, return_tensors))
        assert ours["x"].tolist() == [[2**64 - 1], [1]]


def test_pad_without_tokenizer_says_to_pass_pad_token_id():
    with pytest.raises(ValueError, match="^pass pad_token_id="):
        fastcollate.pad([{"input_ids": [1]}, {"input_ids": [1, 2]}])
    out = fastcollate.pad([{"input_ids": [1]}], pad_token_id=0, verbose=False)
    assert out["input_ids"] == [[1]]
