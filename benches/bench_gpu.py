"""Training steps on a GPU with transformers' collators and with fastcollate's: how much of a
step is spent waiting for the batch, and what that does to steps per second.

Two models from their configs, random weights, bf16 autocast on a GPU:

- bert: BERT-base sequence classification (the IMDB recipe), IMDB-like rows (lognormal
  lengths around 230 tokens, capped at 512), padded by `DataCollatorWithPadding`;
- lm: a ~0.5B causal LM (Qwen2.5-0.5B's shape), the same rows without labels, padded by
  `DataCollatorForLanguageModeling(mlm=False)` or packed padding-free by
  `DataCollatorWithFlattening`.

Each configuration runs in two training loops: `transformers.Trainer` (the collator passed as
`data_collator`, the one-import swap) and a plain accelerate loop over a DataLoader. The
configurations: transformers' collator with `num_workers` 0, 2 and 4, fastcollate's with 0
and 2, and (bert) fastcollate with `pin_memory=True` in the collator and the DataLoader's
pinning off, as `fastcollate.Trainer` does on a GPU; every other configuration pins in the
DataLoader (`pin_memory=True`). Host-to-device copies are `non_blocking`.

A third loop, `fastcollate-trainer`, is `fastcollate.Trainer` as a user runs it: bert with
its default collator (fastcollate's `DataCollatorWithPadding`, batches read straight from
Arrow, pinned output filled in place on a GPU), lm padded (`DataCollatorForLanguageModeling`,
`mlm=False`) and packed (`train_sampling_strategy="packed"`, a token budget of
`PACKED_TOKENS_PER_ROW` per row of the padded batch, `DataCollatorWithFlattening`).

Reported per configuration, over `--steps` steps after `--warmup`:

- steps/s, real (unpadded) tokens/s, and the padding share (pad positions over all
  positions the model is fed);
- the median time in `next(loader)` (which includes accelerate moving the batch to the GPU);
- the data-wait share: time in `next(loader)` over step time;
- host CPU time per step: this process and its DataLoader workers (user + system).

On a GPU, `torch.cuda.synchronize()` closes every step, so step times are the GPU's too (and
the CPU cannot prepare the next batch while the GPU still runs the last one: a data wait shows
in full). Rows come from `fastcollate.bench.workload` (seeded, no download); the LM reuses the
BERT tokenizer's pad id, as only the collators read the tokenizer.

    python benches/bench_gpu.py --json gpu.json --plot gpu.png
    python benches/bench_gpu.py --tasks bert --loops trainer --configs '*w0*'
    python benches/bench_gpu.py --device cpu --tiny --steps 2     # a check that it runs

Figures mean something only from a release build on a GPU; `--tiny` (tiny model configs, a
few steps) is for checking the script itself, on any device.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import fastcollate  # noqa: E402
from fastcollate.bench import report, timing, workload  # noqa: E402

LOOPS = ("trainer", "accelerate", "fastcollate-trainer")
TINY_MAX_TOKENS = 32
# The packed runs' token budget per batch: this many tokens per row of the padded batch size
# (IMDB-like rows average about 260 tokens, so a packed batch holds about as many real tokens
# as a padded one).
PACKED_TOKENS_PER_ROW = 256
TASKS = ("bert", "lm")
FIELDS = (
    "steps_per_s",
    "tokens_per_s",
    "step_ms_median",
    "next_ms_median",
    "next_ms_mean",
    "data_wait_share",
    "padding_share",
    "cpu_ms_per_step",
)


@dataclass(frozen=True)
class Config:
    loop: str
    task: str
    library: str  # "transformers" | "fastcollate"
    layout: str  # "padded" | "packed"
    num_workers: int
    # "dataloader": DataLoader(pin_memory=True); "collator": pin_memory=True; "trainer":
    # fastcollate.Trainer's choice (the collator pins on a GPU)
    pinning: str

    @property
    def name(self) -> str:
        pinned = "-pinned" if self.pinning == "collator" else ""
        return f"{self.loop}/{self.task}/{self.library}-{self.layout}{pinned}/w{self.num_workers}"


def all_configs() -> list[Config]:
    configs = []
    for loop in LOOPS[:2]:
        for task in TASKS:
            for layout in ("padded",) if task == "bert" else ("padded", "packed"):
                for workers in (0, 2, 4):
                    configs.append(
                        Config(loop, task, "transformers", layout, workers, "dataloader")
                    )
                for workers in (0, 2):
                    configs.append(Config(loop, task, "fastcollate", layout, workers, "dataloader"))
            # fastcollate.Trainer's choice on a GPU (the collator pins, the DataLoader does not);
            # DataCollatorWithPadding is the collator with the option.
            if task == "bert":
                configs.append(Config(loop, task, "fastcollate", "padded", 0, "collator"))
    for task, layout in (("bert", "padded"), ("lm", "padded"), ("lm", "packed")):
        configs.append(Config("fastcollate-trainer", task, "fastcollate", layout, 0, "trainer"))
    return configs


# --- models and data ---------------------------------------------------------------------------


def bert_config(tiny: bool) -> transformers.BertConfig:
    if tiny:
        return transformers.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            num_labels=2,
        )
    return transformers.BertConfig(num_labels=2)  # bert-base: 12 layers, 768 wide, 110M


def lm_config(tiny: bool) -> transformers.Qwen2Config:
    if tiny:
        return transformers.Qwen2Config(
            vocab_size=workload.VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=workload.MAX_TOKENS,
            pad_token_id=0,
        )
    # Qwen2.5-0.5B's shape: 494M parameters (embeddings tied).
    return transformers.Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=0,
    )


def new_model(task: str, tiny: bool, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it trains: seconds, not a minute, for 0.5B
        if task == "bert":
            return transformers.BertForSequenceClassification(bert_config(tiny))
        return transformers.Qwen2ForCausalLM(lm_config(tiny))


def training_rows(task: str, layout: str, n: int, max_tokens: int | None) -> datasets.Dataset:
    """n rows as `dataset.map(tokenizer)` leaves them: the columns the model takes, each row
    cut to `max_tokens` when given (as `truncation=True` cuts, keeping [SEP])."""
    rng = np.random.default_rng(workload.SEED)
    if task == "bert":
        rows = workload.classification_rows(rng, n)
    elif layout == "packed":
        rows = workload.flattening_rows(rng, n)
    else:
        rows = workload.language_modeling_rows(rng, n)
        for row in rows:
            del row["token_type_ids"]  # a causal LM takes none
    if max_tokens is not None:
        for row in rows:
            for key, values in row.items():
                if isinstance(values, list) and len(values) > max_tokens:
                    row[key] = values[: max_tokens - 1] + values[-1:]
    return datasets.Dataset.from_list(rows)


def new_collator(config: Config, tokenizer: Any) -> Any:
    module = transformers if config.library == "transformers" else fastcollate
    if config.task == "bert":
        if config.pinning == "collator":
            return fastcollate.DataCollatorWithPadding(tokenizer, pin_memory=True)
        return module.DataCollatorWithPadding(tokenizer)
    if config.layout == "packed":
        return module.DataCollatorWithFlattening()
    return module.DataCollatorForLanguageModeling(tokenizer, mlm=False)


# --- measuring ---------------------------------------------------------------------------------


def cpu_seconds() -> tuple[float, str]:
    """User + system CPU time of this process and its children (DataLoader workers), and what
    it covers (without psutil, this process only)."""
    try:
        import psutil
    except ImportError:
        return time.process_time(), "process"
    process = psutil.Process()
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total, "process+workers"


def count_tokens(batch: Any) -> tuple[Any, int]:
    """Real tokens (the attention mask's ones, or every position of a packed row: a tensor
    where the batch is, summed on the GPU without waiting for it) and the positions fed."""
    positions = batch["input_ids"].numel()
    if "attention_mask" in batch:
        return batch["attention_mask"].sum(), positions
    return positions, positions


class StepClock:
    """Step boundaries, the time of each `next(loader)`, tokens, and CPU time over the steps
    after warm-up."""

    def __init__(self, device: str, warmup: int):
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.warmup = warmup
        self.ends: list[float] = []
        self.fetches: list[float] = []
        self.tokens: list[Any] = []
        self.positions: list[int] = []
        self.cpu: list[float] = []
        self.cpu_scope = ""

    def begin(self) -> None:
        self.sync()
        self.ends.append(time.perf_counter())
        self._mark_cpu()

    def fetched(self, seconds: float, batch: Any) -> None:
        self.fetches.append(seconds)
        tokens, positions = count_tokens(batch)
        self.tokens.append(tokens)
        self.positions.append(positions)

    def step_done(self) -> None:
        self.sync()
        self.ends.append(time.perf_counter())
        self._mark_cpu()

    def _mark_cpu(self) -> None:
        # Only where the timed window opens, and at every step after (the last one closes it).
        if len(self.ends) - 1 >= self.warmup:
            seconds, self.cpu_scope = cpu_seconds()
            self.cpu.append(seconds)

    def result(self) -> dict[str, Any]:
        steps = len(self.ends) - 1 - self.warmup
        if steps < 1 or len(self.fetches) < len(self.ends) - 1:
            raise RuntimeError(f"only {len(self.ends) - 1} steps ran; warm-up is {self.warmup}")
        window = slice(self.warmup, self.warmup + steps)
        durations = np.diff(self.ends)[window]
        fetches = np.asarray(self.fetches[window])
        tokens = sum(int(t) for t in self.tokens[window])
        positions = sum(self.positions[window])
        total = float(durations.sum())
        return {
            "steps": steps,
            "steps_per_s": steps / total,
            "tokens_per_s": tokens / total,
            "step_ms_median": float(np.median(durations)) * 1e3,
            "next_ms_median": float(np.median(fetches)) * 1e3,
            "next_ms_mean": float(fetches.mean()) * 1e3,
            "data_wait_share": float(fetches.sum()) / total,
            "padding_share": 1 - tokens / positions,
            "cpu_ms_per_step": (self.cpu[-1] - self.cpu[0]) / steps * 1e3,
            "cpu_scope": self.cpu_scope,
        }


class TimedLoader:
    """A DataLoader whose every `next()` is timed; anything else is the DataLoader's."""

    def __init__(self, loader: Any, clock: StepClock):
        self._loader, self._clock = loader, clock

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __iter__(self):
        batches = iter(self._loader)
        while True:
            start = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            self._clock.fetched(time.perf_counter() - start, batch)
            yield batch


