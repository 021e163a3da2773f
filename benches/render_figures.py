"""Writes every published benchmark figure from the committed results files in
benches/results/, so that README.md, the docs pages and the plot cannot disagree with what a
command measured.

    python benches/render_figures.py --run     # rerun every command in RESULTS (each full
                                               # benchmark in turn), then render as below;
                                               # --run quick.json,trl.json for some of them
    python benches/render_figures.py           # rewrite the figures in README.md and docs/
                                               # from the files, and draw docs/img/speedup.png
    python benches/render_figures.py --check   # exit 1 naming each page that differs

A page marks each generated figure with `<!-- figures: NAME -->` ... `<!-- /figures -->`
(inline for a number inside a sentence, around a block for a table); everything between the
markers is replaced by what `RENDERERS[NAME]` makes from the results. tests/project/test_figures.py
fails when a page differs from this script's output, or when a figure stands outside the
markers.

`RESULTS` names each results file and the command that writes it: rerun that command (then
this script) to refresh the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benches" / "results"
PLOT = ROOT / "docs" / "img" / "speedup.png"
# The pages that may hold figures: each is checked, and rewritten when a region is found.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# results file -> the command that writes it (run from the repository root, in an environment
# with `pip install '.[transformers]'` and a release build).
RESULTS = {
    "with_padding.json": "python -m fastcollate bench --cases WithPadding --batch-sizes 1,8,32 "
    "--repeat 7 --json benches/results/with_padding.json",
    "collators.json": "python -m fastcollate bench --json benches/results/collators.json",
    # fastcollate beside its floor (the least work the call must do), batch 1 to 512
    "floor.json": "python -m fastcollate bench --cases WithPadding --batch-sizes 1,8,32,512 "
    "--json benches/results/floor.json",
    "quick.json": "python -m fastcollate bench --quick --json benches/results/quick.json",
    "sampling.json": "python -m fastcollate bench --sampling --json benches/results/sampling.json",
    # needs `pip install '.[trl]' datasets` (CPython 3.11+)
    "trl.json": "python -m fastcollate bench --cases trl --json benches/results/trl.json",
    # without CUDA the buffers are ordinary memory (a GPU session runs it with --memory pinned)
    "pinned_output_cpu.json": "python benches/bench_pinned_output.py "
    "--json benches/results/pinned_output_cpu.json",
    "speech.json": "python -m fastcollate bench --cases speech --json benches/results/speech.json",
    # the main process's CPU per batch from DataLoader workers, arena against torch's hand-over
    "worker_handover.json": "python benches/bench_worker_handover.py --workers 1,2,4 "
    "--rounds 11 --json benches/results/worker_handover.json",
    # the set-up steps a newcomer waits for: the extension's build and the default test run
    "setup_times.json": "python benches/measure_setup.py --json benches/results/setup_times.json",
}

# Written by `python3 benches/gpu_run.py` on a GPU machine (one file per device, named by it);
# none is required: without one, the GPU section says the figures are pending and how to
# produce them.
GPU_RESULTS = "gpu_*.json"
GPU_COMMAND = "python3 benches/gpu_run.py"
# Results files a page may show before the first run has written them: the region then says
# the figures are pending and names the command (each is in RESULTS too).
OPTIONAL = ("speech.json",)

REGION = re.compile(r"(<!-- figures: ([\w-]+) -->)(.*?)(<!-- /figures -->)", re.DOTALL)
# Row formats in the order the tables show them, with the words the pages use.
FORMAT_NAMES = {
    "lists": "Python lists",
    "numpy": "numpy arrays",
    "torch": "torch tensors",
    "torch-format": 'torch tensors, `set_format("torch")`',
}


def load(name: str) -> dict[str, Any]:
    with open(RESULTS_DIR / name, encoding="utf-8") as f:
        return json.load(f)


def pending(name: str) -> str:
    """What a region of an optional results file not yet written says."""
    return (
        f"\n_Pending: `benches/results/{name}` has not been written yet; `{RESULTS[name]}` "
        "writes it (or `bash benches/regenerate.sh`, every results file), then "
        "`python benches/render_figures.py`._\n"
    )


# --- the two bases of the collator figures (fastcollate.bench.timing) ---
#
# A results file written since the fresh basis exists records `settings.basis`; its figures
# (`ms_per_batch`, `speedup_vs_transformers`) are on fresh batches, and `cached` holds the same
# on reused ones. In an older file every figure is on reused batches: the tables say so.


def is_fresh(record: dict[str, Any]) -> bool:
    return "basis" in record["settings"]


def basis_sentence(record: dict[str, Any]) -> str:
    """How the figures of a collator results file were measured, in a sentence or two."""
    if not is_fresh(record):
        return (
            "Measured on a few batches reused while they stay in cache (the cached case, "
            "better than a DataLoader's calls get); the figures on freshly built batches "
            "replace these when the file is rewritten (`bash benches/regenerate.sh`)."
        )
    pools = sorted({r["pool_batches"] for r in record["results"]})
    rows = record["settings"]["basis"]["fresh"]["pool_rows"]
    span = (
        f"{pools[0]:,} batches"
        if len(pools) == 1
        else f"{pools[-1]:,} batches at the smallest batch size to {pools[0]:,} at the largest"
    )
    cached = record["settings"]["basis"]["cached"]["batches"]
    return (
        "Measured the way a DataLoader feeds a collator: each call gets a batch built just "
        "before it (a new list of new row dicts, as the DataLoader's fetcher builds it), in "
        f"turn from a pool of distinct batches ({rows:,} rows: {span}), both "
        "libraries on the same batches in one process; only the call is timed, its fixed "
        f"cost included. Cached: the same {cached} batches reused while they stay in cache."
    )


def ratio(value: float) -> str:
    """A speed-up as the pages print it: three significant figures, at most one decimal."""
    return f"{value:.1f}×" if value < 100 else f"{value:.0f}×"


def milliseconds(ms: float) -> str:
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"


LIBRARY_NAMES = {"numpy": "numpy", "torch": "torch", "transformers": "transformers"}
LIBRARY_NAMES.update(trl="TRL", datasets="datasets")


def describe(
    record: dict[str, Any],
    name: str,
    libraries: tuple[str, ...] = ("numpy", "torch", "transformers"),
) -> str:
    """One line: when and on what a results file was measured (the load average included), the
    versions of `libraries`, and the command that wrote it."""
    env = record["environment"]
    load_average = env.get("load_average")
    busy = "" if load_average is None else f", load average {load_average:.1f}"
    versions = ", ".join(f"{LIBRARY_NAMES[lib]} {env.get(lib)}" for lib in libraries)
    return (
        f"Measured {env['date'][:10]} on {env['cpu']} ({env['cpu_count']} CPUs{busy}), CPython "
        f"{env['python']}, {versions}, fastcollate {env['fastcollate']} "
        f"({env['build_profile']} build): `{env['command']}` "
        f"(`benches/results/{name}`)."
    )


def speedups(record: dict[str, Any]) -> dict[tuple[str, str, int], float]:
    """(case, format, batch size) -> speed-up over transformers."""
    return {
        (r["case"], r["format"], r["batch_size"]): r["speedup_vs_transformers"]
        for r in record["results"]
    }


def headline() -> str:
    """The lowest and highest speed-up of DataCollatorWithPadding at batch 32, on fresh
    batches (labelled when the file has only the cached case)."""
    record = load("with_padding.json")
    values = [v for (case, _, size), v in speedups(record).items() if size == 32]
    figures = span(values)
    return figures if is_fresh(record) else f"{figures} (cached: the same batches reused)"


def quick_seconds() -> str:
    return f"{load('quick.json')['environment']['wall_seconds']:.0f} seconds"


def setup_step(step: str) -> dict[str, Any]:
    record = load("setup_times.json")
    return next(r for r in record["results"] if r["step"] == step)


def minutes(seconds: float) -> str:
    whole = round(seconds / 60)
    return "under a minute" if whole < 1 else f"{whole} minute{'s' if whole > 1 else ''}"


def load_words(step: dict[str, Any], cpus: int) -> str:
    """What the load meant for a step's time: a machine with more work than CPUs is slower."""
    if step["load_average_mean"] > cpus:
        return ", more work than CPUs: quicker on an idle machine"
    return ", longer on a busier machine"


