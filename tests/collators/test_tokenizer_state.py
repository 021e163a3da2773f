"""A tokenizer's padding settings are remembered between batches (collators/tokenizer_state);
every change to the tokenizer between two batches must show in the next batch exactly as it
does in transformers' collator: the cache may never go stale."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import transformers
from transformers import AutoTokenizer

import fastcollate
from fastcollate.collators import tokenizer_state
from fastcollate.collators.padding_options import PadSettings
from tests.support.compare import assert_same_batch
from tests.support.tokenizer_changes import CHANGES

pytestmark = pytest.mark.parity

# No attention mask in the rows: padding creates one when "attention_mask" is a model input.
ROWS = [
    {"input_ids": [101, 7592, 102], "token_type_ids": [0, 0, 0], "label": 0},
    {"input_ids": [101, 7592, 2088, 999, 102], "token_type_ids": [0, 0, 0, 0, 0], "label": 1},
]


def _both(tok, rows, **options):
    """(fastcollate's batch, transformers' batch), or the exception type each raised."""
    results = []
    for cls in (fastcollate.DataCollatorWithPadding, transformers.DataCollatorWithPadding):
        try:
            results.append(cls(tok, **options)([dict(r) for r in rows]))
        except (ValueError, TypeError) as err:
            results.append(type(err))
    return results


@pytest.fixture
def fresh_tokenizer(model_path):
    return AutoTokenizer.from_pretrained(model_path)


@pytest.mark.parametrize("padding", [True, "max_length"])
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_change_between_batches_shows_in_the_next(fresh_tokenizer, change, padding):
    tok = fresh_tokenizer
    assert tokenizer_state.state_key(tok) is not None, "the cache is not used for this tokenizer"
    collator = fastcollate.DataCollatorWithPadding(tok, padding=padding)
    expected_before = transformers.DataCollatorWithPadding(tok, padding=padding)(
        [dict(r) for r in ROWS]
    )
    assert_same_batch(collator([dict(r) for r in ROWS]), expected_before)  # now remembered
    for step in CHANGES[change]:
        step(tok)
        ours, theirs = _both(tok, ROWS, padding=padding)
        if isinstance(theirs, type):
            assert ours is theirs
        else:
            assert_same_batch(ours, theirs)
    # And through pad() called directly.
    try:
        theirs = tok.pad([dict(r) for r in ROWS], return_tensors="pt")
    except ValueError:
        with pytest.raises(ValueError):
            fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="pt")
        return
    assert_same_batch(fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="pt"), theirs)


def test_a_subclass_with_its_own_pad_token_id_is_read_every_time(model_path):
    base = type(AutoTokenizer.from_pretrained(model_path))

    class Shifting(base):
        shift = 0

        @property
        def pad_token_id(self):
            return 0 + self.shift

    tok = Shifting.from_pretrained(model_path)
    assert tokenizer_state.state_key(tok) is None
    collator = fastcollate.DataCollatorWithPadding(tok, return_tensors="np")
    first = collator([dict(r) for r in ROWS])["input_ids"][0, -1]
    Shifting.shift = 7
    second = collator([dict(r) for r in ROWS])["input_ids"][0, -1]
    assert (first, second) == (0, 7)


def test_the_cache_tells_tokenizers_apart(model_path):
    left = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    right = AutoTokenizer.from_pretrained(model_path)
    for _ in range(2):
        for tok in (left, right):
            ours = fastcollate.DataCollatorWithPadding(tok)([dict(r) for r in ROWS])
            theirs = transformers.DataCollatorWithPadding(tok)([dict(r) for r in ROWS])
            assert_same_batch(ours, theirs)


def test_an_unhashable_option_gets_the_usual_error(bert_tokenizer):
    # The remembered pad groups are keyed by the options: one that cannot be a key must still
    # reach the option checks (not fail as "unhashable").
    rows = [dict(r) for r in ROWS]
    for _ in range(2):
        with pytest.raises(ValueError, match="max_length must be a non-negative integer"):
            fastcollate.pad(rows, bert_tokenizer, padding="max_length", max_length=[3])


def _same_outcome(ours, theirs, rows):
    """The same batch from both collators, or the same exception type from both."""
    try:
        expected = theirs([dict(r) for r in rows])
    except (ValueError, TypeError) as err:
        with pytest.raises(type(err)):
            ours([dict(r) for r in rows])
        return
    assert_same_batch(ours([dict(r) for r in rows]), expected)


@pytest.mark.parametrize("padding", [True, "max_length"])
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_one_collator_sees_a_change_between_its_batches(fresh_tokenizer, change, padding):
    # The collator's own call plan (settled options kept between calls) must not go stale
    # either.
    tok = fresh_tokenizer
    ours = fastcollate.DataCollatorWithPadding(tok, padding=padding)
    theirs = transformers.DataCollatorWithPadding(tok, padding=padding)
    for _ in range(2):
        _same_outcome(ours, theirs, ROWS)
    assert ours._call_plan is not None, "the call plan is not used"
    for step in CHANGES[change]:
        step(tok)
        _same_outcome(ours, theirs, ROWS)
        _same_outcome(ours, theirs, ROWS)


FIELD_CHANGES = {
    "padding": [("padding", True)],
    "max_length": [("max_length", 12)],
    "pad_to_multiple_of": [("pad_to_multiple_of", 4)],
    "return_tensors": [("return_tensors", "np")],
    "an invalid padding, then a valid one": [("padding", "sideways"), ("padding", "longest")],
    "max_length as a numpy integer": [("max_length", np.int64(12))],
    "tokenizer": [("tokenizer", "left")],
}


@pytest.mark.parametrize("change", list(FIELD_CHANGES), ids=list(FIELD_CHANGES))
def test_one_collator_sees_its_fields_change(model_path, change):
    tok = AutoTokenizer.from_pretrained(model_path)
    fields = dict(padding="max_length", max_length=8)
    ours = fastcollate.DataCollatorWithPadding(tok, **fields)
    theirs = transformers.DataCollatorWithPadding(tok, **fields)
    for _ in range(2):
        _same_outcome(ours, theirs, ROWS)
    assert ours._call_plan is not None, "the call plan is not used"
    for name, value in FIELD_CHANGES[change]:
        if name == "tokenizer":
            value = AutoTokenizer.from_pretrained(model_path, padding_side=value)
        setattr(ours, name, value)
        setattr(theirs, name, value)
        _same_outcome(ours, theirs, ROWS)
        _same_outcome(ours, theirs, ROWS)


def test_a_pickled_collator_leaves_its_call_plan_behind(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    collator([dict(r) for r in ROWS])
    assert collator._call_plan is not None
    copied = pickle.loads(pickle.dumps(collator))
    assert "_call_plan" not in vars(copied)
    expected = transformers.DataCollatorWithPadding(bert_tokenizer)([dict(r) for r in ROWS])
    for _ in range(2):
        assert_same_batch(copied([dict(r) for r in ROWS]), expected)


RIGHT_PADDED = [[101, 7592, 102, 0, 0], [101, 7592, 2088, 999, 102]]


def _flip_while_resolving(monkeypatch, tok):
    """Makes every resolution of the tokenizer's settings see padding_side="left" and put
    "right" back afterwards: as if another thread flipped it between fastcollate reading the
    tokenizer's state key and reading its settings, and flipped it back."""
    original = PadSettings._of_tokenizer.__func__

    def racing(cls, tokenizer):
        tokenizer.padding_side = "left"
        try:
            return original(cls, tokenizer)
        finally:
            tokenizer.padding_side = "right"

    monkeypatch.setattr(PadSettings, "_of_tokenizer", classmethod(racing))