class _ClockCallback(transformers.TrainerCallback):
    def __init__(self, clock: StepClock):
        self.clock = clock

    def on_train_begin(self, args, state, control, **kwargs):
        self.clock.begin()

    def on_step_end(self, args, state, control, **kwargs):
        self.clock.step_done()


def _reset_accelerate() -> None:
    # accelerate keeps one process-wide state; each run starts from scratch.
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def run_trainer(config: Config, settings: argparse.Namespace, tokenizer: Any, rows: Any) -> dict:
    """`transformers.Trainer` with the configuration's collator, or (loop
    `fastcollate-trainer`) `fastcollate.Trainer` as a user runs it."""
    clock = StepClock(settings.device, settings.warmup)
    cuda = settings.device == "cuda"
    fast = config.loop == "fastcollate-trainer"
    base: Any = fastcollate.Trainer if fast else transformers.Trainer
    arguments: Any = fastcollate.TrainingArguments if fast else transformers.TrainingArguments

    class TimedTrainer(base):
        def get_train_dataloader(self):
            return TimedLoader(super().get_train_dataloader(), clock)

    extra: dict[str, Any] = {}
    if config.layout == "packed" and fast:
        budget = settings.batch_size * (settings.max_tokens or PACKED_TOKENS_PER_ROW)
        extra = {"train_sampling_strategy": "packed", "max_tokens_per_batch": budget}
    collator: dict[str, Any] = {"data_collator": new_collator(config, tokenizer)}
    if fast and config.task == "bert":
        # fastcollate.Trainer's default: its DataCollatorWithPadding, from the tokenizer.
        collator = {"processing_class": tokenizer}
    elif fast and config.layout == "packed":
        collator = {}  # the packed strategy's default, DataCollatorWithFlattening
    with tempfile.TemporaryDirectory() as output_dir:
        args = arguments(
            output_dir,
            per_device_train_batch_size=settings.batch_size,
            max_steps=settings.warmup + settings.steps,
            learning_rate=1e-5,
            bf16=cuda,
            use_cpu=not cuda,
            dataloader_num_workers=config.num_workers,
            # The collator pins instead (pin_memory=True), as fastcollate.Trainer arranges;
            # fastcollate.Trainer is left its default, and arranges it.
            dataloader_pin_memory=fast or (cuda and config.pinning == "dataloader"),
            dataloader_drop_last=True,
            accelerator_config={"non_blocking": cuda},
            logging_strategy="no",
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=0,
            **extra,
        )
        trainer = TimedTrainer(
            model=new_model(config.task, settings.tiny, settings.device),
            args=args,
            train_dataset=rows,
            callbacks=[_ClockCallback(clock)],
            **collator,
        )
        trainer.train()
        del trainer
    return clock.result()


