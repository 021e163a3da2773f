"""Checking, then timing, every case x row format x batch size; the result records; the
release-build check every timing starts with.

Two bases, both recorded:

- fresh (the published figures): every call gets a batch built just before it, as a
  DataLoader's fetcher builds one (`[dataset[i] for i in indices]`: a new list of new row
  dicts), drawn in turn from a pool of distinct batches holding `POOL_ROWS` rows, far more than
  a CPU's caches hold; only the call itself is timed, the collator's fixed cost per call
  included;
- cached: `CACHED_BATCHES` batches reused while they stay in cache, the best case.

Beside fastcollate, on the fresh basis, the floor (bench/floor.py) where the collator has one:
the least work the call must do for the same rows, checked to give fastcollate's output first.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fastcollate

from .cases import CASES, Case, short_name
from .checks import check_same
from .errors import BenchError
from .floor import Floor
from .workload import FORMATS, SEED, as_format, bert_tokenizer

DEFAULT_BATCH_SIZES = (8, 32, 128, 512)
# Rows in the pool of distinct batches the fresh basis draws from (400 batches of 32; at least
# CACHED_BATCHES batches at any batch size): tens of megabytes of rows, so that a call finds its
# rows in memory, not in cache, as a DataLoader's collator does over an epoch.
POOL_ROWS = 12_800
# The cached basis: this many batches, reused in turn (so no single batch's shape decides it).
CACHED_BATCHES = 4
# The floors' names among the methods timed on the fresh basis (taken out of `Result.seconds`):
# the floor, and for torch rows the floor through torch's API (see bench/floor.py).
FLOOR = "floor"
TORCH_FLOOR = "floor through torch"
# The row formats whose rows are tensors: the ones timed against the floor through torch.
TORCH_ROWS = ("torch", "torch-format")


@dataclass
class Result:
    case: str
    format: str
    batch_size: int
    seconds: dict[str, float]  # method -> seconds per batch (the median over the repeats)
    # method -> (slowest - fastest) / median over the repeats: how much they disagreed
    spread: dict[str, float] = field(default_factory=dict)
    # How fastcollate's output was checked against transformers' before timing: "equal", or
    # what was compared where the outputs differ by design (Case.partial_check).
    checked: str = "equal"
    # The cached basis: method -> seconds per batch on CACHED_BATCHES batches reused (empty
    # when not timed).
    cached_seconds: dict[str, float] = field(default_factory=dict)
    # Distinct batches the fresh timings drew from.
    pool_batches: int = 0
    # The floor's seconds per batch on the fresh basis, and its spread (None: no floor defined).
    floor_seconds: float | None = None
    floor_spread: float | None = None
    # The same for the floor through torch's API (torch rows only; None elsewhere).
    torch_floor_seconds: float | None = None
    torch_floor_spread: float | None = None

    @property
    def vs_transformers(self) -> float:
        return self.seconds["transformers"] / self.seconds["fastcollate"]

    @property
    def cached_vs_transformers(self) -> float | None:
        cached = self.cached_seconds
        return cached["transformers"] / cached["fastcollate"] if cached else None

    def _over(self, floor_seconds: float | None) -> float | None:
        """fastcollate's time over a floor's (None: that floor was not timed)."""
        return None if floor_seconds is None else self.seconds["fastcollate"] / floor_seconds

    @property
    def vs_floor(self) -> float | None:
        """fastcollate's time over the floor's (1 would be the floor itself)."""
        return self._over(self.floor_seconds)

    @property
    def vs_torch_floor(self) -> float | None:
        """fastcollate's time over the floor through torch's API (torch rows only)."""
        return self._over(self.torch_floor_seconds)

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
            "spread": self.spread,
            "checked": self.checked,
            "pool_batches": self.pool_batches,
            "cached": {
                "ms_per_batch": {k: v * 1e3 for k, v in self.cached_seconds.items()},
                "speedup_vs_transformers": self.cached_vs_transformers,
            },
            "floor": self._floor_record(self.floor_seconds, self.floor_spread),
            "torch_floor": self._floor_record(self.torch_floor_seconds, self.torch_floor_spread),
        }

    def _floor_record(self, seconds: float | None, spread: float | None) -> dict[str, Any] | None:
        """A floor's figures in the JSON record (None: that floor was not timed)."""
        if seconds is None:
            return None
        return {
            "ms_per_batch": seconds * 1e3,
            "fastcollate_over_floor": self._over(seconds),
            "spread": spread,
        }


def require_release_build() -> None:
    if fastcollate.build_profile != "release":
        raise BenchError(
            f"fastcollate is a {fastcollate.build_profile} build; timings of a debug build mean "
            "nothing. Rebuild with `maturin develop --release` (or install a wheel) and rerun."
        )


def time_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call, after a garbage collection so that no earlier garbage is
    collected inside it."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _summary(timings: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    medians = {name: statistics.median(values) for name, values in timings.items()}
    spread = {
        name: (max(values) - min(values)) / medians[name] if medians[name] > 0 else 0.0
        for name, values in timings.items()
    }
    return medians, spread


def time_methods(
    methods: dict[str, Callable],
    batches: list[list],
    repeat: int,
    min_seconds: float,
) -> tuple[dict[str, float], dict[str, float]]:
    """The cached basis: seconds per call of each method, the median over `repeat` runs, each
    cycling over the same batches for at least `min_seconds` (calibrated after a warm-up pass,
    like timeit's autorange); and each method's spread, (slowest - fastest) / median. Runs of
    the methods take turns, so that load from elsewhere on the machine weighs on all of them
    alike."""
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
    return _summary(timings)


