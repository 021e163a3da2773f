"""Length grouping: fastcollate's get_length_grouped_indices, sequence_lengths and samplers
against transformers' own, for the same inputs and torch seeds."""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from transformers import trainer_pt_utils as hf

import fastcollate
from fastcollate import (
    DistributedLengthGroupedSampler,
    LengthGroupedSampler,
    get_length_grouped_indices,
    sequence_lengths,
)
from fastcollate._internal.extras import install_command
from tests.support.blocked_imports import run_without
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity

SETTINGS = settings(max_examples=examples(40), deadline=None)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# Few distinct lengths, so ties (where sort stability matters) are common.
lengths_lists = st.lists(st.integers(0, 12), min_size=1, max_size=300)


@SETTINGS
@given(
    lengths=lengths_lists,
    batch_size=st.integers(1, 9),
    mega_batch_mult=st.one_of(st.none(), st.integers(1, 6)),
    seed=st.integers(0, 2**31),
    kind=st.sampled_from(["list", "int64", "int32", "uint16", "tensor"]),
)
def test_indices_match_transformers(lengths, batch_size, mega_batch_mult, seed, kind):
    given_lengths = {
        "list": lengths,
        "int64": np.array(lengths, dtype=np.int64),
        "int32": np.array(lengths, dtype=np.int32),
        "uint16": np.array(lengths, dtype=np.uint16),
        "tensor": torch.tensor(lengths),
    }[kind]
    ours = get_length_grouped_indices(given_lengths, batch_size, mega_batch_mult, generator(seed))
    theirs = hf.get_length_grouped_indices(lengths, batch_size, mega_batch_mult, generator(seed))
    assert ours == theirs
    assert all(type(i) is int for i in ours)


def test_large_input_matches_transformers():
    # Large enough for the Rust core to sort mega-batches on several threads.
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 512, size=300_000)
    ours = get_length_grouped_indices(lengths, 8, generator=generator(5))
    theirs = hf.get_length_grouped_indices(lengths.tolist(), 8, generator=generator(5))
    assert ours == theirs


def test_global_rng_is_consumed_like_transformers():
    lengths = list(range(50)) * 3
    torch.manual_seed(1234)
    ours = get_length_grouped_indices(lengths, 4)
    ours_next = torch.rand(3)
    torch.manual_seed(1234)
    theirs = hf.get_length_grouped_indices(lengths, 4)
    theirs_next = torch.rand(3)
    assert ours == theirs
    assert torch.equal(ours_next, theirs_next)


def test_longest_first_and_sorted_mega_batches():
    lengths = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
    indices = get_length_grouped_indices(lengths, 2, mega_batch_mult=2, generator=generator(0))
    assert sorted(indices) == list(range(len(lengths)))
    assert lengths[indices[0]] == max(lengths)
    for start in range(0, len(indices), 4):
        # Each mega-batch is sorted longest first; its head may have been swapped.
        rest = [lengths[i] for i in indices[start + 1 : start + 4]]
        assert rest == sorted(rest, reverse=True)


def test_empty_lengths_give_no_indices():
    # transformers raises on an empty tensor in torch.argmax; no rows means no indices.
    assert get_length_grouped_indices([], 4) == []


@pytest.mark.parametrize(
    ("lengths", "batch_size", "error", "match"),
    [
        ([1, 2, -3], 2, ValueError, r"lengths\[2\] is -3"),
        ([1, 2.5, 3], 2, TypeError, r"lengths\[1\] is 2.5"),
        ([1, None, 3], 2, TypeError, r"lengths\[1\] is None"),
        (np.array([1.0, 2.0]), 2, TypeError, "float64"),
        (torch.tensor([1.0, 2.0]), 2, TypeError, "float"),
        (np.array([[1, 2]]), 2, ValueError, "one-dimensional"),
        (np.array([2**63], dtype=np.uint64), 2, OverflowError, r"lengths\[0\]"),
        ([1, 2], 0, ValueError, "batch_size must be at least 1"),
        ([1, 2], -4, ValueError, "batch_size must be at least 1"),
        ([1, 2], 2.0, TypeError, "batch_size must be an integer"),
        ([1, 2], True, TypeError, "batch_size must be an integer"),
    ],
)
def test_bad_arguments_raise(lengths, batch_size, error, match):
    with pytest.raises(error, match=match):
        get_length_grouped_indices(lengths, batch_size)


