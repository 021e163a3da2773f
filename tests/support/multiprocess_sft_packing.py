"""SFTTrainer with `packing=True` on a tiny random-weight Llama, run by
tests/trl/test_multiprocess_sft_packing.py under torchrun (2 processes, gloo on CPU): each rank
trains twice from the same seed, with TRL alone and under `fastcollate.patch_trl()`, and writes
OUT/rank{N}.json: for each run the batches it trained on, its own (not yet gathered) loss each
step, the logged losses, the collator, which `_prepare_dataset` ran and the prepared train
dataset."""

from __future__ import annotations

import argparse

import datasets
import torch
from transformers import AutoTokenizer, LlamaForCausalLM
from trl import SFTConfig, SFTTrainer

import fastcollate
from tests.support.bundled_model import model_dir
from tests.support.rank_report import finish_rank
from tests.support.tiny_models import tiny_llama_config

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park and then sat down by the old tree",
    "birds sing",
    "the quick brown fox jumps over the lazy dog again and again",
    "rain",
    "a long and winding road leads to the house on the hill",
    "she sells sea shells by the sea shore",
    "one two three four five six seven eight nine ten",
]
STEPS = 4


class RecordingTrainer(SFTTrainer):
    """Keeps each batch this rank trains on and the loss it computes from it."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self.seen.append(
            {
                "keys": sorted(inputs),
                "input_ids": inputs["input_ids"].tolist(),
                "labels": inputs["labels"].tolist(),
                "position_ids": inputs["position_ids"].tolist(),
                "loss": float(loss.detach()),
            }
        )
        return loss


def run(out: str, seed: int) -> dict:
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir())
    config = tiny_llama_config(tokenizer)
    model = LlamaForCausalLM(config)
    args = SFTConfig(
        output_dir=out,
        eos_token="[SEP]",
        packing=True,
        max_length=24,
        per_device_train_batch_size=2,
        max_steps=STEPS,
        logging_steps=1,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        save_strategy="no",
        disable_tqdm=True,
    )
    dataset = datasets.Dataset.from_dict({"text": TEXTS * 3})
    trainer = RecordingTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.seen = []
    trainer.train()
    prepared = trainer.train_dataset
    return {
        "rank": args.process_index,
        "world_size": args.world_size,
        "collator": f"{type(trainer.data_collator).__module__}."
        f"{type(trainer.data_collator).__name__}",
        # Where the SFTTrainer._prepare_dataset that prepared the dataset is defined.
        "preparation": vars(SFTTrainer)["_prepare_dataset"].__module__,
        "batches": trainer.seen,
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "dataset": {
            "columns": prepared.column_names,
            "features": repr(prepared.features),
            "rows": prepared.with_format(None)[:],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    report = {"trl": run(options.out + "/trl", options.seed)}
    with fastcollate.patch_trl():
        report["patched"] = run(options.out + "/patched", options.seed)
    finish_rank(options.out, report["trl"]["rank"], report)


if __name__ == "__main__":
    main()