def build_time() -> str:
    """How long compiling the extension took (as `pip install .` compiles it), with the load
    the machine had meanwhile."""
    build = setup_step("build")
    cpus = load("setup_times.json")["environment"]["cpu_count"]
    return (
        f"{minutes(build['wall_seconds'])} on {cpus} CPUs at load average "
        f"{build['load_average_mean']:.1f}{load_words(build, cpus)} "
        "(`benches/results/setup_times.json`)"
    )


def tests_time() -> str:
    """How long the README's default test run took, with its counts and load."""
    tests = setup_step("tests")
    cpus = load("setup_times.json")["environment"]["cpu_count"]
    return (
        f"{minutes(tests['wall_seconds'])} for {tests['counts'].get('passed', 0)} tests on "
        f"{cpus} CPUs at load average {tests['load_average_mean']:.1f}"
        f"{load_words(tests, cpus)} (`benches/results/setup_times.json`)"
    )


def with_padding_table() -> str:
    """DataCollatorWithPadding's speed-up per row format and batch size, and its own time at
    the largest batch size."""
    record = load("with_padding.json")
    by_key = {(r["format"], r["batch_size"]): r for r in record["results"]}
    sizes = sorted({size for _, size in by_key})
    largest = sizes[-1]
    fresh = is_fresh(record)
    cached_header = (
        f" cached (same batches reused), batch {largest} |" if fresh else ""
    )
    lines = [
        "| rows | " + " | ".join(f"batch {s}" for s in sizes) + f" | fastcollate at batch "
        f"{largest} | vs best hand-written loop at batch {largest} |" + cached_header,
        "|---" * (len(sizes) + 3 + fresh) + "|",
    ]
    for fmt, words in FORMAT_NAMES.items():
        if (fmt, largest) not in by_key:
            continue
        cells = [ratio(by_key[fmt, s]["speedup_vs_transformers"]) for s in sizes]
        cells[-1] = f"**{cells[-1]}**"
        last = by_key[fmt, largest]
        ours = milliseconds(last["ms_per_batch"]["fastcollate"])
        cached = f" {ratio(last['cached']['speedup_vs_transformers'])} |" if fresh else ""
        lines.append(
            f"| {words} | "
            + " | ".join(cells)
            + f" | {ours} | {ratio(last['speedup_vs_best_baseline'])} |"
            + cached
        )
    caption = basis_sentence(record) + " " + describe(record, "with_padding.json")
    return "\n" + "\n".join(lines) + "\n\n" + caption + "\n"


