"""The Arrow path for TRL's SFTTrainer: `fastcollate.trl.SFTTrainer` (which `patch_trl()` puts in
`trl`) hands fastcollate's collator ArrowBatch handles, and the batches and losses are TRL's;
where the batches could differ (TRL's own collator, text columns kept) the rows are used."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import datasets  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
import trl.trainer  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_trl_patch import MODES, _dataset  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402
from trl.trainer.sft_trainer import (  # noqa: E402
    DataCollatorForLanguageModeling as TRLCollator,
)

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from compare import assert_same_batch  # noqa: E402
from fastcollate import ArrowBatch, ArrowBatches  # noqa: E402
from fastcollate.arrow.trainer_datasets import wrap_for_trainer  # noqa: E402
from fastcollate.trl import DataCollatorForLanguageModeling  # noqa: E402

SETTINGS = settings(
    max_examples=int(os.environ.get("FASTCOLLATE_EXAMPLES", 50)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def seen(monkeypatch):
    """The type of every batch fastcollate's SFT collator is handed (patched on the class
    itself, so the collator still says it takes Arrow batches)."""
    types: list[type] = []
    call = DataCollatorForLanguageModeling.torch_call

    def recording(self, examples):
        types.append(type(examples))
        return call(self, examples)

    monkeypatch.setattr(DataCollatorForLanguageModeling, "torch_call", recording)
    return types


def _trainer(model_path, tmp_path, mode: str, trainer_class, **extra):
    """A seeded tiny Llama under `trainer_class` (TRL's SFTTrainer or a subclass) on the
    fixture dataset of test_trl_patch, in one of its modes."""
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    dataset = extra.pop("train_dataset", None) or _dataset(tokenizer)
    args = trl.SFTConfig(
        output_dir=str(tmp_path / mode),
        eos_token="[SEP]",
        per_device_train_batch_size=4,
        per_device_eval_batch_size=3,
        max_steps=4,
        logging_steps=1,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        **{**MODES[mode], **extra},
    )
    return trainer_class(
        model=LlamaForCausalLM(config),
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset.select(range(7)),
        processing_class=tokenizer,
    )


def _losses(trainer) -> list[float]:
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def _batches(loader) -> list[dict]:
    torch.manual_seed(1)  # the random sampler's draw
    return list(loader)


def _assert_same_batches(ours: list[dict], theirs: list[dict]) -> None:
    assert len(ours) == len(theirs) > 0
    for mine, trls in zip(ours, theirs, strict=True):
        assert_same_batch(mine, trls)


# --- a real SFTTrainer, step for step ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_patched_sft_trainer_trains_the_same_from_arrow(model_path, tmp_path, mode, seen):
    theirs = _losses(_trainer(model_path, tmp_path / "trl", mode, trl.SFTTrainer))
    assert not seen
    with fastcollate.patch_trl():
        # An unchanged script: it looks SFTTrainer up in trl after the patch.
        trainer = _trainer(model_path, tmp_path / "ours", mode, trl.SFTTrainer)
        assert type(trainer) is fastcollate.trl.SFTTrainer
        assert type(trainer.data_collator) is DataCollatorForLanguageModeling
        ours = _losses(trainer)
    assert len(theirs) == 4
    assert ours == theirs
    # Accelerate's DataLoader fetches one batch ahead: at least the 4 trained on.
    assert len(seen) >= 4 and set(seen) == {ArrowBatch}


@pytest.mark.parametrize("mode", list(MODES))
def test_train_and_eval_loaders_give_trls_batches(model_path, tmp_path, mode, seen):
    plain = _trainer(model_path, tmp_path / "trl", mode, trl.SFTTrainer)
    with fastcollate.patch_trl():
        ours = _trainer(model_path, tmp_path / "ours", mode, fastcollate.trl.SFTTrainer)
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, ArrowBatches)
    # TRL's preparation builds labels; packing adds seq_lengths.
    kept = {"input_ids", "labels"} | ({"seq_lengths"} if mode == "packed" else set())
    assert set(loader.dataset.columns) == kept
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    eval_loader = ours.get_eval_dataloader()
    assert isinstance(eval_loader.dataset, ArrowBatches)
    _assert_same_batches(_batches(eval_loader), _batches(plain.get_eval_dataloader()))
    assert seen and set(seen) == {ArrowBatch}


def test_length_grouping_reads_the_dataset_under_the_arrow_batches(model_path, tmp_path, seen):
    options = {"train_sampling_strategy": "group_by_length"}
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer, **options)
    with fastcollate.patch_trl():
        ours = _trainer(
            model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer, **options
        )
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, ArrowBatches)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    assert set(seen) == {ArrowBatch}


# --- where the rows stay rows -----------------------------------------------------------------


def test_trls_own_collator_gets_rows(model_path, tmp_path):
    # Unpatched, SFTTrainer builds TRL's collator, which needs Python rows.
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer)
    ours = _trainer(model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer)
    assert type(ours.data_collator) is TRLCollator
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, datasets.Dataset)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))


def test_text_columns_kept_keep_the_rows(model_path, tmp_path, seen):
    # remove_unused_columns=False keeps a text column the Arrow path does not read: the rows
    # (with the text) go to the collator, which ignores the text as TRL's does.
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    dataset = _dataset(tokenizer)
    dataset = dataset.add_column("source", [f"doc {i}" for i in range(len(dataset))])
    options = {"remove_unused_columns": False, "train_dataset": dataset}
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer, **options)
    with fastcollate.patch_trl():
        ours = _trainer(
            model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer, **options
        )
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, datasets.Dataset)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    assert seen and set(seen) == {list}


def test_patch_puts_the_trainer_in_trl_and_takes_it_back():
    theirs = trl.SFTTrainer
    with fastcollate.patch_trl() as handle:
        assert trl.SFTTrainer is fastcollate.trl.SFTTrainer
        assert trl.trainer.SFTTrainer is fastcollate.trl.SFTTrainer
        assert "trl.SFTTrainer" in repr(handle)
    assert trl.SFTTrainer is theirs and trl.trainer.SFTTrainer is theirs
    assert issubclass(fastcollate.trl.SFTTrainer, theirs)


# --- the batches of the Arrow path, over datasets hypothesis draws ----------------------------

_OPTIONS = [
    {"pad_token_id": 0},
    {"pad_token_id": 0, "pad_to_multiple_of": 4},
    {"pad_token_id": 0, "return_position_ids": True},
    {"pad_token_id": 0, "padding_free": True},
    {"pad_token_id": 0, "padding_free": True, "pad_to_multiple_of": 8},
]


@st.composite
def _sft_datasets(draw):
    """A prepared SFT dataset as TRL leaves it (input_ids, maybe labels, maybe seq_lengths),
    in one or several Arrow chunks, perhaps behind an indices mapping."""
    n = draw(st.integers(1, 12))
    with_labels = draw(st.booleans())
    packed = draw(st.booleans())
    rows = []
    for _ in range(n):
        parts = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3 if packed else 1))
        ids = draw(
            st.lists(st.integers(0, 500), min_size=sum(parts), max_size=sum(parts))
        )
        row = {"input_ids": ids}
        if with_labels:
            row["labels"] = [draw(st.sampled_from([-100, t])) for t in ids]
        if packed:
            row["seq_lengths"] = parts
        rows.append(row)
    cut = draw(st.integers(0, n))
    pieces = [rows[:cut], rows[cut:]] if 0 < cut < n else [rows]
    dataset = datasets.concatenate_datasets([datasets.Dataset.from_list(p) for p in pieces])
    view = draw(st.sampled_from(["all", "shuffle", "select", "filter"]))
    if view == "shuffle":
        dataset = dataset.shuffle(seed=draw(st.integers(0, 99)))
    elif view == "select":
        picked = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n))
        dataset = dataset.select(picked)
    elif view == "filter":
        dataset = dataset.filter(lambda row: len(row["input_ids"]) % 3 != 1)
        if not len(dataset):
            dataset = datasets.Dataset.from_list(rows)
    return dataset


@SETTINGS
@given(dataset=_sft_datasets(), options=st.sampled_from(_OPTIONS), data=st.data())
def test_arrow_loader_batches_equal_rows_and_trl(dataset, options, data):
    ours = DataCollatorForLanguageModeling(**options)
    wrapped = wrap_for_trainer(dataset, ours)
    assert isinstance(wrapped, ArrowBatches)
    batch_size = data.draw(st.integers(1, 5))
    arrow = torch.utils.data.DataLoader(wrapped, batch_size=batch_size, collate_fn=ours)
    rows = torch.utils.data.DataLoader(dataset, batch_size=batch_size, collate_fn=ours)
    theirs = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, collate_fn=TRLCollator(**options)
    )
    arrow_batches = list(arrow)
    _assert_same_batches(arrow_batches, list(rows))
    _assert_same_batches(arrow_batches, list(theirs))