def fresh_batch(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a DataLoader's fetcher hands the collator: a new list of new row dicts."""
    return [dict(row) for row in rows]


def time_methods_fresh(
    methods: dict[str, Callable],
    pool: list[list],
    repeat: int,
    min_seconds: float,
    warmup_batches: int = CACHED_BATCHES,
    pools: dict[str, list[list]] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """The fresh basis: as `time_methods`, but each call gets a batch built just before it by
    `fresh_batch` (untimed, as the DataLoader's fetch is not the collator's) from the next
    batch of `pool` (or of `pools[name]`, the same batches as that method reads them), each
    method going round the pool from where its last run stopped; each call is timed alone and
    the run's time is their sum over its calls."""
    clock = time.perf_counter
    calls, cursor = {}, {}
    own = {name: (pools or {}).get(name, pool) for name in methods}
    for name, collate in methods.items():
        warm = own[name][:warmup_batches]
        spent = 0.0
        for rows in warm:  # warm-up: caches, lazy imports, allocator
            batch = fresh_batch(rows)
            start = clock()
            collate(batch)
            spent += clock() - start
        once = max(spent / len(warm), 1e-7)
        calls[name] = max(len(warm), int(min_seconds / once))
        cursor[name] = len(warm)
    timings: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, collate in methods.items():
            spent = 0.0
            at = cursor[name]
            batches = own[name]
            for _ in range(calls[name]):
                batch = fresh_batch(batches[at % len(batches)])
                at += 1
                start = clock()
                collate(batch)
                spent += clock() - start
            cursor[name] = at
            timings[name].append(spent / calls[name])
    return _summary(timings)


def run(
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    formats: Sequence[str] = FORMATS,
    repeat: int = 7,
    min_seconds: float = 0.1,
    cases: Sequence[str] | None = None,
    pool_rows: int = POOL_ROWS,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Checks, then times on both bases, every available case x format x batch size."""
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
        results = []
        for case in selected:
            if not case.available:
                if progress:
                    progress(f"skip {case.name}: fastcollate has no such collator yet")
                continue
            results += _run_case(
                case, tokenizer, batch_sizes, formats, repeat, min_seconds, pool_rows, progress
            )
        return results
    finally:
        torch.set_num_threads(threads)


def pool_size(batch_size: int, pool_rows: int = POOL_ROWS) -> int:
    """Distinct batches in the pool: `pool_rows` rows' worth, at least CACHED_BATCHES."""
    return max(pool_rows // batch_size, CACHED_BATCHES)


def _call(collate: Callable, batch: list, seeded: bool) -> Any:
    if seeded:
        import torch

        torch.manual_seed(SEED)
    return collate(batch)


def _run_case(
    case: Case,
    tokenizer: Any,
    batch_sizes: Sequence[int],
    formats: Sequence[str],
    repeat: int,
    min_seconds: float,
    pool_rows: int,
    progress: Callable[[str], None] | None,
) -> list[Result]:
    methods = {"transformers": case.reference(tokenizer)}
    methods.update({name: make(tokenizer) for name, make in case.baselines.items()})
    methods.update({name: make(tokenizer) for name, make in case.variants.items()})
    methods["fastcollate"] = case.fast(tokenizer)
    results = []
    for batch_size in batch_sizes:
        rng = np.random.default_rng(SEED)
        pool_batches = pool_size(batch_size, pool_rows)
        rows = case.make_rows(rng, batch_size * pool_batches)
        for fmt in formats:
            formatted = as_format(rows, fmt)
            batches = [
                formatted[i * batch_size : (i + 1) * batch_size] for i in range(pool_batches)
            ]
            label = f"{case.name} [{fmt}, batch {batch_size}]"
            floor = None if case.floor is None else Floor(case.floor(tokenizer), batches)
            floors = {} if floor is None else {FLOOR: floor}
            if floor is not None and fmt in TORCH_ROWS:
                floors[TORCH_FLOOR] = Floor(floor.keys, batches, through_torch=True)
            for index, batch in enumerate(batches):
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
                    if name == "fastcollate":
                        for floor_name, each in floors.items():
                            problem = each.difference(index, ours)
                            if problem is not None:
                                raise BenchError(f"{label} {floor_name}: {problem}")
            fresh = dict(methods)
            fresh.update({name: each.pad for name, each in floors.items()})
            seconds, spread = time_methods_fresh(
                fresh,
                batches,
                repeat,
                min_seconds,
                pools={name: each.batches for name, each in floors.items()},
            )
            floor_seconds, floor_spread = seconds.pop(FLOOR, None), spread.pop(FLOOR, None)
            torch_floor = seconds.pop(TORCH_FLOOR, None), spread.pop(TORCH_FLOOR, None)
            cached, _ = time_methods(methods, batches[:CACHED_BATCHES], repeat, min_seconds)
            checked = "equal" if case.check is None else case.partial_check
            result = Result(
                case.name, fmt, batch_size, seconds, spread, checked, cached, len(batches),
                floor_seconds, floor_spread, *torch_floor,
            )  # fmt: skip
            results.append(result)
            if progress:
                progress(
                    f"{short_name(case.name)} [{fmt}, batch {batch_size}]: "
                    f"fastcollate {seconds['fastcollate'] * 1e3:.4f} ms, "
                    f"{result.vs_transformers:.0f}x transformers "
                    f"(cached: {result.cached_vs_transformers:.0f}x)"
                )
    return results