def collators_table() -> str:
    """Every collator of the family: the speed-up per row format and batch size."""
    record = load("collators.json")
    values = speedups(record)
    sizes = sorted({size for _, _, size in values})
    cases = list(dict.fromkeys(case for case, _, _ in values))
    lines = [
        "| collator | rows | " + " | ".join(f"batch {s}" for s in sizes) + " |",
        "|---" * (len(sizes) + 2) + "|",
    ]
    for case in cases:
        for fmt in FORMAT_NAMES:
            if (case, fmt, sizes[0]) not in values:
                continue
            cells = [ratio(values[case, fmt, s]) for s in sizes]
            lines.append(f"| `{case}` | {fmt} | " + " | ".join(cells) + " |")
    variants = [
        (r, name)
        for r in record["results"]
        for name in r["ms_per_batch"]
        if name.startswith("fastcollate ")
    ]
    if variants:
        option = variants[0][1].removeprefix("fastcollate ")
        by_key = {
            (r["case"], r["format"], r["batch_size"]): r["ms_per_batch"]["transformers"]
            / r["ms_per_batch"][name]
            for r, name in variants
        }
        case = variants[0][0]["case"]
        for fmt in FORMAT_NAMES:
            if (case, fmt, sizes[0]) in by_key:
                cells = [ratio(by_key[case, fmt, s]) for s in sizes]
                lines.append(f"| `{case}`, `{option}` | {fmt} | " + " | ".join(cells) + " |")
    caption = basis_sentence(record) + " " + describe(record, "collators.json")
    return "\n" + "\n".join(lines) + "\n\n" + caption + "\n"


def floor_table() -> str:
    """How far from the limit: DataCollatorWithPadding's ms per batch beside its floor's (the
    least work the call must do for the same rows, measured in the same run), and their ratio,
    per row format and batch size."""
    name = "floor.json"
    record = load(name)
    rows = [
        r for r in record["results"]
        if r["case"] == "DataCollatorWithPadding" and r.get("floor")
    ]  # fmt: skip
    by_key = {(r["format"], r["batch_size"]): r for r in rows}
    sizes = sorted({size for _, size in by_key})

    def time(ms: float) -> str:
        # Microseconds below a millisecond: a floor of a few µs keeps its digits.
        return f"{ms * 1e3:.1f} µs" if ms < 1 else milliseconds(ms)

    lines = [
        "| rows | batch | fastcollate | floor | fastcollate / floor | floor through torch "
        "| fastcollate / that |",
        "|---|---|---|---|---|---|---|",
    ]
    for fmt, words in FORMAT_NAMES.items():
        for size in sizes:
            r = by_key.get((fmt, size))
            if r is None:
                continue
            floor, torch_floor = r["floor"], r.get("torch_floor")
            through_torch = (
                "- | -"
                if torch_floor is None
                else f"{time(torch_floor['ms_per_batch'])} | "
                f"{torch_floor['fastcollate_over_floor']:.2f}×"
            )
            lines.append(
                f"| {words} | {size} | {time(r['ms_per_batch']['fastcollate'])} | "
                f"{time(floor['ms_per_batch'])} | {floor['fastcollate_over_floor']:.2f}× | "
                f"{through_torch} |"
            )
    basis = record["settings"]["basis"]
    floor_basis = basis["floor"]["description"]
    torch_basis = basis.get("torch_floor", {}).get("description")
    caption = (
        f"The floor is {floor_basis}. "
        + (f"For torch rows, the floor through torch is {torch_basis}. " if torch_basis else "")
        + basis_sentence(record)
        + " "
        + describe(record, name)
    )
    return "\n" + "\n".join(lines) + "\n\n" + caption + "\n"