def test_settings_changed_between_key_and_value_are_not_remembered(fresh_tokenizer, monkeypatch):
    tok = fresh_tokenizer
    assert tok.padding_side == "right"
    assert tokenizer_state.state_key(tok) is not None
    collator = fastcollate.DataCollatorWithPadding(tok)
    with monkeypatch.context() as patch:
        _flip_while_resolving(patch, tok)
        # The racing call itself may see either side; what it remembers is what matters.
        raced = collator([dict(r) for r in ROWS])
        assert raced["input_ids"].tolist() in (
            RIGHT_PADDED, [[0, 0, 101, 7592, 102], [101, 7592, 2088, 999, 102]]
        )
        fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="pt")
    assert tok.padding_side == "right"
    theirs = transformers.DataCollatorWithPadding(tok)([dict(r) for r in ROWS])
    assert theirs["input_ids"].tolist() == RIGHT_PADDED
    for _ in range(3):
        assert_same_batch(collator([dict(r) for r in ROWS]), theirs)
        assert_same_batch(fastcollate.DataCollatorWithPadding(tok)([dict(r) for r in ROWS]), theirs)
        assert_same_batch(
            fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="pt"),
            tok.pad([dict(r) for r in ROWS], return_tensors="pt"),
        )


def test_threads_flipping_the_padding_side_leave_nothing_stale(fresh_tokenizer):
    # Four threads collate while the main thread flips padding_side for a second and a half; every
    # batch is one of the two sides' batches, and once the flipping stops every later call
    # (the same collators, pad(), a new collator) gives transformers' batch.
    import threading
    import time

    tok = fresh_tokenizer
    expected = {
        side: tok.pad([dict(r) for r in ROWS], padding_side=side, return_tensors="np")[
            "input_ids"
        ].tolist()
        for side in ("left", "right")
    }
    collators = [fastcollate.DataCollatorWithPadding(tok) for _ in range(4)]
    stop = threading.Event()
    wrong = []

    def collate(collator):
        while not stop.is_set():
            ids = collator([dict(r) for r in ROWS])["input_ids"].tolist()
            if ids not in expected.values():
                wrong.append(ids)
            ids = fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="np")["input_ids"]
            if ids.tolist() not in expected.values():
                wrong.append(ids.tolist())

    threads = [threading.Thread(target=collate, args=(c,)) for c in collators]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 1.5
    flips = 0
    try:
        while time.monotonic() < deadline:
            tok.padding_side = "left" if flips % 2 == 0 else "right"
            flips += 1
            time.sleep(0.0002)
    finally:
        tok.padding_side = "right"
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert flips > 10 and not wrong, wrong[:3]
    theirs = transformers.DataCollatorWithPadding(tok)([dict(r) for r in ROWS])
    for collator in [*collators, fastcollate.DataCollatorWithPadding(tok)]:
        for _ in range(2):
            assert_same_batch(collator([dict(r) for r in ROWS]), theirs)
    assert_same_batch(
        fastcollate.pad([dict(r) for r in ROWS], tok, return_tensors="pt"),
        tok.pad([dict(r) for r in ROWS], return_tensors="pt"),
    )
