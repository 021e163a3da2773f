"""What a run leaves: the table it prints, the JSON record (`--json`), the plot (`--plot`), and
the environment the figures depend on."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from importlib import metadata
from typing import Any

import numpy as np

import fastcollate

from .cases import short_name
from .floor import FLOOR_BASIS, TORCH_FLOOR_BASIS
from .timing import CACHED_BATCHES, POOL_ROWS, Result
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


def installed_version(distribution: str) -> str | None:
    # From the installed metadata: importing transformers to read its version takes seconds.
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def command_line(argv: list[str] | None = None) -> str:
    """The command that started this process, as a user would type it: `python -m fastcollate
    ...` for the package's command line, `python SCRIPT ...` for a script."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or not argv[0]:
        return "python"
    script = argv[0]
    if script.endswith(os.path.join("fastcollate", "__main__.py")):
        return shlex.join(["python", "-m", "fastcollate", *argv[1:]])
    if os.path.isabs(script):
        try:
            script = os.path.relpath(script)
        except ValueError:  # another drive (Windows)
            pass
    return shlex.join(["python", script, *argv[1:]])


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def environment() -> dict[str, Any]:
    """What the figures depend on: CPU, Python and library versions (None when a library is not
    installed), the build; and the run: its command, the date (UTC) and the load average when
    it ended."""
    return {
        "command": command_line(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_average": load_average(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "torch": installed_version("torch"),
        "transformers": installed_version("transformers"),
        "fastcollate": fastcollate.__version__,
        "build_profile": fastcollate.build_profile,
    }


def machine_description(env: dict[str, Any] | None = None) -> str:
    """Two lines: the machine, then the versions the figures depend on."""
    env = env or environment()
    return (
        f"{env['cpu']}, {env['cpu_count']} CPUs, Python {env['python']}\n"
        f"numpy {env['numpy']}, torch {env['torch']}, transformers {env['transformers']}, "
        f"fastcollate {env['fastcollate']} ({env['build_profile']} build)"
    )


# How each basis was timed, in the report and the JSON record.
FRESH_BASIS = (
    "each call gets a batch built just before it, as a DataLoader's fetcher builds one (a new "
    "list of new row dicts), in turn from a pool of distinct batches; only the call is timed, "
    "its fixed cost included"
)
CACHED_BASIS = "the same batches reused in turn while they stay in cache"

# A method's repeats disagreeing by more than this share of their median makes the report warn
# that the machine was busy and the figures are not to be trusted.
SPREAD_WARNING = 0.25
# Headers of the table: one block per collator (and per fastcollate variant), one line per row
# format and batch size. "baseline" is the faster hand-written baseline of the collator.
HEADERS = ["rows", "batch", "transformers", "baseline", "fastcollate", "vs transformers"]
HEADERS += ["vs baseline", "cached"]


def _variants(results: list[Result]) -> list[str]:
    """The fastcollate variants the results hold ("fastcollate mask_rng=..."), in order."""
    names: list[str] = []
    for r in results:
        names += [n for n in r.seconds if n.startswith("fastcollate ") and n not in names]
    return names


def _block(results: list[Result], method: str) -> list[list[str]]:
    lines = []
    for r in results:
        ours = r.seconds[method]
        best = r.best_baseline
        lines.append(
            [
                r.format,
                str(r.batch_size),
                milliseconds(r.seconds["transformers"]),
                milliseconds(best),
                milliseconds(ours),
                speedup(r.seconds["transformers"] / ours),
                speedup(None if best is None else best / ours),
                speedup(_cached_ratio(r, method)),
            ]
        )
    return lines


def _cached_ratio(r: Result, method: str) -> float | None:
    """transformers' time over `method`'s on the cached basis (None when not timed)."""
    cached = r.cached_seconds
    if "transformers" not in cached or method not in cached:
        return None
    return cached["transformers"] / cached[method]


def format_table(results: list[Result]) -> str:
    """ms per batch, one block per collator: a heading line (the collator, and for a
    fastcollate variant such as `mask_rng="torch"` what it is), then a line per row format and
    batch size. Lines stay within 100 columns."""
    blocks: list[tuple[str, list[list[str]]]] = []
    for case in dict.fromkeys(r.case for r in results):
        case_results = [r for r in results if r.case == case]
        baselines = [
            n
            for n in dict.fromkeys(k for r in case_results for k in r.seconds)
            if n != "transformers" and not n.startswith("fastcollate")
        ]
        heading = short_name(case)
        if baselines:
            heading += f" (baseline: the faster of {' and '.join(baselines)})"
        blocks.append((heading, _block(case_results, "fastcollate")))
        for variant in _variants(case_results):
            option = variant.removeprefix("fastcollate ")
            blocks.append(
                (
                    f"{short_name(case)}, {option}: torch's generator draws the masks, as in "
                    "transformers",
                    _block(case_results, variant),
                )
            )
    return "\n".join(_aligned(HEADERS, blocks))


def _aligned(headers: list[str], blocks: list[tuple[str, list[list[str]]]]) -> list[str]:
    """The lines of a table: `headers`, a rule, then each block's heading and its rows, every
    column as wide as its widest cell (the first left-aligned, the others right-aligned)."""
    rows = [line for _, lines in blocks for line in lines]
    widths = [max(len(h), *(len(line[i]) for line in rows)) for i, h in enumerate(headers)]

    def render(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [render(headers), render(["-" * w for w in widths])]
    for heading, lines in blocks:
        out.append(heading)
        out += [render(line) for line in lines]
    return out


FLOOR_HEADERS = [
    "rows", "batch", "fastcollate", "floor", "fastcollate / floor", "through torch", "/ that",
]  # fmt: skip


def floor_table(results: list[Result]) -> str:
    """How far from the limit: fastcollate's ms per batch beside the floor's for the same rows
    in the same run, and their ratio, one block per collator that has a floor; then the
    collators without one, named. Empty when no result has a floor."""
    cases = list(dict.fromkeys(r.case for r in results))
    with_floor = [
        c for c in cases if any(r.case == c and r.floor_seconds is not None for r in results)
    ]
    if not with_floor:
        return ""
    blocks = []
    for case in with_floor:
        lines = [
            [
                r.format,
                str(r.batch_size),
                milliseconds(r.seconds["fastcollate"]),
                milliseconds(r.floor_seconds),
                "-" if r.vs_floor is None else f"{r.vs_floor:.2f}x",
                "-" if r.torch_floor_seconds is None else milliseconds(r.torch_floor_seconds),
                "-" if r.vs_torch_floor is None else f"{r.vs_torch_floor:.2f}x",
            ]
            for r in results
            if r.case == case
        ]
        blocks.append((short_name(case), lines))
    out = [
        _wrap(
            f"How far from the limit, ms per batch. The floor is {FLOOR_BASIS}. For torch rows, "
            f"the floor through torch ('through torch', and fastcollate's time over it) is "
            f"{TORCH_FLOOR_BASIS}."
        ),
        *_aligned(FLOOR_HEADERS, blocks),
    ]
    without = [short_name(c) for c in cases if c not in with_floor]
    if without:
        out.append(_wrap(f"No floor is defined for {', '.join(without)}."))
    return "\n".join(out)


def checked_summary(results: list[Result]) -> str:
    """What was checked against transformers' output before anything was timed."""
    cases = list(dict.fromkeys(r.case for r in results))
    partial = {r.case: r.checked for r in results if r.checked != "equal"}
    exact = [short_name(c) for c in cases if c not in partial]
    lines = [
        "Checked before timing: each configuration gave transformers' output "
        "(keys, values, shapes, dtypes)" + (":" if partial else ".")
    ]
    if partial:
        lines.append(f"  equal: {', '.join(exact) or 'none'}")
        for case, what in partial.items():
            lines.append(f"  not comparable value for value: {short_name(case)}, where {what}")
    return "\n".join(_wrap(line) for line in lines)


def _wrap(line: str, width: int = 100) -> str:
    import textwrap

    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(line, width, subsequent_indent=indent)


def load_warnings(
    results: list[Result], load: float | None, cpus: int | None, margin: float = SPREAD_WARNING
) -> list[str]:
    """Warnings that the figures are unreliable: a load average above the CPU count, and the
    configurations whose repeats disagreed by more than `margin` of their median."""
    warnings = []
    if load is not None and cpus and load > cpus:
        warnings.append(
            f"warning: the load average ({load:.1f}) exceeds the {cpus} CPUs: other work was "
            "running, so the figures are lower and noisier than on a quiet machine"
        )
    noisy = [
        f"{short_name(r.case)} [{r.format}, batch {r.batch_size}]"
        for r in results
        if any(r.spread.get(m, 0.0) > margin for m in ("transformers", "fastcollate"))
        or (r.floor_spread or 0.0) > margin
        or (r.torch_floor_spread or 0.0) > margin
    ]
    if noisy:
        shown = ", ".join(noisy[:4]) + (f" and {len(noisy) - 4} more" if len(noisy) > 4 else "")
        warnings.append(
            f"warning: the repeats disagreed by more than {margin:.0%} in {len(noisy)} of "
            f"{len(results)} configurations ({shown}): the machine was busy; rerun on a quiet "
            "machine for figures to publish"
        )
    return [_wrap(w) for w in warnings]


def report(results: list[Result], repeat: int, env: dict[str, Any] | None = None) -> str:
    env = env or environment()
    pools = sorted({r.pool_batches for r in results if r.pool_batches})
    pool = "-".join(map(str, pools[:: max(len(pools) - 1, 1)])) if pools else "?"
    parts = [
        _wrap(
            f"ms per batch (median of {repeat} runs; one torch thread, as in DataLoader "
            f"workers): {FRESH_BASIS} ({pool} distinct batches). cached: transformers' time "
            f"over fastcollate's on {CACHED_BATCHES} batches, {CACHED_BASIS}."
        ),
        machine_description(env),
        format_table(results),
        "",
    ]
    floors = floor_table(results)
    if floors:
        parts += [floors, ""]
    parts += [checked_summary(results)]
    if floors:
        parts.append(
            _wrap(
                "The floor's output was checked equal to fastcollate's (keys, shapes, values) on "
                "every batch it is timed on."
            )
        )
    parts += load_warnings(results, env.get("load_average"), env.get("cpu_count"))
    return "\n".join(parts)


def as_json(
    results: list[Result],
    repeat: int,
    env: dict[str, Any],
    arguments: dict[str, Any],
    pool_rows: int = POOL_ROWS,
) -> dict[str, Any]:
    """Every figure of a run, what it ran on, how it was asked for and on what basis it was
    timed, for `--json`."""
    return {
        "environment": env,
        "settings": {
            "repeat": repeat,
            "torch_threads": 1,
            "seed": SEED,
            "arguments": arguments,
            "basis": {
                "fresh": {"pool_rows": pool_rows, "description": FRESH_BASIS},
                "cached": {"batches": CACHED_BATCHES, "description": CACHED_BASIS},
                "floor": {"description": FLOOR_BASIS},
                "torch_floor": {"description": TORCH_FLOOR_BASIS},
            },
        },
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


def plot_speedups(
    results: list[Result], path: str, title: str, metadata: dict[str, str] | None = None
) -> None:
    """One panel per collator: fastcollate's speed-up over transformers by batch size, a bar
    per row format, on a log scale. `metadata`: text chunks for the PNG file."""
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
    fig.savefig(path, dpi=120, metadata=metadata)
    plt.close(fig)