def large_batches_table() -> str:
    """DataCollatorWithPadding's milliseconds per batch against every method, at the largest
    batch sizes of the full run."""
    record = load("collators.json")
    rows = [r for r in record["results"] if r["case"] == "DataCollatorWithPadding"]
    sizes = sorted({r["batch_size"] for r in rows})[-2:]
    methods = list(dict.fromkeys(m for r in rows for m in r["ms_per_batch"]))
    lines = [
        "| rows | batch | "
        + " | ".join(f"{m} ms" for m in methods)
        + " | vs transformers | vs best baseline |",
        "|---" * (len(methods) + 4) + "|",
    ]
    for size in sizes:
        for r in rows:
            if r["batch_size"] != size:
                continue
            cells = [f"{r['ms_per_batch'][m]:.4g}" for m in methods]
            lines.append(
                f"| {r['format']} | {size} | "
                + " | ".join(cells)
                + f" | {ratio(r['speedup_vs_transformers'])}"
                + f" | {ratio(r['speedup_vs_best_baseline'])} |"
            )
    basis = "fresh batches" if is_fresh(record) else "the same batches reused (cached)"
    return "\n" + "\n".join(lines) + f"\n\nOn {basis}, as in the table above.\n"


def sampling_table() -> str:
    """Real-token share, batches and seconds per epoch of each sampler."""
    record = load("sampling.json")
    settings = record["settings"]
    lines = [
        "| lengths | sampler | real tokens | batches | s per epoch | transformers' twin, s per "
        "epoch |",
        "|---|---|---|---|---|---|",
    ]
    for r in record["results"]:
        theirs = r["transformers_seconds"]
        lines.append(
            f"| {r['distribution']} | {r['sampler']} | {r['real_token_share']:.2%} | "
            f"{r['batches']:,} | {r['seconds']:.3f} | "
            + ("–" if theirs is None else f"{theirs:.3f}")
            + " |"
        )
    caption = (
        f"{settings['rows']:,} lengths per distribution, batch {settings['batch_size']}, "
        f"`grad_accum` {settings['grad_accum']}, {settings['world_size']} ranks for "
        f"`batch_rebalance`, {settings['max_tokens']} tokens per packed batch. "
        + describe(record, "sampling.json", ("torch", "transformers"))
    )
    return "\n" + "\n".join(lines) + "\n\n" + caption + "\n"


def describe_trl(record: dict[str, Any]) -> str:
    return describe(record, "trl.json", ("torch", "transformers", "trl", "datasets"))


def trl_table(section: str, size: str, unit: str) -> str:
    """TRL against fastcollate for one section of the TRL run: each case's time in `unit`
    ("µs" or "s") and TRL's time over fastcollate's."""
    record = load("trl.json")
    scale, digits = (1e6, 0) if unit == "µs" else (1.0, 3)
    lines = [
        f"| case | {size} | TRL | fastcollate | TRL's time over fastcollate's |",
        "|---|---|---|---|---|",
    ]
    for r in record["results"]:
        if r["section"] == section:
            lines.append(
                f"| {r['case']} | {r['size']:,} | {r['trl_seconds'] * scale:.{digits}f} {unit} | "
                f"{r['fastcollate_seconds'] * scale:.{digits}f} {unit} | "
                f"{ratio(r['speedup_vs_trl'])} |"
            )
    return "\n".join(lines)


def trl_collators_table() -> str:
    """TRL's collators against fastcollate's: µs per batch and the ratio."""
    record = load("trl.json")
    settings = record["arguments"]
    caption = (
        f"Microseconds per batch, best of {settings['repeat']} passes over {settings['batches']}"
        f" batches, torch on one thread. {describe_trl(record)}"
    )
    return "\n" + trl_table("collator", "batch", "µs") + "\n\n" + caption + "\n"


def trl_preparation_table() -> str:
    table = trl_table("preparation", "rows", "s")
    return "\n" + table + "\n\n" + describe_trl(load("trl.json")) + "\n"