def test_bad_mega_batch_mult_raises():
    with pytest.raises(ValueError, match="mega_batch_mult must be at least 1"):
        get_length_grouped_indices([1, 2, 3], 1, mega_batch_mult=0)


# --- sequence_lengths --------------------------------------------------------------------------


def ragged_dataset(lengths, **extra) -> datasets.Dataset:
    rows = [list(range(n)) for n in lengths]
    return datasets.Dataset.from_dict({"input_ids": rows, **extra})


def decoded_lengths(dataset, column="input_ids"):
    return [len(row[column]) for row in dataset]


@pytest.fixture(scope="module")
def dataset():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 40, size=500).tolist()
    return ragged_dataset(lengths, label=list(range(500)), text=[str(n) for n in lengths])


def test_lengths_from_arrow(dataset):
    lengths = sequence_lengths(dataset)
    assert lengths.dtype == np.int64
    assert lengths.tolist() == decoded_lengths(dataset)


@pytest.mark.parametrize(
    "view",
    [
        lambda d: d.shuffle(seed=3),
        lambda d: d.select([5, 2, 2, 499, 0]),
        lambda d: d.filter(lambda row: row["label"] % 3 == 0),
        lambda d: d.shuffle(seed=1).select(range(100, 50, -2)),
        lambda d: d.train_test_split(test_size=0.3, seed=0)["test"],
        lambda d: d.with_format("torch"),
        lambda d: d.sort("text"),
    ],
)
def test_lengths_follow_the_indices_mapping(dataset, view):
    viewed = view(dataset)
    assert sequence_lengths(viewed).tolist() == decoded_lengths(viewed)


def test_lengths_from_a_chunked_table():
    parts = [ragged_dataset([3, 1, 4]), ragged_dataset([1, 5]), ragged_dataset([9, 2, 6])]
    combined = datasets.concatenate_datasets(parts)
    assert combined.data.table.column("input_ids").num_chunks > 1
    assert sequence_lengths(combined).tolist() == [3, 1, 4, 1, 5, 9, 2, 6]
    shuffled = combined.shuffle(seed=0)
    assert sequence_lengths(shuffled).tolist() == decoded_lengths(shuffled)


def test_lengths_from_sliced_arrow_chunks():
    # A sliced chunk has a non-zero offset into its offsets buffer.
    full = pa.array([[1] * n for n in range(10)], type=pa.list_(pa.int32()))
    table = pa.table({"input_ids": pa.chunked_array([full.slice(2, 3), full.slice(7, 3)])})
    dataset = datasets.Dataset(datasets.table.InMemoryTable(table))
    assert sequence_lengths(dataset).tolist() == [2, 3, 4, 7, 8, 9]


@pytest.mark.parametrize(
    ("arrow_type", "values"),
    [
        (pa.large_list(pa.int64()), [[1, 2], [], [3, 4, 5]]),
        (pa.list_(pa.int16()), [[1, 2], [], [3, 4, 5]]),
        (pa.list_(pa.list_(pa.int32())), [[[1], [2, 3]], [], [[4], [5], [6]]]),
    ],
)
def test_lengths_of_other_list_types(arrow_type, values):
    table = pa.table({"input_ids": pa.array(values, type=arrow_type)})
    dataset = datasets.Dataset(datasets.table.InMemoryTable(table))
    assert sequence_lengths(dataset).tolist() == decoded_lengths(dataset) == [2, 0, 3]


def test_lengths_of_fixed_size_lists():
    features = datasets.Features({"input_ids": datasets.List(datasets.Value("int32"), length=4)})
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3, 4]] * 3}, features=features)
    assert pa.types.is_fixed_size_list(dataset.data.table.column("input_ids").type)
    assert sequence_lengths(dataset).tolist() == [4, 4, 4]


def test_other_column(dataset):
    ds = dataset.rename_column("input_ids", "input_values")
    assert sequence_lengths(ds, column="input_values").tolist() == decoded_lengths(
        ds, "input_values"
    )


def test_length_column_is_read_instead(dataset):
    # A length column that disagrees with the lists proves which one is read.
    ds = dataset.add_column("length", [n * 10 for n in range(len(dataset))]).shuffle(seed=2)
    assert sequence_lengths(ds, length_column_name="length").tolist() == ds["length"][:]
    assert sequence_lengths(ds).tolist() == decoded_lengths(ds)


