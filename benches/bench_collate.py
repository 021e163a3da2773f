"""fastcollate's collators against transformers' and hand-written baselines, ms per batch.

The same benchmark as `python -m fastcollate bench`, with the same options (see
`fastcollate/bench/`: the workload, the baselines, the correctness check before timing):

    python benches/bench_collate.py [--batch-sizes 8,32,128,512] [--formats lists,numpy,torch]
                                    [--repeat N] [--quick] [--cases NAME,...] [--json FILE]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import sys

from fastcollate.bench.cli import bench_main

if __name__ == "__main__":
    sys.exit(bench_main(prog="benches/bench_collate.py"))
