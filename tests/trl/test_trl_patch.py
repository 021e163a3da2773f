"""`patch_trl()`: an unchanged SFTTrainer script gets fastcollate's collator, pack_dataset and
dataset preparation, prepares the same train dataset and trains with the same losses, step for
step, as TRL alone; undo puts TRL's objects back and leaves `patch_transformers()` alone."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import datasets  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
import trl.data_utils  # noqa: E402
import trl.trainer.sft_trainer as sft_module  # noqa: E402
from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
import fastcollate.trl.sft_trainer_preparation as preparation_module  # noqa: E402
from fastcollate._internal.patching import original  # noqa: E402
from tests.support.sft_runs import KEEP_END_DEPRECATED, MODES, TEXTS, sft_dataset  # noqa: E402
from tests.support.tiny_models import tiny_llama_config  # noqa: E402

pytestmark = pytest.mark.parity


def _trainer(model_path, tmp_path, mode: str, data: str = "tokenized") -> SFTTrainer:
    """SFTTrainer on a seeded tiny Llama."""
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = tiny_llama_config(tokenizer)
    model = LlamaForCausalLM(config)
    args = SFTConfig(
        output_dir=str(tmp_path / mode),
        eos_token="[SEP]",
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=1,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        save_strategy="no",
        disable_tqdm=True,
        **MODES[mode],
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=sft_dataset(tokenizer, data),
        processing_class=tokenizer,
    )


def _losses(model_path, tmp_path, mode: str, data: str = "tokenized"):
    """Per-step training losses of a seeded tiny Llama under SFTTrainer, the collator class it
    used, the packing function SFTTrainer's module held, and the prepared train dataset."""
    trainer = _trainer(model_path, tmp_path, mode, data)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses, type(trainer.data_collator), sft_module.pack_dataset, trainer.train_dataset


def assert_same_dataset(ours, theirs):
    assert type(ours) is type(theirs)
    assert ours.column_names == theirs.column_names
    assert ours.features == theirs.features
    assert ours.format == theirs.format
    assert ours.with_format(None)[:] == theirs.with_format(None)[:]


def _counting_preparation(monkeypatch) -> list[int]:
    """Records the row count of each dataset the patched `SFTTrainer._prepare_dataset` hands
    to fastcollate's `prepare_tokenized_sft_dataset`."""
    calls: list[int] = []
    prepare = preparation_module.prepare_tokenized_sft_dataset

    def counted(dataset, **options):
        calls.append(len(dataset))
        return prepare(dataset, **options)

    monkeypatch.setattr(preparation_module, "prepare_tokenized_sft_dataset", counted)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, data",
    [
        ("padded", "tokenized"),
        ("padding-free", "tokenized"),
        ("packed", "tokenized"),
        pytest.param("keep-end-shuffled", "tokenized", marks=KEEP_END_DEPRECATED),
        ("packed", "text"),
        ("packed-wrapped-shuffled", "text"),
        ("short-shuffled", "prompt-completion"),
    ],
)
def test_sft_trainer_trains_the_same_patched(model_path, tmp_path, monkeypatch, mode, data):
    calls = _counting_preparation(monkeypatch)
    theirs, their_collator, their_pack, their_dataset = _losses(
        model_path, tmp_path / "trl", mode, data
    )
    assert calls == []
    with fastcollate.patch_trl():
        ours, our_collator, our_pack, our_dataset = _losses(
            model_path, tmp_path / "ours", mode, data
        )
    assert our_collator is fastcollate.trl.DataCollatorForLanguageModeling
    assert their_collator is not our_collator
    assert our_pack is fastcollate.trl.pack_dataset and their_pack is not our_pack
    # The train dataset went through fastcollate's preparation, once, and is TRL's.
    assert calls == [len(TEXTS) * 4]
    assert_same_dataset(our_dataset, their_dataset)
    if data == "prompt-completion":
        assert "labels" in their_dataset.column_names
        assert len(their_dataset) < len(TEXTS) * 4  # rows left without a label were dropped
    assert len(theirs) == 4
    assert ours == theirs