def test_transformed_datasets_are_decoded(dataset):
    # A transform may change the rows, so the row pass sees what the Trainer would see.
    ds = dataset.with_transform(
        lambda batch: {"input_ids": [ids + [0, 0] for ids in batch["input_ids"]]}
    )
    assert sequence_lengths(ds).tolist() == [n + 2 for n in sequence_lengths(dataset).tolist()]


class TorchDataset(torch.utils.data.Dataset):
    def __init__(self, lengths):
        self.rows = [{"input_ids": torch.ones(n, dtype=torch.long)} for n in lengths]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]


def test_row_pass_for_other_datasets():
    lengths = [4, 0, 7, 2]
    assert sequence_lengths(TorchDataset(lengths)).tolist() == lengths
    rows = [{"input_ids": [0] * n, "length": n + 1} for n in lengths]
    assert sequence_lengths(rows).tolist() == lengths
    assert sequence_lengths(rows, length_column_name="length").tolist() == [5, 1, 8, 3]
    assert sequence_lengths([]).tolist() == []


def test_sequence_length_errors(dataset):
    with pytest.raises(ValueError, match="no column 'input_values'"):
        sequence_lengths(dataset, column="input_values")
    with pytest.raises(ValueError, match="no column 'n_tokens'"):
        sequence_lengths(dataset, length_column_name="n_tokens")
    with pytest.raises(TypeError, match="column 'text' holds string values, not lists"):
        sequence_lengths(dataset, column="text")
    with pytest.raises(TypeError, match="length column 'text' holds string"):
        sequence_lengths(dataset, length_column_name="text")
    floats = dataset.add_column("length", [0.5] * len(dataset))
    with pytest.raises(TypeError, match="length column 'length' holds double"):
        sequence_lengths(floats, length_column_name="length")
    negative = dataset.add_column("length", [3] * 499 + [-1])
    with pytest.raises(ValueError, match="row 499 of the dataset has length -1"):
        sequence_lengths(negative, length_column_name="length")


def test_null_rows_are_named_after_shuffling():
    ds = datasets.Dataset.from_dict({"input_ids": [[1], None, [1, 2], [3]]})
    with pytest.raises(ValueError, match="row 1 of the dataset has no 'input_ids' value"):
        sequence_lengths(ds)
    view = ds.select([3, 2, 0, 1])
    with pytest.raises(ValueError, match="row 3 of the dataset has no 'input_ids' value"):
        sequence_lengths(view)
    # A null row that the view leaves out is no error.
    assert sequence_lengths(ds.select([2, 0])).tolist() == [2, 1]


def test_row_pass_errors():
    with pytest.raises(ValueError, match="row 1 of the dataset has no 'input_ids' key"):
        sequence_lengths([{"input_ids": [1]}, {"labels": [1]}])
    with pytest.raises(ValueError, match="row 0 of the dataset is a list, not a mapping"):
        sequence_lengths([[1, 2]])
    with pytest.raises(ValueError, match="row 1 of the dataset has no 'input_ids' value"):
        sequence_lengths([{"input_ids": [1]}, {"input_ids": None}])
    with pytest.raises(TypeError, match="'input_ids' in row 0 is a int, which has no length"):
        sequence_lengths([{"input_ids": 5}])


class ShortDataset(TorchDataset):
    """Claims more rows than it yields (iteration stops at the first IndexError)."""

    def __len__(self):
        return len(self.rows) + 2

    def __getitem__(self, index):
        if index >= len(self.rows):
            raise IndexError(index)
        return self.rows[index]


class EndlessDataset(TorchDataset):
    """Never raises IndexError; iteration must stop at len()."""

    def __getitem__(self, index):
        return self.rows[index % len(self.rows)]


def test_row_pass_size_mismatch_raises():
    with pytest.raises(ValueError, match="reports 4 rows but yielded 2"):
        sequence_lengths(ShortDataset([1, 2]))
    with pytest.raises(ValueError, match="reports 4 rows but yielded 2"):
        sequence_lengths(ShortDataset([1, 2]), length_column_name="input_ids")
    assert sequence_lengths(EndlessDataset([1, 2, 3])).tolist() == [1, 2, 3]


