"""Seeded native masks keyed by a batch's place (`BatchPlace`, set by fastcollate.Trainer's
loaders around each collate call): a pure function of (seed, loader, epoch, position, maskings
before it in the batch), apart from the collator's own batch count."""

from __future__ import annotations

import pytest
import torch

import fastcollate
from fastcollate.collators.masking import (
    BATCH_PLACE,
    BATCHES_PER_EPOCH,
    CALLS_PER_BATCH,
    BatchPlace,
)

ROWS = [{"input_ids": [101, *range(2000 + i, 2040 + i), 102]} for i in range(4)]


def collator(tokenizer):
    return fastcollate.DataCollatorForLanguageModeling(tokenizer, seed=5)


def placed(collate, rows, place):
    token = BATCH_PLACE.set(place)
    try:
        return collate(rows)["labels"]
    finally:
        BATCH_PLACE.reset(token)


def test_placed_batches_mask_by_their_place(bert_tokenizer):
    """A batch collated with its place set (as fastcollate.Trainer's loaders do) masks by that
    place, not by the collator's count: a training batch as the unplaced collator's batch at
    that count in that epoch, an evaluation batch apart from it, two maskings in one batch
    apart from each other; the collator's own count does not move."""
    rows = ROWS[:4]
    reference = collator(bert_tokenizer)
    reference.set_epoch(1)
    unplaced = [reference(rows)["labels"] for _ in range(3)]
    collate = collator(bert_tokenizer)
    assert torch.equal(placed(collate, rows, BatchPlace(0, 1, 2)), unplaced[2])
    assert torch.equal(placed(collate, rows, BatchPlace(0, 1, 0)), unplaced[0])
    evaluation = placed(collate, rows, BatchPlace(1, 1, 0))
    assert not torch.equal(evaluation, unplaced[0])
    twice = BatchPlace(0, 1, 0)
    first, second = placed(collate, rows, twice), placed(collate, rows, twice)
    assert torch.equal(first, unplaced[0]) and not torch.equal(first, second)
    collate.set_epoch(1)
    assert torch.equal(collate(rows)["labels"], unplaced[0])  # its count never moved


def test_a_place_past_what_a_key_holds_is_refused(bert_tokenizer):
    collate = collator(bert_tokenizer)
    with pytest.raises(ValueError, match="past the 4294967296 batches"):
        placed(collate, ROWS[:4], BatchPlace(0, 0, BATCHES_PER_EPOCH))
    with pytest.raises(ValueError, match="masked one batch 65536 times"):
        placed(collate, ROWS[:4], BatchPlace(0, 0, 0, calls=CALLS_PER_BATCH))
    with pytest.raises(ValueError, match="the epoch must lie in"):
        placed(collate, ROWS[:4], BatchPlace(0, -1, 0))
