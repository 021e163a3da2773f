"""`patch_trl()`: an unchanged SFTTrainer script gets fastcollate's collator and pack_dataset,
and trains with the same losses, step for step, as TRL alone; undo puts TRL's objects back and
leaves `patch_transformers()` alone."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import torch  # noqa: E402
import trl  # noqa: E402
import trl.data_utils  # noqa: E402
import trl.trainer.sft_trainer as sft_module  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402

MODES = {
    "padded": {"max_length": 24},
    # TRL refuses max_length with padding_free unless packing (it would not be enforced).
    "padding-free": {"padding_free": True, "max_length": None},
    "packed": {"packing": True, "max_length": 24},
}


def _dataset(tokenizer) -> Dataset:
    texts = [
        "the cat sat on the mat",
        "a dog ran in the park and then sat down by the old tree",
        "birds sing",
        "the quick brown fox jumps over the lazy dog again and again",
        "rain",
        "a long and winding road leads to the house on the hill",
    ] * 4
    ids = tokenizer(texts)["input_ids"]
    return Dataset.from_dict({"input_ids": ids})


def _losses(model_path, tmp_path, mode: str) -> tuple[list[float], type, object]:
    """Per-step training losses of a seeded tiny Llama under SFTTrainer, the collator class it
    used, and the packing function SFTTrainer's module held."""
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
        **MODES[mode],
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=_dataset(tokenizer), processing_class=tokenizer
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses, type(trainer.data_collator), sft_module.pack_dataset


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_sft_trainer_trains_the_same_patched(model_path, tmp_path, mode):
    theirs, their_collator, their_pack = _losses(model_path, tmp_path / "trl", mode)
    with fastcollate.patch_trl():
        ours, our_collator, our_pack = _losses(model_path, tmp_path / "ours", mode)
    assert our_collator is fastcollate.trl.DataCollatorForLanguageModeling
    assert their_collator is not our_collator
    assert our_pack is fastcollate.trl.pack_dataset and their_pack is not our_pack
    assert len(theirs) == 4
    assert ours == theirs


def test_patch_and_undo_by_owner():
    sft_collator = sft_module.DataCollatorForLanguageModeling
    data_pack = trl.data_utils.pack_dataset
    transformers_module = sys.modules["transformers.data.data_collator"]
    padding = transformers_module.DataCollatorWithPadding
    handle = fastcollate.patch_trl()
    transformers_handle = fastcollate.patch_transformers()
    try:
        assert sft_module.DataCollatorForLanguageModeling is (
            fastcollate.trl.DataCollatorForLanguageModeling
        )
        assert trl.data_utils.pack_dataset is fastcollate.trl.pack_dataset
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
        fastcollate.patch_trl()  # again: harmless, TRL's objects still remembered
        handle.undo()
        assert sft_module.DataCollatorForLanguageModeling is sft_collator
        assert trl.data_utils.pack_dataset is data_pack
        # transformers' patch is another owner's: still in place.
        assert transformers_module.DataCollatorWithPadding is fastcollate.DataCollatorWithPadding
    finally:
        transformers_handle.undo()
        fastcollate.unpatch_trl()
    assert transformers_module.DataCollatorWithPadding is padding
    with fastcollate.patch_trl():
        assert sft_module.pack_dataset is fastcollate.trl.pack_dataset
    assert sft_module.pack_dataset is data_pack