# --- samplers ----------------------------------------------------------------------------------


@SETTINGS
@given(lengths=lengths_lists, batch_size=st.integers(1, 9), seed=st.integers(0, 2**31))
def test_length_grouped_sampler_matches_transformers(lengths, batch_size, seed):
    ours = LengthGroupedSampler(batch_size, lengths=lengths, generator=generator(seed))
    theirs = hf.LengthGroupedSampler(batch_size, lengths=lengths, generator=generator(seed))
    assert len(ours) == len(theirs)
    # Two epochs: the generator advances the same way.
    assert list(ours) == list(theirs)
    assert list(ours) == list(theirs)


def test_length_grouped_sampler_on_a_dataset(dataset):
    view = dataset.shuffle(seed=7)
    ours = LengthGroupedSampler(4, dataset=view, generator=generator(0))
    theirs = hf.LengthGroupedSampler(4, dataset=view, generator=generator(0))
    assert ours.lengths.tolist() == theirs.lengths
    assert list(ours) == list(theirs)
    torch.manual_seed(3)
    global_rng = list(LengthGroupedSampler(4, dataset=view))
    torch.manual_seed(3)
    assert global_rng == list(hf.LengthGroupedSampler(4, dataset=view))


def test_sampler_reads_a_datasets_length_column(dataset):
    ds = dataset.add_column("length", [(7 * i) % 31 for i in range(len(dataset))])
    ours = LengthGroupedSampler(4, dataset=ds, lengths=ds["length"], generator=generator(1))
    theirs = hf.LengthGroupedSampler(4, dataset=ds, lengths=ds["length"], generator=generator(1))
    assert list(ours) == list(theirs)


def test_sampler_model_input_name(dataset):
    ds = dataset.rename_column("input_ids", "input_values")
    ours = LengthGroupedSampler(3, dataset=ds, model_input_name="input_values")
    assert ours.lengths.tolist() == decoded_lengths(ds, "input_values")


