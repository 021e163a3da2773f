"""A table of wrong usages, each with the message it gets.

Collator options: every collator refuses a bad option when it is made, with the message the
call gives for that option (checked here by setting the option on a collator made with good
ones and calling it), and transformers' / TRL's own collator fails on the same option too
(when made or at the call), unless the row says why not. Then wrong calls (swapped arguments,
a missing main input, ragged nested values) and their messages, and options transformers
accepts that must keep working (given as enums or numpy integers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from transformers.utils import PaddingStrategy, TensorType

import fastcollate

pytestmark = pytest.mark.parity

try:  # TRL 1.16 needs Python >= 3.11: its collators' rows run where it is installed.
    from trl.trainer import dpo_trainer, kto_trainer, reward_trainer, sft_trainer

    import fastcollate.trl
except ImportError:
    sft_trainer = None

TOKEN_ROWS = [{"input_ids": [101, 7, 8, 102], "label": 0}, {"input_ids": [101, 102], "label": 1}]
LABELLED_ROWS = [
    {"input_ids": [101, 7, 102], "labels": [1, 2, 3]},
    {"input_ids": [101, 102], "labels": [4, 5]},
]
CHOICE_ROWS = [{"input_ids": [[101, 7, 102], [101, 102]], "label": 0}]
SEQUENCE_ROWS = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
EQUAL_ROWS = [{"input_ids": [1, 2], "label": 0}, {"input_ids": [3, 4], "label": 1}]
DPO_ROWS = [{"prompt_ids": [1, 2], "chosen_ids": [3], "rejected_ids": [4, 5]}]
REWARD_ROWS = [{"chosen_ids": [1, 2], "rejected_ids": [3]}]
KTO_ROWS = [{"prompt_ids": [1], "completion_ids": [2, 3], "label": True}]

# name -> (ours, transformers' / TRL's, whether it takes the tokenizer first, a good batch)
COLLATORS = {
    "WithPadding": (fastcollate.DataCollatorWithPadding, transformers.DataCollatorWithPadding,
                    True, TOKEN_ROWS),
    "TokenClassification": (fastcollate.DataCollatorForTokenClassification,
                            transformers.DataCollatorForTokenClassification, True,
                            LABELLED_ROWS),
    "Seq2Seq": (fastcollate.DataCollatorForSeq2Seq, transformers.DataCollatorForSeq2Seq, True,
                LABELLED_ROWS),
    "MultipleChoice": (fastcollate.DataCollatorForMultipleChoice,
                       transformers.DataCollatorForMultipleChoice, True, CHOICE_ROWS),
    "LanguageModeling": (fastcollate.DataCollatorForLanguageModeling,
                         transformers.DataCollatorForLanguageModeling, True, SEQUENCE_ROWS),
    "Flattening": (fastcollate.DataCollatorWithFlattening,
                   transformers.DataCollatorWithFlattening, False, SEQUENCE_ROWS),
    "Default": (fastcollate.DefaultDataCollator, transformers.DefaultDataCollator, False,
                EQUAL_ROWS),
}
if sft_trainer is not None:
    COLLATORS.update({
        "trl.LanguageModeling": (fastcollate.trl.DataCollatorForLanguageModeling,
                                 sft_trainer.DataCollatorForLanguageModeling, False, SEQUENCE_ROWS),
        "trl.Preference": (fastcollate.trl.DataCollatorForPreference,
                           dpo_trainer.DataCollatorForPreference, False, DPO_ROWS),
        "trl.RewardPreference": (fastcollate.trl.RewardDataCollatorForPreference,
                                 reward_trainer.DataCollatorForPreference, False, REWARD_ROWS),
        "trl.UnpairedPreference": (fastcollate.trl.DataCollatorForUnpairedPreference,
                                   kto_trainer.DataCollatorForUnpairedPreference, False, KTO_ROWS),
    })
# Options every TRL collator needs.
REQUIRED = {name: {"pad_token_id": 0} for name in COLLATORS if name.startswith("trl.")}

# Where transformers / TRL accept the option (the docs page "What differs" lists each).
TRANSFORMERS_ACCEPTS_SEPARATOR = "transformers casts the labels to int64 (1.5 becomes 1)"
TRL_ACCEPTS_ZERO_LENGTH = "TRL's keep_end with max_length=0 keeps everything"
TRUE_IS_ONE = "transformers reads pad_to_multiple_of=True as 1"
LISTS_BESIDE_ARRAYS = "transformers' None gives lists of inputs beside a numpy labels array"
NONE_RETURNED = "transformers' default_data_collator returns None for another return_tensors"
TRL_MODE_WHEN_CUT = "TRL checks the truncation mode only when it truncates"
TRL_SLICES = "TRL slices with max_length=-1 (dropping each sequence's last token)"

# (collator, bad options, exception, message fragment, checked by the call too, why
# transformers / TRL accept it or None)
BAD_OPTIONS = [
    ("WithPadding", {"padding": "bogus"}, ValueError,
     "'bogus' is not a valid padding strategy", True, None),
    ("WithPadding", {"return_tensors": "tf"}, ValueError,
     "return_tensors='tf' is not supported; use None, 'np' or 'pt'", True, None),
    ("WithPadding", {"padding": "max_length", "max_length": -1}, ValueError,
     "max_length must be a non-negative integer, not -1", True, None),
    ("WithPadding", {"padding": "max_length", "max_length": "8"}, ValueError,
     "max_length must be a non-negative integer, not '8'", True, None),
    ("WithPadding", {"pad_to_multiple_of": 0}, ValueError,
     "pad_to_multiple_of must be a positive integer, not 0", True, None),
    ("WithPadding", {"pad_to_multiple_of": True}, ValueError,
     "pad_to_multiple_of must be a positive integer, not True", True, TRUE_IS_ONE),
    ("WithPadding", {"tokenizer": None}, ValueError,
     "DataCollatorWithPadding needs a tokenizer", True, None),
    ("WithPadding", {"padding": "max_length", "max_length": 2**70}, ValueError,
     "is larger than any array can be", True, None),
    ("TokenClassification", {"label_pad_token_id": "x"}, TypeError,
     "label_pad_token_id must be an integer, not str", True, None),
    ("TokenClassification", {"return_tensors": "tf"}, ValueError,
     "Framework 'tf' not recognized! Use return_tensors='pt' or 'np'.", True, None),
    ("TokenClassification", {"padding": "shortest"}, ValueError,
     "'shortest' is not a valid padding strategy", True, None),
    ("TokenClassification", {"tokenizer": None}, ValueError,
     "DataCollatorForTokenClassification needs a tokenizer", True, None),
    ("Seq2Seq", {"label_pad_token_id": 2**70}, ValueError,
     f"label_pad_token_id={2**70} is out of range", True, None),
    ("Seq2Seq", {"return_tensors": None}, ValueError,
     "Framework 'None' not recognized!", True, LISTS_BESIDE_ARRAYS),
    ("Seq2Seq", {"pad_to_multiple_of": -8}, ValueError,
     "pad_to_multiple_of must be a positive integer, not -8", True, None),
    ("Seq2Seq", {"tokenizer": None}, ValueError,
     "DataCollatorForSeq2Seq needs a tokenizer", True, None),
    ("MultipleChoice", {"pad_to_multiple_of": 2.5}, ValueError,
     "pad_to_multiple_of must be a positive integer, not 2.5", True, None),
    ("MultipleChoice", {"return_tensors": "jax"}, ValueError,
     "Framework 'jax' not recognized!", True, None),
    ("MultipleChoice", {"tokenizer": None}, ValueError,
     "DataCollatorForMultipleChoice needs a tokenizer", True, None),
    ("LanguageModeling", {"return_tensors": "tf"}, ValueError,
     "Framework 'tf' not recognized!", True, None),
    ("LanguageModeling", {"pad_to_multiple_of": 0}, ValueError,
     "pad_to_multiple_of must be a positive integer, not 0", True, None),
    ("LanguageModeling", {"tokenizer": None}, ValueError,
     "DataCollatorForLanguageModeling needs a tokenizer", True, None),
    # transformers' own construction-time rules, with its messages.
    ("LanguageModeling", {"mlm_probability": 1.5}, ValueError,
     "mlm_probability should be between 0 and 1.", False, None),
    ("LanguageModeling", {"mask_replace_prob": 0.9, "random_replace_prob": 0.2}, ValueError,
     "The sum of mask_replace_prob and random_replace_prob should not exceed 1", False, None),
    ("LanguageModeling", {"mask_replace_prob": -0.1}, ValueError,
     "mask_replace_prob should be between 0 and 1.", False, None),
    ("LanguageModeling", {"mlm": False, "whole_word_mask": True}, ValueError,
     "Whole word masking can only be used with mlm=True.", False, None),
    ("Flattening", {"return_tensors": "tf"}, ValueError,
     "return_tensors must be one of (\"pt\", \"np\"), return_tensors='tf' not supported", True,
     None),
    ("Flattening", {"separator_id": 1.5}, TypeError,
     "separator_id must be an integer, not float", True, TRANSFORMERS_ACCEPTS_SEPARATOR),
    ("Flattening", {"position_ids_start": 2**64}, ValueError,
     f"position_ids_start={2**64} is out of range", True, None),
    ("Default", {"return_tensors": "tf"}, ValueError,
     "return_tensors='tf' is not supported; use None, 'np' or 'pt'", True, NONE_RETURNED),
    ("trl.LanguageModeling", {"pad_token_id": None}, TypeError,
     "pad_token_id must be an integer, not NoneType", True, None),
    ("trl.LanguageModeling", {"pad_to_multiple_of": 0}, ValueError,
     "pad_to_multiple_of=0 is out of range", True, None),
    ("trl.LanguageModeling", {"return_tensors": "np"}, ValueError,
     "return_tensors='np' is not supported: TRL's collator returns torch tensors only", True,
     None),
    ("trl.Preference", {"truncation_mode": "keep_middle"}, ValueError,
     "Unsupported truncation mode: 'keep_middle'", True, TRL_MODE_WHEN_CUT),
    ("trl.Preference", {"max_length": 0, "truncation_mode": "keep_end"}, ValueError,
     "max_length=0 is out of range", True, TRL_ACCEPTS_ZERO_LENGTH),
    ("trl.RewardPreference", {"return_tensors": "np"}, ValueError,
     "TRL's collator returns torch tensors only", True, None),
    ("trl.RewardPreference", {"pad_token_id": 2**64}, ValueError,
     f"pad_token_id={2**64} is out of range", True, None),
    ("trl.UnpairedPreference", {"max_length": -1}, ValueError,
     "max_length=-1 is out of range", True, TRL_SLICES),
]


def _make(kind: type, takes_tokenizer: bool, tokenizer, name: str, options: dict):
    options = {**REQUIRED.get(name, {}), **options}
    if takes_tokenizer:
        return kind(options.pop("tokenizer", tokenizer), **options)
    return kind(**options)


def _error_of(call) -> BaseException | None:
    try:
        call()
    except Exception as err:  # noqa: BLE001 - any failure counts as refusing the option
        return err
    return None


BAD_OPTIONS = [row for row in BAD_OPTIONS if row[0] in COLLATORS]


@pytest.mark.parametrize(
    "name, options, error, fragment, at_call, accepted",
    BAD_OPTIONS,
    ids=[f"{row[0]}-{'-'.join(row[1])}" for row in BAD_OPTIONS],
)
def test_bad_option_raises_when_made_as_when_called(
    bert_tokenizer, name, options, error, fragment, at_call, accepted
):
    ours, theirs, takes_tokenizer, rows = COLLATORS[name]
    with pytest.raises(error) as made:
        _make(ours, takes_tokenizer, bert_tokenizer, name, options)
    assert fragment in str(made.value)
    if at_call:
        # The same option set on a collator made with good ones: the call's own message.
        collator = _make(ours, takes_tokenizer, bert_tokenizer, name, {})
        for key, value in options.items():
            setattr(collator, key, value)
        with pytest.raises(error) as called:
            collator([dict(row) for row in rows])
        assert str(called.value) == str(made.value)
    # transformers / TRL refuse it too, when made or at the first batch.
    refused = _error_of(
        lambda: _make(theirs, takes_tokenizer, bert_tokenizer, name, options)(
            [dict(row) for row in rows]
        )
    )
    if accepted is None:
        assert refused is not None, f"{name} accepts {options}"
    else:
        assert refused is None, f"{name} now refuses {options}: drop the reason '{accepted}'"


def test_the_good_batches_are_good(bert_tokenizer):
    """The table's batches pass with every collator's default options, on both sides."""
    for name, (ours, theirs, takes_tokenizer, rows) in COLLATORS.items():
        _make(ours, takes_tokenizer, bert_tokenizer, name, {})([dict(row) for row in rows])
        _make(theirs, takes_tokenizer, bert_tokenizer, name, {})([dict(row) for row in rows])


RAGGED_NESTED = [
    {"input_ids": [1, 2], "labels": [[1], [2, 3]]},
    {"input_ids": [1], "labels": [[1], [2]]},
]


def _swapped(tokenizer):
    return fastcollate.pad(tokenizer, SEQUENCE_ROWS)


# (what is done, exception, message fragments, fragments the message must not hold)
WRONG_CALLS = [
    ("pad(tokenizer, rows)", _swapped, TypeError,
     ["the arguments are swapped", "call fastcollate.pad(rows, tokenizer)"], []),
    ("pad(rows, rows)", lambda tok: fastcollate.pad(SEQUENCE_ROWS, SEQUENCE_ROWS), TypeError,
     ["pad's tokenizer must be a tokenizer or None, not a list"], []),
    ("pad: row 0 without input_ids",
     lambda tok: fastcollate.pad([{"attention_mask": [1]}, {"input_ids": [2]}], tok),
     ValueError, ["row 0 has no key 'input_ids'", "['attention_mask']"], []),
    ("collator: row 0 without input_ids",
     lambda tok: fastcollate.DataCollatorWithPadding(tok)([{"attention_mask": [1]}]),
     ValueError, ["row 0 has no key 'input_ids'"], []),
    ("token classification: row 0 without input_ids",
     lambda tok: fastcollate.DataCollatorForTokenClassification(tok)([{"labels": [1]}]),
     ValueError, ["row 0 has no key 'input_ids'"], []),
    ("pad without a tokenizer or pad_token_id", lambda tok: fastcollate.pad(SEQUENCE_ROWS),
     ValueError, ["pass pad_token_id= to fastcollate.pad"], []),
    ("DataCollatorWithPadding(None)(rows)",
     lambda tok: fastcollate.DataCollatorWithPadding(None)(SEQUENCE_ROWS), ValueError,
     ["DataCollatorWithPadding needs a tokenizer", "DataCollatorWithPadding(tokenizer)"],
     ["pass pad_token_id= to fastcollate.pad"]),
    ("ragged nested labels, np",
     lambda tok: fastcollate.pad(RAGGED_NESTED, tok, return_tensors="np"), ValueError,
     ["cannot make a numpy array of 'labels'", "row 0"], ["'np' tensor"]),
    ("ragged nested labels, pt",
     lambda tok: fastcollate.pad(RAGGED_NESTED, tok, return_tensors="pt"), ValueError,
     ["cannot make a torch tensor of 'labels'"], ["'pt' tensor"]),
    ("ragged nested label, collator np",
     lambda tok: fastcollate.DataCollatorWithPadding(tok, return_tensors="np")(
         [{"input_ids": [1, 2], "label": [[1], [2, 3]]}, {"input_ids": [1], "label": [[1]]}]
     ), ValueError, ["cannot make a numpy array of 'label'"], ["'np' tensor"]),
    ("a bad padding_side", lambda tok: fastcollate.pad(SEQUENCE_ROWS, tok, padding_side="up"),
     ValueError, ["padding_side must be 'left' or 'right', not 'up'"], []),
    ("default_data_collator(return_tensors=None)",
     lambda tok: fastcollate.default_data_collator(EQUAL_ROWS, return_tensors=None),
     ValueError, ["default_data_collator needs return_tensors='pt' or 'np'"], []),
]


@pytest.mark.parametrize(
    "what, call, error, fragments, absent", WRONG_CALLS, ids=[row[0] for row in WRONG_CALLS]
)
def test_wrong_call_message(bert_tokenizer, what, call, error, fragments, absent):
    with pytest.raises(error) as raised:
        call(bert_tokenizer)
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, message
    for fragment in absent:
        assert fragment not in message, message


# Options transformers accepts in other spellings: made and used exactly as transformers'.
GOOD_OPTIONS = [
    ("WithPadding", {"padding": PaddingStrategy.MAX_LENGTH, "max_length": np.int64(8),
                     "return_tensors": TensorType.PYTORCH}),
    ("WithPadding", {"return_tensors": "np", "pad_to_multiple_of": np.int32(4)}),
    ("WithPadding", {"padding": "do_not_pad", "return_tensors": None}),
    # transformers ignores max_length unless padding="max_length", whatever it holds.
    ("WithPadding", {"padding": True, "max_length": "8"}),
    ("TokenClassification", {"padding": PaddingStrategy.LONGEST, "label_pad_token_id": -1,
                             "return_tensors": TensorType.NUMPY}),
    ("Seq2Seq", {"padding": "max_length", "max_length": 6, "pad_to_multiple_of": 4}),
    ("Seq2Seq", {"padding": False, "label_pad_token_id": None}),
    ("MultipleChoice", {"padding": True, "max_length": 3}),
    ("LanguageModeling", {"mlm": False, "pad_to_multiple_of": 8, "return_tensors": "np"}),
    ("Flattening", {"return_tensors": TensorType.NUMPY, "separator_id": np.int64(-1)}),
    ("Default", {"return_tensors": TensorType.NUMPY}),
]


def _as_lists(batch) -> dict:
    return {
        key: value.tolist() if isinstance(value, (np.ndarray, torch.Tensor)) else value
        for key, value in dict(batch).items()
    }


@pytest.mark.parametrize(
    "name, options", GOOD_OPTIONS, ids=[f"{row[0]}-{'-'.join(row[1])}" for row in GOOD_OPTIONS]
)
def test_options_transformers_accepts_work_as_there(bert_tokenizer, name, options):
    ours, theirs, takes_tokenizer, rows = COLLATORS[name]
    if name == "Seq2Seq" and options.get("padding") is False:
        rows = [dict(row, labels=row["labels"][:2]) for row in LABELLED_ROWS]
        rows = [dict(row, input_ids=[101, 7]) for row in rows]  # nothing to pad
    ours_batch = _make(ours, takes_tokenizer, bert_tokenizer, name, dict(options))(
        [dict(row) for row in rows]
    )
    theirs_batch = _make(theirs, takes_tokenizer, bert_tokenizer, name, dict(options))(
        [dict(row) for row in rows]
    )
    assert list(ours_batch) == list(theirs_batch)
    assert _as_lists(ours_batch) == _as_lists(theirs_batch)
    for key in ours_batch:
        assert type(ours_batch[key]) is type(theirs_batch[key]), key
        if hasattr(ours_batch[key], "dtype"):
            assert ours_batch[key].dtype == theirs_batch[key].dtype, key


def _tokenizer_without_model_max_length(bert_tokenizer):
    import copy

    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.model_max_length = int(1e30)  # transformers' "no predefined maximum length"
    return tokenizer


@pytest.mark.parametrize("return_tensors", [None, "np", "pt"])
@pytest.mark.parametrize("with_tokenizer", [False, True])
def test_max_length_padding_without_a_length_is_refused_up_front(bert_tokenizer, return_tensors,
                                                                 with_tokenizer):
    """`padding="max_length"` with no `max_length` and no `model_max_length` to stand in:
    transformers warns and pads nothing (then fails on ragged rows under "np" / "pt");
    fastcollate refuses it with one ValueError whatever `return_tensors` is, on `pad` and on
    every collator with a padding strategy (docs/differences.md). Equal rows too: the option
    is refused, not the rows."""
    message = "padding='max_length' needs a max_length"
    options = {} if return_tensors is None else {"return_tensors": return_tensors}
    for rows in (SEQUENCE_ROWS, EQUAL_ROWS):
        if with_tokenizer:
            tokenizer = _tokenizer_without_model_max_length(bert_tokenizer)
            with pytest.raises(ValueError, match=message):
                fastcollate.pad(rows, tokenizer, padding="max_length", **options)
        else:
            with pytest.raises(ValueError, match=message + ": none was given and there is no"):
                fastcollate.pad(rows, pad_token_id=0, padding="max_length", **options)
    if not with_tokenizer:
        return
    tokenizer = _tokenizer_without_model_max_length(bert_tokenizer)
    tensors = return_tensors or "pt"
    collators = [
        (fastcollate.DataCollatorWithPadding(tokenizer, padding="max_length",
                                             return_tensors=tensors), TOKEN_ROWS),
        (fastcollate.DataCollatorForTokenClassification(tokenizer, padding="max_length",
                                                        return_tensors=tensors), LABELLED_ROWS),
        (fastcollate.DataCollatorForSeq2Seq(tokenizer, padding="max_length",
                                            return_tensors=tensors), LABELLED_ROWS),
        (fastcollate.DataCollatorForMultipleChoice(tokenizer, padding="max_length",
                                                   return_tensors=tensors), CHOICE_ROWS),
    ]
    for collator, rows in collators:
        with pytest.raises(ValueError, match=message + ": none was given and the tokenizer"):
            collator(rows)
    # With a model_max_length, it stands in for max_length (as in transformers).
    padded = fastcollate.pad(SEQUENCE_ROWS, bert_tokenizer, padding="max_length",
                             return_tensors="np")
    assert padded["input_ids"].shape == (2, bert_tokenizer.model_max_length)
