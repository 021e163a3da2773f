"""The command line: `python -m fastcollate [--version] bench [options]`.

Every option is checked before any work starts, the output files included: a wrong one is a
usage error (exit code 2), a missing extra or a debug build exit code 1, each as one
`error: ...` line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Sequence

import fastcollate
from fastcollate._internal.extras import install_command, require

from . import report, sampling, timing
from .cases import CASES, resolve_cases, short_name
from .errors import BenchError
from .workload import FORMATS

QUICK_BATCH_SIZES = (8, 32)
# --quick draws its fresh batches from a smaller pool (50 batches of 32), so its check of every
# pool batch stays short.
QUICK_POOL_ROWS = 1_600
# `--cases trl`: TRL's collators, dataset preparation and pack_dataset (trl_suite) instead of
# transformers' collators.
TRL = "trl"
TRL_BATCH_SIZES = (8, 32)
# `--cases speech`: feature-extractor padding of raw audio (speech_suite).
SPEECH = "speech"
SPEECH_BATCH_SIZES = (8, 32)
REPEAT, QUICK_REPEAT = 7, 3
# Options that only one mode reads; giving one in the other mode is a usage error.
COLLATOR_OPTIONS = ("formats", "repeat", "cases")
SAMPLING_OPTIONS = ("rows", "grad_accum", "world_size", "max_tokens", "no_transformers")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of ints: {text!r}") from err
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("batch sizes must be positive integers")
    return values


def _format_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in values if v not in FORMATS]
    if not values or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown row format(s) {', '.join(unknown) or repr(text)}; "
            f"choose from {','.join(FORMATS)}"
        )
    return values


def _case_list(text: str) -> list[str]:
    if text.strip().lower() == TRL:
        return [TRL]
    if text.strip().lower() == SPEECH:
        return [SPEECH]
    try:
        return resolve_cases([v.strip() for v in text.split(",") if v.strip()])
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


class _DeprecatedBatchSize(argparse.Action):
    """`--batch-size N`, the sampling benchmark's old flag: warns, then acts as
    `--batch-sizes N`."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"{parser.prog}: warning: {option_string} is deprecated; use --batch-sizes {values}",
            file=sys.stderr,
        )
        namespace.batch_sizes = [values]


def _count(group: argparse._ArgumentGroup, flag: str, help: str) -> None:
    """A positive whole-number option, None when not given (its default depends on the mode
    or on --quick, and validate() tells a given one from a default)."""
    group.add_argument(flag, type=_positive_int, default=None, metavar="N", help=help)