def test_sampler_errors(dataset):
    with pytest.raises(ValueError, match="One of dataset and lengths must be provided"):
        LengthGroupedSampler(4)
    with pytest.raises(ValueError, match="got 3 lengths for a dataset of 500 rows"):
        LengthGroupedSampler(4, dataset=dataset, lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        LengthGroupedSampler(0, lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="no column 'input_values'"):
        LengthGroupedSampler(4, dataset=dataset, model_input_name="input_values")
    with pytest.raises(ValueError, match=r"lengths\[1\] is -1"):
        list(LengthGroupedSampler(4, lengths=[1, -1]))


@SETTINGS
@given(
    lengths=lengths_lists,
    batch_size=st.integers(1, 5),
    num_replicas=st.integers(1, 4),
    drop_last=st.booleans(),
    seed=st.integers(0, 1000),
    epoch=st.integers(0, 3),
)
def test_distributed_sampler_matches_transformers(
    lengths, batch_size, num_replicas, drop_last, seed, epoch
):
    total_size = -(-len(lengths) // num_replicas) * num_replicas
    # transformers fails its own assertion here (see the next test)
    assume(drop_last or total_size - len(lengths) <= len(lengths))
    for rank in range(num_replicas):
        kwargs = dict(num_replicas=num_replicas, rank=rank, seed=seed, drop_last=drop_last)
        ours = DistributedLengthGroupedSampler(batch_size, lengths=lengths, **kwargs)
        theirs = hf.DistributedLengthGroupedSampler(batch_size, lengths=lengths, **kwargs)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert len(ours) == len(theirs)
        assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)
        assert list(ours) == list(theirs)


def test_distributed_sampler_shards_cover_the_dataset(dataset):
    shards = [
        list(DistributedLengthGroupedSampler(4, dataset=dataset, num_replicas=3, rank=r))
        for r in range(3)
    ]
    assert {len(s) for s in shards} == {167}
    assert set().union(*shards) == set(range(len(dataset)))


def test_distributed_sampler_pads_tiny_datasets_by_repeating():
    # 2 rows over 5 replicas: transformers fails an assertion; torch's DistributedSampler repeats.
    shards = [
        list(DistributedLengthGroupedSampler(1, lengths=[3, 5], num_replicas=5, rank=r, seed=0))
        for r in range(5)
    ]
    # The grouped order is [1, 0] (longest first), repeated to fill 5 slots, one per rank.
    assert shards == [[1], [0], [1], [0], [1]]
    with pytest.raises(AssertionError):
        list(hf.DistributedLengthGroupedSampler(1, lengths=[3, 5], num_replicas=5, rank=0))


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedLengthGroupedSampler(2, lengths=[1, 2], num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="One of dataset and lengths must be provided"):
        DistributedLengthGroupedSampler(2, num_replicas=2, rank=0)


def test_public_names_are_exported():
    for name in (
        "get_length_grouped_indices",
        "sequence_lengths",
        "LengthGroupedSampler",
        "DistributedLengthGroupedSampler",
    ):
        assert name in fastcollate.__all__
        assert getattr(fastcollate, name) is not None
    assert issubclass(
        fastcollate.DistributedLengthGroupedSampler, torch.utils.data.DistributedSampler
    )


@pytest.mark.parametrize(
    "lengths",
    [[2**63], [2**63, 1], [2**63 - 1, 2**63], [2**64], [-(2**63) - 1]],
    ids=["2**63", "2**63 and 1", "past the max", "2**64", "below the min"],
)
def test_a_length_past_int64_raises_transformers_class(lengths):
    with pytest.raises(Exception) as theirs:
        hf.get_length_grouped_indices(lengths, 2, generator=generator(0))
    with pytest.raises(Exception) as ours:
        get_length_grouped_indices(lengths, 2, generator=generator(0))
    assert type(theirs.value) is ValueError
    assert isinstance(ours.value, type(theirs.value)), ours.value
    assert isinstance(ours.value, OverflowError)  # what fastcollate raised before, still
    assert "lengths[" in str(ours.value)


def test_a_meta_lengths_tensor_raises_transformers_class():
    lengths = torch.tensor([3, 4, 5], device="meta")
    with pytest.raises(Exception) as theirs:
        hf.get_length_grouped_indices(lengths, 2, generator=generator(0))
    with pytest.raises(Exception) as ours:
        get_length_grouped_indices(lengths, 2, generator=generator(0))
    assert type(theirs.value) is RuntimeError
    assert type(ours.value) is RuntimeError, ours.value
    assert "meta" in str(ours.value)


def test_grouped_indices_without_torch_say_what_to_install():
    # transformers' order is torch.randperm's: without torch there is no such order to give,
    # and the error says why and how to install it (not a message about return_tensors).
    done = run_without(["torch"], """
        import fastcollate
        try:
            fastcollate.get_length_grouped_indices([3, 1, 2], 2)
        except ImportError as err:
            print(err)
        """)
    assert done.returncode == 0, done.stderr
    message = done.stdout
    assert "get_length_grouped_indices" in message and "torch.randperm" in message
    assert install_command("torch") in message
    assert "return_tensors" not in message


@pytest.mark.parametrize("epoch", [0, 3])
def test_seeded_sampler_orders_by_seed_and_epoch(epoch):
    """With seed=, the order is transformers' under a generator seeded seed + epoch, whatever
    the global generator has drawn before (a resumed epoch sees its order)."""
    generator = torch.Generator().manual_seed(1)
    lengths = [int(x) for x in torch.randint(1, 50, (97,), generator=generator)]
    sampler = fastcollate.LengthGroupedSampler(4, lengths=lengths, seed=11)
    sampler.set_epoch(epoch)
    torch.manual_seed(0)
    first = list(sampler)
    torch.rand(5)  # the global generator moves on: the order does not
    assert list(sampler) == first
    theirs = hf.LengthGroupedSampler(
        4, lengths=lengths, generator=torch.Generator().manual_seed(11 + epoch))
    assert first == list(theirs)
    sampler.set_epoch(epoch + 1)
    assert list(sampler) != first


@pytest.mark.parametrize(("options", "error", "match"), [
    ({"seed": "1"}, TypeError, "seed must be an int, not str"),
    ({"seed": True}, TypeError, "seed must be an int, not bool"),
    ({"seed": 1, "generator": torch.Generator()}, ValueError, "a generator or a seed, not both"),
])
def test_bad_sampler_seeds_raise(options, error, match):
    with pytest.raises(error, match=match):
        fastcollate.LengthGroupedSampler(4, lengths=[1, 2, 3], **options)
