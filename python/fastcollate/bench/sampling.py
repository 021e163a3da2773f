"""`python -m fastcollate bench --sampling`: how much of what a model processes is real tokens
under each training sampler, and what each sampler costs per epoch.

Two length distributions (`workload.DISTRIBUTIONS`): IMDB-like (lognormal around 230 tokens,
capped at 512) and chat-like (long-tailed lognormal around 350 tokens, capped at 4096). For
each, one epoch of:

- random: `torch.utils.data.RandomSampler`, batches of `batch_size` rows;
- group_by_length: `LengthGroupedSampler` over `batch_size * grad_accum` mega-batches, as the
  Trainer builds it;
- batch_rebalance: `BatchRebalanceSampler` with `world_size` ranks and `grad_accum`
  micro-batches per step (every rank's micro-batches counted);
- packing: `PackedBatchSampler` at `max_tokens` tokens per batch.

The figure is real tokens / tokens processed. Padded batches process `rows × longest row`;
a packed batch is flattened and has no padding, so its figure is taken against the whole
token budget (`batches × max_tokens`), as if every batch were padded to the budget: the
stricter measure, and what a fixed-shape step would cost. Times are one epoch of each
sampler's iterator, fastcollate's and (where transformers has the sampler) transformers' on
the same lengths, whose output is checked to be the same.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fastcollate

from .errors import BenchError
from .report import pyplot
from .timing import require_release_build, time_once
from .workload import DISTRIBUTIONS, SEED

DEFAULT_ROWS = 200_000
QUICK_ROWS = 20_000
DEFAULT_BATCH_SIZE = 16
SAMPLERS = ("random", "group_by_length", "batch_rebalance", "packing")


@dataclass
class SamplingSettings:
    rows: int = DEFAULT_ROWS
    batch_size: int = DEFAULT_BATCH_SIZE
    grad_accum: int = 4
    world_size: int = 8
    max_tokens: int = 8192
    # Also time transformers' samplers (and check fastcollate's give the same batches).
    with_transformers: bool = True


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


def chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def _transformers_twin(
    name: str, make: Callable[[], Any], ours: list, with_transformers: bool
) -> float | None:
    """Seconds for one epoch of transformers' sampler, after checking it yields `ours`; None
    when transformers is not timed."""
    if not with_transformers:
        return None
    seconds, expected = time_once(lambda: list(make()))
    if expected != ours:
        raise BenchError(f"{name} differs from transformers'")
    return seconds


def measure(name: str, lengths: np.ndarray, settings: SamplingSettings) -> list[SamplingResult]:
    """One epoch of every sampler over `lengths`."""
    import torch

    batch_size, grad_accum = settings.batch_size, settings.grad_accum
    world, with_transformers = settings.world_size, settings.with_transformers
    if with_transformers:
        from transformers import trainer_pt_utils
    results = []

    sampler = torch.utils.data.RandomSampler(
        range(len(lengths)), generator=torch.Generator().manual_seed(SEED)
    )
    seconds, batches = time_once(lambda: chunks(list(sampler), batch_size))
    results.append(
        SamplingResult(name, "random", padded_share(lengths, batches), len(batches), seconds)
    )

    mega = batch_size * grad_accum
    grouped = fastcollate.LengthGroupedSampler(
        mega, lengths=lengths, generator=torch.Generator().manual_seed(SEED)
    )
    seconds, order = time_once(lambda: list(grouped))
    theirs = _transformers_twin(
        "LengthGroupedSampler",
        lambda: trainer_pt_utils.LengthGroupedSampler(
            mega, lengths=lengths.tolist(), generator=torch.Generator().manual_seed(SEED)
        ),
        order,
        with_transformers,
    )
    batches = chunks(order, batch_size)
    results.append(
        SamplingResult(
            name, "group_by_length", padded_share(lengths, batches), len(batches), seconds, theirs
        )
    )

    effective = batch_size * grad_accum * world
    rebalance = fastcollate.BatchRebalanceSampler(lengths, effective, world, grad_accum)
    seconds, one_rank = time_once(lambda: list(rebalance))  # what one rank's DataLoader drains
    theirs = _transformers_twin(
        "BatchRebalanceSampler",
        lambda: trainer_pt_utils.BatchRebalanceSampler(
            lengths.tolist(), effective, world, grad_accum
        ),
        one_rank,
        with_transformers,
    )
    batches = rebalance.micro_batches(rank=-1)
    results.append(
        SamplingResult(
            name, "batch_rebalance", padded_share(lengths, batches), len(batches), seconds, theirs
        )
    )

    packed = fastcollate.PackedBatchSampler(lengths, settings.max_tokens, seed=SEED)
    # A fresh sampler per timing: it caches the epoch's packing.
    seconds, batches = time_once(
        lambda: list(fastcollate.PackedBatchSampler(lengths, settings.max_tokens, seed=SEED))
    )
    results.append(
        SamplingResult(name, "packing", packed.token_efficiency(), len(batches), seconds)
    )
    return results


def run(
    settings: SamplingSettings, progress: Callable[[str], None] | None = None
) -> list[SamplingResult]:
    """Every sampler over every distribution, `settings.rows` lengths each."""
    require_release_build()
    results: list[SamplingResult] = []
    for name, draw in DISTRIBUTIONS.items():
        lengths = draw(np.random.default_rng(SEED), settings.rows)
        if progress:
            progress(f"measuring {name} ...")
        results.extend(measure(name, lengths, settings))
    return results


def format_table(results: list[SamplingResult], settings: SamplingSettings) -> str:
    lines = [
        f"{settings.rows:,} rows per distribution; batch_size={settings.batch_size}, "
        f"grad_accum={settings.grad_accum}, world_size={settings.world_size} "
        f"(batch_rebalance), max_tokens={settings.max_tokens} (packing); one epoch, one run",
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
    return "\n".join(textwrap.fill(line, 100) if len(line) > 100 else line for line in lines)


def as_json(
    results: list[SamplingResult], settings: SamplingSettings, env: dict[str, Any]
) -> dict[str, Any]:
    """Every figure of a `--sampling` run, what it ran on and its settings, for `--json`."""
    return {
        "environment": env,
        "settings": {"seed": SEED, **dataclasses.asdict(settings)},
        "results": [dataclasses.asdict(r) for r in results],
    }


def plot(results: list[SamplingResult], path: str) -> None:
    """A bar per sampler, grouped by distribution: real tokens among tokens processed."""
    plt = pyplot()
    distributions = list(dict.fromkeys(r.distribution for r in results))
    share = {(r.distribution, r.sampler): r.real_token_share * 100 for r in results}
    width = 0.8 / len(SAMPLERS)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for k, sampler in enumerate(SAMPLERS):
        shares = [share[d, sampler] for d in distributions]
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
