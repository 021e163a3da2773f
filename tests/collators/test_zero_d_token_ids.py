"""Token lists whose items are 0-d torch tensors or 0-d numpy arrays (issue 49):
`{"input_ids": list(torch.tensor(ids))}`, `[np.array(5), ...]`, or such values mixed with Python
ints in one row, in `input_ids`, `attention_mask`, `token_type_ids` and `labels`, beside a 0-d
tensor `label`. tokenizer.pad turns every value into Python numbers (`to_py_obj`) when the first
id is a tensor or an array; fastcollate reads each 0-d value as its number (`item()`), on every
entry point: `pad` (rows and a mapping of lists), every token collator and TRL's collators.

Each call is compared with transformers' / TRL's own on the same rows. Where transformers fails
(torch cannot build a tensor from 0-d numpy arrays: "len() of unsized object"), fastcollate pads
them as the Python ints they hold, and the comparison is with transformers on those ints
(docs/differences.md, "0-d numpy arrays among token ids"); where transformers returns the 0-d
objects themselves (`return_tensors=None`, an int first), the comparison is with their numbers
(docs/differences.md, "`return_tensors=None`")."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.compare import assert_same_batch, assert_unchanged
from tests.support.hypothesis_profiles import examples
from tests.support.repository import ROOT

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TORCH_INTS = (torch.int64, torch.int32, torch.int16, torch.uint8)
NUMPY_INTS = (np.int64, np.int32, np.int16, np.uint8)


@st.composite
def item(draw, value, style):
    """`value` as one item of a token list: a 0-d tensor, a 0-d array or a Python int."""
    if style == "mixed":
        style = draw(st.sampled_from(["tensor", "array", "int"]))
    if style == "tensor":
        return torch.tensor(value, dtype=draw(st.sampled_from(TORCH_INTS)))
    if style == "array":
        return np.array(value, dtype=draw(st.sampled_from(NUMPY_INTS)))
    return value


@st.composite
def token_list(draw, values, style):
    return [draw(item(value, style)) for value in values]


@st.composite
def rows(draw, equal=False, labels=False, min_rows=1):
    """Rows whose lists hold 0-d values (every row in one style, or each item its own)."""
    style = draw(st.sampled_from(["tensor", "array", "mixed"]))
    count = draw(st.integers(min_rows, 4))
    length = draw(st.integers(1, 5))
    lengths = [length] * count if equal else draw(
        st.lists(st.integers(1, 6), min_size=count, max_size=count))
    with_mask = draw(st.booleans())
    with_types = draw(st.booleans())
    batch = []
    for index, length in enumerate(lengths):
        ids = draw(st.lists(st.integers(1, 200), min_size=length, max_size=length))
        row = {"input_ids": draw(token_list(ids, style))}
        if with_mask:
            row["attention_mask"] = draw(token_list([1] * length, style))
        if with_types:
            row["token_type_ids"] = draw(token_list([index % 2] * length, style))
        if labels:
            row["labels"] = draw(token_list([v % 7 for v in ids], style))
        batch.append(row)
    return batch


def numbers(value):
    """`value` with every 0-d tensor or array turned into its Python number (`to_py_obj`)."""
    if isinstance(value, dict):
        return {key: numbers(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [numbers(v) for v in value]
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
        return value.item()
    return value


def arrays_as_tensors(value):
    """`value` with every 0-d numpy array turned into a 0-d tensor of its dtype."""
    if isinstance(value, dict):
        return {key: arrays_as_tensors(v) for key, v in value.items()}
    if isinstance(value, list):
        return [arrays_as_tensors(v) for v in value]
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return torch.from_numpy(value.copy())
    return value


def holds_zero_d_arrays(batch) -> bool:
    return any(isinstance(v, np.ndarray) and v.ndim == 0
               for row in batch for values in row.values()
               if isinstance(values, list) for v in values)


def narrow_column_unpadded_beside_int_ids(batch) -> bool:
    """Whether a padded key (attention_mask, token_type_ids) holds only 0-d values of a narrow
    dtype (int32, uint8, ...) in a batch that needs no padding, beside token ids whose first is
    a Python int: transformers then hands the 0-d objects to `torch.tensor` / `np.asarray`,
    which keep their dtype, while fastcollate pads to int64, as it does for numpy scalars there
    (docs/differences.md, "0-d numpy arrays among token ids")."""
    if "input_ids" not in batch[0]:
        return False
    first = batch[0]["input_ids"][0]
    if type(first) is not int or len({len(row["input_ids"]) for row in batch}) > 1:
        return False
    for key in ("attention_mask", "token_type_ids"):
        values = [v for row in batch for v in row.get(key, [0])]
        if all(isinstance(v, (torch.Tensor, np.ndarray)) and v.ndim == 0
               and str(v.dtype).rsplit(".", 1)[-1] != "int64" for v in values):
            return True
    return False


def theirs_or_numbers(theirs, batch, return_tensors):
    """transformers' output for `batch`; where transformers fails on 0-d numpy arrays under
    "pt" (the documented difference), its output for the rows' numbers; where it hands back the
    0-d objects (return_tensors=None), their numbers."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs(copy.deepcopy(batch))
    except (TypeError, ValueError) as err:
        message = f"{err} {err.__cause__ or ''} {err.__context__ or ''}"
        assert "len() of unsized object" in message, message
        assert return_tensors == "pt" and holds_zero_d_arrays(batch), err
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs(arrays_as_tensors(batch))
    if return_tensors is None and isinstance(expected, dict):
        for key, values in expected.items():
            if isinstance(values, list):
                expected[key] = numbers(values)
    return expected