def run_accelerate(config: Config, settings: argparse.Namespace, tokenizer: Any, rows: Any) -> dict:
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    clock = StepClock(settings.device, settings.warmup)
    cuda = settings.device == "cuda"
    accelerator = Accelerator(
        mixed_precision="bf16" if cuda else "no",
        cpu=not cuda,
        dataloader_config=DataLoaderConfiguration(non_blocking=cuda),
    )
    model = new_model(config.task, settings.tiny, settings.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    loader = DataLoader(
        rows,
        batch_size=settings.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        num_workers=config.num_workers,
        pin_memory=cuda and config.pinning == "dataloader",
        collate_fn=new_collator(config, tokenizer),
        drop_last=True,
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    batches = iter(TimedLoader(loader, clock))
    clock.begin()
    for _ in range(settings.warmup + settings.steps):
        batch = next(batches)
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        clock.step_done()
    del batches, model, optimizer, loader, accelerator
    return clock.result()


def skipped(config: Config, device: str) -> str | None:
    if config.pinning == "collator" and device != "cuda":
        return "pin_memory=True needs CUDA"
    return None


def run_config(config: Config, settings: argparse.Namespace, tokenizer: Any, rows: Any) -> dict:
    record: dict[str, Any] = {
        "name": config.name,
        "loop": config.loop,
        "task": config.task,
        "collator": config.library,
        "layout": config.layout,
        "num_workers": config.num_workers,
        "pinning": config.pinning if settings.device == "cuda" else "none",
        "padding_share": None,
        "batch_size": settings.batch_size,
        "warmup": settings.warmup,
        **{field: None for field in FIELDS},
    }
    reason = skipped(config, settings.device)
    if reason is not None:
        return {**record, "status": "skipped", "reason": reason}
    _reset_accelerate()
    run = run_accelerate if config.loop == "accelerate" else run_trainer
    try:
        measured = run(config, settings, tokenizer, rows)
    finally:
        gc.collect()
        if settings.device == "cuda":
            torch.cuda.empty_cache()
    return {**record, **measured, "status": "ok", "reason": None}


# --- reporting ---------------------------------------------------------------------------------


def device_description(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"type": "cpu", "name": report.cpu_name()}
    properties = torch.cuda.get_device_properties(0)
    return {
        "type": "cuda",
        "name": torch.cuda.get_device_name(0),
        "memory_gib": round(properties.total_memory / 2**30, 1),
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
        "cuda": torch.version.cuda,
        "count": torch.cuda.device_count(),
    }


def _baseline(results: list[dict], r: dict) -> dict | None:
    """transformers' collator with num_workers=0, same loop (transformers.Trainer's for
    fastcollate.Trainer), task and layout (padded, for packed)."""
    fast_trainer = r["loop"] == "fastcollate-trainer"
    loop, layout = ("trainer", "padded") if fast_trainer else (r["loop"], r["layout"])
    for other in results:
        if (other["loop"], other["task"], other["layout"]) == (loop, r["task"], layout):
            if other["collator"] == "transformers" and other["num_workers"] == 0:
                return other if other["status"] == "ok" else None
    return None


def format_table(results: list[dict]) -> str:
    header = [
        "configuration",
        "steps/s",
        "tokens/s",
        "step ms",
        "next() ms",
        "data wait",
        "padding",
        "CPU ms/step",
        "tokens/s vs transformers w0",
    ]
    lines, notes = [], []
    for r in results:
        if r["status"] != "ok":
            lines.append([r["name"], *["-"] * (len(header) - 1)])
            notes.append(f"{r['name']}: skipped, {r['reason']}")
            continue
        base = _baseline(results, r)
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x" if base else "-"
        lines.append(
            [
                r["name"],
                f"{r['steps_per_s']:.2f}",
                f"{r['tokens_per_s']:,.0f}",
                f"{r['step_ms_median']:.1f}",
                f"{r['next_ms_median']:.2f}",
                f"{r['data_wait_share']:.1%}",
                f"{r['padding_share']:.1%}",
                f"{r['cpu_ms_per_step']:.1f}",
                ratio,
            ]
        )
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def render(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([render(header), rule, *map(render, lines), *notes])


def plot(results: list[dict], path: str, title: str) -> None:
    """A panel per loop and task: steps/s per configuration, the data-wait share on each bar."""
    plt = report.pyplot()
    ok = [r for r in results if r["status"] == "ok"]
    panels = list(dict.fromkeys((r["loop"], r["task"]) for r in ok))
    if not panels:
        return
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(8, 2.2 + 0.35 * max(len(ok) // len(panels), 1) * len(panels)),
        squeeze=False,
        layout="constrained",
    )
    for ax, (loop, task) in zip(axes.flat, panels, strict=True):
        rows = [r for r in ok if (r["loop"], r["task"]) == (loop, task)]
        labels = [r["name"].split("/", 2)[2] for r in rows]
        colors = ["C0" if r["collator"] == "transformers" else "C1" for r in rows]
        bars = ax.barh(range(len(rows)), [r["steps_per_s"] for r in rows], color=colors)
        ax.bar_label(bars, labels=[f"wait {r['data_wait_share']:.0%}" for r in rows], fontsize=7)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("steps/s")
        ax.set_title(f"{loop}: {task}", fontsize=9)
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- command line ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny model configs, for checking")
    parser.add_argument("--steps", type=int, help="timed steps (default 60; 2 with --tiny)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default 10; 1 --tiny)")
    parser.add_argument("--batch-size", type=int, help="rows a batch (default 32; 4 with --tiny)")
    parser.add_argument("--loops", nargs="+", choices=LOOPS, default=list(LOOPS))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument(
        "--configs", nargs="+", metavar="PATTERN", help="only configurations matching a glob"
    )
    parser.add_argument("--list", action="store_true", help="print the configurations and exit")
    parser.add_argument("--json", metavar="FILE", help="write the record as JSON")
    parser.add_argument("--plot", metavar="FILE", help="write a plot (needs matplotlib)")
    return parser


def selected(args: argparse.Namespace) -> list[Config]:
    configs = [c for c in all_configs() if c.loop in args.loops and c.task in args.tasks]
    if args.configs:
        configs = [c for c in configs if any(fnmatch.fnmatch(c.name, p) for p in args.configs)]
    return configs


def parse(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parsed options, the defaults that depend on --tiny filled in."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.steps = args.steps if args.steps is not None else 2 if args.tiny else 60
    args.warmup = args.warmup if args.warmup is not None else 1 if args.tiny else 10
    args.batch_size = args.batch_size if args.batch_size is not None else 4 if args.tiny else 32
    # Tiny models on a CPU: rows cut to 32 tokens, so a step takes milliseconds.
    args.max_tokens = TINY_MAX_TOKENS if args.tiny else None
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be positive, --warmup not negative")
    return parser, args


def measure(
    args: argparse.Namespace,
    configs: list[Config],
    deadline: float | None = None,
    keep_going: bool = False,
) -> list[dict]:
    """Runs the configurations in turn on the same rows and seeds; those left when the
    `time.perf_counter()` deadline has passed are recorded as skipped. With `keep_going`, a
    configuration that raises is recorded as failed (with the error) and the next one runs."""
    tokenizer = workload.bert_tokenizer()
    # Every run takes its batches from the first (warmup + steps) of one shuffled epoch.
    n_rows = (args.warmup + args.steps + 1) * args.batch_size
    data: dict[tuple[str, str], Any] = {}
    results = []
    for config in configs:
        if deadline is not None and time.perf_counter() > deadline:
            record = {"name": config.name, "loop": config.loop, "task": config.task,
                      "collator": config.library, "layout": config.layout,
                      "num_workers": config.num_workers, **{field: None for field in FIELDS}}
            results.append({**record, "status": "skipped", "reason": "out of time"})
            continue
        key = (config.task, config.layout)
        if key not in data:
            data[key] = training_rows(config.task, config.layout, n_rows, args.max_tokens)
        print(f"{config.name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            results.append(run_config(config, args, tokenizer, data[key]))
        except Exception as err:
            if not keep_going:
                raise
            import traceback

            traceback.print_exc()
            record = {"name": config.name, "loop": config.loop, "task": config.task,
                      "collator": config.library, "layout": config.layout,
                      "num_workers": config.num_workers, **{field: None for field in FIELDS}}
            results.append({**record, "status": "failed",
                            "reason": f"{type(err).__name__}: {err}"[:2000]})
        results[-1]["wall_s"] = round(time.perf_counter() - start, 2)
    return results


def title(args: argparse.Namespace, device: dict[str, Any], env: dict[str, Any]) -> str:
    return (
        f"{device['name']}, batch {args.batch_size}, {args.steps} steps"
        f"{' (tiny models)' if args.tiny else ''}\n{report.machine_description(env)}"
    )


def make_record(args: argparse.Namespace, results: list[dict]) -> dict[str, Any]:
    """The JSON record: the device, the environment, the settings and every result."""
    return {
        "benchmark": "bench_gpu",
        "command": report.command_line(),
        "device": device_description(args.device),
        "environment": {**report.environment(), "accelerate": metadata.version("accelerate")},
        "settings": {
            "tiny": args.tiny,
            "steps": args.steps,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "max_tokens": args.max_tokens,
            "bf16": args.device == "cuda",
            "packed_tokens_per_row": args.max_tokens or PACKED_TOKENS_PER_ROW,
        },
        "fields": list(FIELDS),
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser, args = parse(argv)
    configs = selected(args)
    if args.list:
        print("\n".join(c.name for c in configs))
        return 0
    if not configs:
        parser.error("no configuration matches")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False (--device cpu to check)")
    if not args.tiny:
        timing.require_release_build()
    results = measure(args, configs)
    record = make_record(args, results)
    heading = title(args, record["device"], record["environment"])
    print(heading)
    print(format_table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
    if args.plot:
        plot(results, args.plot, heading)
    return 0


if __name__ == "__main__":
    sys.exit(main())
