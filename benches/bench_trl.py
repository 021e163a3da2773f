"""TRL against fastcollate in one process on the same input: every collator at batch 8 and 32,
SFT dataset preparation and `pack_dataset`. The same as `python -m fastcollate bench --cases
trl` (see `fastcollate/bench/trl_suite.py` for what each case is); takes that command's
options.

    python benches/bench_trl.py [--quick] [--batch-sizes 8,32] [--repeat 5] [--json FILE]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fastcollate.bench.cli import bench_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(bench_main(["--cases", "trl", *sys.argv[1:]], prog="benches/bench_trl.py"))