def narrow_or_array(batch) -> bool:
    """Whether some list holds a 0-d numpy array or a 0-d tensor of a dtype other than int64:
    TRL builds each row with `torch.tensor(row)`, which keeps such tensors' dtype (int32 rows
    give an int32 batch; uint8 ones wrap the labels' -100 around) and fails on 0-d arrays;
    fastcollate reads them as the ints they hold (docs/trl.md)."""
    return any(isinstance(v, np.ndarray) or (isinstance(v, torch.Tensor) and v.dtype != torch.int64)
               for row in batch for values in row.values() if isinstance(values, list)
               for v in values)


def same_as_theirs(ours, theirs, batch, return_tensors, trl=False):
    assume(not narrow_column_unpadded_beside_int_ids(batch))
    if trl and narrow_or_array(batch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs(numbers(batch))
    else:
        expected = theirs_or_numbers(theirs, batch, return_tensors)
    before = copy.deepcopy(batch)
    torch.manual_seed(0)
    got = ours(batch)
    assert_unchanged(batch, before)
    assert_same_batch(got, expected)


@pytest.fixture(scope="module")
def tokenizers(bert_tokenizer):
    """The test tokenizer on each padding side (copies: the session's is left as it is)."""
    sides = {}
    for side in ("right", "left"):
        tokenizer = copy.deepcopy(bert_tokenizer)
        tokenizer.padding_side = side
        sides[side] = tokenizer
    return sides


SIDES = st.sampled_from(["right", "left"])


@SETTINGS
@given(rows(), st.sampled_from(["pt", "np", None]), SIDES, st.booleans())
def test_pad(bert_tokenizer, batch, return_tensors, side, as_mapping):
    def columns(batch_rows):
        if not as_mapping:
            return batch_rows
        return {key: [row[key] for row in batch_rows] for key in batch_rows[0]}

    same_as_theirs(
        lambda r: fastcollate.pad(columns(r), bert_tokenizer, return_tensors=return_tensors,
                                  padding_side=side),
        lambda r: bert_tokenizer.pad(columns(r), return_tensors=return_tensors,
                                     padding_side=side),
        batch, return_tensors,
    )


@SETTINGS
@given(rows(), st.sampled_from(["pt", "np", None]), SIDES, st.booleans())
def test_data_collator_with_padding(tokenizers, batch, return_tensors, side, label):
    if label:
        batch = [{**row, "label": torch.tensor(i % 3)} for i, row in enumerate(batch)]
    tokenizer = tokenizers[side]
    same_as_theirs(fastcollate.DataCollatorWithPadding(tokenizer, return_tensors=return_tensors),
                   transformers.DataCollatorWithPadding(tokenizer, return_tensors=return_tensors),
                   batch, return_tensors)


@SETTINGS
@given(rows(labels=True), st.sampled_from(["token classification", "seq2seq"]),
       st.sampled_from(["pt", "np"]), SIDES)
def test_collators_that_pad_labels(tokenizers, batch, name, return_tensors, side):
    classes = {
        "token classification": (fastcollate.DataCollatorForTokenClassification,
                                 transformers.DataCollatorForTokenClassification),
        "seq2seq": (fastcollate.DataCollatorForSeq2Seq, transformers.DataCollatorForSeq2Seq),
    }
    ours, theirs = classes[name]
    tokenizer = tokenizers[side]
    same_as_theirs(ours(tokenizer, return_tensors=return_tensors),
                   theirs(tokenizer, return_tensors=return_tensors), batch, return_tensors)


@SETTINGS
@given(rows(), st.sampled_from(["pt", "np"]), SIDES)
def test_language_modeling(tokenizers, batch, return_tensors, side):
    # The causal collator: masks (mlm) are drawn from fastcollate's own generator
    # (tests/collators/test_masking.py compares their rates), not transformers' draws.
    tokenizer = tokenizers[side]
    same_as_theirs(
        fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False,
                                                    return_tensors=return_tensors),
        transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False,
                                                     return_tensors=return_tensors),
        batch, return_tensors)


