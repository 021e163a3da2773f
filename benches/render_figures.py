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
import json
import re
import shlex
import subprocess
import sys
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
    "quick.json": "python -m fastcollate bench --quick --json benches/results/quick.json",
    "sampling.json": "python -m fastcollate bench --sampling --json benches/results/sampling.json",
    # needs `pip install '.[trl]' datasets` (CPython 3.11+)
    "trl.json": "python -m fastcollate bench --cases trl --json benches/results/trl.json",
    # without CUDA the buffers are ordinary memory (a GPU session runs it with --memory pinned)
    "pinned_output_cpu.json": "python benches/bench_pinned_output.py "
    "--json benches/results/pinned_output_cpu.json",
}

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
    """The lowest and highest speed-up of DataCollatorWithPadding at batch 32."""
    values = [v for (case, _, size), v in speedups(load("with_padding.json")).items() if size == 32]
    return f"{ratio(min(values))[:-1]}–{ratio(max(values))}"


def quick_seconds() -> str:
    return f"{load('quick.json')['environment']['wall_seconds']:.0f} seconds"


def with_padding_table() -> str:
    """DataCollatorWithPadding's speed-up per row format and batch size, and its own time at
    the largest batch size."""
    record = load("with_padding.json")
    by_key = {(r["format"], r["batch_size"]): r for r in record["results"]}
    sizes = sorted({size for _, size in by_key})
    largest = sizes[-1]
    lines = [
        "| rows | " + " | ".join(f"batch {s}" for s in sizes) + f" | fastcollate at batch "
        f"{largest} | vs best hand-written loop at batch {largest} |",
        "|---" * (len(sizes) + 3) + "|",
    ]
    for fmt, words in FORMAT_NAMES.items():
        if (fmt, largest) not in by_key:
            continue
        cells = [ratio(by_key[fmt, s]["speedup_vs_transformers"]) for s in sizes]
        cells[-1] = f"**{cells[-1]}**"
        last = by_key[fmt, largest]
        ours = milliseconds(last["ms_per_batch"]["fastcollate"])
        lines.append(
            f"| {words} | "
            + " | ".join(cells)
            + f" | {ours} | {ratio(last['speedup_vs_best_baseline'])} |"
        )
    return "\n" + "\n".join(lines) + "\n\n" + describe(record, "with_padding.json") + "\n"


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
    return "\n" + "\n".join(lines) + "\n\n" + describe(record, "collators.json") + "\n"


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
    return "\n" + "\n".join(lines) + "\n"


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
    """Padding then copying into a second buffer, against padding straight into the buffers a
    provider gives (`bench_pinned_output.py`), per row format and batch size."""
    record = load("pinned_output_cpu.json")

    def micro(seconds: float) -> str:
        return f"{seconds * 1e6:.0f} µs"

    lines = [
        "| rows | batch | output | owned (no copy, not pinned) | pad, then copy | into the buffer "
        "| saved |",
        "|---" * 7 + "|",
    ]
    for r in record["results"]:
        s = r["seconds"]
        lines.append(
            f"| {r['format']} | {r['batch_size']} | {r['output_bytes'] / 1024:.0f} KiB "
            f"| {micro(s['owned'])} | {micro(s['pad_then_copy'])} | {micro(s['provider'])} "
            f"| {micro(r['saved_seconds'])} ({r['provider_over_pad_then_copy']:.2f}×) |"
        )
    return (
        "\n" + "\n".join(lines) + "\n\n"
        + describe(record, "pinned_output_cpu.json", ("torch",)) + "\n"
    )


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


RENDERERS: dict[str, Callable[[], str]] = {
    "trl-collators": trl_collators_table,
    "trl-preparation": trl_preparation_table,
    "pack-dataset": pack_dataset_table,
    "pinned-output": pinned_output_table,
    "headline": headline,
    "quick-seconds": quick_seconds,
    "with-padding": with_padding_table,
    "collators": collators_table,
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
    title = (
        "fastcollate's speed-up over transformers (ms per batch ratio, higher is better)\n"
        + report.machine_description(env).replace("\n", ", ")
        + f"\nmeasured {env['date'][:10]}, load average {env.get('load_average')}: "
        + env["command"]
    )
    report.plot_speedups(results, str(path), title)


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
            subprocess.run([sys.executable, *command[1:]], cwd=ROOT, check=True)
    if args.check:
        outdated = outdated_pages()
        for page in outdated:
            print(
                f"{page.relative_to(ROOT)}: figures differ from benches/results/", file=sys.stderr
            )
        return 1 if outdated else 0
    for page in PAGES:
        text = page.read_text("utf-8")
        rendered = render_page(text)
        if rendered != text:
            page.write_text(rendered, "utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    if not args.no_plot:
        draw_plot()
        print(f"drew {PLOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