def pinned_output_table() -> str:
    """Padding then copying each tensor into a second buffer in Python, against the native
    module copying its outputs into the buffers a provider gives (`bench_pinned_output.py`),
    per row format and batch size."""
    record = load("pinned_output_cpu.json")

    def micro(seconds: float) -> str:
        return f"{seconds * 1e6:.0f} µs"

    def saved(seconds: float) -> str:
        # Whole µs; a saving that rounds to nothing is 0, not "-0".
        return f"{round(seconds * 1e6) or 0} µs"

    lines = [
        "| rows | batch | output | owned (no copy, not pinned) | pad, then copy each tensor "
        "| copied into the provider's buffers | saved |",
        "|---" * 7 + "|",
    ]
    for r in record["results"]:
        s = r["seconds"]
        lines.append(
            f"| {r['format']} | {r['batch_size']} | {r['output_bytes'] / 1024:.0f} KiB "
            f"| {micro(s['owned'])} | {micro(s['pad_then_copy'])} | {micro(s['provider'])} "
            f"| {saved(r['saved_seconds'])} ({r['provider_over_pad_then_copy']:.2f}×) |"
        )
    return (
        "\n" + "\n".join(lines) + "\n\n"
        + describe(record, "pinned_output_cpu.json", ("torch",)) + "\n"
    )


def worker_handover_table() -> str:
    """The main process's CPU time per batch from DataLoader workers: fastcollate's arena
    against torch's own hand-over and against a loader with nothing to hand over, beside
    collating in the main process (`bench_worker_handover.py`)."""
    name = "worker_handover.json"
    record = load(name)
    words = {
        "main process": "none: the main process collates",
        "arena": "fastcollate's arena",
        "torch": "torch's own (`FASTCOLLATE_WORKER_SHARING=0`)",
        "no batch": "nothing to hand over (the DataLoader's own cost)",
    }
    lines = [
        "| workers | hand-over | main process CPU per batch | vs `num_workers=0` |",
        "|---|---|---|---|",
    ]
    for r in record["results"]:
        low, high = r["main_process_range_us"]
        lines.append(
            f"| {r['workers']} | {words[r['hand_over']]} | {r['main_process_us']:.0f} µs "
            f"({low:.0f}-{high:.0f}) | {r['over_no_workers']:.2f}× |"
        )
    settings = record["settings"]
    side = record["worker_side_us"]
    caption = (
        f"Batch {settings['batch_size']} of IMDB-like rows (50 to 500 tokens), "
        f"`{settings['collator']}`, persistent {settings['context']} workers; the median of "
        f"{settings['rounds']} epochs of {settings['batches']} batches (their range in "
        "brackets), all loaders in turn within each round. In a worker the collator takes "
        f"{side['collate']:.0f} µs a batch, {side['collate + arena copy']:.0f} µs with the "
        f"copy into the arena, {side['collate + share_memory_() of each tensor']:.0f} µs with "
        "torch's copy of each tensor into shared memory. "
        + describe(record, name, ("torch", "transformers"))
    )
    return "\n" + "\n".join(lines) + "\n\n" + caption + "\n"


