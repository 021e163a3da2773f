"""`python -m fastcollate bench --cases trl`: every TRL path, TRL against fastcollate in one
process on the same input, each output checked equal (keys, values, dtypes) before anything is
timed.

- Collators, at each batch size: microseconds per batch of the call alone (rows read
  beforehand, except "SFT padded, Arrow", whose fastcollate figure includes reading the batch
  from Arrow), best of `repeat` passes over `batches` batches (TRL's and ours taking turns),
  and TRL's time over ours.
  SFT: `DataCollatorForLanguageModeling` padded, padding-free, on `pack_dataset(..., "bfd")`
  rows, and padded from Arrow; DPO (also `max_length=512, truncation_mode="keep_end"`), reward,
  KTO; GRPO's padding of generated token lists (`torch.tensor` per row, `ones_like` masks,
  `trl.trainer.utils.pad` x4) against `pad_with_mask` x2; and `pad` on 1-d tensors.
- Dataset preparation: `SFTTrainer._prepare_dataset` on a tokenized prompt-completion dataset
  (labels built, truncated to 1024, label-less rows dropped) against
  `prepare_tokenized_sft_dataset`; TRL once, ours best of `repeat`.
- `pack_dataset`, end to end from a tokenized `datasets.Dataset` to the packed one, every
  strategy; TRL once, ours best of `repeat`; the fill (tokens over `seq_length` x rows), and
  `whole_dataset=True`'s fill.

Imports TRL and `datasets`: the command line imports this module only after checking that
they are installed.
"""

from __future__ import annotations

import functools
import gc
import platform
import time
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import torch
import trl
from trl.data_utils import pack_dataset as trl_pack_dataset
from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreference
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpaired
from trl.trainer.reward_trainer import DataCollatorForPreference as TRLReward
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLLanguageModeling
from trl.trainer.sft_trainer import SFTTrainer
from trl.trainer.utils import pad as trl_pad

import fastcollate
import fastcollate.trl as fast_trl

from .errors import BenchError
from .report import cpu_name
from .timing import require_release_build, time_once
from .trl_workload import (
    PAD_ID,
    SFT_MAX_LENGTH,
    batches_of,
    filled_share,
    imdb_like_dataset,
    preference_dataset,
    sft_dataset,
    shuffled_order,
    tokenized_prompt_completion,
)

PACK_STRATEGIES = ("bfd", "bfd_split", "wrapped")
PACK_SEQ_LENGTH = 2048
PREPARATION_MAX_LENGTH = 1024


@dataclass(frozen=True)
class TrlSettings:
    """How much the TRL benchmark does; the defaults take a few minutes on a loaded 2-core
    machine, `quick()` well under a minute."""

    rows: int = 4000
    batch_sizes: Sequence[int] = (8, 32)
    batches: int = 20
    repeat: int = 5
    preparation_rows: Sequence[int] = (20_000,)
    pack_rows: Sequence[int] = (200_000, 1_000_000)
    # TRL's pack_dataset is timed (and its output compared) only up to this many rows.
    trl_pack_rows: int = 200_000

    @classmethod
    def quick(cls, batch_sizes: Sequence[int] = (8, 32), repeat: int = 3) -> TrlSettings:
        return cls(
            rows=600,
            batch_sizes=batch_sizes,
            batches=4,
            repeat=repeat,
            preparation_rows=(1_000,),
            pack_rows=(5_000,),
            trl_pack_rows=5_000,
        )


@dataclass(frozen=True)
class TrlResult:
    """One row of the tables: TRL's seconds and ours for one case at one size."""

    section: str  # "collator", "preparation" or "pack_dataset"
    case: str
    size: int  # rows per batch for a collator, rows of the dataset otherwise
    trl_seconds: float | None
    fastcollate_seconds: float
    fill: tuple[float | None, float] | None = None  # pack_dataset: (TRL's, ours)
    # pack_dataset: fastcollate's first call on the dataset in this process, which pays for
    # memory touched for the first time (the best of `repeat` is reported as the time).
    first_seconds: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.trl_seconds is None else self.trl_seconds / self.fastcollate_seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "case": self.case,
            "size": self.size,
            "trl_seconds": self.trl_seconds,
            "fastcollate_seconds": self.fastcollate_seconds,
            "speedup_vs_trl": self.ratio,
            "fill": None
            if self.fill is None
            else {"trl": self.fill[0], "fastcollate": self.fill[1]},
            "fastcollate_first_call_seconds": self.first_seconds,
        }


