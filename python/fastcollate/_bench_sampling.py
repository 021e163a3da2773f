"""`python -m fastcollate bench --sampling`: how much of what a model processes is real tokens
under each training sampler, and what each sampler costs per epoch.

Two length distributions, drawn from a fixed seed (no download): IMDB-like (lognormal around
230 tokens, capped at 512) and chat-like (long-tailed lognormal around 350 tokens, capped at
4096). For each, one epoch of:

- random: `torch.utils.data.RandomSampler`, batches of `--batch-size` rows;
- group_by_length: `LengthGroupedSampler` over `batch_size * grad_accum` mega-batches, as the
  Trainer builds it;
- batch_rebalance: `BatchRebalanceSampler` with `--world-size` ranks and `--grad-accum`
  micro-batches per step (every rank's micro-batches counted);
- packing: `PackedBatchSampler` at `--max-tokens` tokens per batch.

The figure is real tokens / tokens processed. Padded batches process `rows × longest row`;
a packed batch is flattened and has no padding, so its figure is taken against the whole
token budget (`batches × max_tokens`), as if every batch were padded to the budget: the
stricter measure, and what a fixed-shape step would cost. Times are one epoch of each
sampler's iterator, fastcollate's and (where transformers has the sampler) transformers' on
the same lengths, whose output is checked to be the same.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fastcollate

SEED = 0
DEFAULT_ROWS = 200_000


def imdb_like_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(230), 0.5, size=n).astype(np.int64), 4, 512)


def chat_like_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(350), 1.1, size=n).astype(np.int64), 16, 4096)


DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "imdb-like": imdb_like_lengths,
    "chat-like": chat_like_lengths,
}
SAMPLERS = ("random", "group_by_length", "batch_rebalance", "packing")


@dataclass
class SamplingResult:
    distribution: str
    sampler: str
    real_token_share: float
    batches: int
    seconds: float
    transformers_seconds: float | None = None


def padded_share(lengths: np.ndarray, batches: list[list[int]]) -> float:
    """Real tokens / tokens in batches padded to their longest row."""
    sizes = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
    flat = np.fromiter((i for b in batches for i in b), dtype=np.int64, count=int(sizes.sum()))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    row_lengths = lengths[flat]
    longest = np.maximum.reduceat(row_lengths, starts)
    return float(row_lengths.sum() / (longest * sizes).sum())


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def measure(
    name: str, lengths: np.ndarray, options: argparse.Namespace, with_transformers: bool
) -> list[SamplingResult]:
    import torch

    batch_size, grad_accum, world = options.batch_size, options.grad_accum, options.world_size
    results = []

    sampler = torch.utils.data.RandomSampler(
        range(len(lengths)), generator=torch.Generator().manual_seed(SEED)
    )
    seconds, batches = timed(lambda: chunks(list(sampler), batch_size))
    results.append(
        SamplingResult(name, "random", padded_share(lengths, batches), len(batches), seconds)
    )

    mega = batch_size * grad_accum
    ours = fastcollate.LengthGroupedSampler(
        mega, lengths=lengths, generator=torch.Generator().manual_seed(SEED)
    )
    seconds, order = timed(lambda: list(ours))
    theirs_seconds = None
    if with_transformers:
        from transformers import trainer_pt_utils

        as_list = lengths.tolist()
        theirs = trainer_pt_utils.LengthGroupedSampler(
            mega, lengths=as_list, generator=torch.Generator().manual_seed(SEED)
        )
        theirs_seconds, expected = timed(lambda: list(theirs))
        if expected != order:
            raise RuntimeError("LengthGroupedSampler differs from transformers'")
    batches = chunks(order, batch_size)
    results.append(
        SamplingResult(
            name,
            "group_by_length",
            padded_share(lengths, batches),
            len(batches),
            seconds,
            theirs_seconds,
        )
    )

    effective = batch_size * grad_accum * world
    rebalance = fastcollate.BatchRebalanceSampler(lengths, effective, world, grad_accum)
    seconds, _ = timed(lambda: list(rebalance))  # one rank's epoch, what a DataLoader drains
    batches = rebalance.micro_batches(rank=-1)
    theirs_seconds = None
    if with_transformers:
        from transformers import trainer_pt_utils

        theirs = trainer_pt_utils.BatchRebalanceSampler(
            lengths.tolist(), effective, world, grad_accum
        )
        theirs_seconds, expected = timed(lambda: list(theirs))
        if expected != list(rebalance):
            raise RuntimeError("BatchRebalanceSampler differs from transformers'")
    results.append(
        SamplingResult(
            name,
            "batch_rebalance",
            padded_share(lengths, batches),
            len(batches),
            seconds,
            theirs_seconds,
        )
    )

    packed = fastcollate.PackedBatchSampler(lengths, options.max_tokens, seed=SEED)
    # A fresh sampler per timing: it caches the epoch's packing.
    seconds, batches = timed(
        lambda: list(fastcollate.PackedBatchSampler(lengths, options.max_tokens, seed=SEED))
    )
    results.append(
        SamplingResult(name, "packing", packed.token_efficiency(), len(batches), seconds)
    )
    return results


def format_table(results: list[SamplingResult], options: argparse.Namespace) -> str:
    lines = [
        f"{options.rows:,} rows per distribution; batch_size={options.batch_size}, "
        f"grad_accum={options.grad_accum}, world_size={options.world_size} (batch_rebalance), "
        f"max_tokens={options.max_tokens} (packing); one epoch, one run",
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile} build)",
        "",
        f"{'distribution':<13} {'sampler':<16} {'real tokens':>11} {'batches':>9} "
        f"{'s/epoch':>12} {'transformers':>13}",
    ]
    lines.append("-" * len(lines[-1]))
    for r in results:
        theirs = "-" if r.transformers_seconds is None else f"{r.transformers_seconds:.3f} s"
        lines.append(
            f"{r.distribution:<13} {r.sampler:<16} {r.real_token_share:>10.2%} {r.batches:>9,} "
            f"{r.seconds:>10.3f} s {theirs:>13}"
        )
    lines.append("")
    lines.append(
        "real tokens: padded samplers, real / (rows x longest row) per batch; packing, real / "
        "(batches x max_tokens). s/epoch: torch's RandomSampler for random, fastcollate's "
        "samplers otherwise; transformers: its twin on the same lengths (same output)."
    )
    return "\n".join(lines)


def plot(results: list[SamplingResult], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise SystemExit(f"--plot needs matplotlib (pip install matplotlib): {err}") from None
    distributions = list(dict.fromkeys(r.distribution for r in results))
    width = 0.8 / len(SAMPLERS)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for k, sampler in enumerate(SAMPLERS):
        shares = [
            next(r.real_token_share for r in results if r.distribution == d and r.sampler == s)
            * 100
            for d in distributions
            for s in [sampler]
        ]
        x = [i + (k - (len(SAMPLERS) - 1) / 2) * width for i in range(len(distributions))]
        bars = axes.bar(x, shares, width, label=sampler)
        axes.bar_label(bars, fmt="%.2f%%", fontsize=7, padding=2)
    axes.set_xticks(range(len(distributions)), distributions)
    axes.set_ylabel("real tokens / tokens processed (%)")
    axes.set_ylim(0, 119)
    axes.set_title("Real tokens among tokens processed, per training sampler")
    axes.legend(loc="upper center", ncol=len(SAMPLERS), fontsize=8, frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--sampling` options of `python -m fastcollate bench`."""
    group = parser.add_argument_group("sampling (--sampling)")
    group.add_argument(
        "--sampling",
        action="store_true",
        help="report real-token share and time per epoch of the training samplers instead",
    )
    group.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="lengths per distribution")
    group.add_argument("--batch-size", dest="sampling_batch_size", type=int, default=16)
    group.add_argument("--grad-accum", type=int, default=4)
    group.add_argument("--world-size", type=int, default=8)
    group.add_argument("--max-tokens", type=int, default=8192)
    group.add_argument(
        "--no-transformers", action="store_true", help="do not time transformers' samplers"
    )


def run_from_args(args: argparse.Namespace) -> int:
    options = argparse.Namespace(
        rows=args.rows,
        batch_size=args.sampling_batch_size,
        grad_accum=args.grad_accum,
        world_size=args.world_size,
        max_tokens=args.max_tokens,
    )
    if min(vars(options).values()) < 1:
        message = "--rows, --batch-size, --grad-accum, --world-size and --max-tokens must be >= 1"
        print(f"error: {message}", file=sys.stderr)
        return 1
    if fastcollate.build_profile != "release":
        print(
            f"error: fastcollate is a {fastcollate.build_profile} build; rebuild with "
            "`maturin develop --release` before timing",
            file=sys.stderr,
        )
        return 1
    with_transformers = not args.no_transformers
    if with_transformers:
        try:
            import transformers  # noqa: F401
        except ImportError:
            with_transformers = False
    results: list[SamplingResult] = []
    for name, draw in DISTRIBUTIONS.items():
        lengths = draw(np.random.default_rng(SEED), options.rows)
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        results.extend(measure(name, lengths, options, with_transformers))
    print(format_table(results, options))
    if args.plot:
        plot(results, args.plot)
        print(f"\nbar chart written to {args.plot}")
    return 0