@SETTINGS
@given(rows(labels=True), st.sampled_from(["pt", "np"]), st.booleans())
def test_flattening(batch, return_tensors, flash_attention_kwargs):
    options = {"return_tensors": return_tensors,
               "return_flash_attn_kwargs": flash_attention_kwargs}
    batch = [{"input_ids": row["input_ids"], "labels": row["labels"]} for row in batch]
    same_as_theirs(fastcollate.DataCollatorWithFlattening(**options),
                   transformers.DataCollatorWithFlattening(**options), batch, return_tensors)


@SETTINGS
@given(rows(equal=True), st.sampled_from(["pt", "np"]), st.booleans())
def test_default_data_collator(batch, return_tensors, label):
    if label:
        batch = [{**row, "label": torch.tensor(i % 3)} for i, row in enumerate(batch)]
    same_as_theirs(
        lambda r: fastcollate.default_data_collator(r, return_tensors=return_tensors),
        lambda r: transformers.default_data_collator(r, return_tensors=return_tensors),
        batch, return_tensors)


# --- TRL ---------------------------------------------------------------------------------------

@SETTINGS
@given(rows(labels=True), st.booleans(), st.booleans(), st.booleans())
def test_trl_language_modeling(batch, padding_free, position_ids, with_labels):
    pytest.importorskip("trl")
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLCollator

    import fastcollate.trl

    options = {"pad_token_id": 0, "padding_free": padding_free,
               "return_position_ids": position_ids}
    keys = ("input_ids", "labels") if with_labels else ("input_ids",)
    batch = [{key: row[key] for key in keys} for row in batch]
    same_as_theirs(fastcollate.trl.DataCollatorForLanguageModeling(**options),
                   TRLCollator(**options), batch, "pt", trl=True)


@st.composite
def preference_rows(draw, keys):
    style = draw(st.sampled_from(["tensor", "array", "mixed"]))
    batch = []
    for _ in range(draw(st.integers(1, 4))):
        batch.append({key: draw(token_list(draw(st.lists(st.integers(1, 200), min_size=1,
                                                         max_size=5)), style))
                      for key in keys})
    return batch


