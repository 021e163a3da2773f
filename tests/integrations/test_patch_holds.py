"""`patch_transformers()` handles nest and race safely: an inner `with` block or a second
handle undoes only its own hold, transformers' objects come back (by identity) when the last
hold ends, and threads patching and unpatching at once never leave fastcollate's function
recorded as transformers' (which made every fall-back `tokenizer.pad` recurse)."""

from __future__ import annotations

import importlib
import threading

import pytest
import transformers
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

import fastcollate
from fastcollate._internal import patching
from fastcollate.integrations import tokenizer_pad as routed
from tests.support.thread_races import race

pytestmark = pytest.mark.parity

ORIGINAL_PAD = vars(PreTrainedTokenizerBase)["pad"]
COLLATOR_MODULE = importlib.import_module("transformers.data.data_collator")
ORIGINAL_PADDING = COLLATOR_MODULE.DataCollatorWithPadding
ROWS = [{"input_ids": [101, 7, 102]}, {"input_ids": [101, 102]}]


@pytest.fixture(autouse=True)
def unpatched_after():
    yield
    fastcollate.unpatch_transformers()
    assert vars(PreTrainedTokenizerBase)["pad"] is ORIGINAL_PAD
    assert COLLATOR_MODULE.DataCollatorWithPadding is ORIGINAL_PADDING
    assert [place for place in patching._places.values()
            if place.module_name.startswith("transformers")] == []


def patched() -> bool:
    return transformers.DataCollatorWithPadding is fastcollate.DataCollatorWithPadding


def assert_restored(tokenizer):
    assert vars(PreTrainedTokenizerBase)["pad"] is ORIGINAL_PAD
    assert transformers.DataCollatorWithPadding is ORIGINAL_PADDING
    assert patching.original("transformers.tokenization_utils_base",
                             "PreTrainedTokenizerBase.pad") is ORIGINAL_PAD
    # Python output: transformers' own method, and no recursion through fastcollate's.
    assert tokenizer.pad(ROWS)["input_ids"] == [[101, 7, 102], [101, 102, 0]]


def test_leaving_an_inner_with_keeps_the_outer_patch(bert_tokenizer):
    with fastcollate.patch_transformers(tokenizer_pad=True):
        with fastcollate.patch_transformers():
            assert patched()
        assert patched()
        assert vars(PreTrainedTokenizerBase)["pad"] is routed.tokenizer_pad
    assert not patched()
    assert_restored(bert_tokenizer)


def test_each_handle_undoes_only_its_own(bert_tokenizer):
    first = fastcollate.patch_transformers(tokenizer_pad=True)
    second = fastcollate.patch_transformers()
    second.undo()
    second.undo()  # twice: nothing more
    assert patched()
    assert vars(PreTrainedTokenizerBase)["pad"] is routed.tokenizer_pad  # first's hold
    first.undo()
    assert_restored(bert_tokenizer)
    # The other order, with the method held by the handle undone last.
    first = fastcollate.patch_transformers()
    second = fastcollate.patch_transformers(tokenizer_pad=True)
    first.undo()
    assert patched() and vars(PreTrainedTokenizerBase)["pad"] is routed.tokenizer_pad
    second.undo()
    assert_restored(bert_tokenizer)


def test_unpatch_ends_every_hold(bert_tokenizer):
    first = fastcollate.patch_transformers(tokenizer_pad=True)
    fastcollate.patch_transformers()
    fastcollate.unpatch_transformers()
    assert_restored(bert_tokenizer)
    first.undo()  # its hold already ended
    assert_restored(bert_tokenizer)


def test_racing_patch_and_unpatch_leave_transformers_whole(bert_tokenizer):
    """Many threads released at once, each patching (with the tokenizer method) and undoing by
    its handle or by `unpatch_transformers()`, while others ask for transformers' original:
    every original read is transformers' own, and the end state is transformers' objects."""
    threads_count, rounds = 8, 4
    seen: list[object] = []

    def step(index: int, round_index: int) -> None:
        handle = fastcollate.patch_transformers(tokenizer_pad=True)
        seen.append(patching.original("transformers.tokenization_utils_base",
                                      "PreTrainedTokenizerBase.pad"))
        if (index + round_index) % 3 == 0:
            fastcollate.unpatch_transformers()
        else:
            handle.undo()

    errors = race(step, threads_count, rounds)
    assert errors == []
    assert len(seen) == threads_count * rounds
    assert all(value is ORIGINAL_PAD for value in seen)
    fastcollate.unpatch_transformers()
    assert_restored(bert_tokenizer)


def test_unpatch_while_a_patch_reads_the_method(bert_tokenizer, monkeypatch):
    """The interleaving that broke it, made deterministic: each time one thread's patch reads
    `PreTrainedTokenizerBase`'s namespace (its `pad` patched by an earlier handle), another
    thread unpatches. The method recorded must still be transformers', so that the final
    unpatch restores it."""
    fastcollate.patch_transformers(tokenizer_pad=True)
    patching_thread = threading.get_ident()
    unpatchers: list[threading.Thread] = []

    def read_and_let_another_thread_unpatch(holder):
        namespace = dict(vars(holder))  # as it is now, before the other thread runs
        if (holder is PreTrainedTokenizerBase and threading.get_ident() == patching_thread
                and len(unpatchers) < 3):
            unpatcher = threading.Thread(target=fastcollate.unpatch_transformers)
            unpatchers.append(unpatcher)
            unpatcher.start()
            # Under the lock the other thread waits for this patch to finish; without it, it
            # runs to its end now, between this read and what the patch does with it.
            unpatcher.join(timeout=0.5)
        return namespace

    # The patching module's `vars` (how it reads a class's own attribute), spied on.
    monkeypatch.setattr(patching, "vars", read_and_let_another_thread_unpatch, raising=False)
    handle = fastcollate.patch_transformers(tokenizer_pad=True)
    for unpatcher in unpatchers:
        unpatcher.join(timeout=60)
    monkeypatch.undo()
    assert unpatchers
    handle.undo()
    fastcollate.unpatch_transformers()
    assert_restored(bert_tokenizer)


def test_original_is_never_fastcollates_object():
    with fastcollate.patch_transformers(tokenizer_pad=True):
        assert patching.original("transformers.data.data_collator",
                                 "DataCollatorWithPadding") is ORIGINAL_PADDING
        assert patching.original("transformers.tokenization_utils_base",
                                 "PreTrainedTokenizerBase.pad") is ORIGINAL_PAD
