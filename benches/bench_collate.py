"""fastcollate's collators against transformers' and hand-written baselines, ms per batch.

The same benchmark as `python -m fastcollate bench` (see `fastcollate/_bench.py`: the workload,
the baselines, the correctness check before timing), plus `--json PATH` to keep the results.

    python benches/bench_collate.py [--batch-sizes 8,32,128,512] [--formats lists,numpy,torch]
                                    [--repeat N] [--quick] [--cases NAME,...] [--json PATH]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import json
import sys

from fastcollate import _bench


def main(argv: list[str] | None = None) -> int:
    parser = _bench.build_parser()
    parser.prog = "benches/bench_collate.py"
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    code, results, repeat = _bench.run_and_print(args)
    if code == 0 and args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "machine": _bench.machine_description(),
                    "repeat": repeat,
                    "results": [r.as_dict() for r in results],
                },
                f,
                indent=2,
            )
    return code


if __name__ == "__main__":
    sys.exit(main())