@SETTINGS
@given(st.data(), st.sampled_from(["dpo", "reward", "kto"]), st.sampled_from([None, 4]))
def test_trl_preference_collators(data, name, max_length):
    pytest.importorskip("trl")
    from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreference
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpaired
    from trl.trainer.reward_trainer import DataCollatorForPreference as TRLReward

    import fastcollate.trl

    keys = {"dpo": ("prompt_ids", "chosen_ids", "rejected_ids"),
            "reward": ("chosen_ids", "rejected_ids"),
            "kto": ("prompt_ids", "completion_ids")}[name]
    batch = data.draw(preference_rows(keys))
    options = {"pad_token_id": 0}
    if name == "dpo":
        ours, theirs = fastcollate.trl.DataCollatorForPreference, TRLPreference
        options["max_length"] = max_length
    elif name == "reward":
        ours, theirs = fastcollate.trl.RewardDataCollatorForPreference, TRLReward
    else:
        ours, theirs = fastcollate.trl.DataCollatorForUnpairedPreference, TRLUnpaired
        batch = [{**row, "label": bool(i % 2)} for i, row in enumerate(batch)]
    same_as_theirs(ours(**options), theirs(**options), batch, "pt", trl=True)


@SETTINGS
@given(rows(), SIDES, st.sampled_from([None, 3]))
def test_trl_pad_with_mask(batch, side, multiple):
    pytest.importorskip("trl")
    from trl.trainer.utils import pad as trl_pad

    import fastcollate.trl

    sequences = [row["input_ids"] for row in batch]

    def theirs(seqs):
        if narrow_or_array([{"sequences": seq} for seq in seqs]):
            seqs = numbers(seqs)
        ids = [torch.tensor(seq) for seq in seqs]
        mask = [torch.ones_like(row, dtype=torch.long) for row in ids]
        return {"ids": trl_pad(ids, 0, side, multiple), "mask": trl_pad(mask, 0, side, multiple)}

    def ours(seqs):
        ids, mask = fastcollate.trl.pad_with_mask(seqs, 0, side, multiple)
        return {"ids": ids, "mask": mask}

    expected = theirs(copy.deepcopy(sequences))
    got = ours(sequences)
    assert_same_batch(got, expected)


# --- Other dtypes, and tensors that are not plain ---------------------------------------------

ODD_VALUES = [
    pytest.param(lambda v: torch.tensor(v, dtype=torch.bool), id="bool tensor"),
    pytest.param(lambda v: torch.tensor(v, dtype=torch.float32), id="float32 tensor"),
    pytest.param(lambda v: torch.tensor(v, dtype=torch.float64), id="float64 tensor"),
    pytest.param(lambda v: torch.tensor(float(v), requires_grad=True), id="grad tensor"),
    pytest.param(lambda v: np.array(bool(v)), id="bool array"),
    pytest.param(lambda v: np.array(v, dtype=np.float32), id="float32 array"),
    pytest.param(lambda v: torch.tensor(v, dtype=torch.int64).as_subclass(Subclass),
                 id="subclass tensor"),
    pytest.param(lambda v: torch.tensor(v), id="int64 tensor"),
]


class Subclass(torch.Tensor):
    pass


