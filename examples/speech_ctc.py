"""Train a Wav2Vec2 CTC model with `transformers.Trainer` and fastcollate's
`DataCollatorCTCWithPadding` (the collator of transformers' speech-recognition example, on
fastcollate's native feature-extractor padding).

`--tiny` (the default, the only mode here) runs offline: a tiny randomly initialised
Wav2Vec2ForCTC, a character vocabulary written to a temporary folder, and synthetic audio
clips with random transcripts. A real run swaps in `Wav2Vec2Processor.from_pretrained(...)`,
`Wav2Vec2ForCTC.from_pretrained(...)` and a speech dataset mapped through the processor.

    python examples/speech_ctc.py --tiny --max-steps 4
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import (
    Trainer,
    TrainingArguments,
    Wav2Vec2Config,
    Wav2Vec2CTCTokenizer,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2ForCTC,
    Wav2Vec2Processor,
)

import fastcollate

LETTERS = "abcdefghij"


def tiny_processor(folder: Path) -> Wav2Vec2Processor:
    vocab = {"[PAD]": 0, "[UNK]": 1, "|": 2, **{c: i + 3 for i, c in enumerate(LETTERS)}}
    path = folder / "vocab.json"
    path.write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(path), unk_token="[UNK]", pad_token="[PAD]",
                                     word_delimiter_token="|")
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16_000,
                                         padding_value=0.0, return_attention_mask=True)
    return Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer)


def tiny_model(processor: Wav2Vec2Processor) -> Wav2Vec2ForCTC:
    config = Wav2Vec2Config(
        vocab_size=len(processor.tokenizer),
        pad_token_id=processor.tokenizer.pad_token_id,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        mask_time_prob=0.0,
        ctc_loss_reduction="mean",
    )
    return Wav2Vec2ForCTC(config)


def synthetic_dataset(processor: Wav2Vec2Processor, rows: int, seed: int) -> list[dict]:
    """Rows as a dataset mapped through the processor holds them: `input_values` (float32
    audio, 0.1-0.3 s at 16 kHz) and `labels` (the transcript's token ids)."""
    rng = np.random.default_rng(seed)
    dataset = []
    for _ in range(rows):
        audio = rng.standard_normal(int(rng.integers(1_600, 4_800))).astype(np.float32)
        text = "".join(rng.choice(list(LETTERS), size=int(rng.integers(2, 8))))
        dataset.append({
            "input_values": processor(audio=audio, sampling_rate=16_000).input_values[0],
            "labels": processor(text=text).input_ids,
        })
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", default=True,
                        help="tiny random model, synthetic audio, offline (the default)")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        processor = tiny_processor(Path(folder))
        model = tiny_model(processor)
        collator = fastcollate.DataCollatorCTCWithPadding(processor, padding=True)
        training_args = TrainingArguments(
            output_dir=str(Path(folder) / "out"),
            max_steps=args.max_steps,
            per_device_train_batch_size=args.batch_size,
            learning_rate=1e-3,
            logging_steps=1,
            report_to=[],
            remove_unused_columns=False,
            save_strategy="no",
            use_cpu=True,
        )
        trainer = Trainer(model=model, args=training_args, data_collator=collator,
                          train_dataset=synthetic_dataset(processor, 32, seed=0))
        result = trainer.train()
    print(f"trained {result.global_step} steps, loss {result.training_loss:.4f}")


if __name__ == "__main__":
    main()