def add_bench_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `python -m fastcollate bench`, each help text ending in its default."""
    parser.description = (
        "Time fastcollate against transformers' collators and hand-written baselines on the "
        "same batches (ms per batch; each call gets a batch built fresh, as a DataLoader's "
        "fetcher builds one, from a pool of distinct batches; the same few batches reused "
        "are timed beside it, as the cached case), or with --sampling the training samplers "
        "(real tokens per batch, seconds per epoch). Needs transformers and torch: "
        f"{install_command('transformers')}."
    )
    sizes = ",".join(map(str, timing.DEFAULT_BATCH_SIZES))
    quick_sizes = ",".join(map(str, QUICK_BATCH_SIZES))
    both = parser.add_argument_group("both modes")
    both.add_argument(
        "--sampling",
        action="store_true",
        help="time the training samplers instead of the collators (default: off)",
    )
    both.add_argument(
        "--quick",
        action="store_true",
        help=(
            f"a first look: all {len(CASES)} collators x {len(FORMATS)} row formats x batch "
            f"sizes {quick_sizes} ({len(CASES) * len(FORMATS) * len(QUICK_BATCH_SIZES)} "
            f"configurations), {QUICK_REPEAT} shorter runs each; the run prints how long it "
            f"took. With --sampling, {sampling.QUICK_ROWS:,} rows per distribution "
            "(default: off)"
        ),
    )
    both.add_argument(
        "--batch-sizes",
        type=_int_list,
        default=None,
        metavar="N,N,...",
        help=(
            f"batch sizes to time (default: {sizes}; with --quick: {quick_sizes}); with "
            "--sampling, exactly one: the rows per batch (default: "
            f"{sampling.DEFAULT_BATCH_SIZE})"
        ),
    )
    both.add_argument(
        "--batch-size", type=_positive_int, action=_DeprecatedBatchSize, help=argparse.SUPPRESS
    )
    both.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="also write every figure, the settings and the environment to FILE (default: none)",
    )
    both.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="also draw the figures to FILE.png; needs matplotlib: "
        f"{install_command('plot')} (default: none)",
    )

    collators = parser.add_argument_group("collators (without --sampling)")
    collators.add_argument(
        "--formats",
        type=_format_list,
        default=None,
        metavar="F,F,...",
        help=f"row formats: {','.join(FORMATS)} (default: all)",
    )
    _count(
        collators,
        "--repeat",
        "timed runs per measurement, the median is reported "
        f"(default: {REPEAT}; with --quick: {QUICK_REPEAT})",
    )
    collators.add_argument(
        "--cases",
        type=_case_list,
        default=None,
        metavar="NAME,...",
        help=(
            "collators to time, by the short name the table prints or the full class name: "
            f"{', '.join(short_name(c.name) for c in CASES)} (default: all); or `trl` alone: "
            "TRL's collators, SFT dataset preparation and pack_dataset against fastcollate's "
            f"(batch sizes {','.join(map(str, TRL_BATCH_SIZES))} unless given; needs the trl "
            "extra and datasets); or `speech` alone: "
            "Wav2Vec2FeatureExtractor.pad of 1-16 s clips against fastcollate.pad and a plain "
            f"copy of the output (batch sizes {','.join(map(str, SPEECH_BATCH_SIZES))} unless "
            "given)"
        ),
    )

    defaults = sampling.SamplingSettings()
    samplers = parser.add_argument_group("samplers (with --sampling)")
    _count(
        samplers,
        "--rows",
        f"lengths drawn per distribution (default: {defaults.rows:,}; with --quick: "
        f"{sampling.QUICK_ROWS:,})",
    )
    _count(
        samplers,
        "--grad-accum",
        "gradient accumulation steps: group_by_length's mega-batches and "
        f"batch_rebalance's micro-batches per step (default: {defaults.grad_accum})",
    )
    _count(
        samplers,
        "--world-size",
        f"ranks batch_rebalance balances across (default: {defaults.world_size})",
    )
    _count(
        samplers,
        "--max-tokens",
        f"token budget per packed batch (default: {defaults.max_tokens})",
    )
    samplers.add_argument(
        "--no-transformers",
        action="store_true",
        help="do not time transformers' samplers or check fastcollate's against them "
        "(default: both, when transformers is installed)",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    """`python -m fastcollate`: `--version`, and the `bench` command."""
    parser = argparse.ArgumentParser(
        prog="python -m fastcollate",
        description="fastcollate: drop-in, Rust-fast data collators for transformers.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile} build)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = add_bench_arguments(
        commands.add_parser("bench", help="time fastcollate against transformers' collators")
    )
    bench.set_defaults(handler=lambda args: run_bench(bench, args))
    return parser


def cannot_write(path: str) -> str | None:
    """Why `path` cannot be written, or None. Tries it, and leaves no new file behind."""
    if os.path.isdir(path):
        return "it is a directory"
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        return err.strerror or str(err)
    if not existed:
        os.remove(path)
    return None


def plot_format_problem(path: str) -> str | None:
    """Why matplotlib would not write a picture to `path` (judged by its extension), or None.
    Without matplotlib, None: the missing extra is reported with its install command."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    supported = FigureCanvasBase.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix in supported:
        return None
    # Without an extension matplotlib would save to `path + ".png"`, not to `path`.
    return f"{path!r} needs a picture file extension: " + ", ".join(
        "." + s for s in sorted(supported)
    )


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors argparse cannot see: options the mode does not read, more than one batch
    size for --sampling, output files that cannot be written. Exits with 2 on the first."""
    if args.sampling:
        stray = [_flag(name) for name in COLLATOR_OPTIONS if getattr(args, name) is not None]
        if stray:
            parser.error(f"{', '.join(stray)}: only without --sampling")
        if args.batch_sizes is not None and len(args.batch_sizes) != 1:
            sizes = ",".join(map(str, args.batch_sizes))
            parser.error(f"--sampling takes one batch size (the rows per batch), got {sizes}")
    else:
        given = [name for name in SAMPLING_OPTIONS if getattr(args, name) not in (None, False)]
        stray = [_flag(name) for name in given]
        if stray:
            parser.error(f"{', '.join(stray)}: only with --sampling")
    for option in ("json", "plot"):
        path = getattr(args, option)
        if path is not None:
            reason = cannot_write(path)
            if reason is not None:
                parser.error(f"argument --{option}: cannot write {path!r}: {reason}")
    for alone in (TRL, SPEECH):
        if args.cases == [alone]:
            stray = [_flag(name) for name in ("formats", "plot")
                     if getattr(args, name) is not None]
            if stray:
                parser.error(f"{', '.join(stray)}: not with --cases {alone}")
    if args.plot is not None:
        problem = plot_format_problem(args.plot)
        if problem is not None:
            parser.error(f"argument --plot: {problem}")


def _require_extras(args: argparse.Namespace) -> None:
    """A BenchError with the install command when what the run needs cannot be imported,
    before any work is done."""
    try:
        if args.sampling:
            require("`python -m fastcollate bench --sampling`", "torch", "torch")
        elif args.cases == [TRL]:
            require("`python -m fastcollate bench --cases trl`", "trl", "trl", "datasets")
        else:
            require("`python -m fastcollate bench`", "transformers", "torch", "transformers")
        if args.plot is not None:
            require("--plot", "plot", "matplotlib")
    except ImportError as err:
        raise BenchError(str(err)) from None


class Progress:
    """Prints each finished measurement to stderr as `[done/total] ...`."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0

    def __call__(self, line: str) -> None:
        if line.startswith("skip "):
            print(line, file=sys.stderr, flush=True)
            return
        self.done += 1
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {line}", file=sys.stderr, flush=True)


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_collators(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    batch_sizes = args.batch_sizes or list(
        QUICK_BATCH_SIZES if args.quick else timing.DEFAULT_BATCH_SIZES
    )
    formats = args.formats or list(FORMATS)
    repeat = args.repeat or (QUICK_REPEAT if args.quick else REPEAT)
    selected = [c for c in CASES if (args.cases is None or c.name in args.cases) and c.available]
    with warnings.catch_warnings():
        # transformers warns that tensors from lists of arrays are slow; that is what is timed.
        warnings.simplefilter("ignore")
        results = timing.run(
            batch_sizes,
            formats,
            repeat=repeat,
            min_seconds=0.02 if args.quick else 0.1,
            cases=args.cases,
            pool_rows=QUICK_POOL_ROWS if args.quick else timing.POOL_ROWS,
            progress=Progress(len(selected) * len(batch_sizes) * len(formats)),
        )
    env = report.environment()
    env["wall_seconds"] = round(time.perf_counter() - started, 1)
    print()
    print(report.report(results, repeat, env))
    print(f"took {env['wall_seconds']:.0f} s")
    if args.json is not None:
        arguments = {
            "quick": args.quick,
            "batch_sizes": batch_sizes,
            "formats": formats,
            "repeat": repeat,
            "cases": args.cases,
        }
        pool_rows = QUICK_POOL_ROWS if args.quick else timing.POOL_ROWS
        record = report.as_json(results, repeat, env, arguments, pool_rows)
        report.write_json(record, args.json)
        _note(f"figures written to {args.json}")
    if args.plot is not None:
        title = (
            "fastcollate's speed-up over transformers (ms per batch ratio, higher is better)\n"
            + report.machine_description(env)
        )
        report.plot_speedups(results, args.plot, title)
        _note(f"plot written to {args.plot}")
    return 0


def run_trl(args: argparse.Namespace) -> int:
    from . import trl_suite  # imports TRL, which only this mode needs

    batch_sizes = args.batch_sizes or list(TRL_BATCH_SIZES)
    settings = (
        trl_suite.TrlSettings.quick(batch_sizes, args.repeat or QUICK_REPEAT)
        if args.quick
        else trl_suite.TrlSettings(batch_sizes=batch_sizes, repeat=args.repeat or 5)
    )
    _note(trl_suite.header())
    results = trl_suite.run(settings, progress=_note)
    print()
    print(trl_suite.header())
    print(trl_suite.format_tables(results, settings))
    if args.json is not None:
        env = report.environment()
        env.update(
            trl=report.installed_version("trl"), datasets=report.installed_version("datasets")
        )
        record = {
            "environment": env,
            "arguments": {"quick": args.quick, "cases": [TRL], **dataclasses.asdict(settings)},
            "results": [r.as_dict() for r in results],
        }
        report.write_json(record, args.json)
        _note(f"figures written to {args.json}")
    return 0


def run_speech(args: argparse.Namespace) -> int:
    from . import speech_suite

    timing.require_release_build()
    settings = speech_suite.SpeechSettings(
        batch_sizes=args.batch_sizes or list(SPEECH_BATCH_SIZES),
        repeat=args.repeat or (QUICK_REPEAT if args.quick else REPEAT),
    )
    results = speech_suite.run(settings, progress=_note)
    print()
    print(speech_suite.header())
    print(speech_suite.format_table(results))
    if args.json is not None:
        record = {
            "environment": report.environment(),
            "arguments": {"quick": args.quick, "cases": [SPEECH],
                          **dataclasses.asdict(settings)},
            "results": [r.as_dict() for r in results],
        }
        report.write_json(record, args.json)
        _note(f"figures written to {args.json}")
    return 0


def run_samplers(args: argparse.Namespace) -> int:
    defaults = sampling.SamplingSettings()
    with_transformers = not args.no_transformers
    if with_transformers:
        try:
            require("timing transformers' samplers", "transformers", "transformers")
        except ImportError as err:
            _note(f"note: {err}; timing fastcollate's samplers only")
            with_transformers = False
    settings = sampling.SamplingSettings(
        rows=args.rows or (sampling.QUICK_ROWS if args.quick else defaults.rows),
        batch_size=args.batch_sizes[0] if args.batch_sizes else defaults.batch_size,
        grad_accum=args.grad_accum or defaults.grad_accum,
        world_size=args.world_size or defaults.world_size,
        max_tokens=args.max_tokens or defaults.max_tokens,
        with_transformers=with_transformers,
    )
    results = sampling.run(settings, progress=_note)
    print(sampling.format_table(results, settings))
    if args.json is not None:
        record = sampling.as_json(results, settings, report.environment())
        report.write_json(record, args.json)
        _note(f"figures written to {args.json}")
    if args.plot is not None:
        sampling.plot(results, args.plot)
        _note(f"plot written to {args.plot}")
    return 0


def run_bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Runs what `bench`'s parsed arguments ask for and returns the exit code: 2 (via
    `parser.error`) for a usage error, 1 for a BenchError (missing extras, debug build,
    fastcollate disagreeing with transformers), else 0."""
    validate(parser, args)
    try:
        _require_extras(args)
        if args.sampling:
            return run_samplers(args)
        if args.cases == [SPEECH]:
            return run_speech(args)
        return run_trl(args) if args.cases == [TRL] else run_collators(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m fastcollate ...`."""
    args = build_parser().parse_args(argv)
    return args.handler(args)


def bench_main(argv: Sequence[str] | None = None, prog: str = "python -m fastcollate bench") -> int:
    """`bench` alone, for scripts such as benches/bench_collate.py."""
    parser = add_bench_arguments(argparse.ArgumentParser(prog=prog))
    return run_bench(parser, parser.parse_args(argv))
