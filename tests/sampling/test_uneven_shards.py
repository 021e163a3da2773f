"""What docs/streams.md warns of under `dispatch_batches=False`: accelerate splits a
`datasets.IterableDataset` with at least as many shards as processes by whole shards, so 3
shards on 2 ranks give the ranks different epoch lengths (a DDP job can hang on it). Pinned
against the installed accelerate and datasets, with the page's warning."""

from __future__ import annotations

import datasets
import pytest
from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader

from tests.support.repository import ROOT


def batches_per_rank(shards: int, ranks: int, rows: int = 72, batch_size: int = 2) -> list[int]:
    stream = datasets.Dataset.from_dict({"x": list(range(rows))}).to_iterable_dataset(
        num_shards=shards).with_format("torch")
    counts = []
    for rank in range(ranks):
        loader = prepare_data_loader(DataLoader(stream, batch_size=batch_size),
                                     num_processes=ranks, process_index=rank,
                                     dispatch_batches=False, put_on_device=False)
        counts.append(sum(1 for _ in loader))
    return counts


@pytest.mark.parametrize(("shards", "even"), [(3, False), (4, True), (2, True)])
def test_uneven_shards_give_ranks_different_epoch_lengths(shards, even):
    counts = batches_per_rank(shards, 2)
    assert (counts[0] == counts[1]) is even, counts
    if not even:
        assert max(counts) == 2 * min(counts), counts


def test_streams_page_warns_where_it_recommends_the_option():
    text = (ROOT / "docs" / "streams.md").read_text(encoding="utf-8")
    section = text[text.index("### Streaming DDP with dynamic padding"):]
    section = section[:section.index("\n## ")]
    assert "**Uneven shards give ranks different epoch lengths.**" in section
    assert "hangs" in section
