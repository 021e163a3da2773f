"""`python -m fastcollate bench --cases speech`: padding a batch of raw audio clips (1–16 s at
16 kHz, float32 numpy rows, as a speech dataset hands them) with fastcollate against
`Wav2Vec2FeatureExtractor.pad`, and against a plain copy of the padded output (numpy
allocating an array of the output's size and copying the output into it: the least any
padding can cost). Outputs are checked equal before anything is timed."""

from __future__ import annotations

import dataclasses
import statistics
import time
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
    samples: int
    transformers_ms: float
    fastcollate_ms: float
    copy_ms: float

    @property
    def speedup(self) -> float:
        return self.transformers_ms / self.fastcollate_ms

    @property
    def over_copy(self) -> float:
        return self.fastcollate_ms / self.copy_ms

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "speedup": self.speedup, "over_copy": self.over_copy}


def clips(batch_size: int, seed: int) -> list[dict[str, np.ndarray]]:
    """`batch_size` rows of float32 audio, 1–16 s each at 16 kHz."""
    rng = np.random.default_rng(seed)
    seconds = rng.uniform(SHORTEST_SECONDS, LONGEST_SECONDS, size=batch_size)
    return [
        {"input_values": rng.standard_normal(int(s * SAMPLING_RATE)).astype(np.float32)}
        for s in seconds
    ]


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm: first-touch of pages, imports
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def run(settings: SpeechSettings, progress=print) -> list[SpeechResult]:
    from transformers import Wav2Vec2FeatureExtractor

    import fastcollate

    extractor = Wav2Vec2FeatureExtractor(return_attention_mask=True)
    results = []
    for batch_size in settings.batch_sizes:
        rows = clips(batch_size, settings.seed)
        # transformers types pad's rows as BatchFeatures; it takes mappings of arrays too.
        theirs = extractor.pad(rows, return_tensors="np")  # type: ignore[arg-type]
        ours = fastcollate.pad(rows, extractor, return_tensors="np")
        for key in theirs:
            if (
                key not in ours
                or ours[key].dtype != theirs[key].dtype
                or not np.array_equal(ours[key], theirs[key])
            ):
                raise BenchError(f"speech: fastcollate's '{key}' differs from transformers'")
        values, mask = ours["input_values"], ours["attention_mask"]
        progress(f"speech: batch {batch_size}, {values.shape[1]} samples a row")
        results.append(SpeechResult(
            batch_size=batch_size,
            samples=int(values.shape[1]),
            transformers_ms=_median_ms(
                lambda rows=rows: extractor.pad(rows, return_tensors="np"), settings.repeat),
            fastcollate_ms=_median_ms(
                lambda rows=rows: fastcollate.pad(rows, extractor, return_tensors="np"),
                settings.repeat),
            copy_ms=_median_ms(
                lambda values=values, mask=mask: (values.copy(), mask.copy()), settings.repeat),
        ))
    return results


def header() -> str:
    return ("Speech: Wav2Vec2FeatureExtractor.pad of 1-16 s clips at 16 kHz (float32 numpy rows, "
            "attention mask) vs fastcollate.pad(rows, feature_extractor), and vs a plain copy of "
            "the padded output (median ms)")


def format_table(results: list[SpeechResult]) -> str:
    lines = [
        f"{'batch':>6} {'samples':>8} {'transformers':>13} {'fastcollate':>12} {'copy':>8} "
        f"{'speedup':>8} {'/copy':>6}"
    ]
    for r in results:
        lines.append(
            f"{r.batch_size:>6} {r.samples:>8} {r.transformers_ms:>13.2f} "
            f"{r.fastcollate_ms:>12.2f} {r.copy_ms:>8.2f} {r.speedup:>7.1f}x {r.over_copy:>5.2f}x"
        )
    return "\n".join(lines)
