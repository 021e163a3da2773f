"""What a run leaves: the table it prints, the JSON record (`--json`), the plot (`--plot`), and
the environment the figures depend on."""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from typing import Any

import numpy as np

import fastcollate

from .cases import short_name
from .timing import Result
from .workload import FORMATS, SEED


def milliseconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.4f}" if ms < 1 else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def speedup(value: float | None) -> str:
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


def _installed_version(distribution: str) -> str | None:
    # From the installed metadata: importing transformers to read its version takes seconds.
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """What the figures depend on: CPU, Python and library versions (None when a library is not
    installed), the build."""
    return {
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "torch": _installed_version("torch"),
        "transformers": _installed_version("transformers"),
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
                milliseconds(r.seconds["transformers"]),
                *[milliseconds(r.seconds.get(name)) for name in baseline_names],
                milliseconds(r.seconds["fastcollate"]),
                speedup(r.vs_transformers),
                speedup(r.vs_best_baseline),
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


def report(results: list[Result], repeat: int, env: dict[str, Any] | None = None) -> str:
    return (
        f"ms per batch (median of {repeat} runs; one torch thread, as in DataLoader workers)\n"
        f"{machine_description(env)}\n{format_table(results)}"
    )


def as_json(
    results: list[Result], repeat: int, env: dict[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    """Every figure of a run, what it ran on and how it was asked for, for `--json`."""
    return {
        "environment": env,
        "settings": {"repeat": repeat, "torch_threads": 1, "seed": SEED, "arguments": arguments},
        "results": [r.as_dict() for r in results],
    }


def write_json(record: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
        f.write("\n")


def pyplot():
    """matplotlib.pyplot on the Agg backend: files only, no window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_speedups(results: list[Result], path: str, title: str) -> None:
    """One panel per collator: fastcollate's speed-up over transformers by batch size, a bar
    per row format, on a log scale."""
    plt = pyplot()
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
            ax.bar_label(bars, labels=[speedup(y) if y == y else "" for y in ys], fontsize=7)
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
