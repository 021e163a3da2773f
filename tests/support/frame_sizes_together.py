"""A feature-extractor batch whose padded values and attention mask each fit this machine's
memory but not together, padded through one entry point in a process whose address space is
capped just above what it holds (so a regression that starts filling fails its reservation
instead of touching that memory): `python -m tests.support.frame_sizes_together ENTRY MASKS`,
ENTRY one of `pad`, `collator`, `processor`, `ctc`, MASKS one of `none`, `int32`, `int64` (the
rows' own masks). Prints the exception's class and message as one JSON line."""

from __future__ import annotations

import json
import resource
import sys

import numpy as np
from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2Processor

import fastcollate


def machine_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    return sum(int(fields[name].split()[0]) * 1024 for name in ("MemTotal", "SwapTotal"))


def cap_address_space(headroom: int = 1 << 30) -> None:
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.RLIM_INFINITY))


def main(entry: str, masks: str, vocab: str) -> None:
    # One row: float32 values of `frames` values; the mask beside them int32 (made) or the
    # rows' dtype. Each alone is 0.6 of the machine (0.4 and 0.8 for an int64 mask).
    share = 0.4 if masks == "int64" else 0.6
    frames = int(machine_bytes() * share) // 4
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                         do_normalize=False, return_attention_mask=True)
    rows = [{"input_values": np.linspace(0, 1, 5, dtype=np.float32)}]
    if masks != "none":
        rows[0]["attention_mask"] = np.ones(5, dtype=masks)
    tokenizer = Wav2Vec2CTCTokenizer(vocab, pad_token="[PAD]", unk_token="[UNK]")
    processor = Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer)
    if entry == "pad":
        def call():
            return fastcollate.pad(rows, extractor, padding="max_length", max_length=frames,
                                   return_tensors="np")
    elif entry == "collator":
        collator = fastcollate.DataCollatorWithPadding(extractor, padding="max_length",
                                                       max_length=frames, return_tensors="np")
        def call():
            return collator(rows)
    elif entry == "processor":
        collator = fastcollate.DataCollatorWithPadding(processor, pad_to_multiple_of=frames)
        def call():
            return collator(rows)
    else:
        collator = fastcollate.DataCollatorCTCWithPadding(processor, pad_to_multiple_of=frames)
        def call():
            return collator([{**row, "labels": [3, 4]} for row in rows])
    cap_address_space()
    try:
        call()
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        print(json.dumps({"error": type(err).__name__, "message": str(err)}))
        return
    print(json.dumps({"error": None, "message": ""}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
