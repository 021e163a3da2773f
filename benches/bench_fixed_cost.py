"""The fixed cost of one collator call: everything but the native call.

`DataCollatorWithPadding` is timed twice on the same batch: as it is, and with its native work
replaced by a stub that hands back a prepared output (the same keys, already tensors or arrays,
as the native call gives them: a fresh copy of it). For a call plan's call the stub stands in
for the plan's `_native.PlannedCall`, whose one call makes the plan's checks (fields, tokenizer
state, default dtype, the rows' kind) and the collation; for a call without a plan, for the
native `collate` that `pad` calls. The stubbed time, less the stub's own, is what a call costs
in Python around the native work: the DataLoader-worker hand-over check and the call's own
lines, or, without a plan, settings, checks and the container Python makes.
Beside it, the same for a collator that never keeps a call plan (every call resolves its
options through `pad`, as before the plan existed), timed in alternating rounds with it.

A second table splits a planned call's native work: the plan's checks alone, the collation
alone (`collate_planned`), the floor (the benchmark's `PadFloor`: every value read once and
padded into reused buffers) and the floor with outputs (the same, then each output a fresh
buffer handed out as the planned call hands its batch out: tensors or arrays in a
BatchEncoding). A call can cost no less than its floor with outputs; what it costs beyond it
is the call's own overhead (checks, set-up, the Python layer).

A third table shows what the same batches cost through torch's Python API: one
`torch.from_numpy` per output key (made and released), and for rows of tensors, reading them:
one `torch.cat` of the rows' padded keys and its `numpy()`, or the six attribute reads per
tensor (CPU, rank, dtype, contiguity, negation bit, data pointer) that reading each in place
takes; both with a `tolist()` per 0-d label tensor. These are the routes fastcollate takes with
a torch that has no DLPack exchange table (`torch.Tensor.__dlpack_c_exchange_api__`); with the
table (torch 2.15 here) it makes and reads each tensor with one C call instead, which is why a
whole call can cost less than this table's figures.

    python benches/bench_fixed_cost.py [--batch-sizes 1,8,32] [--formats lists,numpy,torch]
        [--repeat 30] [--number 300] [--json FILE]

Needs a release build (`pip install .`), transformers and torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit

import numpy as np

import fastcollate
from fastcollate._internal.main_input import UNUSUAL, usual_main_input_kind
from fastcollate._native import collate_planned as native_collate_planned
from fastcollate.bench import report, workload
from fastcollate.bench.floor import Floor, with_padding_keys
from fastcollate.collators import native as native_entry


def fresh_copy(output: object) -> object:
    """A new container holding the same values: a dict, or a BatchEncoding."""
    if type(output) is dict:
        return dict(output)
    fresh = type(output).__new__(type(output))  # a new BatchEncoding holding the same values
    fresh.__dict__.update(output.__dict__)
    return fresh


class StubbedNative:
    """Stands in for `fastcollate._native` inside the collators' native entry: `collate`
    returns a fresh copy of one prepared output."""

    def __init__(self, real, output: dict):
        self._real = real
        self._output = output

    def collate(self, *args, **kwargs):
        return dict(self._output)

    def __getattr__(self, name):
        return getattr(self._real, name)


class StubbedCall:
    """Stands in for a call plan's `_native.PlannedCall`: `rows` returns a fresh copy of what
    the real one gave (a BatchEncoding it finished, or a dict)."""

    def __init__(self, real, output: object):
        self._real = real
        self._output = output

    def rows(self, collator, features):
        return fresh_copy(self._output)

    def holds(self, collator):
        return self._real.holds(collator)


class UnplannedCollator(fastcollate.DataCollatorWithPadding):
    """A DataCollatorWithPadding that settles nothing for later calls: each goes through `pad`."""

    def _plan_next_call(self) -> None:
        pass


def best_of(function, number: int, repeat: int) -> float:
    """Microseconds per call: the fastest of `repeat` runs of `number` calls."""
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def alternating(functions: list, number: int, repeat: int) -> list[float]:
    """`best_of` for each function, in `repeat` rounds of one run each (so that a busy spell
    on the machine costs them alike)."""
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, function in enumerate(functions):
            best[index] = min(best[index], best_of(function, number, 1))
    return best


def measure(collators: list, batch: list, real, number: int, repeat: int) -> list[float]:
    """[the call, then per collator: the call with its native work stubbed], and the stub
    alone, in µs. `collators[0]` keeps a call plan, `collators[1]` does not."""
    whole = best_of(lambda: collators[0](batch), number, repeat)
    # What the native `collate` returns for this batch (tensors under "pt"), recorded once.
    recorded: dict = {}

    def record(*call_args, **call_kwargs):
        out = real.collate(*call_args, **call_kwargs)
        recorded.update(out)
        return out

    recording = StubbedNative(real, {})
    recording.collate = record
    native_entry._native = recording
    planned = collators[0]
    try:
        for collator in collators:
            collator(batch)
            collator(batch)  # the second call is the first one a call plan can serve
        plan = planned._call_plan
        if plan is None:
            raise SystemExit("error: the collator settled no call plan for these rows")
        real_call = plan.call
        output = real_call.rows(planned, batch)
        if output is None:
            raise SystemExit("error: the call plan does not serve these rows")
        stub = StubbedCall(real_call, output)
        plan.call = stub
        native_entry._native = StubbedNative(real, recorded)
        stubbed = alternating(
            [lambda collator=collator: collator(batch) for collator in collators], number, repeat
        )
        alone = best_of(lambda: stub.rows(planned, batch), number, repeat)
    finally:
        native_entry._native = real
        planned._call_plan = None  # settled again, with its real native call, next time
    return [whole, *stubbed, alone]


def torch_floor(batch: list, output_keys: int, number: int, repeat: int) -> tuple:
    """(µs for `output_keys` `torch.from_numpy` calls, µs for one torch.cat + numpy() of the
    rows' tensors or None, µs for reading each of them in place or None)."""
    import torch

    arrays = [np.zeros((len(batch), 8), dtype=np.int64) for _ in range(output_keys)]

    def outputs():
        for array in arrays:
            torch.from_numpy(array)

    made = best_of(outputs, number, repeat)
    values = [v for row in batch for v in row.values() if isinstance(v, torch.Tensor)]
    tensors = tuple(value for value in values if value.dim() == 1)
    scalars = [value for value in values if value.dim() == 0]  # labels: one tolist() each
    if not tensors:
        return made, None, None

    def concatenate():
        torch.cat(tensors).numpy()
        for t in scalars:
            t.tolist()

    def read_each():
        for t in tensors:
            t.is_cpu, t.ndim, t.dtype, t.is_contiguous(), t.is_neg(), t.data_ptr()
        for t in scalars:
            t.tolist()

    return made, best_of(concatenate, number, repeat), best_of(read_each, number, repeat)


def native_parts(collator, batch: list, tokenizer, number: int, repeat: int) -> list[float]:
    """A planned call's native work in parts, µs: [the whole call, the plan's checks alone
    (`PlannedCall.holds`), the collation alone (`collate_planned` with the plan's collate
    plan for these rows), the floor (`PadFloor.pad`: read and pad into reused buffers), the
    floor with outputs (`PadFloor.pad_handed_out`: the same, then fresh buffers handed out
    as the planned call hands its out)], timed in alternating rounds."""
    collator(batch)
    collator(batch)
    plan = collator._call_plan
    if plan is None:
        raise SystemExit("error: the collator settled no call plan for these rows")
    kind = usual_main_input_kind(batch[0][plan.main])
    collate_plan = plan.native_plans[None if kind == UNUSUAL else kind]
    keys = with_padding_keys(tokenizer)
    # The rows as they are (tensors too: the sound route's floor, see `bench.floor`).
    floor = Floor(keys, [batch], through_torch=True)
    handed = floor.native.pad_handed_out(batch, collate_plan)
    ours = collator(batch)
    if set(handed.keys()) != set(ours.keys()) or any(
        not np.array_equal(np.asarray(handed[key]), np.asarray(ours[key])) for key in ours
    ):
        raise SystemExit("error: the floor's outputs are not the call's")
    return alternating(
        [
            lambda: collator(batch),
            lambda: plan.call.holds(collator),
            lambda: native_collate_planned(batch, collate_plan),
            lambda: floor.native.pad(batch),
            lambda: floor.native.pad_handed_out(batch, collate_plan),
        ],
        number,
        repeat,
    )


def batches(rows: list, formats: str, batch_sizes: str):
    """(format, batch size, batch) for every configuration, in the order the tables list them."""
    for fmt in formats.split(","):
        formatted = workload.as_format(rows, fmt)
        for batch_size in map(int, batch_sizes.split(",")):
            yield fmt, batch_size, formatted[:batch_size]


def table_row(records: list, cells: list[str], **figures) -> None:
    """Prints one row of a table (`cells`) and records its figures."""
    print("| " + " | ".join(cells) + " |", flush=True)
    records.append(figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="1,8,32", help="(default: %(default)s)")
    parser.add_argument(
        "--formats", default="lists,numpy,torch,torch-format", help="(default: %(default)s)"
    )
    parser.add_argument("--repeat", type=int, default=30, help="(default: %(default)s)")
    parser.add_argument(
        "--number", type=int, default=300, help="calls per timed run (default: %(default)s)"
    )
    parser.add_argument("--json", help="also write every figure (µs) to this file")
    args = parser.parse_args(argv)
    if fastcollate.build_profile != "release":
        print(f"error: fastcollate is a {fastcollate.build_profile} build", file=sys.stderr)
        return 1
    record: dict = {"fixed_cost": [], "native_parts": [], "through_torch_api": []}
    tokenizer = workload.bert_tokenizer()
    rows = workload.classification_rows(np.random.default_rng(workload.SEED), 64)
    collators = [
        fastcollate.DataCollatorWithPadding(tokenizer),
        UnplannedCollator(tokenizer),
    ]
    real = native_entry._native
    print(f"fastcollate {fastcollate.__version__}, CPython {sys.version.split()[0]}")
    print(
        "| rows | batch | call µs | stubbed µs | stub alone µs | fixed cost µs "
        "| fixed cost without the call plan µs |"
    )
    print("|---|---|---|---|---|---|---|")
    configurations = list(batches(rows, args.formats, args.batch_sizes))
    for fmt, batch_size, batch in configurations:
        whole, stubbed, unplanned, alone = measure(collators, batch, real, args.number,
                                                   args.repeat)
        table_row(record["fixed_cost"],
                  [fmt, str(batch_size), f"{whole:.1f}", f"{stubbed:.2f}", f"{alone:.2f}",
                   f"**{stubbed - alone:.2f}**", f"{unplanned - alone:.2f}"],
                  rows=fmt, batch=batch_size, call=whole, stubbed=stubbed, stub_alone=alone,
                  unplanned_stubbed=unplanned)
    print()
    print("a planned call's native work in parts (the floor with outputs copies each value once "
          "more than a call: it shows where rows are long)")
    print("| rows | batch | call µs | checks µs | collation µs | floor µs "
          "| floor with outputs µs | call - floor with outputs µs |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, batch_size, batch in configurations:
        call, checks, collation, floor, handed = native_parts(collators[0], batch, tokenizer,
                                                              args.number, args.repeat)
        table_row(record["native_parts"],
                  [fmt, str(batch_size), *(f"{v:.2f}" for v in (call, checks, collation, floor,
                                                                 handed)),
                   f"**{call - handed:.2f}**"],
                  rows=fmt, batch=batch_size, call=call, checks=checks, collation=collation,
                  floor=floor, floor_with_outputs=handed)
    print()
    print("the same batches through torch's Python API (fastcollate's routes without torch's "
          "DLPack exchange table)")
    print("| rows | batch | output tensors | from_numpy per output µs | torch.cat + numpy() µs "
          "| read each tensor in place µs |")
    print("|---|---|---|---|---|---|")
    for fmt, batch_size, batch in configurations:
        keys = len(collators[0](batch))
        made, concatenated, each = torch_floor(batch, keys, args.number, args.repeat)
        shown = ["-" if v is None else f"{v:.2f}" for v in (concatenated, each)]
        table_row(record["through_torch_api"],
                  [fmt, str(batch_size), str(keys), f"{made:.2f}", *shown],
                  rows=fmt, batch=batch_size, output_tensors=keys, from_numpy=made,
                  cat_numpy=concatenated, read_each=each)
    if args.json:
        # The command line, the machine and its load when the run ended.
        record["environment"] = report.environment()
        with open(args.json, "w") as out:
            json.dump(record, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
