"""Scaling out with Ray on a local cluster (`ray.init(num_cpus=2)`, one per module):

- Ray Data: `read_parquet(...).iter_torch_batches(collate_fn=fastcollate.RayCollateFn(...))`
  gives, batch for batch, what transformers' DataCollatorWithPadding gives for the same rows,
  and every row once per epoch;
- Ray Train: `TorchTrainer` with 2 CPU workers running fastcollate.Trainer gives the losses and
  batches of the same run under torchrun (tests/support/multiprocess_train.py); the workers' Ray
  Data shards, collated by fastcollate, hold transformers' batches, every row once per epoch from
  `streaming_split(equal=False)`, and all rows but Ray's remainder from Ray Train's own
  (equal) split.

Skipped without Ray (`pip install '.[dev]'` installs it). Deselect with `-m "not slow"`."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("ray.train.torch")

import datasets  # noqa: E402
import pyarrow as pa  # noqa: E402
import transformers  # noqa: E402

import fastcollate  # noqa: E402
from tests.support.compare import assert_same_batch  # noqa: E402
from tests.support.ray_cluster import local_cluster, remove_session  # noqa: E402
from tests.support.ray_train_loop import BATCH_SIZE, COLUMNS, EPOCHS, train_loop  # noqa: E402
from tests.support.torchrun import WORLD_SIZE, launch  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.multiprocess, pytest.mark.slow]

ROWS = 103  # not a multiple of the batch size: the last batch of an epoch is short
FILES = 4


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(HF_HUB_OFFLINE="1"):
        yield


def sentence(i: int) -> str:
    return f"review {i} was " + "very " * (i % 11) + "good"


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, bert_tokenizer):
    """A tokenized datasets.Dataset (text, input_ids, token_type_ids, attention_mask, label and
    a row id) written as FILES Parquet files."""
    directory = tmp_path_factory.mktemp("parquet")
    dataset = datasets.Dataset.from_dict(
        {
            "text": [sentence(i) for i in range(ROWS)],
            "label": [i % 3 for i in range(ROWS)],
            "row": list(range(ROWS)),
        }
    ).map(lambda batch: bert_tokenizer(batch["text"]), batched=True)
    for index in range(FILES):
        dataset.shard(FILES, index, contiguous=True).to_parquet(directory / f"part{index}.parquet")
    return directory, dataset


def reference_rows(dataset, rows: list[int]) -> list[dict]:
    return [{key: dataset[row][key] for key in COLUMNS} for row in rows]


def test_ray_data_batches_equal_transformers(cluster, parquet_dir, bert_tokenizer):
    directory, dataset = parquet_dir
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)
    collate = fastcollate.RayCollateFn(
        fastcollate.DataCollatorWithPadding(bert_tokenizer), columns=COLUMNS
    )
    stream = ray.data.read_parquet(str(directory))
    for epoch in range(EPOCHS):
        seen = Counter()
        batches = 0
        for batch in stream.iter_torch_batches(batch_size=BATCH_SIZE, collate_fn=collate):
            rows = batch["row"].tolist()
            assert 0 < len(rows) <= BATCH_SIZE
            seen.update(rows)
            # Ray hands out a collate_fn's mapping of tensors as a dict (transformers' too).
            assert_same_batch(batch, dict(theirs(reference_rows(dataset, rows))))
            batches += 1
        assert seen == Counter(range(ROWS)), epoch
        assert batches >= ROWS // BATCH_SIZE


def test_ray_collate_fn_takes_arrow_batches(cluster, parquet_dir, bert_tokenizer):
    """Ray hands a RayCollateFn pyarrow Tables (a plain function would get dicts of numpy
    arrays, with a deprecation warning); a collator without an Arrow path gets the rows."""
    from ray.data.collate_fn import ArrowBatchCollateFn
    from ray.util.annotations import RayDeprecationWarning

    directory, dataset = parquet_dir
    given = []

    def rows_collator(rows):
        given.append(rows)
        return transformers.DataCollatorWithPadding(bert_tokenizer)(rows)

    collate = fastcollate.RayCollateFn(rows_collator, columns=COLUMNS)
    assert isinstance(collate, ArrowBatchCollateFn)
    stream = ray.data.read_parquet(str(directory)).limit(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RayDeprecationWarning)
        batches = list(stream.iter_torch_batches(batch_size=BATCH_SIZE, collate_fn=collate))
    assert sum(len(rows) for rows in given) == 8
    assert all(isinstance(rows, list) and list(rows[0]) == COLUMNS for rows in given)
    for rows, batch in zip(given, batches, strict=True):
        expected = transformers.DataCollatorWithPadding(bert_tokenizer)(
            reference_rows(dataset, [row["row"] for row in rows])
        )
        assert_same_batch(batch, dict(expected))


def test_ray_collate_fn_from_several_threads_at_once(parquet_dir, bert_tokenizer):
    """Ray's prefetch threads call one collate_fn concurrently: each batch is still what one
    thread gets."""
    _, dataset = parquet_dir
    table = dataset.with_format("arrow")[:].select(COLUMNS)
    tables = [table.slice(start, 1 + start % 9) for start in range(0, ROWS - 9)]
    collate = fastcollate.RayCollateFn(fastcollate.DataCollatorWithPadding(bert_tokenizer))
    alone = [collate(t) for t in tables]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(collate, tables * 4))
    for index, batch in enumerate(together):
        assert_same_batch(batch, alone[index % len(tables)])


def test_ray_collate_fn_rejects_what_is_not_a_collator():
    with pytest.raises(TypeError, match="RayCollateFn takes a collator"):
        fastcollate.RayCollateFn("input_ids")


def test_ray_collate_fn_names_missing_columns(bert_tokenizer):
    collate = fastcollate.RayCollateFn(
        fastcollate.DataCollatorWithPadding(bert_tokenizer), columns=["input_ids", "labels"]
    )
    with pytest.raises(ValueError, match="labels"):
        collate(pa.table({"input_ids": [[1, 2], [3]]}))


@pytest.fixture(scope="module")
def ray_and_torchrun(cluster, parquet_dir, tmp_path_factory):
    """The same fastcollate.Trainer run (tests/support/multiprocess_train.py, seed 3) on 2 Ray Train
    CPU workers and on 2 torchrun processes."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    base = tmp_path_factory.mktemp("ray_train")
    out = base / "ray"
    out.mkdir()
    stream = ray.data.read_parquet(str(parquet_dir[0]))
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={
            "out": str(out),
            "seed": 3,
            "unequal": stream.streaming_split(WORLD_SIZE, equal=False),
        },
        # Half a CPU each leaves the cluster's other CPU to Ray Data's read tasks (with a
        # whole one each, reading the shards waits forever for a free CPU).
        scaling_config=ScalingConfig(
            num_workers=WORLD_SIZE, use_gpu=False, resources_per_worker={"CPU": 0.5}
        ),
        run_config=RunConfig(storage_path=str(base / "storage"), name="fastcollate"),
        datasets={"train": stream},
    )
    result = trainer.fit()
    assert result.error is None, result.error
    ranks = [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    shards = [json.loads((out / f"shard{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    return ranks, shards, launch(base / "torchrun", seed=3)


def test_ray_train_gives_torchruns_losses(ray_and_torchrun):
    ranks, _, torchrun = ray_and_torchrun
    assert [r["rank"] for r in ranks] == list(range(WORLD_SIZE))
    assert all(r["world_size"] == WORLD_SIZE for r in ranks)
    for ours, theirs in zip(ranks, torchrun, strict=True):
        assert ours["collator"] == "fastcollate.collators.padding.DataCollatorWithPadding"
        assert ours["sampler"] == theirs["sampler"]
        assert ours["batches"] == theirs["batches"]
        assert ours["losses"] == theirs["losses"]
        assert len(ours["losses"]) == len(ours["batches"]) > 0


def rows_per_epoch(shards, name, dataset, tokenizer) -> list[Counter]:
    """How often each row came, per epoch, over the workers' `name` shards; every batch checked
    against transformers' collator on its rows."""
    theirs = transformers.DataCollatorWithPadding(tokenizer)
    counts = []
    for epoch in range(EPOCHS):
        seen = Counter()
        for shard in shards:
            for batch in shard[name][epoch]:
                seen.update(batch["row"])
                expected = theirs(reference_rows(dataset, batch["row"]))
                assert list(batch) == list(expected)
                assert batch == {key: value.tolist() for key, value in expected.items()}
        counts.append(seen)
    return counts


def test_ray_train_unequal_split_gives_every_row_once_per_epoch(
    ray_and_torchrun, parquet_dir, bert_tokenizer
):
    """`streaming_split(equal=False)` hands out whole blocks as workers ask for them (a worker
    may even get none): every row once per epoch across the workers."""
    _, shards, _ = ray_and_torchrun
    for seen in rows_per_epoch(shards, "unequal", parquet_dir[1], bert_tokenizer):
        assert seen == Counter(range(ROWS))


def test_ray_train_own_split_leaves_out_the_remainder(
    ray_and_torchrun, parquet_dir, bert_tokenizer
):
    """Ray Train splits datasets={...} into equal shards (equal=True), so that every worker
    takes as many steps: of 103 rows on 2 workers, one is left out each epoch. None twice."""
    _, shards, _ = ray_and_torchrun
    for seen in rows_per_epoch(shards, "equal", parquet_dir[1], bert_tokenizer):
        assert set(seen.values()) == {1}
        assert len(seen) == ROWS - ROWS % WORLD_SIZE
    per_worker = [sum(len(b["row"]) for b in shard["equal"][0]) for shard in shards]
    assert per_worker == [ROWS // WORLD_SIZE] * WORLD_SIZE


def test_remove_session_leaves_other_sessions(tmp_path):
    ours, theirs = tmp_path / "session_ours", tmp_path / "session_theirs"
    for session in (ours, theirs):
        (session / "logs").mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(ours)
    remove_session(ours)
    assert not ours.exists() and theirs.exists()
    assert not (tmp_path / "session_latest").is_symlink()
    (tmp_path / "session_latest").symlink_to(theirs)
    remove_session(tmp_path / "session_gone")  # another run's link stays
    assert (tmp_path / "session_latest").is_symlink()