def _call(fn, batch):
    try:
        return fn(batch)
    except (TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"


@pytest.mark.parametrize("make", ODD_VALUES)
@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_a_zero_d_value_reads_as_its_number(bert_tokenizer, make, return_tensors):
    """Bool, float, autograd and subclass 0-d tensors among token ids (and arrays): fastcollate
    gives exactly what it gives for their Python numbers (`to_py_obj`'s reading, which
    tokenizer.pad applies first): the same batch, or the same error ("tokenize first" for float
    ids, a documented difference). Where transformers pads (the ints, bools), it agrees."""
    ids = [[101, 0, 102], [1, 101]]

    def build():
        return [{"input_ids": [make(v) for v in row]} for row in ids]

    batch = build()
    plain = [{"input_ids": numbers(row["input_ids"])} for row in batch]
    calls = {
        "pad": lambda r: fastcollate.pad(r, bert_tokenizer, return_tensors=return_tensors),
        "with padding": fastcollate.DataCollatorWithPadding(bert_tokenizer,
                                                            return_tensors=return_tensors),
        "flattening": fastcollate.DataCollatorWithFlattening(return_tensors=return_tensors),
    }
    for name, call in calls.items():
        before = build()
        got, expected = _call(call, batch), _call(call, plain)
        assert_unchanged(batch, before)
        if isinstance(expected, str):
            assert got == expected, name
            continue
        assert_same_batch(got, expected)
    if not isinstance(_call(calls["pad"], plain), str):
        theirs = bert_tokenizer.pad(build(), return_tensors=return_tensors)
        assert_same_batch(calls["pad"](batch), theirs)


def test_meta_and_complex_tensors_are_refused_naming_key_and_row(bert_tokenizer):
    # transformers fails too ("Cannot copy out of meta tensor"); fastcollate names the row.
    meta = [{"input_ids": [torch.tensor(101)]},
            {"input_ids": list(torch.tensor([101, 7], device="meta"))}]
    with pytest.raises(TypeError, match=r"'input_ids' in row 1"):
        fastcollate.pad(meta, bert_tokenizer, return_tensors="pt")
    complex_ids = [{"input_ids": [torch.tensor(101), torch.tensor(1 + 2j)]}]
    with pytest.raises((TypeError, ValueError), match=r"'input_ids' in row 0"):
        fastcollate.pad(complex_ids, bert_tokenizer, return_tensors="pt")


def test_torch_function_modes_do_not_answer_for_zero_d_items(bert_tokenizer):
    """The read asks each 0-d item `dim()` and `item()` with torch function modes off (the rule
    every tensor read follows, tests/collators/test_torch_function_modes.py): a mode that lies
    about them changes nothing."""
    from tests.support.torch_modes import LIES, Lie

    def batch():
        return [{"input_ids": list(torch.tensor([101, 7, 102])), "label": torch.tensor(1)},
                {"input_ids": list(torch.tensor([101, 102])), "label": torch.tensor(0)}]

    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    expected = collator(batch())
    for lie in ("dim", "ndim", "item", "tolist", "numpy", "len"):
        target, answer = LIES[lie]
        with Lie(target, answer):
            got = collator(batch())
        assert_same_batch(got, expected)


def test_documented():
    text = (ROOT / "docs" / "differences.md").read_text(encoding="utf-8")
    assert "0-d numpy arrays among token ids" in text


@SETTINGS
@given(st.data(), SIDES)
def test_multiple_choice(tokenizers, data, side):
    # Each choice a list of 0-d values (transformers has no "np" path here: "pt" only).
    tokenizer = tokenizers[side]
    batch = []
    for index in range(data.draw(st.integers(1, 3))):
        choices = data.draw(rows(min_rows=2))[:2]
        batch.append({"input_ids": [row["input_ids"] for row in choices],
                      "label": torch.tensor(index % 2)})
    same_as_theirs(fastcollate.DataCollatorForMultipleChoice(tokenizer),
                   transformers.DataCollatorForMultipleChoice(tokenizer), batch, "pt")


@pytest.mark.parametrize("return_tensors", ["pt", "np", None])
@pytest.mark.parametrize("make", [torch.tensor, np.array], ids=["tensors", "arrays"])
def test_one_example(bert_tokenizer, return_tensors, make):
    # One mapping whose ids are a flat list of 0-d values is one example, as in transformers.
    example = {"input_ids": [make(v) for v in (101, 7, 102)]}
    expected = bert_tokenizer.pad(copy.deepcopy(example), return_tensors=return_tensors)
    assert_same_batch(fastcollate.pad(example, bert_tokenizer, return_tensors=return_tensors),
                      expected)
