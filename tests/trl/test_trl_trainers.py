"""`patch_trl()` under real TRL trainers: `DPOTrainer`, `RewardTrainer` and `KTOTrainer` train a
seeded tiny random-weight Llama for a few steps, once with TRL alone and once patched, and log
the same losses and metrics (DPO's rewards and log-probabilities, the reward model's accuracy
and margin, KTO's KL) step for step; the patched run's collator is fastcollate's and collated
every batch. Deselect with `-m "not slow"`."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
)
from trl import (  # noqa: E402
    DPOConfig,
    DPOTrainer,
    KTOConfig,
    KTOTrainer,
    RewardConfig,
    RewardTrainer,
)

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from tests.support.tiny_models import tiny_llama_config  # noqa: E402

pytestmark = pytest.mark.parity

STEPS = 3
# Wall-clock entries of the log: the only ones that may differ between two equal runs.
TIMINGS = ("train_runtime", "train_samples_per_second", "train_steps_per_second")

PROMPTS = ["the cat sat", "a dog ran in the park", "birds", "the quick brown fox"]
CHOSEN = [" on the mat", " and then sat down by the tree", " sing", " jumps over the dog"]
REJECTED = [" up", " nowhere", " fly away over the hill and far", " sleeps"]


def _tokenizer(model_path):
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.eos_token = "[SEP]"  # the BERT tokenizer has none; the trainers append it
    return tokenizer


def _config(tokenizer, **extra) -> LlamaConfig:
    return tiny_llama_config(tokenizer, pad_token_id=tokenizer.pad_token_id, **extra)


def _common(tmp_path) -> dict:
    return {
        "output_dir": str(tmp_path),
        "per_device_train_batch_size": 4,
        "max_steps": STEPS,
        "logging_steps": 1,
        "learning_rate": 1e-2,
        "report_to": [],
        "use_cpu": True,
        "seed": 0,
        "data_seed": 0,
        "dataloader_num_workers": 0,
        "save_strategy": "no",
        "disable_tqdm": True,
    }


def _history(trainer) -> list[dict]:
    return [
        {key: value for key, value in entry.items() if key not in TIMINGS}
        for entry in trainer.state.log_history
    ]


def _dpo(model_path, tmp_path):
    tokenizer = _tokenizer(model_path)
    torch.manual_seed(0)
    model = LlamaForCausalLM(_config(tokenizer))
    dataset = Dataset.from_dict(
        {"prompt": PROMPTS * 3, "chosen": CHOSEN * 3, "rejected": REJECTED * 3}
    )
    args = DPOConfig(max_length=12, truncation_mode="keep_start", **_common(tmp_path))
    return DPOTrainer(
        model=model,
        ref_model=copy.deepcopy(model),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def _reward(model_path, tmp_path):
    tokenizer = _tokenizer(model_path)
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(_config(tokenizer, num_labels=1))
    chosen = [p + c for p, c in zip(PROMPTS, CHOSEN, strict=True)]
    rejected = [p + r for p, r in zip(PROMPTS, REJECTED, strict=True)]
    dataset = Dataset.from_dict(
        {"chosen": chosen * 3, "rejected": rejected * 3, "margin": [0.5, 0.0, 1.0, 2.0] * 3}
    )
    args = RewardConfig(max_length=16, **_common(tmp_path))
    return RewardTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)


def _kto(model_path, tmp_path):
    tokenizer = _tokenizer(model_path)
    torch.manual_seed(0)
    model = LlamaForCausalLM(_config(tokenizer))
    dataset = Dataset.from_dict(
        {
            "prompt": PROMPTS * 3 + PROMPTS * 3,
            "completion": CHOSEN * 3 + REJECTED * 3,
            "label": [True] * 12 + [False] * 12,
        }
    )
    args = KTOConfig(max_length=12, **_common(tmp_path))
    return KTOTrainer(
        model=model,
        ref_model=copy.deepcopy(model),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


# trainer factory, fastcollate's collator class, the metrics each step must log.
TRAINERS = {
    "dpo": (
        _dpo,
        "DataCollatorForPreference",
        ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen",
         "logps/rejected"),
    ),
    "reward": (
        _reward,
        "RewardDataCollatorForPreference",
        ("loss", "accuracy", "margin", "mean_reward"),
    ),
    "kto": (_kto, "DataCollatorForUnpairedPreference", ("loss", "kl")),
}


def _run(make, model_path, tmp_path) -> tuple[list[dict], type]:
    trainer = make(model_path, tmp_path)
    trainer.train()
    return _history(trainer), type(trainer.data_collator)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRAINERS))
def test_trainer_trains_the_same_patched(model_path, tmp_path, monkeypatch, name):
    make, collator_name, metrics = TRAINERS[name]
    ours = getattr(fastcollate.trl, collator_name)
    calls = []
    torch_call = ours.torch_call

    def counted(self, examples):
        calls.append(len(examples))
        return torch_call(self, examples)

    monkeypatch.setattr(ours, "torch_call", counted)

    theirs_log, their_collator = _run(make, model_path, tmp_path / "trl")
    assert calls == []  # TRL alone never reaches fastcollate
    with fastcollate.patch_trl():
        ours_log, our_collator = _run(make, model_path, tmp_path / "ours")

    assert their_collator is not ours and their_collator.__module__.startswith("trl.")
    assert our_collator is ours
    assert len(calls) >= STEPS and all(size == 4 for size in calls)
    steps = [entry for entry in theirs_log if "loss" in entry]
    assert len(steps) == STEPS
    for entry in steps:
        for metric in metrics:
            assert metric in entry, (metric, sorted(entry))
    assert ours_log == theirs_log