@pytest.mark.slow
@KEEP_END_DEPRECATED
def test_preparation_left_to_trl(model_path, tmp_path, monkeypatch):
    """An IterableDataset, a custom transform and a tokenized dataset with a formatting function
    stay TRL's (the same result or error), without reaching fastcollate's preparation."""
    trainer = _trainer(model_path, tmp_path, "keep-end-shuffled")
    calls = _counting_preparation(monkeypatch)
    args, tokenizer = trainer.args, trainer.processing_class
    tokenized = sft_dataset(tokenizer)
    trl_prepare = original("trl.trainer.sft_trainer", "SFTTrainer._prepare_dataset")

    def theirs(dataset, formatting_func=None):
        return trl_prepare(trainer, dataset, tokenizer, args, False, formatting_func, "train")

    def ours(dataset, formatting_func=None):
        return trainer._prepare_dataset(dataset, tokenizer, args, False, formatting_func, "train")

    with fastcollate.patch_trl():
        streamed = ours(tokenized.to_iterable_dataset())
        assert isinstance(streamed, datasets.IterableDataset)
        assert list(streamed) == list(theirs(tokenized.to_iterable_dataset()))
        assert_same_dataset(ours(tokenized, lambda row: "x"), theirs(tokenized, lambda row: "x"))
        with pytest.raises(ValueError, match="with_transform"):
            ours(tokenized.with_transform(lambda batch: batch))
        assert calls == []
        # Without a formatting function the tokenized dataset is fastcollate's to prepare.
        assert_same_dataset(ours(tokenized), theirs(tokenized))
        assert calls == [len(tokenized)]


def test_patch_and_undo_by_owner():
    sft_collator = sft_module.DataCollatorForLanguageModeling
    data_pack = trl.data_utils.pack_dataset
    prepare = vars(sft_module.SFTTrainer)["_prepare_dataset"]
    transformers_module = sys.modules["transformers.data.data_collator"]
    padding = transformers_module.DataCollatorWithPadding
    handle = fastcollate.patch_trl()
    transformers_handle = fastcollate.patch_transformers()
    try:
        assert sft_module.DataCollatorForLanguageModeling is (
            fastcollate.trl.DataCollatorForLanguageModeling
        )
        assert trl.data_utils.pack_dataset is fastcollate.trl.pack_dataset
        assert vars(sft_module.SFTTrainer)["_prepare_dataset"] is (
            preparation_module.prepare_sft_trainer_dataset
        )
        assert original("trl.trainer.sft_trainer", "SFTTrainer._prepare_dataset") is prepare
        for module_name, name, ours in [
            ("trl.trainer.dpo_trainer", "DataCollatorForPreference",
             fastcollate.trl.DataCollatorForPreference),
            ("trl.trainer.reward_trainer", "DataCollatorForPreference",
             fastcollate.trl.RewardDataCollatorForPreference),
            ("trl.trainer.kto_trainer", "DataCollatorForUnpairedPreference",
             fastcollate.trl.DataCollatorForUnpairedPreference),
            ("trl.trainer.grpo_trainer", "pad", fastcollate.trl.pad),
            ("trl.trainer.utils", "pad", fastcollate.trl.pad),
        ]:
            assert getattr(sys.modules[module_name], name) is ours, (module_name, name)
        assert "trl.trainer.sft_trainer.DataCollatorForLanguageModeling" in repr(handle)
        assert "trl.trainer.sft_trainer.SFTTrainer._prepare_dataset" in repr(handle)
        again = fastcollate.patch_trl()  # a second hold: TRL's objects still remembered
        handle.undo()
        assert trl.data_utils.pack_dataset is fastcollate.trl.pack_dataset  # again's hold
        again.undo()
        assert sft_module.DataCollatorForLanguageModeling is sft_collator
        assert trl.data_utils.pack_dataset is data_pack
        assert vars(sft_module.SFTTrainer)["_prepare_dataset"] is prepare
        # transformers' patch is another owner's: still in place.
        assert transformers_module.DataCollatorWithPadding is fastcollate.DataCollatorWithPadding
    finally:
        transformers_handle.undo()
        fastcollate.unpatch_trl()
    assert transformers_module.DataCollatorWithPadding is padding
    with fastcollate.patch_trl():
        assert sft_module.pack_dataset is fastcollate.trl.pack_dataset
    assert sft_module.pack_dataset is data_pack
    assert vars(sft_module.SFTTrainer)["_prepare_dataset"] is prepare
