"""`python -m fastcollate bench ...`: see `fastcollate._bench`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """The command line: `--version`, and `bench` (fastcollate against transformers)."""
    from . import __version__, _bench, _bench_sampling, build_profile

    parser = argparse.ArgumentParser(
        prog="python -m fastcollate",
        description="fastcollate: drop-in, Rust-fast data collators for transformers.",
    )
    parser.add_argument(
        "--version", action="version", version=f"fastcollate {__version__} ({build_profile} build)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = commands.add_parser("bench", help="time fastcollate against transformers' collators")
    _bench.build_parser(bench)
    _bench_sampling.add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "bench" and args.sampling:
        return _bench_sampling.run_from_args(args)
    if args.command == "bench":
        return _bench.run_and_print(args)[0]
    return 0


if __name__ == "__main__":
    sys.exit(main())