def pack_dataset_table() -> str:
    record = load("trl.json")
    settings = record["arguments"]
    lines = [
        f"| rows | strategy | TRL | fastcollate, best of {settings['repeat']} | ratio | fill, TRL "
        "| fill, fastcollate | fastcollate's first call |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in record["results"]:
        if r["section"] != "pack_dataset":
            continue
        ran_trl = r["trl_seconds"] is not None
        fill = r["fill"]
        lines.append(
            f"| {r['size']:,} | `{r['case']}` | "
            + (f"{r['trl_seconds']:.2f} s" if ran_trl else "–")
            + f" | {r['fastcollate_seconds']:.3f} s | "
            + (ratio(r["speedup_vs_trl"]) if ran_trl else "–")
            + " | "
            + ("–" if fill["trl"] is None else f"{fill['trl']:.2%}")
            + f" | {fill['fastcollate']:.2%} | {r['fastcollate_first_call_seconds']:.3f} s |"
        )
    return "\n" + "\n".join(lines) + "\n\n" + describe_trl(record) + "\n"


def span(values: list[float]) -> str:
    """`low–high×` (or one figure when they round alike)."""
    low, high = ratio(min(values)), ratio(max(values))
    return low if low == high else f"{low[:-1]}–{high}"


def speech_table() -> str:
    """Feature-extractor padding of raw audio (`bench --cases speech`): ms per batch of each
    method, with and without the attention mask, and what the figures amount to."""
    name = "speech.json"
    if not (RESULTS_DIR / name).exists():
        return pending(name)
    record = load(name)
    results = record["results"]
    lines = [
        "| batch | attention mask | samples a row | `fe.pad` | numpy loop | fastcollate | copy "
        "into preallocated buffers | `fe.pad` over fastcollate | numpy loop over fastcollate "
        "| fastcollate over the copy |",
        "|---" * 10 + "|",
    ]
    for r in results:
        lines.append(
            f"| {r['batch_size']} | {'yes' if r['attention_mask'] else 'no'} | "
            f"{r['samples']:,} | {milliseconds(r['transformers_ms'])} | "
            f"{milliseconds(r['numpy_loop_ms'])} | {milliseconds(r['fastcollate_ms'])} | "
            f"{milliseconds(r['copy_ms'])} | {ratio(r['speedup'])} | "
            f"{ratio(r['vs_numpy_loop'])} | {ratio(r['over_copy'])} |"
        )
    without = [r for r in results if not r["attention_mask"]]
    with_mask = [r for r in results if r["attention_mask"]]
    loop = [r["vs_numpy_loop"] for r in results]
    if min(loop) >= 1.25:
        versus_loop = f"{span(loop)} faster than the numpy loop"
    elif max(loop) <= 0.8:
        versus_loop = f"slower than the numpy loop (its time over ours: {span(loop)})"
    elif min(loop) >= 0.8 and max(loop) <= 1.25:
        versus_loop = f"about as fast as the numpy loop (its time over ours: {span(loop)})"
    else:
        versus_loop = (
            f"now faster, now slower than the numpy loop (its time over ours: {span(loop)})"
        )
    faster_with = min(r["speedup"] for r in with_mask) > max(r["speedup"] for r in without)
    summary = (
        f"In words: `fastcollate.pad` of raw audio is {versus_loop}, takes "
        f"{span([r['over_copy'] for r in results])} the time of copying its output into "
        f"buffers allocated beforehand, and is {span([r['speedup'] for r in without])} faster "
        f"than `fe.pad` without attention masks, {span([r['speedup'] for r in with_mask])} "
        "with them" + (", where `fe.pad` slows down." if faster_with else ".")
    )
    caption = (
        f"Median of {record['arguments']['repeat']} calls on the same clips. "
        + describe(record, name, ("numpy", "transformers"))
    )
    return "\n" + "\n".join(lines) + "\n\n" + summary + "\n\n" + caption + "\n"


def gpu_records() -> list[tuple[str, dict[str, Any]]]:
    """(file name, record) of every GPU results file, each checked to be from a GPU run of
    full-size models (a CPU check's record is refused, not published)."""
    records = []
    for path in sorted(RESULTS_DIR.glob(GPU_RESULTS)):
        record = json.loads(path.read_text("utf-8"))
        device = record.get("device", {})
        if device.get("type") != "cuda" or record.get("settings", {}).get("tiny"):
            raise ValueError(f"{path.name}: not a GPU run of full-size models; remove it")
        records.append((path.name, record))
    return records


GPU_LABELS = {
    "trainer/bert/transformers-padded/w0": (
        "BERT-base", "`transformers.Trainer` + transformers' `DataCollatorWithPadding`"),
    "fastcollate-trainer/bert/fastcollate-padded/w0": (
        "BERT-base", "`fastcollate.Trainer` (Arrow batches, pinned output in place)"),
    "trainer/lm/transformers-padded/w0": (
        "~0.5B causal LM", "`transformers.Trainer`, padded"),
    "fastcollate-trainer/lm/fastcollate-padded/w0": (
        "~0.5B causal LM", "`fastcollate.Trainer`, padded"),
    "fastcollate-trainer/lm/fastcollate-packed/w0": (
        "~0.5B causal LM", "`fastcollate.Trainer`, packed"),
}


def gpu_table() -> str:
    """Each GPU results file: steps/s, tokens/s, data-wait and padding shares per loop, and
    the ratio to transformers.Trainer on the same task; or, with none, how to produce one."""
    records = gpu_records()
    if not records:
        return (
            "\n_Pending: no GPU results file yet (`benches/results/gpu_<device>.json`). On a "
            "machine with network, `bash benches/gpu_wheels.sh` fills `.gpu_wheels/` (git-ignored: "
            "send it with the tree); on the GPU machine, one command, at most 8 minutes: "
            f"`{GPU_COMMAND}`; then `python benches/render_figures.py`._\n"
        )
    parts = []
    for name, record in records:
        settings, env = record["settings"], record["environment"]
        ok = [r for r in record["results"] if r["status"] == "ok"]
        reference = {r["task"]: r for r in ok if r["loop"] == "trainer"}
        lines = [
            "| model | loop | steps/s | real tokens/s | data wait | padding | tokens/s vs "
            "`transformers.Trainer` |",
            "|---" * 7 + "|",
        ]
        for r in ok:
            model, loop = GPU_LABELS.get(r["name"], (r["task"], r["name"]))
            base = reference.get(r["task"])
            versus = ratio(r["tokens_per_s"] / base["tokens_per_s"]) if base else "–"
            lines.append(
                f"| {model} | {loop} | {r['steps_per_s']:.2f} | {r['tokens_per_s']:,.0f} | "
                f"{r['data_wait_share']:.1%} | {r['padding_share']:.1%} | {versus} |"
            )
        skipped = [r["name"] for r in record["results"] if r["status"] != "ok"]
        device = record["device"]
        caption = (
            f"{device['name']} ({device.get('memory_gib')} GiB, CUDA {device.get('cuda')}), "
            f"batch {settings['batch_size']}, {settings['steps']} measured steps after "
            f"{settings['warmup']}, bf16, `dataloader_num_workers=0`; packed: a budget of "
            f"{settings['packed_tokens_per_row']} tokens per row of the padded batch. "
            f"Measured {env['date'][:10]}, CPython {env['python']}, torch {env['torch']}, "
            f"transformers {env['transformers']}, accelerate {env['accelerate']}, fastcollate "
            f"{env['fastcollate']} ({env['build_profile']} build): `{GPU_COMMAND}` "
            f"(`benches/results/{name}`)."
            + (f" Not run (out of time): {', '.join(skipped)}." if skipped else "")
        )
        tests = record.get("tests")
        if tests:
            caption += f" The pinned-output tests on CUDA, first: {tests['summary']}."
        image = f"![{device['name']}: real tokens/s per loop](img/{gpu_plot_path(name).name})"
        parts.append("\n".join(lines) + "\n\n" + caption + "\n\n" + image)
    return "\n" + "\n\n".join(parts) + "\n"


def gpu_line() -> str:
    """One sentence for the README from the first GPU results file: BERT-base steps/s and
    data-wait share, transformers.Trainer against fastcollate.Trainer."""
    records = gpu_records()
    if records:
        name, record = records[0]
        by_name = {r["name"]: r for r in record["results"] if r["status"] == "ok"}
        theirs = by_name.get("trainer/bert/transformers-padded/w0")
        ours = by_name.get("fastcollate-trainer/bert/fastcollate-padded/w0")
        if theirs and ours:
            return (
                f"on an {record['device']['name']}, BERT-base at batch "
                f"{record['settings']['batch_size']} trains at {ours['steps_per_s']:.2f} steps/s "
                f"in `fastcollate.Trainer` against {theirs['steps_per_s']:.2f} in "
                f"`transformers.Trainer` with its collator (waiting for data "
                f"{ours['data_wait_share']:.1%} of a step against "
                f"{theirs['data_wait_share']:.1%}; `benches/results/{name}`)"
            )
    return f"pending a run of `{GPU_COMMAND}` on a GPU machine"


RENDERERS: dict[str, Callable[[], str]] = {
    "gpu-line": gpu_line,
    "gpu": gpu_table,
    "speech": speech_table,
    "trl-collators": trl_collators_table,
    "trl-preparation": trl_preparation_table,
    "pack-dataset": pack_dataset_table,
    "pinned-output": pinned_output_table,
    "worker-handover": worker_handover_table,
    "headline": headline,
    "quick-seconds": quick_seconds,
    "build-time": build_time,
    "tests-time": tests_time,
    "with-padding": with_padding_table,
    "collators": collators_table,
    "floor": floor_table,
    "large-batches": large_batches_table,
    "sampling": sampling_table,
}


def render_page(text: str) -> str:
    """The page with every region replaced by its renderer's output; an unknown region name
    raises KeyError."""

    def replace(match: re.Match) -> str:
        name = match.group(2)
        if name not in RENDERERS:
            raise KeyError(f"no renderer for the figures region {name!r}")
        return match.group(1) + RENDERERS[name]() + match.group(4)

    return REGION.sub(replace, text)


def outdated_pages() -> list[Path]:
    """The pages whose figures differ from what the results files give."""
    return [
        page for page in PAGES if render_page(page.read_text("utf-8")) != page.read_text("utf-8")
    ]


def draw_plot(path: Path = PLOT) -> None:
    """The speed-up plot of the full collator run (`collators.json`)."""
    from fastcollate.bench import report
    from fastcollate.bench.timing import Result

    record = load("collators.json")
    results = [
        Result(
            r["case"],
            r["format"],
            r["batch_size"],
            {k: v / 1e3 for k, v in r["ms_per_batch"].items()},
        )
        for r in record["results"]
    ]
    env = record["environment"]
    basis = "fresh batches" if is_fresh(record) else "the same batches reused (cached)"
    title = (
        f"fastcollate's speed-up over transformers on {basis} (ms per batch ratio, higher is "
        "better)\n"
        + report.machine_description(env).replace("\n", ", ")
        + f"\nmeasured {env['date'][:10]}, load average {env.get('load_average')}: "
        + env["command"]
    )
    report.plot_speedups(results, str(path), title, {"Source": source_digest(["collators.json"])})


def source_digest(names: list[str]) -> str:
    """What a plot is drawn from: the results files' names and a hash of their bytes,
    written into the PNG so that --check can tell a plot drawn from other figures."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (RESULTS_DIR / name).read_bytes())
    return f"{', '.join(names)} sha256:{digest.hexdigest()[:16]}"


def png_text(path: Path) -> dict[str, str]:
    """The tEXt chunks of a PNG file (empty when there is no file)."""
    if not path.exists():
        return {}
    data = path.read_bytes()
    found, at = {}, 8  # after the signature: length, type, data, CRC per chunk
    while at + 8 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind = data[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, value = data[at + 8 : at + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        at += 12 + length
    return found


def gpu_plot_path(name: str) -> Path:
    return PLOT.parent / (Path(name).stem + ".png")


def draw_gpu_plot(name: str, record: dict[str, Any]) -> None:
    """Real tokens/s per loop, a panel per model, the data-wait share on each bar."""
    from fastcollate.bench import report

    plt = report.pyplot()
    ok = [r for r in record["results"] if r["status"] == "ok"]
    tasks = list(dict.fromkeys(r["task"] for r in ok))
    fig, axes = plt.subplots(
        len(tasks), 1, figsize=(8, 1.6 + 1.1 * len(ok)), squeeze=False, layout="constrained"
    )
    for ax, task in zip(axes.flat, tasks, strict=True):
        rows = [r for r in ok if r["task"] == task]
        labels = [GPU_LABELS.get(r["name"], (task, r["name"]))[1].replace("`", "") for r in rows]
        colors = ["C0" if r["loop"] == "trainer" else "C1" for r in rows]
        bars = ax.barh(range(len(rows)), [r["tokens_per_s"] for r in rows], color=colors)
        ax.bar_label(
            bars,
            labels=[f"data wait {r['data_wait_share']:.0%}, padding {r['padding_share']:.0%}"
                    for r in rows],
            fontsize=7,
        )
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("real tokens/s")
        ax.set_title(GPU_LABELS.get(rows[0]["name"], (task, ""))[0], fontsize=9)
    settings = record["settings"]
    fig.suptitle(
        f"{record['device']['name']}: batch {settings['batch_size']}, {settings['steps']} "
        f"steps, bf16 ({record['environment']['date'][:10]})",
        fontsize=9,
    )
    fig.savefig(gpu_plot_path(name), dpi=120, metadata={"Source": source_digest([name])})
    plt.close(fig)


def plots() -> dict[Path, tuple[list[str], Callable[[], None]]]:
    """Every plot: the results files it is drawn from and what draws it."""
    found: dict[Path, tuple[list[str], Callable[[], None]]] = {
        PLOT: (["collators.json"], draw_plot)
    }
    for name, record in gpu_records():
        found[gpu_plot_path(name)] = ([name], lambda n=name, r=record: draw_gpu_plot(n, r))
    return found


def outdated_plots() -> list[Path]:
    """The plots not drawn from the results files as they are now."""
    return [
        path
        for path, (names, _) in plots().items()
        if png_text(path).get("Source") != source_digest(names)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a page is out of date"
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument(
        "--run",
        nargs="?",
        const=",".join(RESULTS),
        default=None,
        metavar="FILE,...",
        help="first rerun the commands that write these results files (default: all of "
        f"{', '.join(RESULTS)})",
    )
    args = parser.parse_args(argv)
    if args.run is not None:
        names = [n.strip() for n in args.run.split(",") if n.strip()]
        unknown = [n for n in names if n not in RESULTS]
        if unknown:
            parser.error(
                f"unknown results file(s) {', '.join(unknown)}; choose from {', '.join(RESULTS)}"
            )
        for name in names:
            # Run as printed, with this interpreter for `python`.
            command = shlex.split(RESULTS[name])
            print(f"+ {RESULTS[name]}", flush=True)
            started = time.perf_counter()
            subprocess.run([sys.executable, *command[1:]], cwd=ROOT, check=True)
            print(f"  {name}: {time.perf_counter() - started:.0f} s", flush=True)
    if args.check:
        outdated = outdated_pages() + outdated_plots()
        for page in outdated:
            print(
                f"{page.relative_to(ROOT)}: figures differ from benches/results/ (run "
                "python benches/render_figures.py)",
                file=sys.stderr,
            )
        return 1 if outdated else 0
    for page in PAGES:
        text = page.read_text("utf-8")
        rendered = render_page(text)
        if rendered != text:
            page.write_text(rendered, "utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    if not args.no_plot:
        for path, (_, draw) in plots().items():
            draw()
            print(f"drew {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