def _differs(ours: Any, theirs: Any, where: str) -> None:
    """BenchError when fastcollate's output is not TRL's: keys in order, values, dtypes."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or list(ours) != list(theirs):
            raise BenchError(
                f"{where}: fastcollate's keys {list(ours)} are not TRL's {list(theirs)}"
            )
        for key, value in theirs.items():
            _differs(ours[key], value, f"{where}, '{key}'")
    elif isinstance(theirs, (tuple, list)):
        if len(ours) != len(theirs):
            raise BenchError(f"{where}: {len(ours)} outputs where TRL gives {len(theirs)}")
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _differs(a, b, f"{where}, output {index}")
    elif isinstance(theirs, torch.Tensor):
        if not (
            isinstance(ours, torch.Tensor)
            and ours.dtype == theirs.dtype
            and torch.equal(ours, theirs)
        ):
            raise BenchError(f"{where}: fastcollate's tensor differs from TRL's")
    elif ours != theirs:
        raise BenchError(f"{where}: fastcollate gives {ours!r}, TRL {theirs!r}")


def _per_batch(pairs: list[tuple[Callable, list]], repeat: int) -> list[float]:
    """For each (collate, inputs): the best over `repeat` passes of the mean seconds per call.
    The collators take turns pass by pass, so that a burst of load on the machine weighs on
    all of them alike."""
    best = [float("inf")] * len(pairs)
    for _ in range(repeat):
        for index, (collate, inputs) in enumerate(pairs):
            gc.collect()  # no garbage from the other collator's pass is collected inside this
            start = time.perf_counter()
            for batch in inputs:
                collate(batch)
            best[index] = min(best[index], (time.perf_counter() - start) / len(inputs))
    return best


def _best_of(function: Callable[[], Any], repeat: int) -> tuple[float, Any, float]:
    """(best seconds, the result, the first call's seconds) over `repeat` calls."""
    first, result = time_once(function)
    best = first
    for _ in range(repeat - 1):
        seconds, result = time_once(function)
        best = min(best, seconds)
    return best, result, first


def grpo_trl(batch: list) -> tuple:
    """GRPOTrainer's padding of a batch of generated (prompt, completion) token lists."""
    prompts = [torch.tensor(row["prompt_ids"]) for row in batch]
    prompt_mask = [torch.ones_like(ids, dtype=torch.long) for ids in prompts]
    completions = [torch.tensor(row["chosen_ids"]) for row in batch]
    completion_mask = [torch.ones_like(ids, dtype=torch.long) for ids in completions]
    return (
        trl_pad(prompts, PAD_ID, "left"),
        trl_pad(prompt_mask, 0, "left"),
        trl_pad(completions, PAD_ID, "right"),
        trl_pad(completion_mask, 0, "right"),
    )


def grpo_fastcollate(batch: list) -> tuple:
    prompts = fast_trl.pad_with_mask([row["prompt_ids"] for row in batch], PAD_ID, "left")
    completions = fast_trl.pad_with_mask([row["chosen_ids"] for row in batch], PAD_ID)
    return (*prompts, *completions)


@dataclass(frozen=True)
class _CollatorCase:
    name: str
    data: datasets.Dataset
    theirs: Callable[[list], Any]
    ours: Callable[[list], Any]
    # Turns the rows of a batch into what both sides take (default: the rows themselves).
    inputs: Callable[[list], Any] | None = None
    # fastcollate's own input for a batch, when it reads the batch another way (Arrow).
    our_batches: Callable[[int, int], list] | None = None


def _collator_cases(rows: int) -> list[_CollatorCase]:
    sft = sft_dataset(rows)
    packed = trl_pack_dataset(sft.select_columns(["input_ids", "labels"]), SFT_MAX_LENGTH, "bfd")
    arrow = fastcollate.ArrowBatches(sft)

    def arrow_batches(batch_size: int, count: int) -> list:
        order = shuffled_order(len(sft))
        return [
            arrow.__getitems__(order[i * batch_size : (i + 1) * batch_size].tolist())
            for i in range(count)
        ]

    def sft_pair(**options: Any) -> tuple[Callable, Callable]:
        return (
            TRLLanguageModeling(pad_token_id=PAD_ID, **options),
            fast_trl.DataCollatorForLanguageModeling(pad_token_id=PAD_ID, **options),
        )

    preference = preference_dataset(rows)
    dpo = preference.select_columns(
        ["prompt_ids", "chosen_ids", "rejected_ids", "ref_chosen_logps", "ref_rejected_logps"]
    )
    kto = preference.rename_columns(
        {"chosen_ids": "completion_ids", "rejected_ids": "KL_completion_ids"}
    ).select_columns(["prompt_ids", "completion_ids", "KL_completion_ids", "label"])
    keep_end: dict[str, Any] = {"max_length": 512, "truncation_mode": "keep_end"}
    return [
        _CollatorCase("SFT padded", sft, *sft_pair()),
        _CollatorCase("SFT padding-free", sft, *sft_pair(padding_free=True)),
        _CollatorCase("SFT packed (bfd)", packed, *sft_pair(padding_free=True)),
        _CollatorCase("SFT padded, Arrow", sft, *sft_pair(), our_batches=arrow_batches),
        _CollatorCase(
            "DPO",
            dpo,
            TRLPreference(pad_token_id=PAD_ID),
            fast_trl.DataCollatorForPreference(pad_token_id=PAD_ID),
        ),
        _CollatorCase(
            "DPO 512 keep_end",
            dpo,
            TRLPreference(pad_token_id=PAD_ID, **keep_end),
            fast_trl.DataCollatorForPreference(pad_token_id=PAD_ID, **keep_end),
        ),
        _CollatorCase(
            "reward",
            preference.select_columns(["chosen_ids", "rejected_ids", "margin"]),
            TRLReward(pad_token_id=PAD_ID),
            fast_trl.RewardDataCollatorForPreference(pad_token_id=PAD_ID),
        ),
        _CollatorCase(
            "KTO",
            kto,
            TRLUnpaired(pad_token_id=PAD_ID),
            fast_trl.DataCollatorForUnpairedPreference(pad_token_id=PAD_ID),
        ),
        _CollatorCase("GRPO pad x4", preference, grpo_trl, grpo_fastcollate),
        _CollatorCase(
            "pad (1-d tensors)",
            preference,
            lambda tensors: trl_pad(tensors, PAD_ID),
            lambda tensors: fast_trl.pad(tensors, PAD_ID),
            inputs=lambda batch: [torch.tensor(row["chosen_ids"]) for row in batch],
        ),
    ]


def run_collators(settings: TrlSettings, progress: Callable[[str], None]) -> list[TrlResult]:
    results = []
    for case in _collator_cases(settings.rows):
        for batch_size in settings.batch_sizes:
            count = min(settings.batches, len(case.data) // batch_size)
            if count < 1:
                progress(f"skip {case.name} at batch {batch_size}: fewer rows than a batch")
                continue
            rows = batches_of(case.data, batch_size, count)
            theirs_in = [case.inputs(b) for b in rows] if case.inputs else rows
            ours_in = case.our_batches(batch_size, count) if case.our_batches else theirs_in
            for index in range(min(3, count)):
                _differs(
                    case.ours(ours_in[index]),
                    case.theirs(theirs_in[index]),
                    f"{case.name}, batch {batch_size}",
                )
            trl_s, ours_s = _per_batch(
                [(case.theirs, theirs_in), (case.ours, ours_in)], settings.repeat
            )
            result = TrlResult("collator", case.name, batch_size, trl_s, ours_s)
            progress(f"{case.name} at batch {batch_size}: {result.ratio:.0f}x")
            results.append(result)
    return results


def trl_prepare(dataset: datasets.Dataset, max_length: int) -> datasets.Dataset:
    """TRL's own `_prepare_dataset`, called unbound: on a tokenized dataset it reads only
    `completion_only_loss` from the trainer and these `SFTConfig` fields."""
    trainer = types.SimpleNamespace(completion_only_loss=True)
    config = types.SimpleNamespace(
        dataset_num_proc=None,
        max_length=max_length,
        truncation_mode="keep_start",
        shuffle_dataset=False,
        seed=42,
        packing_strategy="bfd",
    )
    # Stand-ins for the trainer and config (TRL reads only the attributes set above).
    return SFTTrainer._prepare_dataset(
        trainer, dataset, None, config, False, None, "train"  # type: ignore[arg-type]
    )


def _same_dataset(ours: datasets.Dataset, theirs: datasets.Dataset, where: str) -> None:
    if ours.features != theirs.features or ours.column_names != theirs.column_names:
        raise BenchError(f"{where}: fastcollate's features differ from TRL's")
    if not ours.with_format("arrow")[:].equals(theirs.with_format("arrow")[:]):
        raise BenchError(f"{where}: fastcollate's rows differ from TRL's")


def run_preparation(settings: TrlSettings, progress: Callable[[str], None]) -> list[TrlResult]:
    results = []
    for rows in settings.preparation_rows:
        dataset = tokenized_prompt_completion(rows)
        trl_s, theirs = time_once(functools.partial(trl_prepare, dataset, PREPARATION_MAX_LENGTH))
        ours_s, ours, _ = _best_of(
            functools.partial(
                fast_trl.prepare_tokenized_sft_dataset,
                dataset,
                completion_only_loss=True,
                max_length=PREPARATION_MAX_LENGTH,
            ),
            settings.repeat,
        )
        _same_dataset(ours, theirs, f"preparation, {rows} rows")
        result = TrlResult("preparation", "labels + truncate", rows, trl_s, ours_s)
        progress(f"preparation of {rows:,} rows: {result.ratio:.0f}x")
        results.append(result)
    return results


def run_packing(settings: TrlSettings, progress: Callable[[str], None]) -> list[TrlResult]:
    results = []
    for rows in settings.pack_rows:
        dataset = imdb_like_dataset(rows)
        for strategy in PACK_STRATEGIES:
            pack = functools.partial(fast_trl.pack_dataset, dataset, PACK_SEQ_LENGTH, strategy)
            ours_s, ours, first_s = _best_of(pack, settings.repeat)
            ours_fill = filled_share(ours, PACK_SEQ_LENGTH)
            if rows > settings.trl_pack_rows:
                results.append(
                    TrlResult(
                        "pack_dataset",
                        strategy,
                        rows,
                        None,
                        ours_s,
                        (None, ours_fill),
                        first_s,
                    )
                )
                progress(f"pack_dataset {strategy}, {rows:,} rows: {ours_s:.3f} s (TRL not run)")
                continue
            trl_s, theirs = time_once(
                functools.partial(trl_pack_dataset, dataset, PACK_SEQ_LENGTH, strategy)
            )
            where = f"pack_dataset, {rows} rows, {strategy}"
            if ours.features != theirs.features or len(ours) != len(theirs):
                raise BenchError(f"{where}: fastcollate's dataset differs from TRL's")
            for name in theirs.column_names:
                ours_column = ours.data.column(name).combine_chunks()
                if not ours_column.equals(theirs.data.column(name).combine_chunks()):
                    raise BenchError(f"{where}: '{name}' differs from TRL's")
            fill = (filled_share(theirs, PACK_SEQ_LENGTH), ours_fill)
            result = TrlResult("pack_dataset", strategy, rows, trl_s, ours_s, fill, first_s)
            progress(f"pack_dataset {strategy}, {rows:,} rows: {result.ratio:.0f}x")
            results.append(result)
        whole = functools.partial(
            fast_trl.pack_dataset, dataset, PACK_SEQ_LENGTH, "bfd", whole_dataset=True
        )
        ours_s, ours, first_s = _best_of(whole, settings.repeat)
        whole_fill = filled_share(ours, PACK_SEQ_LENGTH)
        results.append(
            TrlResult(
                "pack_dataset",
                "bfd, whole_dataset",
                rows,
                None,
                ours_s,
                (None, whole_fill),
                first_s,
            )
        )
        progress(f"pack_dataset bfd whole_dataset, {rows:,} rows: {whole_fill:.2%} full")
    return results


def run(settings: TrlSettings, progress: Callable[[str], None]) -> list[TrlResult]:
    """Every section, checked then timed, after refusing a debug build."""
    require_release_build()
    datasets.disable_progress_bars()
    datasets.disable_caching()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [
                *run_collators(settings, progress),
                *run_preparation(settings, progress),
                *run_packing(settings, progress),
            ]
    finally:
        torch.set_num_threads(previous_threads)


def header() -> str:
    return (
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), trl "
        f"{trl.__version__}, torch {torch.__version__}, datasets {datasets.__version__}, "
        f"Python {platform.python_version()}, {cpu_name()}; torch on 1 thread"
    )


def format_tables(results: list[TrlResult], settings: TrlSettings) -> str:
    """The three tables: collators (µs per batch), preparation and pack_dataset (seconds)."""
    lines = [
        f"collators: µs per batch, best of {settings.repeat} passes over up to "
        f"{settings.batches} batches",
        f"{'case':<20}{'batch':>6}{'TRL µs':>12}{'fastcollate µs':>16}{'ratio':>9}",
    ]
    for r in results:
        if r.section == "collator":
            assert r.trl_seconds is not None  # every collator row holds TRL's time
            lines.append(
                f"{r.case:<20}{r.size:>6}{r.trl_seconds * 1e6:>12.0f}"
                f"{r.fastcollate_seconds * 1e6:>16.0f}{r.ratio:>8.1f}x"
            )
    lines += [
        "",
        f"dataset preparation (SFT, tokenized prompt-completion, max_length "
        f"{PREPARATION_MAX_LENGTH}): TRL once, fastcollate best of {settings.repeat}",
        f"{'case':<20}{'rows':>9}{'TRL s':>9}{'fastcollate s':>15}{'ratio':>9}",
    ]
    for r in results:
        if r.section == "preparation":
            lines.append(
                f"{r.case:<20}{r.size:>9}{r.trl_seconds:>9.2f}{r.fastcollate_seconds:>15.3f}"
                f"{r.ratio:>8.1f}x"
            )
    lines += [
        "",
        f"pack_dataset (seq_length {PACK_SEQ_LENGTH}, end to end): TRL once (up to "
        f"{settings.trl_pack_rows:,} rows), fastcollate best of {settings.repeat} and its first "
        "call; fill = tokens / (seq_length x rows)",
        f"{'strategy':<20}{'rows':>9}{'TRL s':>9}{'fastcollate s':>15}{'ratio':>9}"
        f"{'fill TRL':>10}{'fill fast':>10}{'first call s':>14}",
    ]
    for r in results:
        if r.section == "pack_dataset":
            assert r.fill is not None  # every pack_dataset row holds its fill
            trl_s = "" if r.trl_seconds is None else f"{r.trl_seconds:.2f}"
            ratio = "" if r.ratio is None else f"{r.ratio:.1f}x"
            trl_fill = "" if r.trl_seconds is None else f"{r.fill[0]:.2%}"
            lines.append(
                f"{r.case:<20}{r.size:>9}{trl_s:>9}{r.fastcollate_seconds:>15.3f}{ratio:>9}"
                f"{trl_fill:>10}{r.fill[1]:>10.2%}{r.first_seconds:>14.3f}"
            )
    return "\n".join(lines)
