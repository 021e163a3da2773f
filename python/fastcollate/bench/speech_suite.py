"""`python -m fastcollate bench --cases speech`: padding a batch of raw audio clips (1–16 s at
16 kHz, float32 numpy rows, as a speech dataset hands them) with fastcollate against
`Wav2Vec2FeatureExtractor.pad`, against the numpy loop a user would write (an array of zeros,
each clip copied in), and against the floor: copying the padded output into buffers allocated
once, outside the timed region (what any padding must at least do: write every output byte).
Each batch size is timed with and without the attention mask. Outputs are checked equal to
transformers' before anything is timed."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from .errors import BenchError

SAMPLING_RATE = 16_000
SHORTEST_SECONDS, LONGEST_SECONDS = 1, 16


@dataclasses.dataclass
class SpeechSettings:
    batch_sizes: list[int]
    repeat: int = 7
    seed: int = 0


@dataclasses.dataclass
class SpeechResult:
    batch_size: int
    attention_mask: bool
    samples: int
    transformers_ms: float
    numpy_loop_ms: float
    fastcollate_ms: float
    # The floor: the padded output copied into buffers allocated before timing.
    copy_ms: float

    @property
    def speedup(self) -> float:
        return self.transformers_ms / self.fastcollate_ms

    @property
    def vs_numpy_loop(self) -> float:
        return self.numpy_loop_ms / self.fastcollate_ms

    @property
    def over_copy(self) -> float:
        """fastcollate's time over the floor's: 1 would be padding at the cost of a copy."""
        return self.fastcollate_ms / self.copy_ms

    def as_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "speedup": self.speedup,
            "vs_numpy_loop": self.vs_numpy_loop,
            "over_copy": self.over_copy,
        }


def clips(batch_size: int, seed: int) -> list[dict[str, np.ndarray]]:
    """`batch_size` rows of float32 audio, 1–16 s each at 16 kHz."""
    rng = np.random.default_rng(seed)
    seconds = rng.uniform(SHORTEST_SECONDS, LONGEST_SECONDS, size=batch_size)
    return [
        {"input_values": rng.standard_normal(int(s * SAMPLING_RATE)).astype(np.float32)}
        for s in seconds
    ]


def numpy_loop(
    rows: list[dict[str, np.ndarray]], mask_dtype: Any | None
) -> dict[str, np.ndarray]:
    """The hand-written padding: zeros, each clip copied in (and its mask's ones), the output
    the extractor gives for `padding=True` with zero padding on the right."""
    values = [row["input_values"] for row in rows]
    longest = max(len(v) for v in values)
    out = np.zeros((len(values), longest), dtype=np.float32)
    for i, v in enumerate(values):
        out[i, : len(v)] = v
    batch = {"input_values": out}
    if mask_dtype is not None:
        mask = np.zeros((len(values), longest), dtype=mask_dtype)
        for i, v in enumerate(values):
            mask[i, : len(v)] = 1
        batch["attention_mask"] = mask
    return batch


def copy_floor(batch: dict[str, np.ndarray]) -> Callable[[], dict[str, np.ndarray]]:
    """A call copying `batch` into buffers of its shapes, allocated (and faulted in) here,
    once, so that the timed calls only write; it returns those buffers."""
    buffers = {key: np.empty_like(value) for key, value in batch.items()}
    for key, value in batch.items():
        np.copyto(buffers[key], value)

    def copy() -> dict[str, np.ndarray]:
        for key, value in batch.items():
            np.copyto(buffers[key], value)
        return buffers

    return copy


def _same(label: str, ours: Any, theirs: Any) -> None:
    for key in theirs:
        if (
            key not in ours
            or ours[key].dtype != theirs[key].dtype
            or not np.array_equal(ours[key], theirs[key])
        ):
            raise BenchError(f"speech {label}: '{key}' differs from transformers'")
    if set(ours) != set(theirs):
        raise BenchError(f"speech {label}: keys {sorted(ours)} != transformers' {sorted(theirs)}")


def _median_ms(methods: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Each method's median over `repeat` calls after one warm-up call, the methods taking
    turns so that load from elsewhere weighs on all alike."""
    for fn in methods.values():
        fn()  # warm: first-touch of pages, imports
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def run(settings: SpeechSettings, progress=print) -> list[SpeechResult]:
    from transformers import Wav2Vec2FeatureExtractor

    import fastcollate

    results = []
    for batch_size in settings.batch_sizes:
        rows = clips(batch_size, settings.seed)
        for with_mask in (False, True):
            extractor = Wav2Vec2FeatureExtractor(return_attention_mask=with_mask)
            label = f"batch {batch_size}, {'with' if with_mask else 'no'} attention mask"
            # transformers types pad's rows as BatchFeatures; it takes mappings of arrays too.
            theirs = dict(extractor.pad(rows, return_tensors="np"))  # type: ignore[arg-type]
            ours = dict(fastcollate.pad(rows, extractor, return_tensors="np"))
            mask_dtype = theirs["attention_mask"].dtype if with_mask else None
            _same(f"{label}, fastcollate", ours, theirs)
            _same(f"{label}, numpy loop", numpy_loop(rows, mask_dtype), theirs)
            samples = int(theirs["input_values"].shape[1])
            progress(f"speech: {label}, {samples} samples a row")
            ms = _median_ms(
                {
                    # (typed for BatchFeatures; it takes mappings of arrays too)
                    "transformers": partial(
                        extractor.pad, rows, return_tensors="np"  # type: ignore[arg-type]
                    ),
                    "numpy loop": partial(numpy_loop, rows, mask_dtype),
                    "fastcollate": partial(fastcollate.pad, rows, extractor, return_tensors="np"),
                    "copy": copy_floor(theirs),
                },
                settings.repeat,
            )
            results.append(
                SpeechResult(
                    batch_size=batch_size,
                    attention_mask=with_mask,
                    samples=samples,
                    transformers_ms=ms["transformers"],
                    numpy_loop_ms=ms["numpy loop"],
                    fastcollate_ms=ms["fastcollate"],
                    copy_ms=ms["copy"],
                )
            )
    return results


def header() -> str:
    return (
        "Speech: Wav2Vec2FeatureExtractor.pad of 1-16 s clips at 16 kHz (float32 numpy rows), "
        "with and without the attention mask, vs a numpy loop, fastcollate.pad(rows, "
        "feature_extractor) and the floor: a copy of the padded output into buffers allocated "
        "once (median ms)"
    )


def format_table(results: list[SpeechResult]) -> str:
    lines = [
        f"{'batch':>5} {'mask':>4} {'samples':>7} {'transformers':>12} {'numpy loop':>10} "
        f"{'fastcollate':>11} {'copy':>6} {'speedup':>8} {'vs loop':>7} {'/copy':>6}"
    ]
    for r in results:
        lines.append(
            f"{r.batch_size:>5} {'yes' if r.attention_mask else 'no':>4} {r.samples:>7} "
            f"{r.transformers_ms:>12.2f} {r.numpy_loop_ms:>10.2f} {r.fastcollate_ms:>11.2f} "
            f"{r.copy_ms:>6.2f} {r.speedup:>7.1f}x {r.vs_numpy_loop:>6.2f}x "
            f"{r.over_copy:>5.2f}x"
        )
    return "\n".join(lines)
