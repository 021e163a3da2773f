"""What handing the outputs out through a provider's buffers costs against padding, then copying.

`pin_memory=True` allocates each output with `torch.empty(..., pin_memory=True)` once its
size is known (`_native.collate`'s `output_buffer`), and the native module copies each padded
output into it, with no Python code between the first pointer and the last write (a provider's
buffer is memory Python can move, so it is not padded into while rows are read). The other way
to pinned output pads into Rust memory and then copies every tensor into the pinned allocator
(`Tensor.pin_memory()`), the copy `DataLoader(pin_memory=True)` makes. Both copy once; this
script times, per batch of IMDB-like classification rows (input_ids, token_type_ids,
attention_mask, label):

- `owned`: the native collation alone, outputs in Rust buffers (no pinning; the floor);
- `pad_then_copy`: the same, then each tensor copied into a fresh buffer of the same memory
  kind (`Tensor.pin_memory()` where pinned; `torch.empty_like(t).copy_(t)` otherwise);
- `provider`: the native collation, its outputs copied into buffers a provider allocates.

With CUDA the buffers are pinned (`--memory pinned`, the default there); without it they are
ordinary memory (`--memory ordinary`), which times the same copy and allocation pattern minus
page locking. Every route's output is checked equal first. Methods take turns within each
repeat, so load from elsewhere weighs on all of them; on a shared machine the figures are
noisy all the same.

    python benches/bench_pinned_output.py --json pinned_output.json
    python benches/bench_pinned_output.py --batch-sizes 32,128 --formats lists,numpy --repeat 15

Needs a release build, torch.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import fastcollate
from fastcollate import _native
from fastcollate.bench import report, timing, workload

GROUP = _native.PadGroup(
    "input_ids",
    pad_value=0,
    followers=[("token_type_ids", 0, True)],
    attention_mask="attention_mask",
)


def collate(rows, **options):
    return _native.collate(rows, [GROUP], float32=True, to_tensor=torch.from_numpy, **options)


def routes(pinned: bool) -> dict:
    def provider(key, shape, dtype):
        return torch.empty(shape, dtype=getattr(torch, dtype), pin_memory=pinned)

    def copy(tensor):
        return tensor.pin_memory() if pinned else torch.empty_like(tensor).copy_(tensor)

    def pad_then_copy(rows):
        return {key: copy(value) for key, value in collate(rows).items()}

    return {
        "owned": collate,
        "pad_then_copy": pad_then_copy,
        "provider": lambda rows: collate(rows, output_buffer=provider),
    }


def check_same(methods: dict, batch: list) -> int:
    """Asserts every route gives the same batch; the output's size in bytes."""
    expected = methods["owned"](batch)
    for name, method in methods.items():
        got = method(batch)
        assert list(got) == list(expected), name
        for key, value in expected.items():
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), (name, key)
    return sum(value.numel() * value.element_size() for value in expected.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="32,128")
    parser.add_argument("--formats", default="lists,numpy")
    parser.add_argument("--memory", choices=("pinned", "ordinary"),
                        default="pinned" if torch.cuda.is_available() else "ordinary")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--min-seconds", type=float, default=0.05)
    parser.add_argument("--json", metavar="FILE", help="write the record as JSON")
    args = parser.parse_args(argv)
    timing.require_release_build()
    torch.set_num_threads(1)
    pinned = args.memory == "pinned"
    if pinned and not torch.cuda.is_available():
        parser.error("--memory pinned needs CUDA")
    methods = routes(pinned)
    rng = np.random.default_rng(workload.SEED)
    results = []
    print(f"{args.memory} memory; median µs per batch over {args.repeat} repeats")
    print(f"{'format':8} {'batch':>5} {'KiB':>6} {'owned':>9} {'pad+copy':>9} {'provider':>9} "
          f"{'saved':>8} {'ratio':>6}")
    for batch_size in [int(n) for n in args.batch_sizes.split(",")]:
        pool = [workload.classification_rows(rng, batch_size)
                for _ in range(timing.CACHED_BATCHES)]
        for fmt in args.formats.split(","):
            batches = [workload.as_format(rows, fmt) for rows in pool]
            nbytes = check_same(methods, batches[0])
            seconds, _spread = timing.time_methods(methods, batches, args.repeat, args.min_seconds)
            saved = seconds["pad_then_copy"] - seconds["provider"]
            ratio = seconds["provider"] / seconds["pad_then_copy"]
            results.append({
                "format": fmt,
                "batch_size": batch_size,
                "output_bytes": nbytes,
                "seconds": seconds,
                "saved_seconds": saved,
                "provider_over_pad_then_copy": ratio,
            })
            us = {name: value * 1e6 for name, value in seconds.items()}
            print(f"{fmt:8} {batch_size:5} {nbytes / 1024:6.0f} {us['owned']:9.1f} "
                  f"{us['pad_then_copy']:9.1f} {us['provider']:9.1f} {saved * 1e6:8.1f} "
                  f"{ratio:6.2f}")
    if args.json:
        env = report.environment()
        env["memory"] = args.memory
        env["cuda"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        record = {
            "environment": env,
            "settings": {"repeat": args.repeat, "min_seconds": args.min_seconds,
                         "torch_threads": 1, "seed": workload.SEED,
                         "fastcollate": fastcollate.__version__},
            "results": results,
        }
        report.write_json(record, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
